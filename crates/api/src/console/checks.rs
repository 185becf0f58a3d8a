//! Checks and scenarios (docs/console.md): every check instance with its
//! state and last reason on every device side by side; **Test now** for a
//! configured check (operators and admins; the API's own handler, one
//! probe, nothing saved); **Set OK** / **Set Error** of a manual check
//! (operators and admins; the API's own handler); and every scenario with its decision and its
//! condition, each term marked true, false or unknown on this device.

use std::collections::{BTreeMap, BTreeSet};

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};

use super::layout::{self, csrf_field, segment};
use crate::{ApiState, TestRequest, TestResult};
use gtm_engine::{CheckStatus, Piece, ScenarioView};
use gtm_model::config::CheckType;
use gtm_model::error::{ApiError, ErrorKind};
use gtm_node::access::{Principal, Role};
use gtm_resolve::CheckState;

/// A Test now result, or why it could not run.
type Tested = (String, Result<TestResult, ApiError>);

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    render(&state, &who, None).await
}

/// Sets a manual check `ok` or `error` (the form's `state`), as `PUT
/// /api/v1/checks/{name}/state` does.
pub async fn set_state(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    form: Bytes,
) -> Response {
    let wanted = form_urlencoded::parse(&form)
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let done = crate::checks::set_check_state(
        State(state.clone()),
        Extension(who.clone()),
        Path(name.clone()),
        Json(crate::CheckStateRequest {
            state: wanted.clone(),
        }),
    )
    .await;
    let set = match done {
        Ok(_) => Ok(format!("check {name} set to {wanted} on every device")),
        Err(e) => Err(format!("check {name}: {}", e.message)),
    };
    render_with(&state, &who, None, Some(set)).await
}

pub async fn test(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    form: Bytes,
) -> Response {
    // The address to probe a template check against (empty: none).
    let address = form_urlencoded::parse(&form)
        .find(|(k, _)| k == "address")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let address = match address.as_str() {
        "" => Ok(None),
        a => a.parse().map(Some).map_err(|_| {
            ApiError::new(
                ErrorKind::BadRequest,
                format!("\"{a}\" is not an IP address"),
            )
        }),
    };
    let result = match address {
        Err(why) => Err(why),
        Ok(address) => crate::test_check(
            State(state.clone()),
            Path(name.clone()),
            Some(Json(TestRequest { address })),
        )
        .await
        .map(|Json(r)| r),
    };
    render(&state, &who, Some((name, result))).await
}

/// Test now of a check not saved, from the form's fields.
pub async fn test_unsaved(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let field = |k: &str| {
        form_urlencoded::parse(&form)
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let mut check = serde_json::Map::new();
    let mut shown = "unsaved check".to_string();
    for key in [
        "name",
        "type",
        "target",
        "path",
        "host",
        "expect_status",
        "expect_body",
        "query_name",
    ] {
        let v = field(key);
        if !v.is_empty() {
            if key == "name" {
                shown = v.clone();
            }
            check.insert(key.into(), v.into());
        }
    }
    let result = match (field("port").as_str(), field("address").as_str()) {
        (port, _) if !port.is_empty() && port.parse::<u16>().is_err() => Err(ApiError::new(
            ErrorKind::BadRequest,
            format!("port \"{port}\" is not a port number"),
        )),
        (_, a) if !a.is_empty() && a.parse::<std::net::IpAddr>().is_err() => Err(ApiError::new(
            ErrorKind::BadRequest,
            format!("\"{a}\" is not an IP address"),
        )),
        (port, address) => {
            if let Ok(p) = port.parse::<u16>() {
                check.insert("port".into(), p.into());
            }
            let request = crate::ProbeRequest {
                check,
                address: address.parse().ok(),
            };
            crate::test_unsaved(State(state.clone()), Json(request))
                .await
                .map(|Json(r)| r)
        }
    };
    render(&state, &who, Some((shown, result))).await
}

async fn render(state: &ApiState, who: &Principal, tested: Option<Tested>) -> Response {
    render_with(state, who, tested, None).await
}

/// The page, with what a Set OK / Set Error did (`set`) above it.
async fn render_with(
    state: &ApiState,
    who: &Principal,
    tested: Option<Tested>,
    set: Option<Result<String, String>>,
) -> Response {
    let engine = state.engine.clone();
    let read = tokio::task::spawn_blocking(move || {
        let probed: Vec<(String, bool)> = engine.with_config(|c| {
            c.checks
                .iter()
                .map(|k| (k.name.clone(), k.kind != CheckType::Manual))
                .collect()
        });
        (engine.checks(), engine.scenario_views(), probed)
    })
    .await;
    let Ok((local, scenarios, configured)) = read else {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "the device failed to read its checks",
        )
            .into_response();
    };
    let peers = state.peers.devices(&state.replication);
    let device = state.engine.device().to_string();
    let mut columns: Vec<(String, bool, BTreeMap<String, CheckStatus>)> = vec![(
        device.clone(),
        true,
        local.into_iter().map(|c| (c.check.clone(), c)).collect(),
    )];
    for p in peers {
        columns.push((
            p.device,
            p.reachable,
            p.checks.into_iter().map(|c| (c.check.clone(), c)).collect(),
        ));
    }
    let instances: BTreeSet<String> = columns
        .iter()
        .flat_map(|(_, _, m)| m.keys().cloned())
        .collect();
    let body = html! {
        h1 { "Checks and scenarios" }
        p {
            "Their configuration: "
            a href="/ui/objects/checks" { "the checks" } " and "
            a href="/ui/objects/scenarios" { "the scenarios" }
            @if who.allows(Role::Admin) { ", with their forms" }
            "."
        }
        h2 { "Check instances" }
        div.scroll tabindex="0" role="region" aria-label="Check instances by device" {
            table.checks {
                caption { "The state and last reason of every check instance on every device" }
                thead { tr {
                    th scope="col" { "Check" }
                    @for (d, reachable, _) in &columns {
                        th scope="col" .stale[!reachable] data-device=(d) { (d) }
                    }
                } }
                tbody {
                    @for i in &instances {
                        tr data-check=(i) {
                            th scope="row" { (i) }
                            @for (d, reachable, m) in &columns {
                                @match m.get(i) {
                                    None => td data-device=(d) { "-" },
                                    Some(c) => td data-device=(d) class={ "st " (class_of(c.state)) @if !reachable { " stale" } } {
                                        span.state { (c.state) }
                                        @if !c.reason.is_empty() { span.note { " " (c.reason) } }
                                    },
                                }
                            }
                        }
                    }
                }
            }
        }
        @if who.allows(Role::Operator) && configured.iter().any(|(_, probed)| !probed) {
            h2 { "Manual checks" }
            p { "A manual check is set by an operator; every device follows it." }
            @match &set {
                None => {},
                Some(Ok(text)) => p.notice role="status" #check-set { (text) },
                Some(Err(why)) => p.error role="alert" #check-set-error { (why) },
            }
            ul.tests {
                @for (name, probed) in &configured {
                    @if !*probed {
                        li data-manual=(name) {
                            form.test method="post" action={ "/ui/checks/" (segment(name)) "/state" } {
                                (csrf_field(who))
                                strong { (name) }
                                " "
                                button type="submit" name="state" value="ok" data-set={ (name) "-ok" } { "Set OK" }
                                " "
                                button type="submit" name="state" value="error" data-set={ (name) "-error" } { "Set Error" }
                            }
                        }
                    }
                }
            }
        }
        @if who.allows(Role::Operator) {
            h2 { "Test now" }
            p { "One probe from this device, with the check's settings; nothing is saved." }
            @if let Some((name, result)) = &tested {
                (tested_box(name, result))
            }
            h3 { "A check not saved yet" }
            form.filters.test method="post" action="/ui/checks/test" {
                (csrf_field(who))
                div.field { label for="n-name" { "Name (optional)" } input #n-name name="name" type="text"; }
                div.field {
                    label for="n-type" { "Type" }
                    select #n-type name="type" {
                        @for t in ["http", "https", "http2", "tcp", "tls", "dns", "icmp", "grpc"] { option value=(t) { (t) } }
                    }
                }
                div.field { label for="n-target" { "Target (fixed)" } input #n-target name="target" type="text" placeholder="none: a template"; }
                div.field { label for="n-port" { "Port" } input #n-port name="port" type="text" placeholder="the type's"; }
                div.field { label for="n-path" { "Path (HTTP)" } input #n-path name="path" type="text" placeholder="/"; }
                div.field { label for="n-expect_status" { "Expect status (HTTP)" } input #n-expect_status name="expect_status" type="text" placeholder="2xx"; }
                div.field { label for="n-address" { "Address (template)" } input #n-address name="address" type="text" placeholder="192.0.2.10"; }
                div.actions { button type="submit" #test-unsaved { "Test now" } }
            }
            h3 { "Configured checks" }
            ul.tests {
                @for (name, probed) in &configured {
                    @if *probed {
                        li {
                            form.test method="post" action={ "/ui/checks/" (segment(name)) "/test" } {
                                (csrf_field(who))
                                strong { (name) }
                                " "
                                label for={ "addr-" (name) } { "address (template checks)" }
                                " "
                                input id={ "addr-" (name) } name="address" type="text" placeholder="192.0.2.10";
                                " "
                                button type="submit" data-check=(name) { "Test now" }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Scenarios" }
        @if scenarios.is_empty() { p { "No scenario is configured." } }
        @for s in &scenarios {
            (scenario(s))
        }
    };
    layout::page("Checks", &device, Some(who), body).into_response()
}

fn tested_box(name: &str, result: &Result<TestResult, ApiError>) -> Markup {
    html! {
        div #tested role="status" class={ "tested " (match result { Ok(r) if r.ok => "ok", _ => "down" }) } {
            @match result {
                Ok(r) => {
                    strong { (name) ": " @if r.ok { "OK" } @else { "Error" } }
                    " — " (r.reason) " (" (format!("{:.1}", r.elapsed_ms)) " ms)"
                    @let whence = r.whence();
                    @if !whence.is_empty() { "; " span.whence { (whence) } }
                }
                Err(why) => { strong { (name) ": not tested" } " — " (why.to_string()) }
            }
        }
    }
}

fn scenario(s: &ScenarioView) -> Markup {
    let decision = match (s.active, s.pending) {
        (true, None) => "active".to_string(),
        (false, None) => "passive".to_string(),
        (a, Some(p)) => format!(
            "{}, waiting for its verify condition to become {}",
            if a { "active" } else { "passive" },
            if p { "active" } else { "passive" }
        ),
    };
    html! {
        section.scenario data-scenario=(s.name) {
            h3 { (s.name) ": " span.decision { (decision) } }
            p.condition { "Condition: " code { (pieces(&s.condition)) } }
            @if let Some(v) = &s.verify {
                p.condition { "Verify: " code { (pieces(v)) } }
            }
        }
    }
}

/// A condition's text with each term marked by its truth (the word is
/// also in the title, so colour never says it alone).
fn pieces(pieces: &[Piece]) -> Markup {
    html! {
        @for p in pieces {
            @match p {
                Piece::Text(t) => (t),
                Piece::Term { text, truth } => {
                    @let (class, word) = match truth {
                        Some(true) => ("t-true", "true"),
                        Some(false) => ("t-false", "false"),
                        None => ("t-unknown", "unknown"),
                    };
                    mark class=(class) title=(word) data-truth=(word) { (text) }
                }
            }
        }
    }
}

fn class_of(state: CheckState) -> &'static str {
    match state {
        CheckState::Ok => "st-ok",
        CheckState::Error => "st-down",
        CheckState::Preparing | CheckState::NoData => "st-none",
    }
}
