//! A changed zone built from its build before: when a write replaced,
//! removed or appended a few records, the zone's other names and slots are
//! taken as they are (answers and counters with them) and only the changed
//! records are built, with the apex for its new serial. The result is what a
//! whole build gives; a test builds both and compares them. Signed zones are
//! built whole (their denials chain every name).

use std::{
    collections::{HashMap, HashSet},
    ops::Range,
    sync::Arc,
};

use hickory_server::proto::rr::{RecordType as Rt, rdata::SOA};

use super::{BuildError, Node, Snapshot, ZoneData, negative_soa, nodes::Nodes, wire_type};
use crate::chunked::Chunked;
use gtm_model::compile::{Content, RecordSpec, ZoneSpec, same_record};
use gtm_model::names::wire_key;

/// How a zone's records changed, when the change leaves every other
/// record's slot where a whole build would put it among its name's slots.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// Records `at` became new ones, each with the same owner and type.
    Replaced(Range<usize>),
    /// Records `at` went.
    Removed(Range<usize>),
    /// Records from `at.start` on were added at the end.
    Appended(Range<usize>),
}

/// The change from `before` to `after`, found by their common start and
/// end; `None` when it is not one [`Change`] says, or touches more than
/// half of the records (a whole build is then as cheap).
fn change(before: &[Arc<RecordSpec>], after: &[Arc<RecordSpec>]) -> Option<Change> {
    let (start, end) = gtm_model::ends::same_ends(before, after, same_record);
    let old = start..before.len() - end;
    let new = start..after.len() - end;
    if old.len().max(new.len()) > before.len().max(after.len()) / 2 {
        return None;
    }
    let same_key =
        |a: &Arc<RecordSpec>, b: &Arc<RecordSpec>| a.kind == b.kind && a.owner == b.owner;
    if old.len() == new.len() {
        let (Some(a), Some(b)) = (before.get(old.clone()), after.get(new)) else {
            return None;
        };
        a.iter()
            .zip(b)
            .all(|(a, b)| same_key(a, b))
            .then_some(Change::Replaced(old))
    } else if new.is_empty() {
        Some(Change::Removed(old))
    } else if old.is_empty() && end == 0 {
        Some(Change::Appended(new))
    } else {
        None
    }
}

fn steered(record: &RecordSpec) -> bool {
    matches!(record.content, Content::Steered(_))
}

impl Snapshot {
    /// Builds `zone` (unsigned, its SOA `soa`) from the zone `previous`
    /// built at its apex, when that one is unsigned with the same SOA but
    /// its serial and the change is one [`change`] takes. Returns whether
    /// it did; `false` leaves this snapshot as it was.
    pub(super) fn derive_zone(
        &mut self,
        previous: &Snapshot,
        zone: &Arc<ZoneSpec>,
        soa: &SOA,
        bodies: &mut HashSet<Arc<[u8]>>,
    ) -> Result<bool, BuildError> {
        // An alias holds its target's slot: a zone with one is built whole.
        if !zone.aliased.is_empty() {
            return Ok(false);
        }
        let Some((from, old)) = previous
            .apexes
            .get(&*wire_key(&zone.apex))
            .and_then(|&i| Some((i, previous.zones.get(i)?)))
        else {
            return Ok(false);
        };
        let negative_soa = negative_soa(zone, soa);
        // The nodes' NODATA bodies hold all of the negative SOA but its
        // tail (serial to minimum): they stay right when the body of the
        // apex does, and the tail changes in its serial only.
        let apex_key = wire_key(&zone.apex);
        let Some(apex) = old.nodes.get(&apex_key) else {
            return Ok(false);
        };
        let (apex_prefix, tail) = super::nodata_body(&zone.apex, &negative_soa)?;
        let apex_types: Vec<Rt> = apex.rrsets.iter().take(2).map(|s| s.rtype).collect();
        if old.signer.is_some()
            || !old.spec.aliased.is_empty()
            || old.negative_soa_sig.is_some()
            || *apex.nodata_wire != *apex_prefix
            || old.nodata_tail.get(4..) != tail.get(4..)
            || apex_types != [Rt::SOA, Rt::NS]
        {
            return Ok(false);
        }
        let Some(change) = change(&old.spec.records, &zone.records) else {
            return Ok(false);
        };
        self.zones.push(ZoneData {
            spec: zone.clone(),
            serial: soa.serial,
            steered: Chunked::default(),
            // Replaced records have the owners and types they had, and
            // whether a record is steered follows from its type.
            steered_order: match change {
                Change::Replaced(_) => old.steered_order,
                _ => super::steered_order(&zone.records),
            },
            kept_from: None,
            derived_from: Some(from),
            apex: zone.apex.clone(),
            apex_labels: old.apex_labels,
            viewed: false,
            nodata_tail: tail,
            negative_soa,
            signer: None,
            negative_soa_sig: None,
            // Shared with `previous`: a shard is copied when a change
            // touches it.
            nodes: old.nodes.clone(),
        });
        let zi = self.zones.len() - 1;
        let middle = self.change_records(previous, zi, &old.spec.records, &change, bodies)?;
        let apex_slots = self.apex_slots(previous, zi, zone, soa.clone())?;
        if let Some(node) = self.node_mut(zi, &apex_key) {
            node.rrsets.splice(..2, apex_slots);
        }

        // The steered slots: those before the change, the changed ones, and
        // those after it.
        let (old_range, new_slots) = middle;
        let before = old.spec.records.get(..old_range.start).unwrap_or_default();
        let skipped = before.iter().filter(|r| steered(r)).count();
        let gone = old
            .spec
            .records
            .get(old_range)
            .unwrap_or_default()
            .iter()
            .filter(|r| steered(r))
            .count();
        if let Some(data) = self.zones.get_mut(zi) {
            data.steered = old.steered.splice(skipped..skipped + gone, &new_slots);
        }
        Ok(true)
    }

    /// Applies `change` to zone `zone` (its nodes a copy of those built
    /// from `before`): the records it names are built and placed, or taken
    /// out. Returns the range of `before` it replaced or removed, and the
    /// new steered records' slots in order.
    fn change_records(
        &mut self,
        previous: &Snapshot,
        zone: usize,
        before: &[Arc<RecordSpec>],
        change: &Change,
        bodies: &mut HashSet<Arc<[u8]>>,
    ) -> Result<(Range<usize>, Vec<Arc<super::RrsetSlot>>), BuildError> {
        let Some(spec) = self.zones.get(zone).map(|z| z.spec.clone()) else {
            return Ok((0..0, Vec::new()));
        };
        let mut steered_slots = Vec::new();
        match change {
            Change::Replaced(at) => {
                for record in spec.records.get(at.clone()).unwrap_or_default() {
                    let slot = self.record_slot(previous, zone, record)?;
                    if steered(record) {
                        steered_slots.push(slot.clone());
                    }
                    let node = self.node_mut(zone, &record.owner);
                    if let Some(old) =
                        node.and_then(|n| n.rrsets.iter_mut().find(|s| s.rtype == slot.rtype))
                    {
                        *old = slot;
                    }
                }
                Ok((at.clone(), steered_slots))
            }
            Change::Removed(at) => {
                let mut emptied = Vec::new();
                for record in before.get(at.clone()).unwrap_or_default() {
                    let key = record.owner.clone();
                    let rt = wire_type(record.kind);
                    if let Some(node) = self.node_mut(zone, &key) {
                        node.rrsets.retain(|s| s.rtype != rt);
                        if node.rrsets.is_empty() {
                            emptied.push(key);
                        }
                    }
                }
                if let Some(z) = self.zones.get_mut(zone) {
                    prune(&mut z.nodes, emptied, z.apex_labels);
                }
                Ok((at.clone(), steered_slots))
            }
            Change::Appended(new) => {
                for record in spec.records.get(new.clone()).unwrap_or_default() {
                    let slot = self.record_slot(previous, zone, record)?;
                    if steered(record) {
                        steered_slots.push(slot.clone());
                    }
                    self.place(bodies, zone, &record.owner, slot)?;
                }
                Ok((before.len()..before.len(), steered_slots))
            }
        }
    }

    fn node_mut(&mut self, zone: usize, key: &[u8]) -> Option<&mut Node> {
        self.zones.get_mut(zone)?.nodes.get_mut(key)
    }
}

/// Takes out the names in `emptied` (keys of names left without records)
/// and their ancestors below the apex that have no records, unless a name
/// with records lies under them.
fn prune(nodes: &mut Nodes, emptied: Vec<Box<[u8]>>, apex_labels: usize) {
    // Every emptied name and its ancestors without records, below the
    // apex, each with whether a name with records lies under it.
    let mut candidates: HashMap<Box<[u8]>, bool> = HashMap::new();
    for key in emptied {
        let mut at = 0;
        for _ in apex_labels..super::labels(&key) {
            let Some(suffix) = key.get(at..) else { break };
            if nodes.get(suffix).is_none_or(|n| !n.rrsets.is_empty()) {
                break;
            }
            candidates.insert(suffix.into(), false);
            at += 1 + usize::from(key.get(at).copied().unwrap_or(0));
        }
    }
    if candidates.is_empty() {
        return;
    }
    for key in nodes
        .iter()
        .filter(|(_, n)| !n.rrsets.is_empty())
        .map(|(k, _)| k)
    {
        // Its ancestors: the suffixes after each of its labels.
        let mut at = 1 + usize::from(key.first().copied().unwrap_or(0));
        while let Some(suffix) = key.get(at..).filter(|s| s.len() > 1) {
            if let Some(needed) = candidates.get_mut(suffix) {
                *needed = true;
            }
            at += 1 + usize::from(key.get(at).copied().unwrap_or(0));
        }
    }
    for (key, needed) in candidates {
        if !needed {
            nodes.remove(&key);
        }
    }
}
