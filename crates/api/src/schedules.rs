//! The schedules routes (docs/api.md, "Scheduled changes"): list, add and
//! cancel scheduled operator actions. The receiving device reads the times
//! (its clock for relative ones); the state machine keeps the schedules
//! ([`gtm_node::machine::schedule`]) and the leader fires them
//! ([`gtm_node::workers::schedule`]).
//!
//! An add is judged on every device ([`gtm_node::judge`]): one whose
//! action would leave a record with no answer on some device if it fired
//! now is refused without `force`, naming the records and the devices; a
//! forced schedule's firings are not judged, an unforced one's are (and
//! skipped when they would empty a record then).
//!
//! An add with `dry_run` is checked as the add itself is (the times here,
//! then the state machine's own checks of the action and its target,
//! [`gtm_node::machine::GtmMachine::check_schedule`]), proposes nothing,
//! and answers the schedule it would be with what its action would change
//! if it fired now, on this device ([`gtm_engine::dry_run`]) and on every
//! device.

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, blocking, record_label, writable};

use gtm_engine::dry_run::ActionPreview;
use gtm_model::error::ErrorKind;
use gtm_model::{clock::now_ms, drain::DrainTarget};
use gtm_node::judge::{Judgement, WhatIf};
use gtm_node::{
    access::Principal,
    command::{Action, Command, ScheduleSpec},
    machine::schedule::{Schedule, book_of, describe, describe_reverse},
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
    /// Only say what the schedule would be and what its action would
    /// change if it fired now; add nothing (`?dry_run=true` too).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Add it even if its action would leave a record with no answer on
    /// some device now, and fire it even so at its time (`?force=true`
    /// too). Without it, such a firing is skipped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// `?dry_run=true&force=true`, the same as the body's flags.
#[derive(Debug, Default, Deserialize)]
pub struct ScheduleFlags {
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub force: bool,
}

/// A schedule's dry run: the schedule it would be, and what its action
/// would change on this device if it fired now.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScheduleDryRun {
    /// When the action would fire, in UTC (`2026-12-01T02:00:00Z`).
    pub at: String,
    pub at_ms: u64,
    /// When the reverse would fire, in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
    /// The action in words: `drain datacenter dc1`.
    pub what: String,
    /// The reverse in words, with `until`: `undrain datacenter dc1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<String>,
    /// What the action would change on this device if it fired now;
    /// absent when this device cannot say (a warning says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<ActionPreview>,
    /// What it would change on every device if it fired now, as a drain's
    /// dry run says it; absent when this device cannot say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Judgement>,
    /// What may differ at its time, or make it fail then: records it would
    /// leave with no answer now, an undrain of what is not drained now.
    pub warnings: Vec<String>,
}

/// What an add answers: the schedule made, or its dry run.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AddAnswer {
    Schedule(Box<Schedule>),
    DryRun(Box<ScheduleDryRun>),
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
    pub(crate) fn action(self) -> Action {
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
    Query(flags): Query<ScheduleFlags>,
    Json(mut req): Json<ScheduleRequest>,
) -> Result<Response, ApiError> {
    req.dry_run |= flags.dry_run;
    req.force |= flags.force;
    Ok(match add_or_preview(&state, &who, req).await? {
        AddAnswer::Schedule(s) => Json(s).into_response(),
        AddAnswer::DryRun(d) => Json(d).into_response(),
    })
}

/// [`add`]'s work, for the API and the console alike: the dry run, or the
/// schedule made.
pub(crate) async fn add_or_preview(
    state: &ApiState,
    who: &Principal,
    req: ScheduleRequest,
) -> Result<AddAnswer, ApiError> {
    let (dry_run, force) = (req.dry_run, req.force);
    if !dry_run {
        writable(state)?;
    }
    let spec = spec_of(req, now_ms())?;
    let add = if force {
        Action::AddForcedSchedule(Box::new(spec.clone()))
    } else {
        Action::AddSchedule(Box::new(spec.clone()))
    };
    let command = Command::new(state.actor(who), None, add);
    if dry_run {
        state.replication.check_schedule(command).await?;
        return Ok(AddAnswer::DryRun(Box::new(
            dry_run_of(state, spec, force).await?,
        )));
    }
    // The machine's own checks first (a target the configuration lacks is
    // refused as such), then every device's answers.
    state.replication.check_schedule(command.clone()).await?;
    if !force
        && let Some(what) = WhatIf::of(&spec.action)
        && let Ok(judgement) = state.judge().judge(&what).await
        && let Some(refusal) = judgement.refusal("schedule it anyway")
    {
        return Err(refusal);
    }
    let applied = state
        .replication
        .propose(command.actor, None, command.action)
        .await?;
    // The machine says `schedule N: …`.
    let id = applied
        .changes
        .first()
        .and_then(|c| c.strip_prefix("schedule "))
        .and_then(|c| c.split(':').next())
        .and_then(|n| n.parse::<u64>().ok());
    let Json(s) = find(state, id).await?;
    Ok(AddAnswer::Schedule(Box::new(s)))
}

/// The schedule a request asks for, its times read on this device's clock
/// (`now`): what a time is not, or a time in the past, is refused here;
/// the state machine checks the rest.
fn spec_of(req: ScheduleRequest, now: u64) -> Result<ScheduleSpec, ApiError> {
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
    Ok(ScheduleSpec {
        at_ms,
        until_ms,
        action: req.action.action(),
    })
}

/// What a schedule that the state machine would take would be, and what
/// its action would change on this device if it fired now.
async fn dry_run_of(
    state: &ApiState,
    spec: ScheduleSpec,
    force: bool,
) -> Result<ScheduleDryRun, ApiError> {
    let what = describe(&spec.action);
    let at = gtm_model::when::rfc3339(spec.at_ms);
    let mut warnings = Vec::new();
    let engine = state.engine.clone();
    let action = spec.action.clone();
    let now = blocking(move || match action {
        Action::Drain { target, drained } => engine
            .drain_preview(&target, drained)
            .map(ActionPreview::from)
            .map_err(|e| e.to_string()),
        Action::SetCheck { check, state } => engine
            .check_preview(&check, &state)
            .map_err(|e| e.to_string()),
        Action::Resume { record } => engine.resume_preview(&record).map_err(|e| e.to_string()),
        other => Err(format!("{} cannot be previewed", describe(&other))),
    })
    .await?;
    let now = match now {
        Ok(p) => Some(p),
        Err(why) => {
            // The machine took it: an undrain names its target only when
            // it fires, and this device's configuration may lag the
            // committed one.
            warnings.push(format!(
                "this device cannot say what {what} would change now: {why}; if that is still so at {at}, the schedule fails then"
            ));
            None
        }
    };
    if let Action::Drain { target, drained } = &spec.action {
        let kv = state.replication.state().await;
        let drains = gtm_model::operator::state_of(&kv).drains;
        let active = drains.iter().any(|d| d.target().as_ref() == Some(target));
        if *drained && active {
            warnings.push(format!(
                "{target} is drained already: unless it is undrained before {at}, the drain changes nothing then"
            ));
        } else if !drained && !active {
            warnings.push(format!(
                "{target} is not drained now: unless it is drained before {at}, the undrain fails then"
            ));
        }
    }
    if let Some(c) = now.as_ref().and_then(|p| p.check.as_ref())
        && c.before == c.after
    {
        warnings.push(format!(
            "check {} is {} already: unless it changes before {at}, the check set changes nothing then",
            c.check,
            c.after.as_str()
        ));
    }
    let devices = match WhatIf::of(&spec.action) {
        Some(what) if now.is_some() => state.judge().judge(&what).await.ok(),
        _ => None,
    };
    if let Some(j) = &devices {
        let lines = j.emptied_lines();
        if !lines.is_empty() {
            warnings.push(if force {
                format!(
                    "if it fired now, {what} would leave {} record(s) with no answer: {}; forced, it fires even so at {at}",
                    lines.len(),
                    lines.join("; ")
                )
            } else {
                format!(
                    "if it fired now, {what} would leave {} record(s) with no answer: {}; the add is refused without --force, and a firing that would still do so at {at} is skipped",
                    lines.len(),
                    lines.join("; ")
                )
            });
        }
        warnings.extend(j.unjudged());
    }
    Ok(ScheduleDryRun {
        at,
        at_ms: spec.at_ms,
        until: spec.until_ms.map(gtm_model::when::rfc3339),
        until_ms: spec.until_ms,
        reverse: spec.until_ms.and_then(|_| describe_reverse(&spec.action)),
        what,
        now,
        devices,
        warnings,
    })
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
