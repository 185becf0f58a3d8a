//! A peer's record states as this device holds them between its reports.
//!
//! A report carries `RecordStatus`es; held as they arrive, a million of
//! them took about 250 bytes each (their strings, a decision text per
//! record that most records share, a list grown page by page). Here each
//! is held at its length, a decision text once for all the records with
//! it, and the list at its length; [`PeerRecords::statuses`] gives the
//! `RecordStatus`es back for the API.

use std::{collections::HashSet, sync::Arc};

use crate::{engine::RecordStatus, resolve::Status};

/// One record's state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PeerRecord {
    record: Box<str>,
    status: Option<Status>,
    active: Box<[Box<str>]>,
    decision: Arc<str>,
    held: bool,
}

/// A peer's record states, in its order.
#[derive(Debug, Default)]
pub struct PeerRecords {
    list: Box<[PeerRecord]>,
    /// The decision texts of the list, each once (texts a configuration
    /// makes: few, and dropped with the list).
    decisions: HashSet<Arc<str>>,
}

/// The same states in the same order.
impl PartialEq for PeerRecords {
    fn eq(&self, other: &Self) -> bool {
        self.list == other.list
    }
}

impl PeerRecords {
    pub fn new(statuses: Vec<RecordStatus>) -> Self {
        let mut decisions = HashSet::new();
        let list = statuses
            .into_iter()
            .map(|s| held(s, &mut decisions))
            .collect();
        Self { list, decisions }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Replaces the state at `i`; `false` when there is none there.
    pub fn set(&mut self, i: usize, status: RecordStatus) -> bool {
        let record = held(status, &mut self.decisions);
        match self.list.get_mut(i) {
            Some(slot) => {
                *slot = record;
                true
            }
            None => false,
        }
    }

    pub fn statuses(&self) -> Vec<RecordStatus> {
        self.list
            .iter()
            .map(|r| RecordStatus {
                record: r.record.to_string(),
                status: r.status,
                active: r.active.iter().map(|a| a.to_string()).collect(),
                decision: r.decision.to_string(),
                held: r.held,
            })
            .collect()
    }
}

fn held(status: RecordStatus, decisions: &mut HashSet<Arc<str>>) -> PeerRecord {
    let RecordStatus {
        record,
        status,
        active,
        decision,
        held,
    } = status;
    let decision = match decisions.get(decision.as_str()) {
        Some(shared) => shared.clone(),
        None => {
            let text: Arc<str> = decision.into();
            decisions.insert(text.clone());
            text
        }
    };
    PeerRecord {
        record: record.into_boxed_str(),
        status,
        active: active.into_iter().map(String::into_boxed_str).collect(),
        decision,
        held,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(record: &str, decision: &str, active: &[&str]) -> RecordStatus {
        RecordStatus {
            record: record.to_string(),
            status: Some(Status::Ok),
            active: active.iter().map(|a| a.to_string()).collect(),
            decision: decision.to_string(),
            held: false,
        }
    }

    #[test]
    fn states_come_back_as_they_went_in_with_a_decision_text_held_once() {
        let statuses = vec![
            status(
                "a.test/A",
                "Standalone: every healthy address",
                &["192.0.2.1"],
            ),
            status("b.test/A", "Standalone: every healthy address", &[]),
            status(
                "c.test/A",
                "DR on: condition holds",
                &["192.0.2.3", "192.0.2.4"],
            ),
        ];
        let mut held = PeerRecords::new(statuses.clone());
        assert_eq!(held.statuses(), statuses);
        assert_eq!(held.len(), 3);
        assert!(Arc::ptr_eq(&held.list[0].decision, &held.list[1].decision));
        assert_eq!(held.decisions.len(), 2);

        let changed = status("b.test/A", "DR on: condition holds", &["192.0.2.9"]);
        assert!(held.set(1, changed.clone()));
        assert!(Arc::ptr_eq(&held.list[1].decision, &held.list[2].decision));
        assert_eq!(held.statuses()[1], changed);
        assert!(!held.set(3, changed), "no state at 3");
        assert_eq!(held.len(), 3);
    }
}
