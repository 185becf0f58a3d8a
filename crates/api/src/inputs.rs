//! Health inputs (docs/health.md, "Inputs"): a push check's report, and
//! the receiver of an Alertmanager's webhook notifications. Both are
//! proposed as commands, so every device's checks read the same reports;
//! the answer comes once the report is committed.

use std::{collections::BTreeMap, net::IpAddr};

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use super::{ApiState, writable};
use gtm_engine::CheckStatus;
use gtm_model::{
    config::CheckType,
    error::{ApiError, ErrorKind},
    inputs::MAX_FIRING,
};
use gtm_node::{
    access::Principal,
    command::{Action, AlertReport},
};

/// A push check's report.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// `ok` or `error`.
    pub state: String,
    /// Why, as the check's reason shows it (at most 256 characters kept).
    #[serde(default)]
    pub reason: Option<String>,
    /// The address the report is for: required for a template check (one
    /// named by addresses' `hc = "check:NAME"`), refused for a check with
    /// a target.
    #[serde(default)]
    pub address: Option<IpAddr>,
}

pub(crate) async fn push(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Json(req): Json<PushRequest>,
) -> Result<Json<Vec<CheckStatus>>, ApiError> {
    writable(&state)?;
    let ok = match req.state.to_ascii_lowercase().as_str() {
        "ok" => true,
        "error" => false,
        other => {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                format!("state: \"{other}\" is not ok or error"),
            ));
        }
    };
    let key = match req.address {
        Some(ip) => format!("{name}@{ip}"),
        None => name.clone(),
    };
    let status = state.engine.check_status(&key);
    let is_push = state
        .engine
        .config()
        .checks
        .iter()
        .any(|c| c.name == name && c.kind == CheckType::Push);
    // The state machine judges the check and the form of the report; an
    // address no record checks with it is refused here, where the
    // device's instances are known.
    if is_push && req.address.is_some() && status.is_none() {
        return Err(ApiError::new(
            ErrorKind::NotFound,
            format!(
                "no address is checked with {key}: no record's address {} has hc = \"check:{name}\"",
                req.address.map(|a| a.to_string()).unwrap_or_default()
            ),
        ));
    }
    let action = Action::Push {
        check: name,
        address: req.address,
        ok,
        reason: req.reason.unwrap_or_default(),
    };
    state
        .replication
        .propose(state.actor(&who), None, action)
        .await?;
    Ok(Json(status.into_iter().collect()))
}

/// An Alertmanager webhook notification (`webhook_configs`, version 4).
/// Fields other than `alerts` are read past: the format is
/// Alertmanager's.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AlertmanagerNotification {
    #[serde(default)]
    pub alerts: Vec<AlertmanagerAlert>,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AlertmanagerAlert {
    /// `firing` or `resolved`.
    pub status: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Alertmanager's identity of the alert; without it, its labels.
    #[serde(default)]
    pub fingerprint: Option<String>,
}

/// What a notification changed.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AlertsTaken {
    /// `alerts: 1 firing, 0 resolved, 2 no check watches`.
    pub changes: Vec<String>,
}

pub(crate) async fn alertmanager(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Json(req): Json<AlertmanagerNotification>,
) -> Result<Json<AlertsTaken>, ApiError> {
    writable(&state)?;
    if req.alerts.len() > MAX_FIRING {
        return Err(ApiError::new(
            ErrorKind::TooLarge,
            format!(
                "{} alerts in one notification; at most {MAX_FIRING} are taken (set max_alerts in the webhook_config)",
                req.alerts.len()
            ),
        ));
    }
    let mut alerts = Vec::with_capacity(req.alerts.len());
    for (i, a) in req.alerts.into_iter().enumerate() {
        let firing = match a.status.as_str() {
            "firing" => true,
            "resolved" => false,
            other => {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!("alerts[{i}].status: \"{other}\" is not firing or resolved"),
                ));
            }
        };
        let summary = a
            .annotations
            .get("summary")
            .or_else(|| a.labels.get("alertname"))
            .cloned()
            .unwrap_or_default();
        let fingerprint = a.fingerprint.filter(|f| !f.is_empty()).unwrap_or_else(|| {
            a.labels
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join(",")
        });
        alerts.push(AlertReport {
            fingerprint,
            firing,
            labels: a.labels,
            summary,
        });
    }
    let applied = state
        .replication
        .propose(state.actor(&who), None, Action::Alerts { alerts })
        .await?;
    Ok(Json(AlertsTaken {
        changes: applied.changes,
    }))
}
