//! Configuration history, rollback and the fate of a command, read from
//! the replicated map this device applied (`history/<version>` and
//! `outcome/<id>`, kept by [`crate::machine`]): the same on every device of
//! a cluster once it has applied the same log.

use gtm_cluster::Map;

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, ApplyResult, blocking, config::Look, writable};

use gtm_model as model;
use gtm_model::actor::Actor;
use gtm_model::error::ErrorKind;
use gtm_node::access::Principal;
use gtm_node::command::COMMAND_HEADER;
use gtm_node::{
    command::{Action, CommandId, Outcome},
    machine::{self, HistorySummary},
};

/// One configuration version as history lists it (without its text).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryItem {
    pub version: u64,
    /// When the write was received (ms since the epoch).
    pub time_ms: u64,
    /// The API token's name and the device that received the write.
    pub actor: Actor,
    /// The command that made it (32 hex digits).
    pub command: String,
    /// What was asked: `apply`, `create check web`, `rollback to 6`, ….
    pub what: String,
    /// Field-level changes from the previous version: the first 1,000
    /// when there are more, then a line counting the rest.
    pub changes: Vec<String>,
    /// How many changes the version made.
    #[serde(default)]
    pub change_count: usize,
    /// Whether history still has its whole text (`config show --version`,
    /// `diff` and `rollback` need it).
    pub text_kept: bool,
}

impl From<HistorySummary> for HistoryItem {
    fn from(e: HistorySummary) -> Self {
        let text_kept = e.text_size().is_some();
        Self {
            text_kept,
            change_count: e.change_count(),
            version: e.version,
            time_ms: e.time_ms,
            actor: e.actor,
            command: e.command,
            what: e.what,
            changes: e.changes,
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(super) struct VersionQuery {
    version: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct DiffQuery {
    pub(crate) from: u64,
    pub(crate) to: u64,
}

/// `POST /api/v1/config/rollback`.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The version whose configuration becomes current again (as a new
    /// version).
    pub version: u64,
}

/// The changes from one kept version to another.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConfigDiff {
    pub from: u64,
    pub to: u64,
    pub changes: Vec<String>,
}

/// What became of a command, as this device's applied state says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Fate {
    /// Committed and applied (`version`).
    Applied,
    /// Refused by the state machine (`error`): it will never apply.
    Rejected,
    /// This device has applied no outcome for it: not (yet) committed, or
    /// older than the outcomes kept.
    Unknown,
}

/// `GET /api/v1/commands/{id}`.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandStatus {
    pub id: String,
    pub status: Fate,
    /// Applied: the configuration version after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// Applied: false when it changed nothing (already so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// Rejected: the error, as the write would have been answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

/// `GET /api/v1/config/history`: newest first.
pub(crate) async fn list(State(state): State<ApiState>) -> Json<Vec<HistoryItem>> {
    let kv = state.replication.state().await;
    let mut items: Vec<HistoryItem> = machine::history_of(&kv)
        .into_iter()
        .map(HistoryItem::from)
        .collect();
    items.reverse();
    Json(items)
}

/// `GET /api/v1/config`: the applied configuration, or with `?version=N`
/// that version's text from history.
pub(super) async fn export(
    State(state): State<ApiState>,
    Query(q): Query<VersionQuery>,
) -> Result<String, ApiError> {
    match q.version {
        None => super::config::export_config(State(state)).await,
        Some(version) => text_of(&*state.replication.state().await, version),
    }
}

/// `GET /api/v1/config/diff?from=A&to=B`: field-level, from A to B.
pub(crate) async fn diff(
    State(state): State<ApiState>,
    Query(q): Query<DiffQuery>,
) -> Result<Json<ConfigDiff>, ApiError> {
    let kv = state.replication.state().await;
    let (old, new) = (text_of(&kv, q.from)?, text_of(&kv, q.to)?);
    drop(kv);
    let changes = blocking(move || -> Result<Vec<String>, ApiError> {
        Ok(gtm_engine::diff(
            &parse_kept(q.from, &old)?,
            &parse_kept(q.to, &new)?,
        ))
    })
    .await??;
    Ok(Json(ConfigDiff {
        from: q.from,
        to: q.to,
        changes,
    }))
}

/// `POST /api/v1/config/rollback`: version N's configuration as a new
/// version; `?dry_run=true` shows the changes from the applied one.
pub(crate) async fn rollback(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<Look>,
    Json(request): Json<RollbackRequest>,
) -> Result<Json<ApplyResult>, ApiError> {
    // The kept text as this device has it: a dry run needs it; a rollback
    // is judged with it when it is here (the state machine checks the
    // committed history, which a device behind may not have yet).
    let kept = text_of(&*state.replication.state().await, request.version);
    let target = match kept {
        Ok(text) => Some(blocking(move || parse_kept(request.version, &text)).await??),
        Err(e) if q.dry_run => return Err(e),
        Err(_) => None,
    };
    let judged = match &target {
        Some(config) => {
            state
                .judge()
                .config(
                    &format!("roll back to version {}", request.version),
                    state.engine.config(),
                    std::sync::Arc::new(config.clone()),
                )
                .await
        }
        None => None,
    };
    if q.dry_run
        && let Some(config) = target
    {
        let engine = state.engine.clone();
        let (version, changes) =
            blocking(move || (engine.version(), engine.changes(&config))).await?;
        let mut result = ApplyResult::dry(version, changes);
        result.devices = judged;
        return Ok(Json(result));
    }
    if !q.force
        && let Some(refusal) = judged.as_ref().and_then(|j| j.refusal("roll back anyway"))
    {
        return Err(refusal);
    }
    writable(&state)?;
    // The state machine checks the version against the committed history,
    // not this device's copy: a device behind cannot roll back to a text
    // it has not seen.
    let applied = state
        .replication
        .propose(
            state.actor(&who),
            None,
            Action::Rollback {
                version: request.version,
            },
        )
        .await?;
    Ok(Json(ApplyResult::from(applied)))
}

/// `GET /api/v1/commands/{id}`: applied, rejected or unknown.
pub(super) async fn command(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Json<CommandStatus>, ApiError> {
    let parsed = parse_id(&id)?;
    let kv = state.replication.state().await;
    let mut status = CommandStatus {
        id: parsed.to_string(),
        status: Fate::Unknown,
        version: None,
        changed: None,
        changes: Vec::new(),
        error: None,
    };
    match machine::outcome_of(&kv, &parsed) {
        Some(Outcome::Applied {
            version,
            changed,
            changes,
            ..
        }) => {
            status.status = Fate::Applied;
            status.version = Some(version);
            status.changed = Some(changed);
            status.changes = changes;
        }
        Some(Outcome::Rejected(e)) => {
            status.status = Fate::Rejected;
            status.error = Some(e);
        }
        None => {}
    }
    Ok(Json(status))
}

/// A command id: 32 hex digits.
fn parse_id(text: &str) -> Result<CommandId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::new(
            ErrorKind::BadRequest,
            format!(
                "command id \"{text}\": give the 32 hex digits an `outcome unknown` answer named"
            ),
        )
    })
}

/// Layer: a request with [`COMMAND_HEADER`] (`x-gtm-command`) makes its command under that
/// id; a header that is not 32 hex digits is refused (400) before anything
/// is done.
pub(crate) async fn client_command_id(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Some(value) = request.headers().get(COMMAND_HEADER) else {
        return next.run(request).await;
    };
    let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
    match text.parse::<CommandId>() {
        Ok(id) => gtm_node::command::with_client_id(id, next.run(request)).await,
        Err(_) => ApiError::new(
            ErrorKind::BadRequest,
            format!("{COMMAND_HEADER} \"{text}\": give 32 hex digits"),
        )
        .into_response(),
    }
}

/// The text of a kept version, or a 404 naming what history keeps.
fn text_of(kv: &Map, version: u64) -> Result<String, ApiError> {
    if let Some(text) = machine::history_entry(kv, version).and_then(|e| e.text) {
        return Ok(text);
    }
    let entries = machine::history_of(kv);
    let range = |list: &[&HistorySummary]| match (list.first(), list.last()) {
        (Some(a), Some(b)) if a.version == b.version => format!("version {}", a.version),
        (Some(a), Some(b)) => format!("versions {} to {}", a.version, b.version),
        _ => "no version".to_string(),
    };
    let all: Vec<&HistorySummary> = entries.iter().collect();
    let with_text: Vec<&HistorySummary> =
        entries.iter().filter(|e| e.text_size().is_some()).collect();
    if entries.iter().any(|e| e.version == version) {
        Err(ApiError::new(
            ErrorKind::NotFound,
            format!(
                "version {version} is in the history without its text (older versions keep only their changes, within the {} MiB text budget); history keeps the text of {}",
                machine::HISTORY_TEXT_BUDGET >> 20,
                range(&with_text)
            ),
        ))
    } else {
        Err(ApiError::new(
            ErrorKind::NotFound,
            format!(
                "version {version} is not in the configuration history; it keeps {} (gtm config history lists them)",
                range(&all)
            ),
        ))
    }
}

/// A kept text parses: it did when it was committed.
fn parse_kept(version: u64, text: &str) -> Result<model::Config, ApiError> {
    model::parse(text).map_err(|e| {
        ApiError::new(
            ErrorKind::Internal,
            format!("version {version} of the history does not parse on this device: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_ids_are_32_hex_digits() {
        let id = CommandId([0xab; 16]);
        assert_eq!(parse_id(&id.to_string()).unwrap(), id);
        for bad in ["", "abc", &"g".repeat(32), &"é".repeat(16), &"a".repeat(33)] {
            let e = parse_id(bad).unwrap_err();
            assert_eq!(e.error, ErrorKind::BadRequest);
            assert!(e.message.contains("32 hex digits"), "{}", e.message);
        }
    }
}
