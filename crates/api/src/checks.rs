//! Checks as operators act on them: set a manual check, and "Test now"
//! (one probe of a saved or an unsaved check; nothing is saved).

use std::{net::IpAddr, sync::Arc};

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use super::{ApiState, writable};
use gtm_engine::{CheckStatus, api_ops::TestRefused};
use gtm_model as model;
use gtm_model::error::{ApiError, ErrorKind};
use gtm_node::{access::Principal, command::Action};
use test_now::Probe;

pub(crate) mod test_now;

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
    /// The device that probed (empty from a device of an earlier version).
    #[serde(default)]
    pub device: String,
    /// Its datacenter.
    #[serde(default)]
    pub datacenter: String,
    /// What was probed: the address, or the name of the check's target;
    /// empty for an exec check.
    #[serde(default)]
    pub address: String,
    /// Why another device probed, when the device asked did not: the check
    /// runs in another datacenter, or the address is outside this
    /// device's `probe_networks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded: Option<String>,
}

impl TestResult {
    /// Where the probe ran, as the CLI and the console say it: `probed
    /// 192.0.2.10 from gtm3 (dc2)`, then why when another device probed
    /// (`: check web runs in dc2`); empty from a device of an earlier
    /// version, which does not say.
    pub fn whence(&self) -> String {
        if self.device.is_empty() {
            return String::new();
        }
        let from = if self.address.is_empty() {
            format!("run on {} ({})", self.device, self.datacenter)
        } else {
            format!(
                "probed {} from {} ({})",
                self.address, self.device, self.datacenter
            )
        };
        match &self.forwarded {
            Some(why) => format!("{from}: {why}"),
            None => from,
        }
    }
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
    let ask = Probe {
        name: Some(name),
        check: None,
        address: req.address,
    };
    let spec = test_now::spec_of(&state, &ask).await?;
    test_now::test_now(&state, spec, ask).await.map(Json)
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
    let ask = Probe {
        name: None,
        check: Some(body),
        address: req.address,
    };
    let spec = test_now::spec_of(&state, &ask).await?;
    test_now::test_now(&state, spec, ask).await.map(Json)
}

/// The check of a Test now not saved, compiled with the configuration as
/// if it were added.
pub(super) async fn compile_unsaved(
    state: &ApiState,
    body: serde_json::Map<String, serde_json::Value>,
) -> Result<gtm_model::compile::CheckSpec, ApiError> {
    let check: model::config::Check = serde_json::from_value(body.into())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("check: {e}")))?;
    let name = check.name.clone();
    let engine = state.engine.clone();
    super::checking(&state.validations, move |cancel| {
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
    .await?
}

/// The instance Test now probes for `spec` against `address`.
pub(super) fn instance_of(
    state: &ApiState,
    spec: gtm_model::compile::CheckSpec,
    address: Option<IpAddr>,
) -> Result<gtm_health::Instance, ApiError> {
    state.engine.test_instance(spec, address).map_err(|e| {
        let kind = match e {
            TestRefused::Manual(_) => ErrorKind::NotProbed,
            TestRefused::NeedsAddress(_) | TestRefused::TakesNoAddress(_) => ErrorKind::BadRequest,
        };
        ApiError::new(kind, e.to_string())
    })
}
