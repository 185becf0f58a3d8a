//! Health inputs as they are replicated (key `inputs` of the committed
//! map): the last report of each push check instance, and the alerts an
//! Alertmanager reported firing. The state machine changes it
//! (`gtm_node::machine::inputs`); every device's probers read it
//! (docs/health.md, "Inputs").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::actor::Actor;

pub const INPUTS_KEY: &str = "inputs";
/// The most alerts kept firing at once: an Alertmanager that reports more
/// (that the checks' labels select) is refused, so the state stays small.
pub const MAX_FIRING: usize = 10_000;
/// The longest reason a report keeps (characters).
pub const MAX_REASON: usize = 256;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InputState {
    /// The last report of each push check instance, by instance
    /// (`beat@192.0.2.10`, or `beat` for a check with a target).
    #[serde(default)]
    pub pushes: BTreeMap<String, Pushed>,
    /// The alerts firing, by the Alertmanager's fingerprint.
    #[serde(default)]
    pub alerts: BTreeMap<String, Firing>,
}

/// A push check's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pushed {
    pub ok: bool,
    /// As the reporter wrote it (at most [`MAX_REASON`] characters).
    #[serde(default)]
    pub reason: String,
    /// When the device that received it committed it (Unix ms).
    pub time_ms: u64,
    pub actor: Actor,
}

/// An alert reported firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Firing {
    pub labels: BTreeMap<String, String>,
    /// Its `summary` annotation, else its `alertname` label.
    #[serde(default)]
    pub summary: String,
    /// When it was first reported firing (Unix ms).
    pub since_ms: u64,
}

/// The inputs of a map (empty when none was ever reported).
pub fn state_of(value: Option<&[u8]>) -> InputState {
    value
        .and_then(|v| serde_json::from_slice(v).ok())
        .unwrap_or_default()
}

/// Whether an alert's labels carry every label of `wanted`, each exactly,
/// with `$address` in a wanted value standing for `address`.
pub fn alert_matches(
    wanted: &BTreeMap<String, String>,
    address: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    !wanted.is_empty()
        && wanted.iter().all(|(k, v)| {
            labels
                .get(k)
                .is_some_and(|got| *got == v.replace("$address", address))
        })
}

/// Whether an alert's labels could match `wanted` for some address: the
/// labels whose wanted value names `$address` match any value that has the
/// rest of the wanted text around it.
pub fn alert_may_match(
    wanted: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    !wanted.is_empty()
        && wanted.iter().all(|(k, v)| {
            labels
                .get(k)
                .is_some_and(|got| match v.split_once("$address") {
                    None => got == v,
                    Some((before, after)) => {
                        got.len() >= before.len() + after.len()
                            && got.starts_with(before)
                            && got.ends_with(after)
                    }
                })
        })
}

/// `text` cut to [`MAX_REASON`] characters.
pub fn cut_reason(text: &str) -> String {
    match text.char_indices().nth(MAX_REASON) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn alerts_match_by_labels_with_the_address() {
        let wanted = map(&[("alertname", "Down"), ("instance", "$address:9100")]);
        let alert = map(&[
            ("alertname", "Down"),
            ("instance", "192.0.2.10:9100"),
            ("job", "node"),
        ]);
        assert!(alert_matches(&wanted, "192.0.2.10", &alert));
        assert!(!alert_matches(&wanted, "192.0.2.11", &alert));
        assert!(alert_may_match(&wanted, &alert));
        let other = map(&[("alertname", "Up"), ("instance", "192.0.2.10:9100")]);
        assert!(!alert_may_match(&wanted, &other));
        assert!(!alert_may_match(&wanted, &map(&[("alertname", "Down")])));
        assert!(!alert_matches(&BTreeMap::new(), "x", &alert));
    }

    #[test]
    fn reasons_are_cut() {
        assert_eq!(cut_reason("short"), "short");
        let long = "é".repeat(MAX_REASON + 5);
        assert_eq!(cut_reason(&long).chars().count(), MAX_REASON + 1);
    }
}
