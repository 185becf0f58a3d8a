//! A zone the state machine's proof built, taken as this build's.
//!
//! Before a configuration is committed the state machine builds the
//! answers of every domain that changed (`gtm_engine::servable`),
//! unsigned and with the specs' serials; the install then builds the
//! configuration's answers. A zone the proof built whole from the very
//! spec the install builds is taken from it instead of built a second
//! time: its names and slots move over as they are, its apex is built
//! again for its serial, and each of its records counts on the counters it
//! had in the snapshot before (a whole apply over existing domains held
//! two builds of every record until the proof was dropped).

use std::sync::Arc;

use hickory_server::proto::rr::{RecordType as Rt, rdata::SOA};

use super::{BuildError, Snapshot, ZoneData, counters_before, negative_soa, wire_type};
use crate::{chunked::Chunked, counters::Counters};
use gtm_model::compile::{Content, ZoneSpec};
use gtm_model::names::wire_key;

impl Snapshot {
    /// Takes `data`, the proof's build of `zone` (unsigned), as this
    /// snapshot's build of it with the SOA `soa`. Returns whether it did;
    /// `false` leaves this snapshot as it was (`data` is dropped): when
    /// `data` was built from another spec or signed, or holds a slot
    /// shared with another snapshot.
    pub(super) fn adopt_zone(
        &mut self,
        previous: &Snapshot,
        zone: &Arc<ZoneSpec>,
        mut data: ZoneData,
        soa: &SOA,
    ) -> Result<bool, BuildError> {
        let negative_soa = negative_soa(zone, soa);
        let apex_key = wire_key(&zone.apex);
        let (apex_prefix, tail) = super::nodata_body(&zone.apex, &negative_soa)?;
        // Only the serial differs from the proof's SOA: the nodes' NODATA
        // bodies hold the rest, and stay right.
        let same_apex = data.nodes.get(&apex_key).is_some_and(|apex| {
            *apex.nodata_wire == *apex_prefix
                && apex
                    .rrsets
                    .iter()
                    .take(2)
                    .map(|s| s.rtype)
                    .eq([Rt::SOA, Rt::NS])
        });
        // An alias holds its target's slot: a zone with one is built whole.
        if !Arc::ptr_eq(&data.spec, zone)
            || !zone.aliased.is_empty()
            || data.signer.is_some()
            || data.negative_soa_sig.is_some()
            || data.nodata_tail.get(4..) != tail.get(4..)
            || !same_apex
        {
            return Ok(false);
        }
        // The steered list is made again below, from the nodes: without
        // it, each slot is the proof's alone.
        data.steered = Chunked::default();
        for (key, node) in data.nodes.iter_mut() {
            for slot in &mut node.rrsets {
                let Some(slot) = Arc::get_mut(slot) else {
                    return Ok(false);
                };
                if let Some(before) = counters_before(previous, key, slot.rtype, 0) {
                    slot.counters = Counters::carried(
                        slot.counters.keys(),
                        slot.counters.address_count(),
                        Some(&before.counters),
                    );
                }
            }
        }
        let mut steered = Vec::new();
        for record in zone.records.iter() {
            if !matches!(record.content, Content::Steered(_)) {
                continue;
            }
            let rt = wire_type(record.kind);
            let slot = data
                .nodes
                .get(&record.owner)
                .and_then(|n| n.rrsets.iter().find(|s| s.rtype == rt));
            match slot {
                Some(slot) => steered.push(slot.clone()),
                None => return Ok(false),
            }
        }
        data.steered = Chunked::from_vec(steered);
        data.serial = soa.serial;
        data.nodata_tail = tail;
        data.negative_soa = negative_soa;
        data.kept_from = None;
        data.derived_from = None;
        self.zones.push(data);
        let zi = self.zones.len() - 1;
        let apex_slots = self.apex_slots(previous, zi, zone, soa.clone())?;
        let apex = self
            .zones
            .get_mut(zi)
            .and_then(|z| z.nodes.get_mut(&apex_key));
        if let Some(apex) = apex {
            apex.rrsets.splice(..2, apex_slots);
        }
        Ok(true)
    }
}
