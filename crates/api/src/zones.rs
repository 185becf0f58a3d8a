//! `GET /api/v1/zones/{name}/file`: a served zone as a master file
//! (`gtm zone export`), from this device's answers now.

use axum::extract::{Path, Query, State};
use serde::Deserialize;

use gtm_dns::zonefile::{self, Steered};
use gtm_model::error::{ApiError, ErrorKind};

use super::ApiState;

#[derive(Debug, Default, Deserialize)]
pub(super) struct ExportQuery {
    /// The view whose zone to write (none: the zone every client gets).
    #[serde(default)]
    view: Option<String>,
    /// `answer` (default) or `comment`.
    #[serde(default)]
    steered: Option<String>,
}

pub(super) async fn export(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(q): Query<ExportQuery>,
) -> Result<String, ApiError> {
    let steered = match q.steered.as_deref() {
        None | Some("answer") => Steered::Answer,
        Some("comment") => Steered::Comment,
        Some(other) => {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                format!("steered: \"{other}\" is not answer or comment"),
            ));
        }
    };
    let wanted = name.trim_end_matches('.').to_ascii_lowercase();
    let key = match &q.view {
        Some(v) => format!("{wanted}@{v}"),
        None => wanted.clone(),
    };
    let snapshot = state.engine.dns().snapshot.load_full();
    let version = state.engine.version();
    let device = state.engine.device().to_string();
    tokio::task::spawn_blocking(move || {
        let zone = snapshot
            .zones
            .iter()
            .position(|z| z.spec.key() == key)
            .ok_or_else(|| match &q.view {
                Some(v) => ApiError::not_found(format!("no zone {wanted} in view \"{v}\"")),
                None => ApiError::not_found(format!("no zone {wanted}")),
            })?;
        let serial = snapshot.zones.get(zone).map_or(0, |z| z.serial);
        let header = format!(
            "; {key}, serial {serial}, as device {device} answers it at configuration version {version}\n"
        );
        zonefile::write(&snapshot, zone, steered, &header)
            .ok_or_else(|| ApiError::not_found(format!("no zone {wanted}")))
    })
    .await
    .map_err(ApiError::internal)?
}

/// `POST /api/v1/domains/{name}/promote`: a domain transferred in from a
/// primary keeps what it serves as its own records and has no primary
/// (docs/transfer.md, "Transfer in").
pub(crate) async fn promote(
    State(state): State<ApiState>,
    axum::Extension(who): axum::Extension<gtm_node::access::Principal>,
    Path(name): Path<String>,
) -> Result<axum::Json<super::config::ApplyResult>, ApiError> {
    super::writable(&state)?;
    let action = gtm_node::command::Action::Promote {
        domain: name.trim_end_matches('.').to_string(),
    };
    let applied = state
        .replication
        .propose(state.actor(&who), None, action)
        .await?;
    Ok(axum::Json(applied.into()))
}
