//! The configuration as a whole: export, validate and apply a TOML file
//! (`/api/v1/config`), and the result every configuration write answers.

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Query, State},
};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{ApiState, blocking, checking, refused, writable};
use gtm_model as model;
use gtm_model::error::{ApiError, ErrorKind};
use gtm_node::access::Principal;

/// The result of an apply or a dry run.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplyResult {
    pub applied: bool,
    pub version: u64,
    pub changes: Vec<String>,
    /// Whether the device that answered serves the change already. False
    /// for a dry run, for a change the cluster committed that this device
    /// did not install within its deadline (it installs it when it can),
    /// and for one whose configuration it cannot install (degraded); its
    /// events and `gtm status` say why. Absent from older devices: read as
    /// true.
    #[serde(default = "installed_unknown")]
    pub installed: bool,
    /// A dry run's answer changes on every device: each record the change
    /// touches, now → after, and those left with no answer where
    /// (docs/operations.md, "Judged on every device"). Absent when the
    /// change touches no steered record, and from writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<gtm_node::judge::Judgement>,
}

fn installed_unknown() -> bool {
    true
}

impl ApplyResult {
    /// A dry run's answer: what would change, nothing applied.
    pub(super) fn dry(version: u64, changes: Vec<String>) -> Self {
        Self {
            applied: false,
            version,
            changes,
            installed: false,
            devices: None,
        }
    }
}

impl From<gtm_node::replication::Applied> for ApplyResult {
    fn from(applied: gtm_node::replication::Applied) -> Self {
        Self {
            applied: applied.changed,
            version: applied.version,
            changes: applied.changes,
            installed: applied.installed,
            devices: None,
        }
    }
}

/// `?dry_run=true&force=true` of a rollback.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct Look {
    #[serde(default)]
    pub(crate) dry_run: bool,
    /// Roll back even if a device would answer a record with nothing.
    #[serde(default)]
    pub(crate) force: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ApplyOptions {
    #[serde(default)]
    pub(crate) dry_run: bool,
    /// Apply a configuration with no domain over one that has some.
    #[serde(default)]
    pub(crate) allow_empty: bool,
    /// Apply only if the configuration is still at this version.
    #[serde(default)]
    pub(crate) version: Option<u64>,
    /// Apply even if a device would answer a record with nothing.
    #[serde(default)]
    pub(crate) force: bool,
}

pub(super) async fn export_config(State(state): State<ApiState>) -> Result<String, ApiError> {
    // Copied out first: serializing a large configuration under the engine's
    // lock would hold up health changes for as long.
    toml::to_string_pretty(&state.engine.config())
        .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))
}

/// [`parse_body`] on the blocking pool, and with `compile`, the
/// configuration compiled to check it; stopped if the request is dropped.
pub(super) async fn parse_body_off(
    state: &ApiState,
    body: Bytes,
    compile: bool,
    like: Option<Arc<model::Config>>,
) -> Result<(String, model::Config), ApiError> {
    checking(&state.validations, move |cancel| {
        let (text, config) = parse_body(body, like.as_deref(), cancel)?;
        if compile {
            model::compile_until(&config, cancel).map_err(refused)?;
        }
        Ok((text, config))
    })
    .await?
}

/// The body as text and its parse, taking from `like` (the configuration
/// applied here) what it gives again ([`model::parse_like`]).
fn parse_body(
    body: Bytes,
    like: Option<&model::Config>,
    cancel: &model::Cancel,
) -> Result<(String, model::Config), ApiError> {
    // The body's own bytes when nothing else holds them (no copy of a
    // large text while the device still holds the configuration before).
    let text = String::from_utf8(Vec::from(body)).map_err(|_| {
        ApiError::new(
            ErrorKind::BadRequest,
            "the configuration must be UTF-8 TOML text",
        )
    })?;
    let config = model::parse_until(&text, like, cancel).map_err(refused)?;
    Ok((text, config))
}

pub(super) async fn validate_config(
    State(state): State<ApiState>,
    body: Bytes,
) -> Result<Json<ApplyResult>, ApiError> {
    parse_body_off(&state, body, true, None).await?;
    Ok(Json(ApplyResult::dry(0, Vec::new())))
}

pub(crate) async fn apply_config(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<ApplyOptions>,
    body: Bytes,
) -> Result<Json<ApplyResult>, ApiError> {
    // Compiled here only for a dry run: an apply is compiled by the state
    // machine, which refuses what does not compile with the same errors.
    let (text, config) =
        parse_body_off(&state, body, q.dry_run, Some(state.engine.config())).await?;
    if config.domains.is_empty() && !q.allow_empty {
        let served = state
            .engine
            .with_config(|c| c.domains.iter().map(|d| d.name.clone()).collect::<Vec<_>>());
        if !served.is_empty() {
            let mut named = served
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if served.len() > 5 {
                named.push_str(&format!(" and {} more", served.len() - 5));
            }
            return Err(ApiError::new(
                ErrorKind::ConfirmationNeeded,
                format!(
                    "this configuration has no domain: applying it would stop answering for every domain now served ({named}); nothing was applied. To do that, apply it with --allow-empty (API: allow_empty=true)"
                ),
            ));
        }
    }
    let config = Arc::new(config);
    let judged = state
        .judge()
        .config("apply configuration", state.engine.config(), config.clone())
        .await;
    if q.dry_run {
        let engine = state.engine.clone();
        let (version, changes) =
            blocking(move || (engine.version(), engine.changes(&config))).await?;
        if let Some(expected) = q.version
            && expected != version
        {
            return Err(conflict(version, expected));
        }
        let mut result = ApplyResult::dry(version, changes);
        result.devices = judged;
        return Ok(Json(result));
    }
    writable(&state)?;
    if !q.force
        && let Some(refusal) = judged.as_ref().and_then(|j| j.refusal("apply it anyway"))
    {
        return Err(refusal);
    }
    let config = Arc::try_unwrap(config).unwrap_or_else(|shared| model::Config::clone(&shared));
    let applied = state
        .replication
        .apply_config(state.actor(&who), q.version, text, config)
        .await?;
    Ok(Json(ApplyResult::from(applied)))
}

/// A `?version=N` that is not the current version.
pub(super) fn conflict(version: u64, expected: u64) -> ApiError {
    ApiError::new(
        ErrorKind::Conflict,
        format!(
            "the configuration is at version {version}, not {expected}; read it again and retry"
        ),
    )
}
