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
//!
//! A peer that holds no list of the current base is sent the list in
//! pages of [`PAGE`] records, each labelled with the point the first one
//! was taken at; it holds the list from that point once it has every page,
//! and the changes since then follow as above. No report is larger than a
//! page: more changes than a page send the list again, in pages.

use serde::{Deserialize, Serialize};

use super::{Engine, RecordStatus, record_states::RecordStates};

/// Records in one page of a list, and changes in one report at most. A
/// record's status is about a hundred bytes of JSON (more with many
/// answers): a page stays a few megabytes, far below the API's body limit.
pub const PAGE: usize = 10_000;

/// A point in a device's record states: the process that counted it
/// (`epoch`, drawn at start) and the generation within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordsAt {
    pub epoch: u64,
    pub generation: u64,
}

/// A page of a device's record list: the records from place `start` of
/// `total`, of the list taken in pages from the point `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Page {
    pub from: RecordsAt,
    pub start: usize,
    pub total: usize,
}

/// What a peer holds of this device's record states, as it last said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Held {
    /// The whole list, at this point.
    At(RecordsAt),
    /// The pages of a list taken from `from`: every record before `next`.
    Pages { from: RecordsAt, next: usize },
}

/// The record states to send to a peer.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordChanges {
    /// The records changed since the peer's generation `base`, by their
    /// place; with them the peer holds the list at `at`.
    Since {
        at: RecordsAt,
        base: u64,
        changed: Vec<(usize, RecordStatus)>,
    },
    /// A page of the list: the peer holds none of the current base, or is
    /// taking one in.
    Page { page: Page, records: RecordStates },
}

/// A new epoch: random, so two runs of a device do not share one.
pub(super) fn new_epoch() -> u64 {
    let mut bytes = [0; 8];
    match ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        // The time then: still another value per start.
        Err(_) => gtm_model::clock::now_ms() ^ u64::from(std::process::id()).rotate_left(32),
    }
}

impl Engine {
    /// Where the record states stand now.
    pub fn records_at(&self) -> RecordsAt {
        RecordsAt {
            epoch: self.records_epoch,
            generation: self.lock().records_gen,
        }
    }

    /// The record states a peer holding `held` lacks.
    pub fn record_changes(&self, held: Option<Held>) -> RecordChanges {
        let inner = self.lock();
        let now = RecordsAt {
            epoch: self.records_epoch,
            generation: inner.records_gen,
        };
        // A point of this list: its order has not changed since.
        let of_base = |at: RecordsAt| {
            at.epoch == self.records_epoch
                && (inner.records_reset..=inner.records_gen).contains(&at.generation)
        };
        let total = inner.records.len();
        let snapshot = self.dns.snapshot.load();
        // Written straight into the compact list: no `RecordStatus` per
        // record (docs/design-scale.md, "The record-state exchange").
        let page = |from: RecordsAt, start: usize| {
            let mut records = RecordStates::for_page(PAGE.min(total.saturating_sub(start)));
            for r in inner.records.iter_from(start).take(PAGE) {
                r.push_status(&mut records, &snapshot);
            }
            RecordChanges::Page {
                page: Page { from, start, total },
                records,
            }
        };
        match held {
            Some(Held::At(at)) if of_base(at) => {
                let changed: Vec<(usize, RecordStatus)> = inner
                    .records
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.changed > at.generation)
                    .take(PAGE + 1)
                    .map(|(i, r)| (i, r.status(&snapshot)))
                    .collect();
                if changed.len() <= PAGE {
                    return RecordChanges::Since {
                        at: now,
                        base: at.generation,
                        changed,
                    };
                }
                page(now, 0)
            }
            Some(Held::Pages { from, next }) if of_base(from) && next < total => page(from, next),
            _ => page(now, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Prepared;
    use gtm_dns::{handler::DnsState, snapshot::Snapshot};
    use gtm_resolve::CheckState;

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

    /// A configuration text to install, cut into parts.
    fn kept(version: u64, text: &str) -> gtm_cluster::KeptConfig<'_> {
        gtm_cluster::KeptConfig {
            version,
            parts: gtm_cluster::parts::named(text.as_bytes()),
            zone_versions: Vec::new(),
        }
    }

    fn engine() -> Engine {
        let state = DnsState::new(Snapshot::default(), gtm_geo::Geo::none(), 1232);
        let config = gtm_model::parse(CONFIG).unwrap();
        let prepared = Prepared::new(1, &Default::default(), config, &state).unwrap();
        Engine::new("gtm1", prepared, state, None)
    }

    fn changed(changes: &RecordChanges) -> Vec<(usize, &str)> {
        match changes {
            RecordChanges::Since { changed, .. } => changed
                .iter()
                .map(|(i, r)| (*i, r.record.as_str()))
                .collect(),
            RecordChanges::Page { .. } => panic!("a page of the list: {changes:?}"),
        }
    }

    fn page(changes: &RecordChanges) -> (Page, Vec<RecordStatus>) {
        match changes {
            RecordChanges::Page { page, records } => (*page, records.statuses()),
            RecordChanges::Since { .. } => panic!("changes, not a page: {changes:?}"),
        }
    }

    /// A peer that holds the list is sent what changed since, by place; one
    /// of another process, or of no point, the list from its first page.
    #[test]
    fn a_peer_holding_the_list_is_sent_only_what_changed_since() {
        let engine = engine();
        let first = engine.record_changes(None);
        let (p, all) = page(&first);
        assert_eq!(all, engine.status());
        assert_eq!((p.start, p.total, all.len()), (0, 2, 2));
        let at = p.from;
        assert_eq!(at, engine.records_at());
        // Nothing changed: nothing to send.
        let none = engine.record_changes(Some(Held::At(at)));
        assert_eq!(changed(&none), vec![]);
        // The check goes down: record a changes, b does not.
        let check = engine.instances().borrow()[0].check.clone();
        engine.set_check(&check, CheckState::Error, "refused");
        let since = engine.record_changes(Some(Held::At(at)));
        assert_eq!(changed(&since), vec![(0, "a.c.test/A")]);
        let RecordChanges::Since {
            at: later,
            base,
            changed: list,
        } = &since
        else {
            unreachable!()
        };
        assert!(later.generation > at.generation);
        assert_eq!(*base, at.generation);
        assert_eq!(list[0].1, engine.status()[0]);
        assert_ne!(list[0].1, all[0], "its status is the new one");
        let later = *later;
        // Another process's point, or one ahead of this list: page one.
        let other = RecordsAt {
            epoch: at.epoch.wrapping_add(1),
            ..at
        };
        let ahead = RecordsAt {
            generation: later.generation + 1,
            ..at
        };
        for point in [other, ahead] {
            let (p, _) = page(&engine.record_changes(Some(Held::At(point))));
            assert_eq!((p.from, p.start), (later, 0));
        }

        // A configuration change that keeps the list's order: what it
        // evaluated again, not the whole list.
        let install = |version: u64, text: String| {
            engine.apply_committed(kept(version, &text), None).unwrap();
            engine.record_changes(Some(Held::At(later)))
        };
        let edited = install(2, CONFIG.replace("192.0.2.3", "192.0.2.4"));
        assert_eq!(changed(&edited), vec![(1, "b.c.test/A")]);
        // One that adds a record: the list is another, sent from page one.
        let added = format!(
            "{CONFIG}\n[[domain.record]]\nname = \"c\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.5\" }}]\n"
        );
        let whole = install(3, added);
        let (p, records) = page(&whole);
        assert_eq!((p.start, p.total, records.len()), (0, 3, 3));
    }

    /// A list longer than a page goes page by page from the point its
    /// first page was taken at, while that list's order holds; more
    /// changes than a page send it again.
    #[test]
    fn a_long_list_goes_in_pages_and_many_changes_as_the_list_again() {
        let mut text = CONFIG.to_string();
        let extra = PAGE + PAGE / 2;
        for i in 0..extra {
            text.push_str(&format!(
                "\n[[domain.record]]\nname = \"r{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.9\", hc = \"check:web\" }}]\n"
            ));
        }
        let engine = engine();
        engine.apply_committed(kept(2, &text), None).unwrap();
        let total = extra + 2;
        let first = engine.record_changes(None);
        let (p1, records) = page(&first);
        assert_eq!((p1.start, p1.total, records.len()), (0, total, PAGE));
        assert_eq!(records, engine.status()[..PAGE]);
        // The next page continues the same list, even after a change.
        let checks: Vec<_> = engine
            .instances()
            .borrow()
            .iter()
            .map(|i| i.check.clone())
            .collect();
        for check in &checks {
            engine.set_check(check, CheckState::Error, "refused");
        }
        let next = Held::Pages {
            from: p1.from,
            next: PAGE,
        };
        let second = engine.record_changes(Some(next));
        let (p2, rest) = page(&second);
        assert_eq!(
            (p2.from, p2.start, rest.len()),
            (p1.from, PAGE, total - PAGE)
        );
        assert_eq!(rest, engine.status()[PAGE..]);
        // Held whole from the first page's point: every record changed
        // since (a check is on all but one) is more than a page, so the
        // list goes again from its first page, of now.
        let again = engine.record_changes(Some(Held::At(p1.from)));
        let (p3, _) = page(&again);
        assert_eq!((p3.from, p3.start), (engine.records_at(), 0));
        assert!(p3.from.generation > p1.from.generation);
        // Pages of another process's list: the first page again.
        let stale = Held::Pages {
            from: RecordsAt {
                epoch: p1.from.epoch.wrapping_add(1),
                ..p1.from
            },
            next: PAGE,
        };
        assert_eq!(page(&engine.record_changes(Some(stale))).0.start, 0);
    }
}
