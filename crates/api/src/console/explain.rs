//! The explain page (docs/console.md), as `gtm record explain` shows it: a
//! record's resolution for one client (its address and ECS network, from
//! a small form) step by step, ending in the answer DNS gives that client
//! now — on this device or, through the API's own handler, another one.

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, query_value, segment};
use crate::{ApiState, ExplainQuery};
use gtm_engine::Explain;
use gtm_model::error::{ApiError, ErrorKind};
use gtm_node::access::Principal;

#[derive(Debug, Default, Deserialize)]
pub struct ExplainForm {
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    client: Option<String>,
    #[serde(default)]
    ecs: Option<String>,
}

pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((name, rtype)): Path<(String, String)>,
    Query(q): Query<ExplainForm>,
) -> Response {
    let filled = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
    let (device, client, ecs) = (filled(&q.device), filled(&q.client), filled(&q.ecs));
    let found = crate::explain(
        State(state.clone()),
        Path((name.clone(), rtype.clone())),
        Query(ExplainQuery {
            device: device.clone(),
            client: client.clone(),
            ecs: ecs.clone(),
        }),
    )
    .await;
    let label = crate::record_label(&name, &rtype);
    let mut preview = format!("/ui/records/{}/{}", segment(&name), segment(&rtype));
    if let Some(d) = &device {
        preview.push_str("?device=");
        preview.push_str(&query_value(d));
    }
    let action = format!("/ui/records/{}/{}/explain", segment(&name), segment(&rtype));
    let status = match &found {
        Ok(_) => axum::http::StatusCode::OK,
        Err(e) => crate::error::status(e.error),
    };
    let body = html! {
        h1 { "Explain " (label) }
        p { a #preview href=(preview) { "Back to the preview" } }
        form.explain method="get" action=(action) {
            @if let Some(d) = &device {
                input type="hidden" name="device" value=(d);
            }
            label for="client" { "Client address" }
            input #client name="client" type="text" placeholder="127.0.0.1"
                value=(client.as_deref().unwrap_or(""));
            label for="ecs" { "ECS network" }
            input #ecs name="ecs" type="text" placeholder="81.2.69.0/24"
                value=(ecs.as_deref().unwrap_or(""));
            button type="submit" { "Explain" }
        }
        @match &found {
            Ok(Json(x)) => (render(x)),
            Err(e) => (refusal(e)),
        }
    };
    let page = layout::page(&label, state.engine.device(), Some(&who), body);
    (status, page).into_response()
}

fn refusal(e: &ApiError) -> Markup {
    html! {
        p.error role="alert" #refused {
            @if e.error == ErrorKind::BadRequest { "Refused: " }
            (e.message)
        }
    }
}

fn render(x: &Explain) -> Markup {
    let a = &x.answer;
    html! {
        p #for {
            "On " (x.device) ", for a query from " (x.client)
            @if let Some(ecs) = &x.ecs { " carrying ECS " (ecs) }
            "."
        }
        section aria-labelledby="steps-title" {
            h2 #steps-title { "Steps" }
            div.scroll tabindex="0" role="region" aria-label="Steps" {
                table #steps {
                    thead {
                        tr {
                            th scope="col" { "Step" }
                            th scope="col" { "Of" }
                            th scope="col" { "Outcome" }
                            th scope="col" { "Why" }
                        }
                    }
                    tbody {
                        @for s in &x.steps {
                            tr {
                                th scope="row" { (s.step) }
                                td { (s.subject) }
                                td { (s.outcome) }
                                td.why { (s.reason) }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="answer-title" {
            h2 #answer-title { "The answer" }
            dl.facts {
                dt { "Kind" } dd #kind { (a.kind) }
                dt { "Response code" } dd { (a.rcode) }
                dt { "TTL" } dd #ttl { @if let Some(t) = a.ttl { (t) } @else { "—" } }
                @if let Some(scope) = a.ecs_scope {
                    dt { "ECS scope" } dd { "/" (scope) }
                }
                dt { "Rotation" } dd #rotation { (a.rotation) }
            }
            @if a.possible.is_empty() {
                p #answer { "No record: an empty answer." }
            } @else {
                ol #answer {
                    @for p in &a.possible {
                        li {
                            (p.records.join(", "))
                            @if p.weight != 1 { " (weight " (p.weight) ")" }
                        }
                    }
                }
                @if a.omitted > 0 {
                    p { "… and " (a.omitted) " more." }
                }
            }
        }
    }
}
