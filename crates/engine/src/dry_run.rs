//! What an operator action would change, before it is made: each steered
//! record's answers now and with the action, computed by the resolver
//! ([`gtm_resolve::evaluate`]) from this device's health view, as the
//! engine would after it. A drain or undrain ([`Engine::drain_preview`]):
//! `--dry-run` shows it, and a drain that would leave a record with no
//! answer is refused without `--force`. A manual check set
//! ([`Engine::check_preview`]) and a resume ([`Engine::resume_preview`]):
//! a schedule's dry run shows them.

use serde::{Deserialize, Serialize};

use super::Engine;
use super::{Inner, Steered, Threshold};
use gtm_model::{condition::CheckRef, config::CheckType, drain::DrainTarget};
use gtm_resolve as resolve;
use gtm_resolve::{Answer, CheckState, HealthView, Operator, PlaceAnswers};

/// A record whose answers an action would change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AnswerChange {
    pub record: String,
    pub before: AnswerSet,
    pub after: AnswerSet,
}

/// What a record answers its clients, taken together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AnswerSet {
    /// The addresses (a CNAME's targets) some client is answered with, as
    /// the configuration names them.
    pub addresses: Vec<String>,
    /// Some client is answered with the record's fail-safe records.
    #[serde(default)]
    pub fail_safe: bool,
}

impl AnswerSet {
    /// No client gets any answer: NOERROR with no record.
    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty() && !self.fail_safe
    }
}

/// Addresses only, no fail-safe.
impl From<Vec<String>> for AnswerSet {
    fn from(addresses: Vec<String>) -> Self {
        Self {
            addresses,
            fail_safe: false,
        }
    }
}

/// `192.0.2.1 192.0.2.2`, `192.0.2.1 fail-safe`, or `(no answer)`: how
/// people read it.
impl std::fmt::Display for AnswerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return f.write_str("(no answer)");
        }
        let fail_safe = self.fail_safe.then_some("fail-safe");
        let all: Vec<&str> = self
            .addresses
            .iter()
            .map(String::as_str)
            .chain(fail_safe)
            .collect();
        f.write_str(&all.join(" "))
    }
}

/// What a drain or undrain would do on this device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrainPreview {
    /// `drain datacenter dc1`, `undrain 192.0.2.1 (every record)`.
    pub action: String,
    pub changes: Vec<AnswerChange>,
    /// The records that answer now and would answer nothing.
    pub emptied: Vec<String>,
}

/// A drain target the configuration lacks.
#[derive(Debug, thiserror::Error)]
pub enum UnknownTarget {
    /// `record` is empty, or the record's name after a space.
    #[error("no steered record{record} has the address {address}")]
    Address { record: String, address: String },
    #[error("no datacenter named \"{name}\"")]
    Datacenter { name: String },
}

impl Engine {
    /// Each record's answers with `target` drained (or undrained) too. The
    /// drain sets are swapped in under the engine's lock and put back
    /// before it is released: nothing else ever sees them.
    /// An error names a target the configuration lacks, as the drain's
    /// own refusal would.
    pub fn drain_preview(
        &self,
        target: &DrainTarget,
        drained: bool,
    ) -> Result<DrainPreview, UnknownTarget> {
        let mut inner = self.lock();
        let known = match target {
            DrainTarget::Address { record, address } => inner.records.iter().any(|r| {
                record.as_ref().is_none_or(|l| **l == r.label())
                    && r.steering()
                        .addresses
                        .iter()
                        .any(|a| a.display() == *address)
            }),
            DrainTarget::Datacenter { name } => {
                inner.compiled.datacenters.iter().any(|d| d.name == *name)
            }
        };
        if !known {
            return Err(match target {
                DrainTarget::Address { record, address } => UnknownTarget::Address {
                    record: record.as_ref().map_or(String::new(), |r| format!(" {r}")),
                    address: address.clone(),
                },
                DrainTarget::Datacenter { name } => {
                    UnknownTarget::Datacenter { name: name.clone() }
                }
            });
        }
        let (addresses, dcs) = (
            inner.health.drained_addresses.clone(),
            inner.health.drained_dcs.clone(),
        );
        match target {
            DrainTarget::Address { record, address } => {
                let key = (
                    record.clone().unwrap_or_else(|| "*".into()),
                    address.clone(),
                );
                if drained {
                    inner.health.drained_addresses.insert(key);
                } else {
                    inner.health.drained_addresses.remove(&key);
                }
            }
            DrainTarget::Datacenter { name } => {
                if drained {
                    inner.health.drained_dcs.insert(name.clone());
                } else {
                    inner.health.drained_dcs.remove(name);
                }
            }
        }
        let (changes, emptied) = answer_changes(&inner, inner.records.iter().map(|r| &**r), |_| {
            Operator::default()
        });
        inner.health.drained_addresses = addresses;
        inner.health.drained_dcs = dcs;
        Ok(DrainPreview {
            action: format!("{}drain {target}", if drained { "" } else { "un" }),
            changes,
            emptied,
        })
    }
}

impl Engine {
    /// The addresses (as displayed) `target` takes out of each steered
    /// record of this device's configuration, by record label: what a
    /// drain removes from a peer's reported answers when the peer cannot
    /// be asked (`gtm_node::judge`).
    pub fn drain_covers(
        &self,
        target: &DrainTarget,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
        let inner = self.lock();
        let mut only = super::HealthState {
            dc_names: inner.health.dc_names.clone(),
            ..Default::default()
        };
        match target {
            DrainTarget::Address { record, address } => {
                only.drained_addresses.insert((
                    record.clone().unwrap_or_else(|| "*".into()),
                    address.clone(),
                ));
            }
            DrainTarget::Datacenter { name } => {
                only.drained_dcs.insert(name.clone());
            }
        }
        let mut covers = std::collections::BTreeMap::new();
        for r in inner.records.iter() {
            let label = r.label();
            let drained: std::collections::BTreeSet<String> = r
                .steering()
                .addresses
                .iter()
                .filter(|a| only.drained(&label, a))
                .map(|a| a.display())
                .collect();
            if !drained.is_empty() {
                covers.insert(label, drained);
            }
        }
        covers
    }
}

/// A manual check's state now and the one a check set would give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckChange {
    pub check: String,
    pub before: CheckState,
    pub after: CheckState,
}

/// A record's manual-failback hold now: what a resume releases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hold {
    pub record: String,
    /// DR stays on only because failback is manual.
    pub held: bool,
    /// The record's decision now, in words.
    pub decision: String,
}

/// What an operator action would do on this device now: the records whose
/// answers would change, those left with no answer, and for a check set
/// the check's state, for a resume the record's hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ActionPreview {
    /// `drain datacenter dc1`, `set check maint to error`.
    pub action: String,
    pub changes: Vec<AnswerChange>,
    /// The records that answer now and would answer nothing.
    pub emptied: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
}

impl From<DrainPreview> for ActionPreview {
    fn from(p: DrainPreview) -> Self {
        Self {
            action: p.action,
            changes: p.changes,
            emptied: p.emptied,
            check: None,
            hold: None,
        }
    }
}

/// A check or record this device's configuration lacks.
#[derive(Debug, thiserror::Error)]
pub enum UnknownObject {
    #[error("no check named \"{0}\"")]
    Check(String),
    #[error("check \"{0}\" is not a manual check; only manual checks are set by an operator")]
    NotManual(String),
    #[error("state \"{0}\" is not ok or error")]
    State(String),
    #[error("no steered record {0}")]
    Record(String),
}

impl Engine {
    /// Each record's answers with the manual check `check` set to `state`
    /// (`ok` or `error`): the check's state and the decisions of the
    /// scenarios reading it are swapped in under the engine's lock and put
    /// back before it is released, and only the records reading either
    /// are evaluated.
    pub fn check_preview(&self, check: &str, state: &str) -> Result<ActionPreview, UnknownObject> {
        let mut inner = self.lock();
        match inner.compiled.checks.iter().find(|c| c.name == check) {
            None => return Err(UnknownObject::Check(check.to_string())),
            Some(c) if c.kind != CheckType::Manual => {
                return Err(UnknownObject::NotManual(check.to_string()));
            }
            Some(_) => {}
        }
        let after = match state.to_ascii_lowercase().as_str() {
            "ok" => CheckState::Ok,
            "error" => CheckState::Error,
            _ => return Err(UnknownObject::State(state.to_string())),
        };
        let check = CheckRef {
            name: check.to_string(),
            address: None,
        };
        let before = inner.health.check(&check);
        let (kept, scenarios) = (
            inner.health.checks.get(&check).cloned(),
            inner.health.scenarios.clone(),
        );
        inner.health.entry(&check).0 = Threshold {
            state: after,
            ..Threshold::default()
        };
        let mut records: std::collections::BTreeSet<usize> = inner
            .deps
            .check_records
            .get(&check)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let readers = inner
            .deps
            .check_scenarios
            .get(&check)
            .cloned()
            .unwrap_or_default();
        for si in readers {
            let Some(spec) = inner.compiled.scenarios.get(si).cloned() else {
                continue;
            };
            let (last, decision) = inner.health.redecide(&spec);
            if decision.active != last.active || decision.decided != last.decided {
                records.extend(
                    inner
                        .deps
                        .scenario_records
                        .get(&spec.name)
                        .into_iter()
                        .flatten()
                        .copied(),
                );
            }
        }
        let steered = records
            .into_iter()
            .filter_map(|i| inner.records.iter_from(i).next().map(|r| &**r));
        let (changes, emptied) = answer_changes(&inner, steered, |_| Operator::default());
        match kept {
            Some(entry) => {
                inner.health.checks.insert(check.clone(), entry);
            }
            None => {
                inner.health.checks.remove(&check);
            }
        }
        inner.health.scenarios = scenarios;
        let word = if after == CheckState::Ok {
            "ok"
        } else {
            "error"
        };
        Ok(ActionPreview {
            action: format!("set check {} to {word}", check.name),
            changes,
            emptied,
            check: Some(CheckChange {
                check: check.name,
                before,
                after,
            }),
            hold: None,
        })
    }

    /// The record `label`'s hold now (`www.example.test/A`), and its
    /// answers were an operator to resume it now.
    pub fn resume_preview(&self, label: &str) -> Result<ActionPreview, UnknownObject> {
        let inner = self.lock();
        let Some(i) = inner.records.position(label) else {
            return Err(UnknownObject::Record(label.to_string()));
        };
        let Some(r) = inner.records.iter_from(i).next() else {
            return Err(UnknownObject::Record(label.to_string()));
        };
        let hold = Hold {
            record: r.label(),
            held: r.held,
            decision: r.decision.to_string(),
        };
        let (changes, emptied) = answer_changes(&inner, [&**r], |_| Operator { resume: true });
        Ok(ActionPreview {
            action: format!("resume {}", hold.record),
            changes,
            emptied,
            check: None,
            hold: Some(hold),
        })
    }
}

/// What a record answers its clients with `answers`.
pub(super) fn shown(steering: &gtm_model::compile::Steering, answers: &PlaceAnswers) -> AnswerSet {
    let addresses = resolve::answered(answers)
        .into_iter()
        .filter_map(|i| steering.addresses.get(i).map(|a| a.display()))
        .collect();
    let mut groups = std::iter::once(answers.default_answer()).chain(&answers.groups);
    AnswerSet {
        addresses,
        fail_safe: groups.any(|g| matches!(g, Answer::FailSafe)),
    }
}

/// The records among `records` whose answers would change were each
/// evaluated again now with `operator`'s say, from the health view `inner`
/// holds; and those of them that would be left with no answer.
fn answer_changes<'a>(
    inner: &Inner,
    records: impl IntoIterator<Item = &'a Steered>,
    operator: impl Fn(&str) -> Operator,
) -> (Vec<AnswerChange>, Vec<String>) {
    let mut changes = Vec::new();
    let mut emptied = Vec::new();
    for r in records {
        let label = r.label();
        let eval = resolve::evaluate(
            &label,
            r.steering(),
            &inner.compiled.datacenters,
            &inner.health,
            Some(&r.state),
            operator(&label),
        );
        let (before, after) = (
            shown(r.steering(), &r.answers),
            shown(r.steering(), &eval.answers),
        );
        if before != after {
            if !before.is_empty() && after.is_empty() {
                emptied.push(label.clone());
            }
            changes.push(AnswerChange {
                record: label,
                before,
                after,
            });
        }
    }
    (changes, emptied)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{DnsState, Prepared};
    use gtm_dns::snapshot::Snapshot;
    use gtm_model::{
        actor::Actor,
        operator::{ManualCheck, OperatorState},
    };

    const CONFIG: &str = r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "gate"
type = "manual"

[[domain]]
name = "a.test"
nameservers = ["ns1.a.test"]

[[domain.record]]
name = "gated"
type = "A"
addresses = [
  { ip = "192.0.2.1", dc = "dc1", hc = "check:gate" },
  { ip = "192.0.2.2", dc = "dc2" },
]

[[domain.record]]
name = "plain"
type = "A"
addresses = [{ ip = "192.0.2.3", dc = "dc1" }]
"#;

    fn engine() -> Arc<Engine> {
        let state = DnsState::new(Snapshot::default(), gtm_geo::Geo::none(), 1232);
        let config = gtm_model::parse(CONFIG).unwrap();
        let prepared = Prepared::new(1, &Default::default(), config, &state).unwrap();
        let engine = Arc::new(Engine::new("gtm1", prepared, state, None));
        let mut operator = OperatorState::default();
        operator.checks.insert(
            "gate".into(),
            ManualCheck {
                state: "ok".into(),
                actor: Actor {
                    user: "admin".into(),
                    device: "gtm1".into(),
                },
                time_ms: 1,
            },
        );
        engine.set_operator(&operator);
        engine
    }

    /// A check set's preview names the records reading the check, and
    /// leaves the engine as it was: the check's state, the records'.
    #[test]
    fn a_check_set_preview_changes_the_records_reading_it_and_nothing_else() {
        let engine = engine();
        let before = engine.status();
        let p = engine.check_preview("gate", "error").unwrap();
        assert_eq!(p.action, "set check gate to error");
        assert_eq!(
            p.check,
            Some(CheckChange {
                check: "gate".into(),
                before: CheckState::Ok,
                after: CheckState::Error,
            })
        );
        assert_eq!(
            p.changes,
            [AnswerChange {
                record: "gated.a.test/A".into(),
                before: vec!["192.0.2.1".into(), "192.0.2.2".into()].into(),
                after: vec!["192.0.2.2".to_string()].into(),
            }]
        );
        assert!(p.emptied.is_empty());
        assert_eq!(engine.status(), before, "the preview changed nothing");
        // Asked again: the same, from the same state.
        assert_eq!(engine.check_preview("gate", "error").unwrap(), p);
        assert!(
            engine
                .check_preview("gate", "ok")
                .unwrap()
                .changes
                .is_empty()
        );
        assert!(matches!(
            engine.check_preview("nope", "ok"),
            Err(UnknownObject::Check(_))
        ));
        assert!(matches!(
            engine.check_preview("gate", "maybe"),
            Err(UnknownObject::State(_))
        ));
    }

    /// A resume's preview says the record's hold now.
    #[test]
    fn a_resume_preview_says_the_hold() {
        let engine = engine();
        let p = engine.resume_preview("GATED.a.test/A").unwrap();
        assert_eq!(p.action, "resume gated.a.test/A");
        let hold = p.hold.unwrap();
        assert!(!hold.held, "{hold:?}");
        assert!(p.changes.is_empty());
        assert!(matches!(
            engine.resume_preview("nope.a.test/A"),
            Err(UnknownObject::Record(_))
        ));
    }
}
