//! What a drain or undrain would change, before it is made: each steered
//! record's answers now and with the drain, computed by the resolver
//! ([`gtm_resolve::evaluate`]) from this device's health view, as the
//! engine would after the drain. `--dry-run` shows it; a drain that would
//! leave a record with no answer is refused without `--force`.

use serde::{Deserialize, Serialize};

use super::Engine;
use gtm_model::drain::DrainTarget;
use gtm_resolve as resolve;
use gtm_resolve::{Answer, Operator, PlaceAnswers};

/// A record whose answers a drain would change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AnswerChange {
    pub record: String,
    /// The addresses some client is answered with (`fail-safe` when the
    /// record answers its fail-safe records).
    pub before: Vec<String>,
    pub after: Vec<String>,
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
        let mut changes = Vec::new();
        let mut emptied = Vec::new();
        for r in inner.records.iter() {
            let label = r.label();
            let eval = resolve::evaluate(
                &label,
                r.steering(),
                &inner.compiled.datacenters,
                &inner.health,
                Some(&r.state),
                Operator::default(),
            );
            let shown = |answers: &PlaceAnswers| -> Vec<String> {
                let mut out: Vec<String> = resolve::answered(answers)
                    .into_iter()
                    .filter_map(|i| r.steering().addresses.get(i).map(|a| a.display()))
                    .collect();
                let groups = std::iter::once(answers.default_answer()).chain(&answers.groups);
                if groups.into_iter().any(|g| matches!(g, Answer::FailSafe)) {
                    out.push("fail-safe".into());
                }
                out
            };
            let (before, after) = (shown(&r.answers), shown(&eval.answers));
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
        inner.health.drained_addresses = addresses;
        inner.health.drained_dcs = dcs;
        Ok(DrainPreview {
            action: format!("{}drain {target}", if drained { "" } else { "un" }),
            changes,
            emptied,
        })
    }
}
