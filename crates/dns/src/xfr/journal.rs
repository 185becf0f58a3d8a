//! The history of each transferred zone on this device: the view a
//! secondary gets at the current serial, and the differences between the
//! serials before it, which IXFR answers from (RFC 1995).
//!
//! A zone's view changes with a new configuration, with health moving a
//! steered record's default answer, and with a new signing window; each
//! change has a serial of its own (`super::next_serial`), given by the
//! `notify` worker, which then records the view here. Transfers serve the
//! recorded view, never the live snapshot, so that what a secondary holds
//! at a serial is exactly what the next difference starts from.
//!
//! Per device and in memory (serials are per device): a restart starts a
//! new history, and a secondary then gets the whole zone once. Records are
//! kept encoded (uncompressed, each readable alone), a few tens of bytes
//! each; the differences kept are bounded by the zone's own size, beyond
//! which a whole transfer is the cheaper answer anyway.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
};

use hickory_server::proto::{
    ProtoError,
    rr::{RData, Record},
    serialize::binary::{BinEncodable, BinEncoder, NameEncoding},
};

/// The most differences kept per zone.
const MAX_DIFFS: usize = 64;
/// Records in the differences kept beyond the zone's own record count.
const SLACK_RECORDS: usize = 1_000;

/// Records encoded one after another, uncompressed: each is a complete
/// resource record that can be copied into any message.
#[derive(Debug, Default)]
pub struct Records {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Records {
    /// Encodes `records`; fails when one does not encode or the whole is
    /// over 4 GiB.
    pub fn encode<'a>(records: impl IntoIterator<Item = &'a Record>) -> Result<Self, ProtoError> {
        let mut out = Self::default();
        for r in records {
            out.push(&encode(r)?)?;
        }
        Ok(out)
    }

    fn push(&mut self, record: &[u8]) -> Result<(), ProtoError> {
        self.bytes.extend_from_slice(record);
        let end = u32::try_from(self.bytes.len())
            .map_err(|_| ProtoError::from("a zone's records take over 4 GiB"))?;
        self.ends.push(end);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each record's bytes, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(s, e)| self.bytes.get(s as usize..e as usize).unwrap_or_default())
    }
}

/// One record, encoded alone and uncompressed (names in RDATA too), so
/// that it reads the same wherever it is placed.
pub fn encode(record: &Record) -> Result<Vec<u8>, ProtoError> {
    let mut buf = Vec::with_capacity(64);
    let mut enc = BinEncoder::new(&mut buf);
    enc.set_name_encoding(NameEncoding::Uncompressed);
    record.emit(&mut enc)?;
    Ok(buf)
}

/// A zone as transferred at one serial.
#[derive(Debug)]
pub struct View {
    pub serial: u32,
    /// The SOA, encoded.
    pub soa: Vec<u8>,
    /// Every other record, in the order a transfer sends them.
    pub records: Records,
}

/// What changed from one serial to the next.
#[derive(Debug)]
pub struct Diff {
    pub from_serial: u32,
    /// The SOAs at both ends, encoded.
    pub from_soa: Vec<u8>,
    pub to_soa: Vec<u8>,
    pub removed: Records,
    pub added: Records,
}

impl Diff {
    fn records(&self) -> usize {
        self.removed.len() + self.added.len() + 2
    }
}

/// A zone's current view and the differences that lead to it.
#[derive(Debug)]
pub struct History {
    pub current: View,
    /// Oldest first; each ends where the next starts, the last at
    /// `current`.
    diffs: VecDeque<Arc<Diff>>,
}

impl History {
    /// The differences from `serial` to the current view, oldest first:
    /// `Some(empty)` when `serial` is current, `None` when this history
    /// does not reach back to it (the whole zone is the answer then).
    pub fn since(&self, serial: u32) -> Option<Vec<Arc<Diff>>> {
        if serial == self.current.serial {
            return Some(Vec::new());
        }
        let start = self.diffs.iter().position(|d| d.from_serial == serial)?;
        Some(self.diffs.iter().skip(start).cloned().collect())
    }

    /// Differences kept.
    pub fn diffs(&self) -> usize {
        self.diffs.len()
    }
}

/// The histories of the zones with secondaries, by the zone's key (its
/// name, and a view's zone its view's: `example.test@internal`).
#[derive(Debug, Default)]
pub struct Journal {
    zones: Mutex<HashMap<String, Arc<History>>>,
}

impl Journal {
    /// The history of zone `key`, if a view was recorded.
    pub fn get(&self, key: &str) -> Option<Arc<History>> {
        self.lock().get(key).cloned()
    }

    /// Records the view of `apex` at a new serial: `records` is the SOA
    /// (whose serial it is), then every other record. Keeps the
    /// difference from the previous view when the history stays within its
    /// bounds; drops the oldest ones otherwise. Fails, keeping the history
    /// as it was, when a record does not encode.
    pub fn record(&self, key: &str, records: &[Record]) -> Result<(), ProtoError> {
        let Some((soa, rest)) = records.split_first() else {
            return Err(ProtoError::from("a zone view without its SOA"));
        };
        let RData::SOA(soa_data) = &soa.data else {
            return Err(ProtoError::from(
                "a zone view that does not start with its SOA",
            ));
        };
        let view = View {
            serial: soa_data.serial,
            soa: encode(soa)?,
            records: Records::encode(rest)?,
        };
        let previous = self.get(key);
        let mut diffs = VecDeque::new();
        if let Some(previous) = previous.filter(|p| p.current.serial != view.serial) {
            let diff = difference(&previous.current, &view)?;
            diffs = previous.diffs.clone();
            diffs.push_back(Arc::new(diff));
            let limit = view.records.len() + SLACK_RECORDS;
            while diffs.len() > MAX_DIFFS
                || diffs.iter().map(|d| d.records()).sum::<usize>() > limit
            {
                diffs.pop_front();
            }
        }
        let history = History {
            current: view,
            diffs,
        };
        self.lock().insert(key.to_string(), Arc::new(history));
        Ok(())
    }

    /// Forgets the zones `keep` says no to (no longer transferred).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|key, _| keep(key));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<History>>> {
        self.zones.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The records of `old` that `new` lacks and those it adds, each in its
/// view's order. Records compare by their bytes: a changed TTL is a record
/// removed and one added, as IXFR has it.
fn difference(old: &View, new: &View) -> Result<Diff, ProtoError> {
    let before: HashSet<&[u8]> = old.records.iter().collect();
    let after: HashSet<&[u8]> = new.records.iter().collect();
    let mut removed = Records::default();
    for r in old.records.iter().filter(|r| !after.contains(r)) {
        removed.push(r)?;
    }
    let mut added = Records::default();
    for r in new.records.iter().filter(|r| !before.contains(r)) {
        added.push(r)?;
    }
    Ok(Diff {
        from_serial: old.serial,
        from_soa: old.soa.clone(),
        to_soa: new.soa.clone(),
        removed,
        added,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_server::proto::{
        rr::{
            Name,
            rdata::{A, SOA},
        },
        serialize::binary::{BinDecodable, BinDecoder},
    };

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn soa(serial: u32) -> Record {
        Record::from_rdata(
            name("example.test."),
            3600,
            RData::SOA(SOA::new(
                name("ns1.example.test."),
                name("hostmaster.example.test."),
                serial,
                3600,
                600,
                86400,
                60,
            )),
        )
    }

    fn a(host: &str, last: u8) -> Record {
        Record::from_rdata(name(host), 30, RData::A(A::new(192, 0, 2, last)))
    }

    fn decode(bytes: &[u8]) -> Record {
        Record::read(&mut BinDecoder::new(bytes)).unwrap()
    }

    #[test]
    fn a_record_reads_back_alone_with_no_pointer_to_elsewhere() {
        // The SOA's names share the owner's suffix: compressed, they would
        // point into a message that is not there.
        let record = soa(7);
        let bytes = encode(&record).unwrap();
        assert_eq!(decode(&bytes), record);
        let both = Records::encode([&record, &a("www.example.test.", 1)]).unwrap();
        let read: Vec<Record> = both.iter().map(decode).collect();
        assert_eq!(read, vec![record, a("www.example.test.", 1)]);
    }

    #[test]
    fn differences_chain_from_any_recorded_serial_to_the_current_one() {
        let journal = Journal::default();
        const KEY: &str = "example.test";
        let www = |last| a("www.example.test.", last);
        let txt = a("mail.example.test.", 9);
        journal.record(KEY, &[soa(1), www(1), txt.clone()]).unwrap();
        journal.record(KEY, &[soa(2), www(2), txt.clone()]).unwrap();
        journal.record(KEY, &[soa(3), www(2)]).unwrap();
        let history = journal.get(KEY).unwrap();
        assert_eq!(history.current.serial, 3);
        assert!(history.since(3).unwrap().is_empty());
        assert!(history.since(99).is_none(), "a serial never recorded");

        let diffs = history.since(1).unwrap();
        assert_eq!(diffs.len(), 2);
        let first = &diffs[0];
        assert_eq!(first.from_serial, 1);
        assert_eq!(
            first.removed.iter().map(decode).collect::<Vec<_>>(),
            vec![www(1)]
        );
        assert_eq!(
            first.added.iter().map(decode).collect::<Vec<_>>(),
            vec![www(2)]
        );
        assert_eq!(decode(&first.to_soa), soa(2));
        let second = &diffs[1];
        assert_eq!(
            second.removed.iter().map(decode).collect::<Vec<_>>(),
            vec![txt]
        );
        assert!(second.added.is_empty());
    }

    #[test]
    fn differences_larger_than_the_zone_are_not_kept() {
        let journal = Journal::default();
        const KEY: &str = "example.test";
        // Every record changes each time: a chain of more than a zone's
        // worth (plus the slack) drops its oldest steps.
        let zone = |serial: u32| -> Vec<Record> {
            let mut v = vec![soa(serial)];
            v.extend((0..600).map(|i| a(&format!("h{i}.example.test."), serial as u8)));
            v
        };
        for serial in 1..=4 {
            journal.record(KEY, &zone(serial)).unwrap();
        }
        let history = journal.get(KEY).unwrap();
        assert!(history.since(3).is_some());
        assert!(
            history.since(1).is_none(),
            "1,200 records a step, 1,600 kept at most"
        );
        assert!(history.diffs() < 3);
    }

    #[test]
    fn a_view_without_its_soa_first_is_refused_and_changes_nothing() {
        let journal = Journal::default();
        const KEY: &str = "example.test";
        journal.record(KEY, &[soa(1)]).unwrap();
        assert!(journal.record(KEY, &[a("www.example.test.", 1)]).is_err());
        assert!(journal.record(KEY, &[]).is_err());
        assert_eq!(journal.get(KEY).unwrap().current.serial, 1);
    }
}
