//! A zone's records: the ones a change did not touch taken from the
//! compile before, the others compiled, and which of them the checks of
//! the records at one name read again.

use std::{collections::HashSet, sync::Arc};

use super::{
    Cx, DomainCx, RecordSpec, ZoneSpec, normal,
    owners::{OwnerHashes, owner_hash},
};
use crate::config::{Domain, Record};

/// The records of a zone compiled before that are kept: the first `start`
/// and the last `end`, which a change did not touch.
#[derive(Clone, Copy)]
pub(super) struct Kept<'z> {
    pub(super) zone: &'z ZoneSpec,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Kept<'_> {
    /// The records of `d` between the kept ones: the changed ones.
    pub(super) fn changed<'d>(&self, d: &'d Domain) -> &'d [Arc<Record>] {
        d.records
            .get(self.start..d.records.len() - self.end)
            .unwrap_or_default()
    }
}

/// A zone's records as they compile.
pub(super) struct ZoneRecords {
    records: Vec<Arc<RecordSpec>>,
    /// A hash of each record's owner, in record order: the kept records'
    /// taken from before, the others' made as they compile.
    hashes: Vec<u32>,
    /// The owners of the records compiled when the others are kept; `None`
    /// when every record was compiled.
    touched: Option<Vec<Box<[u8]>>>,
    /// How many of the records are CNAMEs with targets.
    cnames: usize,
}

impl Cx {
    /// The records of `d`: those of `kept` taken as they are, the others
    /// compiled. `None` when the compile is cancelled.
    pub(super) fn zone_records(
        &mut self,
        d: &Domain,
        within: &DomainCx,
        kept: Option<Kept>,
    ) -> Option<ZoneRecords> {
        let changed = match &kept {
            Some(k) => k.changed(d),
            None => &d.records[..],
        };
        let mut records = Vec::with_capacity(d.records.len());
        let mut hashes = Vec::with_capacity(d.records.len());
        if let Some(Kept { zone, start, .. }) = kept {
            records.extend(zone.records.iter().take(start).cloned());
            hashes.extend_from_slice(zone.owner_hashes().get(..start).unwrap_or_default());
        }
        self.changed_records(changed, within, &mut records, &mut hashes)?;
        // The names the changed records are at: only theirs are checked
        // again (a kept name's records are as they were), found by their
        // owners' hashes.
        let mut touched: Option<Vec<Box<[u8]>>> = None;
        if let Some(Kept { zone, start, end }) = kept {
            let changed = records.get(start..).unwrap_or_default();
            touched = Some(changed.iter().map(|c| c.owner.clone()).collect());
            let before = zone.owner_hashes();
            hashes.extend_from_slice(
                before
                    .get(before.len().saturating_sub(end)..)
                    .unwrap_or_default(),
            );
            let after = zone
                .records
                .get(zone.records.len() - end..)
                .unwrap_or_default();
            records.extend(after.iter().cloned());
        }
        let cnames = cnames(&records, kept);
        Some(ZoneRecords {
            records,
            hashes,
            touched,
            cnames,
        })
    }

    /// Compiles `changed` onto `records`, and the hash of each one's owner
    /// onto `hashes`. A second record of a name and type is refused. `None`
    /// when the compile is cancelled.
    fn changed_records(
        &mut self,
        changed: &[Arc<Record>],
        within: &DomainCx,
        records: &mut Vec<Arc<RecordSpec>>,
        hashes: &mut Vec<u32>,
    ) -> Option<()> {
        let mut keys = HashSet::new();
        for r in changed {
            if self.cancel.is_cancelled() {
                return None;
            }
            let rpath = format!("{} / record {} {}", within.path, r.name, r.kind.as_str());
            if !keys.insert((normal(&r.name), r.kind)) {
                self.err(
                    &rpath,
                    "is defined twice (one record per name and type; list several addresses or values in it)",
                );
                continue;
            }
            if let Some(rec) = self.record(&rpath, r, within) {
                hashes.push(owner_hash(&rec.owner));
                records.push(Arc::new(rec));
            }
        }
        Some(())
    }
}

/// How many of `records` are CNAMEs with targets: counted over what
/// changed when the rest is kept.
fn cnames(records: &[Arc<RecordSpec>], kept: Option<Kept>) -> usize {
    let count = |l: &[Arc<RecordSpec>]| l.iter().filter(|r| r.is_cname()).count();
    match kept {
        Some(Kept { zone, start, end }) => {
            let replaced = zone.records.get(start..zone.records.len() - end);
            let new = records.get(start..records.len() - end);
            (zone.cnames + count(new.unwrap_or_default()))
                .saturating_sub(count(replaced.unwrap_or_default()))
        }
        None => count(records),
    }
}

impl ZoneRecords {
    /// The records the checks of the records at one name read: all of
    /// them, or when the others are kept those at the names of the
    /// compiled ones.
    pub(super) fn checked(&self) -> Vec<&RecordSpec> {
        match &self.touched {
            None => self.records.iter().map(|r| &**r).collect(),
            Some(names) => {
                let wanted: Vec<u32> = names.iter().map(|n| owner_hash(n)).collect();
                self.hashes
                    .iter()
                    .zip(&self.records)
                    .filter(|(h, r)| wanted.contains(h) && names.contains(&r.owner))
                    .map(|(_, r)| &**r)
                    .collect()
            }
        }
    }

    /// Every record of the zone.
    pub(super) fn all(&self) -> &[Arc<RecordSpec>] {
        &self.records
    }

    /// The records, how many are CNAMEs with targets, and their owners'
    /// hashes.
    pub(super) fn finish(self) -> (Vec<Arc<RecordSpec>>, usize, OwnerHashes) {
        // Made lazily from the records should they ever disagree (never
        // here: both grow together).
        let owners = if self.hashes.len() == self.records.len() {
            OwnerHashes::given(self.hashes)
        } else {
            OwnerHashes::default()
        };
        (self.records, self.cnames, owners)
    }
}
