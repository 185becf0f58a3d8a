//! The dashboard (docs/console.md), the console's landing page: the
//! records by status on every device (each count a link to the Records
//! list filtered to it), the datacenters up or down, the devices and
//! whether they report, and the latest warnings and errors of every
//! device.

use axum::{
    Extension,
    extract::State,
    response::{IntoResponse, Response},
};
use maud::{Markup, html};

use super::{cluster, layout, records};
use crate::{ApiState, EventFilter};
use gtm_model::severity::Severity;
use gtm_node::access::Principal;
use gtm_resolve::Status;

/// The warnings and errors shown.
const RECENT: usize = 10;

/// The statuses as the dashboard counts them, the worst first, each with
/// the Records list's filter that shows them.
const ROWS: [(Option<Status>, &str); 7] = [
    (Some(Status::NoHealthy), "down"),
    (Some(Status::FailSafe), "down"),
    (Some(Status::Dr), "dr"),
    (Some(Status::PartiallyOkRecordDown), "partial"),
    (Some(Status::PartiallyOk), "partial"),
    (Some(Status::Ok), "ok"),
    (None, "none"),
];

/// A device's column: its name, whether it reports, its count by status.
struct Column {
    device: String,
    reachable: bool,
    /// By row of [`ROWS`].
    counts: [usize; ROWS.len()],
}

fn counts<'a>(statuses: impl Iterator<Item = &'a Option<Status>>) -> [usize; ROWS.len()] {
    let mut out = [0; ROWS.len()];
    for s in statuses {
        if let Some(i) = ROWS.iter().position(|(row, _)| row == s) {
            out[i] += 1;
        }
    }
    out
}

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    let engine = state.engine.clone();
    let at = state.clone();
    let Ok((local, configured, peers)) = tokio::task::spawn_blocking(move || {
        (
            engine.status_view(),
            engine.with_config(|c| {
                c.datacenters
                    .iter()
                    .map(|d| d.name.clone())
                    .collect::<Vec<_>>()
            }),
            at.peers.status(&at.replication, &at.engine),
        )
    })
    .await
    else {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "the device failed to read its state",
        )
            .into_response();
    };
    let device = state.engine.device().to_string();
    let mut columns = vec![Column {
        device: device.clone(),
        reachable: true,
        counts: counts(local.iter().map(|r| &r.status)),
    }];
    columns.extend(peers.iter().map(|p| Column {
        device: p.device.clone(),
        reachable: p.reachable,
        counts: counts(p.records.iter().map(|r| &r.status)),
    }));
    let status = state.replication.status();
    let members = cluster::members(&state, &status);
    let filter = EventFilter {
        severity: Some(Severity::Warning),
        all: true,
        limit: Some(RECENT),
        ..EventFilter::default()
    };
    let recent = match crate::event_page(&state, &filter).await {
        Ok((events, _)) => Ok(events),
        Err(e) => Err(e.to_string()),
    };
    let body = html! {
        h1 { "Dashboard" }
        h2 #records-heading { "Records by status" }
        (status_table(&columns, local.len()))
        h2 { "Datacenters" }
        p.hint { "Up while a device of it reports (this device's own is up while it runs)." }
        (cluster::datacenters(&state, &members, &configured))
        h2 { "Devices" }
        (devices(&device, &peers))
        h2 { "Latest warnings and errors" }
        @match &recent {
            Err(why) => p.error { (why) },
            Ok(events) if events.is_empty() => p #no-warnings { "No warning or error is logged on any device." },
            Ok(events) => {
                div.scroll tabindex="0" role="region" aria-label="Latest warnings and errors" {
                    table.logs #recent {
                        caption { "The " (events.len()) " latest of every device, newest first; all in " a href="/ui/logs?severity=warning" { "GTM Logs" } }
                        thead { tr {
                            th scope="col" { "Time (UTC)" }
                            th scope="col" { "Device" }
                            th scope="col" { "Severity" }
                            th scope="col" { "Object" }
                            th scope="col" { "Event" }
                        } }
                        tbody {
                            @for e in events {
                                tr data-severity=(e.severity.as_str()) {
                                    td.time { (gtm_model::when::iso_ms(e.time_ms)) }
                                    td { (e.device) }
                                    td { span class={ "severity " (e.severity.as_str()) } { (e.severity.as_str()) } }
                                    td { (e.object) }
                                    td { (e.text) }
                                }
                            }
                        }
                    }
                }
            },
        }
    };
    layout::page("Dashboard", &device, Some(&who), body).into_response()
}

fn status_table(columns: &[Column], total: usize) -> Markup {
    html! {
        div.scroll tabindex="0" role="region" aria-labelledby="records-heading" {
            table.dashboard #by-status {
                caption { (total) " records; a count opens the Records list filtered to its status" }
                thead { tr {
                    th scope="col" { "Status" }
                    @for c in columns {
                        th scope="col" data-device=(c.device) .stale[!c.reachable] {
                            (c.device) @if !c.reachable { " (not reporting)" }
                        }
                    }
                } }
                tbody {
                    @for (i, (status, filter)) in ROWS.iter().enumerate() {
                        tr data-status=(records::text_of(*status)) {
                            th scope="row" {
                                span class={ "st st-" (records::class_of(*status)) } { (records::text_of(*status)) }
                            }
                            @for c in columns {
                                @let n = c.counts[i];
                                td data-device=(c.device) {
                                    @if n == 0 { "0" } @else {
                                        a href={ "/ui/records?status=" (filter) } { (n) }
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

fn devices(here: &str, peers: &[gtm_node::peers::PeerStatus]) -> Markup {
    html! {
        ul.dcs #devices {
            li.dc.ok data-device=(here) { strong { (here) } ": " span.state { "this device" } }
            @for p in peers {
                li data-device=(p.device) class={ "dc " @if p.reachable { "ok" } @else { "down" } } {
                    strong { (p.device) } " (" (p.datacenter) "): "
                    span.state {
                        @if p.reachable { "reporting" } @else { "not reporting" }
                        @if let Some(age) = p.age_ms { ", last report " (age / 1000) " s ago" }
                        @if let Some(v) = p.version { ", configuration version " (v) }
                    }
                }
            }
        }
    }
}
