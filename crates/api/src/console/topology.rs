//! The topology map (docs/console.md): what one device of the cluster is
//! answering. The datacenters with their devices; every steered record (a
//! node coloured by its status on that device) with a line to each
//! address that device answers for it, drawn as Main or DR; the
//! addresses coloured by their health there. The device is chosen on the
//! page (this one, or a peer by its last report). An SVG drawn by the
//! device, with the same facts as a table; it updates live like the
//! records table.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use axum::{
    Extension,
    extract::{Query, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, query_value, segment};
use super::records::{self, Catalog};
use crate::ApiState;
use gtm_engine::RecordView;
use gtm_model::operator::Drain;
use gtm_node::access::Principal;
use gtm_resolve::Status;

/// Steered records drawn at most; the rest are counted below the map.
pub const MAX_RECORDS: usize = 200;

const ROW: i64 = 34;
const WIDTH: i64 = 1000;

#[derive(Debug, Default, Deserialize)]
pub struct MapQuery {
    /// The device whose answers are drawn; absent: this one.
    #[serde(default)]
    pub device: Option<String>,
}

/// How an address is on the device drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Up,
    Down,
    Drained,
}

impl Health {
    fn class(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Drained => "drained",
        }
    }
    fn word(self) -> &'static str {
        match self {
            Self::Up => "healthy",
            Self::Down => "down",
            Self::Drained => "drained",
        }
    }
}

/// A steered record as the device drawn has it.
struct Origin {
    label: String,
    status: Option<Status>,
    /// Its addresses: (address, datacenter, answered now).
    addresses: Vec<(String, String, bool)>,
    /// What it answers that is none of its addresses (fail-safe records).
    other: Vec<String>,
}

struct Map {
    /// The device drawn, and every device to choose from.
    device: String,
    devices: Vec<String>,
    /// The device drawn reports (this device always does).
    reachable: bool,
    origins: Vec<Origin>,
    more: usize,
    /// (datacenter, address) → its health on the device drawn.
    nodes: BTreeMap<(String, String), Health>,
    /// Datacenter (or "" for addresses without one) → its devices.
    dcs: BTreeMap<String, Vec<(String, bool)>>,
    /// The regions: name, what they hold, what they exclude.
    regions: Vec<(String, String, String)>,
    /// This device's topology rules; `None` when a peer is drawn (its
    /// report does not carry them).
    rules: Option<Vec<gtm_engine::RuleStatus>>,
}

/// A list in words, the first few of it and how many more.
fn some_of(kind: &str, list: &[String]) -> Option<String> {
    const SHOWN: usize = 5;
    if list.is_empty() {
        return None;
    }
    let mut text = format!("{kind} {}", list[..list.len().min(SHOWN)].join(", "));
    if list.len() > SHOWN {
        text.push_str(&format!(" and {} more", list.len() - SHOWN));
    }
    Some(text)
}

/// What a region holds and excludes, in words.
fn region_row(r: &gtm_model::config::Region) -> (String, String, String) {
    let asns = |l: &[gtm_model::place::Asn]| l.iter().map(ToString::to_string).collect::<Vec<_>>();
    let holds = [
        some_of("networks", &r.networks),
        some_of("ASNs", &asns(&r.asns)),
        some_of("subdivisions", &r.subdivisions),
        some_of("countries", &r.countries),
        some_of("continents", &r.continents),
        some_of("regions", &r.regions),
    ];
    let excludes = [
        some_of("networks", &r.exclude_networks),
        some_of("ASNs", &asns(&r.exclude_asns)),
        some_of("subdivisions", &r.exclude_subdivisions),
        some_of("countries", &r.exclude_countries),
        some_of("continents", &r.exclude_continents),
    ];
    let join =
        |parts: [Option<String>; 6]| parts.into_iter().flatten().collect::<Vec<_>>().join("; ");
    let [e1, e2, e3, e4, e5] = excludes;
    (
        r.name.clone(),
        join(holds),
        join([e1, e2, e3, e4, e5, None]),
    )
}

fn health(
    info: &records::RecordInfo,
    address: &str,
    dc: &str,
    failing: &HashMap<String, String>,
    drains: &[Drain],
) -> Health {
    let drained = drains.iter().any(|d| {
        d.address
            .as_deref()
            .is_some_and(|a| records::same_address(address, a))
            || d.datacenter.as_deref().is_some_and(|x| x == dc)
    });
    let down = info
        .checked
        .iter()
        .any(|(instance, a)| a == address && failing.contains_key(instance));
    match (drained, down) {
        (true, _) => Health::Drained,
        (_, true) => Health::Down,
        _ => Health::Up,
    }
}

fn origins(
    statuses: &[RecordView],
    catalog: &Catalog,
    failing: &HashMap<String, String>,
    drains: &[Drain],
    nodes: &mut BTreeMap<(String, String), Health>,
) -> Vec<Origin> {
    let mut out = Vec::new();
    for r in statuses {
        let Some(info) = catalog.records.get(&r.record) else {
            continue;
        };
        if info.addresses.is_empty() {
            continue;
        }
        let answered = |a: &str| r.active.iter().any(|x| records::same_address(a, &x.ip));
        let addresses: Vec<(String, String, bool)> = info
            .addresses
            .iter()
            .map(|(a, dc)| {
                let dc = dc.clone().unwrap_or_default();
                nodes
                    .entry((dc.clone(), a.clone()))
                    .or_insert_with(|| health(info, a, &dc, failing, drains));
                (a.clone(), dc, answered(a))
            })
            .collect();
        let other = r
            .active
            .iter()
            .filter(|x| {
                !info
                    .addresses
                    .iter()
                    .any(|(a, _)| records::same_address(a, &x.ip))
            })
            .map(|x| x.ip.clone())
            .collect();
        out.push(Origin {
            label: r.record.clone(),
            status: r.status,
            addresses,
            other,
        });
    }
    out
}

async fn gather(state: &ApiState, wanted: Option<&str>) -> Map {
    let engine = state.engine.clone();
    let at = state.clone();
    let (local, checks, catalog, configured, peers, (regions, rules)) =
        tokio::task::spawn_blocking(move || {
            (
                engine.status_view(),
                engine.checks(),
                engine.with_config(records::catalog),
                engine.with_config(|c| {
                    c.datacenters
                        .iter()
                        .map(|d| d.name.clone())
                        .collect::<Vec<_>>()
                }),
                at.peers.status(&at.replication, &at.engine),
                (
                    engine.with_config(|c| c.regions.iter().map(|r| region_row(r)).collect()),
                    engine.rule_status(),
                ),
            )
        })
        .await
        .unwrap_or_else(|_| {
            (
                Vec::new(),
                Vec::new(),
                Catalog::default(),
                Vec::new(),
                Vec::new(),
                (Vec::new(), Vec::new()),
            )
        });
    let here = state.engine.device().to_string();
    let kv = state.replication.state().await;
    let drains = gtm_model::operator::state_of(&kv).drains;
    let mut dcs: BTreeMap<String, Vec<(String, bool)>> =
        configured.into_iter().map(|d| (d, Vec::new())).collect();
    dcs.entry(state.datacenter.clone())
        .or_default()
        .push((here.clone(), true));
    for p in &peers {
        dcs.entry(p.datacenter.clone())
            .or_default()
            .push((p.device.clone(), p.reachable));
    }
    let has_rules = !rules.is_empty();
    let mut devices = vec![here.clone()];
    devices.extend(peers.iter().map(|p| p.device.clone()));
    let peer = wanted.and_then(|w| peers.into_iter().find(|p| p.device == w));
    let (device, reachable, statuses, failing, rules) = match peer {
        Some(p) => (
            p.device,
            p.reachable,
            p.records,
            records::failing_of(p.checks),
            None,
        ),
        None => (here, true, local, records::failing_of(checks), Some(rules)),
    };
    // The configuration is the cluster's: without rules here, a peer has
    // none either.
    let rules = rules.or_else(|| (!has_rules).then(Vec::new));
    let mut nodes = BTreeMap::new();
    let mut origins = origins(&statuses, &catalog, &failing, &drains, &mut nodes);
    let more = origins.len().saturating_sub(MAX_RECORDS);
    origins.truncate(MAX_RECORDS);
    Map {
        device,
        devices,
        reachable,
        origins,
        more,
        nodes,
        dcs,
        regions,
        rules,
    }
}

pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<MapQuery>,
) -> Response {
    // Taken before the data: a change in between is announced.
    let since = super::stream::since(&state);
    let map = gather(&state, q.device.as_deref()).await;
    let body = html! {
        h1 { "Topology " span.sub { "what " (map.device) " answers" } }
        nav.devices aria-label="The device drawn" {
            "Device: "
            @for d in &map.devices {
                @if *d == map.device {
                    a aria-current="page" href={ "/ui/topology?device=" (query_value(d)) } { (d) }
                } @else {
                    a href={ "/ui/topology?device=" (query_value(d)) } { (d) }
                }
                " "
            }
        }
        p { "Each steered record, coloured by its status on " (map.device) ", with a line to each \
             address " (map.device) " answers for it: solid for the Main addresses, dashed for \
             those of disaster recovery. Addresses are coloured by their health there: green \
             healthy, red down, grey drained. Every label says it in words too, and the table \
             below the map holds the same facts." }
        p #live .live role="status" data-since=(since) { "Live updates: connecting…" }
        (render(&map))
    };
    layout::page("Topology", state.engine.device(), Some(&who), body).into_response()
}

/// The map alone, for the page's script to swap in.
pub async fn fragment(State(state): State<ApiState>, Query(q): Query<MapQuery>) -> Response {
    render(&gather(&state, q.device.as_deref()).await).into_response()
}

fn edge_class(status: Option<Status>) -> &'static str {
    match status {
        Some(Status::Dr) => "dr",
        _ => "up",
    }
}

fn render(map: &Map) -> Markup {
    let groups: BTreeSet<String> = map
        .dcs
        .keys()
        .cloned()
        .chain(map.nodes.keys().map(|(g, _)| g.clone()))
        .collect();
    // Right column: each group's header row, then one row per address.
    let mut y = 20;
    let mut at: HashMap<(String, String), i64> = HashMap::new();
    let mut boxes = Vec::new();
    for g in &groups {
        let top = y;
        y += ROW;
        for (key, _) in map.nodes.range((g.clone(), String::new())..) {
            if key.0 != *g {
                break;
            }
            at.insert(key.clone(), y);
            y += ROW;
        }
        boxes.push((g.clone(), top, y - top));
        y += 12;
    }
    let records_height = 20 + ROW * map.origins.len() as i64;
    let height = y.max(records_height) + 10;
    let refresh = format!("/ui/topology/map?device={}", query_value(&map.device));
    html! {
        div #topology data-refresh=(refresh) {
            @if !map.reachable {
                p.error role="status" { (map.device) " does not report: its last report is drawn." }
            }
            div.scroll tabindex="0" role="region" aria-label={ "Topology map of " (map.device) } {
                svg.topology xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (height) }
                    width=(WIDTH) height=(height) role="group" aria-labelledby="topology-title" {
                    title #topology-title { "What " (map.device) " answers: steered records, their answered addresses and datacenters" }
                    // Edges first, under the nodes: only what is answered.
                    @for (i, o) in map.origins.iter().enumerate() {
                        @let ry = 20 + ROW * i as i64 + ROW / 2;
                        @for (a, dc, answered) in &o.addresses {
                            @if *answered && let Some(ay) = at.get(&(dc.clone(), a.clone())) {
                                path class={ "edge " (edge_class(o.status)) } data-from=(o.label) data-to=(a)
                                    d={ "M 330 " (ry) " C 420 " (ry) ", 460 " (ay + ROW / 2) ", 560 " (ay + ROW / 2) } {}
                            }
                        }
                    }
                    @for (i, o) in map.origins.iter().enumerate() {
                        @let ry = 20 + ROW * i as i64;
                        @let status = records::text_of(o.status);
                        a href={ "/ui/records/" (preview_path(&o.label)) "?device=" (query_value(&map.device)) } {
                            g class={ "origin st-" (records::class_of(o.status)) } data-record=(o.label) data-status=(status) {
                                title { (o.label) ": " (status) }
                                rect x="10" y=(ry + 4) width="320" height=(ROW - 8) rx="6" {}
                                text x="20" y=(ry + ROW / 2 + 5) { (o.label) " — " (status) }
                            }
                        }
                    }
                    @for (g, top, h) in &boxes {
                        @let devices = map.dcs.get(g).cloned().unwrap_or_default();
                        @let up = devices.iter().any(|(_, r)| *r);
                        g.dc data-dc=(g) {
                            rect class={ "dcbox " (if devices.is_empty() { "none" } else if up { "up" } else { "down" }) }
                                x="540" y=(top) width=(WIDTH - 550) height=(h) rx="8" {}
                            text.dcname x="552" y=(top + 22) {
                                @if g.is_empty() { "no datacenter" } @else { (g) }
                                @if !devices.is_empty() {
                                    " — "
                                    (devices.iter().map(|(d, r)| if *r { d.clone() } else { format!("{d} (unreachable)") }).collect::<Vec<_>>().join(", "))
                                }
                            }
                            @for ((dc, address), health) in map.nodes.range((g.clone(), String::new())..).take_while(|((dc, _), _)| dc == g) {
                                @let ay = at.get(&(dc.clone(), address.clone())).copied().unwrap_or(0);
                                g class={ "node " (health.class()) } data-address=(address) data-health=(health.class())
                                    tabindex="0" role="img" aria-label={ (address) ": " (health.word()) } {
                                    title { (address) ": " (health.word()) }
                                    circle cx="560" cy=(ay + ROW / 2) r="9" {}
                                    text x="578" y=(ay + ROW / 2 + 5) { (address) " (" (health.word()) ")" }
                                }
                            }
                        }
                    }
                }
            }
            @if map.more > 0 {
                p.count { (map.more) " more steered records are not drawn (the map shows " (MAX_RECORDS) ")." }
            }
            (table(map))
            (rules_section(map))
        }
    }
}

/// The regions, and the topology rules of the device drawn with what each
/// answers now and the responses it decided.
fn rules_section(map: &Map) -> Markup {
    let rules = map.rules.as_deref().unwrap_or_default();
    if map.regions.is_empty() && rules.is_empty() && map.rules.is_some() {
        return html! {};
    }
    html! {
        section #topology-rules aria-labelledby="rules-title" {
            h2 #rules-title { "Regions and topology rules" }
            @if !map.regions.is_empty() {
                div.scroll tabindex="0" role="region" aria-label="Regions" {
                    table.objects #regions {
                        caption { "Regions (client places the rules name)" }
                        thead { tr { th scope="col" { "Region" } th scope="col" { "Holds" } th scope="col" { "Excludes" } } }
                        tbody {
                            @for (name, holds, excludes) in &map.regions {
                                tr data-region=(name) {
                                    th scope="row" { a href={ "/ui/objects/regions/edit?name=" (query_value(name)) } { (name) } }
                                    td { (holds) }
                                    td { @if excludes.is_empty() { "—" } @else { (excludes) } }
                                }
                            }
                        }
                    }
                }
            }
            @match &map.rules {
                None => p { "The rules of " (map.device) " are in its own console and its `gtm status`: its reports carry its records' answers, not its rules." },
                Some(list) if list.is_empty() => p { "No record has topology rules." },
                Some(list) => div.scroll tabindex="0" role="region" aria-label="Topology rules" {
                    table.objects #rules {
                        caption { "Topology rules on " (map.device) ": the closest that holds a client answers it" }
                        thead { tr {
                            th scope="col" { "Record" }
                            th scope="col" { "Rule" }
                            th scope="col" { "Answers now" }
                            th scope="col" { "Decided" }
                        } }
                        tbody {
                            @for r in list {
                                tr data-record=(r.record) data-rule=(r.rule.rule) {
                                    th scope="row" { (r.record) }
                                    td { (r.rule.rule) ": " (r.rule.client) " → " (r.rule.target) }
                                    td { @if r.rule.skipped { "skipped (no candidate)" } @else { (gtm_engine::active_texts(&r.rule.active).join(", ")) } }
                                    td { (r.decided) }
                                }
                            }
                        }
                    }
                },
            }
        }
    }
}

/// The map's facts as a table.
fn table(map: &Map) -> Markup {
    html! {
        details #topology-table {
            summary { "The map as a table" }
            table.objects {
                caption { "What " (map.device) " answers for each steered record" }
                thead { tr {
                    th scope="col" { "Record" }
                    th scope="col" { "Status" }
                    th scope="col" { "Answered" }
                    th scope="col" { "Not answered" }
                } }
                tbody {
                    @for o in &map.origins {
                        tr data-record=(o.label) {
                            th scope="row" { (o.label) }
                            td { (records::text_of(o.status)) }
                            td.answered {
                                (o.addresses.iter().filter(|a| a.2).map(|(a, dc, _)| if dc.is_empty() { a.clone() } else { format!("{a} ({dc})") }).chain(o.other.iter().map(|x| format!("{x} (fail-safe)"))).collect::<Vec<_>>().join(", "))
                            }
                            td { (o.addresses.iter().filter(|a| !a.2).map(|(a, _, _)| a.as_str()).collect::<Vec<_>>().join(", ")) }
                        }
                    }
                }
            }
        }
    }
}

fn preview_path(label: &str) -> String {
    match label.rsplit_once('/') {
        Some((name, rtype)) => format!("{}/{}", segment(name), segment(rtype)),
        None => segment(label),
    }
}
