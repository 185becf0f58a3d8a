//! Health inputs in the replicated map (docs/health.md, "Inputs"): push
//! checks' reports and the alerts an Alertmanager reported firing, applied
//! like any command so every device's checks read the same reports, after
//! a restart too.
//!
//! Keys `inputs/pushes` and `inputs/alerts`: JSON maps of
//! [`gtm_model::inputs`]. Two keys, so a push does not write the alerts
//! again. Validation reads the committed configuration's `[[check]]`s
//! only: a report names a push check (an address for a template, none for
//! a check with a target), and only alerts some alertmanager check's
//! labels can match are kept, at most [`MAX_FIRING`].

use std::collections::BTreeMap;

use super::{Change, rejected};
use crate::command::{Action, AlertReport, Command, Outcome};
use gtm_cluster::{Map, Write};
use gtm_model::{
    Config,
    config::CheckType,
    error::ErrorKind,
    inputs::{Firing, InputState, MAX_FIRING, Pushed, alert_may_match, cut_reason},
};

pub const PUSHES_KEY: &str = "inputs/pushes";
pub const ALERTS_KEY: &str = "inputs/alerts";
/// The most push instances kept: far more than addresses a configuration
/// names checks on.
pub const MAX_PUSHES: usize = 100_000;

/// The committed inputs of a map.
pub fn state_of(kv: &Map) -> InputState {
    InputState {
        pushes: read(kv, PUSHES_KEY),
        alerts: read(kv, ALERTS_KEY),
    }
}

fn read<T: serde::de::DeserializeOwned + Default>(kv: &Map, key: &str) -> T {
    kv.get(key)
        .and_then(|v| serde_json::from_slice(v).ok())
        .unwrap_or_default()
}

fn put<T: serde::Serialize>(key: &str, value: &T) -> Write {
    Write::Put {
        key: key.into(),
        value: serde_json::to_vec(value).unwrap_or_default(),
    }
}

/// Applies an input command; `None` for other commands.
pub(super) fn run(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
) -> Option<Change> {
    let applied = |changed: bool, line: String, writes: Vec<Write>| Change {
        writes,
        outcome: Outcome::Applied {
            version,
            index,
            changed,
            changes: vec![line],
        },
    };
    Some(match &command.action {
        Action::Push {
            check,
            address,
            ok,
            reason,
        } => {
            let Some(c) = current.checks.iter().find(|c| &c.name == check) else {
                return Some(rejected(
                    ErrorKind::NotFound,
                    format!("no check named \"{check}\""),
                ));
            };
            if c.kind != CheckType::Push {
                return Some(rejected(
                    ErrorKind::BadRequest,
                    format!("check \"{check}\" is not a push check; only push checks take reports"),
                ));
            }
            let key = match (address, c.target.is_some()) {
                (Some(ip), false) => format!("{check}@{ip}"),
                (None, true) => check.clone(),
                (None, false) => {
                    return Some(rejected(
                        ErrorKind::BadRequest,
                        format!(
                            "check \"{check}\" is a template: name the address the report is for (\"address\": \"192.0.2.10\")"
                        ),
                    ));
                }
                (Some(_), true) => {
                    return Some(rejected(
                        ErrorKind::BadRequest,
                        format!("check \"{check}\" has a target: its reports name no address"),
                    ));
                }
            };
            let mut pushes: BTreeMap<String, Pushed> = read(kv, PUSHES_KEY);
            if !pushes.contains_key(&key) && pushes.len() >= MAX_PUSHES {
                return Some(rejected(
                    ErrorKind::TooLarge,
                    format!("{MAX_PUSHES} push check instances report already"),
                ));
            }
            let state = if *ok { "ok" } else { "error" };
            pushes.insert(
                key.clone(),
                Pushed {
                    ok: *ok,
                    reason: cut_reason(reason),
                    time_ms: command.time_ms,
                    actor: command.actor.clone(),
                },
            );
            applied(
                true,
                format!("{key} reported {state}"),
                vec![put(PUSHES_KEY, &pushes)],
            )
        }
        Action::Alerts { alerts } => {
            let mut firing: BTreeMap<String, Firing> = read(kv, ALERTS_KEY);
            let before = firing.clone();
            let (fired, resolved, ignored) = take(current, &mut firing, alerts, command.time_ms);
            if firing.len() > MAX_FIRING {
                return Some(rejected(
                    ErrorKind::TooLarge,
                    format!(
                        "{} alerts would be firing; at most {MAX_FIRING} are kept, so none of this notification's are",
                        firing.len()
                    ),
                ));
            }
            let line =
                format!("alerts: {fired} firing, {resolved} resolved, {ignored} no check watches");
            let changed = firing != before;
            let writes = if changed {
                vec![put(ALERTS_KEY, &firing)]
            } else {
                Vec::new()
            };
            applied(changed, line, writes)
        }
        _ => return None,
    })
}

/// Takes a notification's alerts into `firing`: (firing, resolved,
/// ignored) counts. An alert no alertmanager check's labels can match is
/// ignored.
fn take(
    config: &Config,
    firing: &mut BTreeMap<String, Firing>,
    alerts: &[AlertReport],
    now_ms: u64,
) -> (usize, usize, usize) {
    let watched: Vec<&BTreeMap<String, String>> = config
        .checks
        .iter()
        .filter(|c| c.kind == CheckType::Alertmanager)
        .map(|c| &c.labels)
        .collect();
    let (mut fired, mut resolved, mut ignored) = (0, 0, 0);
    for a in alerts {
        if !a.firing {
            if firing.remove(&a.fingerprint).is_some() {
                resolved += 1;
            }
            continue;
        }
        if !watched.iter().any(|w| alert_may_match(w, &a.labels)) {
            ignored += 1;
            continue;
        }
        fired += 1;
        let since_ms = firing.get(&a.fingerprint).map_or(now_ms, |f| f.since_ms);
        firing.insert(
            a.fingerprint.clone(),
            Firing {
                labels: a.labels.clone(),
                summary: cut_reason(&a.summary),
                since_ms,
            },
        );
    }
    (fired, resolved, ignored)
}

/// After a configuration change: drops the reports of instances no push
/// check has now, and the alerts no alertmanager check can match.
pub(super) fn prune(kv: &Map, new: &Config) -> Vec<Write> {
    let mut writes = Vec::new();
    if kv.contains_key(PUSHES_KEY) {
        let old: BTreeMap<String, Pushed> = read(kv, PUSHES_KEY);
        let mut pushes = old.clone();
        pushes.retain(|key, _| {
            let name = key.split_once('@').map_or(key.as_str(), |(n, _)| n);
            new.checks
                .iter()
                .any(|c| c.name == name && c.kind == CheckType::Push)
        });
        if pushes != old {
            writes.push(put(PUSHES_KEY, &pushes));
        }
    }
    if kv.contains_key(ALERTS_KEY) {
        let old: BTreeMap<String, Firing> = read(kv, ALERTS_KEY);
        let mut alerts = old.clone();
        let watched: Vec<&BTreeMap<String, String>> = new
            .checks
            .iter()
            .filter(|c| c.kind == CheckType::Alertmanager)
            .map(|c| &c.labels)
            .collect();
        alerts.retain(|_, a| watched.iter().any(|w| alert_may_match(w, &a.labels)));
        if alerts != old {
            writes.push(put(ALERTS_KEY, &alerts));
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_model::actor::Actor;

    const CONFIG: &str = r#"
[[check]]
name = "beat"
type = "push"

[[check]]
name = "job"
type = "push"
target = "nightly"

[[check]]
name = "am"
type = "alertmanager"
labels = { alertname = "Down", instance = "$address:9100" }

[[check]]
name = "web"
type = "http"
"#;

    /// Applies `action` through the whole machine, keeping the map.
    fn apply(machine: &super::super::GtmMachine, kv: &mut Map, action: Action) -> Outcome {
        let mut command = Command::new(
            Actor {
                user: "web1".into(),
                device: "gtm1".into(),
            },
            None,
            action,
        );
        command.time_ms = 5_000;
        let index = kv.len() as u64 + 1;
        crate::machine::apply_for_test(machine, kv, index, &command)
    }

    fn configured(text: &str) -> (super::super::GtmMachine, Map) {
        let machine = super::super::GtmMachine::default();
        let mut kv = Map::new();
        let outcome = apply(&machine, &mut kv, Action::ApplyConfig { text: text.into() });
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
        (machine, kv)
    }

    fn push(check: &str, address: Option<&str>, ok: bool) -> Action {
        Action::Push {
            check: check.into(),
            address: address.map(|a| a.parse().unwrap()),
            ok,
            reason: "r".into(),
        }
    }

    fn refused(outcome: Outcome) -> String {
        match outcome {
            Outcome::Rejected(e) => e.message,
            other => panic!("applied: {other:?}"),
        }
    }

    #[test]
    fn reports_name_a_push_check_instance() {
        let (m, mut kv) = configured(CONFIG);
        assert!(matches!(
            apply(&m, &mut kv, push("beat", Some("192.0.2.1"), false)),
            Outcome::Applied { changed: true, .. }
        ));
        assert!(matches!(
            apply(&m, &mut kv, push("job", None, true)),
            Outcome::Applied { .. }
        ));
        let state = state_of(&kv);
        assert_eq!(
            state.pushes.keys().collect::<Vec<_>>(),
            ["beat@192.0.2.1", "job"]
        );
        assert!(!state.pushes["beat@192.0.2.1"].ok);
        assert_eq!(state.pushes["job"].time_ms, 5_000);
        assert!(refused(apply(&m, &mut kv, push("web", None, true))).contains("not a push check"));
        assert!(refused(apply(&m, &mut kv, push("nope", None, true))).contains("no check named"));
        assert!(refused(apply(&m, &mut kv, push("beat", None, true))).contains("is a template"));
        assert!(
            refused(apply(&m, &mut kv, push("job", Some("192.0.2.1"), true)))
                .contains("has a target")
        );
    }

    fn alert(fp: &str, firing: bool, instance: &str) -> AlertReport {
        AlertReport {
            fingerprint: fp.into(),
            firing,
            labels: [("alertname", "Down"), ("instance", instance)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            summary: "down".into(),
        }
    }

    #[test]
    fn alerts_fire_and_resolve_and_unwatched_ones_are_not_kept() {
        let (m, mut kv) = configured(CONFIG);
        let out = apply(
            &m,
            &mut kv,
            Action::Alerts {
                alerts: vec![
                    alert("a", true, "192.0.2.1:9100"),
                    alert("b", true, "192.0.2.1:80"),
                ],
            },
        );
        match out {
            Outcome::Applied { changes, .. } => {
                assert_eq!(
                    changes,
                    ["alerts: 1 firing, 0 resolved, 1 no check watches"]
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(state_of(&kv).alerts.keys().collect::<Vec<_>>(), ["a"]);
        apply(
            &m,
            &mut kv,
            Action::Alerts {
                alerts: vec![alert("a", false, "192.0.2.1:9100")],
            },
        );
        assert!(state_of(&kv).alerts.is_empty());
    }

    #[test]
    fn a_new_configuration_drops_what_no_check_reads() {
        let (m, mut kv) = configured(CONFIG);
        apply(&m, &mut kv, push("beat", Some("192.0.2.1"), true));
        apply(
            &m,
            &mut kv,
            Action::Alerts {
                alerts: vec![alert("a", true, "192.0.2.1:9100")],
            },
        );
        let fewer = "[[check]]\nname = \"job\"\ntype = \"push\"\ntarget = \"x\"\n";
        let outcome = apply(&m, &mut kv, Action::ApplyConfig { text: fewer.into() });
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
        let state = state_of(&kv);
        assert!(state.pushes.is_empty() && state.alerts.is_empty());
    }
}
