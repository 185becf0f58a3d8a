//! Checks as operators act on them: set a manual check, and "Test now"
//! (one probe of a saved or an unsaved check; nothing is saved).

use std::{net::IpAddr, sync::Arc};

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use super::{ApiState, not_found, writable};
use gtm_engine::{CheckStatus, api_ops::TestRefused};
use gtm_model as model;
use gtm_model::error::{ApiError, ErrorKind};
use gtm_node::{access::Principal, command::Action};

/// "Test now": which address to probe a template check against.
#[derive(Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestRequest {
    #[serde(default)]
    pub address: Option<IpAddr>,
}

/// The result of one probe run by "Test now"; nothing is saved.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestResult {
    pub check: String,
    pub ok: bool,
    pub reason: String,
    pub elapsed_ms: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckStateRequest {
    /// `ok` or `error`.
    pub state: String,
}

pub(crate) async fn set_check_state(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Json(req): Json<CheckStateRequest>,
) -> Result<Json<Vec<CheckStatus>>, ApiError> {
    writable(&state)?;
    // The state machine checks the name, the kind and the state.
    let action = Action::SetCheck {
        check: name.clone(),
        state: req.state.clone(),
    };
    state
        .replication
        .propose(state.actor(&who), None, action)
        .await?;
    let engine = state.engine.clone();
    let checks = super::blocking(move || engine.checks()).await?;
    Ok(Json(
        checks.into_iter().filter(|c| c.check == name).collect(),
    ))
}

pub(crate) async fn test_check(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    body: Option<Json<TestRequest>>,
) -> Result<Json<TestResult>, ApiError> {
    let req = body.map(|Json(b)| b).unwrap_or_default();
    let (engine, wanted) = (state.engine.clone(), name.clone());
    let Some(spec) = super::blocking(move || engine.compiled_check(&wanted)).await? else {
        return Err(not_found(format!("no check named \"{name}\"")));
    };
    probe_once(&state, spec, req.address).await.map(Json)
}

/// A check not saved: given whole in the body, probed once.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeRequest {
    /// The check as the configuration file writes it (`name` may be left
    /// out).
    pub check: serde_json::Map<String, serde_json::Value>,
    /// For a template check: the address to probe.
    #[serde(default)]
    pub address: Option<IpAddr>,
}

/// The name an unsaved check is tested under when its body gives none.
const UNSAVED_CHECK: &str = "unsaved";

/// "Test now" of a check that is not saved: it is validated with the
/// configuration (as if it were added; nothing is) and probed once.
pub(crate) async fn test_unsaved(
    State(state): State<ApiState>,
    Json(req): Json<ProbeRequest>,
) -> Result<Json<TestResult>, ApiError> {
    let mut body = req.check;
    if !body.contains_key("name") {
        body.insert("name".into(), UNSAVED_CHECK.into());
    }
    let check: model::config::Check = serde_json::from_value(body.into())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("check: {e}")))?;
    let name = check.name.clone();
    let engine = state.engine.clone();
    let spec = super::checking(&state.validations, move |cancel| {
        let mut config = model::Config::clone(&engine.config());
        config.checks.retain(|c| c.name != check.name);
        config.checks.push(Arc::new(check));
        model::compile_until(&config, cancel)
            .map_err(super::refused)
            .and_then(|c| {
                c.checks
                    .into_iter()
                    .find(|s| s.name == name)
                    .ok_or_else(|| ApiError::new(ErrorKind::Internal, "the tested check vanished"))
            })
    })
    .await??;
    probe_once(&state, spec, req.address).await.map(Json)
}

/// One probe of `spec` (against `address` for a template); nothing saved.
pub(super) async fn probe_once(
    state: &ApiState,
    spec: gtm_model::compile::CheckSpec,
    address: Option<IpAddr>,
) -> Result<TestResult, ApiError> {
    let instance = state.engine.test_instance(spec, address).map_err(|e| {
        let kind = match e {
            TestRefused::Manual(_) => ErrorKind::NotProbed,
            TestRefused::NeedsAddress(_) | TestRefused::TakesNoAddress(_) => ErrorKind::BadRequest,
        };
        ApiError::new(kind, e.to_string())
    })?;
    let outcome = state
        .prober
        .probe(
            &gtm_health::probe_spec(&instance.spec),
            &gtm_health::target_of(&instance),
        )
        .await;
    Ok(TestResult {
        check: instance.check.to_string(),
        ok: outcome.ok,
        reason: outcome.reason,
        elapsed_ms: outcome.elapsed.as_secs_f64() * 1000.0,
    })
}
