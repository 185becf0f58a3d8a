//! Scheduled changes (docs/console.md): every schedule (pending, fired,
//! failed, cancelled) with **Cancel** while something of it is left to
//! fire, and a form to schedule a drain, an undrain, a manual check's state
//! or a resume at a time, with an optional `until` for the reverse.
//! **Preview** is the API's dry run (the schedule it would be, what its
//! action would change if it fired now, warnings); **Add the schedule**
//! appears after it, and adds what was previewed (a form changed since is
//! previewed again instead). A refusal is shown beside the field it names.
//! The list, the dry run, the add and the cancel are the API's own
//! handlers ([`crate::schedules`]).

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};

use super::fields::{Problems, errors_of};
use super::layout::{self, csrf_field, segment};
use crate::{
    ApiState,
    schedules::{AddAnswer, ScheduleDryRun, ScheduleRequest, ScheduledAction, add_or_preview},
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
            dry_run: false,
            force: self.get("force") == "on",
        })
    }
}

/// What the last submission did.
enum Outcome {
    Preview(Box<ScheduleDryRun>),
    /// A schedule made, or cancelled.
    Done(String),
    /// A refusal, beside the field it names.
    Failed(Problems),
}

/// The form's field a refusal names (the form's own, or the API's).
fn field_of(why: &str) -> Option<String> {
    let field = if why.starts_with("at:") {
        "at"
    } else if why.starts_with("until:") || why.contains("--until") {
        "until"
    } else if why.contains("datacenter") && !why.contains("address") {
        "datacenter"
    } else if why.contains("has the address") || why.contains("give an address") {
        "address"
    } else if why.contains("record") {
        "record"
    } else if why.starts_with("state") {
        "state"
    } else if why.contains("check") {
        "check"
    } else {
        return None;
    };
    Some(field.to_string())
}

fn refused(why: String) -> Outcome {
    let mut p = Problems::default();
    p.add(field_of(&why), why);
    Outcome::Failed(p)
}

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    render(&state, &who, &Fields::default(), None).await
}

/// Preview (the dry run) or add the form's schedule.
pub async fn add(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let fields = Fields::of(&form);
    let mut request = match fields.request() {
        Ok(r) => r,
        Err(why) => return render(&state, &who, &fields, Some(refused(why))).await,
    };
    // Added is what was previewed: a form changed since its preview is
    // previewed again.
    let shown = serde_json::to_string(&request).unwrap_or_default();
    request.dry_run = fields.get("action") != "add" || fields.get("previewed") != shown;
    let outcome = match add_or_preview(&state, &who, request).await {
        Ok(AddAnswer::DryRun(d)) => Outcome::Preview(d),
        Ok(AddAnswer::Schedule(s)) => {
            Outcome::Done(format!("schedule {}: {} at {}", s.id, s.what, utc(s.at_ms)))
        }
        Err(e) => refused(e.message),
    };
    // A schedule made: the form is empty again; a preview or a refusal
    // keeps it.
    let shown = if matches!(outcome, Outcome::Done(_)) {
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
        Ok(Json(s)) => Outcome::Done(format!("schedule {}: {} cancelled", s.id, s.what)),
        Err(e) => Outcome::Failed({
            let mut p = Problems::default();
            p.add(None, e.message);
            p
        }),
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
        ScheduleState::Failed if s.fired.as_ref().is_some_and(|f| f.skipped) => "skipped",
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
    outcome: Option<Outcome>,
) -> Response {
    let Json(mut list) = crate::schedules::list(State(state.clone())).await;
    // Newest first.
    list.sort_by_key(|s| std::cmp::Reverse(s.id));
    let operator = who.allows(Role::Operator);
    let none = Problems::default();
    let problems = match &outcome {
        Some(Outcome::Failed(p)) => p,
        _ => &none,
    };
    let kind = if f.get("kind").is_empty() {
        "drain"
    } else {
        f.get("kind")
    };
    let body = html! {
        h1 { "Scheduled changes" }
        p { "A schedule fires its action at its time on the leader, once for the cluster; with an until, its reverse (an undrain, the check's previous state) fires then." }
        @match &outcome {
            None | Some(Outcome::Preview(_)) => {},
            Some(Outcome::Done(text)) => p.notice role="status" #schedule-done { (text) },
            Some(Outcome::Failed(p)) => div.error role="alert" #schedule-error {
                @for why in &p.all { p { (why) } }
            },
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
            @if let Some(Outcome::Preview(d)) = &outcome { (preview_box(d)) }
            form.filters method="post" action="/ui/schedules" {
                (csrf_field(who))
                @if matches!(outcome, Some(Outcome::Preview(_))) && let Ok(r) = f.request() {
                    input type="hidden" name="previewed" value=(serde_json::to_string(&r).unwrap_or_default());
                }
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
                    input #s-at name="at" aria-invalid=[problems.has("at").then_some("true")] aria-describedby=[problems.has("at").then_some("err-at")] type="text" value=(f.get("at")) placeholder="+30m";
                    (errors_of(problems, "at"))
                }
                div.field {
                    label for="s-until" { "Until (optional: the reverse then)" }
                    input #s-until name="until" aria-invalid=[problems.has("until").then_some("true")] aria-describedby=[problems.has("until").then_some("err-until")] type="text" value=(f.get("until")) placeholder="+2h";
                    (errors_of(problems, "until"))
                }
                div.field {
                    label for="s-address" { "Address (drain, undrain)" }
                    input #s-address name="address" aria-invalid=[problems.has("address").then_some("true")] aria-describedby=[problems.has("address").then_some("err-address")] type="text" value=(f.get("address")) placeholder="192.0.2.10";
                    (errors_of(problems, "address"))
                }
                div.field {
                    label for="s-datacenter" { "Or a datacenter (drain, undrain)" }
                    input #s-datacenter name="datacenter" aria-invalid=[problems.has("datacenter").then_some("true")] aria-describedby=[problems.has("datacenter").then_some("err-datacenter")] type="text" value=(f.get("datacenter")) placeholder="dc1";
                    (errors_of(problems, "datacenter"))
                }
                div.field {
                    label for="s-record" { "Record (resume; or only this record of a drain)" }
                    input #s-record name="record" aria-invalid=[problems.has("record").then_some("true")] aria-describedby=[problems.has("record").then_some("err-record")] type="text" value=(f.get("record")) placeholder="www.example.test/A";
                    (errors_of(problems, "record"))
                }
                div.field {
                    label for="s-check" { "Manual check (check set)" }
                    input #s-check name="check" aria-invalid=[problems.has("check").then_some("true")] aria-describedby=[problems.has("check").then_some("err-check")] type="text" value=(f.get("check"));
                    (errors_of(problems, "check"))
                }
                div.field {
                    label for="s-state" { "State (check set)" }
                    select #s-state name="state" aria-invalid=[problems.has("state").then_some("true")] aria-describedby=[problems.has("state").then_some("err-state")] {
                        option value="error" selected[f.get("state") != "ok"] { "Error" }
                        option value="ok" selected[f.get("state") == "ok"] { "OK" }
                    }
                    (errors_of(problems, "state"))
                }
                div.field {
                    input #s-force name="force" type="checkbox" value="on" checked[f.get("force") == "on"];
                    " "
                    label for="s-force" { "Force: add and fire it even if a device would answer a record with nothing (without it, such a firing is skipped)" }
                }
                div.actions {
                    button type="submit" name="action" value="preview" #schedule-preview { "Preview" }
                    @if matches!(outcome, Some(Outcome::Preview(_))) {
                        " "
                        button type="submit" name="action" value="add" #schedule-add { "Add the schedule" }
                    }
                }
            }
        }
    };
    layout::page("Schedules", state.engine.device(), Some(who), body).into_response()
}

/// The dry run above the form: the schedule it would be, what its action
/// would change if it fired now, and what may differ at its time.
fn preview_box(d: &ScheduleDryRun) -> Markup {
    html! {
        div.notice #schedule-preview-box role="status" {
            p {
                "Dry run: " strong { (d.what) } " at " (d.at)
                @if let Some(until) = &d.until {
                    ", then " strong { (d.reverse.as_deref().unwrap_or("its reverse")) } " at " (until)
                }
                ". Nothing is scheduled yet."
            }
            @if let Some(now) = &d.now {
                @if let Some(c) = &now.check {
                    p #schedule-check { "Check " (c.check) " is " (c.before.as_str()) " now; it would be " (c.after.as_str()) "." }
                }
                @if let Some(h) = &now.hold {
                    p #schedule-hold {
                        (h.record) ": "
                        @if h.held { "held by manual failback now" } @else { "not held now" }
                        " (" (h.decision) ")."
                    }
                }
            }
            @if let Some(j) = &d.devices {
                (super::drains::judgement_box(j, "schedule-changes", "schedule-emptied"))
            }
        }
        @if !d.warnings.is_empty() {
            div.error role="alert" #schedule-warnings {
                @for w in &d.warnings { p { (w) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::field_of;

    /// Each refusal, the form's own or the API's, is shown beside the
    /// field it names.
    #[test]
    fn refusals_find_the_fields_they_name() {
        for (why, field) in [
            ("at: \"tomorrow\" is not a time", Some("at")),
            (
                "at: give a time (2026-12-01T02:00:00Z, or +30m from now)",
                Some("at"),
            ),
            ("until: \"x\" is not a time", Some("until")),
            ("--until must be after --at", Some("until")),
            (
                "a resume has no reverse: schedule it without --until",
                Some("until"),
            ),
            ("no datacenter named \"dc9\"", Some("datacenter")),
            ("drain: give an address or a datacenter", Some("address")),
            (
                "no steered record www.a.test/A has the address 192.0.2.9",
                Some("address"),
            ),
            ("no steered record nope.a.test/A", Some("record")),
            (
                "resume: give the record (www.example.test/A)",
                Some("record"),
            ),
            ("no check named \"nope\"", Some("check")),
            ("state \"maybe\" is not ok or error", Some("state")),
            (
                "1000 schedules are waiting to fire, the most there can be; cancel some first",
                None,
            ),
            ("", None),
        ] {
            assert_eq!(field_of(why).as_deref(), field, "{why}");
        }
    }
}
