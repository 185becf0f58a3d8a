//! One steered record as operators read and act on it: its preview (what
//! it answers now and why, on this device or another), its resolution for
//! one client (explain), and resuming it after a manual-failback DR.

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::Deserialize;

use gtm_model::error::ApiError;

use super::{ApiState, blocking, not_found, record_label, writable};

use gtm_cluster::SECRET_HEADER;
use gtm_engine::{Explain, ExplainClient, Preview};
use gtm_model::error::ErrorKind;
use gtm_node::{access::Principal, command::Action};

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct DeviceQuery {
    pub(crate) device: Option<String>,
}

/// Also the console's record preview (`crate::console`).
pub(crate) async fn preview(
    State(state): State<ApiState>,
    Path((name, rtype)): Path<(String, String)>,
    Query(q): Query<DeviceQuery>,
) -> Result<Json<Preview>, ApiError> {
    if let Some(device) = q.device.as_deref().filter(|d| *d != state.engine.device()) {
        return remote_preview(&state, device, &name, &rtype)
            .await
            .map(Json);
    }
    let label = record_label(&name, &rtype);
    let engine = state.engine.clone();
    let found = {
        let label = label.clone();
        blocking(move || engine.preview(&label)).await?
    };
    found.map(Json).ok_or_else(|| {
        not_found(format!(
            "no steered record {label} (see gtm status for the records)"
        ))
    })
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct ExplainQuery {
    pub(crate) device: Option<String>,
    pub(crate) client: Option<String>,
    pub(crate) ecs: Option<String>,
}

/// Also the console's explain page (`crate::console`).
pub(crate) async fn explain(
    State(state): State<ApiState>,
    Path((name, rtype)): Path<(String, String)>,
    Query(q): Query<ExplainQuery>,
) -> Result<Json<Explain>, ApiError> {
    // Refused here, before any device is asked.
    let client = ExplainClient::parse(q.client.as_deref(), q.ecs.as_deref())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, e))?;
    if let Some(device) = q.device.as_deref().filter(|d| *d != state.engine.device()) {
        let query: Vec<(&str, &str)> = [("client", &q.client), ("ecs", &q.ecs)]
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.as_deref()?)))
            .collect();
        return ask_device(&state, device, "explain", &name, &rtype, &query)
            .await
            .map(Json);
    }
    let label = record_label(&name, &rtype);
    let engine = state.engine.clone();
    let found = {
        let label = label.clone();
        blocking(move || engine.explain(&label, client)).await?
    };
    found.map(Json).ok_or_else(|| {
        not_found(format!(
            "no steered record {label} (see gtm status for the records)"
        ))
    })
}

/// Whether a record is held by manual failback anywhere in the cluster.
pub(crate) struct Holds {
    /// This device steers the record.
    pub steered: bool,
    /// This device, or a peer by its last report, holds it.
    pub held: bool,
    /// Its status on each device (`DR on gtm1`), for a refusal.
    pub seen: Vec<String>,
}

/// The manual-failback holds of `label` on this device and, by their last
/// reports, on its peers.
pub(crate) async fn holds(state: &ApiState, label: &str) -> Result<Holds, ApiError> {
    let engine = state.engine.clone();
    let here = blocking(move || engine.status()).await?;
    let peers = state.peers.reported(&state.replication);
    let mine = here.iter().find(|r| r.record == label);
    let held = mine.is_some_and(|r| r.held)
        || peers
            .iter()
            .any(|(_, records)| records.iter().any(|r| r.record == label && r.held));
    let mut seen = vec![format!(
        "{} on {}",
        mine.and_then(|r| r.status)
            .map_or("-".into(), |s| s.to_string()),
        state.engine.device()
    )];
    seen.extend(peers.iter().filter_map(|(p, records)| {
        let r = records.iter().find(|r| r.record == label)?;
        Some(format!(
            "{} on {}",
            r.status.map_or("-".into(), |s| s.to_string()),
            p.device
        ))
    }));
    Ok(Holds {
        steered: mine.is_some(),
        held,
        seen,
    })
}

/// Also the console's Resume button.
pub(crate) async fn resume(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((name, rtype)): Path<(String, String)>,
) -> Result<Json<Preview>, ApiError> {
    let label = record_label(&name, &rtype);
    writable(&state)?;
    // Holds are each device's own: refused only when no device of the
    // cluster (by its last report) holds the record.
    let holds = holds(&state, &label).await?;
    if holds.steered && !holds.held {
        return Err(ApiError::new(
            ErrorKind::Conflict,
            format!(
                "{label} is not held by manual failback on any device ({}); there is nothing to resume",
                holds.seen.join(", ")
            ),
        ));
    }
    // Every device applies it; this one has once propose returns.
    state
        .replication
        .propose(
            state.actor(&who),
            None,
            Action::Resume {
                record: label.clone(),
            },
        )
        .await?;
    let (engine, what) = (state.engine.clone(), label.clone());
    blocking(move || engine.preview(&what))
        .await?
        .map(Json)
        .ok_or_else(|| not_found(label))
}

/// Asks another device of the cluster for a record's preview.
pub(super) async fn remote_preview(
    state: &ApiState,
    device: &str,
    name: &str,
    rtype: &str,
) -> Result<Preview, ApiError> {
    ask_device(state, device, "preview", name, rtype, &[]).await
}

/// Asks another device of the cluster for a record's `what` (`preview`,
/// `explain`) as it computes it, with `query`.
async fn ask_device<T: serde::de::DeserializeOwned>(
    state: &ApiState,
    device: &str,
    what: &str,
    name: &str,
    rtype: &str,
    query: &[(&str, &str)],
) -> Result<T, ApiError> {
    let status = state.replication.status();
    let Some(member) = status.members.iter().find(|m| m.info.name == device) else {
        return Err(not_found(format!(
            "no device named \"{device}\" in the cluster (gtm device list)"
        )));
    };
    let secret = state.replication.secret_value();
    let url = format!(
        "{}/cluster/v1/{what}/{name}/{rtype}",
        member.info.api_addr.trim_end_matches('/')
    );
    let unreachable = |e: String| {
        ApiError::new(
            ErrorKind::Unreachable,
            format!("cannot reach device {device}: {e}"),
        )
    };
    let response = state
        .peer_http
        .get(url)
        .query(query)
        .header(SECRET_HEADER, secret)
        .timeout(std::time::Duration::from_secs(3))
        .send()
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    if response.status() == StatusCode::NOT_FOUND {
        return Err(not_found(format!(
            "device {device} has no steered record {}",
            record_label(name, rtype)
        )));
    }
    if !response.status().is_success() {
        // The device's own refusal, as it said it.
        let code = response.status();
        return Err(match response.json::<ApiError>().await {
            Ok(e) => e,
            Err(_) => unreachable(format!("it answered {code}")),
        });
    }
    response
        .json::<T>()
        .await
        .map_err(|e| unreachable(e.to_string()))
}
