//! The threshold state machine of a check instance (spec §1): Preparing
//! until the first result, which decides at once; afterwards Required
//! Failures consecutive failures make Error and Required Successes
//! consecutive successes make OK.

use gtm_resolve::CheckState;

/// Where one check instance stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Threshold {
    pub state: CheckState,
    /// Consecutive results of the same kind as the last one.
    pub streak: u32,
    pub last_ok: Option<bool>,
    /// The state came from the store, not from a probe of this run.
    pub restored: bool,
}

impl Default for Threshold {
    fn default() -> Self {
        Self {
            state: CheckState::Preparing,
            streak: 0,
            last_ok: None,
            restored: false,
        }
    }
}

impl Threshold {
    /// Starts from a decision kept in the store.
    pub fn restored(state: CheckState) -> Self {
        Self {
            state,
            restored: true,
            ..Self::default()
        }
    }

    /// Records one probe result; returns the new state when it changed.
    pub fn record(&mut self, ok: bool, failures: u32, successes: u32) -> Option<CheckState> {
        self.streak = if self.last_ok == Some(ok) {
            self.streak.saturating_add(1)
        } else {
            1
        };
        self.last_ok = Some(ok);
        let next = if matches!(self.state, CheckState::Preparing | CheckState::NoData) {
            // A check with no decision is decided by its first result.
            if ok {
                CheckState::Ok
            } else {
                CheckState::Error
            }
        } else if ok && self.streak >= successes {
            CheckState::Ok
        } else if !ok && self.streak >= failures {
            CheckState::Error
        } else {
            self.state
        };
        self.restored = false;
        (next != self.state).then(|| {
            self.state = next;
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CheckState::*;

    /// Feeds results (true = probe passed) and returns the state after each.
    fn run(start: Threshold, results: &[bool]) -> Vec<CheckState> {
        let mut t = start;
        results
            .iter()
            .map(|&ok| {
                t.record(ok, 3, 2);
                t.state
            })
            .collect()
    }

    #[test]
    fn thresholds_of_spec_and_seed_000() {
        for (what, start, results, expect) in [
            (
                "a new check is decided by its first result (ok)",
                Threshold::default(),
                vec![true],
                vec![Ok],
            ),
            (
                "a new check is decided by its first result (error)",
                Threshold::default(),
                vec![false],
                vec![Error],
            ),
            (
                "after Required Failures (3) consecutive failures it becomes Error",
                Threshold::default(),
                vec![true, false, false, false],
                vec![Ok, Ok, Ok, Error],
            ),
            (
                "after Required Successes (2) consecutive successes it becomes OK",
                Threshold::default(),
                vec![false, true, true],
                vec![Error, Error, Ok],
            ),
            (
                "a success breaks a run of failures",
                Threshold::default(),
                vec![true, false, false, true, false, false],
                vec![Ok, Ok, Ok, Ok, Ok, Ok],
            ),
            (
                "a restored decision holds until thresholds move it",
                Threshold::restored(Ok),
                vec![false, false, false],
                vec![Ok, Ok, Error],
            ),
        ] {
            assert_eq!(run(start, &results), expect, "{what}");
        }
    }

    #[test]
    fn record_reports_only_transitions_and_clears_restored() {
        let mut t = Threshold::restored(Error);
        assert_eq!(t.record(false, 3, 2), None);
        assert!(!t.restored);
        assert_eq!(t.record(true, 3, 2), None);
        assert_eq!(t.record(true, 3, 2), Some(Ok));
    }
}
