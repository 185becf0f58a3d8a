//! Drains: of an address or a datacenter, out of answers or back, and the
//! list of active drains (replicated).
//!
//! Drains with a look first, on every device ([`gtm_node::judge`]):
//! `dry_run` answers what a drain or undrain would change on each device
//! and changes nothing; a drain that would leave a record with no answer
//! on any device is refused, naming the records and the devices, unless
//! `force` is given.

use axum::{
    Extension, Json,
    extract::{Query, State},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, blocking, record_label, writable};

use gtm_engine::RecordView;
use gtm_model::drain::DrainTarget;
use gtm_node::{
    access::Principal,
    command::Action,
    judge::{Judgement, WhatIf},
};

/// `?dry_run=true&force=true`, the same as the body's flags.
#[derive(Debug, Default, Deserialize)]
pub struct DrainFlags {
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub force: bool,
}

/// What a drain request did: a dry run's preview, or the drain made.
#[derive(Debug)]
pub(crate) enum DrainOutcome {
    Preview(Judgement),
    /// This device's record status after it.
    Applied(Vec<RecordView>),
}

/// Previews, refuses or proposes a drain or undrain (every device applies
/// it), then answers with this device's record status.
pub(crate) async fn drain(
    state: ApiState,
    who: &Principal,
    target: DrainTarget,
    drained: bool,
    flags: DrainFlags,
) -> Result<Response, ApiError> {
    Ok(
        match drain_or_preview(state, who, target, drained, flags).await? {
            DrainOutcome::Preview(preview) => Json(preview).into_response(),
            DrainOutcome::Applied(status) => Json(status).into_response(),
        },
    )
}

/// [`drain`]'s work, for the API and the console alike.
pub(crate) async fn drain_or_preview(
    state: ApiState,
    who: &Principal,
    target: DrainTarget,
    drained: bool,
    flags: DrainFlags,
) -> Result<DrainOutcome, ApiError> {
    let what = WhatIf::Drain {
        target: target.clone(),
        drained,
    };
    let judgement = state.judge().judge(&what).await?;
    if flags.dry_run {
        return Ok(DrainOutcome::Preview(judgement));
    }
    writable(&state)?;
    if drained
        && !flags.force
        && let Some(refusal) = judgement.refusal("drain anyway")
    {
        return Err(refusal);
    }
    state
        .replication
        .propose(state.actor(who), None, Action::Drain { target, drained })
        .await?;
    let engine = state.engine.clone();
    Ok(DrainOutcome::Applied(
        blocking(move || engine.status_view()).await?,
    ))
}

/// The target of an address drain: of every record, or of one
/// (`www.example.test/A`, in any case).
pub(crate) fn address_target(address: String, record: Option<&str>) -> DrainTarget {
    let record = record.map(|r| match r.rsplit_once('/') {
        Some((n, t)) => record_label(n, t),
        None => r.to_string(),
    });
    DrainTarget::Address { record, address }
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainAddress {
    pub address: String,
    /// Only this record (`www.example.test/A`); every record when absent.
    #[serde(default)]
    pub record: Option<String>,
    pub drained: bool,
    /// Only say what would change (`?dry_run=true` too).
    #[serde(default)]
    pub dry_run: bool,
    /// Drain even if a record is left with no answer (`?force=true` too).
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainDatacenter {
    pub datacenter: String,
    pub drained: bool,
    /// Only say what would change (`?dry_run=true` too).
    #[serde(default)]
    pub dry_run: bool,
    /// Drain even if a record is left with no answer (`?force=true` too).
    #[serde(default)]
    pub force: bool,
}

pub(super) async fn drain_address(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(flags): Query<DrainFlags>,
    Json(req): Json<DrainAddress>,
) -> Result<axum::response::Response, ApiError> {
    let target = address_target(req.address, req.record.as_deref());
    let flags = DrainFlags {
        dry_run: flags.dry_run || req.dry_run,
        force: flags.force || req.force,
    };
    drain(state, &who, target, req.drained, flags).await
}

pub(super) async fn drain_datacenter(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(flags): Query<DrainFlags>,
    Json(req): Json<DrainDatacenter>,
) -> Result<axum::response::Response, ApiError> {
    let target = DrainTarget::Datacenter {
        name: req.datacenter,
    };
    let flags = DrainFlags {
        dry_run: flags.dry_run || req.dry_run,
        force: flags.force || req.force,
    };
    drain(state, &who, target, req.drained, flags).await
}

/// The active drains, with who made them and when.
pub(crate) async fn drains(State(state): State<ApiState>) -> Json<Vec<gtm_model::operator::Drain>> {
    let kv = state.replication.state().await;
    Json(gtm_model::operator::state_of(&kv).drains)
}
