//! Cluster membership as an operator drives it (`/api/v1/cluster/...`):
//! init, the join token, join, leave, status and recovery.

use axum::{Extension, Json, extract::State};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, writable};

use gtm_cluster::ClusterStatus;
use gtm_model::error::ErrorKind;
use gtm_node::access::Principal;

/// What `gtm cluster init` and `recover` report.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterMessage {
    pub message: String,
    /// As `GET /api/v1/cluster/status` gives it.
    #[schemars(with = "serde_json::Value")]
    pub status: ClusterStatus,
}

pub(super) async fn cluster_init(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
) -> Result<Json<ClusterMessage>, ApiError> {
    writable(&state)?;
    if state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::AlreadyClustered,
            "this device already belongs to a cluster (gtm cluster status)",
        ));
    }
    state.replication.init(state.actor(&who)).await?;
    Ok(Json(ClusterMessage {
        message: "cluster initialized with this device as its only voter. \
                  Join the second device of the pair with `gtm cluster join <this device's API address> --token <gtm cluster token>`. \
                  Two voters cannot survive the loss of one: with a pair, losing either device stops configuration writes \
                  (DNS keeps answering). Join a remote device in another datacenter as the third voter so that either \
                  device of the pair can fail, or use `gtm cluster recover --force-single` on the survivor."
            .into(),
        status: state.replication.status(),
    }))
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenResponse {
    pub token: String,
}

pub(crate) async fn cluster_token(
    State(state): State<ApiState>,
) -> Result<Json<TokenResponse>, ApiError> {
    if !state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::NotClustered,
            "this device belongs to no cluster yet: run gtm cluster init first",
        ));
    }
    let token = state.replication.token();
    Ok(Json(TokenResponse { token }))
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinCommand {
    /// API address of any member, e.g. http://127.0.0.11:8053.
    pub address: String,
    pub token: String,
    #[serde(default)]
    pub learner: bool,
}

pub(super) async fn cluster_join(
    State(state): State<ApiState>,
    Json(req): Json<JoinCommand>,
) -> Result<Json<ClusterStatus>, ApiError> {
    writable(&state)?;
    if state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::AlreadyClustered,
            "this device already belongs to a cluster; gtm cluster leave first",
        ));
    }
    let address = if req.address.contains("://") {
        req.address.clone()
    } else {
        format!("http://{}", req.address)
    };
    state
        .replication
        .join(&address, &req.token, !req.learner)
        .await?;
    Ok(Json(state.replication.status()))
}

pub(super) async fn cluster_leave(
    State(state): State<ApiState>,
) -> Result<Json<ClusterStatus>, ApiError> {
    writable(&state)?;
    if !state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::NotClustered,
            "this device belongs to no cluster",
        ));
    }
    state.replication.leave().await?;
    Ok(Json(state.replication.status()))
}

pub(super) async fn cluster_status(State(state): State<ApiState>) -> Json<ClusterStatus> {
    Json(state.replication.status())
}

pub(super) async fn cluster_recover(
    State(state): State<ApiState>,
) -> Result<Json<ClusterMessage>, ApiError> {
    writable(&state)?;
    if !state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::NotClustered,
            "this device belongs to no cluster",
        ));
    }
    state.replication.recover_single().await?;
    Ok(Json(ClusterMessage {
        message: "this device now continues alone as the only voter; wipe the lost device's data directory before it joins again".into(),
        status: state.replication.status(),
    }))
}
