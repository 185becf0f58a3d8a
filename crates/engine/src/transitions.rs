//! Health transitions: a probe result, a manual check state or a
//! datacenter's reports change a check, and the records that read it are
//! evaluated again.

use super::*;

impl Engine {
    /// One probe result for a check instance: thresholds, then everything
    /// that depends on a transition. Results for instances no longer in the
    /// configuration are ignored.
    pub fn probe_result(&self, check: &CheckRef, ok: bool, reason: String) {
        let mut inner = self.lock();
        // Results of instances the configuration no longer has are dropped.
        let Some(&(failures, successes)) = inner.probed.get(check) else {
            return;
        };
        let entry = inner.health.entry(check);
        let changed = entry.0.record(ok, failures, successes);
        entry.1.reason = reason;
        entry.1.restored = false;
        if let Some(state) = changed {
            self.check_transition(&mut inner, check, state);
        }
    }

    /// Sets a check instance's state directly: manual checks, and tests.
    pub fn set_check(&self, check: &CheckRef, state: CheckState, reason: &str) {
        let mut inner = self.lock();
        operator::set_check_locked(self, &mut inner, check, state, reason);
    }

    pub(super) fn check_transition(&self, inner: &mut Inner, check: &CheckRef, state: CheckState) {
        let (old_state, reason) = {
            let (_, status) = inner
                .health
                .checks
                .get_mut(check)
                .expect("callers insert the check with health.entry() under this same lock");
            let old = status.state;
            status.state = state;
            status.since_ms = now_ms();
            (old, status.reason.clone())
        };
        let text = format!("check {check}: {old_state} → {state} ({reason})");
        // A check that fails is a warning; one that recovers, or starts
        // over (Preparing, No Data), is not.
        let severity = match state {
            CheckState::Error => Severity::Warning,
            _ => Severity::Info,
        };
        self.log(inner, EventKind::Check, severity, check.to_string(), text);
        // Handed to the writer thread: no storage I/O under the lock.
        if let (Some(p), Some((_, status))) = (&self.store, inner.health.checks.get(check))
            && let Ok(bytes) = serde_json::to_vec(status)
        {
            p.writer.health(check.to_string(), bytes);
        }
        // Scenarios reading the check, then records reading either.
        let mut records: BTreeSet<usize> = inner
            .deps
            .check_records
            .get(check)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let scenarios: Vec<usize> = inner
            .deps
            .check_scenarios
            .get(check)
            .cloned()
            .unwrap_or_default();
        for si in scenarios {
            let spec = inner.compiled.scenarios[si].clone();
            let (last, decision) = inner.health.redecide(&spec);
            // A scenario's first decision matters to the addresses it
            // guards even when it stays passive (they were undecided).
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
            let state = |active: bool| if active { "active" } else { "passive" };
            let text = if decision.active != last.active {
                Some(format!(
                    "scenario {}: {} → {}",
                    spec.name,
                    state(last.active),
                    state(decision.active)
                ))
            } else if decision.pending.is_some() && decision.pending != last.pending {
                Some(format!(
                    "scenario {}: change waits for its verify condition",
                    spec.name
                ))
            } else {
                None
            };
            if let Some(text) = text {
                self.log(
                    inner,
                    EventKind::Scenario,
                    Severity::Info,
                    spec.name.clone(),
                    text,
                );
            }
        }
        self.reevaluate(inner, records, |_| Operator::default());
    }

    pub(super) fn reevaluate(
        &self,
        inner: &mut Inner,
        which: BTreeSet<usize>,
        operator: impl Fn(&str) -> Operator,
    ) {
        let snapshot = self.dns.snapshot.load();
        let mut events = Vec::new();
        {
            let Inner {
                records,
                compiled,
                health,
                records_gen,
                ..
            } = &mut *inner;
            let generation = *records_gen + 1;
            for i in which {
                let Some(r) = records.get_mut(i) else {
                    continue;
                };
                let label = r.label();
                let eval = resolve::evaluate(
                    &label,
                    r.steering(),
                    &compiled.datacenters,
                    &*health,
                    Some(&r.state),
                    operator(&label),
                );
                let answers_changed = eval.answers != r.answers;
                if answers_changed {
                    if let Some(slot) = snapshot.steered_slot(i) {
                        match steered_answer(
                            &key_name(r.owner()),
                            r.ttl(),
                            r.steering(),
                            &eval.answers,
                            slot.signer.as_deref(),
                        ) {
                            Ok(answer) => slot.answer.store(Arc::new(answer)),
                            Err(e) => {
                                tracing::error!(record = %label, error = %e, "cannot build an answer; the previous one stays")
                            }
                        }
                    }
                    r.answers = eval.answers;
                }
                let old_status = r.state.status;
                let new_status = eval.state.status;
                if answers_changed
                    || old_status != new_status
                    || r.decision != eval.decision
                    || r.held != eval.held
                {
                    r.changed = generation;
                    *records_gen = generation;
                }
                if r.state.dr_on != eval.state.dr_on {
                    self.keep_dr_state(&label, eval.state.dr_on);
                }
                r.state = eval.state;
                r.decision = eval.decision;
                r.held = eval.held;
                events.extend(
                    eval.events
                        .into_iter()
                        .map(|e| (label.clone(), e.severity, e.text)),
                );
                if old_status != new_status {
                    let old = old_status;
                    let text = format!("{label}: status {old} → {new_status}");
                    events.push((label, resolve::status_severity(new_status), text));
                }
            }
        }
        for (label, severity, text) in events {
            self.log(inner, EventKind::Record, severity, label, text);
        }
    }

    /// Marks a datacenter up or down (no device there reported recently).
    /// An event, and the records are re-evaluated; addresses keep the health
    /// of their HC field (a `static` address stays a candidate), while the
    /// checks that run there go No Data.
    pub fn set_datacenter_up(&self, dc: &str, up: bool, why: &str) {
        let mut inner = self.lock();
        let changed = if up {
            inner.health.dcs_down.remove(dc)
        } else {
            inner.health.dcs_down.insert(dc.to_string())
        };
        if !changed {
            return;
        }
        let text = format!(
            "datacenter {dc} is {} ({why})",
            if up { "up" } else { "down" }
        );
        let severity = if up {
            Severity::Info
        } else {
            Severity::Warning
        };
        self.log(
            &mut inner,
            EventKind::Datacenter,
            severity,
            dc.to_string(),
            text,
        );
        let all = (0..inner.records.len()).collect();
        self.reevaluate(&mut inner, all, |_| Operator::default());
    }
}
