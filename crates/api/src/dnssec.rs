//! A domain's DNSSEC state on this device (`gtm domain dnssec status`,
//! `gtm domain ds`): whether it is signed, its keys' DNSKEY and DS records
//! (never a private key), and when the signatures served expire; and the
//! steps of a key rollover (`gtm domain dnssec rollover`).

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, writable};

use gtm_dns::dnssec::keys::KeyMaterial;
use gtm_engine::dnssec::DomainDnssec;
use gtm_model::config::KeyAlgorithm;
use gtm_model::error::ErrorKind;
use gtm_node::{
    access::Principal,
    command::{Action, DnssecChange, RolloverStep},
};

pub(crate) async fn status(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<DomainDnssec>, ApiError> {
    let (engine, domain) = (state.engine.clone(), name.clone());
    let status = super::blocking(move || engine.domain_dnssec(&domain)).await?;
    status.map(Json).ok_or_else(|| {
        ApiError::new(
            ErrorKind::NotFound,
            format!("no domain named \"{}\"", name.trim_end_matches('.')),
        )
    })
}

/// One step of a key rollover, as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Publish,
    Swap,
    Retire,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloverRequest {
    pub step: Step,
    /// The new key's algorithm (publish only; default: the domain's
    /// `dnssec_algorithm`).
    #[serde(default)]
    pub algorithm: Option<KeyAlgorithm>,
}

/// Proposes one rollover step; a new key is made here, on the device that
/// received the request. Answers with the domain's DNSSEC state after it.
pub(crate) async fn rollover(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Json(req): Json<RolloverRequest>,
) -> Result<Json<DomainDnssec>, ApiError> {
    writable(&state)?;
    let step = match req.step {
        Step::Publish => {
            if state.replication.clustered() && !state.mutual_tls {
                return Err(ApiError::new(
                    ErrorKind::Conflict,
                    "keys travel between devices, and device-to-device traffic is not mutual TLS here: set tls_cert and tls_key on every device (docs/cluster.md)",
                ));
            }
            let algorithm = match req.algorithm {
                Some(a) => a,
                None => {
                    let engine = state.engine.clone();
                    super::blocking(move || engine.signed_zones())
                        .await?
                        .into_iter()
                        .find(|(d, _)| d.eq_ignore_ascii_case(name.trim_end_matches('.')))
                        .map(|(_, a)| a)
                        .unwrap_or_default()
                }
            };
            let key = KeyMaterial::generate(algorithm, gtm_model::clock::now_ms())
                .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
            RolloverStep::Publish { key }
        }
        Step::Swap => RolloverStep::Swap,
        Step::Retire => RolloverStep::Retire,
    };
    let action = Action::Dnssec(DnssecChange::Rollover {
        domain: name.clone(),
        step,
    });
    state
        .replication
        .propose(state.actor(&who), None, action)
        .await?;
    status(State(state), Path(name)).await
}
