//! Device-to-device routes (`/cluster/v1/...`): the cluster-secret and
//! client-certificate guards, and the join, leave, report and preview
//! calls the other devices make (Test now's `/cluster/v1/probe` is with
//! the checks: `checks::test_now`).

use axum::{
    Json,
    body::Bytes,
    extract::{Path, Query, Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};

use gtm_model::error::ApiError;

use super::{ApiState, blocking, not_found, record_label};

use gtm_cluster::SECRET_HEADER;
use gtm_engine::Preview;
use gtm_model::error::ErrorKind;
use gtm_node::replication::{JoinRequest, LeaveRequest, Written};

/// With TLS, a device-to-device route (`/cluster/v1/...`: Raft RPC, peer
/// reports, forwarded writes) also needs the client certificate of a
/// device, besides the cluster secret.
pub(super) async fn device_certificate(
    State(mutual_tls): State<bool>,
    request: Request,
    next: Next,
) -> Response {
    if mutual_tls
        && request.uri().path().starts_with("/cluster/v1/")
        && request
            .extensions()
            .get::<gtm_node::tls::ClientCertificate>()
            .is_none()
    {
        return ApiError::new(
            ErrorKind::Unauthorized,
            "device-to-device calls need a client certificate signed by the cluster's CA (tls_ca)",
        )
        .into_response();
    }
    next.run(request).await
}

pub(super) async fn peer_auth(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(SECRET_HEADER)
        .and_then(|v| v.to_str().ok());
    if state.replication.secret_ok(given) {
        next.run(request).await
    } else {
        ApiError::new(ErrorKind::Unauthorized, "missing or wrong cluster secret").into_response()
    }
}

pub(super) async fn peer_join(
    State(state): State<ApiState>,
    Json(req): Json<JoinRequest>,
) -> Result<Json<Written>, ApiError> {
    state.replication.admit(req).await?;
    Ok(Json(Written {
        version: state.engine.version(),
    }))
}

pub(super) async fn peer_leave(
    State(state): State<ApiState>,
    Json(req): Json<LeaveRequest>,
) -> Result<Json<Written>, ApiError> {
    state.replication.remove(req.id).await?;
    Ok(Json(Written {
        version: state.engine.version(),
    }))
}

pub(super) async fn peer_report(
    State(state): State<ApiState>,
    body: Bytes,
) -> Result<Json<gtm_node::peers::ReportAnswer>, ApiError> {
    let (peers, replication, engine, dc) = (
        state.peers.clone(),
        state.replication.clone(),
        state.engine.clone(),
        state.datacenter.clone(),
    );
    // A report carries every record's status: decoded, taken in and judged
    // (under the engine's lock) off the async workers.
    let report: gtm_node::peers::Report = blocking(move || serde_json::from_slice(&body))
        .await?
        .map_err(|e| {
            ApiError::new(
                ErrorKind::BadRequest,
                format!("the peer report does not parse: {e}"),
            )
        })?;
    let taken = peers.clone();
    let answer = blocking(move || taken.receive(report)).await?;
    tokio::task::spawn_blocking(move || peers.judge(&replication, &engine, &dc));
    Ok(Json(answer))
}

pub(super) async fn peer_preview(
    State(state): State<ApiState>,
    Path((name, rtype)): Path<(String, String)>,
) -> Result<Json<Preview>, ApiError> {
    let label = record_label(&name, &rtype);
    let (engine, what) = (state.engine.clone(), label.clone());
    blocking(move || engine.preview(&what))
        .await?
        .map(Json)
        .ok_or_else(|| not_found(format!("no steered record {label}")))
}

pub(super) async fn peer_explain(
    State(state): State<ApiState>,
    Path((name, rtype)): Path<(String, String)>,
    Query(q): Query<crate::records::ExplainQuery>,
) -> Result<Json<gtm_engine::Explain>, ApiError> {
    let client = gtm_engine::ExplainClient::parse(q.client.as_deref(), q.ecs.as_deref())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, e))?;
    let label = record_label(&name, &rtype);
    let (engine, what) = (state.engine.clone(), label.clone());
    blocking(move || engine.explain(&what, client))
        .await?
        .map(Json)
        .ok_or_else(|| not_found(format!("no steered record {label}")))
}

/// What an operator action would change on this device, from its own state
/// now: a peer judging the action on every device asks
/// ([`gtm_node::judge`]).
pub(super) async fn peer_what_if(
    State(state): State<ApiState>,
    Json(what): Json<gtm_node::judge::WhatIf>,
) -> Result<Json<gtm_engine::dry_run::ActionPreview>, ApiError> {
    let engine = state.engine.clone();
    blocking(move || what.on(&engine))
        .await?
        .map(Json)
        .map_err(not_found)
}
