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

/// A record's state as `gtm status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordStatus {
    pub record: String,
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

/// The record preview: what is answered now and why.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Preview {
    pub device: String,
    pub record: String,
    pub mode: String,
    pub status: Option<Status>,
    /// The balance algorithm (`round-robin`, `weighted`, ...).
    #[serde(default)]
    pub balance: String,
    /// What clients without a place of their own are answered: the
    /// balance's real choice (see `answered`).
    pub active: Vec<String>,
    /// Places whose clients are answered otherwise (topology).
    #[serde(default)]
    pub places: Vec<PlaceAnswered>,
    pub decision: String,
    /// Each address with its HC field and whether it is healthy now.
    pub addresses: Vec<AddressView>,
    /// The latest DR and fail-safe switchovers, newest last.
    pub switchovers: Vec<Event>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddressView {
    pub address: String,
    pub dc: Option<String>,
    pub hc: String,
    pub healthy: bool,
    pub drained: bool,
    /// Why it is healthy or not on this device: its check's state and
    /// last result with the time of the change (`check web@192.0.2.10:
    /// Error (status 503) since 2026-12-05 21:04:05.123Z`), its scenario's
    /// decision, `static` or `disabled`. Empty from a device of an earlier
    /// version.
    #[serde(default)]
    pub why: String,
}

/// Scenario decisions as operators see them.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScenarioStatus {
    pub scenario: String,
    pub active: bool,
    pub pending: Option<bool>,
}

impl Engine {
    /// Every steered record with its status and the addresses answered now.
    pub fn status(&self) -> Vec<RecordStatus> {
        self.lock().records.iter().map(|r| r.status()).collect()
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
            let inner = self.lock();
            let key = RecordKey::of(label)?;
            let r = inner.records.iter().find(|r| r.is(&key))?;
            let dcs = &inner.compiled.datacenters;
            let state = Some(&r.state);
            let addresses = r
                .steering()
                .addresses
                .iter()
                .enumerate()
                .map(|(i, a)| AddressView {
                    address: a.display(),
                    dc: a.dc().map(|d| dcs[d].name.clone()),
                    hc: hc_text(&a.hc),
                    healthy: state.is_some_and(|s| s.healthy.get(i).copied().unwrap_or(false)),
                    drained: resolve::HealthView::drained(&inner.health, label, a),
                    why: why(&inner.health, &a.hc),
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
                    status: state.map(|s| s.status),
                    balance: r.steering().balance.as_str().to_string(),
                    active: answered_by_default(r.steering(), &r.answers),
                    places: answered_by_place(r.steering(), &r.answers),
                    decision: r.decision.to_string(),
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
