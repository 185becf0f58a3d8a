//! Operator state in the replicated map: drains, manual check states and
//! failback resumes (docs/health.md), applied by the state machine like any
//! command so every device answers the same and nothing is lost on restart.
//!
//! Key `operator`: JSON [`OperatorState`] ([`gtm_model::operator`]). Operator commands do not move the
//! configuration version. Validation reads the committed configuration: a
//! drain names an address a steered record has (or a datacenter that
//! exists), a check set names a manual check, and an undrain names exactly
//! an active drain.

use std::collections::{BTreeMap, BTreeSet};

use super::{Change, rejected};
use crate::command::{Action, Command, Outcome};
use gtm_cluster::{Map, Write};
pub use gtm_model::operator::{
    Drain, ManualCheck, OPERATOR_KEY, OperatorState, RECENT_KEPT, Recent, state_of,
};
use gtm_model::{
    Config,
    compile::{Compiled, Content, compile},
    config::CheckType,
    drain::DrainTarget,
    error::ErrorKind,
};

/// Adds a GTM Logs line that every device logs when it installs the state.
pub(super) fn note(state: &mut OperatorState, object: &str, text: String) {
    note_as(state, object, text, gtm_model::severity::Severity::Info);
}

/// [`note`] with a severity.
pub(super) fn note_as(
    state: &mut OperatorState,
    object: &str,
    text: String,
    severity: gtm_model::severity::Severity,
) {
    let seq = state.recent.last().map_or(1, |r| r.seq + 1);
    state.recent.push(Recent {
        seq,
        object: object.to_string(),
        text,
        severity,
    });
    let excess = state.recent.len().saturating_sub(RECENT_KEPT);
    state.recent.drain(..excess);
}

pub(super) fn put(state: &OperatorState) -> Write {
    Write::Put {
        key: OPERATOR_KEY.into(),
        value: serde_json::to_vec(state).unwrap_or_default(),
    }
}

/// The steered records of a configuration: label → address displays.
fn steered(compiled: &Compiled) -> BTreeMap<String, BTreeSet<String>> {
    compiled
        .zones
        .iter()
        .flat_map(|z| &z.records)
        .filter_map(|r| match &r.content {
            Content::Steered(s) => {
                Some((r.label(), s.addresses.iter().map(|a| a.display()).collect()))
            }
            Content::Static(_) | Content::Alias(_) => None,
        })
        .collect()
}

/// Applies an operator command; `None` for other commands.
pub(super) fn run(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
) -> Option<Change> {
    let applied = |changed: bool, line: String, state: Option<OperatorState>| Change {
        writes: state.iter().map(put).collect(),
        outcome: Outcome::Applied {
            version,
            index,
            changed,
            changes: vec![line],
        },
    };
    let compiled = match &command.action {
        Action::Drain { .. } | Action::SetCheck { .. } | Action::Resume { .. } => {
            match compile(current) {
                Ok(c) => c,
                Err(e) => return Some(rejected(ErrorKind::Cluster, e.to_string())),
            }
        }
        _ => return None,
    };
    let mut state = state_of(kv);
    let who = &command.actor;
    Some(match &command.action {
        Action::Drain { target, drained } => {
            let object = match target {
                DrainTarget::Address { record, address } => {
                    let records = steered(&compiled);
                    let known = match record {
                        Some(r) => records.get(r).is_some_and(|a| a.contains(address)),
                        None => records.values().any(|a| a.contains(address)),
                    };
                    if !known {
                        return Some(rejected(
                            ErrorKind::NotFound,
                            format!(
                                "no steered record{} has the address {address}",
                                record.as_ref().map_or(String::new(), |r| format!(" {r}"))
                            ),
                        ));
                    }
                    address.clone()
                }
                DrainTarget::Datacenter { name } => {
                    if !compiled.datacenters.iter().any(|d| &d.name == name) {
                        return Some(rejected(
                            ErrorKind::NotFound,
                            format!("no datacenter named \"{name}\""),
                        ));
                    }
                    name.clone()
                }
            };
            let active = state
                .drains
                .iter()
                .position(|d| d.target().as_ref() == Some(target));
            match (drained, active) {
                (true, Some(_)) => applied(false, format!("{target} is drained already"), None),
                (true, None) => {
                    let (address, record, datacenter) = match target.clone() {
                        DrainTarget::Address { record, address } => (Some(address), record, None),
                        DrainTarget::Datacenter { name } => (None, None, Some(name)),
                    };
                    state.drains.push(Drain {
                        address,
                        record,
                        datacenter,
                        actor: who.clone(),
                        time_ms: command.time_ms,
                    });
                    let line = format!("drained {target}");
                    note(&mut state, &object, format!("{line} ({who})"));
                    applied(true, line, Some(state))
                }
                (false, Some(i)) => {
                    state.drains.remove(i);
                    let line = format!("undrained {target}");
                    note(&mut state, &object, format!("{line} ({who})"));
                    applied(true, line, Some(state))
                }
                (false, None) => rejected(ErrorKind::NotFound, not_drained(&state, target)),
            }
        }
        Action::SetCheck {
            check,
            state: wanted,
        } => {
            let Some(spec) = compiled.checks.iter().find(|c| &c.name == check) else {
                return Some(rejected(
                    ErrorKind::NotFound,
                    format!("no check named \"{check}\""),
                ));
            };
            if spec.kind != CheckType::Manual {
                return Some(rejected(
                    ErrorKind::NotManual,
                    format!(
                        "check \"{check}\" is a {:?} check; only manual checks are set by an operator",
                        spec.kind
                    )
                    .to_lowercase(),
                ));
            }
            let wanted = wanted.to_ascii_lowercase();
            if wanted != "ok" && wanted != "error" {
                return Some(rejected(
                    ErrorKind::BadRequest,
                    format!("state \"{wanted}\" is not ok or error"),
                ));
            }
            if state.checks.get(check).is_some_and(|c| c.state == wanted) {
                return Some(applied(
                    false,
                    format!("check {check} is {wanted} already"),
                    None,
                ));
            }
            state.checks.insert(
                check.clone(),
                ManualCheck {
                    state: wanted.clone(),
                    actor: who.clone(),
                    time_ms: command.time_ms,
                },
            );
            let line = format!("check {check} set to {wanted}");
            note(&mut state, check, format!("{line} ({who})"));
            applied(true, line, Some(state))
        }
        Action::Resume { record } => {
            if !steered(&compiled).contains_key(record) {
                return Some(rejected(
                    ErrorKind::NotFound,
                    format!("no steered record {record}"),
                ));
            }
            let count = state.resumes.entry(record.clone()).or_insert(0);
            *count = count.saturating_add(1);
            let line = format!("{record}: failback resumed");
            note(&mut state, record, format!("{line} ({who})"));
            applied(true, line, Some(state))
        }
        _ => return None,
    })
}

/// Why an undrain of `target` is refused: it names no active drain. Names
/// the active drains of the same address (or says there are none).
fn not_drained(state: &OperatorState, target: &DrainTarget) -> String {
    let same = |d: &&Drain| match target {
        DrainTarget::Address { address, .. } => d.address.as_ref() == Some(address),
        DrainTarget::Datacenter { name } => d.datacenter.as_ref() == Some(name),
    };
    let active: Vec<String> = state
        .drains
        .iter()
        .filter(same)
        .filter_map(|d| d.target().map(|t| t.to_string()))
        .collect();
    if active.is_empty() {
        format!("{target} is not drained; nothing to undrain")
    } else {
        format!(
            "{target} is not drained; the active drains are: {} (undrain exactly one of them)",
            active.join(", ")
        )
    }
}

/// After a configuration change: drops the operator state that names what
/// the new configuration no longer has (an address, a datacenter, a manual
/// check, a record), so it does not come back with a later configuration;
/// and notes `notes` (object, line) as `actor`'s.
pub(super) fn prune(
    kv: &Map,
    new: &Compiled,
    notes: &[(String, String)],
    actor: &gtm_model::actor::Actor,
) -> Option<Write> {
    if !kv.contains_key(OPERATOR_KEY) && notes.is_empty() {
        return None;
    }
    let old = state_of(kv);
    let records = steered(new);
    let mut state = old.clone();
    for (object, line) in notes {
        note(&mut state, object, format!("{line} ({actor})"));
    }
    state.drains.retain(|d| match d.target() {
        Some(DrainTarget::Address {
            record: Some(r),
            address,
        }) => records.get(&r).is_some_and(|a| a.contains(&address)),
        Some(DrainTarget::Address {
            record: None,
            address,
        }) => records.values().any(|a| a.contains(&address)),
        Some(DrainTarget::Datacenter { name }) => new.datacenters.iter().any(|d| d.name == name),
        None => false,
    });
    state.checks.retain(|name, _| {
        new.checks
            .iter()
            .any(|c| &c.name == name && c.kind == CheckType::Manual)
    });
    state.resumes.retain(|r, _| records.contains_key(r));
    (state != old).then(|| put(&state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_model::actor::Actor;

    const CONFIG: &str = r#"
[[datacenter]]
name = "east"

[[datacenter]]
name = "west"

[[check]]
name = "gate"
type = "manual"

[[check]]
name = "web"
type = "http"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.10", dc = "east" },
  { ip = "192.0.2.11", dc = "west" },
]

[[domain.record]]
name = "api"
type = "A"
addresses = [{ ip = "192.0.2.10", dc = "east" }]
"#;

    fn actor() -> Actor {
        Actor {
            user: "admin".into(),
            device: "gtm1".into(),
        }
    }

    /// Applies `action` through the whole machine, keeping the map.
    fn apply(machine: &super::super::GtmMachine, kv: &mut Map, action: Action) -> Outcome {
        let command = Command::new(actor(), None, action);
        let index = kv.len() as u64 + 1;
        crate::machine::apply_for_test(machine, kv, index, &command)
    }

    fn configured() -> (super::super::GtmMachine, Map) {
        let machine = super::super::GtmMachine::default();
        let mut kv = BTreeMap::new();
        let outcome = apply(
            &machine,
            &mut kv,
            Action::ApplyConfig {
                text: CONFIG.into(),
            },
        );
        assert!(
            matches!(outcome, Outcome::Applied { changed: true, .. }),
            "{outcome:?}"
        );
        (machine, kv)
    }

    fn drain(record: Option<&str>, address: &str, drained: bool) -> Action {
        Action::Drain {
            target: DrainTarget::Address {
                record: record.map(str::to_string),
                address: address.into(),
            },
            drained,
        }
    }

    fn error(outcome: &Outcome) -> (ErrorKind, String) {
        match outcome {
            Outcome::Rejected(e) => (e.error, e.message.clone()),
            Outcome::Applied { .. } => panic!("applied: {outcome:?}"),
        }
    }

    #[test]
    fn drains_are_replicated_state_and_undrain_is_exact() {
        let (machine, mut kv) = configured();
        let version = super::super::version_of(&kv);
        let first = apply(&machine, &mut kv, drain(None, "192.0.2.10", true));
        let Outcome::Applied {
            version: v,
            changed,
            changes,
            ..
        } = &first
        else {
            panic!("{first:?}")
        };
        assert_eq!(
            (*v, *changed),
            (version, true),
            "operator actions keep the version"
        );
        assert_eq!(
            changes,
            &vec!["drained 192.0.2.10 (every record)".to_string()]
        );
        assert_eq!(super::super::version_of(&kv), version);
        let state = state_of(&kv);
        assert_eq!(state.drains.len(), 1);
        assert_eq!(state.drains[0].actor, actor());
        assert_eq!(
            state.recent.last().unwrap().text,
            "drained 192.0.2.10 (every record) (admin on gtm1)"
        );

        // Again: applied, nothing changed.
        let again = apply(&machine, &mut kv, drain(None, "192.0.2.10", true));
        assert!(
            matches!(again, Outcome::Applied { changed: false, .. }),
            "{again:?}"
        );
        assert_eq!(state_of(&kv).drains.len(), 1);

        // An undrain of another scope names the active drain, changes nothing.
        let before = kv.get(OPERATOR_KEY).cloned();
        let wrong = apply(
            &machine,
            &mut kv,
            drain(Some("www.example.test/A"), "192.0.2.10", false),
        );
        let (kind, message) = error(&wrong);
        assert_eq!(kind, ErrorKind::NotFound);
        assert!(
            message.contains("the active drains are: 192.0.2.10 (every record)"),
            "{message}"
        );
        assert_eq!(kv.get(OPERATOR_KEY).cloned(), before);

        let undrain = apply(&machine, &mut kv, drain(None, "192.0.2.10", false));
        assert!(
            matches!(undrain, Outcome::Applied { changed: true, .. }),
            "{undrain:?}"
        );
        assert!(state_of(&kv).drains.is_empty());
        let (_, message) = error(&apply(&machine, &mut kv, drain(None, "192.0.2.10", false)));
        assert!(message.contains("is not drained"), "{message}");
    }

    #[test]
    fn operator_commands_are_validated_against_the_committed_configuration() {
        let (machine, mut kv) = configured();
        let cases = [
            (
                drain(None, "192.0.2.99", true),
                ErrorKind::NotFound,
                "no steered record has the address 192.0.2.99",
            ),
            (
                drain(Some("api.example.test/A"), "192.0.2.11", true),
                ErrorKind::NotFound,
                "no steered record api.example.test/A has the address 192.0.2.11",
            ),
            (
                Action::Drain {
                    target: DrainTarget::Datacenter {
                        name: "north".into(),
                    },
                    drained: true,
                },
                ErrorKind::NotFound,
                "no datacenter named \"north\"",
            ),
            (
                Action::SetCheck {
                    check: "nope".into(),
                    state: "ok".into(),
                },
                ErrorKind::NotFound,
                "no check named \"nope\"",
            ),
            (
                Action::SetCheck {
                    check: "web".into(),
                    state: "ok".into(),
                },
                ErrorKind::NotManual,
                "only manual checks",
            ),
            (
                Action::SetCheck {
                    check: "gate".into(),
                    state: "maybe".into(),
                },
                ErrorKind::BadRequest,
                "state \"maybe\" is not ok or error",
            ),
            (
                Action::Resume {
                    record: "nope.example.test/A".into(),
                },
                ErrorKind::NotFound,
                "no steered record nope.example.test/A",
            ),
        ];
        for (action, kind, text) in cases {
            let outcome = apply(&machine, &mut kv, action.clone());
            let (k, message) = error(&outcome);
            assert_eq!(k, kind, "{action:?}: {message}");
            assert!(message.contains(text), "{action:?}: {message}");
        }
        assert!(!kv.contains_key(OPERATOR_KEY), "rejections write nothing");
    }

    #[test]
    fn checks_resumes_and_pruning() {
        let (machine, mut kv) = configured();
        let set = |s: &str| Action::SetCheck {
            check: "gate".into(),
            state: s.into(),
        };
        assert!(matches!(
            apply(&machine, &mut kv, set("error")),
            Outcome::Applied { changed: true, .. }
        ));
        assert!(matches!(
            apply(&machine, &mut kv, set("ERROR")),
            Outcome::Applied { changed: false, .. }
        ));
        assert_eq!(state_of(&kv).checks["gate"].state, "error");
        let resume = Action::Resume {
            record: "www.example.test/A".into(),
        };
        apply(&machine, &mut kv, resume.clone());
        apply(&machine, &mut kv, resume);
        assert_eq!(state_of(&kv).resumes["www.example.test/A"], 2);
        apply(
            &machine,
            &mut kv,
            drain(Some("api.example.test/A"), "192.0.2.10", true),
        );
        apply(
            &machine,
            &mut kv,
            Action::Drain {
                target: DrainTarget::Datacenter {
                    name: "west".into(),
                },
                drained: true,
            },
        );
        assert_eq!(state_of(&kv).drains.len(), 2);

        // A configuration without the manual check, the api record and west
        // drops what named them.
        let smaller = CONFIG
            .replace("[[check]]\nname = \"gate\"\ntype = \"manual\"\n", "")
            .replace("[[domain.record]]\nname = \"api\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.10\", dc = \"east\" }]\n", "");
        assert!(!smaller.contains("gate") && !smaller.contains("api"));
        let outcome = apply(&machine, &mut kv, Action::ApplyConfig { text: smaller });
        assert!(
            matches!(outcome, Outcome::Applied { changed: true, .. }),
            "{outcome:?}"
        );
        let state = state_of(&kv);
        assert!(state.checks.is_empty(), "{state:?}");
        assert_eq!(state.drains.len(), 1, "{state:?}");
        assert_eq!(state.drains[0].datacenter.as_deref(), Some("west"));
        assert_eq!(state.resumes.len(), 1);
    }
}
