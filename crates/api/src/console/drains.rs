//! Drains (docs/console.md): the active drains (who, when, what), and a
//! form to drain or undrain an address (of every record, or of one) or a
//! datacenter. **Preview** is the API's dry run (what each record would
//! answer on each device, and which records would be left with no answer
//! where); **Drain** or
//! **Undrain** then makes it. A drain that would empty a record is refused
//! with the API's message, and **Drain anyway (force)** is offered. Every
//! step calls the API's own handler ([`crate::drains::drain_or_preview`]).

use axum::{
    Extension,
    body::Bytes,
    extract::State,
    response::{IntoResponse, Response},
};
use maud::{Markup, html};

use super::layout::{self, csrf_field};
use crate::{
    ApiState,
    drains::{DrainFlags, DrainOutcome, address_target, drain_or_preview},
};
use gtm_model::drain::DrainTarget;
use gtm_model::error::ErrorKind;
use gtm_node::{
    access::{Principal, Role},
    judge::{Basis, Judgement},
};

/// The form as sent (or as a listed drain fills it).
#[derive(Debug, Default, Clone)]
struct Fields {
    address: String,
    record: String,
    datacenter: String,
    /// Drain (true) or undrain.
    drained: bool,
}

impl Fields {
    fn of(form: &[u8]) -> (Self, String) {
        let field = |name: &str| {
            form_urlencoded::parse(form)
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        (
            Self {
                address: field("address"),
                record: field("record"),
                datacenter: field("datacenter"),
                drained: field("drained") != "false",
            },
            field("action"),
        )
    }

    /// The drain target, or what is wrong with the form.
    fn target(&self) -> Result<DrainTarget, String> {
        match (self.address.is_empty(), self.datacenter.is_empty()) {
            (false, true) => Ok(address_target(
                self.address.clone(),
                (!self.record.is_empty()).then_some(self.record.as_str()),
            )),
            (true, false) if self.record.is_empty() => Ok(DrainTarget::Datacenter {
                name: self.datacenter.clone(),
            }),
            (true, false) => Err(
                "a record is drained by address: give the address, or leave the record empty to drain the datacenter"
                    .into(),
            ),
            (true, true) => Err("give an address or a datacenter".into()),
            (false, false) => Err(
                "give an address or a datacenter, not both (a drain is of one of them)".into(),
            ),
        }
    }

    fn verb(&self) -> &'static str {
        if self.drained { "Drain" } else { "Undrain" }
    }
}

/// What the last submission did.
enum Outcome {
    Preview(Judgement),
    Applied(String),
    /// Refused because records would be left with no answer: force offered.
    Emptied(String),
    Failed(String),
}

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    let fields = Fields {
        drained: true,
        ..Fields::default()
    };
    render(&state, &who, &fields, None).await
}

/// Preview, apply or force a drain or undrain.
pub async fn submit(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let (fields, action) = Fields::of(&form);
    let flags = match action.as_str() {
        "apply" => DrainFlags {
            dry_run: false,
            force: false,
        },
        "force" => DrainFlags {
            dry_run: false,
            force: true,
        },
        _ => DrainFlags {
            dry_run: true,
            force: false,
        },
    };
    let outcome = match fields.target() {
        Err(why) => Outcome::Failed(why),
        Ok(target) => {
            let done = drain_or_preview(state.clone(), &who, target, fields.drained, flags).await;
            match done {
                Ok(DrainOutcome::Preview(p)) => Outcome::Preview(p),
                Ok(DrainOutcome::Applied(_)) => Outcome::Applied(format!(
                    "{} of {} made on every device.",
                    if fields.drained {
                        "The drain"
                    } else {
                        "The undrain"
                    },
                    describe(&fields)
                )),
                Err(e) if e.error == ErrorKind::Conflict && !e.errors.is_empty() => {
                    Outcome::Emptied(e.message)
                }
                Err(e) => Outcome::Failed(e.message),
            }
        }
    };
    render(&state, &who, &fields, Some(outcome)).await
}

fn describe(f: &Fields) -> String {
    match (f.address.is_empty(), f.record.is_empty()) {
        (true, _) => format!("datacenter {}", f.datacenter),
        (false, true) => format!("{} (every record)", f.address),
        (false, false) => format!("{} in {}", f.address, f.record),
    }
}

/// The hidden fields that carry the form's target to the next step.
fn carried(who: &Principal, f: &Fields) -> Markup {
    html! {
        (csrf_field(who))
        input type="hidden" name="address" value=(f.address);
        input type="hidden" name="record" value=(f.record);
        input type="hidden" name="datacenter" value=(f.datacenter);
        input type="hidden" name="drained" value=(f.drained);
    }
}

fn preview_box(who: &Principal, f: &Fields, j: &Judgement) -> Markup {
    html! {
        div.notice role="status" { (judgement_box(j, "drain-preview", "drain-emptied")) }
        form method="post" action="/ui/drains" {
            (carried(who, f))
            div.actions {
                button type="submit" name="action" value="apply" #drain-apply { (f.verb()) }
                " "
                a href="/ui/drains" { "Cancel" }
            }
        }
    }
}

/// What an action would change on every device: a row per device and
/// record whose answers change, how each device was judged, and the
/// records some device would answer with nothing (ids `id` and
/// `emptied_id`). Shared with the schedules' preview.
pub(super) fn judgement_box(j: &Judgement, id: &str, emptied_id: &str) -> Markup {
    let changed = j.devices.iter().any(|d| !d.changes.is_empty());
    let emptied = j.emptied_lines();
    html! {
        div id=(id) {
            p { "Dry run of " strong { (j.action) } " on every device: nothing is changed yet." }
            ul {
                @for d in &j.devices {
                    li data-device=(d.device) {
                        strong { (d.device) } ": "
                        @match d.basis {
                            Basis::Now => { "asked now" }
                            Basis::Report => {
                                "did not answer; judged from its report "
                                (gtm_model::when::age(d.age_ms.unwrap_or(0))) " old"
                            }
                            Basis::None => { "not judged: " (d.why.as_deref().unwrap_or("no answer")) }
                        }
                        @if d.basis != Basis::None && d.changes.is_empty() {
                            "; no record would answer differently"
                        }
                    }
                }
            }
            @if changed {
                div.scroll tabindex="0" role="region" aria-label="Changed answers" {
                    table.changes {
                        caption { "What each record would answer, per device" }
                        thead { tr {
                            th scope="col" { "Device" }
                            th scope="col" { "Record" }
                            th scope="col" { "Answers now" }
                            th scope="col" { "Would answer" }
                        } }
                        tbody {
                            @for d in &j.devices {
                                @for c in &d.changes {
                                    tr data-device=(d.device) data-record=(c.record) {
                                        td { (d.device) }
                                        th scope="row" { (c.record) }
                                        td { (c.before) }
                                        td { (c.after) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !emptied.is_empty() {
            p.error role="alert" id=(emptied_id) {
                "These records would be left with no answer: " (emptied.join("; "))
            }
        }
    }
}

async fn render(
    state: &ApiState,
    who: &Principal,
    f: &Fields,
    outcome: Option<Outcome>,
) -> Response {
    let axum::Json(drains) = crate::drains::drains(State(state.clone())).await;
    let dcs: Vec<String> = state
        .engine
        .with_config(|c| c.datacenters.iter().map(|d| d.name.clone()).collect());
    let operator = who.allows(Role::Operator);
    let body = html! {
        h1 { "Drains" }
        p { "A drained address or datacenter is left out of answers on every device until it is undrained." }
        @match &outcome {
            None => {},
            Some(Outcome::Preview(p)) => (preview_box(who, f, p)),
            Some(Outcome::Applied(text)) => p.notice role="status" #drain-done { (text) },
            Some(Outcome::Emptied(why)) => {
                div.error role="alert" #drain-error { p { (why) } }
                form method="post" action="/ui/drains" {
                    (carried(who, f))
                    div.actions {
                        button type="submit" name="action" value="force" #drain-force { "Drain anyway (force)" }
                        " "
                        a href="/ui/drains" { "Cancel" }
                    }
                }
            },
            Some(Outcome::Failed(why)) => p.error role="alert" #drain-error { (why) },
        }
        h2 { "Active drains" }
        @if drains.is_empty() {
            p #no-drains { "Nothing is drained." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label="Active drains" {
                table.drains #drains {
                    caption { "The active drains, on every device" }
                    thead { tr {
                        th scope="col" { "Drained" }
                        th scope="col" { "Record" }
                        th scope="col" { "By" }
                        th scope="col" { "Since" }
                        @if operator { th scope="col" { "Action" } }
                    } }
                    tbody {
                        @for d in &drains {
                            @let target = match (&d.address, &d.datacenter) {
                                (Some(a), _) => a.clone(),
                                (None, Some(dc)) => format!("datacenter {dc}"),
                                (None, None) => "-".into(),
                            };
                            tr data-drain=(target) {
                                th scope="row" { (target) }
                                td { (d.record.as_deref().unwrap_or("every record")) }
                                td { (d.actor.to_string()) }
                                td { (gtm_model::when::utc(d.time_ms)) }
                                @if operator {
                                    td {
                                        form method="post" action="/ui/drains" {
                                            (carried(who, &Fields {
                                                address: d.address.clone().unwrap_or_default(),
                                                record: d.record.clone().unwrap_or_default(),
                                                datacenter: d.datacenter.clone().unwrap_or_default(),
                                                drained: false,
                                            }))
                                            button type="submit" name="action" value="preview" data-undrain=(target) {
                                                "Undrain " (target)
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
            h2 { "Drain or undrain" }
            form.filters method="post" action="/ui/drains" {
                (csrf_field(who))
                div.field {
                    label for="d-drained" { "Action" }
                    select #d-drained name="drained" {
                        option value="true" selected[f.drained] { "Drain" }
                        option value="false" selected[!f.drained] { "Undrain" }
                    }
                }
                div.field {
                    label for="d-address" { "Address" }
                    input #d-address name="address" type="text" value=(f.address) placeholder="192.0.2.10";
                }
                div.field {
                    label for="d-record" { "Only this record (optional)" }
                    input #d-record name="record" type="text" value=(f.record) placeholder="www.example.test/A";
                }
                div.field {
                    label for="d-datacenter" { "Or a datacenter" }
                    select #d-datacenter name="datacenter" {
                        option value="" { "(none)" }
                        @for dc in &dcs {
                            option value=(dc) selected[f.datacenter == *dc] { (dc) }
                        }
                    }
                }
                div.actions { button type="submit" name="action" value="preview" #drain-preview-button { "Preview" } }
            }
            p.hint { "Preview shows what every record would answer, on this device; nothing changes until Drain or Undrain." }
        }
    };
    layout::page("Drains", state.engine.device(), Some(who), body).into_response()
}
