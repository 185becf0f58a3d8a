//! Records × devices (docs/console.md): every record with its status on
//! every device of the cluster side by side — this device, then each peer
//! as its last report said — and a Summary of this device's view (DR on,
//! held by manual failback, fail-safe, drained addresses). Filters by
//! domain, service and status are query parameters of a GET form; the
//! table alone is also served as a fragment that the page's script fetches
//! again on each change the stream announces.

use std::collections::{BTreeSet, HashMap};

use axum::{
    Extension,
    extract::{Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, query_value, segment};
use crate::ApiState;
use gtm_engine::{CheckStatus, RecordView};
use gtm_model::Config;
use gtm_model::operator::Drain;
use gtm_node::access::Principal;
use gtm_node::peers::PeerStatus;
use gtm_resolve::{CheckState, Status};

/// The filters of the table; empty means every value.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct Filters {
    #[serde(default)]
    pub domain: String,
    #[serde(default)]
    pub service: String,
    #[serde(default)]
    pub status: String,
    /// Part of the record's name, e.g. `www`.
    #[serde(default)]
    pub name: String,
    /// The page shown, from 1.
    #[serde(default)]
    pub page: Option<usize>,
}

impl Filters {
    /// The filters as a query, with the page `page`.
    fn query_at(&self, page: usize) -> String {
        format!(
            "name={}&domain={}&service={}&status={}&page={page}",
            query_value(&self.name),
            query_value(&self.domain),
            query_value(&self.service),
            query_value(&self.status)
        )
    }
}

/// Rows of one page: the table of 10,000 records is a hundred pages, each
/// made from the whole list sorted and filtered by the device.
const PAGE_ROWS: usize = 100;

/// The status classes the table colours and filters by: CSS class suffix,
/// filter value and what the filter calls it.
const CLASSES: [(&str, &str); 5] = [
    ("ok", "OK"),
    ("partial", "Partially OK"),
    ("dr", "DR"),
    ("down", "Fail-safe or No healthy records"),
    ("none", "No state yet"),
];

pub(super) fn class_of(status: Option<Status>) -> &'static str {
    match status {
        Some(Status::Ok) => "ok",
        Some(Status::PartiallyOk | Status::PartiallyOkRecordDown) => "partial",
        Some(Status::Dr) => "dr",
        Some(Status::FailSafe | Status::NoHealthy) => "down",
        None => "none",
    }
}

/// Where a status sorts: what needs an operator first (nothing healthy,
/// fail-safe, DR, partly down), then OK, then no state yet.
fn rank(status: Option<Status>) -> u8 {
    match status {
        Some(Status::NoHealthy) => 0,
        Some(Status::FailSafe) => 1,
        Some(Status::Dr) => 2,
        Some(Status::PartiallyOkRecordDown) => 3,
        Some(Status::PartiallyOk) => 4,
        Some(Status::Ok) => 5,
        None => 6,
    }
}

pub(super) fn text_of(status: Option<Status>) -> &'static str {
    status.map_or("No state yet", Status::as_str)
}

/// What the configuration says of a record that the table needs.
#[derive(Debug, Default)]
pub(super) struct RecordInfo {
    pub(super) domain: String,
    /// Each address (IP or CNAME target) with its datacenter.
    pub(super) addresses: Vec<(String, Option<String>)>,
    /// The check instance of each address whose HC field is a check
    /// (`web@192.0.2.10`, or `web` for a check with a target of its own),
    /// with the address.
    pub(super) checked: Vec<(String, String)>,
}

/// The records, domains and services of the configuration.
#[derive(Debug, Default)]
pub(super) struct Catalog {
    pub(super) records: HashMap<String, RecordInfo>,
    domains: Vec<String>,
    /// Each service with its domains.
    services: Vec<(String, Vec<String>)>,
}

pub(super) fn catalog(config: &Config) -> Catalog {
    let mut records = HashMap::new();
    let mut domains = Vec::new();
    for d in &config.domains {
        let domain = d.name.trim_end_matches('.').to_ascii_lowercase();
        for r in &d.records {
            let owner = match &*r.name {
                "@" | "" => domain.clone(),
                name => format!("{}.{domain}", name.trim_end_matches('.')),
            };
            let checked = r
                .addresses
                .iter()
                .filter_map(|a| {
                    let name = a.hc()?.strip_prefix("check:")?;
                    let shown = a.ip.map(|ip| ip.to_string())?;
                    // A check with a target of its own, or set by an
                    // operator, is one instance whatever the address.
                    let targeted = config.checks.iter().any(|c| {
                        c.name == name
                            && (c.target.is_some()
                                || c.kind == gtm_model::config::CheckType::Manual)
                    });
                    let instance = if targeted {
                        name.to_string()
                    } else {
                        format!("{name}@{shown}")
                    };
                    Some((instance, shown))
                })
                .collect();
            let addresses = r
                .addresses
                .iter()
                .map(|a| {
                    let shown =
                        a.ip.map(|ip| ip.to_string())
                            .or_else(|| a.target().map(str::to_string))
                            .unwrap_or_default();
                    (shown, a.dc().map(str::to_string))
                })
                .collect();
            records.insert(
                crate::record_label(&owner, &r.kind.as_str()),
                RecordInfo {
                    domain: domain.clone(),
                    addresses,
                    checked,
                },
            );
        }
        domains.push(domain);
    }
    let services = config
        .services
        .iter()
        .map(|s| {
            let domains = s
                .domains
                .iter()
                .map(|d| d.trim_end_matches('.').to_ascii_lowercase())
                .collect();
            (s.name.clone(), domains)
        })
        .collect();
    Catalog {
        records,
        domains,
        services,
    }
}

/// Everything one rendering of the table shows.
#[derive(Debug)]
struct View {
    device: String,
    datacenter: String,
    local: Vec<RecordView>,
    peers: Vec<PeerStatus>,
    catalog: Catalog,
    drains: Vec<Drain>,
    /// Each device's check instances in Error, with the reason.
    failing: HashMap<String, HashMap<String, String>>,
}

/// The check instances in Error of one device, with their reasons.
pub(super) fn failing_of(checks: Vec<CheckStatus>) -> HashMap<String, String> {
    checks
        .into_iter()
        .filter(|c| c.state == CheckState::Error)
        .map(|c| (c.check, c.reason))
        .collect()
}

async fn gather(state: &ApiState) -> Result<View, Response> {
    let engine = state.engine.clone();
    let at = state.clone();
    // The status and the configuration are read under the engine's lock:
    // off the async workers, as the API does (the peers' records are
    // typed under it too).
    let (local, checks, catalog, peers) = tokio::task::spawn_blocking(move || {
        (
            engine.status_view(),
            engine.checks(),
            engine.with_config(catalog),
            at.peers.status(&at.replication, &at.engine),
        )
    })
    .await
    .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())?;
    let kv = state.replication.state().await;
    let drains = gtm_model::operator::state_of(&kv).drains;
    let device = state.engine.device().to_string();
    let mut failing = HashMap::from([(device.clone(), failing_of(checks))]);
    for p in &peers {
        failing.insert(p.device.clone(), failing_of(p.checks.clone()));
    }
    Ok(View {
        device,
        datacenter: state.datacenter.clone(),
        local,
        peers,
        catalog,
        drains,
        failing,
    })
}

pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(filters): Query<Filters>,
) -> Response {
    // Taken before the data: a change in between is announced.
    let since = super::stream::since(&state);
    let view = match gather(&state).await {
        Ok(v) => v,
        Err(e) => return e,
    };
    let body = html! {
        h1 { "Records" }
        (filter_form(&view.catalog, &filters))
        p #live .live role="status" data-since=(since) { "Live updates: connecting…" }
        (render_table(&view, &filters))
    };
    layout::page("Records", &view.device, Some(&who), body).into_response()
}

/// The table alone, for the page's script to swap in.
pub async fn table(State(state): State<ApiState>, Query(filters): Query<Filters>) -> Response {
    match gather(&state).await {
        Ok(view) => render_table(&view, &filters).into_response(),
        Err(e) => e,
    }
}

fn filter_form(catalog: &Catalog, f: &Filters) -> Markup {
    html! {
        form.filters method="get" action="/ui/records" aria-label="Filter the records" {
            div.field {
                label for="f-name" { "Name contains" }
                input #f-name type="search" name="name" value=(f.name) autocapitalize="none" spellcheck="false";
            }
            div.field {
                label for="f-domain" { "Domain" }
                select #f-domain name="domain" {
                    option value="" { "All domains" }
                    @for d in &catalog.domains {
                        option value=(d) selected[*d == f.domain] { (d) }
                    }
                }
            }
            div.field {
                label for="f-service" { "Service" }
                select #f-service name="service" {
                    option value="" { "All services" }
                    @for (s, _) in &catalog.services {
                        option value=(s) selected[*s == f.service] { (s) }
                    }
                }
            }
            div.field {
                label for="f-status" { "Status" }
                select #f-status name="status" {
                    option value="" { "Any status" }
                    @for (value, text) in CLASSES {
                        option value=(value) selected[value == f.status] { (text) }
                    }
                }
            }
            div.actions {
                button type="submit" { "Filter" }
                a href="/ui/records" { "Clear" }
            }
        }
    }
}

/// One column of the table: a device and the records it reported.
struct Column<'a> {
    device: &'a str,
    /// `this device · dc1`, `dc2 · last report 2 s ago`…
    about: String,
    stale: bool,
    local: bool,
    records: HashMap<&'a str, &'a RecordView>,
}

fn columns(view: &View) -> Vec<Column<'_>> {
    let mut columns = vec![Column {
        device: &view.device,
        about: format!("this device · {}", view.datacenter),
        stale: false,
        local: true,
        records: view.local.iter().map(|r| (r.record.as_str(), r)).collect(),
    }];
    for p in &view.peers {
        let heard = match p.age_ms {
            None => "never heard from".to_string(),
            Some(ms) if p.reachable => format!("last report {} ago", gtm_model::when::age(ms)),
            Some(ms) => format!("unreachable: last report {} ago", gtm_model::when::age(ms)),
        };
        columns.push(Column {
            device: &p.device,
            about: format!("{} · {heard}", p.datacenter),
            stale: !p.reachable,
            local: false,
            records: p.records.iter().map(|r| (r.record.as_str(), r)).collect(),
        });
    }
    columns
}

fn render_table(view: &View, f: &Filters) -> Markup {
    let columns = columns(view);
    let labels: BTreeSet<&str> = columns
        .iter()
        .flat_map(|c| c.records.keys().copied())
        .collect();
    let service_domains: Option<&Vec<String>> = (!f.service.is_empty())
        .then(|| {
            view.catalog
                .services
                .iter()
                .find(|(s, _)| *s == f.service)
                .map(|(_, d)| d)
        })
        .flatten();
    let name = f.name.trim().to_ascii_lowercase();
    let mut matching: Vec<&str> = labels
        .into_iter()
        .filter(|label| {
            let domain = view.catalog.records.get(*label).map(|i| i.domain.as_str());
            (f.domain.is_empty() || domain == Some(f.domain.as_str()))
                && (f.service.is_empty()
                    || service_domains
                        .is_some_and(|ds| domain.is_some_and(|d| ds.iter().any(|s| s == d))))
                && (f.status.is_empty()
                    || columns.iter().any(|c| {
                        c.records
                            .get(*label)
                            .is_some_and(|r| class_of(r.status) == f.status)
                    }))
                && (name.is_empty() || label.contains(name.as_str()))
        })
        .collect();
    // Problems first (a record's worst status on any device), then by
    // domain, then by name within it: a domain's records stay together.
    matching.sort_by_cached_key(|label| {
        let worst = columns
            .iter()
            .filter_map(|c| c.records.get(*label))
            .map(|r| rank(r.status))
            .min()
            .unwrap_or(rank(None));
        let domain = view
            .catalog
            .records
            .get(*label)
            .map_or("", |i| i.domain.as_str());
        (worst, domain, *label)
    });
    // A page of a huge configuration stays a page.
    let pages = matching.len().div_ceil(PAGE_ROWS).max(1);
    let page = f.page.unwrap_or(1).clamp(1, pages);
    let first = (page - 1) * PAGE_ROWS;
    let shown = &matching[first..matching.len().min(first + PAGE_ROWS)];
    let refresh = format!("/ui/records/table?{}", f.query_at(page));
    html! {
        div #records data-refresh=(refresh) {
            p.count {
                @if pages > 1 {
                    "Records " (first + 1) "–" (first + shown.len()) " of " (matching.len()) ", problems first"
                } @else {
                    (shown.len()) " record" @if shown.len() != 1 { "s" }
                }
            }
            @if pages > 1 {
                (pager(f, page, pages))
            }
            div.scroll tabindex="0" role="region" aria-label="Records by device" {
                table.records {
                    caption { "The status of every record on every device of the cluster" }
                    thead {
                        tr {
                            th scope="col" { "Record" }
                            @for c in &columns {
                                th scope="col" .device .stale[c.stale] data-device=(c.device) {
                                    span.name { (c.device) }
                                    span.about { (c.about) }
                                }
                            }
                            th scope="col" { "Summary" }
                        }
                    }
                    tbody {
                        @for label in shown {
                            tr data-record=(label) {
                                th scope="row" { a href=(preview_href(label, None)) { (label) } }
                                @for c in &columns {
                                    (cell(label, c))
                                }
                                td.summary {
                                    @for line in summary(label, view) {
                                        span.line { (line) }
                                    }
                                }
                            }
                        }
                        @if shown.is_empty() {
                            tr { td colspan=(columns.len() + 2) { "No record matches these filters." } }
                        }
                    }
                }
            }
        }
    }
}

/// Links to the first, previous, next and last pages.
fn pager(f: &Filters, page: usize, pages: usize) -> Markup {
    let link = |to: usize| format!("/ui/records?{}", f.query_at(to));
    html! {
        nav.pages aria-label="Pages of records" {
            @if page > 1 {
                a href=(link(1)) { "First" }
                a rel="prev" href=(link(page - 1)) { "Previous" }
            }
            span { "Page " (page) " of " (pages) }
            @if page < pages {
                a rel="next" href=(link(page + 1)) { "Next" }
                a href=(link(pages)) { "Last" }
            }
        }
    }
}

fn cell(label: &str, c: &Column<'_>) -> Markup {
    let Some(r) = c.records.get(label) else {
        return html! {
            td.st.st-none.stale[c.stale] data-device=(c.device) data-status="" { "not reported" }
        };
    };
    // One class attribute: maud would write a second for `.stale[..]`.
    let class = format!(
        "st st-{}{}",
        class_of(r.status),
        if c.stale { " stale" } else { "" }
    );
    let device = (!c.local).then_some(c.device);
    html! {
        td class=(class) data-device=(c.device) data-status=(text_of(r.status)) {
            a href=(preview_href(label, device)) { (text_of(r.status)) }
            @if c.stale { " " span.note { "(stale)" } }
        }
    }
}

/// The preview page of a record label (`www.example.test/A`).
pub fn preview_href(label: &str, device: Option<&str>) -> String {
    let (name, rtype) = label.rsplit_once('/').unwrap_or((label, ""));
    let mut href = format!("/ui/records/{}/{}", segment(name), segment(rtype));
    if let Some(d) = device {
        href.push_str("?device=");
        href.push_str(&query_value(d));
    }
    href
}

/// What the Summary column says of a record on this device.
fn summary(label: &str, view: &View) -> Vec<String> {
    // What each device does with the record, by its own state (a peer's
    // by its last report): one line per condition, naming the devices.
    let states = std::iter::once((view.device.as_str(), &view.local))
        .chain(view.peers.iter().map(|p| (p.device.as_str(), &p.records)))
        .filter_map(|(device, records)| {
            Some((device, records.iter().find(|r| r.record == label)?))
        });
    let mut by_condition: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut reasons = Vec::new();
    let info = view.catalog.records.get(label);
    for (device, r) in states {
        if r.status.is_some_and(|s| s != Status::Ok)
            && let Some(line) = info.and_then(|i| down_line(i, device, view.failing.get(device)))
        {
            reasons.push(line);
        }
        let condition = match r.status {
            Some(Status::Dr) => Some("Disaster recovery is on"),
            Some(Status::FailSafe) => Some("Fail-safe records are answered"),
            Some(Status::NoHealthy) => Some("No healthy records"),
            Some(Status::PartiallyOkRecordDown) => Some("a record is down"),
            _ => None,
        };
        let held = (r.held || r.decision.contains("held by manual failback"))
            .then_some("held by manual failback");
        for c in condition.into_iter().chain(held) {
            match by_condition.iter_mut().find(|(k, _)| *k == c) {
                Some((_, devices)) => devices.push(device),
                None => by_condition.push((c, vec![device])),
            }
        }
    }
    let mut lines: Vec<String> = by_condition
        .into_iter()
        .map(|(c, devices)| format!("{c} ({})", devices.join(", ")))
        .collect();
    lines.extend(reasons);
    if let Some(info) = view.catalog.records.get(label) {
        for d in &view.drains {
            if let Some(address) = &d.address
                && d.record.as_deref().is_none_or(|r| r == label)
                && info.addresses.iter().any(|(a, _)| same_address(a, address))
            {
                lines.push(format!("drained: {address}"));
            }
            if let Some(dc) = &d.datacenter
                && info.addresses.iter().any(|(_, at)| at.as_ref() == Some(dc))
            {
                lines.push(format!("datacenter {dc} drained"));
            }
        }
    }
    lines
}

/// Addresses named at most in one line of the Summary.
const MAX_NAMED: usize = 3;

/// `2 addresses down on gtm1: 192.0.2.10 status 503; 192.0.2.11 timed out`:
/// the addresses of a record whose check is in Error on a device, with the
/// check's reason there.
fn down_line(
    info: &RecordInfo,
    device: &str,
    failing: Option<&HashMap<String, String>>,
) -> Option<String> {
    let failing = failing?;
    let down: Vec<String> = info
        .checked
        .iter()
        .filter_map(|(instance, address)| {
            let reason = failing.get(instance)?;
            Some(if reason.is_empty() {
                address.clone()
            } else {
                format!("{address} {reason}")
            })
        })
        .collect();
    if down.is_empty() {
        return None;
    }
    let n = down.len();
    let mut named = down
        .into_iter()
        .take(MAX_NAMED)
        .collect::<Vec<_>>()
        .join("; ");
    if n > MAX_NAMED {
        named.push_str(&format!("; and {} more", n - MAX_NAMED));
    }
    let noun = if n == 1 { "address" } else { "addresses" };
    Some(format!("{n} {noun} down on {device}: {named}"))
}

/// An address as configured and as a drain names it: IPs by value, names
/// without case or the final dot.
pub(super) fn same_address(configured: &str, drained: &str) -> bool {
    match (
        configured.parse::<std::net::IpAddr>(),
        drained.parse::<std::net::IpAddr>(),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => configured
            .trim_end_matches('.')
            .eq_ignore_ascii_case(drained.trim_end_matches('.')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_class_the_filter_offers() {
        let all = [
            Some(Status::Ok),
            Some(Status::PartiallyOk),
            Some(Status::PartiallyOkRecordDown),
            Some(Status::Dr),
            Some(Status::FailSafe),
            Some(Status::NoHealthy),
            None,
        ];
        for s in all {
            assert!(CLASSES.iter().any(|(c, _)| *c == class_of(s)), "{s:?}");
        }
    }

    #[test]
    fn preview_links_name_the_record_and_the_device() {
        assert_eq!(
            preview_href("www.example.test/A", None),
            "/ui/records/www.example.test/A"
        );
        assert_eq!(
            preview_href("*.wild.example.test/AAAA", Some("gtm 2")),
            "/ui/records/*.wild.example.test/AAAA?device=gtm+2"
        );
    }

    fn status(record: &str, status: Option<Status>) -> RecordView {
        RecordView {
            record: record.into(),
            status,
            label: status.map(|s| s.to_string()),
            active: Vec::new(),
            decision: String::new(),
            held: false,
        }
    }

    fn view(local: Vec<RecordView>, peer: Vec<RecordView>, reachable: bool) -> View {
        View {
            device: "gtm1".into(),
            datacenter: "dc1".into(),
            local,
            peers: vec![PeerStatus {
                device: "gtm2".into(),
                datacenter: "dc2".into(),
                age_ms: Some(9_000),
                reachable,
                version: Some(3),
                geoip: None,
                geoip_info: None,
                records: peer,
                checks: Vec::new(),
            }],
            catalog: Catalog::default(),
            drains: Vec::new(),
            failing: HashMap::new(),
        }
    }

    #[test]
    fn the_summary_names_what_each_device_does() {
        let mut held = status("dr.a.test/A", Some(Status::Dr));
        held.held = true;
        let v = view(
            vec![
                status("dr.a.test/A", Some(Status::Ok)),
                status("www.a.test/A", Some(Status::PartiallyOkRecordDown)),
                status("ok.a.test/A", Some(Status::Ok)),
            ],
            vec![
                held,
                status("www.a.test/A", Some(Status::PartiallyOkRecordDown)),
                status("ok.a.test/A", Some(Status::Ok)),
            ],
            true,
        );
        assert_eq!(
            summary("dr.a.test/A", &v),
            [
                "Disaster recovery is on (gtm2)",
                "held by manual failback (gtm2)"
            ]
        );
        assert_eq!(
            summary("www.a.test/A", &v),
            ["a record is down (gtm1, gtm2)"]
        );
        assert!(summary("ok.a.test/A", &v).is_empty());
        // With the checks behind the addresses: each device's reason.
        let mut v = v;
        v.catalog.records.insert(
            "www.a.test/A".into(),
            RecordInfo {
                domain: "a.test".into(),
                addresses: Vec::new(),
                checked: vec![
                    ("web@192.0.2.10".into(), "192.0.2.10".into()),
                    ("web@192.0.2.11".into(), "192.0.2.11".into()),
                ],
            },
        );
        v.failing.insert(
            "gtm1".into(),
            HashMap::from([("web@192.0.2.10".into(), "status 503".into())]),
        );
        v.failing.insert(
            "gtm2".into(),
            HashMap::from([
                ("web@192.0.2.10".into(), "timed out".into()),
                ("web@192.0.2.11".into(), String::new()),
            ]),
        );
        assert_eq!(
            summary("www.a.test/A", &v),
            [
                "a record is down (gtm1, gtm2)",
                "1 address down on gtm1: 192.0.2.10 status 503",
                "2 addresses down on gtm2: 192.0.2.10 timed out; 192.0.2.11",
            ]
        );
    }

    #[test]
    fn problems_come_first_then_each_domain_together() {
        let mut v = view(
            vec![
                status("www.b.test/A", Some(Status::Ok)),
                status("api.a.test/A", Some(Status::Ok)),
                status("zz.b.test/A", Some(Status::Ok)),
                status("www.a.test/A", Some(Status::Ok)),
                status("shop.b.test/A", Some(Status::Ok)),
            ],
            vec![
                // DR on the peer only, nothing healthy there for another.
                status("www.b.test/A", Some(Status::Dr)),
                status("shop.b.test/A", Some(Status::NoHealthy)),
            ],
            true,
        );
        for (label, domain) in [
            ("www.b.test/A", "b.test"),
            ("api.a.test/A", "a.test"),
            ("zz.b.test/A", "b.test"),
            ("www.a.test/A", "a.test"),
            ("shop.b.test/A", "b.test"),
        ] {
            v.catalog.records.insert(
                label.into(),
                RecordInfo {
                    domain: domain.into(),
                    addresses: Vec::new(),
                    checked: Vec::new(),
                },
            );
        }
        let html = render_table(&v, &Filters::default()).into_string();
        let order: Vec<&str> = html
            .split("data-record=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert_eq!(
            order,
            [
                "shop.b.test/A",
                "www.b.test/A",
                "api.a.test/A",
                "www.a.test/A",
                "zz.b.test/A"
            ]
        );
    }

    #[test]
    fn the_table_filters_by_name_and_any_devices_status() {
        let v = view(
            vec![
                status("www.a.test/A", Some(Status::Ok)),
                status("api.a.test/A", Some(Status::Dr)),
            ],
            vec![status("www.a.test/A", Some(Status::PartiallyOk))],
            true,
        );
        let all = render_table(&v, &Filters::default()).into_string();
        assert!(all.contains("2 records"), "{all}");
        assert!(all.contains("not reported"), "api is not in gtm2's report");
        let partial = Filters {
            status: "partial".into(),
            ..Filters::default()
        };
        let html = render_table(&v, &partial).into_string();
        assert!(
            html.contains("1 record<") && html.contains("www.a.test/A"),
            "{html}"
        );
        assert!(html.contains("Partially OK") && html.contains("st st-partial"));
        let named = Filters {
            name: " API ".into(),
            ..Filters::default()
        };
        let html = render_table(&v, &named).into_string();
        assert!(
            html.contains("1 record<") && html.contains("api.a.test/A"),
            "{html}"
        );
        assert!(html.contains("Disaster recovery is on"), "{html}");
        assert!(
            html.contains("table?name=+API+&amp;domain=&amp;service=&amp;status=&amp;page=1\""),
            "{html}"
        );
    }

    #[test]
    fn a_silent_peer_is_greyed_with_its_age_and_the_rows_are_paged() {
        let many: Vec<RecordView> = (0..2 * PAGE_ROWS + 1)
            .map(|i| status(&format!("r{i:05}.a.test/A"), Some(Status::Ok)))
            .collect();
        let v = view(many.clone(), many, false);
        let html = render_table(&v, &Filters::default()).into_string();
        let total = 2 * PAGE_ROWS + 1;
        assert!(
            html.contains(&format!("Records 1–{PAGE_ROWS} of {total}")),
            "{html}"
        );
        assert!(html.contains("unreachable: last report 9 s ago"), "the age");
        assert!(html.contains("st st-ok stale") && html.contains("(stale)"));
        assert!(!html.contains(&format!("r{PAGE_ROWS:05}.a.test")), "paged");
        assert!(html.contains("Page 1 of 3"), "{html}");
        // The last page: the one record left, and the way back.
        let last = Filters {
            page: Some(99),
            ..Filters::default()
        };
        let html = render_table(&v, &last).into_string();
        assert!(
            html.contains(&format!("Records {total}–{total} of {total}")),
            "{html}"
        );
        assert!(
            html.contains(&format!("r{:05}.a.test", 2 * PAGE_ROWS)),
            "{html}"
        );
        assert!(html.contains("rel=\"prev\"") && !html.contains("rel=\"next\""));
    }

    #[test]
    fn drains_match_addresses_by_value() {
        assert!(same_address("2001:db8::1", "2001:DB8:0::1"));
        assert!(same_address("Www.Example.test.", "www.example.test"));
        assert!(!same_address("192.0.2.1", "192.0.2.10"));
    }
}
