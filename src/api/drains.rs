//! Drains with a look first: `dry_run` answers what a drain or undrain
//! would change ([`crate::engine::dry_run`]) and changes nothing; a drain
//! that would leave a record with no answer is refused, naming the
//! records, unless `force` is given.

use axum::{
    Json,
    response::{IntoResponse, Response},
};
use serde::Deserialize;

use super::{ApiError, ApiState, ErrorKind, blocking, writable};
use crate::{
    access::Principal,
    command::{Action, DrainTarget},
};

/// `?dry_run=true&force=true`, the same as the body's flags.
#[derive(Debug, Default, Deserialize)]
pub struct DrainFlags {
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub force: bool,
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
    let preview = {
        let (engine, target) = (state.engine.clone(), target.clone());
        blocking(move || engine.drain_preview(&target, drained))
            .await?
            .map_err(|e| ApiError::new(ErrorKind::NotFound, e))?
    };
    if flags.dry_run {
        return Ok(Json(preview).into_response());
    }
    writable(&state)?;
    if drained && !flags.force && !preview.emptied.is_empty() {
        let mut e = ApiError::new(
            ErrorKind::Conflict,
            format!(
                "{} would leave {} record(s) with no answer: {}; nothing was changed. Give --force (force=true) to drain anyway, --dry-run (dry_run=true) to see every change",
                preview.action,
                preview.emptied.len(),
                preview.emptied.join(", ")
            ),
        );
        e.errors = preview.emptied;
        return Err(e);
    }
    state
        .replication
        .propose(state.actor(who), None, Action::Drain { target, drained })
        .await?;
    let engine = state.engine.clone();
    Ok(Json(blocking(move || engine.status()).await?).into_response())
}
