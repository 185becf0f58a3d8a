//! The TSIG key routes (docs/transfer.md): list, add and delete the
//! cluster's keys. The receiving device generates a new key's secret,
//! carries it in the command, and shows it this once.

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, writable};

use gtm_dns::tsig::{ALGORITHM, NewTsigKey, Secret, TsigKeyInfo, TsigKeys};
use gtm_model::error::ErrorKind;
use gtm_model::names::check_tsig_key_name;
use gtm_node::{
    access::Principal,
    command::{Action, TsigChange},
};

/// A key to add.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TsigKeyRequest {
    pub name: String,
}

pub(crate) async fn list(State(state): State<ApiState>) -> Json<Vec<TsigKeyInfo>> {
    Json(TsigKeys::of(&*state.replication.state().await).list())
}

pub(crate) async fn add(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Json(request): Json<TsigKeyRequest>,
) -> Result<Json<NewTsigKey>, ApiError> {
    check_tsig_key_name(&request.name)
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, e.to_string()))?;
    let secret = Secret::generate()
        .map_err(|e| ApiError::internal(format_args!("cannot make a TSIG secret: {e}")))?;
    let shown = secret.base64();
    propose(
        &state,
        &who,
        TsigChange::Add {
            name: request.name.clone(),
            algorithm: ALGORITHM.into(),
            secret,
        },
    )
    .await?;
    Ok(Json(NewTsigKey {
        name: request.name,
        algorithm: ALGORITHM.into(),
        secret: shown,
    }))
}

pub(crate) async fn delete(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Vec<TsigKeyInfo>>, ApiError> {
    propose(&state, &who, TsigChange::Delete { name }).await?;
    Ok(list(State(state)).await)
}

async fn propose(state: &ApiState, who: &Principal, change: TsigChange) -> Result<(), ApiError> {
    writable(state)?;
    state
        .replication
        .propose(state.actor(who), None, Action::Tsig(change))
        .await?;
    Ok(())
}
