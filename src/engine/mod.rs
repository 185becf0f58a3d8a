//! The device's answer engine: the applied configuration, the health inputs,
//! each record's state, and the snapshot the DNS path reads.
//!
//! Every change (a configuration apply, a check or scenario transition)
//! goes through here under one mutex: re-evaluate the records, swap in the
//! answers that changed, log the events. Queries never take that mutex.

mod diff;

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

pub use diff::diff;

use crate::{
    dns::{
        handler::DnsState,
        snapshot::{Snapshot, steered_answer},
    },
    model::{
        Compiled, Config, ConfigErrors, compile,
        compile::{Content, Steering},
        condition::CheckRef,
    },
    resolve::{self, CheckState, HealthView, Operator, PlaceAnswers, RecordState, Status},
};

/// The health inputs the resolver reads. The health engine feeds it from
/// probes and scenarios; until then, and in tests, it is set directly.
#[derive(Debug, Clone, Default)]
pub struct HealthInputs {
    pub checks: HashMap<CheckRef, CheckState>,
    pub scenarios: HashMap<String, bool>,
}

impl HealthView for HealthInputs {
    fn check(&self, check: &CheckRef) -> CheckState {
        self.checks
            .get(check)
            .copied()
            .unwrap_or(CheckState::Preparing)
    }

    fn scenario_active(&self, name: &str) -> bool {
        self.scenarios.get(name).copied().unwrap_or(false)
    }
}

/// One entry of the GTM Logs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub device: String,
    pub text: String,
}

/// A record's state as `gtm status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordStatus {
    pub record: String,
    pub status: Option<Status>,
    pub active: Vec<String>,
    pub decision: String,
}

const EVENT_LIMIT: usize = 10_000;

/// The answer engine of one device.
#[derive(Debug)]
pub struct Engine {
    device: String,
    dns: DnsState,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    version: u64,
    config: Config,
    compiled: Compiled,
    health: HealthInputs,
    records: Vec<Steered>,
    events: VecDeque<Event>,
}

/// Per steered record: what it is and where it stands.
#[derive(Debug)]
struct Steered {
    label: String,
    owner: hickory_server::proto::rr::Name,
    ttl: u32,
    steering: Steering,
    state: Option<RecordState>,
    answers: PlaceAnswers,
    decision: String,
}

impl Engine {
    /// Starts with a configuration, building the first snapshot.
    pub fn new(
        device: &str,
        version: u64,
        config: Config,
        dns: DnsState,
    ) -> Result<Self, ConfigErrors> {
        let compiled = compile(&config)?;
        let engine = Engine {
            device: device.to_string(),
            dns,
            inner: Mutex::new(Inner {
                version,
                config: Config::default(),
                compiled: compile(&Config::default()).expect("the empty configuration is valid"),
                health: HealthInputs::default(),
                records: Vec::new(),
                events: VecDeque::new(),
            }),
        };
        engine.install(&mut engine.lock(), version, config, compiled);
        Ok(engine)
    }

    pub fn dns(&self) -> &DnsState {
        &self.dns
    }

    pub fn device(&self) -> &str {
        &self.device
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the configuration atomically; records keep their state
    /// across the change when their name and type stay.
    pub fn apply(&self, version: u64, config: Config) -> Result<(), ConfigErrors> {
        let compiled = compile(&config)?;
        let mut inner = self.lock();
        self.install(&mut inner, version, config, compiled);
        Ok(())
    }

    fn install(&self, inner: &mut Inner, version: u64, config: Config, compiled: Compiled) {
        let mut previous: HashMap<String, (RecordState, Vec<String>)> = inner
            .records
            .drain(..)
            .filter_map(|r| {
                let displays = r
                    .steering
                    .addresses
                    .iter()
                    .map(|a| a.display.clone())
                    .collect();
                Some((r.label, (r.state?, displays)))
            })
            .collect();
        let mut records = Vec::new();
        for zone in &compiled.zones {
            for record in &zone.records {
                if let Content::Steered(steering) = &record.content {
                    let label = record.label();
                    let prev = previous
                        .remove(&label)
                        .map(|(state, displays)| remap(state, &displays, steering));
                    let eval = resolve::evaluate(
                        &label,
                        steering,
                        &compiled.datacenters,
                        &inner.health,
                        prev.as_ref(),
                        Operator::default(),
                    );
                    let events = eval.events;
                    records.push(Steered {
                        label,
                        owner: record.owner.clone(),
                        ttl: record.ttl,
                        steering: steering.clone(),
                        state: Some(eval.state),
                        answers: eval.answers,
                        decision: eval.decision,
                    });
                    for text in events {
                        self.log(inner, text);
                    }
                }
            }
        }
        let snapshot = Snapshot::build(&compiled, |i, _| records[i].answers.clone());
        self.dns.snapshot.store(Arc::new(snapshot));
        inner.records = records;
        inner.compiled = compiled;
        inner.config = config;
        inner.version = version;
        tracing::info!(
            version,
            records = inner.records.len(),
            "configuration applied"
        );
    }

    /// Changes health inputs and re-evaluates every record, swapping in the
    /// answers that changed.
    pub fn update_health(&self, change: impl FnOnce(&mut HealthInputs)) {
        let mut inner = self.lock();
        change(&mut inner.health);
        self.reevaluate(&mut inner, |_| Operator::default());
    }

    /// Releases a DR hold kept by manual failback on one record.
    pub fn resume(&self, label: &str) -> bool {
        let mut inner = self.lock();
        if !inner.records.iter().any(|r| r.label == label) {
            return false;
        }
        self.reevaluate(&mut inner, |l| Operator { resume: l == label });
        true
    }

    fn reevaluate(&self, inner: &mut Inner, operator: impl Fn(&str) -> Operator) {
        let snapshot = self.dns.snapshot.load();
        let Inner {
            records,
            compiled,
            health,
            ..
        } = &mut *inner;
        let mut events = Vec::new();
        for (i, r) in records.iter_mut().enumerate() {
            let eval = resolve::evaluate(
                &r.label,
                &r.steering,
                &compiled.datacenters,
                &*health,
                r.state.as_ref(),
                operator(&r.label),
            );
            if eval.answers != r.answers {
                let answer = steered_answer(&r.owner, r.ttl, &r.steering, &eval.answers);
                snapshot.steered[i].answer.store(Arc::new(answer));
                r.answers = eval.answers;
            }
            r.state = Some(eval.state);
            r.decision = eval.decision;
            events.extend(eval.events);
        }
        for text in events {
            self.log(inner, text);
        }
    }

    fn log(&self, inner: &mut Inner, text: String) {
        tracing::info!(device = %self.device, "{text}");
        if inner.events.len() == EVENT_LIMIT {
            inner.events.pop_front();
        }
        inner.events.push_back(Event {
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            device: self.device.clone(),
            text,
        });
    }

    pub fn version(&self) -> u64 {
        self.lock().version
    }

    pub fn config(&self) -> Config {
        self.lock().config.clone()
    }

    pub fn events(&self) -> Vec<Event> {
        self.lock().events.iter().cloned().collect()
    }

    /// Every steered record with its status and the addresses answered now.
    pub fn status(&self) -> Vec<RecordStatus> {
        self.lock()
            .records
            .iter()
            .map(|r| RecordStatus {
                record: r.label.clone(),
                status: r.state.as_ref().map(|s| s.status),
                active: r
                    .state
                    .iter()
                    .flat_map(|s| {
                        s.active
                            .iter()
                            .map(|&i| r.steering.addresses[i].display.clone())
                    })
                    .collect(),
                decision: r.decision.clone(),
            })
            .collect()
    }
}

/// Carries a record's state across a configuration change: per-address
/// decisions follow the address, not its position in the list.
fn remap(state: RecordState, old: &[String], steering: &Steering) -> RecordState {
    let index_of = |display: &str| old.iter().position(|d| d == display);
    let new_index = |i: usize| steering.addresses.iter().position(|a| a.display == old[i]);
    RecordState {
        healthy: steering
            .addresses
            .iter()
            .map(|a| index_of(&a.display).is_some_and(|i| state.healthy[i]))
            .collect(),
        active: state.active.iter().filter_map(|&i| new_index(i)).collect(),
        dr_on: state.dr_on,
        status: state.status,
    }
}
