//! Scheduled changes (docs/console.md): every schedule (pending, fired,
//! failed, cancelled) with **Cancel** while something of it is left to
//! fire, and a form to schedule a drain, an undrain, a manual check's state
//! or a resume at a time, with an optional `until` for the reverse. The
//! list, the add and the cancel are the API's own handlers
//! ([`crate::schedules`]).

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use maud::html;

use super::layout::{self, csrf_field, segment};
use crate::{
    ApiState,
    schedules::{ScheduleRequest, ScheduledAction},
};
use gtm_model::when::utc;
use gtm_node::access::{Principal, Role};
use gtm_node::machine::schedule::{Schedule, ScheduleState};

const KINDS: [(&str, &str); 4] = [
    ("drain", "Drain"),
    ("undrain", "Undrain"),
    ("check", "Set a manual check"),
    ("resume", "Resume a manual failback"),
];

/// The form as sent, kept to show it again after a refusal.
#[derive(Debug, Default)]
struct Fields(Vec<(String, String)>);

impl Fields {
    fn of(form: &[u8]) -> Self {
        Self(
            form_urlencoded::parse(form)
                .filter(|(k, _)| k != "csrf")
                .map(|(k, v)| (k.into_owned(), v.trim().to_string()))
                .collect(),
        )
    }
    fn get(&self, key: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
    fn opt(&self, key: &str) -> Option<String> {
        Some(self.get(key).to_string()).filter(|v| !v.is_empty())
    }

    /// The API's request, or what is wrong with the form.
    fn request(&self) -> Result<ScheduleRequest, String> {
        if self.get("at").is_empty() {
            return Err("at: give a time (2026-12-01T02:00:00Z, or +30m from now)".into());
        }
        let action = match self.get("kind") {
            kind @ ("drain" | "undrain") => {
                let drained = kind == "drain";
                match (self.opt("address"), self.opt("datacenter")) {
                    (Some(address), None) => ScheduledAction::DrainAddress {
                        address,
                        record: self.opt("record"),
                        drained,
                    },
                    (None, Some(datacenter)) => ScheduledAction::DrainDatacenter {
                        datacenter,
                        drained,
                    },
                    (None, None) => return Err(format!("{kind}: give an address or a datacenter")),
                    (Some(_), Some(_)) => {
                        return Err(format!("{kind}: give an address or a datacenter, not both"));
                    }
                }
            }
            "check" => ScheduledAction::CheckSet {
                check: self
                    .opt("check")
                    .ok_or("check: give the manual check's name")?,
                state: self.get("state").to_string(),
            },
            "resume" => ScheduledAction::Resume {
                record: self
                    .opt("record")
                    .ok_or("resume: give the record (www.example.test/A)")?,
            },
            other => {
                return Err(format!(
                    "\"{other}\" is not an action that can be scheduled"
                ));
            }
        };
        Ok(ScheduleRequest {
            at: self.get("at").to_string(),
            until: self.opt("until"),
            action,
        })
    }
}

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    render(&state, &who, &Fields::default(), None).await
}

pub async fn add(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let fields = Fields::of(&form);
    let outcome = match fields.request() {
        Err(why) => Err(why),
        Ok(request) => {
            match crate::schedules::add(State(state.clone()), Extension(who.clone()), Json(request))
                .await
            {
                Ok(Json(s)) => Ok(format!("schedule {}: {} at {}", s.id, s.what, utc(s.at_ms))),
                Err(e) => Err(e.message),
            }
        }
    };
    // A schedule made: the form is empty again; a refusal keeps it.
    let shown = if outcome.is_ok() {
        Fields::default()
    } else {
        fields
    };
    render(&state, &who, &shown, Some(outcome)).await
}

pub async fn cancel(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    let outcome = match crate::schedules::cancel(
        State(state.clone()),
        Extension(who.clone()),
        Path(id.clone()),
    )
    .await
    {
        Ok(Json(s)) => Ok(format!("schedule {}: {} cancelled", s.id, s.what)),
        Err(e) => Err(e.message),
    };
    render(&state, &who, &Fields::default(), Some(outcome)).await
}

fn state_word(s: &Schedule) -> &'static str {
    match s.state {
        ScheduleState::Pending => "pending",
        ScheduleState::Fired if s.until_ms.is_some() && s.reversed.is_none() => {
            "fired, reverse pending"
        }
        ScheduleState::Fired => "fired",
        ScheduleState::Failed => "failed",
        ScheduleState::Cancelled => "cancelled",
    }
}

/// Whether something of it is left to fire (what a cancel stops).
fn open(s: &Schedule) -> bool {
    match s.state {
        ScheduleState::Pending => true,
        ScheduleState::Fired => s.until_ms.is_some() && s.reversed.is_none(),
        ScheduleState::Failed | ScheduleState::Cancelled => false,
    }
}

async fn render(
    state: &ApiState,
    who: &Principal,
    f: &Fields,
    outcome: Option<Result<String, String>>,
) -> Response {
    let Json(mut list) = crate::schedules::list(State(state.clone())).await;
    // Newest first.
    list.sort_by_key(|s| std::cmp::Reverse(s.id));
    let operator = who.allows(Role::Operator);
    let kind = if f.get("kind").is_empty() {
        "drain"
    } else {
        f.get("kind")
    };
    let body = html! {
        h1 { "Scheduled changes" }
        p { "A schedule fires its action at its time on the leader, once for the cluster; with an until, its reverse (an undrain, the check's previous state) fires then." }
        @match &outcome {
            None => {},
            Some(Ok(text)) => p.notice role="status" #schedule-done { (text) },
            Some(Err(why)) => p.error role="alert" #schedule-error { (why) },
        }
        @if list.is_empty() {
            p #no-schedules { "Nothing is scheduled." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label="Schedules" {
                table.schedules #schedules {
                    caption { "Every schedule, newest first (times in UTC)" }
                    thead { tr {
                        th scope="col" { "Id" }
                        th scope="col" { "Action" }
                        th scope="col" { "At" }
                        th scope="col" { "Until" }
                        th scope="col" { "State" }
                        th scope="col" { "Result" }
                        th scope="col" { "By" }
                        @if operator { th scope="col" { "Cancel" } }
                    } }
                    tbody {
                        @for s in &list {
                            tr data-schedule=(s.id) data-state=(state_word(s)) {
                                th scope="row" { (s.id) }
                                td { (s.what) }
                                td { (utc(s.at_ms)) }
                                td { (s.until_ms.map_or("-".to_string(), utc)) }
                                td.state { (state_word(s)) }
                                td {
                                    @if let Some(f) = &s.fired { (f.result) " (" (f.device) ")" }
                                    @if let Some(r) = &s.reversed { "; reverse: " (r.result) }
                                    @if let Some((by, at)) = &s.cancelled { "cancelled by " (by.to_string()) " at " (utc(*at)) }
                                }
                                td { (s.actor.to_string()) }
                                @if operator {
                                    td {
                                        @if open(s) {
                                            form method="post" action={ "/ui/schedules/" (segment(&s.id.to_string())) "/cancel" } {
                                                (csrf_field(who))
                                                button type="submit" data-cancel=(s.id) { "Cancel schedule " (s.id) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if operator {
            h2 { "Schedule a change" }
            form.filters method="post" action="/ui/schedules" {
                (csrf_field(who))
                div.field {
                    label for="s-kind" { "Action" }
                    select #s-kind name="kind" {
                        @for (value, text) in KINDS {
                            option value=(value) selected[kind == value] { (text) }
                        }
                    }
                }
                div.field {
                    label for="s-at" { "At (UTC, 2026-12-01T02:00:00Z, or +30m)" }
                    input #s-at name="at" type="text" value=(f.get("at")) placeholder="+30m";
                }
                div.field {
                    label for="s-until" { "Until (optional: the reverse then)" }
                    input #s-until name="until" type="text" value=(f.get("until")) placeholder="+2h";
                }
                div.field {
                    label for="s-address" { "Address (drain, undrain)" }
                    input #s-address name="address" type="text" value=(f.get("address")) placeholder="192.0.2.10";
                }
                div.field {
                    label for="s-datacenter" { "Or a datacenter (drain, undrain)" }
                    input #s-datacenter name="datacenter" type="text" value=(f.get("datacenter")) placeholder="dc1";
                }
                div.field {
                    label for="s-record" { "Record (resume; or only this record of a drain)" }
                    input #s-record name="record" type="text" value=(f.get("record")) placeholder="www.example.test/A";
                }
                div.field {
                    label for="s-check" { "Manual check (check set)" }
                    input #s-check name="check" type="text" value=(f.get("check"));
                }
                div.field {
                    label for="s-state" { "State (check set)" }
                    select #s-state name="state" {
                        option value="error" selected[f.get("state") != "ok"] { "Error" }
                        option value="ok" selected[f.get("state") == "ok"] { "OK" }
                    }
                }
                div.actions { button type="submit" #schedule-add { "Schedule" } }
            }
        }
    };
    layout::page("Schedules", state.engine.device(), Some(who), body).into_response()
}
