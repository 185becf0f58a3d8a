//! The fast path: answers the common UDP query straight from precomputed
//! wire bytes, with no allocation and no lock.
//!
//! It takes a query only when it is plain: one question of class IN for a
//! name that exists, at most an OPT record of EDNS version 0, and a
//! response that fits. Anything else (wildcards, CNAME chains, NXDOMAIN,
//! referrals, errors, truncation) it declines, and the general path answers it. The
//! differential test in `tests/` asks both paths the same questions and
//! requires the same answers.

use std::{net::IpAddr, sync::Arc};

use super::{
    cookies,
    dnstap::{Note, Steered},
    ede,
    handler::DnsState,
    snapshot::{Client, Draw, choose},
    wire::{self, EdnsInfo, OPT_TYPE},
};

const TYPE_ANY: u16 = 255;
const TYPE_AXFR: u16 = 252;
const TYPE_IXFR: u16 = 251;
const TYPE_CNAME: u16 = 5;
const TYPE_RRSIG: u16 = 46;
const TYPE_NSEC: u16 = 47;
/// NXNAME (RFC 9824): a meta-type, FORMERR when asked for.
const TYPE_NXNAME: u16 = 128;

/// Writes the response to `msg` into `out` and returns true, or returns
/// false to leave the query to the general path.
pub fn answer(
    state: &DnsState,
    msg: &[u8],
    src: IpAddr,
    draw: &mut Draw,
    out: &mut Vec<u8>,
) -> bool {
    answer_noted(state, msg, src, draw, out, &mut ())
}

/// [`answer`], noting what decided a steered answer in `note` (dnstap;
/// with `()` nothing is noted and this is [`answer`]).
#[inline]
pub fn answer_noted(
    state: &DnsState,
    msg: &[u8],
    src: IpAddr,
    draw: &mut Draw,
    out: &mut Vec<u8>,
    note: &mut impl Note,
) -> bool {
    if msg.len() < 17 {
        return false;
    }
    let count = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]);
    // QR=0, OPCODE=0, TC=0; one question, nothing but an OPT after it.
    if msg[2] & 0xFA != 0 || count(4) != 1 || count(6) != 0 || count(8) != 0 || count(10) > 1 {
        return false;
    }
    let Ok(q) = wire::question(msg) else {
        return false;
    };
    if q.qclass != 1
        || matches!(
            q.qtype,
            TYPE_ANY | TYPE_AXFR | TYPE_IXFR | OPT_TYPE | TYPE_RRSIG | TYPE_NSEC | TYPE_NXNAME
        )
    {
        return false;
    }
    let edns = if count(10) == 1 {
        match opt_at(msg, q.end) {
            // NSID answers are built by the general path.
            Some(e) if e.version == 0 && !e.nsid => Some(e),
            _ => return false,
        }
    } else if msg.len() != q.end {
        return false;
    } else {
        None
    };

    let snapshot = state.snapshot.load();
    let client = Client {
        src,
        ecs: edns.and_then(|e| e.ecs),
    };
    let mut view = None;
    let Some((zone, node)) = snapshot.find_for(q.name(), &mut view, || {
        snapshot.view_of(&state.geo.load(), &client)
    }) else {
        return false;
    };
    let zone_index = zone;
    let Some(zone) = snapshot.zones.get(zone) else {
        return false;
    };
    // A delegated name gets a referral: the general path makes it.
    if !zone.spec.cuts.is_empty() && zone.spec.cut_of(q.name()).is_some() {
        return false;
    }
    let slot = node.rrsets.iter().find(|s| u16::from(s.rtype) == q.qtype);
    if slot.is_none() && node.rrsets.iter().any(|s| u16::from(s.rtype) == TYPE_CNAME) {
        return false;
    }
    // Signatures when asked for (DO) in a signed zone.
    let signed = edns.is_some_and(|e| e.dnssec_ok) && zone.signer.is_some();
    // An alias's answer is signed per query (the general path).
    if signed
        && !zone.spec.aliased.is_empty()
        && zone
            .spec
            .is_alias(q.name(), gtm_model::config::RecordType::from_code(q.qtype))
    {
        return false;
    }
    // A NODATA body is the node's bytes, then the zone's (serial on).
    let unsigned_nodata = (&*node.nodata_wire, &zone.nodata_tail[..], 0, 1);
    let nodata = || -> Option<(&[u8], &[u8], u16, u16)> {
        if signed {
            let proof = node.signed_nodata.as_ref()?;
            Some((&proof.wire, &[], 0, 4))
        } else {
            Some(unsigned_nodata)
        }
    };
    let answer_guard;
    // The Extended DNS Error of a fail-safe answer, in the OPT (crate::ede).
    let mut ede: &[u8] = &[];
    let mut scope = match (zone.viewed, view) {
        (true, Some((_, scope))) => scope,
        _ => 0,
    };
    // The answer's bytes, the bytes after them (its signature, or a NODATA
    // body's end), and the answer and authority counts.
    let (body, sig, an, ns): (&[u8], &[u8], u16, u16) = match slot {
        Some(slot) => {
            answer_guard = slot.answer.load();
            let geo = state.geo.load();
            let choice = choose(&answer_guard, &snapshot.topology, &geo, &client, draw);
            scope = scope.max(choice.scope);
            let group = &answer_guard.groups[choice.group];
            if group.is_empty() {
                // Signed, its proof must leave this type out: the general
                // path makes it.
                if signed {
                    return false;
                }
                unsigned_nodata
            } else {
                let Some((body, n)) = group.wire.get(choice.variant) else {
                    return false;
                };
                let sig: &[u8] = if signed {
                    match group.sigs().get(choice.variant) {
                        Some(s) => &s.wire,
                        None => return false,
                    }
                } else {
                    &[]
                };
                slot.count(group, choice.variant);
                slot.count_rule(choice.rule);
                if edns.is_some() && group.is_fail_safe() {
                    ede = &ede::FAIL_SAFE_OPTION;
                }
                if slot.is_steered() {
                    note.steered(|| Steered {
                        snapshot: Arc::clone(&snapshot),
                        zone: zone_index,
                        owner: q.name().into(),
                        rtype: q.qtype,
                        answer: Arc::clone(&answer_guard),
                        choice,
                        client,
                    });
                }
                (body, sig, n + u16::from(signed), 0)
            }
        }
        None => match nodata() {
            Some(found) => found,
            None => return false,
        },
    };

    let question = &msg[12..q.end];
    let cookie = edns.and_then(|e| e.cookie);
    let opt_len = edns.map_or(0, |e| {
        11 + e
            .ecs
            .map_or(0, |c| 8 + (c.source_prefix as usize).div_ceil(8))
    }) + ede.len()
        + cookie.map_or(0, |_| cookies::COOKIE_OPTION_LEN);
    let len = 12 + question.len() + body.len() + sig.len() + opt_len;
    // What does not fit goes to the general path, which truncates.
    if len > state.udp_limit(edns.as_ref()) as usize {
        return false;
    }
    let server_cookie = cookie.and_then(|c| Some((c.client, state.cookies.answer(&c, src)?)));
    out.clear();
    out.extend_from_slice(&msg[0..2]);
    // QR, AA, RD copied; CD copied; RCODE NOERROR.
    out.push(0x84 | (msg[2] & 0x01));
    out.push(msg[3] & 0x10);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&an.to_be_bytes());
    out.extend_from_slice(&ns.to_be_bytes());
    out.extend_from_slice(&u16::from(edns.is_some()).to_be_bytes());
    out.extend_from_slice(question);
    out.extend_from_slice(body);
    out.extend_from_slice(sig);
    if let Some(e) = edns {
        wire::push_opt_header(out, state.edns_payload, e.dnssec_ok);
        let rdlen_at = out.len();
        out.extend_from_slice(&[0, 0]);
        if let Some(ecs) = &e.ecs {
            wire::push_ecs(out, ecs, scope);
        }
        out.extend_from_slice(ede);
        if let Some((client, server)) = &server_cookie {
            cookies::push_cookie(out, client, server);
        }
        let rdlen = (out.len() - rdlen_at - 2) as u16;
        out[rdlen_at..rdlen_at + 2].copy_from_slice(&rdlen.to_be_bytes());
    }
    state.metrics.response(q.qtype, 0);
    true
}

/// Reads an OPT record that must fill the message from `at` to its end.
fn opt_at(msg: &[u8], at: usize) -> Option<EdnsInfo> {
    let rest = msg.get(at..)?;
    if rest.len() < 11 || rest[0] != 0 || u16::from_be_bytes([rest[1], rest[2]]) != OPT_TYPE {
        return None;
    }
    let rdlen = u16::from_be_bytes([rest[9], rest[10]]) as usize;
    if rest.len() != 11 + rdlen {
        return None;
    }
    let o = wire::options(&rest[11..]).ok()?;
    Some(EdnsInfo {
        payload: u16::from_be_bytes([rest[3], rest[4]]),
        version: rest[6],
        dnssec_ok: rest[7] & 0x80 != 0,
        ecs: o.ecs,
        nsid: o.nsid,
        cookie: o.cookie,
        keepalive: o.keepalive,
    })
}
