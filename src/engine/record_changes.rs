//! What changed in the records' states since a peer last heard them.
//!
//! Every few seconds a device reports its record states to its peers
//! (`crate::peers`). With a million records the whole list is a hundred
//! megabytes of JSON to build, send, parse and compare, every period, on
//! every device: so the engine counts changes. Each change of what
//! [`Engine::status`] shows of a record (status, answers, decision, held)
//! moves the records generation and marks the record with it; an install
//! marks the records it evaluated again, and starts a new base only when
//! the list's order changed (a record added, removed or moved). A peer
//! that holds the list at a generation of the current base is sent only
//! the records changed since, by their place in the list.

use serde::{Deserialize, Serialize};

use super::{Engine, RecordStatus};

/// A point in a device's record states: the process that counted it
/// (`epoch`, drawn at start) and the generation within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordsAt {
    pub epoch: u64,
    pub generation: u64,
}

/// The record states to send to a peer holding them at `since`.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordChanges {
    /// Every record, in order: the peer holds none, or an older list.
    Whole(Vec<RecordStatus>),
    /// The records changed since the peer's generation, by their place.
    Since {
        base: u64,
        changed: Vec<(usize, RecordStatus)>,
    },
}

/// A new epoch: random, so two runs of a device do not share one.
pub(super) fn new_epoch() -> u64 {
    let mut bytes = [0; 8];
    match ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        // The time then: still another value per start.
        Err(_) => super::now_ms() ^ u64::from(std::process::id()).rotate_left(32),
    }
}

/// The order of a list of records, as a hash of their labels in order.
pub(super) fn order_of(records: &[Box<super::Steered>]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    records.len().hash(&mut h);
    for r in records {
        r.label.hash(&mut h);
    }
    h.finish()
}

impl Engine {
    /// Where the record states stand now.
    pub fn records_at(&self) -> RecordsAt {
        RecordsAt {
            epoch: self.records_epoch,
            generation: self.lock().records_gen,
        }
    }

    /// The record states a peer holding them at `since` lacks, and where
    /// they stand with them.
    pub fn record_changes(&self, since: Option<RecordsAt>) -> (RecordsAt, RecordChanges) {
        let inner = self.lock();
        let now = RecordsAt {
            epoch: self.records_epoch,
            generation: inner.records_gen,
        };
        let base = since.filter(|s| {
            s.epoch == self.records_epoch
                && (inner.records_reset..=inner.records_gen).contains(&s.generation)
        });
        let changes = match base {
            Some(s) => RecordChanges::Since {
                base: s.generation,
                changed: inner
                    .records
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.changed > s.generation)
                    .map(|(i, r)| (i, r.status()))
                    .collect(),
            },
            None => RecordChanges::Whole(inner.records.iter().map(|r| r.status()).collect()),
        };
        (now, changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        dns::{handler::DnsState, snapshot::Snapshot},
        engine::Prepared,
        resolve::CheckState,
    };

    const CONFIG: &str = r#"
[[check]]
name = "web"
type = "tcp"
port = 80

[[domain]]
name = "c.test"
nameservers = ["ns1.c.test"]

[[domain.record]]
name = "a"
type = "A"
addresses = [{ ip = "192.0.2.1", hc = "check:web" }, { ip = "192.0.2.2" }]

[[domain.record]]
name = "b"
type = "A"
addresses = [{ ip = "192.0.2.3" }]
"#;

    fn engine() -> Engine {
        let state = DnsState::new(Snapshot::default(), crate::geo::Geo::none(), 1232);
        let config = crate::model::parse(CONFIG).unwrap();
        let prepared = Prepared::new(1, &Default::default(), config, &state).unwrap();
        Engine::new("gtm1", prepared, state, None)
    }

    fn changed(changes: &RecordChanges) -> Vec<(usize, &str)> {
        match changes {
            RecordChanges::Since { changed, .. } => changed
                .iter()
                .map(|(i, r)| (*i, r.record.as_str()))
                .collect(),
            RecordChanges::Whole(_) => panic!("the whole list: {changes:?}"),
        }
    }

    /// A peer that holds the list is sent what changed since, by place; one
    /// of another process, or of no point, the whole list.
    #[test]
    fn a_peer_holding_the_list_is_sent_only_what_changed_since() {
        let engine = engine();
        let (at, whole) = engine.record_changes(None);
        let RecordChanges::Whole(all) = &whole else {
            panic!("{whole:?}")
        };
        assert_eq!(all, &engine.status());
        assert_eq!(all.len(), 2);
        // Nothing changed: nothing to send.
        let (same, none) = engine.record_changes(Some(at));
        assert_eq!((same, changed(&none)), (at, vec![]));
        // The check goes down: record a changes, b does not.
        let check = engine.instances().borrow()[0].check.clone();
        engine.set_check(&check, CheckState::Error, "refused");
        let (later, since) = engine.record_changes(Some(at));
        assert!(later.generation > at.generation);
        assert_eq!(changed(&since), vec![(0, "a.c.test/A")]);
        let RecordChanges::Since {
            changed: list,
            base,
        } = &since
        else {
            unreachable!()
        };
        assert_eq!(*base, at.generation);
        assert_eq!(list[0].1, engine.status()[0]);
        assert_ne!(list[0].1, all[0], "its status is the new one");
        // Another process's point, or one ahead of this list: whole.
        let other = RecordsAt {
            epoch: at.epoch.wrapping_add(1),
            ..at
        };
        let ahead = RecordsAt {
            generation: later.generation + 1,
            ..at
        };
        for point in [other, ahead] {
            assert!(matches!(
                engine.record_changes(Some(point)).1,
                RecordChanges::Whole(_)
            ));
        }

        // A configuration change that keeps the list's order: what it
        // evaluated again, not the whole list.
        let install = |version: u64, text: String| {
            engine
                .apply_committed(version, text, Default::default(), None)
                .unwrap();
            engine.record_changes(Some(later))
        };
        let (_, edited) = install(2, CONFIG.replace("192.0.2.3", "192.0.2.4"));
        assert_eq!(changed(&edited), vec![(1, "b.c.test/A")]);
        // One that adds a record: the list is another, sent whole.
        let added = format!(
            "{CONFIG}\n[[domain.record]]\nname = \"c\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.5\" }}]\n"
        );
        let (_, whole) = install(3, added);
        assert!(
            matches!(&whole, RecordChanges::Whole(all) if all.len() == 3),
            "{whole:?}"
        );
    }
}
