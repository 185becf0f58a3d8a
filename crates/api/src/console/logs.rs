//! The GTM Logs screen (docs/console.md): every device's events, newest
//! first, to the millisecond and with their severity, filtered by record,
//! kind, severity, device and age, exported as CSV or JSON, paged
//! backwards by time, and followed live (the page's script fetches the first page again
//! on each change the stream announces, while "Follow" is on). The events
//! come from the API's own page reader ([`crate::event_page`]).

use axum::{
    Extension,
    extract::{Query, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, query_value};
use crate::{ApiState, EventFilter};
use gtm_engine::{Event, EventKind, Severity};
use gtm_model::error::{ApiError, ErrorKind};
use gtm_node::access::Principal;

/// Events on one page.
pub const PAGE: usize = 100;

/// The page's filters, as the form sends them (empty: any).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct LogQuery {
    #[serde(default)]
    pub record: String,
    #[serde(default)]
    pub kind: String,
    /// The lowest severity shown (empty: every event).
    #[serde(default)]
    pub severity: String,
    #[serde(default)]
    pub device: String,
    #[serde(default)]
    pub since: String,
    /// Only events older than this (ms since the epoch): the next page back.
    #[serde(default)]
    pub before: Option<u64>,
    /// `on` while the page follows new events.
    #[serde(default)]
    pub follow: String,
}

impl LogQuery {
    fn query(&self, before: Option<u64>) -> String {
        let mut q = format!(
            "record={}&kind={}&severity={}&device={}&since={}",
            query_value(&self.record),
            query_value(&self.kind),
            query_value(&self.severity),
            query_value(&self.device),
            query_value(&self.since)
        );
        if let Some(b) = before {
            q.push_str(&format!("&before={b}"));
        }
        if self.following() {
            q.push_str("&follow=on");
        }
        q
    }

    /// The API's query for this page's events as a file (`format` csv or
    /// json): every device's, with the same filters and page.
    fn export(&self, format: &str) -> String {
        let mut q = format!("all=true&limit={PAGE}&format={format}");
        for (key, value) in [
            ("kind", &self.kind),
            ("severity", &self.severity),
            ("record", &self.record),
            ("device", &self.device),
            ("since", &self.since),
        ] {
            if !value.trim().is_empty() {
                q.push_str(&format!("&{key}={}", query_value(value.trim())));
            }
        }
        if let Some(b) = self.before {
            q.push_str(&format!("&before={b}"));
        }
        q
    }

    /// Following is for the newest page only.
    fn following(&self) -> bool {
        self.follow == "on" && self.before.is_none()
    }

    fn filter(&self) -> Result<EventFilter, ApiError> {
        let kind = match self.kind.as_str() {
            "" => None,
            k => Some(
                serde_json::from_value::<EventKind>(serde_json::Value::String(k.into())).map_err(
                    |_| {
                        ApiError::new(
                            ErrorKind::BadRequest,
                            format!(
                                "kind \"{k}\" is not one of {}",
                                EventKind::names().join(", ")
                            ),
                        )
                    },
                )?,
            ),
        };
        let severity = match self.severity.as_str() {
            "" => None,
            s => Some(
                s.parse::<Severity>()
                    .map_err(|e| ApiError::new(ErrorKind::BadRequest, e.to_string()))?,
            ),
        };
        let some = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
        Ok(EventFilter {
            record: some(&self.record),
            kind,
            since: some(&self.since),
            follow: false,
            all: true,
            device: some(&self.device),
            before: self.before,
            limit: Some(PAGE),
            severity,
            format: None,
        })
    }
}

/// The events of a query, newest first, or what is wrong with the query.
async fn read(state: &ApiState, q: &LogQuery) -> Result<Vec<Event>, ApiError> {
    let filter = q.filter()?;
    let (mut events, _) = crate::event_page(state, &filter).await?;
    events.reverse();
    Ok(events)
}

pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<LogQuery>,
) -> Response {
    // Taken before the data: a change in between is announced.
    let since = super::stream::since(&state);
    let events = read(&state, &q).await;
    let mut devices = vec![state.engine.device().to_string()];
    devices.extend(
        state
            .peers
            .devices(&state.replication)
            .into_iter()
            .map(|p| p.device),
    );
    let body = html! {
        h1 { "GTM Logs" }
        (form(&q, &devices))
        @if q.following() {
            p #live .live role="status" data-since=(since) { "Live updates: connecting…" }
        }
        (render(&q, &events))
    };
    layout::page("GTM Logs", state.engine.device(), Some(&who), body).into_response()
}

/// The table alone, for the page's script to swap in while following.
pub async fn table(State(state): State<ApiState>, Query(q): Query<LogQuery>) -> Response {
    let events = read(&state, &q).await;
    render(&q, &events).into_response()
}

fn form(q: &LogQuery, devices: &[String]) -> Markup {
    html! {
        form.filters method="get" action="/ui/logs" aria-label="Filter the logs" {
            div.field {
                label for="l-record" { "Record" }
                input #l-record name="record" type="text" value=(q.record)
                    placeholder="www.example.test/A";
            }
            div.field {
                label for="l-kind" { "Kind" }
                select #l-kind name="kind" {
                    option value="" { "Any kind" }
                    @for k in EventKind::names() {
                        option value=(k) selected[k == q.kind] { (k) }
                    }
                }
            }
            div.field {
                label for="l-severity" { "Severity" }
                select #l-severity name="severity" {
                    option value="" { "Any severity" }
                    option value="warning" selected[q.severity == "warning"] { "Warning or error" }
                    option value="error" selected[q.severity == "error"] { "Error" }
                }
            }
            div.field {
                label for="l-device" { "Device" }
                select #l-device name="device" {
                    option value="" { "Every device" }
                    @for d in devices {
                        option value=(d) selected[*d == q.device] { (d) }
                    }
                }
            }
            div.field {
                label for="l-since" { "Newer than" }
                input #l-since name="since" type="text" value=(q.since) placeholder="1h, 30m, 2d";
            }
            div.field.check {
                input #l-follow name="follow" type="checkbox" value="on" checked[q.follow == "on"];
                label for="l-follow" { "Follow new events" }
            }
            div.actions {
                button type="submit" { "Show" }
                a href="/ui/logs" { "Clear" }
            }
        }
    }
}

fn render(q: &LogQuery, events: &Result<Vec<Event>, ApiError>) -> Markup {
    let refresh = q
        .following()
        .then(|| format!("/ui/logs/table?{}", q.query(None)));
    html! {
        div #logs data-refresh=[refresh] {
            @match events {
                Err(why) => p.error role="alert" { (why.message) },
                Ok(events) => {
                    p.count {
                        (events.len()) " event" @if events.len() != 1 { "s" }
                        @if q.before.is_some() { " (older page)" }
                        " · Export "
                        a href={ "/api/v1/events?" (q.export("csv")) } download="gtm-logs.csv" { "CSV" }
                        " "
                        a href={ "/api/v1/events?" (q.export("json")) } download="gtm-logs.json" { "JSON" }
                    }
                    div.scroll tabindex="0" role="region" aria-label="Events" {
                        table.logs {
                            caption { "GTM Logs, newest first" }
                            thead {
                                tr {
                                    th scope="col" { "Time (UTC)" }
                                    th scope="col" { "Device" }
                                    th scope="col" { "Severity" }
                                    th scope="col" { "Kind" }
                                    th scope="col" { "Object" }
                                    th scope="col" { "Event" }
                                }
                            }
                            tbody {
                                @for e in events {
                                    tr data-kind=(e.kind.as_str()) data-device=(e.device) data-severity=(e.severity.as_str()) {
                                        td.time { (gtm_model::when::iso_ms(e.time_ms)) }
                                        td { (e.device) }
                                        td { span class={ "severity " (e.severity.as_str()) } { (e.severity.as_str()) } }
                                        td { (e.kind.as_str()) }
                                        td.object { (e.object) }
                                        td.text { (e.text) }
                                    }
                                }
                            }
                        }
                    }
                    nav.pages aria-label="Pages" {
                        @if q.before.is_some() {
                            a href={ "/ui/logs?" (q.query(None)) } { "Newest" }
                        }
                        @if events.len() >= PAGE && let Some(oldest) = events.last() {
                            a rel="next" href={ "/ui/logs?" (q.query(Some(oldest.time_ms))) } { "Older" }
                        }
                    }
                }
            }
        }
    }
}
