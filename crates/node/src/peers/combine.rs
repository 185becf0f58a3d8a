//! Judging a check that runs in another datacenter from its devices'
//! reports (spec §4): the freshest report of each device there, combined by
//! the check's policy, so one isolated prober cannot flip an answer. A
//! report older than its [`lifetime`] counts as No Data.

use std::time::Duration;

use gtm_model::config::Policy;
use gtm_resolve::CheckState;

/// One device's latest word on a check instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    pub state: CheckState,
    /// How old the report is.
    pub age: Duration,
}

/// How long a report about a check counts: three of the check's intervals,
/// but never less than three report periods, since a report cannot be
/// fresher than the period reports come at (a 200 ms check reported every
/// 2 s would otherwise be No Data most of the time).
pub fn lifetime(interval: Duration, report_every: Duration) -> Duration {
    interval.max(report_every).saturating_mul(3)
}

/// The state this device uses for a check probed elsewhere, from reports
/// that count for `lifetime`.
pub fn combine(policy: Policy, lifetime: Duration, reports: &[Reported]) -> CheckState {
    let fresh: Vec<CheckState> = reports
        .iter()
        .filter(|r| r.age <= lifetime)
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
        let i = lifetime(Duration::from_secs(5), Duration::from_secs(2));
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

    #[test]
    fn a_report_counts_for_three_report_periods_at_least() {
        let every = Duration::from_secs(2);
        let ms = Duration::from_millis;
        // Intervals shorter than the report period: reports come every 2 s
        // and count for 6 s, whatever the interval.
        for interval in [ms(100), ms(500), ms(670), ms(2000)] {
            assert_eq!(lifetime(interval, every), ms(6000), "{interval:?}");
            let at = |age| Reported { state: Ok, age };
            // A report just before the next one is due, and one late by a
            // whole period, still count.
            assert_eq!(
                combine(Policy::Any, lifetime(interval, every), &[at(ms(1999))]),
                Ok
            );
            assert_eq!(
                combine(Policy::Any, lifetime(interval, every), &[at(ms(4000))]),
                Ok
            );
            assert_eq!(
                combine(Policy::Any, lifetime(interval, every), &[at(ms(6001))]),
                NoData
            );
        }
        // Longer intervals: three intervals.
        assert_eq!(
            lifetime(Duration::from_secs(10), every),
            Duration::from_secs(30)
        );
        assert_eq!(
            combine(
                Policy::Any,
                lifetime(Duration::from_secs(10), every),
                &[r(Error, 29)]
            ),
            Error
        );
        assert_eq!(lifetime(Duration::MAX, every), Duration::MAX, "no overflow");
    }
}
