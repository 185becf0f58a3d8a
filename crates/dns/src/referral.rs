//! Referrals (RFC 1034 §4.3.2, RFC 4035 §3.1.4): the answer for a name at
//! or below a delegation, but for the delegation's DS, which the parent
//! answers itself.
//!
//! Not authoritative (AA=0), no answer, the delegation's NS set in
//! authority; in a signed zone asked with DO, its DS with RRSIG or the
//! NSEC that proves there is none (so the child is insecure); and in the
//! additional section the A and AAAA records of the name servers that
//! are names of this zone (glue, and names elsewhere in the zone), each
//! answered as a question for it would be.

use hickory_server::proto::rr::{Name, RData, Record, RecordType as Rt};

use super::{
    resolved::Resolved,
    snapshot::{Client, Draw, Node, Snapshot, ZoneData, choose},
};
use gtm_geo::Geo;
use gtm_model::names::{key_name, wire_key};

/// What a referral's records are chosen with: a steered glue record is
/// answered for its client as any question for it.
pub(super) struct Asker<'a> {
    pub snap: &'a Snapshot,
    pub geo: &'a Geo,
    pub client: &'a Client,
    pub draw: &'a mut Draw,
}

/// Fills `out` with the referral to the delegation at `cut` (lower-case
/// wire form) of `zone`; `signed`: the zone is signed and DO was set.
pub(super) fn refer(
    out: &mut Resolved,
    zone: &ZoneData,
    cut: &[u8],
    signed: bool,
    ask: &mut Asker,
) {
    let Some(node) = zone.node(cut) else {
        return;
    };
    let name = key_name(cut);
    let before = out.authority.len();
    rrset(
        &mut out.authority,
        &mut out.scope,
        node,
        &name,
        Rt::NS,
        false,
        ask,
    );
    let targets: Vec<Name> = out.authority[before..]
        .iter()
        .filter_map(|r| match &r.data {
            RData::NS(ns) => Some(ns.0.to_lowercase()),
            _ => None,
        })
        .collect();
    if signed
        && !rrset(
            &mut out.authority,
            &mut out.scope,
            node,
            &name,
            Rt::DS,
            true,
            ask,
        )
    {
        // No DS: the delegation's NSEC, listing NS and no DS, proves the
        // child insecure.
        if let Some(proof) = &node.signed_nodata {
            out.authority.extend(proof.records.iter().cloned());
        }
    }
    for target in targets {
        // Only names of this zone: anything else the resolver asks for.
        if !zone.apex.zone_of(&target) {
            continue;
        }
        if let Some(at) = zone.node(&wire_key(&target)) {
            for rt in [Rt::A, Rt::AAAA] {
                rrset(
                    &mut out.additional,
                    &mut out.scope,
                    at,
                    &target,
                    rt,
                    false,
                    ask,
                );
            }
        }
    }
    out.referral = true;
}

/// Adds to `to` the records of type `rtype` at `node` (named `name`) as a
/// question for them would be answered, with their RRSIG when `signed`,
/// and the ECS scope they depended on to `scope`; whether there were any.
fn rrset(
    to: &mut Vec<Record>,
    scope: &mut u8,
    node: &Node,
    name: &Name,
    rtype: Rt,
    signed: bool,
    ask: &mut Asker,
) -> bool {
    let Some(slot) = node.rrsets.iter().find(|s| s.rtype == rtype) else {
        return false;
    };
    let answer = slot.answer.load();
    let choice = choose(&answer, &ask.snap.topology, ask.geo, ask.client, ask.draw);
    *scope = (*scope).max(choice.scope);
    let Some(group) = answer.groups.get(choice.group) else {
        return false;
    };
    let before = to.len();
    to.extend(group.variant(name, choice.variant));
    if signed && let Some(sig) = group.sigs().get(choice.variant) {
        to.extend(sig.records.iter().cloned());
    }
    to.len() > before
}
