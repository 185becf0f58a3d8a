//! Judging a check that runs in another datacenter from its devices'
//! reports (spec §4): the freshest report of each device there, combined by
//! the check's policy, so one isolated prober cannot flip an answer. A
//! report older than three intervals counts as No Data.

use std::time::Duration;

use crate::{model::config::Policy, resolve::CheckState};

/// One device's latest word on a check instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    pub state: CheckState,
    /// How old the report is.
    pub age: Duration,
}

/// The state this device uses for a check probed elsewhere.
pub fn combine(policy: Policy, interval: Duration, reports: &[Reported]) -> CheckState {
    let fresh: Vec<CheckState> = reports
        .iter()
        .filter(|r| r.age <= interval * 3)
        .map(|r| r.state)
        .filter(|s| matches!(s, CheckState::Ok | CheckState::Error))
        .collect();
    if fresh.is_empty() {
        return CheckState::NoData;
    }
    let ok = fresh.iter().filter(|s| **s == CheckState::Ok).count();
    let decided_ok = match policy {
        Policy::Any => ok > 0,
        Policy::All => ok == fresh.len(),
        Policy::Majority => ok * 2 > fresh.len(),
    };
    if decided_ok {
        CheckState::Ok
    } else {
        CheckState::Error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CheckState::*;

    fn r(state: CheckState, secs: u64) -> Reported {
        Reported {
            state,
            age: Duration::from_secs(secs),
        }
    }

    #[test]
    fn policies_and_freshness_of_spec_section_4() {
        let i = Duration::from_secs(5);
        for (what, policy, reports, expect) in [
            (
                "any OK device suffices (default)",
                Policy::Any,
                vec![r(Ok, 1), r(Error, 1)],
                Ok,
            ),
            (
                "any: all failing is Error",
                Policy::Any,
                vec![r(Error, 1), r(Error, 2)],
                Error,
            ),
            (
                "all: one failing device is Error",
                Policy::All,
                vec![r(Ok, 1), r(Error, 1)],
                Error,
            ),
            (
                "all: every device OK",
                Policy::All,
                vec![r(Ok, 1), r(Ok, 1)],
                Ok,
            ),
            (
                "majority: 2 of 3",
                Policy::Majority,
                vec![r(Ok, 1), r(Ok, 1), r(Error, 1)],
                Ok,
            ),
            (
                "majority: a tie is not a majority",
                Policy::Majority,
                vec![r(Ok, 1), r(Error, 1)],
                Error,
            ),
            (
                "a report older than 3 intervals is No Data",
                Policy::Any,
                vec![r(Ok, 16)],
                NoData,
            ),
            (
                "stale reports are left out of the vote",
                Policy::All,
                vec![r(Ok, 1), r(Error, 20)],
                Ok,
            ),
            ("no report at all is No Data", Policy::Any, vec![], NoData),
            (
                "reports still Preparing do not vote",
                Policy::Any,
                vec![r(Preparing, 1)],
                NoData,
            ),
        ] {
            assert_eq!(combine(policy, i, &reports), expect, "{what}");
        }
    }
}
