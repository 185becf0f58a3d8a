//! What devices tell each other outside the Raft log (spec §4): every few
//! seconds each device sends every peer its check states, scenario
//! decisions, record states and new events. From the reports a device
//! judges the checks that run in other datacenters ([`combine`]), notices
//! datacenters none of whose devices is heard from, and shows every
//! device's record states and events.
//!
//! Record states go whole only when the peer lacks them: a peer answers
//! each report with where it holds the sender's records
//! ([`ReportAnswer`]), and while that is a generation of the sender's
//! current list the next report carries only the records changed since
//! (`crate::engine::record_changes`), by their place in the list.

pub mod combine;
#[cfg(test)]
mod report_tests;

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::{
    engine::{
        CheckStatus, Engine, Event, RecordStatus, ScenarioStatus,
        record_changes::{RecordChanges, RecordsAt},
    },
    replication::Replication,
};
use combine::{Reported, combine};
use gtm_cluster::SECRET_HEADER;

/// How often reports go out.
pub const REPORT_EVERY: Duration = Duration::from_secs(2);
/// A datacenter whose devices sent nothing for this long is down.
pub const DEVICE_SILENT_AFTER: Duration = Duration::from_secs(6);
/// Events of each peer kept for merged logs.
const PEER_EVENTS: usize = 10_000;
/// Events in one report at most (the rest follow in the next).
const EVENTS_PER_REPORT: usize = 1_000;
/// A report's time to be sent, taken in and answered: the client's own
/// (1.5 s) for a small one, and this much more per byte of a large one.
/// A million records' whole list is about 100 MB, and the peer parses it
/// before it answers; cut off, it would be sent whole again next period.
const REPORT_BYTES_PER_SEC: u64 = 10_000_000;
const REPORT_BASE: Duration = Duration::from_millis(1500);

/// The time a report of `bytes` may take.
fn report_timeout(bytes: usize) -> Duration {
    REPORT_BASE + Duration::from_millis(bytes as u64 * 1000 / REPORT_BYTES_PER_SEC)
}

/// One device's report to its peers.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    pub device: String,
    pub datacenter: String,
    /// The configuration version the device serves (0 from a device that
    /// does not report it yet).
    #[serde(default)]
    pub version: u64,
    /// The GeoIP database the device answers with ("none" without one;
    /// empty from a device that does not report it yet).
    #[serde(default)]
    pub geoip: String,
    /// Its GeoIP database in detail (name, build date, source); `None`
    /// without one or from a device that does not report it yet.
    #[serde(default)]
    pub geoip_info: Option<crate::geo::GeoInfo>,
    pub checks: Vec<CheckStatus>,
    pub scenarios: Vec<ScenarioStatus>,
    /// Every record's status, in the device's order; empty when the
    /// report carries changes (`records_base`).
    pub records: Vec<RecordStatus>,
    pub events: Vec<Event>,
    /// Where the device's record states stand with this report (absent
    /// from devices of an earlier version).
    #[serde(default)]
    pub records_at: Option<RecordsAt>,
    /// When set, `records` is empty and `changed` holds the records changed
    /// since this generation (of `records_at`'s epoch), by their place in
    /// the list: for a peer that said it holds the list at that generation.
    #[serde(default)]
    pub records_base: Option<u64>,
    #[serde(default)]
    pub changed: Vec<(usize, RecordStatus)>,
}

/// A device's answer to a report: where it now holds the reporting
/// device's record states (`None`: it could not take the changes in, or
/// the report said nothing of where they stand).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReportAnswer {
    pub records_at: Option<RecordsAt>,
}

/// A peer as this device last heard from it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PeerStatus {
    pub device: String,
    pub datacenter: String,
    /// Milliseconds since its last report; `None`: never heard from.
    pub age_ms: Option<u64>,
    pub reachable: bool,
    /// The configuration version it served at its last report.
    #[serde(default)]
    pub version: Option<u64>,
    /// The GeoIP database it reported using.
    #[serde(default)]
    pub geoip: Option<String>,
    /// That database in detail, when the device reports it.
    #[serde(default)]
    pub geoip_info: Option<crate::geo::GeoInfo>,
    pub records: Vec<RecordStatus>,
    pub checks: Vec<CheckStatus>,
}

/// The latest reports of the peers, and their events.
#[derive(Debug, Default)]
pub struct Peers {
    reports: Mutex<HashMap<String, (Instant, Report)>>,
    events: Mutex<HashMap<String, VecDeque<Event>>>,
    /// Per peer id: the last event sequence number it acknowledged.
    sent: Mutex<HashMap<u64, u64>>,
    /// Per peer id: where it said it holds this device's record states.
    held: Mutex<HashMap<u64, RecordsAt>>,
    /// When this device first saw each peer in the membership: a peer
    /// gets a grace period for its first report before it counts as silent.
    known_since: Mutex<HashMap<String, Instant>>,
    /// Bumped when a peer's reported record states change, or a silent
    /// peer reports again: the console's live updates wait on it instead
    /// of polling.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Peers {
    /// Takes a report in (the route `/cluster/v1/report`), and says where
    /// this device now holds the reporter's record states.
    pub fn receive(&self, mut report: Report) -> ReportAnswer {
        let events = std::mem::take(&mut report.events);
        {
            let mut all = self.events.lock().unwrap_or_else(|e| e.into_inner());
            let log = all.entry(report.device.clone()).or_default();
            for e in events {
                if log.back().is_none_or(|last| e.seq > last.seq) {
                    if log.len() == PEER_EVENTS {
                        log.pop_front();
                    }
                    log.push_back(e);
                }
            }
        }
        let (news, answer) = {
            let mut reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
            let old = reports.remove(&report.device);
            let silent = old
                .as_ref()
                .is_none_or(|(at, _)| at.elapsed() > DEVICE_SILENT_AFTER);
            let changed = match report.records_base.take() {
                Some(base) => {
                    let changes = std::mem::take(&mut report.changed);
                    match old {
                        Some((_, mut held)) if holds(&held, &report, base, &changes) => {
                            let changed = !changes.is_empty();
                            for (i, status) in changes {
                                // In range: `holds` checked every place.
                                if let Some(slot) = held.records.get_mut(i) {
                                    *slot = status;
                                }
                            }
                            report.records = held.records;
                            changed
                        }
                        // Not the list the changes are to: the states held
                        // stay, and are said to be of no known point.
                        held => {
                            report.records = held.map(|(_, h)| h.records).unwrap_or_default();
                            report.records_at = None;
                            false
                        }
                    }
                }
                None => old.is_none_or(|(_, old)| old.records != report.records),
            };
            let answer = ReportAnswer {
                records_at: report.records_at,
            };
            reports.insert(report.device.clone(), (Instant::now(), report));
            (silent || changed, answer)
        };
        if news {
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
        answer
    }

    /// Where this device last heard that `peer` holds its record states.
    fn held_by(&self, peer: u64) -> Option<RecordsAt> {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .copied()
    }

    /// Changes as the console shows them: a peer's record states changed,
    /// or a silent peer reports again.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Every member but this device, with what it last reported.
    pub fn status(&self, replication: &Replication) -> Vec<PeerStatus> {
        let status = replication.status();
        let reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        status
            .members
            .iter()
            .filter(|m| m.id != status.id)
            .map(|m| {
                let latest = reports.get(&m.info.name);
                let age = latest.map(|(at, _)| at.elapsed());
                PeerStatus {
                    device: m.info.name.clone(),
                    datacenter: m.info.datacenter.clone(),
                    age_ms: age.map(|a| a.as_millis() as u64),
                    reachable: age.is_some_and(|a| a <= DEVICE_SILENT_AFTER),
                    version: latest.map(|(_, r)| r.version).filter(|v| *v > 0),
                    geoip: latest
                        .map(|(_, r)| r.geoip.clone())
                        .filter(|g| !g.is_empty()),
                    geoip_info: latest.and_then(|(_, r)| r.geoip_info.clone()),
                    records: latest.map(|(_, r)| r.records.clone()).unwrap_or_default(),
                    checks: latest.map(|(_, r)| r.checks.clone()).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The events peers sent, every device's together.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|log| log.iter().cloned())
            .collect()
    }

    /// Judges the checks probed in other datacenters and the datacenters
    /// themselves from the reports.
    pub fn judge(&self, replication: &Replication, engine: &Engine, datacenter: &str) {
        let status = replication.status();
        if status.members.is_empty() {
            return;
        }
        // What judging reads: when each device reported, and its checks
        // (not its record states, which can be a million).
        let reports: HashMap<String, (Instant, Vec<CheckStatus>)> = self
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(device, (at, r))| (device.clone(), (*at, r.checks.clone())))
            .collect();
        let known: HashMap<String, Instant> = {
            let mut known = self.known_since.lock().unwrap_or_else(|e| e.into_inner());
            for m in &status.members {
                known
                    .entry(m.info.name.clone())
                    .or_insert_with(Instant::now);
            }
            known.clone()
        };
        // Silent for: since its last report, or since we know of it.
        let age_of = |device: &str| {
            reports
                .get(device)
                .map(|(at, _)| at.elapsed())
                .or_else(|| known.get(device).map(Instant::elapsed))
        };
        // Datacenters with devices: down when none of them reported lately.
        let mut dcs: HashMap<String, Vec<String>> = HashMap::new();
        for m in status.members.iter().filter(|m| m.id != status.id) {
            dcs.entry(m.info.datacenter.clone())
                .or_default()
                .push(m.info.name.clone());
        }
        for (dc, devices) in &dcs {
            if dc == datacenter {
                continue;
            }
            let up = devices
                .iter()
                .any(|d| age_of(d).is_some_and(|a| a <= DEVICE_SILENT_AFTER));
            let why = if up {
                "a device there reports again".to_string()
            } else {
                format!(
                    "no report from {} for {} s",
                    devices.join(", "),
                    DEVICE_SILENT_AFTER.as_secs()
                )
            };
            engine.set_datacenter_up(dc, up, &why);
        }
        for instance in engine.remote_instances(datacenter) {
            let Some(run_on) = instance.spec.raw.run_on.clone() else {
                continue;
            };
            let name = instance.check.to_string();
            let mut from = Vec::new();
            let reported: Vec<Reported> = dcs
                .get(&run_on)
                .into_iter()
                .flatten()
                .filter_map(|device| {
                    let (at, checks) = reports.get(device)?;
                    let check = checks.iter().find(|c| c.check == name)?;
                    from.push(format!("{device} {}", check.state));
                    Some(Reported {
                        state: check.state,
                        age: at.elapsed(),
                    })
                })
                .collect();
            let lifetime = combine::lifetime(instance.spec.interval, REPORT_EVERY);
            let state = combine(instance.spec.policy, lifetime, &reported);
            let reason = if from.is_empty() {
                format!("runs in {run_on}; no report from there")
            } else {
                format!("from {run_on}: {}", from.join(", "))
            };
            engine.set_check(&instance.check, state, &reason);
        }
    }
}

/// Whether `held` (the last report of a device, as taken in) is the list
/// that `report`'s changes since generation `base` apply to.
fn holds(held: &Report, report: &Report, base: u64, changes: &[(usize, RecordStatus)]) -> bool {
    let Some(now) = report.records_at else {
        return false;
    };
    held.records_at
        == Some(RecordsAt {
            epoch: now.epoch,
            generation: base,
        })
        && changes.iter().all(|(i, _)| *i < held.records.len())
}

/// Sends this device's report to every peer every [`REPORT_EVERY`], and
/// re-judges remote checks and datacenters, until `cancel`.
pub async fn run(
    http: reqwest::Client,
    peers: Arc<Peers>,
    replication: Arc<Replication>,
    engine: Arc<Engine>,
    datacenter: String,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(REPORT_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = cancel.cancelled() => return,
        }
        let status = replication.status();
        let Ok(secret) = replication.secret_value() else {
            continue;
        };
        // Each peer's new events, read from the store, and the report's
        // base (every record's status, under the engine's lock) are built
        // off the async workers; bounded: a peer that stays unreachable
        // would otherwise have the whole log read for it every period.
        let afters: Vec<(u64, u64, Option<RecordsAt>)> = {
            let sent = peers.sent.lock().unwrap_or_else(|e| e.into_inner());
            status
                .members
                .iter()
                .filter(|m| m.id != status.id)
                .map(|m| {
                    let after = sent.get(&m.id).copied().unwrap_or(0);
                    (m.id, after, peers.held_by(m.id))
                })
                .collect()
        };
        let (reader, dc) = (engine.clone(), datacenter.clone());
        // Serialized there too: the records of a large configuration make
        // a report of megabytes.
        let Ok(mut bodies) = tokio::task::spawn_blocking(move || {
            let base = Report {
                device: reader.device().to_string(),
                datacenter: dc.clone(),
                version: reader.version(),
                geoip: reader.geoip().description().to_string(),
                geoip_info: reader.geoip().info().cloned(),
                checks: reader.local_checks(&dc),
                scenarios: reader.scenarios(),
                records: Vec::new(),
                events: Vec::new(),
                records_at: None,
                records_base: None,
                changed: Vec::new(),
            };
            afters
                .into_iter()
                .filter_map(|(id, after, held)| {
                    let mut report = base.clone();
                    // The whole list only to a peer that lacks it.
                    let (at, records) = reader.record_changes(held);
                    report.records_at = Some(at);
                    match records {
                        RecordChanges::Whole(all) => report.records = all,
                        RecordChanges::Since { base, changed } => {
                            report.records_base = Some(base);
                            report.changed = changed;
                        }
                    }
                    report.events = reader.events_since(after, EVENTS_PER_REPORT);
                    let last = report.events.last().map_or(after, |e| e.seq);
                    let body = serde_json::to_vec(&report).ok()?;
                    Some((id, (last, body)))
                })
                .collect::<std::collections::HashMap<_, _>>()
        })
        .await
        else {
            continue;
        };
        let sends = status
            .members
            .iter()
            .filter(|m| m.id != status.id)
            .filter_map(|m| {
                let (last, body) = bodies.remove(&m.id)?;
                let url = format!(
                    "{}/cluster/v1/report",
                    m.info.api_addr.trim_end_matches('/')
                );
                let request = http
                    .post(url)
                    .timeout(report_timeout(body.len()))
                    .header(SECRET_HEADER, secret.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body);
                let (peers, id) = (peers.clone(), m.id);
                Some(async move {
                    let answered = match request.send().await {
                        Ok(response) if response.status().is_success() => {
                            peers
                                .sent
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(id, last);
                            // A device of an earlier version answers
                            // nothing: it is sent whole lists.
                            response.json::<ReportAnswer>().await.ok()
                        }
                        _ => None,
                    };
                    let mut held = peers.held.lock().unwrap_or_else(|e| e.into_inner());
                    match answered.and_then(|a| a.records_at) {
                        Some(at) => held.insert(id, at),
                        None => held.remove(&id),
                    };
                })
            });
        futures_util::future::join_all(sends).await;
        // Judging takes the engine's lock: off the async workers.
        let (p, r, e, dc) = (
            peers.clone(),
            replication.clone(),
            engine.clone(),
            datacenter.clone(),
        );
        let _ = tokio::task::spawn_blocking(move || p.judge(&r, &e, &dc)).await;
    }
}
