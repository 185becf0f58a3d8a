//! What devices tell each other outside the Raft log (spec §4): every few
//! seconds each device sends every peer its check states, scenario
//! decisions, record states and new events. From the reports a device
//! judges the checks that run in other datacenters ([`combine`]), notices
//! datacenters none of whose devices is heard from, and shows every
//! device's record states and events.
//!
//! Record states go whole only when the peer lacks them, and then in
//! pages: a peer answers each report with what it holds of the sender's
//! records ([`ReportAnswer`]); while that is a generation of the sender's
//! current list the next report carries only the records changed since
//! (`gtm_engine::record_changes`), by their place in the list, and
//! while it is part of the list the next page follows at once.

pub mod combine;
#[cfg(test)]
mod judge_tests;
#[cfg(test)]
mod report_tests;

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::replication::Replication;
use combine::{Reported, combine};
use gtm_cluster::SECRET_HEADER;
use gtm_engine::{
    CheckStatus, Engine, Event, RecordStatus, RecordView, ScenarioStatus,
    record_changes::{Held, Page, RecordChanges, RecordsAt},
    record_states::RecordStates,
};
use gtm_model::clock::{BEAT_EVERY, Wakeful};

/// How often reports go out.
pub const REPORT_EVERY: Duration = Duration::from_secs(2);
/// A datacenter whose devices sent nothing for this long is down.
pub const DEVICE_SILENT_AFTER: Duration = Duration::from_secs(6);
/// Events of each peer kept for merged logs.
const PEER_EVENTS: usize = 10_000;
/// Events in one report at most (the rest follow in the next).
const EVENTS_PER_REPORT: usize = 1_000;

/// Sizes a report's JSON and a peer's list are made at up front, so that
/// they do not grow step by step through the allocator's size classes
/// (whose pages a long-lived neighbour keeps resident): about the JSON of
/// one record's state, the texts of one in a list, and the most records a
/// list taken in reserves room for before its pages come.
const JSON_BYTES: usize = 128;
const TEXT_BYTES: usize = 40;
const RESERVED_RECORDS: usize = 2_000_000;

/// A report's time to be sent, taken in and answered: the client's own
/// (1.5 s) for a small one, and this much more per byte of a large one (a
/// whole list to a device of an earlier version, which takes no pages, is
/// about 100 MB at a million records).
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
    pub geoip_info: Option<gtm_geo::GeoInfo>,
    pub checks: Vec<CheckStatus>,
    pub scenarios: Vec<ScenarioStatus>,
    /// Record statuses, in the device's order: every record from a device
    /// of an earlier version, the records of `page`, or none when the
    /// report carries changes (`records_base`). Sent and taken in as
    /// `RecordStatus`es, held compact.
    pub records: RecordStates,
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
    /// When set, `records` is this page of the device's list.
    #[serde(default)]
    pub page: Option<Page>,
}

/// A device's answer to a report: what it now holds of the reporting
/// device's record states (`None`: no list it can take changes to, nor
/// pages of one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReportAnswer {
    pub held: Option<Held>,
    /// The sequence number of the reporter's newest event this device
    /// holds (0: none, as after a restart): the next report carries the
    /// events after it. Absent from devices of an earlier version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_through: Option<u64>,
}

/// What a peer last said it holds of this device's record states.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PeerHolds {
    Said(Held),
    /// It answered without a body: a device of an earlier version, which
    /// takes the whole list in one report.
    Earlier,
}

/// Pages of a peer's list taken in so far.
#[derive(Debug)]
struct Pending {
    from: RecordsAt,
    total: usize,
    records: RecordStates,
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
    pub geoip_info: Option<gtm_geo::GeoInfo>,
    /// Its record states at its last report, typed by this device
    /// ([`Engine::typed`]).
    pub records: Vec<RecordView>,
    pub checks: Vec<CheckStatus>,
}

/// The latest reports of the peers, and their events.
#[derive(Debug, Default)]
pub struct Peers {
    /// Per device: when its last report came, the report (its record
    /// states taken out), and the record states held.
    reports: Mutex<HashMap<String, (Instant, Report, RecordStates)>>,
    events: Mutex<HashMap<String, VecDeque<Event>>>,
    /// Per peer id: the last event sequence number it acknowledged.
    sent: Mutex<HashMap<u64, u64>>,
    /// Per peer id: what it said it holds of this device's record states.
    held: Mutex<HashMap<u64, PeerHolds>>,
    /// Per peer id: its reports are not taken (logged once, until they
    /// are again).
    failing: Mutex<std::collections::HashSet<u64>>,
    /// Per device: the pages of its list taken in so far.
    pending: Mutex<HashMap<String, Pending>>,
    /// Per member id: since when this device sees it in the membership
    /// (this time): a peer gets a grace period for its first report
    /// before it counts as silent.
    known_since: Mutex<HashMap<u64, Instant>>,
    /// This device's own running time since it last stalled, started or
    /// joined: peers are judged silent only by the time it could hear them.
    wakeful: Wakeful,
    /// The node id under which this device was a member when last judged.
    joined_as: Mutex<Option<u64>>,
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
        let events_through = {
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
            log.back().map_or(0, |e| e.seq)
        };
        let (news, answer) = {
            let mut reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
            let old = reports.remove(&report.device);
            let silent = old
                .as_ref()
                .is_none_or(|(at, _, _)| at.elapsed() > DEVICE_SILENT_AFTER);
            let records = std::mem::take(&mut report.records);
            let held_before = |old: Option<(Instant, Report, RecordStates)>| {
                old.map(|(_, _, list)| list).unwrap_or_default()
            };
            let (changed, pages, list) = if let Some(page) = report.page.take() {
                let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                match take_page(&mut pending, &report.device, page, records) {
                    Ok(list) => {
                        report.records_at = Some(page.from);
                        let changed = old.is_none_or(|(_, _, old)| old != list);
                        (changed, None, list)
                    }
                    // The list held before stays on show until the new
                    // one is whole; no changes are taken to it.
                    Err(pages) => {
                        report.records_at = None;
                        (false, pages, held_before(old))
                    }
                }
            } else {
                match report.records_base.take() {
                    Some(base) => {
                        let changes = std::mem::take(&mut report.changed);
                        match old {
                            Some((_, held, mut list))
                                if holds(&held, list.len(), &report, base, &changes) =>
                            {
                                let changed = !changes.is_empty();
                                for (i, status) in changes {
                                    // In range: `holds` checked every place.
                                    list.set(i, status);
                                }
                                (changed, None, list)
                            }
                            // Not the list the changes are to: the states
                            // held stay, and are said to be of no known point.
                            held => {
                                report.records_at = None;
                                (false, None, held_before(held))
                            }
                        }
                    }
                    None => {
                        let mut list = records;
                        list.shrink();
                        let changed = old.is_none_or(|(_, _, old)| old != list);
                        (changed, None, list)
                    }
                }
            };
            // Where the list held stands: a generation of the device's
            // list, or the pages of one taken so far.
            let answer = ReportAnswer {
                held: report.records_at.map(Held::At).or(pages),
                events_through: Some(events_through),
            };
            reports.insert(report.device.clone(), (Instant::now(), report, list));
            (silent || changed, answer)
        };
        if news {
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
        answer
    }

    /// What this device last heard `peer` holds of its record states.
    fn held_by(&self, peer: u64) -> Option<PeerHolds> {
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

    /// Every member but this device, with what it last reported, its
    /// record states typed by `engine` ([`Engine::typed`]); ordered by
    /// device name, so that columns keep their places when a device
    /// rejoins under a new node id.
    pub fn status(&self, replication: &Replication, engine: &Engine) -> Vec<PeerStatus> {
        // Typed outside the reports' lock: it takes the engine's.
        self.collect(replication, true)
            .into_iter()
            .map(|(mut peer, records)| {
                peer.records = engine.typed(&peer.device, records);
                peer
            })
            .collect()
    }

    /// [`Peers::status`] without the record states (`records` empty): who
    /// the peers are, whether they report, their GeoIP databases. Reads
    /// nothing of the engine.
    pub fn devices(&self, replication: &Replication) -> Vec<PeerStatus> {
        self.collect(replication, false)
            .into_iter()
            .map(|(peer, _)| peer)
            .collect()
    }

    /// [`Peers::status`] with each peer's record states as its report
    /// carries them, untyped: for what reads only their statuses (metrics,
    /// manual-failback holds), without the engine.
    pub fn reported(&self, replication: &Replication) -> Vec<(PeerStatus, Vec<RecordStatus>)> {
        self.collect(replication, true)
    }

    /// Each peer, by name, and (`with_records`) the record states it
    /// reported.
    fn collect(
        &self,
        replication: &Replication,
        with_records: bool,
    ) -> Vec<(PeerStatus, Vec<RecordStatus>)> {
        let status = replication.status();
        let reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        let mut peers: Vec<(PeerStatus, Vec<RecordStatus>)> = status
            .members
            .iter()
            .filter(|m| m.id != status.id)
            .map(|m| {
                let latest = reports.get(&m.info.name);
                let age = latest.map(|(at, _, _)| at.elapsed());
                let peer = PeerStatus {
                    device: m.info.name.clone(),
                    datacenter: m.info.datacenter.clone(),
                    age_ms: age.map(|a| a.as_millis() as u64),
                    reachable: age.is_some_and(|a| a <= DEVICE_SILENT_AFTER),
                    version: latest.map(|(_, r, _)| r.version).filter(|v| *v > 0),
                    geoip: latest
                        .map(|(_, r, _)| r.geoip.clone())
                        .filter(|g| !g.is_empty()),
                    geoip_info: latest.and_then(|(_, r, _)| r.geoip_info.clone()),
                    records: Vec::new(),
                    checks: latest.map(|(_, r, _)| r.checks.clone()).unwrap_or_default(),
                };
                let records = match latest {
                    Some((_, _, list)) if with_records => list.statuses(),
                    _ => Vec::new(),
                };
                (peer, records)
            })
            .collect();
        peers.sort_by(|(a, _), (b, _)| a.device.cmp(&b.device));
        peers
    }

    /// `device`'s record states as its last report left them, and how
    /// long ago that report came.
    pub fn last_states(&self, device: &str) -> Option<(Duration, RecordStates)> {
        let reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        reports
            .get(device)
            .map(|(at, _, list)| (at.elapsed(), list.clone()))
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
    ///
    /// A peer's silence counts only while this device was awake to hear it
    /// and the peer was a member: a verdict that holds only when the time
    /// this device itself was stopped, starting or joining counts as the
    /// peer's silence is not taken, until the peers have had
    /// [`DEVICE_SILENT_AFTER`] of this device's own running time to report
    /// ([`verdict`]). So a device never declares another datacenter down
    /// because it was itself paused.
    pub fn judge(&self, replication: &Replication, engine: &Engine, datacenter: &str) {
        let status = replication.status();
        let member = status.members.iter().any(|m| m.id == status.id);
        if !self.member_as(member.then_some(status.id)) {
            return;
        }
        if let Some(gap) = self.wakeful.beat() {
            stalled(gap);
        }
        let now = Instant::now();
        let awake = self.wakeful.awake_at(now);
        // What judging reads: when each device reported, and its checks
        // (not its record states, which can be a million).
        let reports: HashMap<String, (Instant, Vec<CheckStatus>)> = self
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(device, (at, r, _))| (device.clone(), (*at, r.checks.clone())))
            .collect();
        // Since when each member is one (this time: a device that left and
        // joined again is new, and its reports from before say nothing).
        let known: HashMap<u64, Instant> = {
            let mut known = self.known_since.lock().unwrap_or_else(|e| e.into_inner());
            known.retain(|id, _| status.members.iter().any(|m| m.id == *id));
            for m in &status.members {
                known.entry(m.id).or_insert(now);
            }
            known.clone()
        };
        // Silent for: since its last report, or since it is a member when
        // that is later.
        let silence_of = |id: u64, device: &str| {
            let reported = reports
                .get(device)
                .map(|(at, _)| now.saturating_duration_since(*at));
            let member = known.get(&id).map(|at| now.saturating_duration_since(*at));
            match (reported, member) {
                (Some(r), Some(m)) => Some(r.min(m)),
                (r, m) => r.or(m),
            }
        };
        // Datacenters with devices: down when none of them reported lately.
        let mut dcs: HashMap<String, Vec<(u64, String)>> = HashMap::new();
        for m in status.members.iter().filter(|m| m.id != status.id) {
            dcs.entry(m.info.datacenter.clone())
                .or_default()
                .push((m.id, m.info.name.clone()));
        }
        for (dc, devices) in &dcs {
            if dc == datacenter {
                continue;
            }
            let silences: Vec<Option<Duration>> = devices
                .iter()
                .map(|(id, name)| silence_of(*id, name))
                .collect();
            let Some(up) = verdict(&silences, awake, heard_lately) else {
                continue;
            };
            let why = if up {
                "a device there reports again".to_string()
            } else {
                let names: Vec<&str> = devices.iter().map(|(_, n)| n.as_str()).collect();
                format!(
                    "no report from {} for {} s",
                    names.join(", "),
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
                .filter_map(|(_, device)| {
                    let (at, checks) = reports.get(device)?;
                    let check = checks.iter().find(|c| c.check == name)?;
                    from.push(format!("{device} {}", check.state));
                    Some(Reported {
                        state: check.state,
                        age: now.saturating_duration_since(*at),
                    })
                })
                .collect();
            let lifetime = combine::lifetime(instance.spec.interval, REPORT_EVERY);
            let ages: Vec<Option<Duration>> = reported.iter().map(|r| Some(r.age)).collect();
            let judged = verdict(&ages, awake, |ages| {
                let seen: Vec<Reported> = reported
                    .iter()
                    .zip(ages)
                    .map(|(r, age)| Reported {
                        age: age.unwrap_or(r.age),
                        ..*r
                    })
                    .collect();
                combine(instance.spec.policy, lifetime, &seen)
            });
            let Some(state) = judged else {
                continue;
            };
            let reason = if from.is_empty() {
                format!("runs in {run_on}; no report from there")
            } else {
                format!("from {run_on}: {}", from.join(", "))
            };
            engine.set_check(&instance.check, state, &reason);
        }
    }

    /// Notes whether this device is a member, and under which id: `false`
    /// when it is none (it judges nothing then). Becoming one (at start,
    /// or by a join under a new id) counts this device's time awake again:
    /// the peers get a full [`DEVICE_SILENT_AFTER`] to reach it.
    fn member_as(&self, id: Option<u64>) -> bool {
        let mut joined = self.joined_as.lock().unwrap_or_else(|e| e.into_inner());
        if id.is_some() && *joined != id {
            self.wakeful.restart();
        }
        *joined = id;
        id.is_some()
    }

    /// This device's own timer: beats every [`BEAT_EVERY`] until `cancel`,
    /// and says when a beat came late enough to be a stall.
    async fn beat(&self, cancel: &CancellationToken) {
        let mut tick = tokio::time::interval(BEAT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = cancel.cancelled() => return,
            }
            if let Some(gap) = self.wakeful.beat() {
                stalled(gap);
            }
        }
    }
}

/// Says that this device did not run for `gap`.
fn stalled(gap: Duration) {
    tracing::warn!(
        "this device did not run for {:.1} s (stopped, frozen or starved of CPU): \
         no peer counts as silent until it has had {} s to report",
        gap.as_secs_f64(),
        DEVICE_SILENT_AFTER.as_secs()
    );
}

/// A datacenter is up when one of its devices (by their `silences`) was
/// heard from within [`DEVICE_SILENT_AFTER`].
fn heard_lately(silences: &[Option<Duration>]) -> bool {
    silences
        .iter()
        .any(|s| s.is_some_and(|s| s <= DEVICE_SILENT_AFTER))
}

/// A verdict from what each peer's silence is (`None`: not known), taken
/// only when it is the same whether or not the time before this device
/// was last `awake` (its own stall, start or join) counts as the peers'
/// silence; `None` when it is not, until fresh reports had their chance.
fn verdict<T: PartialEq>(
    silences: &[Option<Duration>],
    awake: Duration,
    judge: impl Fn(&[Option<Duration>]) -> T,
) -> Option<T> {
    let heard_while_awake: Vec<Option<Duration>> =
        silences.iter().map(|s| s.map(|s| s.min(awake))).collect();
    let judged = judge(silences);
    (judged == judge(&heard_while_awake)).then_some(judged)
}

/// Whether `held` (the last report of a device, as taken in) is the list
/// that `report`'s changes since generation `base` apply to.
/// `held_len` is how many record states are held of it.
fn holds(
    held: &Report,
    held_len: usize,
    report: &Report,
    base: u64,
    changes: &[(usize, RecordStatus)],
) -> bool {
    let Some(now) = report.records_at else {
        return false;
    };
    held.records_at
        == Some(RecordsAt {
            epoch: now.epoch,
            generation: base,
        })
        && changes.iter().all(|(i, _)| *i < held_len)
}

/// Takes a page of `device`'s list in: the whole list once it is the
/// last, else what is held of the list now (none when the page follows no
/// pages held).
fn take_page(
    pending: &mut HashMap<String, Pending>,
    device: &str,
    page: Page,
    records: RecordStates,
) -> Result<RecordStates, Option<Held>> {
    let held = |p: &Pending| Held::Pages {
        from: p.from,
        next: p.records.len(),
    };
    if page.start == 0 {
        pending.insert(
            device.to_string(),
            Pending {
                from: page.from,
                total: page.total,
                records: RecordStates::with_capacity(
                    page.total.min(RESERVED_RECORDS),
                    page.total.saturating_mul(TEXT_BYTES),
                ),
            },
        );
    }
    let Some(list) = pending.get_mut(device) else {
        return Err(None);
    };
    if (list.from, list.total, list.records.len()) != (page.from, page.total, page.start) {
        return Err(Some(held(list)));
    }
    if records.len() > list.total - list.records.len() {
        pending.remove(device);
        return Err(None);
    }
    list.records.append(&records);
    if list.records.len() < list.total {
        return Err(Some(held(list)));
    }
    let mut whole = pending
        .remove(device)
        .map(|p| p.records)
        .unwrap_or_default();
    whole.shrink();
    Ok(whole)
}

/// Sends this device's report to every peer every [`REPORT_EVERY`], and
/// re-judges remote checks and datacenters, until `cancel`; beside it,
/// this device's own timer ([`Peers::beat`]), by which it knows when it
/// was itself stalled.
pub async fn run(
    http: reqwest::Client,
    peers: Arc<Peers>,
    replication: Arc<Replication>,
    engine: Arc<Engine>,
    datacenter: String,
    cancel: CancellationToken,
) {
    let beating = peers.clone();
    tokio::join!(
        beating.beat(&cancel),
        report(http, peers, replication, engine, datacenter, &cancel)
    );
}

/// The reports of [`run`], and the judging after each round.
async fn report(
    http: reqwest::Client,
    peers: Arc<Peers>,
    replication: Arc<Replication>,
    engine: Arc<Engine>,
    datacenter: String,
    cancel: &CancellationToken,
) {
    let mut tick = tokio::time::interval(REPORT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = cancel.cancelled() => return,
        }
        let status = replication.status();
        let secret = replication.secret_value();
        // Pages of a list follow one another until the period is over.
        let until = Instant::now() + REPORT_EVERY;
        let sends = status
            .members
            .iter()
            .filter(|m| m.id != status.id)
            .map(|m| Sender {
                http: &http,
                peers: &peers,
                engine: &engine,
                datacenter: &datacenter,
                secret: &secret,
                peer: m.id,
                name: &m.info.name,
                url: format!(
                    "{}/cluster/v1/report",
                    m.info.api_addr.trim_end_matches('/')
                ),
            })
            .map(|sender| sender.send(until));
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

/// One period's reports to one peer.
struct Sender<'a> {
    http: &'a reqwest::Client,
    peers: &'a Arc<Peers>,
    engine: &'a Arc<Engine>,
    datacenter: &'a str,
    secret: &'a str,
    peer: u64,
    name: &'a str,
    url: String,
}

impl Sender<'_> {
    /// Sends a report, and the next pages while the peer is taking a list
    /// in and `until` has not come.
    async fn send(self, until: Instant) {
        loop {
            let after = self
                .peers
                .sent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&self.peer)
                .copied()
                .unwrap_or(0);
            let holds = self.peers.held_by(self.peer);
            // Built and serialized off the async workers: the statuses are
            // read under the engine's lock, and a page is megabytes.
            let (engine, dc) = (self.engine.clone(), self.datacenter.to_string());
            let Ok(Some((last, paged, body))) =
                tokio::task::spawn_blocking(move || build(&engine, &dc, after, holds)).await
            else {
                return;
            };
            let request = self
                .http
                .post(&self.url)
                .timeout(report_timeout(body.len()))
                .header(SECRET_HEADER, self.secret)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
            let answered = match request.send().await {
                Ok(response) if response.status().is_success() => {
                    self.taken();
                    // A device of an earlier version answers nothing.
                    let answer = response.json::<ReportAnswer>().await.ok();
                    // The peer holds the events it says it does: one that
                    // restarted and holds none gets them again.
                    let through = answer
                        .as_ref()
                        .and_then(|a| a.events_through)
                        .map_or(last, |t| t.min(last));
                    self.peers
                        .sent
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(self.peer, through);
                    Some(match answer {
                        Some(answer) => answer.held.map(PeerHolds::Said),
                        None => Some(PeerHolds::Earlier),
                    })
                }
                Ok(response) => {
                    let status = response.status();
                    let why = response.text().await.unwrap_or_default();
                    self.refused(&format!("{status}: {}", why.trim()));
                    None
                }
                Err(e) => {
                    self.refused(&e.to_string());
                    None
                }
            };
            let holds = answered.flatten();
            {
                let mut held = self.peers.held.lock().unwrap_or_else(|e| e.into_inner());
                match holds {
                    Some(h) => held.insert(self.peer, h),
                    None => held.remove(&self.peer),
                };
            }
            let more = paged && matches!(holds, Some(PeerHolds::Said(Held::Pages { .. })));
            if !more || Instant::now() >= until {
                return;
            }
        }
    }

    /// A report was not taken: said once, until one is again.
    fn refused(&self, why: &str) {
        let first = self
            .peers
            .failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.peer);
        if first {
            tracing::warn!(
                peer = self.name,
                "the report to {} was not taken: {why}",
                self.name
            );
        }
    }

    fn taken(&self) {
        let again = self
            .peers
            .failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.peer);
        if again {
            tracing::info!(peer = self.name, "reports to {} are taken again", self.name);
        }
    }
}

/// A report for a peer that acknowledged events up to `after` and holds
/// `holds` of the record states: the sequence number of its last event,
/// whether it is a page of the list, and its JSON.
fn build(
    engine: &Engine,
    datacenter: &str,
    after: u64,
    holds: Option<PeerHolds>,
) -> Option<(u64, bool, Vec<u8>)> {
    let mut report = Report {
        device: engine.device().to_string(),
        datacenter: datacenter.to_string(),
        version: engine.version(),
        geoip: engine.geoip().description().to_string(),
        geoip_info: engine.geoip().info().cloned(),
        checks: engine.local_checks(datacenter),
        scenarios: engine.scenarios(),
        records: RecordStates::default(),
        events: engine.events_since(after, EVENTS_PER_REPORT),
        records_at: None,
        records_base: None,
        changed: Vec::new(),
        page: None,
    };
    if holds == Some(PeerHolds::Earlier) {
        report.records = RecordStates::new(engine.status());
    } else {
        let held = match holds {
            Some(PeerHolds::Said(held)) => Some(held),
            _ => None,
        };
        match engine.record_changes(held) {
            RecordChanges::Since { at, base, changed } => {
                report.records_at = Some(at);
                report.records_base = Some(base);
                report.changed = changed;
            }
            RecordChanges::Page { page, records } => {
                report.page = Some(page);
                report.records = records;
            }
        }
    }
    let last = report.events.last().map_or(after, |e| e.seq);
    let mut body = Vec::with_capacity(report.records.len() * JSON_BYTES + 4096);
    serde_json::to_writer(&mut body, &report).ok()?;
    Some((last, report.page.is_some(), body))
}
