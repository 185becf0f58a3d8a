//! The topology map (docs/console.md): the datacenters with their devices,
//! and every steered record (an origin node) linked to its addresses in
//! their datacenters, coloured by their health on this device, as an SVG
//! drawn by the device. The map updates live like the records table (its
//! fragment is fetched again on each change the stream announces).

use std::collections::{BTreeMap, BTreeSet};

use axum::{
    Extension,
    extract::State,
    response::{IntoResponse, Response},
};
use maud::{Markup, html};

use super::layout::{self, segment};
use crate::ApiState;
use gtm_engine::Preview;
use gtm_node::access::Principal;

/// Steered records drawn at most; the rest are counted below the map.
pub const MAX_RECORDS: usize = 200;

const ROW: i64 = 34;
const WIDTH: i64 = 1000;

/// An address node: its datacenter group and how healthy it is across
/// the records that have it.
#[derive(Debug, Default)]
struct Node {
    healthy: usize,
    unhealthy: usize,
    drained: bool,
}

impl Node {
    fn class(&self) -> &'static str {
        match (self.drained, self.healthy, self.unhealthy) {
            (true, _, _) => "drained",
            (_, _, 0) => "up",
            (_, 0, _) => "down",
            _ => "mixed",
        }
    }

    fn word(&self) -> &'static str {
        match self.class() {
            "drained" => "drained",
            "up" => "healthy",
            "down" => "down",
            _ => "healthy in some records",
        }
    }
}

struct Map {
    previews: Vec<Preview>,
    more: usize,
    /// Datacenter (or "" for addresses without one) → its devices.
    dcs: BTreeMap<String, Vec<(String, bool)>>,
}

async fn gather(state: &ApiState) -> Map {
    let engine = state.engine.clone();
    let (mut previews, configured) = tokio::task::spawn_blocking(move || {
        let labels: Vec<String> = engine.status().into_iter().map(|r| r.record).collect();
        let previews: Vec<Preview> = labels
            .iter()
            .filter_map(|l| engine.preview(l))
            .filter(|p| !p.addresses.is_empty())
            .collect();
        let dcs: Vec<String> =
            engine.with_config(|c| c.datacenters.iter().map(|d| d.name.clone()).collect());
        (previews, dcs)
    })
    .await
    .unwrap_or_default();
    let more = previews.len().saturating_sub(MAX_RECORDS);
    previews.truncate(MAX_RECORDS);
    let mut dcs: BTreeMap<String, Vec<(String, bool)>> =
        configured.into_iter().map(|d| (d, Vec::new())).collect();
    dcs.entry(state.datacenter.clone())
        .or_default()
        .push((state.engine.device().to_string(), true));
    for p in state.peers.status(&state.replication) {
        dcs.entry(p.datacenter)
            .or_default()
            .push((p.device, p.reachable));
    }
    Map {
        previews,
        more,
        dcs,
    }
}

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    // Taken before the data: a change in between is announced.
    let since = super::stream::since(&state);
    let map = gather(&state).await;
    let body = html! {
        h1 { "Topology" }
        p { "Datacenters with their devices, and each steered record linked to its addresses, \
             coloured by their health on this device: green healthy, red down, amber healthy \
             in some records only, grey drained. Each label also says it." }
        p #live .live role="status" data-since=(since) { "Live updates: connecting…" }
        (render(&map))
    };
    layout::page("Topology", state.engine.device(), Some(&who), body).into_response()
}

/// The map alone, for the page's script to swap in.
pub async fn fragment(State(state): State<ApiState>) -> Response {
    render(&gather(&state).await).into_response()
}

fn render(map: &Map) -> Markup {
    // Address nodes by datacenter, each with its health across records.
    let mut nodes: BTreeMap<String, BTreeMap<String, Node>> = BTreeMap::new();
    for p in &map.previews {
        for a in &p.addresses {
            let n = nodes
                .entry(a.dc.clone().unwrap_or_default())
                .or_default()
                .entry(a.address.clone())
                .or_default();
            if a.healthy {
                n.healthy += 1;
            } else {
                n.unhealthy += 1;
            }
            n.drained |= a.drained;
        }
    }
    let groups: BTreeSet<String> = map
        .dcs
        .keys()
        .cloned()
        .chain(nodes.keys().cloned())
        .collect();
    // Right column: each group's header row, then one row per address.
    let mut y = 20;
    let mut at: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut boxes = Vec::new();
    for g in &groups {
        let top = y;
        y += ROW;
        for address in nodes
            .get(g)
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            at.insert((g.clone(), address), y);
            y += ROW;
        }
        boxes.push((g.clone(), top, y - top));
        y += 12;
    }
    let records_height = 20 + ROW * map.previews.len() as i64;
    let height = y.max(records_height) + 10;
    html! {
        div #topology data-refresh="/ui/topology/map" {
            div.scroll tabindex="0" role="region" aria-label="Topology map" {
                svg.topology xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (height) }
                    width=(WIDTH) height=(height) role="img" aria-labelledby="topology-title" {
                    title #topology-title { "Steered records, their addresses and datacenters" }
                    // Edges first, under the nodes.
                    @for (i, p) in map.previews.iter().enumerate() {
                        @let ry = 20 + ROW * i as i64 + ROW / 2;
                        @for a in &p.addresses {
                            @if let Some(ay) = at.get(&(a.dc.clone().unwrap_or_default(), a.address.clone())) {
                                path class={ "edge " (if a.drained { "drained" } else if a.healthy { "up" } else { "down" }) }
                                    d={ "M 330 " (ry) " C 420 " (ry) ", 460 " (ay + ROW / 2) ", 560 " (ay + ROW / 2) } {}
                            }
                        }
                    }
                    @for (i, p) in map.previews.iter().enumerate() {
                        @let ry = 20 + ROW * i as i64;
                        a href={ "/ui/records/" (preview_path(&p.record)) } {
                            g.origin data-record=(p.record) {
                                title { (p.record) ": " (p.status.map_or("no state yet", |s| s.as_str())) }
                                rect x="10" y=(ry + 4) width="320" height=(ROW - 8) rx="6" {}
                                text x="20" y=(ry + ROW / 2 + 5) { (p.record) }
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
                            @for (address, node) in nodes.get(g).into_iter().flatten() {
                                @let ay = at.get(&(g.clone(), address.clone())).copied().unwrap_or(0);
                                g class={ "node " (node.class()) } data-address=(address) data-health=(node.class()) {
                                    title { (address) ": " (node.word()) }
                                    circle cx="560" cy=(ay + ROW / 2) r="9" {}
                                    text x="578" y=(ay + ROW / 2 + 5) { (address) " (" (node.word()) ")" }
                                }
                            }
                        }
                    }
                }
            }
            @if map.more > 0 {
                p.count { (map.more) " more steered records are not drawn (the map shows " (MAX_RECORDS) ")." }
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
