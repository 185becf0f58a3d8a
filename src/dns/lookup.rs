//! Finding the answer to a question in a [`Snapshot`]: the general path.
//!
//! Handles everything: wildcards (RFC 4592), CNAME chains across served
//! zones, NXDOMAIN and NODATA with the SOA in authority, REFUSED outside
//! served zones, ANY. The fast path (`fast`) answers the common questions
//! from the same snapshot; a differential test keeps the two in agreement.

use hickory_server::proto::{
    op::ResponseCode,
    rr::{Name, RData, Record, RecordType as Rt},
};

use super::snapshot::{Client, Draw, Node, Snapshot, choose, wire_key};
use crate::geo::Geo;

/// The content of a response.
#[derive(Debug, Default)]
pub struct Resolved {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    /// ECS scope prefix the answer depended on.
    pub scope: u8,
}

const MAX_CNAME_HOPS: usize = 8;

pub fn lookup(
    snap: &Snapshot,
    geo: &Geo,
    qname: &Name,
    qtype: Rt,
    client: &Client,
    draw: &mut Draw,
) -> Resolved {
    let mut out = Resolved::default();
    let mut name = qname.to_lowercase();
    for _ in 0..=MAX_CNAME_HOPS {
        let Some(zone) = snap.zone_of(&name) else {
            // Outside our zones: REFUSED for the question itself; a CNAME
            // leading out is answered as far as we know it.
            if out.answers.is_empty() {
                out.rcode = ResponseCode::Refused;
            }
            return out;
        };
        let (node, wildcard) = match find(snap, &name, snap.zones[zone].apex_labels) {
            Some(found) => found,
            None => {
                out.rcode = ResponseCode::NXDomain;
                out.authority.push(snap.zones[zone].negative_soa.clone());
                return out;
            }
        };
        let owner = |r: &Record| -> Record {
            let mut r = r.clone();
            if wildcard {
                r.name = name.clone();
            }
            r
        };
        let mut add = |out: &mut Resolved, rtype: Rt| -> Option<usize> {
            let slot = node.rrsets.iter().find(|s| s.rtype == rtype)?;
            let answer = slot.answer.load();
            let choice = choose(&answer, geo, client, draw);
            out.scope = out.scope.max(choice.scope);
            let group = &answer.groups[choice.group];
            if !group.records.is_empty() {
                slot.count(group, choice.variant);
            }
            let before = out.answers.len();
            out.answers.extend(group.variant(choice.variant).map(owner));
            Some(out.answers.len() - before)
        };
        if qtype == Rt::ANY {
            for rtype in node.rrsets.iter().map(|s| s.rtype).collect::<Vec<_>>() {
                add(&mut out, rtype);
            }
            if out.answers.is_empty() {
                out.authority.push(snap.zones[zone].negative_soa.clone());
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
                        out.authority.push(snap.zones[zone].negative_soa.clone());
                        return out;
                    }
                }
            }
            Some(n) if n > 0 => return out,
            _ => {
                // NODATA, or a steered record answering empty.
                out.authority.push(snap.zones[zone].negative_soa.clone());
                return out;
            }
        }
    }
    out
}

/// The node answering `name`: itself, or the wildcard of its closest
/// encloser (RFC 4592). `true` when it came from a wildcard.
fn find<'s>(snap: &'s Snapshot, name: &Name, apex_labels: usize) -> Option<(&'s Node, bool)> {
    if let Some(node) = snap.node(&wire_key(name)) {
        return Some((node, false));
    }
    let labels = name.iter().count();
    for n in (apex_labels..labels).rev() {
        let ancestor = name.trim_to(n);
        if snap.node(&wire_key(&ancestor)).is_some() {
            let wildcard = ancestor.prepend_label("*").ok()?;
            return snap.node(&wire_key(&wildcard)).map(|node| (node, true));
        }
    }
    None
}
