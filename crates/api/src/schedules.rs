//! The schedules routes (docs/api.md, "Scheduled changes"): list, add and
//! cancel scheduled operator actions. The receiving device reads the times
//! (its clock for relative ones); the state machine keeps the schedules
//! ([`gtm_node::machine::schedule`]) and the leader fires them
//! ([`gtm_node::workers::schedule`]).

use axum::{
    Extension, Json,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, record_label, writable};

use gtm_model::error::ErrorKind;
use gtm_model::{clock::now_ms, drain::DrainTarget};
use gtm_node::{
    access::Principal,
    command::{Action, ScheduleSpec},
    machine::schedule::{Schedule, book_of},
};

/// How far in the past `at` may be (a clock a little behind the
/// operator's): beyond it the time is surely a mistake.
const PAST_TOLERANCE_MS: u64 = 60_000;

/// A schedule to add.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    /// RFC 3339 with its offset (`2026-12-01T02:00:00Z`) or relative to the
    /// receiving device's clock (`+30m`).
    pub at: String,
    /// When the reverse action fires (an undrain for a drain, the check's
    /// previous state for a check set); same forms as `at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    pub action: ScheduledAction,
}

/// An operator action that can be scheduled.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ScheduledAction {
    /// `drained: false` is an undrain.
    DrainAddress {
        address: String,
        /// Only this record (`www.example.test/A`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        record: Option<String>,
        drained: bool,
    },
    DrainDatacenter {
        datacenter: String,
        drained: bool,
    },
    /// A manual check's state: `ok` or `error`.
    CheckSet {
        check: String,
        state: String,
    },
    /// Releases a manual-failback hold (`www.example.test/A`).
    Resume {
        record: String,
    },
}

impl ScheduledAction {
    fn action(self) -> Action {
        let label = |r: String| match r.rsplit_once('/') {
            Some((n, t)) => record_label(n, t),
            None => r,
        };
        match self {
            Self::DrainAddress {
                address,
                record,
                drained,
            } => Action::Drain {
                target: DrainTarget::Address {
                    record: record.map(label),
                    address,
                },
                drained,
            },
            Self::DrainDatacenter {
                datacenter,
                drained,
            } => Action::Drain {
                target: DrainTarget::Datacenter { name: datacenter },
                drained,
            },
            Self::CheckSet { check, state } => Action::SetCheck { check, state },
            Self::Resume { record } => Action::Resume {
                record: label(record),
            },
        }
    }
}

pub(crate) async fn list(State(state): State<ApiState>) -> Json<Vec<Schedule>> {
    Json(book_of(&*state.replication.state().await).schedules)
}

pub(crate) async fn add(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Json(req): Json<ScheduleRequest>,
) -> Result<Json<Schedule>, ApiError> {
    writable(&state)?;
    let now = now_ms();
    let bad = |e: String| ApiError::new(ErrorKind::BadRequest, e);
    let at_ms = gtm_model::when::parse_time(&req.at, now).map_err(|e| bad(format!("at: {e}")))?;
    if at_ms.saturating_add(PAST_TOLERANCE_MS) < now {
        return Err(bad(format!(
            "at: {} is in the past (now is {})",
            gtm_model::when::utc(at_ms),
            gtm_model::when::utc(now)
        )));
    }
    let until_ms = match &req.until {
        Some(u) => {
            Some(gtm_model::when::parse_time(u, now).map_err(|e| bad(format!("until: {e}")))?)
        }
        None => None,
    };
    let spec = ScheduleSpec {
        at_ms,
        until_ms,
        action: req.action.action(),
    };
    let applied = state
        .replication
        .propose(state.actor(&who), None, Action::AddSchedule(Box::new(spec)))
        .await?;
    // The machine says `schedule N: …`.
    let id = applied
        .changes
        .first()
        .and_then(|c| c.strip_prefix("schedule "))
        .and_then(|c| c.split(':').next())
        .and_then(|n| n.parse::<u64>().ok());
    find(&state, id).await
}

pub(crate) async fn cancel(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Schedule>, ApiError> {
    writable(&state)?;
    let id: u64 = id.parse().map_err(|_| {
        ApiError::new(
            ErrorKind::BadRequest,
            format!("\"{id}\" is not a schedule id (a number, as gtm schedule list shows)"),
        )
    })?;
    state
        .replication
        .propose(state.actor(&who), None, Action::CancelSchedule { id })
        .await?;
    find(&state, Some(id)).await
}

async fn find(state: &ApiState, id: Option<u64>) -> Result<Json<Schedule>, ApiError> {
    book_of(&*state.replication.state().await)
        .schedules
        .into_iter()
        .find(|s| Some(s.id) == id)
        .map(Json)
        .ok_or_else(|| {
            ApiError::new(
                ErrorKind::NotFound,
                format!(
                    "schedule {} is not in the state this device applied",
                    id.map_or("?".into(), |i| i.to_string())
                ),
            )
        })
}
