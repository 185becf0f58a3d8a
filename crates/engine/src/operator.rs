//! Installing the replicated operator state ([`gtm_model::operator`]) on this
//! device: drains, manual checks' states and failback resumes, after each
//! committed change (and at start). One Operator event per change, naming
//! who made it, on every device.

use std::collections::BTreeSet;

use super::{Engine, EventKind, Inner, Severity, Threshold};
use gtm_model::{
    condition::CheckRef, config::CheckType, drain::DrainTarget, operator::OperatorState,
};
use gtm_resolve::{CheckState, HealthView, Operator};

impl Engine {
    /// Makes this device follow `state`: drained addresses and datacenters
    /// are replaced by its drains, manual checks take its states (over the
    /// stored health decisions), and a record whose resume count moved past
    /// what this device last saw has its manual-failback hold released.
    pub fn set_operator(&self, state: &OperatorState) {
        let mut inner = self.lock();
        let previous = inner.operator.replace(state.clone());
        match &previous {
            Some(p) => {
                let last = |s: &OperatorState| s.recent.last().map_or(0, |r| r.seq);
                // Numbering that went back is another state (this device
                // started or joined a cluster, or left one): its notes are
                // not news here; what follows them is.
                let seen = if last(state) < last(p) {
                    last(state)
                } else {
                    last(p)
                };
                for r in state.recent.iter().filter(|r| r.seq > seen) {
                    self.log(
                        &mut inner,
                        EventKind::Operator,
                        r.severity,
                        r.object.clone(),
                        r.text.clone(),
                    );
                }
            }
            // First install since start: say what is in force again.
            None => {
                for d in &state.drains {
                    if let Some(target) = d.target() {
                        let text = format!("{target} is drained (by {}; restored)", d.actor);
                        self.log(
                            &mut inner,
                            EventKind::Operator,
                            Severity::Info,
                            target.to_string(),
                            text,
                        );
                    }
                }
            }
        }

        let mut addresses = BTreeSet::new();
        let mut dcs = BTreeSet::new();
        for d in &state.drains {
            match d.target() {
                Some(DrainTarget::Address { record, address }) => {
                    addresses.insert((record.unwrap_or_else(|| "*".into()), address));
                }
                Some(DrainTarget::Datacenter { name }) => {
                    dcs.insert(name);
                }
                None => {}
            }
        }
        if addresses != inner.health.drained_addresses || dcs != inner.health.drained_dcs {
            inner.health.drained_addresses = addresses;
            inner.health.drained_dcs = dcs;
            let all = (0..inner.records.len()).collect();
            self.reevaluate(&mut inner, all, |_| Operator::default());
        }

        for (name, manual) in &state.checks {
            let is_manual = inner
                .compiled
                .checks
                .iter()
                .any(|c| &c.name == name && c.kind == CheckType::Manual);
            let want = match manual.state.as_str() {
                "ok" => CheckState::Ok,
                "error" => CheckState::Error,
                _ => continue,
            };
            let check = CheckRef {
                name: name.clone(),
                address: None,
            };
            if is_manual && inner.health.check(&check) != want {
                set_check_locked(
                    self,
                    &mut inner,
                    &check,
                    want,
                    &format!("set by {}", manual.actor),
                );
            }
        }

        let mut resumed = false;
        if let Some(p) = previous {
            for (label, count) in &state.resumes {
                if *count > p.resumes.get(label).copied().unwrap_or(0)
                    && let Some(i) = inner.records.position(label)
                {
                    self.reevaluate(&mut inner, BTreeSet::from([i]), |l| Operator {
                        resume: l == label,
                    });
                    resumed = true;
                }
            }
        }
        // A released hold is on disk before the resume command returns: a
        // restart right after it does not hold the record again.
        if resumed {
            drop(inner);
            self.flush_storage();
        }
    }
}

/// [`Engine::set_check`] under a lock already held.
pub(super) fn set_check_locked(
    engine: &Engine,
    inner: &mut Inner,
    check: &CheckRef,
    state: CheckState,
    reason: &str,
) {
    let entry = inner.health.entry(check);
    entry.1.reason = reason.to_string();
    entry.1.restored = false;
    if entry.0.state != state {
        entry.0 = Threshold {
            state,
            ..Threshold::default()
        };
        engine.check_transition(inner, check, state);
    }
}
