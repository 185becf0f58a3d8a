//! What the API, the CLI and the console read of the engine: record
//! statuses, previews, checks and scenarios, and the event types.

use super::*;

/// What an event is about, for filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    Record,
    Check,
    Scenario,
    Operator,
    Config,
    Datacenter,
    /// GeoIP downloads, refusals and swaps.
    Geoip,
    /// The device's own start and stop.
    Device,
}

impl EventKind {
    /// The kind as the API names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Record => "record",
            Self::Check => "check",
            Self::Scenario => "scenario",
            Self::Operator => "operator",
            Self::Config => "config",
            Self::Datacenter => "datacenter",
            Self::Geoip => "geoip",
            Self::Device => "device",
        }
    }

    /// Every kind as the API names it, in the code's order: read from the
    /// type's own schema, so that every list of kinds (CLI help and errors,
    /// the console's filter) names a new kind without an edit.
    pub fn names() -> Vec<String> {
        use serde_json::Value;
        fn collect(v: &Value, out: &mut Vec<String>) {
            let Some(o) = v.as_object() else { return };
            if let Some(Value::String(c)) = o.get("const") {
                out.push(c.clone());
            }
            if let Some(Value::Array(values)) = o.get("enum") {
                out.extend(values.iter().filter_map(|v| v.as_str().map(String::from)));
            }
            for key in ["oneOf", "anyOf"] {
                if let Some(Value::Array(alternatives)) = o.get(key) {
                    alternatives.iter().for_each(|a| collect(a, out));
                }
            }
        }
        let mut out = Vec::new();
        collect(schemars::schema_for!(EventKind).as_value(), &mut out);
        out
    }
}

/// One entry of the GTM Logs.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub device: String,
    pub kind: EventKind,
    /// How much it asks of an operator; `info` for an event kept before
    /// severities were recorded.
    #[serde(default)]
    pub severity: Severity,
    /// The record (`www.example.test/A`), check instance or scenario.
    pub object: String,
    pub text: String,
}

/// A record's state as reports between devices carry it: the status as
/// its label, the answered addresses as texts ([`answered`]). Devices of
/// every version read and write this form; the API gives [`RecordView`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordStatus {
    pub record: String,
    #[serde(with = "gtm_resolve::status_label")]
    #[schemars(with = "Option<String>")]
    pub status: Option<Status>,
    /// What clients without a place of their own are answered: the
    /// balance's real choice (see `answered`).
    pub active: Vec<String>,
    pub decision: String,
    /// DR stays on only because failback is manual (`record resume` ends
    /// it). Absent from devices of an earlier version.
    #[serde(default)]
    pub held: bool,
}

/// A record's state as `gtm status` and the API give it, typed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordView {
    /// `www.example.test/A`.
    pub record: String,
    /// The status as a stable code; `null` when a device reports none.
    pub status: Option<Status>,
    /// The same status as people read it (`Partially OK (a record is
    /// down)`).
    pub label: Option<String>,
    /// What clients without a place of their own are answered: the
    /// balance's real choice, in answer order.
    pub active: Vec<AddressState>,
    /// Why, in words.
    pub decision: String,
    /// DR stays on only because failback is manual (`record resume` ends
    /// it).
    pub held: bool,
}

/// A topology rule of a record as `gtm status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuleStatus {
    /// `www.example.test/A`.
    pub record: String,
    /// The rule, with what the clients it holds are answered now.
    #[serde(flatten)]
    pub rule: RuleAnswered,
    /// The responses it decided on this device since it started.
    pub decided: u64,
}

/// A status's label, for the typed views.
pub(super) fn label_of(status: Option<Status>) -> Option<String> {
    status.map(|s| s.as_str().to_string())
}

/// The record preview: what is answered now and why.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Preview {
    pub device: String,
    pub record: String,
    pub mode: String,
    /// The status as a stable code.
    pub status: Option<Status>,
    /// The same status as people read it.
    pub label: Option<String>,
    /// The balance algorithm (`round-robin`, `weighted`, ...).
    pub balance: String,
    /// What clients without a place of their own are answered: the
    /// balance's real choice (see `answered`).
    pub active: Vec<AddressState>,
    /// Places whose clients are answered otherwise (topology).
    pub places: Vec<PlaceAnswered>,
    /// Its topology rules, each with what it answers now
    /// (docs/topology.md).
    #[serde(default)]
    pub rules: Vec<RuleAnswered>,
    /// With `nearest = true`: each datacenter with a location, with what
    /// the clients nearest to it are answered now (docs/topology.md).
    #[serde(default)]
    pub nearest: Vec<NearestAnswered>,
    pub decision: String,
    /// Each address of the record with its HC field and its health now.
    pub addresses: Vec<AddressView>,
    /// The latest DR and fail-safe switchovers, newest last.
    pub switchovers: Vec<Event>,
}

/// One address of a record in its preview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddressView {
    /// The address; a CNAME record's target name.
    pub ip: String,
    /// Its configured weight.
    pub weight: u32,
    /// With `weighted` balance only: its fraction (0 to 1) of the answers
    /// clients without a place of their own get; 0 when not answered.
    /// `null` for other balances.
    pub share: Option<f64>,
    pub datacenter: Option<String>,
    /// Its HC field as configured: `static`, `disabled`, `check:NAME`,
    /// `scenario:NAME`.
    pub hc: String,
    /// `healthy` or `unhealthy`, drained or not.
    pub health: AddressHealth,
    /// An operator drained it (or its datacenter) out of answers.
    pub drained: bool,
    /// Why it is healthy or not on this device: its check's state and
    /// last result with the time of the change (`check web@192.0.2.10:
    /// Error (status 503) since 2026-12-05 21:04:05.123Z`), its scenario's
    /// decision, `static` or `disabled`.
    pub reason: String,
}

/// Scenario decisions as operators see them.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScenarioStatus {
    pub scenario: String,
    pub active: bool,
    pub pending: Option<bool>,
}

impl Engine {
    /// Every steered record with its status and the addresses answered
    /// now, as reports carry them.
    pub fn status(&self) -> Vec<RecordStatus> {
        let snapshot = self.dns.snapshot.load();
        self.lock()
            .records
            .iter()
            .map(|r| r.status(&snapshot))
            .collect()
    }

    /// Every steered record with its status and the addresses answered
    /// now, typed (the API's).
    pub fn status_view(&self) -> Vec<RecordView> {
        let snapshot = self.dns.snapshot.load();
        let inner = self.lock();
        let dcs = &inner.compiled.datacenters;
        let reason = |a: &AddressSpec| why(&inner.health, &a.hc);
        inner
            .records
            .iter()
            .map(|r| {
                let (status, decision) = r.shown(&snapshot);
                RecordView {
                    record: r.label(),
                    status: Some(status),
                    label: label_of(Some(status)),
                    active: answered_states_by_default(r.steering(), dcs, &r.answers, &reason),
                    decision: decision.into_owned(),
                    held: r.held,
                }
            })
            .collect()
    }

    /// Every topology rule of every record on this device, in order: what
    /// the clients it holds are answered now, and the responses it decided
    /// (`gtm status`, docs/topology.md).
    pub fn rule_status(&self) -> Vec<RuleStatus> {
        let snapshot = self.dns.snapshot.load();
        let inner = self.lock();
        let dcs = &inner.compiled.datacenters;
        let reason = |a: &AddressSpec| why(&inner.health, &a.hc);
        inner
            .records
            .iter()
            .zip(snapshot.steered_slots())
            .filter(|(r, _)| !r.steering().rules().is_empty())
            .flat_map(|(r, slot)| {
                let counts = slot.counters.rules();
                answered_by_rule(
                    r.steering(),
                    dcs,
                    &r.answers,
                    &inner.compiled.topology,
                    &reason,
                )
                .into_iter()
                .zip(counts)
                .map(|(rule, c)| RuleStatus {
                    record: r.label(),
                    decided: c.count.load(std::sync::atomic::Ordering::Relaxed),
                    rule,
                })
                .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A peer's record states (`device`'s, as its report carries them),
    /// typed: each answered address with its weight and datacenter as
    /// this device's configuration holds the record.
    pub fn typed(&self, device: &str, statuses: Vec<RecordStatus>) -> Vec<RecordView> {
        if statuses.is_empty() {
            return Vec::new();
        }
        let inner = self.lock();
        let dcs = &inner.compiled.datacenters;
        let mine: Vec<&Steered> = inner.records.iter().map(|r| &**r).collect();
        // Found at the same place in the list, as a peer with the same
        // configuration lists them; else by label.
        let mut by_label: Option<HashMap<String, usize>> = None;
        statuses
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let here = mine
                    .get(i)
                    .filter(|r| r.label() == s.record)
                    .copied()
                    .or_else(|| {
                        let index = by_label.get_or_insert_with(|| {
                            mine.iter()
                                .enumerate()
                                .map(|(k, r)| (r.label(), k))
                                .collect()
                        });
                        index.get(&s.record).and_then(|&k| mine.get(k).copied())
                    });
                RecordView {
                    active: reported(here.map(|r| r.steering()), dcs, &s.active, device),
                    label: label_of(s.status),
                    record: s.record,
                    status: s.status,
                    decision: s.decision,
                    held: s.held,
                }
            })
            .collect()
    }

    pub fn checks(&self) -> Vec<CheckStatus> {
        let inner = self.lock();
        let instances = self.instances.borrow();
        instances
            .iter()
            .map(|i| {
                inner
                    .health
                    .checks
                    .get(&i.check)
                    .map(|(_, s)| s.clone())
                    .unwrap_or(CheckStatus {
                        check: i.check.to_string(),
                        state: CheckState::Preparing,
                        reason: "no result yet".into(),
                        since_ms: 0,
                        restored: false,
                    })
            })
            .collect()
    }

    /// The state of one check instance (`web@192.0.2.10`, or a check's
    /// name alone), when the configuration has it.
    pub fn check_status(&self, key: &str) -> Option<CheckStatus> {
        let instance = self
            .instances
            .borrow()
            .iter()
            .find(|i| i.check.to_string() == key)
            .map(|i| i.check.clone())?;
        let inner = self.lock();
        Some(
            inner
                .health
                .checks
                .get(&instance)
                .map(|(_, s)| s.clone())
                .unwrap_or(CheckStatus {
                    check: key.to_string(),
                    state: CheckState::Preparing,
                    reason: "no result yet".into(),
                    since_ms: 0,
                    restored: false,
                }),
        )
    }

    /// The check instances this device probes itself: not those that
    /// `run_on` another datacenter.
    pub fn local_checks(&self, datacenter: &str) -> Vec<CheckStatus> {
        let local: HashSet<String> = self
            .instances
            .borrow()
            .iter()
            .filter(|i| {
                i.spec
                    .raw
                    .run_on
                    .as_deref()
                    .is_none_or(|dc| dc == "all" || dc == datacenter)
            })
            .map(|i| i.check.to_string())
            .collect();
        self.checks()
            .into_iter()
            .filter(|c| local.contains(&c.check))
            .collect()
    }

    /// The check instances that run in another datacenter, to be judged
    /// from its devices' reports.
    pub fn remote_instances(&self, datacenter: &str) -> Vec<Instance> {
        self.instances
            .borrow()
            .iter()
            .filter(|i| {
                i.spec
                    .raw
                    .run_on
                    .as_deref()
                    .is_some_and(|dc| dc != "all" && dc != datacenter)
            })
            .cloned()
            .collect()
    }

    pub fn scenarios(&self) -> Vec<ScenarioStatus> {
        let inner = self.lock();
        inner
            .compiled
            .scenarios
            .iter()
            .map(|s| {
                let d = inner
                    .health
                    .scenarios
                    .get(&s.name)
                    .copied()
                    .unwrap_or_default();
                ScenarioStatus {
                    scenario: s.name.clone(),
                    active: d.active,
                    pending: d.pending,
                }
            })
            .collect()
    }

    /// The preview of one record (`www.example.test/A`).
    pub fn preview(&self, label: &str) -> Option<Preview> {
        let (preview, _) = {
            let snapshot = self.dns.snapshot.load();
            let inner = self.lock();
            let key = RecordKey::of(label)?;
            let r = inner.records.iter().find(|r| r.is(&key))?;
            let dcs = &inner.compiled.datacenters;
            let state = Some(&r.state);
            let (shown, decision) = r.shown(&snapshot);
            let reason = |a: &AddressSpec| why(&inner.health, &a.hc);
            let active = answered_states_by_default(r.steering(), dcs, &r.answers, &reason);
            let weighted = r.steering().balance == gtm_model::config::Balance::Weighted;
            let addresses = r
                .steering()
                .addresses
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let ip = a.display();
                    let healthy = state.is_some_and(|s| s.healthy.get(i).copied().unwrap_or(false));
                    let drained = resolve::HealthView::drained(&inner.health, label, a);
                    AddressView {
                        share: weighted.then(|| {
                            active
                                .iter()
                                .find(|x| x.ip == ip && x.health != AddressHealth::FailSafe)
                                .and_then(|x| x.share)
                                .unwrap_or(0.0)
                        }),
                        ip,
                        weight: a.weight,
                        datacenter: answered::datacenter(dcs, a),
                        hc: hc_text(&a.hc),
                        health: if healthy {
                            AddressHealth::Healthy
                        } else {
                            AddressHealth::Unhealthy
                        },
                        drained,
                        reason: why(&inner.health, &a.hc),
                    }
                })
                .collect();
            let mode = match &r.steering().mode {
                ModeSpec::Standalone => "standalone".to_string(),
                ModeSpec::DisasterRecovery(spec) => format!(
                    "disaster-recovery (main {}, dr {}, condition {})",
                    dcs[spec.main].name,
                    dcs[spec.dr].name,
                    match &spec.condition {
                        DrCondition::Automatic => "automatic".to_string(),
                        DrCondition::Scenario(s) => format!("scenario:{s}"),
                    }
                ),
                ModeSpec::Datacenter { count, .. } => format!("datacenter (select {count})"),
            };
            (
                Preview {
                    device: self.device.clone(),
                    record: label.to_string(),
                    mode,
                    status: Some(shown),
                    label: label_of(Some(shown)),
                    balance: r.steering().balance.as_str().to_string(),
                    active,
                    places: answered_by_place(r.steering(), dcs, &r.answers, &reason),
                    rules: answered_by_rule(
                        r.steering(),
                        dcs,
                        &r.answers,
                        &inner.compiled.topology,
                        &reason,
                    ),
                    nearest: answered_by_nearest(r.steering(), dcs, &r.answers, &reason),
                    decision: decision.into_owned(),
                    addresses,
                    switchovers: Vec::new(),
                },
                (),
            )
        };
        let switch_texts = [
            ": DR is on",
            ": DR ended",
            ": Fail-safe records are on",
            ": No healthy records left",
        ];
        // The latest switchovers among a bounded tail of the log, not the
        // whole log: this runs on every preview.
        let mut switchovers: Vec<Event> = self
            .last_events(PREVIEW_TAIL)
            .into_iter()
            .filter(|e| e.object == label && switch_texts.iter().any(|t| e.text.ends_with(t)))
            .collect();
        let keep = switchovers.len().saturating_sub(10);
        switchovers.drain(..keep);
        Some(Preview {
            switchovers,
            ..preview
        })
    }
}

/// An HC field as the configuration writes it: `static`, `disabled`,
/// `scenario:NAME`, `check:NAME`.
fn hc_text(hc: &Hc) -> String {
    match hc {
        Hc::Static => "static".into(),
        Hc::Disabled => "disabled".into(),
        Hc::Scenario(s) => format!("scenario:{s}"),
        Hc::Check(c) => format!("check:{c}"),
    }
}

/// Why an address with `hc` is healthy or not here, in words.
pub(super) fn why(health: &HealthState, hc: &Hc) -> String {
    match hc {
        Hc::Static => "static: always a candidate".into(),
        Hc::Disabled => "disabled in the configuration".into(),
        Hc::Scenario(s) => match health.scenarios.get(s.as_str()) {
            Some(d) if d.decided => format!(
                "scenario {s}: {}",
                if d.active { "active" } else { "passive" }
            ),
            _ => format!("scenario {s}: not decided yet"),
        },
        Hc::Check(c) => match health.checks.get(c) {
            Some((_, status)) => format!(
                "check {c}: {} ({}) since {}",
                status.state,
                status.reason,
                gtm_model::when::iso_ms(status.since_ms)
            ),
            None => format!("check {c}: no result yet"),
        },
    }
}
