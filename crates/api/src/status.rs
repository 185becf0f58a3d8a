//! What a device is doing: `GET /api/v1/status` (records, checks,
//! scenarios, peers, degraded conditions, GeoIP) and `GET /health`.

use axum::{Json, extract::State};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, GeoipStatus};
use gtm_engine::{CheckStatus, RecordView, ScenarioStatus};

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusReport {
    pub device: String,
    pub version: u64,
    pub records: Vec<RecordView>,
    pub checks: Vec<CheckStatus>,
    pub scenarios: Vec<ScenarioStatus>,
    /// The other devices of the cluster, as their reports last said.
    #[serde(default)]
    pub peers: Vec<gtm_node::peers::PeerStatus>,
    /// Set while this device is degraded: the committed configuration it
    /// could not install (it serves `version`, its last good one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<gtm_engine::InstallFailure>,
    /// Set while this device cannot write its store (full or read-only
    /// disk): it serves DNS from what it holds and refuses writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_degraded: Option<gtm_engine::StorageFault>,
    /// This device's GeoIP database (absent from older devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geoip: Option<GeoipStatus>,
    /// Set when the devices of the cluster answer with different GeoIP
    /// databases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geoip_warning: Option<String>,
    /// The `notify` worker: per secondary of each transferred zone, the
    /// serial last notified and whether the secondary answered
    /// (docs/transfer.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<gtm_dns::xfr::NotifyStatus>,
    /// The `transfer-in` worker on this device: per domain with a
    /// `primary`, the serial the primary last answered, when this device
    /// last asked and transferred, how, and why it failed while it does
    /// (docs/transfer.md, "Transfer in").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfers_in: Vec<gtm_node::workers::transfer_in::TransferInStatus>,
    /// Set while this device's Raft is stopped by a failure (its storage
    /// failed): it serves DNS from what it installed, refuses writes, and
    /// installs nothing the cluster commits until it is restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_degraded: Option<String>,
    /// The device's workers (docs/operations.md, "Workers"); empty from
    /// older devices.
    #[serde(default)]
    pub workers: Vec<gtm_node::workers::WorkerInfo>,
    /// This device's topology rules, each with what it answers now and
    /// the responses it decided (docs/topology.md); empty without rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<gtm_engine::RuleStatus>,
    /// Each notifier's delivery state on this device (docs/operations.md,
    /// "Alerts"); empty without notifiers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<gtm_alerts::NotifierStatus>,
}

pub(super) async fn status(State(state): State<ApiState>) -> Result<Json<StatusReport>, ApiError> {
    // Off the async workers: the records are read under the engine's
    // lock, which an install holds for seconds.
    super::blocking(move || report(&state)).await.map(Json)
}

fn report(state: &ApiState) -> StatusReport {
    StatusReport {
        device: state.engine.device().to_string(),
        version: state.engine.version(),
        records: state.engine.status_view(),
        checks: state.engine.checks(),
        scenarios: state.engine.scenarios(),
        peers: state.peers.status(&state.replication, &state.engine),
        degraded: state.engine.install_failure(),
        storage_degraded: state.engine.storage_fault(),
        geoip: Some(GeoipStatus::of(&state.engine)),
        geoip_warning: geoip_warning(state),
        notify: state.engine.dns().transfers.notify_status(),
        transfers_in: state.transfer_in.status(),
        cluster_degraded: state.replication.fault(),
        workers: state.workers.list(),
        rules: state.engine.rule_status(),
        alerts: state.alerts.statuses(),
    }
}

/// The workers whose failure is not said by a condition of its own (Raft's
/// by `cluster_degraded`, the store writer's by `storage_degraded`).
pub fn failed_workers(workers: &[gtm_node::workers::WorkerInfo]) -> Vec<String> {
    workers
        .iter()
        .filter(|w| w.state == gtm_node::workers::WorkerState::Failed)
        .filter(|w| w.name != RAFT_WORKER && w.name != STORE_WORKER)
        .map(|w| match &w.last_error {
            Some(e) => format!("{}: {e}", w.name),
            None => w.name.clone(),
        })
        .collect()
}

/// The worker names whose failure has a condition of its own.
pub const RAFT_WORKER: &str = "raft";
pub const STORE_WORKER: &str = "store-writer";

/// A warning when the devices answer with different GeoIP databases: the
/// same client could then get different answers from each.
fn geoip_warning(state: &ApiState) -> Option<String> {
    let here = state.engine.geoip().description().to_string();
    let differ: Vec<String> = state
        .peers
        .devices(&state.replication)
        .into_iter()
        .filter_map(|p| {
            p.geoip
                .filter(|db| *db != here)
                .map(|db| format!("{}: {db}", p.device))
        })
        .collect();
    (!differ.is_empty()).then(|| {
        format!(
            "the devices answer with different GeoIP databases (this device: {here}; {}): the same client may get different answers from each",
            differ.join("; ")
        )
    })
}

/// `GET /health`: 200 while the device runs and answers DNS; the body says
/// `ok`, or `degraded` with one line per condition.
pub async fn health(State(state): State<ApiState>) -> String {
    let mut conditions = Vec::new();
    if let Some(f) = state.engine.install_failure() {
        conditions.push(format!(
            "configuration: version {} cannot be installed on this device (serving version {}): {}",
            f.version, f.serving, f.reason
        ));
    }
    if let Some(fault) = state.engine.storage_fault() {
        conditions.push(format!("storage: {fault}"));
    }
    if let Some(why) = state.replication.fault() {
        conditions.push(format!(
            "cluster: {why}; this device refuses writes and installs nothing the cluster commits until it is restarted"
        ));
    }
    for worker in failed_workers(&state.workers.list()) {
        conditions.push(format!("worker {worker}"));
    }
    for n in state.alerts.statuses() {
        if n.counts.failing {
            conditions.push(format!(
                "alerts: notifier {} cannot deliver ({} queued): {}",
                n.name,
                n.queued,
                n.counts.last_error.as_deref().unwrap_or_default()
            ));
        }
    }
    if conditions.is_empty() {
        "ok\n".to_string()
    } else {
        format!("degraded\n{}\n", conditions.join("\n"))
    }
}
