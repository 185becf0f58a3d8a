//! Verdicts on peers taken only by the time this device was awake to hear
//! them.

use super::*;
use gtm_model::config::Policy;
use gtm_resolve::CheckState;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn a_datacenter_is_down_only_when_its_silence_was_heard_while_awake() {
    for (what, silences, awake, expect) in [
        (
            "every device silent, this device awake all along: down",
            vec![Some(secs(10)), Some(secs(12))],
            secs(600),
            Some(false),
        ),
        (
            "one device heard lately: up, however briefly awake",
            vec![Some(secs(1)), Some(secs(9))],
            secs(1),
            Some(true),
        ),
        (
            "silent for 9 s, but this device was stopped until 3 s ago: not judged",
            vec![Some(secs(9)), Some(secs(9))],
            secs(3),
            None,
        ),
        (
            "just started or joined (awake 0 s): not judged",
            vec![Some(secs(40))],
            Duration::ZERO,
            None,
        ),
        (
            "awake for longer than the silence limit since a stall: down",
            vec![Some(secs(30))],
            secs(7),
            Some(false),
        ),
        (
            "silent exactly as long as the limit: still up",
            vec![Some(DEVICE_SILENT_AFTER)],
            secs(600),
            Some(true),
        ),
    ] {
        assert_eq!(verdict(&silences, awake, heard_lately), expect, "{what}");
    }
}

#[test]
fn a_remote_check_goes_no_data_only_by_reports_missed_while_awake() {
    let lifetime = combine::lifetime(secs(1), REPORT_EVERY);
    let judge = |ages: Vec<u64>, states: Vec<CheckState>, awake: Duration| {
        let silences: Vec<Option<Duration>> = ages.iter().map(|a| Some(secs(*a))).collect();
        verdict(&silences, awake, |ages| {
            let seen: Vec<Reported> = ages
                .iter()
                .zip(&states)
                .map(|(age, state)| Reported {
                    state: *state,
                    age: age.unwrap_or_default(),
                })
                .collect();
            combine(Policy::Any, lifetime, &seen)
        })
    };
    // Stale reports while awake: No Data, as ever.
    assert_eq!(
        judge(vec![30], vec![CheckState::Ok], secs(600)),
        Some(CheckState::NoData)
    );
    // Stale only because this device was stopped: kept as it was.
    assert_eq!(judge(vec![30], vec![CheckState::Ok], secs(2)), None);
    // A fresh report decides at once.
    assert_eq!(
        judge(
            vec![1, 30],
            vec![CheckState::Error, CheckState::Ok],
            secs(2)
        ),
        None,
        "the stale OK would still count by the time awake: not judged yet"
    );
    assert_eq!(
        judge(vec![1], vec![CheckState::Error], secs(0)),
        Some(CheckState::Error)
    );
    // No report at all: No Data either way.
    assert_eq!(
        judge(Vec::new(), Vec::new(), secs(0)),
        Some(CheckState::NoData)
    );
}
