//! The health state an engine holds: check instances with their threshold
//! state and last reason, scenario decisions, and operator drains.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::{
    health::{scenario::Decision, threshold::Threshold},
    model::{
        compile::{AddressSpec, CheckSpec, Compiled, Content, DcId, Hc},
        condition::CheckRef,
    },
    resolve::{CheckState, HealthView},
};

/// One check instance as operators see it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckStatus {
    pub check: String,
    pub state: CheckState,
    pub reason: String,
    /// When the state last changed (ms since the epoch).
    pub since_ms: u64,
    /// The state was restored from the store and no probe has run since.
    pub restored: bool,
}

/// A check bound to what it probes: what the scheduler runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub check: CheckRef,
    pub spec: CheckSpec,
    /// Host header / TLS name: the record's name, or the address for
    /// wildcard records and scenario references.
    pub server_name: String,
}

#[derive(Debug, Default)]
pub struct HealthState {
    pub checks: HashMap<CheckRef, (Threshold, CheckStatus)>,
    pub scenarios: HashMap<String, Decision>,
    /// (record label or "*", address) taken out of answers.
    pub drained_addresses: BTreeSet<(String, String)>,
    pub drained_dcs: BTreeSet<String>,
    /// Datacenters none of whose devices reported recently (cluster):
    /// reported to operators; addresses keep the health of their HC field.
    pub dcs_down: BTreeSet<String>,
    /// Datacenter names by id, for drains.
    pub dc_names: Vec<String>,
}

impl HealthView for HealthState {
    fn check(&self, check: &CheckRef) -> CheckState {
        self.checks
            .get(check)
            .map_or(CheckState::Preparing, |(t, _)| t.state)
    }

    fn scenario_active(&self, name: &str) -> bool {
        self.scenarios.get(name).is_some_and(|d| d.active)
    }

    fn scenario_decided(&self, name: &str) -> bool {
        self.scenarios.get(name).is_some_and(|d| d.decided)
    }

    fn drained(&self, record: &str, address: &AddressSpec) -> bool {
        let dc_drained = |dc: DcId| {
            self.dc_names
                .get(dc)
                .is_some_and(|n| self.drained_dcs.contains(n))
        };
        address.dc.is_some_and(dc_drained)
            || self
                .drained_addresses
                .contains(&("*".to_string(), address.display.clone()))
            || self
                .drained_addresses
                .contains(&(record.to_string(), address.display.clone()))
    }
}

impl HealthState {
    pub fn truth(&self, r: &CheckRef) -> Option<bool> {
        self.check(r).truth()
    }

    /// Re-decides a scenario from the current check states; returns its
    /// previous and its new decision.
    pub fn redecide(&mut self, spec: &crate::model::compile::ScenarioSpec) -> (Decision, Decision) {
        let last = self.scenarios.get(&spec.name).copied().unwrap_or_default();
        let decision = crate::health::scenario::decide(spec, last, &|r| self.truth(r));
        self.scenarios.insert(spec.name.clone(), decision);
        (last, decision)
    }

    /// The state of a check instance, Preparing when it has none yet.
    pub fn entry(&mut self, check: &CheckRef) -> &mut (Threshold, CheckStatus) {
        self.checks.entry(check.clone()).or_insert_with(|| {
            (
                Threshold::default(),
                CheckStatus {
                    check: check.to_string(),
                    state: CheckState::Preparing,
                    reason: String::new(),
                    since_ms: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64),
                    restored: false,
                },
            )
        })
    }
}

/// Every check instance of a configuration.
pub fn instances(compiled: &Compiled) -> Vec<Instance> {
    let by_name: HashMap<&str, &CheckSpec> = compiled
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let mut out: Vec<Instance> = Vec::new();
    let mut push = |check: CheckRef, server_name: String| {
        if out.iter().any(|i| i.check == check) {
            return;
        }
        if let Some(spec) = by_name.get(check.name.as_str()) {
            out.push(Instance {
                check,
                spec: (*spec).clone(),
                server_name,
            });
        }
    };
    for zone in &compiled.zones {
        for record in &zone.records {
            let Content::Steered(steering) = &record.content else {
                continue;
            };
            for a in &steering.addresses {
                if let Hc::Check(r) = &a.hc {
                    let owner = record.owner.to_string();
                    let name = if owner.starts_with("*.") {
                        a.display.clone()
                    } else {
                        owner.trim_end_matches('.').to_string()
                    };
                    push(r.clone(), name);
                }
            }
        }
    }
    for s in &compiled.scenarios {
        for r in s
            .condition
            .refs()
            .into_iter()
            .chain(s.verify.iter().flat_map(|v| v.refs()))
        {
            let name = match (
                &r.address,
                by_name.get(r.name.as_str()).and_then(|c| c.target.clone()),
            ) {
                (Some(ip), _) => ip.to_string(),
                (None, Some(target)) => target,
                (None, None) => r.name.clone(),
            };
            push(r.clone(), name);
        }
    }
    for c in &compiled.checks {
        if c.target.is_some() || c.kind == crate::model::config::CheckType::Manual {
            push(
                CheckRef {
                    name: c.name.clone(),
                    address: None,
                },
                c.target.clone().unwrap_or_default(),
            );
        }
    }
    out
}
