//! Health inputs (docs/health.md, "Inputs"): the replicated reports of push
//! checks and the alerts an Alertmanager reported firing, as every device
//! installs them, and how a push or alertmanager check instance reads them
//! at each evaluation.

use std::{sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use gtm_model::inputs::{InputState, alert_matches};

use super::{ProbeResult, Target};

/// The committed inputs, swapped whole on each change.
#[derive(Debug, Default)]
pub struct Inputs {
    state: ArcSwap<InputState>,
}

impl Inputs {
    pub fn store(&self, state: InputState) {
        self.state.store(Arc::new(state));
    }

    pub fn load(&self) -> Arc<InputState> {
        self.state.load_full()
    }
}

/// What `$address` stands for: the address, or the check's target.
pub fn address_text(target: &Target) -> String {
    target.host.to_string()
}

/// A push check instance's evaluation at `now_ms`: its last report while
/// it is fresh, a failure once it is older than `stale_after`; `None` when
/// there was never a report (the instance waits, see [`waits`]).
pub fn push_result(
    state: &InputState,
    key: &str,
    stale_after: Duration,
    now_ms: u64,
) -> Option<ProbeResult> {
    let pushed = state.pushes.get(key)?;
    let age = Duration::from_millis(now_ms.saturating_sub(pushed.time_ms));
    if age > stale_after {
        return Some(Err(format!(
            "no report for {} s (stale_after {} s)",
            age.as_secs(),
            stale_after.as_secs_f64()
        )));
    }
    let reason = match (pushed.ok, pushed.reason.is_empty()) {
        (true, true) => "reported ok".to_string(),
        (false, true) => "reported error".to_string(),
        (_, false) => format!("reported: {}", pushed.reason),
    };
    Some(if pushed.ok { Ok(reason) } else { Err(reason) })
}

/// Whether a push instance that started `running` ago waits for its first
/// report: it has none yet, and `stale_after` has not passed since it
/// started (a new check is not an error before anyone could report).
pub fn waits(state: &InputState, key: &str, stale_after: Duration, running: Duration) -> bool {
    !state.pushes.contains_key(key) && running <= stale_after
}

/// The failure when a push instance never got a report.
pub fn never_reported(stale_after: Duration) -> String {
    format!(
        "no report in {} s since the check started",
        stale_after.as_secs_f64()
    )
}

/// An alertmanager check instance's evaluation: a failure while an alert
/// that carries its labels fires.
pub fn alert_result(
    state: &InputState,
    labels: &std::collections::BTreeMap<String, String>,
    address: &str,
) -> ProbeResult {
    let mut firing = state
        .alerts
        .values()
        .filter(|a| alert_matches(labels, address, &a.labels));
    match firing.next() {
        None => Ok("no alert firing".to_string()),
        Some(first) => {
            let more = firing.count();
            let also = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            Err(format!("alert firing: {}{also}", first.summary))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_model::{
        actor::Actor,
        inputs::{Firing, Pushed},
    };

    #[test]
    fn a_push_stands_until_it_is_stale() {
        let mut state = InputState::default();
        let s = Duration::from_secs;
        assert_eq!(push_result(&state, "beat@192.0.2.1", s(15), 1_000), None);
        assert!(waits(&state, "beat@192.0.2.1", s(15), s(3)));
        assert!(!waits(&state, "beat@192.0.2.1", s(15), s(16)));
        state.pushes.insert(
            "beat@192.0.2.1".into(),
            Pushed {
                ok: false,
                reason: "disk full".into(),
                time_ms: 10_000,
                actor: Actor::default(),
            },
        );
        assert_eq!(
            push_result(&state, "beat@192.0.2.1", s(15), 20_000),
            Some(Err("reported: disk full".into()))
        );
        let stale = push_result(&state, "beat@192.0.2.1", s(15), 40_000).unwrap();
        assert_eq!(stale, Err("no report for 30 s (stale_after 15 s)".into()));
    }

    #[test]
    fn an_alert_fails_the_instances_whose_labels_it_carries() {
        let mut state = InputState::default();
        let labels = [("alertname", "Down"), ("instance", "$address")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            alert_result(&state, &labels, "192.0.2.1"),
            Ok("no alert firing".into())
        );
        state.alerts.insert(
            "f1".into(),
            Firing {
                labels: [("alertname", "Down"), ("instance", "192.0.2.1")]
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                summary: "backend down".into(),
                since_ms: 1,
            },
        );
        assert_eq!(
            alert_result(&state, &labels, "192.0.2.1"),
            Err("alert firing: backend down".into())
        );
        assert!(alert_result(&state, &labels, "192.0.2.2").is_ok());
    }
}
