//! Finding the answer to a question in a [`Snapshot`]: the general path.
//!
//! Handles everything: wildcards (RFC 4592), CNAME chains across served
//! zones, NXDOMAIN and NODATA with the SOA in authority, REFUSED outside
//! served zones, ANY (one RRset, RFC 8482), referrals to delegated names
//! (`referral`). The fast path (`fast`) answers the common questions from
//! the same snapshot; a differential test keeps the two in agreement.
//!
//! In a signed zone, asked with DO: each RRset answered comes with its
//! RRSIG (made with the snapshot), and a negative answer with its proof
//! (RFC 9824 compact denial: a name that does not exist is answered as a
//! name with no data, rcode NOERROR, its NSEC listing NXNAME). What cannot
//! be made in advance is signed here: the NSEC of a name that does not
//! exist, a wildcard's expansion, a steered record answering empty.

use hickory_server::proto::{
    op::ResponseCode,
    rr::{Name, RData, RecordType as Rt},
};

use std::sync::Arc;

use super::dnstap::{Note, Steered};
use super::ede::Ede;
use super::referral::{Asker, refer};
use super::resolved::Resolved;
use super::snapshot::{Client, Draw, Node, Snapshot, ZoneData, choose};
use crate::dnssec::signer::NXNAME;
use gtm_geo::Geo;
use gtm_model::names::wire_key;

const MAX_CNAME_HOPS: usize = 8;

/// `dnssec_ok`: the query's DO bit. The first steered record answered is
/// noted in `note` (dnstap; `()` notes nothing).
#[expect(clippy::too_many_arguments, reason = "a query's parts, each its own")]
pub fn lookup(
    snap: &Arc<Snapshot>,
    geo: &Geo,
    qname: &Name,
    qtype: Rt,
    client: &Client,
    draw: &mut Draw,
    dnssec_ok: bool,
    note: &mut impl Note,
) -> Resolved {
    let mut out = Resolved::default();
    let mut name = qname.to_lowercase();
    let mut view = None;
    for _ in 0..=MAX_CNAME_HOPS {
        let Some(zone) = snap.zone_for(&wire_key(&name), &mut view, || snap.view_of(geo, client))
        else {
            // Outside our zones: REFUSED for the question itself; a CNAME
            // leading out is answered as far as we know it.
            if out.answers.is_empty() {
                out.rcode = ResponseCode::Refused;
                out.ede = Some(Ede::NotAuthoritative);
            }
            return out;
        };
        let zone_index = zone;
        let zone = &snap.zones[zone];
        if let (true, Some((_, scope))) = (zone.viewed, view) {
            out.scope = out.scope.max(scope);
        }
        let signed = dnssec_ok && zone.signer.is_some();
        if !zone.spec.cuts.is_empty() {
            let key = wire_key(&name);
            // A delegated name is referred, but for the delegation's own
            // DS; a CNAME chain leading there ends with its CNAME.
            if let Some(cut) = zone.spec.cut_of(&key)
                && !(qtype == Rt::DS && *cut == *key)
            {
                if out.answers.is_empty() {
                    let mut ask = Asker {
                        snap,
                        geo,
                        client,
                        draw,
                    };
                    refer(&mut out, zone, cut, signed, &mut ask);
                }
                return out;
            }
        }
        let (node, wildcard) = match find(zone, &name) {
            Some(found) => found,
            None => {
                if signed {
                    // Compact denial: NOERROR, and the name's NSEC says it
                    // has nothing (NXNAME).
                    deny(&mut out, zone, &name, &[NXNAME]);
                } else {
                    out.rcode = ResponseCode::NXDomain;
                    out.authority.push(zone.negative_soa.clone());
                }
                return out;
            }
        };
        let mut add = |out: &mut Resolved, rtype: Rt| -> Option<usize> {
            let slot = node.rrsets.iter().find(|s| s.rtype == rtype)?;
            let answer = slot.answer.load();
            let choice = choose(&answer, &snap.topology, geo, client, draw);
            out.scope = out.scope.max(choice.scope);
            let group = &answer.groups[choice.group];
            if !group.is_empty() {
                slot.count(group, choice.variant);
                slot.count_rule(choice.rule);
            }
            if group.is_fail_safe() {
                out.ede = Some(Ede::FailSafe);
            }
            if slot.is_steered() {
                note.steered(|| Steered {
                    snapshot: Arc::clone(snap),
                    zone: zone_index,
                    owner: wire_key(&name),
                    rtype: u16::from(rtype),
                    answer: Arc::clone(&answer),
                    choice,
                    client: *client,
                });
            }
            // A wildcard's records take the name asked (RFC 4592 §3.3.1).
            let before = out.answers.len();
            out.answers.extend(group.variant(&name, choice.variant));
            let added = out.answers.len() - before;
            if signed && added > 0 {
                let alias = !zone.spec.aliased.is_empty()
                    && zone.spec.is_alias(
                        &wire_key(&name),
                        gtm_model::config::RecordType::from_code(u16::from(rtype)),
                    );
                if wildcard || alias {
                    // Signed as the name asked: a wildcard's expansion, or
                    // an alias's answer (its target's, signed under the
                    // target's name), is not known in advance.
                    if let Some(sig) = zone
                        .signer
                        .as_ref()
                        .and_then(|s| s.sign(&out.answers[before..]).ok())
                    {
                        out.answers.push(sig);
                    }
                } else if let Some(sig) = group.sigs().get(choice.variant) {
                    out.answers.extend(sig.records.iter().cloned());
                }
            }
            Some(added)
        };
        if qtype == Rt::ANY {
            // RFC 8482 §4.1: one RRset of the name, not all of them.
            if let Some(rtype) = smallest_rrset(snap, geo, node, client) {
                add(&mut out, rtype);
            }
            if out.answers.is_empty() {
                nodata(&mut out, zone, node, &name, wildcard, qtype, signed);
            }
            return out;
        }
        match add(&mut out, qtype) {
            Some(0) | None
                if qtype != Rt::CNAME && node.rrsets.iter().any(|s| s.rtype == Rt::CNAME) =>
            {
                let before = out.answers.len();
                add(&mut out, Rt::CNAME);
                let target = out.answers[before..].iter().find_map(|r| match &r.data {
                    RData::CNAME(c) => Some(c.0.clone()),
                    _ => None,
                });
                match target {
                    Some(t) => name = t.to_lowercase(),
                    None => {
                        nodata(&mut out, zone, node, &name, wildcard, Rt::CNAME, signed);
                        return out;
                    }
                }
            }
            Some(n) if n > 0 => return out,
            _ => {
                // NODATA, or a steered record answering empty.
                nodata(&mut out, zone, node, &name, wildcard, qtype, signed);
                return out;
            }
        }
    }
    out
}

/// The RRset an ANY question at `node` is answered with (RFC 8482 §4.1;
/// docs/decisions.md): the one whose answer to this client takes the
/// fewest bytes, the first of the name's in that case; `None` when every
/// one answers empty. Sized on a draw of its own: a variant of a group
/// holds as many records as another.
fn smallest_rrset(snap: &Snapshot, geo: &Geo, node: &Node, client: &Client) -> Option<Rt> {
    let mut draw = Draw::new(0);
    node.rrsets
        .iter()
        .filter_map(|slot| {
            let answer = slot.answer.load();
            let choice = choose(&answer, &snap.topology, geo, client, &mut draw);
            let (body, count) = answer.groups.get(choice.group)?.wire.get(choice.variant)?;
            (count > 0).then_some((body.len(), slot.rtype))
        })
        .min_by_key(|&(len, _)| len)
        .map(|(_, rtype)| rtype)
}

/// The authority section of a NODATA answer for `name` (found at `node`,
/// itself or its wildcard), and in a signed zone its proof: the node's own,
/// made with the snapshot, unless `qtype` has a record there answering
/// empty now or the answer comes from a wildcard (then made here).
fn nodata(
    out: &mut Resolved,
    zone: &ZoneData,
    node: &Node,
    name: &Name,
    wildcard: bool,
    qtype: Rt,
    signed: bool,
) {
    if !signed {
        out.authority.push(zone.negative_soa.clone());
        return;
    }
    let has_type = node.rrsets.iter().any(|s| s.rtype == qtype);
    match &node.signed_nodata {
        Some(proof) if !wildcard && !has_type && zone.negative_soa_sig.is_some() => {
            out.authority.push(zone.negative_soa.clone());
            out.authority.extend(zone.negative_soa_sig.iter().cloned());
            out.authority.extend(proof.records.iter().cloned());
        }
        _ => {
            let types: Vec<Rt> = node
                .rrsets
                .iter()
                .map(|s| s.rtype)
                .filter(|t| *t != qtype)
                .collect();
            deny(out, zone, name, &types);
        }
    }
}

/// A signed denial made now: SOA, the NSEC of `name` listing `types`, and
/// their RRSIGs; rcode NOERROR. Unsigned (SOA only) if signing fails.
fn deny(out: &mut Resolved, zone: &ZoneData, name: &Name, types: &[Rt]) {
    out.rcode = ResponseCode::NoError;
    let proof = match (&zone.signer, &zone.negative_soa_sig) {
        (Some(signer), Some(soa_sig)) => {
            signer.denial(&zone.negative_soa, soa_sig, name, types).ok()
        }
        _ => None,
    };
    match proof {
        Some(records) => out.authority.extend(records),
        None => out.authority.push(zone.negative_soa.clone()),
    }
}

/// The node answering `name`: itself, or the wildcard of its closest
/// encloser (RFC 4592). `true` when it came from a wildcard.
fn find<'z>(zone: &'z ZoneData, name: &Name) -> Option<(&'z Node, bool)> {
    if let Some(node) = zone.node(&wire_key(name)) {
        return Some((node, false));
    }
    let labels = name.iter().count();
    for n in (zone.apex_labels..labels).rev() {
        let ancestor = name.trim_to(n);
        if zone.node(&wire_key(&ancestor)).is_some() {
            let wildcard = ancestor.prepend_label("*").ok()?;
            return zone.node(&wire_key(&wildcard)).map(|node| (node, true));
        }
    }
    None
}
