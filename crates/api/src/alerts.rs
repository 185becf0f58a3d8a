//! Alerts as operators see them on a device: each notifier's delivery
//! state, and a test message sent now (docs/operations.md, "Alerts").

use axum::{
    Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use super::ApiState;
use gtm_alerts::NotifierStatus;
use gtm_model::error::{ApiError, ErrorKind};

pub(crate) async fn list(State(state): State<ApiState>) -> Json<Vec<NotifierStatus>> {
    Json(state.alerts.statuses())
}

/// What a test message did.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AlertTest {
    pub notifier: String,
    /// The device that sent it.
    pub device: String,
    pub delivered: bool,
    /// The message's id when delivered.
    #[serde(default)]
    pub id: Option<String>,
    /// Why it was not delivered.
    #[serde(default)]
    pub error: Option<String>,
}

pub(crate) async fn test(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<AlertTest>, ApiError> {
    let Some(result) = state.alerts.test(&name).await else {
        return Err(ApiError::new(
            ErrorKind::NotFound,
            format!("no notifier named \"{name}\""),
        ));
    };
    let device = state.engine.device().to_string();
    Ok(Json(match result {
        Ok(message) => AlertTest {
            notifier: name,
            device,
            delivered: true,
            id: Some(message.id),
            error: None,
        },
        Err(e) => AlertTest {
            notifier: name,
            device,
            delivered: false,
            id: None,
            error: Some(e),
        },
    }))
}
