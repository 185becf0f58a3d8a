//! The accounts routes (docs/access.md): list, add or change users, create
//! and revoke tokens, and "who am I". The receiving device hashes a
//! password or makes a token's secret; only digests enter the Raft log.

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, blocking, writable};

use gtm_model::error::ErrorKind;
use gtm_node::{
    access::{
        Principal, Role,
        accounts::{AccountInfo, check_name, new_token},
        password,
    },
    command::{AccountChange, Action},
};

/// A user to add or change.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserRequest {
    pub role: Role,
    /// The new password (at least 10 characters); absent keeps an existing
    /// user's password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// A token to create.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub name: String,
    pub role: Role,
}

/// A token just made: `token` is shown this once and kept nowhere.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NewToken {
    pub name: String,
    pub role: Role,
    pub token: String,
}

/// Who the request acts as.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WhoAmI {
    pub name: String,
    pub role: Role,
    /// The device that answered.
    pub device: String,
}

pub(crate) async fn list(State(state): State<ApiState>) -> Json<Vec<AccountInfo>> {
    Json(state.accounts().await.list())
}

pub(crate) async fn whoami(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
) -> Json<WhoAmI> {
    Json(WhoAmI {
        name: who.name,
        role: who.role,
        device: state.engine.device().to_string(),
    })
}

pub(crate) async fn put_user(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Json(request): Json<UserRequest>,
) -> Result<Json<AccountInfo>, ApiError> {
    check_name(&name).map_err(|e| ApiError::new(ErrorKind::BadRequest, e.to_string()))?;
    let hash = match request.password {
        Some(p) => Some(
            blocking(move || password::hash(&p))
                .await?
                .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("user {name}: {e}")))?,
        ),
        None => None,
    };
    let change = AccountChange::PutUser {
        name: name.clone(),
        role: request.role,
        password: hash,
    };
    propose(&state, &who, change).await?;
    shown(&state, &name).await
}

pub(crate) async fn delete_user(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Vec<AccountInfo>>, ApiError> {
    propose(&state, &who, AccountChange::DeleteUser { name }).await?;
    Ok(list(State(state)).await)
}

pub(crate) async fn create_token(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Json(request): Json<TokenRequest>,
) -> Result<Json<NewToken>, ApiError> {
    check_name(&request.name).map_err(|e| ApiError::new(ErrorKind::BadRequest, e.to_string()))?;
    let (token, digest) = new_token(&request.name).map_err(ApiError::internal)?;
    let change = AccountChange::PutToken {
        name: request.name.clone(),
        role: request.role,
        digest,
    };
    propose(&state, &who, change).await?;
    Ok(Json(NewToken {
        name: request.name,
        role: request.role,
        token,
    }))
}

pub(crate) async fn delete_token(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Result<Json<Vec<AccountInfo>>, ApiError> {
    propose(&state, &who, AccountChange::DeleteToken { name }).await?;
    Ok(list(State(state)).await)
}

async fn propose(state: &ApiState, who: &Principal, change: AccountChange) -> Result<(), ApiError> {
    writable(state)?;
    state
        .replication
        .propose(state.actor(who), None, Action::Account(change))
        .await?;
    Ok(())
}

async fn shown(state: &ApiState, name: &str) -> Result<Json<AccountInfo>, ApiError> {
    state
        .accounts()
        .await
        .list()
        .into_iter()
        .find(|a| a.name == name)
        .map(Json)
        .ok_or_else(|| ApiError::new(ErrorKind::NotFound, format!("no account named \"{name}\"")))
}
