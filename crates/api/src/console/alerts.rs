//! Alerts (docs/console.md): each notifier's delivery state on this
//! device, and **Send test** (operator), which calls the API's own
//! handler (`POST /api/v1/alerts/{name}/test`).

use axum::{
    Extension,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use maud::html;

use super::layout::{self, csrf_field};
use crate::ApiState;
use gtm_model::when::iso_ms;
use gtm_node::access::{Principal, Role};

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    render(&state, &who, None)
}

pub async fn test(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Response {
    let outcome = match crate::alerts::test(State(state.clone()), Path(name.clone())).await {
        Ok(axum::Json(t)) if t.delivered => Ok(format!(
            "test message of {name} delivered from {}",
            t.device
        )),
        Ok(axum::Json(t)) => Err(format!(
            "test message of {name} not delivered from {}: {}",
            t.device,
            t.error.unwrap_or_default()
        )),
        Err(e) => Err(e.message),
    };
    render(&state, &who, Some(outcome))
}

fn render(state: &ApiState, who: &Principal, outcome: Option<Result<String, String>>) -> Response {
    let list = state.alerts.statuses();
    let body = html! {
        h1 { "Alerts" }
        p {
            "Where this device sends alerts on its events: each notifier's delivery state here. "
            "Notifiers are configured on the " a href="/ui/objects/notifiers" { "Notifiers" } " page."
        }
        @match &outcome {
            Some(Ok(text)) => p.notice role="status" #alert-done { (text) },
            Some(Err(why)) => p.error role="alert" #alert-error { (why) },
            None => {},
        }
        @if list.is_empty() {
            p #no-notifiers { "No notifiers: nothing is sent." }
        } @else {
            table #notifiers {
                thead {
                    tr {
                        th scope="col" { "Notifier" }
                        th scope="col" { "Sends to" }
                        th scope="col" { "State" }
                        th scope="col" { "Delivered" }
                        th scope="col" { "Failed attempts" }
                        th scope="col" { "Dropped" }
                        th scope="col" { "Queued" }
                        th scope="col" { "Open alerts" }
                        th scope="col" { "Last error" }
                        @if who.allows(Role::Operator) { th scope="col" { "Test" } }
                    }
                }
                tbody {
                    @for n in &list {
                        tr data-notifier=(n.name) {
                            th scope="row" { (n.name) " (" (n.kind) ")" }
                            td { (n.target) }
                            td.state { (n.state) }
                            td { (n.counts.delivered) }
                            td { (n.counts.failures) }
                            td { (n.counts.dropped) }
                            td { (n.queued) }
                            td { (n.open) }
                            td {
                                @if let (Some(e), Some(ms)) = (&n.counts.last_error, n.counts.last_error_ms) {
                                    (iso_ms(ms)) ": " (e)
                                }
                            }
                            @if who.allows(Role::Operator) {
                                td {
                                    form method="post" action={ "/ui/alerts/" (n.name) "/test" } {
                                        (csrf_field(who))
                                        button type="submit" { "Send test" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page("Alerts", state.engine.device(), Some(who), body).into_response()
}
