//! The health state an engine holds: check instances with their threshold
//! state and last reason, scenario decisions, and operator drains; and the
//! engine as the sink of the probe scheduler's results.

use std::{
    collections::{BTreeSet, HashMap},
    time::Duration,
};

use serde::{Deserialize, Serialize};

use super::Engine;
use gtm_health::{scenario::Decision, scheduler::ResultSink, threshold::Threshold};
use gtm_model::{
    compile::{AddressSpec, DcId},
    condition::CheckRef,
};
use gtm_resolve::{CheckState, HealthView};

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
        drained_in(
            &self.dc_names,
            &self.drained_dcs,
            &self.drained_addresses,
            record,
            address,
        )
    }
}

/// Whether `address` of `record` is drained: its datacenter (named by
/// `dc_names`) is in `dcs`, or the address is in `addresses`, of every
/// record (`*`) or of this one.
pub(super) fn drained_in(
    dc_names: &[String],
    dcs: &BTreeSet<String>,
    addresses: &BTreeSet<(String, String)>,
    record: &str,
    address: &AddressSpec,
) -> bool {
    let dc_drained = |dc: DcId| dc_names.get(dc).is_some_and(|n| dcs.contains(n));
    address.dc().is_some_and(dc_drained)
        || addresses.contains(&("*".to_string(), address.display()))
        || addresses.contains(&(record.to_string(), address.display()))
}

impl HealthState {
    pub fn truth(&self, r: &CheckRef) -> Option<bool> {
        self.check(r).truth()
    }

    /// Re-decides a scenario from the current check states; returns its
    /// previous and its new decision.
    pub fn redecide(&mut self, spec: &gtm_model::compile::ScenarioSpec) -> (Decision, Decision) {
        let last = self.scenarios.get(&spec.name).copied().unwrap_or_default();
        let decision = gtm_health::scenario::decide(spec, last, &|r| self.truth(r));
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

/// The scheduler hands its results to the engine: the scheduler knows only
/// this trait, so health does not depend on the engine.
impl ResultSink for Engine {
    fn probe_result(&self, check: &CheckRef, ok: bool, reason: String, elapsed: Duration) {
        self.probe_metrics().observe(&check.to_string(), elapsed);
        Engine::probe_result(self, check, ok, reason);
    }

    fn runs_elsewhere(&self, check: &CheckRef, reason: &str) {
        self.set_check(check, CheckState::NoData, reason);
    }
}
