//! The zone as a secondary gets it (docs/transfer.md): the SOA first, then
//! every other record in canonical name order (static records whole,
//! steered ones as their default group's first variant: the answer of a
//! client of no particular place; an empty answer has no records).
//!
//! In a signed zone, each RRset goes with the RRSIG the snapshot made for
//! exactly those records, and the names that hold records are chained by
//! NSEC records (RFC 4034 §4), each signed: a secondary cannot sign, so it
//! needs a chain to deny names and types. The online answers use compact
//! denial instead (docs/dnssec.md); the chain exists only in transfers.
//! Its signatures are kept from one view to the next ([`NsecCache`]) and
//! made again only for a name whose NSEC changed, or for a new key or
//! signing window: a health change re-signs nothing here.

use std::collections::HashMap;

use hickory_server::proto::{
    dnssec::rdata::{DNSSECRData, NSEC},
    rr::{Name, RData, Record, RecordType},
    serialize::binary::BinEncodable,
};

use crate::dnssec::signer::{SignError, ZoneSigner};
use crate::snapshot::Snapshot;
use gtm_model::names::wire_key;

/// The NSEC chain's signatures of one zone, kept between views.
#[derive(Debug, Default)]
pub struct NsecCache {
    /// The key and window they were made with.
    made_by: Option<(u16, u64, Vec<u8>)>,
    /// Per name: its NSEC and the NSEC's RRSIG.
    sigs: HashMap<Name, (Record, Record)>,
}

/// The records of zone `zone` (its index in the snapshot) as transferred:
/// the SOA first, then the rest in canonical order. The closing SOA is the
/// transfer's to add. Fails when an RRSIG cannot be made.
pub fn view(
    snapshot: &Snapshot,
    zone: usize,
    cache: &mut NsecCache,
) -> Result<Vec<Record>, SignError> {
    let Some(data) = snapshot.zones.get(zone) else {
        return Ok(Vec::new());
    };
    let signer = data.signer.as_deref();
    let mut nodes: Vec<_> = snapshot.zone_nodes(zone).collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    // Per name with records: its types and its records (RRSIGs included).
    let mut names: Vec<(Name, Vec<RecordType>, Vec<Record>)> = Vec::with_capacity(nodes.len());
    let mut soa: Vec<Record> = Vec::new();
    // Names below a delegation (glue): sent, unsigned and out of the NSEC
    // chain, which covers the zone's own names (RFC 4035 §2.3).
    let mut glue: Vec<Record> = Vec::new();
    for (name, node) in nodes {
        let cut = data.spec.cut_of(&wire_key(&name)).map(|c| c.len());
        let below_cut = cut.is_some_and(|len| len < wire_key(&name).len());
        let mut types = Vec::new();
        let mut records = Vec::new();
        for slot in &node.rrsets {
            let answer = slot.answer.load();
            let Some(group) = answer.groups.get(answer.default_group()) else {
                continue;
            };
            let rrset: Vec<Record> = group.variant(&name, 0).collect();
            if rrset.is_empty() {
                continue;
            }
            // A delegation's NS set is the child's, never signed here.
            let unsigned = below_cut || (cut.is_some() && slot.rtype == RecordType::NS);
            // An alias's records carry its target's signature: signed anew.
            let alias = !data.spec.aliased.is_empty()
                && data.spec.is_alias(
                    &wire_key(&name),
                    gtm_model::config::RecordType::from_code(u16::from(slot.rtype)),
                );
            let sig = match (signer, group.sigs().first()) {
                (None, _) => Vec::new(),
                (Some(_), _) if unsigned => Vec::new(),
                (Some(s), _) if alias => vec![s.sign(&rrset)?],
                (Some(_), Some(signed)) => signed.records.clone(),
                (Some(s), None) => vec![s.sign(&rrset)?],
            };
            types.push(slot.rtype);
            let into = if slot.rtype == RecordType::SOA {
                &mut soa
            } else {
                &mut records
            };
            into.extend(rrset);
            into.extend(sig);
        }
        if below_cut {
            glue.extend(records);
        } else if !types.is_empty() {
            names.push((name, types, records));
        }
    }
    let mut out = soa;
    let chain = match signer {
        Some(s) => nsec_chain(s, &names, data.negative_soa.ttl, cache)?,
        None => Vec::new(),
    };
    let mut chain = chain.into_iter();
    for (_, _, records) in names {
        out.extend(records);
        if let Some((nsec, sig)) = chain.next() {
            out.push(nsec);
            out.push(sig);
        }
    }
    out.extend(glue);
    Ok(out)
}

/// The NSEC (and its RRSIG) of each name, in the order of `names`: each
/// names the next one (the last the apex, the first) and the types it has.
fn nsec_chain(
    signer: &ZoneSigner,
    names: &[(Name, Vec<RecordType>, Vec<Record>)],
    ttl: u32,
    cache: &mut NsecCache,
) -> Result<Vec<(Record, Record)>, SignError> {
    let published = signer.published();
    let key = (
        published.tag,
        signer.window,
        RData::DNSSEC(DNSSECRData::DNSKEY(published.dnskey.clone()))
            .to_bytes()
            .unwrap_or_default(),
    );
    let mut old = std::mem::take(&mut cache.sigs);
    if cache.made_by.as_ref() != Some(&key) {
        old.clear();
        cache.made_by = Some(key);
    }
    let mut out = Vec::with_capacity(names.len());
    for (i, (owner, types, _)) in names.iter().enumerate() {
        let next = names
            .get(i + 1)
            .or(names.first())
            .map_or_else(|| owner.clone(), |n| n.0.clone());
        let nsec = Record::from_rdata(
            owner.clone(),
            ttl,
            RData::DNSSEC(DNSSECRData::NSEC(NSEC::new_cover_self(
                next,
                types.iter().copied(),
            ))),
        );
        let sig = match old.remove(owner) {
            Some((kept, sig)) if kept == nsec => sig,
            _ => signer.sign(std::slice::from_ref(&nsec))?,
        };
        cache
            .sigs
            .insert(owner.clone(), (nsec.clone(), sig.clone()));
        out.push((nsec, sig));
    }
    Ok(out)
}
