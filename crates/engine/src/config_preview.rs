//! What a configuration change would do to this device's answers, before
//! it is made: the records it touches ([`touched`]) evaluated under the new
//! configuration from this device's health view now, as the install would
//! (unchanged checks keep their state, new or changed ones start over,
//! scenarios are decided again, each record from its state before),
//! against what they answer now. A configuration apply's and an object
//! edit's dry run show it for every device, and an apply that would leave
//! a record with no answer on one is refused without `force`
//! (`gtm_node::judge`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::Engine;
use super::dry_run::{ActionPreview, AnswerChange, shown};
use super::health::{HealthState, drained_in};
use super::install::remap;
use gtm_health::scenario::Decision;
use gtm_model::{
    Config,
    compile::{AddressSpec, Compiled, Content},
    condition::CheckRef,
};
use gtm_resolve as resolve;
use gtm_resolve::{CheckState, HealthView, Operator};

/// The part of `new` whose answers may differ from `current`'s, as a
/// configuration of its own (the new datacenters, checks, scenarios and
/// services, and the domains with only those records), and how many
/// records it holds. Every record when the datacenters, checks, scenarios
/// or services differ; else each record new or changed, and every record
/// of a domain whose own settings changed. Records removed are not in it:
/// they answer nothing because the operator removed them.
pub fn touched(current: &Config, new: &Config) -> (Config, usize) {
    let mut out = new.clone();
    out.domains = Vec::new();
    let globals = current.steers_alike(new);
    let before: HashMap<String, &gtm_model::config::Domain> = current
        .domains
        .iter()
        .map(|d| (d.name.to_ascii_lowercase(), &**d))
        .collect();
    let mut count = 0;
    for domain in &new.domains {
        let old = before.get(&domain.name.to_ascii_lowercase());
        let whole = !globals || old.is_none_or(|o| o.without_records() != domain.without_records());
        let records: Vec<Arc<gtm_model::config::Record>> = if whole {
            domain.records.clone()
        } else {
            let key = |r: &gtm_model::config::Record| (r.name.to_ascii_lowercase(), r.kind);
            let old_records: HashMap<_, &gtm_model::config::Record> = old
                .map(|o| o.records.iter().map(|r| (key(r), &**r)).collect())
                .unwrap_or_default();
            domain
                .records
                .iter()
                .filter(|r| old_records.get(&key(r)).is_none_or(|o| **o != ***r))
                .cloned()
                .collect()
        };
        if records.is_empty() {
            continue;
        }
        count += records.len();
        let mut d = domain.without_records();
        d.records = records;
        out.domains.push(Arc::new(d));
    }
    (out, count)
}

/// The health view the install of a new configuration would start from:
/// checks whose spec did not change keep their state, the others have
/// none yet; scenarios decided again from those.
struct After<'a> {
    now: &'a HealthState,
    kept: HashSet<&'a str>,
    scenarios: HashMap<&'a str, Decision>,
    dc_names: Vec<String>,
}

impl HealthView for After<'_> {
    fn check(&self, check: &CheckRef) -> CheckState {
        if self.kept.contains(check.name.as_str()) {
            self.now.check(check)
        } else {
            CheckState::Preparing
        }
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
            &self.now.drained_dcs,
            &self.now.drained_addresses,
            record,
            address,
        )
    }
}

impl Engine {
    /// Each steered record of `changed` (a configuration of the records a
    /// change touches, with the new globals: [`touched`]) as it would
    /// answer under it, from this device's health view now, against what
    /// it answers now (nothing for a new record). `action` names the
    /// change (`apply configuration`).
    pub fn config_preview(&self, changed: &Compiled, action: String) -> ActionPreview {
        let inner = self.lock();
        let old: HashMap<&str, &gtm_model::compile::CheckSpec> = inner
            .compiled
            .checks
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        let kept = changed
            .checks
            .iter()
            .filter(|c| old.get(c.name.as_str()).is_some_and(|o| o.same_check(c)))
            .map(|c| c.name.as_str())
            .collect();
        let mut after = After {
            now: &inner.health,
            kept,
            scenarios: HashMap::new(),
            dc_names: changed.datacenters.iter().map(|d| d.name.clone()).collect(),
        };
        for spec in &changed.scenarios {
            let last = inner
                .health
                .scenarios
                .get(&spec.name)
                .copied()
                .unwrap_or_default();
            let decision = gtm_health::scenario::decide(spec, last, &|r| after.check(r).truth());
            after.scenarios.insert(&spec.name, decision);
        }
        let mut changes = Vec::new();
        let mut emptied = Vec::new();
        for record in changed.zones.iter().flat_map(|z| &z.records) {
            let Content::Steered(steering) = &record.content else {
                continue;
            };
            let label = record.label();
            let now = inner
                .records
                .position(&label)
                .and_then(|i| inner.records.iter_from(i).next());
            let prev = now.map(|b| {
                let displays: Vec<String> =
                    b.steering().addresses.iter().map(|a| a.display()).collect();
                remap(b.state.clone(), &displays, steering)
            });
            let eval = resolve::evaluate(
                &label,
                steering,
                &changed.datacenters,
                &after,
                prev.as_ref(),
                Operator::default(),
            );
            let before = now.map_or_else(Default::default, |b| shown(b.steering(), &b.answers));
            let answers = shown(steering, &eval.answers);
            if before == answers {
                continue;
            }
            if !before.is_empty() && answers.is_empty() {
                emptied.push(label.clone());
            }
            changes.push(AnswerChange {
                record: label,
                before,
                after: answers,
            });
        }
        ActionPreview {
            action,
            changes,
            emptied,
            check: None,
            hold: None,
        }
    }
}
