//! The record preview (docs/console.md), as `gtm record preview` shows it:
//! the active records as answered, the mode and its decision, each address
//! with its HC field and health, the latest switchovers — on this device
//! or, through the API's own code, on any other device of the cluster.
//! Operators and admins also get the Resume button of a manual failback,
//! which does what `POST /api/v1/records/{name}/{rtype}/resume` does.

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Path, Query, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, csrf_field, query_value, segment};
use super::records::{class_of, preview_href, text_of};
use crate::{ApiState, DeviceQuery};
use gtm_engine::Preview;
use gtm_model::error::ApiError;
use gtm_node::access::{Principal, Role};

#[derive(Debug, Default, Deserialize)]
pub struct PreviewQuery {
    #[serde(default)]
    device: Option<String>,
    /// Set after a resume, to say it was done.
    #[serde(default)]
    resumed: Option<String>,
}

pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((name, rtype)): Path<(String, String)>,
    Query(q): Query<PreviewQuery>,
) -> Response {
    let device = q.device.filter(|d| !d.is_empty());
    let found = crate::preview(
        State(state.clone()),
        Path((name.clone(), rtype.clone())),
        Query(DeviceQuery {
            device: device.clone(),
        }),
    )
    .await;
    let label = crate::record_label(&name, &rtype);
    // Resume is offered only where there is something to resume.
    let held = match crate::records::holds(&state, &label).await {
        Ok(h) => h.held,
        Err(_) => false,
    };
    let body = match found {
        Ok(Json(preview)) => html! {
            (devices(&state, &label, &preview.device))
            @if q.resumed.is_some() {
                p.notice role="status" #resumed {
                    "Resumed: every device answers from the main datacenter again once the DR condition has cleared."
                }
            }
            (render(&preview, &who, &name, &rtype, held))
        },
        Err(e) => return error_page(&state, &who, &label, &e),
    };
    layout::page(&label, state.engine.device(), Some(&who), body).into_response()
}

/// Resumes a record held by manual failback, on every device (the API's
/// handler proposes it to the cluster), then shows the preview again.
pub async fn resume(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((name, rtype)): Path<(String, String)>,
    form: Bytes,
) -> Response {
    let device = form_urlencoded::parse(&form)
        .find(|(k, _)| k == "device")
        .map(|(_, v)| v.into_owned())
        .filter(|d| !d.is_empty());
    let label = crate::record_label(&name, &rtype);
    match crate::resume(
        State(state.clone()),
        Extension(who.clone()),
        Path((name.clone(), rtype.clone())),
    )
    .await
    {
        Ok(_) => {
            let mut to = format!(
                "/ui/records/{}/{}?resumed=1",
                segment(&name),
                segment(&rtype)
            );
            if let Some(d) = device {
                to.push_str("&device=");
                to.push_str(&query_value(&d));
            }
            let mut response = StatusCode::SEE_OTHER.into_response();
            if let Ok(v) = HeaderValue::from_str(&to) {
                response.headers_mut().insert(header::LOCATION, v);
            }
            response
        }
        Err(e) => error_page(&state, &who, &label, &e),
    }
}

fn error_page(state: &ApiState, who: &Principal, label: &str, e: &ApiError) -> Response {
    let body = html! {
        h1 { (label) }
        p.error role="alert" { (e.message) }
        p { a href="/ui/records" { "Back to the records" } }
    };
    let page = layout::page(label, state.engine.device(), Some(who), body);
    (crate::error::status(e.error), page).into_response()
}

/// Links to the same preview on each device of the cluster.
fn devices(state: &ApiState, label: &str, shown: &str) -> Markup {
    let this = state.engine.device().to_string();
    let mut names = vec![this.clone()];
    names.extend(
        state
            .peers
            .devices(&state.replication)
            .into_iter()
            .map(|p| p.device),
    );
    html! {
        @if names.len() > 1 {
            nav.devices aria-label="The preview on each device" {
                "On device: "
                @for n in &names {
                    @let href = preview_href(label, (*n != this).then_some(n.as_str()));
                    @if n == shown {
                        a href=(href) aria-current="page" { (n) }
                    } @else {
                        a href=(href) { (n) }
                    }
                    " "
                }
            }
        }
    }
}

/// The explain page of the record on `device`.
fn explain_href(name: &str, rtype: &str, device: &str) -> String {
    format!(
        "/ui/records/{}/{}/explain?device={}",
        segment(name),
        segment(rtype),
        query_value(device)
    )
}

fn render(p: &Preview, who: &Principal, name: &str, rtype: &str, held: bool) -> Markup {
    let class = format!("st st-{}", class_of(p.status));
    let resumable = who.allows(Role::Operator) && held;
    let action = format!("/ui/records/{}/{}/resume", segment(name), segment(rtype));
    html! {
        h1 { (p.record) " " span.sub { "on " (p.device) } }
        @if who.allows(Role::Admin) {
            p { a #edit href={ "/ui/records/edit?label=" (super::layout::query_value(&p.record)) } { "Edit this record" } }
        }
        p { a #explain href=(explain_href(name, rtype, &p.device)) { "Explain for a client" } }
        dl.facts {
            dt { "Status" } dd { span class=(class) #status { (text_of(p.status)) } }
            dt { "Mode" } dd #mode { (p.mode) }
            dt { "Balance" } dd #balance { (p.balance) }
            dt { "Decision" } dd #decision { (p.decision) }
        }
        @if resumable {
            form.resume method="post" action=(action) {
                (csrf_field(who))
                input type="hidden" name="device" value=(p.device);
                button type="submit" #resume { "Resume" }
                span.hint { " Ends a DR held by manual failback, on every device, once its condition has cleared." }
            }
        }
        section aria-labelledby="active-title" {
            h2 #active-title { "Active records" }
            @if p.active.is_empty() {
                p #active { "None: this record has no answer now." }
            } @else {
                ul #active {
                    @for a in gtm_engine::active_texts(&p.active) { li { (a) } }
                }
            }
            @if !p.rules.is_empty() {
                p { "Topology rules (the closest that holds a client answers it):" }
                ol #rules {
                    @for rule in &p.rules {
                        li {
                            (rule.client) " → " (rule.target) " (weight " (rule.weight) "): "
                            @if rule.skipped { "skipped, no candidate" } @else { (gtm_engine::active_texts(&rule.active).join(", ")) }
                        }
                    }
                }
            }
            @if !p.nearest.is_empty() {
                p { "Nearest datacenter (clients no rule answers go to the nearest with a candidate):" }
                ul #nearest {
                    @for near in &p.nearest {
                        li {
                            (near.datacenter)
                            @if near.bias != 0 { " (bias " (format!("{:+}", near.bias)) ")" }
                            ": "
                            @if near.skipped { "skipped, no candidate" } @else { (gtm_engine::active_texts(&near.active).join(", ")) }
                        }
                    }
                }
            }
            @if !p.places.is_empty() {
                p { "Clients in these places are answered otherwise (topology):" }
                ul #places {
                    @for place in &p.places {
                        li {
                            (place.place) ": "
                            @if place.active.is_empty() { "none" } @else { (gtm_engine::active_texts(&place.active).join(", ")) }
                        }
                    }
                }
            }
        }
        section aria-labelledby="addresses-title" {
            h2 #addresses-title { "Addresses" }
            div.scroll tabindex="0" role="region" aria-label="Addresses" {
                table #addresses {
                    thead {
                        tr {
                            th scope="col" { "Address" }
                            th scope="col" { "Datacenter" }
                            th scope="col" { "HC" }
                            th scope="col" { "Health" }
                            th scope="col" { "Why" }
                            th scope="col" { "Drained" }
                        }
                    }
                    tbody {
                        @for a in &p.addresses {
                            tr {
                                th scope="row" { (a.ip) }
                                td { (a.datacenter.as_deref().unwrap_or("—")) }
                                td { (a.hc) }
                                @if a.health == gtm_engine::AddressHealth::Healthy {
                                    td.st.st-ok { "Healthy" }
                                } @else {
                                    td.st.st-down { "Unhealthy" }
                                }
                                td.why { (a.reason) }
                                td { @if a.drained { "drained" } @else { "no" } }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="switch-title" {
            h2 #switch-title { "Latest switchovers" }
            @if p.switchovers.is_empty() {
                p { "None recorded." }
            } @else {
                ol.switchovers reversed {
                    @for e in p.switchovers.iter().rev() {
                        li { time { (gtm_model::when::utc(e.time_ms)) } " " (e.text) }
                    }
                }
            }
        }
    }
}
