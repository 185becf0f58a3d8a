//! The device's answer engine: the applied configuration, the health state,
//! each record's state, and the snapshot the DNS path reads.
//!
//! Every change (a configuration apply, a probe result, an operator action)
//! goes through here under one mutex: decide the check, re-decide the
//! scenarios that read it, re-evaluate the records that depend on either,
//! swap in the answers that changed, log the events. Queries never take
//! that mutex, and no storage I/O happens under it: events and health
//! decisions go to the store-writer thread ([`store_writer`]).

mod answered;
pub mod api_ops;
mod diff;
pub mod dnssec;
pub mod dry_run;
pub mod health;
mod operator;
pub mod record_changes;
pub mod record_states;
mod records;
mod scenarios;
pub mod store_writer;
mod zone_health;

use std::{
    borrow::Cow,
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    ops::Range,
    sync::{Arc, Mutex, MutexGuard},
    time::{SystemTime, UNIX_EPOCH},
};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

pub use answered::PlaceAnswered;
use answered::{answered_by_default, answered_by_place};
pub use diff::diff;
pub use health::{CheckStatus, HealthState};
pub use scenarios::{Piece, ScenarioView};
pub use store_writer::{StorageFault, StoreWriter};

use crate::{
    dns::{
        handler::DnsState,
        snapshot::{
            RrsetSlot, Snapshot, key_name, label, same_signer, steered_answer, wire_key, wire_type,
        },
    },
    health::{Instance, threshold::Threshold},
    model::{
        Compiled, Config, ConfigErrors, compile,
        compile::{
            Content, DrCondition, Hc, ModeSpec, RecordSpec, Steering, ZoneSpec, same_record,
        },
        condition::CheckRef,
        config::RecordType,
    },
    resolve::{self, CheckState, Operator, PlaceAnswers, RecordState, Status},
};
use gtm_cluster::Store;
use records::Records;

/// Why an apply did not happen. Nothing of the configuration was applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Invalid(ConfigErrors),
    #[error("{0}")]
    Store(gtm_cluster::StoreError),
    /// The cluster cannot commit; the message names the devices not heard
    /// from ([`ApplyError::no_quorum`]).
    #[error("{0}")]
    NoQuorum(String),
    /// Handed to a leader that stopped answering: it may still apply.
    #[error(
        "outcome unknown for command {command}: {why}. It may still apply: `gtm command status {command}` shows its fate"
    )]
    Unknown { command: String, why: String },
    /// Refused by the state machine: nothing changed, and nothing will.
    /// Shown as the validation errors when there are some, as before.
    #[error("{}", if .0.errors.is_empty() { .0.message.clone() } else { .0.errors.join("\n") })]
    Rejected(crate::api::ApiError),
    #[error("{0}")]
    Cluster(String),
}

impl ApplyError {
    /// No quorum, with the devices not heard from: none named when every
    /// device answers but the leader could not confirm a quorum in time (a
    /// busy machine, an election under way).
    pub fn no_quorum(unreachable: &[String]) -> Self {
        let why = if unreachable.is_empty() {
            "every device answers, but no quorum confirmed this device's leadership in time \
             (an election may be under way); nothing was applied, and nothing will be. Retry shortly"
                .to_string()
        } else {
            format!(
                "not heard from {}; nothing was applied, and nothing will be. Bring them back, \
                 or run `gtm cluster recover --force-single` on this device if they are lost for good",
                unreachable.join(", ")
            )
        };
        Self::NoQuorum(format!("no quorum: {why}"))
    }
}

/// What an event is about, for filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    Record,
    Check,
    Scenario,
    Operator,
    Config,
    Datacenter,
    /// GeoIP downloads, refusals and swaps.
    Geoip,
    /// The device's own start and stop.
    Device,
}

impl EventKind {
    /// Every kind as the API names it, in the code's order: read from the
    /// type's own schema, so that every list of kinds (CLI help and errors,
    /// the console's filter) names a new kind without an edit.
    pub fn names() -> Vec<String> {
        use serde_json::Value;
        fn collect(v: &Value, out: &mut Vec<String>) {
            let Some(o) = v.as_object() else { return };
            if let Some(Value::String(c)) = o.get("const") {
                out.push(c.clone());
            }
            if let Some(Value::Array(values)) = o.get("enum") {
                out.extend(values.iter().filter_map(|v| v.as_str().map(String::from)));
            }
            for key in ["oneOf", "anyOf"] {
                if let Some(Value::Array(alternatives)) = o.get(key) {
                    alternatives.iter().for_each(|a| collect(a, out));
                }
            }
        }
        let mut out = Vec::new();
        collect(schemars::schema_for!(EventKind).as_value(), &mut out);
        out
    }
}

/// One entry of the GTM Logs.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub device: String,
    pub kind: EventKind,
    /// The record (`www.example.test/A`), check instance or scenario.
    pub object: String,
    pub text: String,
}

/// A record's state as `gtm status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordStatus {
    pub record: String,
    pub status: Option<Status>,
    /// What clients without a place of their own are answered: the
    /// balance's real choice (see `answered`).
    pub active: Vec<String>,
    pub decision: String,
    /// DR stays on only because failback is manual (`record resume` ends
    /// it). Absent from devices of an earlier version.
    #[serde(default)]
    pub held: bool,
}

/// The record preview: what is answered now and why.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Preview {
    pub device: String,
    pub record: String,
    pub mode: String,
    pub status: Option<Status>,
    /// The balance algorithm (`round-robin`, `weighted`, ...).
    #[serde(default)]
    pub balance: String,
    /// What clients without a place of their own are answered: the
    /// balance's real choice (see `answered`).
    pub active: Vec<String>,
    /// Places whose clients are answered otherwise (topology).
    #[serde(default)]
    pub places: Vec<PlaceAnswered>,
    pub decision: String,
    /// Each address with its HC field and whether it is healthy now.
    pub addresses: Vec<AddressView>,
    /// The latest DR and fail-safe switchovers, newest last.
    pub switchovers: Vec<Event>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddressView {
    pub address: String,
    pub dc: Option<String>,
    pub hc: String,
    pub healthy: bool,
    pub drained: bool,
}

/// Scenario decisions as operators see them.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScenarioStatus {
    pub scenario: String,
    pub active: bool,
    pub pending: Option<bool>,
}

/// A device's store with what the engine restores from it. Reading it is
/// the start-up's business: a read that fails is an error, never an empty
/// state (that would restart event numbering over the old events).
#[derive(Debug)]
pub struct Stored {
    store: Store,
    writer: StoreWriter,
    health: Vec<(CheckRef, CheckStatus)>,
    /// Records whose DR was on when the device stopped.
    holds: HashSet<String>,
    next_seq: u64,
}

/// The key prefix, in the health decisions, of a record's DR state: `1`
/// while DR is on. A manual-failback hold survives a restart through it.
const HOLD_PREFIX: &str = "dr-on/";

impl Stored {
    /// Reads the health decisions and the event log's position, and starts
    /// the writer thread; `dir` is the data directory. `on_copy`: `store`
    /// is a copy of the store in `dir`, which is read-only
    /// ([`StoreWriter::start`]).
    pub fn load(
        store: Store,
        dir: &std::path::Path,
        on_copy: bool,
    ) -> Result<Self, gtm_cluster::StoreError> {
        // Events of the log's first layout, before it was indexed by time.
        let migrated = store.migrate_legacy_events(|bytes| {
            serde_json::from_slice::<Event>(bytes).map_or(0, |e| e.time_ms)
        })?;
        if migrated > 0 {
            tracing::info!(events = migrated, "event log moved to the indexed layout");
        }
        let mut health = Vec::new();
        let mut holds = HashSet::new();
        for (key, value) in store.health_decisions()? {
            if let Some(label) = key.strip_prefix(HOLD_PREFIX) {
                if value == b"1" {
                    holds.insert(label.to_string());
                }
                continue;
            }
            // A decision this version cannot read is probed again.
            match (
                parse_ref(&key),
                serde_json::from_slice::<CheckStatus>(&value),
            ) {
                (Some(check), Ok(status)) => health.push((check, status)),
                _ => {
                    tracing::warn!(check = %key, "a stored health decision does not parse; probed again")
                }
            }
        }
        let next_seq = store.last_event_seq()? + 1;
        let writer =
            StoreWriter::start(store.clone(), dir.to_path_buf(), on_copy).map_err(|e| {
                gtm_cluster::StoreError::Corrupt {
                    what: "writer thread",
                    why: e.to_string(),
                }
            })?;
        Ok(Self {
            store,
            writer,
            health,
            holds,
            next_seq,
        })
    }
}

/// The engine's storage: the store for reads, its writer for writes.
#[derive(Debug)]
struct Persist {
    store: Store,
    writer: StoreWriter,
    /// The records whose DR state is stored as on (`1`): a record's state
    /// is written only when it differs from what is stored, where no key
    /// reads as off (a million new records write nothing).
    dr_on: Mutex<HashSet<String>>,
}

/// How many of the newest events a preview looks through for switchovers.
const PREVIEW_TAIL: usize = 5_000;

/// Events kept in memory when the engine has no store (tests).
const MEMORY_EVENTS: usize = 10_000;

/// The answer engine of one device.
#[derive(Debug)]
pub struct Engine {
    device: String,
    dns: DnsState,
    store: Option<Persist>,
    inner: Mutex<Inner>,
    /// The applied configuration (shared with the state machine's parse
    /// of the same text), read without the engine lock: an install holds
    /// that lock while it evaluates the records (seconds for a million),
    /// and the tasks that read the configuration run on the async
    /// runtime, whose few threads Raft's heartbeats need too.
    config: ArcSwap<Config>,
    /// The check instances to probe; the scheduler follows it.
    instances: watch::Sender<Arc<Vec<Instance>>>,
    /// New events, for `logs --follow`.
    events_tx: broadcast::Sender<Event>,
    /// The version of the configuration being served (read without the
    /// engine lock, like `config`).
    version_tx: watch::Sender<u64>,
    probe_metrics: crate::metrics::ProbeMetrics,
    /// Set while the latest committed configuration could not be installed
    /// here (the device serves its last good one): the device is degraded.
    install_failure: Mutex<Option<InstallFailure>>,
    /// Taken for a whole configuration change: building the answers and
    /// writing the store happen outside the engine lock (probe threads take
    /// that one), and no other change slips in between.
    applying: Mutex<()>,
    /// What the last committed configuration's install replaced: freed
    /// once the write that committed it is answered
    /// ([`Engine::retire_replaced`]), or by the next install.
    replaced: Mutex<Option<Replaced>>,
    /// The zones' DNSSEC keys last installed (replicated state).
    keys: Mutex<crate::dnssec::keys::Keyring>,
    /// Names this process's record generations ([`record_changes`]): a
    /// restarted device counts them anew.
    records_epoch: u64,
}

/// A committed configuration this device could not install, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InstallFailure {
    /// The version that failed.
    pub version: u64,
    pub reason: String,
    /// The version still served.
    pub serving: u64,
    pub time_ms: u64,
}

#[derive(Debug)]
struct Inner {
    compiled: Compiled,
    health: HealthState,
    records: Records,
    deps: Deps,
    /// Per compiled zone, what its steered records read of health.
    zone_health: Vec<(Arc<ZoneSpec>, Arc<zone_health::ZoneHealth>)>,
    /// The instances of the configuration, with their thresholds.
    probed: HashMap<CheckRef, (u32, u32)>,
    events: VecDeque<Event>,
    next_seq: u64,
    /// The replicated operator state last installed (`None` until the
    /// first, see [`Engine::set_operator`]).
    operator: Option<crate::operator::OperatorState>,
    /// Records whose DR was on when the device last stopped: the first
    /// install starts them from DR, so a manual-failback hold is kept.
    restored_holds: HashSet<String>,
    /// Counts changes of what [`Engine::status`] shows of the records
    /// ([`record_changes`]).
    records_gen: u64,
    /// The generation of the last install, which replaced the list: a
    /// peer holding an older one is sent the whole list again.
    records_reset: u64,
}

/// Who reads what: for re-evaluating only what a change touches.
#[derive(Debug, Default)]
struct Deps {
    check_scenarios: HashMap<CheckRef, Vec<usize>>,
    check_records: HashMap<CheckRef, Vec<usize>>,
    scenario_records: HashMap<String, Vec<usize>>,
}

/// Per steered record: what it is and where it stands.
#[derive(Debug)]
struct Steered {
    /// The compiled record (owner, type, TTL, steering), shared with the
    /// compiled zone it came from: the engine keeps no copy of its own.
    /// Always a steered one ([`Steered::steering`]).
    spec: Arc<RecordSpec>,
    state: RecordState,
    answers: PlaceAnswers,
    decision: Cow<'static, str>,
    /// [`crate::resolve::Evaluation::held`].
    held: bool,
    /// The records generation at which its status last changed.
    changed: u64,
}

impl Steered {
    /// `www.example.test/A`, made when asked (a million records held a
    /// million of them).
    fn label(&self) -> String {
        label(&key_name(self.owner()), wire_type(self.kind()))
    }

    /// The record's name in its lower-case wire form ([`key_name`] gives
    /// it back as a name).
    fn owner(&self) -> &[u8] {
        &self.spec.owner
    }

    fn kind(&self) -> RecordType {
        self.spec.kind
    }

    fn ttl(&self) -> u32 {
        self.spec.ttl
    }

    /// Its steering. An engine record is made of a steered record only;
    /// were it not, it would steer among no addresses.
    fn steering(&self) -> &Steering {
        static NONE: std::sync::LazyLock<Steering> = std::sync::LazyLock::new(|| Steering {
            mode: ModeSpec::Standalone,
            balance: Default::default(),
            max_answers: 0,
            fail_safe: Box::default(),
            on_no_healthy: Default::default(),
            topology: false,
            addresses: Box::default(),
        });
        match &self.spec.content {
            Content::Steered(steering) => steering,
            _ => &NONE,
        }
    }

    /// Whether this is the record `key` names.
    fn is(&self, key: &RecordKey) -> bool {
        self.kind() == key.kind && *self.owner() == *key.owner
    }

    /// Adds its state to `states` ([`Steered::status`], without one).
    fn push_status(&self, states: &mut record_states::RecordStates) {
        states.push(
            &self.label(),
            Some(self.state.status),
            &answered_by_default(self.steering(), &self.answers),
            &self.decision,
            self.held,
        );
    }

    fn status(&self) -> RecordStatus {
        RecordStatus {
            record: self.label(),
            status: Some(self.state.status),
            active: answered_by_default(self.steering(), &self.answers),
            decision: self.decision.to_string(),
            held: self.held,
        }
    }
}

/// A steered record as its label (`www.example.test/A`) names it: its
/// owner in lower-case wire form and its type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RecordKey {
    owner: Box<[u8]>,
    kind: RecordType,
}

impl RecordKey {
    /// The record `label` names; `None` when it names no steerable type or
    /// no name.
    fn of(label: &str) -> Option<Self> {
        let (name, kind) = label.rsplit_once('/')?;
        let kind = [RecordType::A, RecordType::Aaaa, RecordType::Cname]
            .into_iter()
            .find(|k| k.as_str() == kind)?;
        let mut name = hickory_server::proto::rr::Name::from_ascii(name).ok()?;
        name.set_fqdn(true);
        Some(Self {
            owner: wire_key(&name),
            kind,
        })
    }

    fn of_spec(record: &RecordSpec) -> Self {
        Self {
            owner: record.owner.clone(),
            kind: record.kind,
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Engine {
    /// Starts with a configuration, restoring health decisions and events
    /// from `store` when there is one.
    pub fn new(device: &str, prepared: Prepared, dns: DnsState, store: Option<Stored>) -> Self {
        let Prepared {
            version,
            config,
            compiled,
            snapshot,
        } = prepared;
        let mut health = HealthState::default();

        let mut next_seq = 1;
        let mut restored_holds = HashSet::new();
        let store = store.map(|stored| {
            restored_holds = stored.holds.clone();
            for (check, mut status) in stored.health {
                status.restored = true;
                health
                    .checks
                    .insert(check, (Threshold::restored(status.state), status));
            }
            next_seq = stored.next_seq;
            Persist {
                store: stored.store,
                writer: stored.writer,
                dr_on: Mutex::new(stored.holds),
            }
        });

        let engine = Engine {
            device: device.to_string(),
            dns,
            store,
            inner: Mutex::new(Inner {
                compiled: compile(&Config::default()).expect("the empty configuration is valid"),
                health,
                records: Records::default(),
                deps: Deps::default(),
                zone_health: Vec::new(),
                probed: HashMap::new(),
                events: VecDeque::new(),
                next_seq,
                operator: None,
                restored_holds,
                records_gen: 0,
                records_reset: 0,
            }),
            config: ArcSwap::default(),
            instances: watch::channel(Arc::new(Vec::new())).0,
            events_tx: broadcast::channel(1024).0,
            version_tx: watch::channel(version).0,
            probe_metrics: Default::default(),
            install_failure: Mutex::new(None),
            applying: Mutex::new(()),
            replaced: Mutex::new(None),
            keys: Mutex::new(Default::default()),
            records_epoch: record_changes::new_epoch(),
        };
        let replaced = engine.install(&mut engine.lock(), version, config, compiled, snapshot);
        replaced.retire();
        engine
    }

    /// Probe durations, by check instance.
    pub fn probe_metrics(&self) -> &crate::metrics::ProbeMetrics {
        &self.probe_metrics
    }

    pub fn dns(&self) -> &DnsState {
        &self.dns
    }

    pub fn device(&self) -> &str {
        &self.device
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The check instances to probe, following configuration changes.
    pub fn instances(&self) -> watch::Receiver<Arc<Vec<Instance>>> {
        self.instances.subscribe()
    }

    /// The version of the configuration being served, as it changes.
    pub fn applied_version(&self) -> watch::Receiver<u64> {
        self.version_tx.subscribe()
    }

    /// New events as they are logged.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Event> {
        self.events_tx.subscribe()
    }

    /// Replaces the configuration atomically; records keep their state
    /// across the change when their name and type stay.
    pub fn apply(&self, version: u64, config: Config) -> Result<(), ConfigErrors> {
        let _applying = self.applying.lock().unwrap_or_else(|e| e.into_inner());
        let (compiled, snapshot) = prepare(
            &config,
            version,
            &HashMap::new(),
            &self.dns.snapshot.load(),
            &self.keys(),
        )?;
        let mut inner = self.lock();
        let replaced = self.install(&mut inner, version, Arc::new(config), compiled, snapshot);
        drop(inner);
        replaced.retire();
        Ok(())
    }

    /// Installs a configuration Raft committed, keeping it in the store.
    /// One that does not parse, validate or build here (a bug, another
    /// binary version) is not installed: the device keeps serving its last
    /// good configuration, keeps that one in the store beside the committed
    /// one for restarts, and reports itself degraded until a later
    /// configuration installs.
    /// `config`: its version, its text's parts (as the replicated map
    /// holds them: the store keeps them so, without joining the text) and
    /// per domain the version that last changed it (see
    /// [`crate::machine::zone_versions`]). `parsed`: the text already
    /// parsed (by the state machine), if at hand, and compiled and proven
    /// ([`Proven`]), if that is at hand too; the text is joined to be
    /// parsed only without it.
    pub fn apply_committed(
        &self,
        config: gtm_cluster::KeptConfig<'_>,
        parsed: Option<(Arc<Config>, Option<Proven>)>,
    ) -> Result<(), String> {
        let _applying = self.applying.lock().unwrap_or_else(|e| e.into_inner());
        let version = config.version;
        let zone_versions: HashMap<String, u64> = config.zone_versions.iter().cloned().collect();
        let parsed = match parsed {
            Some(parsed) => Ok(parsed),
            None => {
                let mut text = Vec::new();
                for (_, part) in &config.parts {
                    text.extend_from_slice(part.bytes());
                }
                std::str::from_utf8(&text)
                    .map_err(|e| e.to_string())
                    .and_then(|text| crate::model::parse(text).map_err(|e| e.to_string()))
                    .map(|c| (Arc::new(c), None))
                    .map_err(|e| format!("it does not parse: {e}"))
            }
        };
        let prepared = parsed.and_then(|(parsed, compiled)| {
            let serving = self.dns.snapshot.load();
            prepare_compiled(
                &parsed,
                compiled,
                (version, &zone_versions),
                &serving,
                &self.keys(),
            )
            .map(|p| (parsed, p))
            .map_err(|e| format!("it does not validate here: {}", summary(&e)))
        });
        match prepared {
            Ok((parsed, (compiled, snapshot))) => {
                let mut inner = self.lock();
                let replaced = self.install(&mut inner, version, parsed, compiled, snapshot);
                drop(inner);
                // Freed after the write is answered; one left from before
                // (never retired) goes now.
                let before = self
                    .replaced
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .replace(replaced);
                if let Some(before) = before {
                    before.retire();
                }
                // Kept for restarts once DNS answers it: a restart before
                // has the map to install it from.
                if let Some(Persist { store, .. }) = &self.store
                    && let Err(e) = store.save_config(&config)
                {
                    // Raft keeps it anyway; serve what the cluster decided.
                    tracing::error!(version, error = %e, "cannot keep the committed configuration");
                }
                Ok(())
            }
            Err(reason) => {
                if let Some(Persist { store, .. }) = &self.store
                    && let Err(e) = store.save_uninstalled(&config)
                {
                    tracing::error!(version, error = %e, "cannot keep the committed configuration");
                }
                self.install_failed(version, &reason);
                Err(reason)
            }
        }
    }

    /// Frees what the last install of a committed configuration replaced
    /// (its snapshot and compiled form, unless DNS still reads them) and
    /// gives the memory back: called once the write is answered, so that
    /// freeing a large zone is not part of the write's time.
    pub fn retire_replaced(&self) {
        let replaced = self
            .replaced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(replaced) = replaced {
            replaced.retire();
        }
    }

    /// Logs an event that comes from outside the engine (a configuration
    /// change as the state machine recorded it, an operator action).
    pub fn record_event(&self, kind: EventKind, object: String, text: String) {
        let mut inner = self.lock();
        self.log(&mut inner, kind, object, text);
    }

    /// Marks the device degraded: committed configuration `version` could
    /// not be installed, for `reason`. Logged once per version and reason.
    pub fn install_failed(&self, version: u64, reason: &str) {
        // One line: a parser's message can span several.
        let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
        let reason = reason.as_str();
        let mut inner = self.lock();
        let serving = self.version();
        {
            let mut failure = self
                .install_failure
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if failure
                .as_ref()
                .is_some_and(|f| f.version == version && f.reason == reason)
            {
                return;
            }
            *failure = Some(InstallFailure {
                version,
                reason: reason.to_string(),
                serving,
                time_ms: now_ms(),
            });
        }
        tracing::error!(version, serving, %reason, "a committed configuration cannot be installed on this device");
        self.log(
            &mut inner,
            EventKind::Config,
            format!("version {version}"),
            format!(
                "configuration version {version} cannot be installed on this device, which stays degraded on version {serving}: {reason}"
            ),
        );
    }

    /// The committed configuration this device could not install, while it
    /// serves an older one (the device is degraded).
    pub fn install_failure(&self) -> Option<InstallFailure> {
        self.install_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Installs a prepared configuration. Returns what it replaced, to be
    /// freed once the engine's lock is released.
    #[must_use]
    fn install(
        &self,
        inner: &mut Inner,
        version: u64,
        config: Arc<Config>,
        compiled: Compiled,
        snapshot: Snapshot,
    ) -> Replaced {
        // A record whose steering did not change, in a configuration whose
        // datacenters, checks, scenarios and services did not either, keeps
        // its evaluation and its answer: nothing it depends on moved.
        let same_globals = self.config.load().steers_alike(&config);
        // The text form is only kept for export and diffs: free the old one
        // before the new answers are built (a large configuration is large).
        drop(self.config.swap(config));
        // Check instances: unchanged ones keep their state, others start over.
        let zone_health = zone_health::of_zones(&compiled.zones, &inner.zone_health);
        let instances =
            crate::health::instances(&compiled, zone_health.iter().map(|(_, h)| &h.instances[..]));
        let old_specs: HashMap<String, &crate::model::compile::CheckSpec> = inner
            .compiled
            .checks
            .iter()
            .map(|c| (c.name.clone(), c))
            .collect();
        let keep: HashSet<CheckRef> = instances
            .iter()
            .filter(|i| {
                old_specs
                    .get(&i.check.name)
                    .is_none_or(|old| old.same_check(&i.spec))
            })
            .map(|i| i.check.clone())
            .collect();
        inner.health.checks.retain(|k, _| keep.contains(k));
        inner.health.dc_names = compiled
            .datacenters
            .iter()
            .map(|d| d.name.clone())
            .collect();
        let scenario_names: HashSet<&str> =
            compiled.scenarios.iter().map(|s| s.name.as_str()).collect();
        inner
            .health
            .scenarios
            .retain(|k, _| scenario_names.contains(k.as_str()));
        for s in &compiled.scenarios {
            inner.health.redecide(s);
        }

        let serving = self.dns.snapshot.load();
        let generation = inner.records_gen + 1;
        // The serving snapshot's records, zone by zone: a list is taken
        // whole or in part below, or left for `previous`.
        let mut old: Vec<Option<Vec<Box<Steered>>>> = std::mem::take(&mut inner.records)
            .into_zones()
            .into_iter()
            .map(Some)
            .collect();
        // A record whose slot the new snapshot shares with the serving one
        // keeps its record as it stands: the slot holds its answer already.
        // Those are every record of a zone taken whole, and the records
        // before and after what changed in a zone built from its build
        // before (`Snapshot::build`).
        let mut carried: HashMap<usize, Carried> = HashMap::new();
        let mut between = Vec::new();
        for (zi, data) in snapshot.zones.iter().enumerate() {
            let Some(p) = data
                .kept_from
                .or(data.derived_from)
                .filter(|_| same_globals)
            else {
                continue;
            };
            let Some(before) = serving.zones.get(p) else {
                continue;
            };
            // The records are the serving zone's steered slots, one each; a
            // list that is not is evaluated whole.
            let Some(mut front) = old
                .get_mut(p)
                .and_then(|l| l.take_if(|l| l.len() == before.steered.len()))
            else {
                continue;
            };
            let (same_front, same_back) = before.steered.same_ends(&data.steered, Arc::ptr_eq);
            // `same_ends` keeps the two ends within the list.
            let back = front.split_off(front.len().saturating_sub(same_back));
            between.push(front.split_off(same_front.min(front.len())));
            carried.insert(zi, Carried { front, back });
        }
        let mut previous: HashMap<RecordKey, Box<Steered>> = old
            .into_iter()
            .flatten()
            .chain(between)
            .flatten()
            .map(|r| {
                let key = RecordKey {
                    owner: r.owner().into(),
                    kind: r.kind(),
                };
                (key, r)
            })
            .collect();
        let mut zones = Vec::with_capacity(compiled.zones.len());
        let mut events = Vec::new();
        for (zi, zone) in compiled.zones.iter().enumerate() {
            let Carried { front, back } = carried.remove(&zi).unwrap_or_default();
            let data = snapshot.zones.get(zi);
            let steered = data.map_or(0, |z| z.steered.len());
            // The zone's steered records from `first` to `last` are
            // evaluated here; the others are carried.
            let (first, last) = (front.len(), steered.saturating_sub(back.len()));
            let mut list = front;
            list.reserve_exact(steered - list.len().min(steered));
            // Per evaluated record: what it keeps.
            let mut kept = Vec::new();
            for record in steered_between(zone, first..last, steered) {
                let Content::Steered(steering) = &record.content else {
                    continue;
                };
                let key = RecordKey::of_spec(record);
                let before = match previous.remove(&key) {
                    Some(mut b)
                        if same_globals && b.ttl() == record.ttl && *b.steering() == **steering =>
                    {
                        // The new compiled record, so that the one before is
                        // freed with its configuration.
                        b.spec = record.clone();
                        list.push(b);
                        kept.push(Kept::Answer);
                        continue;
                    }
                    other => other,
                };
                kept.push(Kept::No);
                let label = record.label();
                let prev = before
                    .map(|b| {
                        let displays: Vec<String> =
                            b.steering().addresses.iter().map(|a| a.display()).collect();
                        remap(b.state, &displays, steering)
                    })
                    .or_else(|| held_at_stop(&inner.restored_holds, &label, steering));
                let was_on = prev.as_ref().map(|p| p.dr_on);
                let eval = resolve::evaluate(
                    &label,
                    steering,
                    &compiled.datacenters,
                    &inner.health,
                    prev.as_ref(),
                    Operator::default(),
                );
                events.extend(
                    eval.events
                        .into_iter()
                        .map(|t| (EventKind::Record, label.clone(), t)),
                );
                if was_on != Some(eval.state.dr_on) {
                    self.keep_dr_state(&label, eval.state.dr_on);
                }
                list.push(Box::new(Steered {
                    spec: record.clone(),
                    state: eval.state,
                    answers: eval.answers,
                    decision: eval.decision,
                    held: eval.held,
                    changed: generation,
                }));
            }
            // The snapshot was built (and its static answers proven) before
            // anything changed; the evaluated records' answers come from
            // their evaluation.
            if let Some(data) = data {
                let evaluated = list.get(first..).unwrap_or_default();
                let slots = data.steered.iter().skip(first);
                store_steered(
                    slots.zip(evaluated.iter().map(|r| &**r)).zip(kept),
                    &serving,
                );
            }
            list.extend(back);
            zones.push(list);
        }
        // Only the first configuration installed after a start restores.
        inner.restored_holds.clear();
        // While the list's order stays, peers holding the record states
        // need only what changed (`record_changes`).
        let reordered = snapshot.steered_order() != serving.steered_order();
        drop(serving);
        let snapshot = self.dns.snapshot.swap(Arc::new(snapshot));
        self.dns.rrl.set(compiled.rate_limit.clone());
        self.dns.transfers.set_zones(&compiled);
        inner.deps = deps(&compiled, &zone_health);
        inner.zone_health = zone_health;
        inner.probed = instances
            .iter()
            .map(|i| (i.check.clone(), (i.spec.failures, i.spec.successes)))
            .collect();
        let probed: HashSet<String> = instances.iter().map(|i| i.check.to_string()).collect();
        self.probe_metrics.retain(|check| probed.contains(check));
        if reordered {
            inner.records_reset = generation;
        }
        inner.records = Records::new(zones);
        inner.records_gen = generation;
        let compiled = std::mem::replace(&mut inner.compiled, compiled);
        self.version_tx.send_replace(version);
        self.instances.send_replace(Arc::new(instances));
        for (kind, object, text) in events {
            self.log(inner, kind, object, text);
        }
        let cleared = self
            .install_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_if(|f| f.version <= version);
        if let Some(failed) = cleared {
            self.log(
                inner,
                EventKind::Config,
                format!("version {version}"),
                format!(
                    "configuration version {version} installed: no longer degraded (version {} had failed)",
                    failed.version
                ),
            );
        }
        tracing::info!(
            version,
            records = inner.records.len(),
            "configuration applied"
        );
        Replaced { snapshot, compiled }
    }

    /// One probe result for a check instance: thresholds, then everything
    /// that depends on a transition. Results for instances no longer in the
    /// configuration are ignored.
    pub fn probe_result(&self, check: &CheckRef, ok: bool, reason: String) {
        let mut inner = self.lock();
        // Results of instances the configuration no longer has are dropped.
        let Some(&(failures, successes)) = inner.probed.get(check) else {
            return;
        };
        let entry = inner.health.entry(check);
        let changed = entry.0.record(ok, failures, successes);
        entry.1.reason = reason;
        entry.1.restored = false;
        if let Some(state) = changed {
            self.check_transition(&mut inner, check, state);
        }
    }

    /// Sets a check instance's state directly: manual checks, and tests.
    pub fn set_check(&self, check: &CheckRef, state: CheckState, reason: &str) {
        let mut inner = self.lock();
        operator::set_check_locked(self, &mut inner, check, state, reason);
    }

    fn check_transition(&self, inner: &mut Inner, check: &CheckRef, state: CheckState) {
        let (old_state, reason) = {
            let (_, status) = inner
                .health
                .checks
                .get_mut(check)
                .expect("callers insert the check with health.entry() under this same lock");
            let old = status.state;
            status.state = state;
            status.since_ms = now_ms();
            (old, status.reason.clone())
        };
        let text = format!("check {check}: {old_state} → {state} ({reason})");
        self.log(inner, EventKind::Check, check.to_string(), text);
        // Handed to the writer thread: no storage I/O under the lock.
        if let (Some(p), Some((_, status))) = (&self.store, inner.health.checks.get(check))
            && let Ok(bytes) = serde_json::to_vec(status)
        {
            p.writer.health(check.to_string(), bytes);
        }
        // Scenarios reading the check, then records reading either.
        let mut records: BTreeSet<usize> = inner
            .deps
            .check_records
            .get(check)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let scenarios: Vec<usize> = inner
            .deps
            .check_scenarios
            .get(check)
            .cloned()
            .unwrap_or_default();
        for si in scenarios {
            let spec = inner.compiled.scenarios[si].clone();
            let (last, decision) = inner.health.redecide(&spec);
            // A scenario's first decision matters to the addresses it
            // guards even when it stays passive (they were undecided).
            if decision.active != last.active || decision.decided != last.decided {
                records.extend(
                    inner
                        .deps
                        .scenario_records
                        .get(&spec.name)
                        .into_iter()
                        .flatten()
                        .copied(),
                );
            }
            if decision.active != last.active {
                let text = format!(
                    "scenario {}: {} → {}",
                    spec.name,
                    if last.active { "active" } else { "passive" },
                    if decision.active { "active" } else { "passive" }
                );
                self.log(inner, EventKind::Scenario, spec.name.clone(), text);
            } else if decision.pending.is_some() && decision.pending != last.pending {
                let text = format!(
                    "scenario {}: change waits for its verify condition",
                    spec.name
                );
                self.log(inner, EventKind::Scenario, spec.name.clone(), text);
            }
        }
        self.reevaluate(inner, records, |_| Operator::default());
    }

    fn reevaluate(
        &self,
        inner: &mut Inner,
        which: BTreeSet<usize>,
        operator: impl Fn(&str) -> Operator,
    ) {
        let snapshot = self.dns.snapshot.load();
        let mut events = Vec::new();
        {
            let Inner {
                records,
                compiled,
                health,
                records_gen,
                ..
            } = &mut *inner;
            let generation = *records_gen + 1;
            for i in which {
                let Some(r) = records.get_mut(i) else {
                    continue;
                };
                let label = r.label();
                let eval = resolve::evaluate(
                    &label,
                    r.steering(),
                    &compiled.datacenters,
                    &*health,
                    Some(&r.state),
                    operator(&label),
                );
                let answers_changed = eval.answers != r.answers;
                if answers_changed {
                    if let Some(slot) = snapshot.steered_slot(i) {
                        match steered_answer(
                            &key_name(r.owner()),
                            r.ttl(),
                            r.steering(),
                            &eval.answers,
                            slot.signer.as_deref(),
                        ) {
                            Ok(answer) => slot.answer.store(Arc::new(answer)),
                            Err(e) => {
                                tracing::error!(record = %label, error = %e, "cannot build an answer; the previous one stays")
                            }
                        }
                    }
                    r.answers = eval.answers;
                }
                let old_status = r.state.status;
                let new_status = eval.state.status;
                if answers_changed
                    || old_status != new_status
                    || r.decision != eval.decision
                    || r.held != eval.held
                {
                    r.changed = generation;
                    *records_gen = generation;
                }
                if r.state.dr_on != eval.state.dr_on {
                    self.keep_dr_state(&label, eval.state.dr_on);
                }
                r.state = eval.state;
                r.decision = eval.decision;
                r.held = eval.held;
                events.extend(eval.events.into_iter().map(|t| (label.clone(), t)));
                if old_status != new_status {
                    let old = old_status;
                    let text = format!("{label}: status {old} → {new_status}");
                    events.push((label, text));
                }
            }
        }
        for (label, text) in events {
            self.log(inner, EventKind::Record, label, text);
        }
    }

    /// Keeps whether DR is on for a record with the health decisions (on
    /// the writer thread), so a manual-failback hold survives a restart.
    fn keep_dr_state(&self, label: &str, dr_on: bool) {
        let Some(p) = &self.store else { return };
        let mut stored_on = p.dr_on.lock().unwrap_or_else(|e| e.into_inner());
        let changed = if dr_on {
            stored_on.insert(label.to_string())
        } else {
            stored_on.remove(label)
        };
        if changed {
            let value = if dr_on { b"1".to_vec() } else { b"0".to_vec() };
            p.writer.health(format!("{HOLD_PREFIX}{label}"), value);
        }
    }

    fn log(&self, inner: &mut Inner, kind: EventKind, object: String, text: String) {
        tracing::info!(device = %self.device, "{text}");
        let event = Event {
            seq: inner.next_seq,
            time_ms: now_ms(),
            device: self.device.clone(),
            kind,
            object,
            text,
        };
        inner.next_seq += 1;
        match &self.store {
            // Handed to the writer thread: no storage I/O under the lock.
            Some(p) => {
                if let Ok(bytes) = serde_json::to_vec(&event) {
                    p.writer.event(event.seq, event.time_ms, bytes);
                }
            }
            None => {
                if inner.events.len() == MEMORY_EVENTS {
                    inner.events.pop_front();
                }
                inner.events.push_back(event.clone());
            }
        }
        let _ = self.events_tx.send(event);
    }

    /// The version of the configuration being served.
    pub fn version(&self) -> u64 {
        *self.version_tx.borrow()
    }

    /// The applied configuration (shared, not copied); during an install,
    /// already the one being installed.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Reads the applied configuration in place.
    pub fn with_config<R>(&self, read: impl FnOnce(&Config) -> R) -> R {
        read(&self.config())
    }

    /// What applying `config` would change.
    pub fn changes(&self, config: &Config) -> Vec<String> {
        diff(&self.config(), config)
    }

    pub fn compiled_check(&self, name: &str) -> Option<crate::model::compile::CheckSpec> {
        self.lock()
            .compiled
            .checks
            .iter()
            .find(|c| c.name == name)
            .cloned()
    }

    /// Why this device cannot write its store now, if it cannot.
    pub fn storage_fault(&self) -> Option<StorageFault> {
        self.store.as_ref().and_then(|p| p.writer.fault())
    }

    /// Writes what was logged and releases the store's writer: for a device
    /// that stops (what is logged later is not written).
    pub fn close_storage(&self) {
        if let Some(p) = &self.store {
            p.writer.close();
        }
    }

    /// Turns true once a device that started on a copy of its store can
    /// write its own store again; `None` without a store.
    pub fn storage_reopened(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.store.as_ref().map(|p| p.writer.reopened())
    }

    /// Waits until every event and health decision logged so far is in the
    /// store and flushed (or kept in memory while the store cannot be
    /// written).
    pub fn flush_storage(&self) {
        if let Some(p) = &self.store {
            p.writer.barrier();
        }
    }

    /// The store, once everything logged so far is in it.
    fn store_read(&self) -> Option<&Store> {
        let p = self.store.as_ref()?;
        p.writer.barrier();
        Some(&p.store)
    }

    /// At most `limit` events after `after_seq`, oldest first. Reads the
    /// store (blocking): call it off the async workers.
    pub fn events_since(&self, after_seq: u64, limit: usize) -> Vec<Event> {
        match self.store_read() {
            Some(store) => store
                .events_after(after_seq, limit)
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "cannot read the event log");
                    Vec::new()
                })
                .into_iter()
                .filter_map(|e| serde_json::from_slice(&e.bytes).ok())
                .collect(),
            None => self
                .lock()
                .events
                .iter()
                .filter(|e| e.seq > after_seq)
                .take(limit)
                .cloned()
                .collect(),
        }
    }

    /// The newest `limit` events older than `before_ms` that `keep`
    /// accepts, oldest first, stopping at the first event older than
    /// `since_ms`: reads only what it returns and what `keep` skips on the
    /// way. Reads the store (blocking): call it off the async workers.
    pub fn events_page(
        &self,
        before_ms: Option<u64>,
        since_ms: u64,
        limit: usize,
        keep: impl Fn(&Event) -> bool,
    ) -> Result<Vec<Event>, gtm_cluster::StoreError> {
        let mut page = Vec::new();
        match self.store_read() {
            Some(store) => {
                for stored in store.events_newest_first(before_ms) {
                    let stored = stored?;
                    if page.len() >= limit || stored.time_ms < since_ms {
                        break;
                    }
                    if let Ok(e) = serde_json::from_slice::<Event>(&stored.bytes)
                        && keep(&e)
                    {
                        page.push(e);
                    }
                }
            }
            None => {
                let inner = self.lock();
                let mut newest_first: Vec<&Event> = inner.events.iter().collect();
                newest_first.sort_by_key(|e| std::cmp::Reverse((e.time_ms, e.seq)));
                for e in newest_first {
                    if before_ms.is_some_and(|b| e.time_ms >= b) {
                        continue;
                    }
                    if page.len() >= limit || e.time_ms < since_ms {
                        break;
                    }
                    if keep(e) {
                        page.push(e.clone());
                    }
                }
            }
        }
        page.reverse();
        Ok(page)
    }

    /// The newest events (at most [`MEMORY_EVENTS`]), oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.last_events(MEMORY_EVENTS)
    }

    /// The newest `limit` events by sequence number, oldest first.
    fn last_events(&self, limit: usize) -> Vec<Event> {
        match self.store_read() {
            Some(store) => store
                .last_events(limit)
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "cannot read the event log");
                    Vec::new()
                })
                .into_iter()
                .filter_map(|e| serde_json::from_slice(&e.bytes).ok())
                .collect(),
            None => {
                let inner = self.lock();
                let skip = inner.events.len().saturating_sub(limit);
                inner.events.iter().skip(skip).cloned().collect()
            }
        }
    }

    /// Every steered record with its status and the addresses answered now.
    pub fn status(&self) -> Vec<RecordStatus> {
        self.lock().records.iter().map(|r| r.status()).collect()
    }

    pub fn checks(&self) -> Vec<CheckStatus> {
        let inner = self.lock();
        let instances = self.instances.borrow();
        instances
            .iter()
            .map(|i| {
                inner
                    .health
                    .checks
                    .get(&i.check)
                    .map(|(_, s)| s.clone())
                    .unwrap_or(CheckStatus {
                        check: i.check.to_string(),
                        state: CheckState::Preparing,
                        reason: "no result yet".into(),
                        since_ms: 0,
                        restored: false,
                    })
            })
            .collect()
    }

    /// The check instances this device probes itself: not those that
    /// `run_on` another datacenter.
    pub fn local_checks(&self, datacenter: &str) -> Vec<CheckStatus> {
        let local: HashSet<String> = self
            .instances
            .borrow()
            .iter()
            .filter(|i| {
                i.spec
                    .raw
                    .run_on
                    .as_deref()
                    .is_none_or(|dc| dc == "all" || dc == datacenter)
            })
            .map(|i| i.check.to_string())
            .collect();
        self.checks()
            .into_iter()
            .filter(|c| local.contains(&c.check))
            .collect()
    }

    /// The check instances that run in another datacenter, to be judged
    /// from its devices' reports.
    pub fn remote_instances(&self, datacenter: &str) -> Vec<Instance> {
        self.instances
            .borrow()
            .iter()
            .filter(|i| {
                i.spec
                    .raw
                    .run_on
                    .as_deref()
                    .is_some_and(|dc| dc != "all" && dc != datacenter)
            })
            .cloned()
            .collect()
    }

    /// Marks a datacenter up or down (no device there reported recently).
    /// An event, and the records are re-evaluated; addresses keep the health
    /// of their HC field (a `static` address stays a candidate), while the
    /// checks that run there go No Data.
    pub fn set_datacenter_up(&self, dc: &str, up: bool, why: &str) {
        let mut inner = self.lock();
        let changed = if up {
            inner.health.dcs_down.remove(dc)
        } else {
            inner.health.dcs_down.insert(dc.to_string())
        };
        if !changed {
            return;
        }
        let text = format!(
            "datacenter {dc} is {} ({why})",
            if up { "up" } else { "down" }
        );
        self.log(&mut inner, EventKind::Datacenter, dc.to_string(), text);
        let all = (0..inner.records.len()).collect();
        self.reevaluate(&mut inner, all, |_| Operator::default());
    }

    pub fn scenarios(&self) -> Vec<ScenarioStatus> {
        let inner = self.lock();
        inner
            .compiled
            .scenarios
            .iter()
            .map(|s| {
                let d = inner
                    .health
                    .scenarios
                    .get(&s.name)
                    .copied()
                    .unwrap_or_default();
                ScenarioStatus {
                    scenario: s.name.clone(),
                    active: d.active,
                    pending: d.pending,
                }
            })
            .collect()
    }

    /// The preview of one record (`www.example.test/A`).
    pub fn preview(&self, label: &str) -> Option<Preview> {
        let (preview, _) = {
            let inner = self.lock();
            let key = RecordKey::of(label)?;
            let r = inner.records.iter().find(|r| r.is(&key))?;
            let dcs = &inner.compiled.datacenters;
            let state = Some(&r.state);
            let addresses = r
                .steering()
                .addresses
                .iter()
                .enumerate()
                .map(|(i, a)| AddressView {
                    address: a.display(),
                    dc: a.dc().map(|d| dcs[d].name.clone()),
                    hc: match &a.hc {
                        Hc::Static => "static".into(),
                        Hc::Disabled => "disabled".into(),
                        Hc::Scenario(s) => format!("scenario:{s}"),
                        Hc::Check(c) => format!("check:{c}"),
                    },
                    healthy: state.is_some_and(|s| s.healthy.get(i).copied().unwrap_or(false)),
                    drained: resolve::HealthView::drained(&inner.health, label, a),
                })
                .collect();
            let mode = match &r.steering().mode {
                ModeSpec::Standalone => "standalone".to_string(),
                ModeSpec::DisasterRecovery(spec) => format!(
                    "disaster-recovery (main {}, dr {}, condition {})",
                    dcs[spec.main].name,
                    dcs[spec.dr].name,
                    match &spec.condition {
                        DrCondition::Automatic => "automatic".to_string(),
                        DrCondition::Scenario(s) => format!("scenario:{s}"),
                    }
                ),
                ModeSpec::Datacenter { count, .. } => format!("datacenter (select {count})"),
            };
            (
                Preview {
                    device: self.device.clone(),
                    record: label.to_string(),
                    mode,
                    status: state.map(|s| s.status),
                    balance: r.steering().balance.as_str().to_string(),
                    active: answered_by_default(r.steering(), &r.answers),
                    places: answered_by_place(r.steering(), &r.answers),
                    decision: r.decision.to_string(),
                    addresses,
                    switchovers: Vec::new(),
                },
                (),
            )
        };
        let switch_texts = [
            ": DR is on",
            ": DR ended",
            ": Fail-safe records are on",
            ": No healthy records left",
        ];
        // The latest switchovers among a bounded tail of the log, not the
        // whole log: this runs on every preview.
        let mut switchovers: Vec<Event> = self
            .last_events(PREVIEW_TAIL)
            .into_iter()
            .filter(|e| e.object == label && switch_texts.iter().any(|t| e.text.ends_with(t)))
            .collect();
        let keep = switchovers.len().saturating_sub(10);
        switchovers.drain(..keep);
        Some(Preview {
            switchovers,
            ..preview
        })
    }
}

/// A configuration proven servable: validated, with its answers built. What
/// a device needs before it starts serving a configuration.
#[derive(Debug)]
pub struct Prepared {
    version: u64,
    config: Arc<Config>,
    compiled: Compiled,
    snapshot: Snapshot,
}

impl Prepared {
    /// Validates `config`, configuration `version`, and builds its answers
    /// (reusing what `dns` serves now where it can).
    /// `zone_versions`: as [`Engine::apply_committed`] takes them.
    pub fn new(
        version: u64,
        zone_versions: &HashMap<String, u64>,
        config: Config,
        dns: &DnsState,
    ) -> Result<Self, ConfigErrors> {
        // Unsigned: the keys come with the replicated state, just after.
        let (compiled, snapshot) = prepare(
            &config,
            version,
            zone_versions,
            &dns.snapshot.load(),
            &Default::default(),
        )?;
        Ok(Self {
            version,
            config: Arc::new(config),
            compiled,
            snapshot,
        })
    }
}

/// A configuration the state machine compiled and proved servable
/// ([`servable`]), for the engine to install without doing either again.
#[derive(Debug)]
pub struct Proven {
    pub compiled: Compiled,
    /// The answers the proof built: a zone built whole there (a new
    /// domain, or one most of whose records changed) is taken from it by
    /// the install's build rather than built a second time
    /// (`Snapshot::build`).
    proof: Snapshot,
}

/// Proves that `config` can be served: validates it and builds the
/// answers of every domain that is not in `proven` exactly as it is there
/// (the committed configuration: its domains were proven when they were
/// committed), and returns the compiled form with those answers. What the
/// state machine checks before a configuration is committed.
/// `proven_zones`: the compiled zones of `proven`, when at hand: an
/// unchanged domain's zone is taken as it is, and of a changed one only
/// the records that are new or changed are built (each record's answer
/// is built on its own), or all of them when those are most.
pub fn servable(
    config: &Config,
    proven: &Config,
    proven_zones: Option<&[Arc<ZoneSpec>]>,
) -> Result<Proven, ConfigErrors> {
    let proven_zones = proven_zones.filter(|z| z.len() == proven.domains.len());
    let before = proven_zones.map(|zones| (proven, zones));
    let mut compiled = crate::model::compile::compile_from(config, before)?;
    // Per proven domain: the domain, and its zone when at hand.
    let proven: HashMap<&str, (&Arc<crate::model::config::Domain>, Option<&Arc<ZoneSpec>>)> =
        proven
            .domains
            .iter()
            .enumerate()
            .map(|(i, d)| (d.name.as_str(), (d, proven_zones.and_then(|z| z.get(i)))))
            .collect();
    // One zone per domain, in order, when the configuration compiles.
    let aligned = compiled.zones.len() == config.domains.len();
    let zones = std::mem::take(&mut compiled.zones);
    let mut proof = compiled.clone();
    proof.zones = zones
        .iter()
        .zip(&config.domains)
        .filter_map(|(zone, domain)| match proven.get(domain.name.as_str()) {
            Some((_, Some(before))) if aligned && Arc::ptr_eq(zone, before) => None,
            Some((before, _)) if aligned && *before == domain => None,
            // Only its records that are new or changed; all of them when
            // that is most: the install then builds the zone whole, and
            // takes the proof's build of it (`Snapshot::build`).
            Some((_, Some(before))) if aligned => {
                let changed = changed_records(zone, before);
                match changed.records.len() * 2 > zone.records.len() {
                    true => Some(zone.clone()),
                    false => Some(Arc::new(changed)),
                }
            }
            _ => Some(zone.clone()),
        })
        .collect();
    compiled.zones = zones;
    // The version only sets SOA serials, which are always valid.
    let proof =
        Snapshot::build(&proof, &Snapshot::default(), None, &[], &[]).map_err(build_error)?;
    Ok(Proven { compiled, proof })
}

/// `zone` with only its records that `before` does not have as they are:
/// of those between the records both have alike from their start and
/// from their end (what a write left, compared in place), the ones
/// `before` does not have between its own.
fn changed_records(zone: &ZoneSpec, before: &ZoneSpec) -> ZoneSpec {
    let (start, end) = crate::ends::same_ends(&zone.records, &before.records, same_record);
    let old: HashMap<(&[u8], RecordType), &Arc<RecordSpec>> = before.records
        [start..before.records.len() - end]
        .iter()
        .map(|r| ((&*r.owner, r.kind), r))
        .collect();
    zone.with_records(
        zone.records[start..zone.records.len() - end]
            .iter()
            .filter(|r| {
                old.get(&(&*r.owner, r.kind))
                    .is_none_or(|o| !same_record(o, r))
            })
            .cloned()
            .collect(),
    )
}

fn build_error(e: crate::dns::snapshot::BuildError) -> ConfigErrors {
    ConfigErrors::from(crate::model::compile::ConfigError {
        path: format!("record {}", e.record),
        message: format!("cannot be served: {}", e.message),
    })
}

/// Validates a configuration and builds its answers: everything that can
/// fail about installing it, done before anything is kept or changed. A
/// zone's SOA serial follows the version that last changed it in
/// `zone_versions`, else `version` (see [`ZoneSpec::serial_at`]).
///
/// [`ZoneSpec::serial_at`]: crate::model::compile::ZoneSpec::serial_at
fn prepare(
    config: &Config,
    version: u64,
    zone_versions: &HashMap<String, u64>,
    previous: &Snapshot,
    keys: &crate::dnssec::keys::Keyring,
) -> Result<(Compiled, Snapshot), ConfigErrors> {
    prepare_compiled(config, None, (version, zone_versions), previous, keys)
}

/// [`prepare`], given `config` compiled and proven already (by the state
/// machine) when it is.
fn prepare_compiled(
    config: &Config,
    proven: Option<Proven>,
    (version, zone_versions): (u64, &HashMap<String, u64>),
    previous: &Snapshot,
    keys: &crate::dnssec::keys::Keyring,
) -> Result<(Compiled, Snapshot), ConfigErrors> {
    let (compiled, proof) = match proven {
        Some(Proven { compiled, proof }) => (compiled, Some(proof)),
        None => (compile(config)?, None),
    };
    // A zone with secondaries has a serial of its own (docs/transfer.md).
    let transferred = compiled
        .zones
        .iter()
        .any(|z| !z.secondaries.is_empty())
        .then(crate::dns::xfr::next_serial);
    let serials: Vec<u32> = compiled
        .zones
        .iter()
        .map(
            |zone| match transferred.filter(|_| !zone.secondaries.is_empty()) {
                Some(serial) => serial,
                None => zone.serial_at(zone_versions.get(&zone.key()).copied().unwrap_or(version)),
            },
        )
        .collect();
    let signers = crate::dnssec::worker::signers(&compiled, keys, now_ms() / 1000);
    let snapshot =
        Snapshot::build(&compiled, previous, proof, &signers, &serials).map_err(build_error)?;
    Ok((compiled, snapshot))
}

/// What a steered record keeps from the answers served when a new
/// snapshot is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// Its answer, when the served one was made with the same signer.
    Answer,
    /// Nothing: its answer is built from its evaluation.
    No,
}

/// The records of a zone that keep their slots ([`Engine::install`]): those
/// before what changed, and those after it.
#[derive(Default)]
#[expect(
    clippy::vec_box,
    reason = "the records move between lists as they are held: boxed, a move is a pointer's"
)]
struct Carried {
    front: Vec<Box<Steered>>,
    back: Vec<Box<Steered>>,
}

/// Puts steered records' answers (signed when their zone is) into the
/// slots of a snapshot not served yet, each slot with its record and what
/// the record keeps from `serving`; a record whose answer cannot be built
/// answers empty.
fn store_steered<'a>(
    records: impl Iterator<Item = ((&'a Arc<RrsetSlot>, &'a Steered), Kept)>,
    serving: &Snapshot,
) {
    for ((slot, r), kept) in records {
        let before = (kept == Kept::Answer)
            .then(|| serving.slot_at(r.owner(), slot.rtype))
            .flatten()
            .filter(|before| same_signer(&before.signer, &slot.signer));
        if let Some(before) = before {
            slot.answer.store(before.answer.load_full());
            continue;
        }
        match steered_answer(
            &key_name(r.owner()),
            r.ttl(),
            r.steering(),
            &r.answers,
            slot.signer.as_deref(),
        ) {
            Ok(answer) => slot.answer.store(Arc::new(answer)),
            Err(e) => {
                tracing::error!(record = %r.label(), error = %e, "cannot build an answer; it answers empty")
            }
        }
    }
}

/// The steered records of `zone` whose index among its `steered` ones
/// lies in `range`, in order, read from the end of its records nearer to
/// the range (a write near the end of a large zone reads a few).
fn steered_between(zone: &ZoneSpec, range: Range<usize>, steered: usize) -> Vec<&Arc<RecordSpec>> {
    if range.is_empty() {
        return Vec::new();
    }
    let is_steered = |r: &&Arc<RecordSpec>| matches!(r.content, Content::Steered(_));
    let after = steered.saturating_sub(range.end);
    if range.start <= after {
        return zone
            .records
            .iter()
            .filter(is_steered)
            .skip(range.start)
            .take(range.len())
            .collect();
    }
    let mut list: Vec<&Arc<RecordSpec>> = zone
        .records
        .iter()
        .rev()
        .filter(is_steered)
        .skip(after)
        .take(range.len())
        .collect();
    list.reverse();
    list
}

/// The state a record held by manual failback when the device stopped
/// starts from: DR on, so the hold goes on until an operator resumes it.
/// `None` for any other record (it starts fresh).
fn held_at_stop(holds: &HashSet<String>, label: &str, steering: &Steering) -> Option<RecordState> {
    let manual = matches!(
        &steering.mode,
        ModeSpec::DisasterRecovery(spec) if spec.failback == crate::model::config::Failback::Manual
    );
    (manual && holds.contains(label)).then(|| RecordState {
        healthy: vec![true; steering.addresses.len()].into(),
        dr_on: true,
        status: Status::Dr,
        active: Box::default(),
    })
}

/// The first errors of a configuration, on one line, for an event.
fn summary(errors: &ConfigErrors) -> String {
    const SHOWN: usize = 3;
    let mut text = errors
        .listed
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if errors.total() > SHOWN {
        text.push_str(&format!(" (and {} more)", errors.total() - SHOWN));
    }
    text
}

/// `web@192.0.2.10` or `web` back into a check reference.
pub fn parse_ref(text: &str) -> Option<CheckRef> {
    match text.split_once('@') {
        Some((name, addr)) => Some(CheckRef {
            name: name.to_string(),
            address: Some(addr.parse().ok()?),
        }),
        None => Some(CheckRef {
            name: text.to_string(),
            address: None,
        }),
    }
}

fn deps(compiled: &Compiled, zones: &[(Arc<ZoneSpec>, Arc<zone_health::ZoneHealth>)]) -> Deps {
    let mut d = Deps::default();
    for (si, s) in compiled.scenarios.iter().enumerate() {
        for r in s
            .condition
            .refs()
            .into_iter()
            .chain(s.verify.iter().flat_map(|v| v.refs()))
        {
            let list = d.check_scenarios.entry(r.clone()).or_default();
            if !list.contains(&si) {
                list.push(si);
            }
        }
    }
    // The engine's records are the zones' steered records, zone by zone.
    let mut first = 0;
    for (_, zone) in zones {
        for (check, i) in &zone.checks {
            d.check_records
                .entry(check.clone())
                .or_default()
                .push(first + i);
        }
        for (scenario, i) in &zone.scenarios {
            d.scenario_records
                .entry(scenario.to_string())
                .or_default()
                .push(first + i);
        }
        first += zone.steered;
    }
    d
}

/// Carries a record's state across a configuration change: per-address
/// decisions follow the address, not its position in the list.
fn remap(state: RecordState, old: &[String], steering: &Steering) -> RecordState {
    let new: Vec<String> = steering.addresses.iter().map(|a| a.display()).collect();
    let index_of = |display: &str| old.iter().position(|d| d == display);
    let new_index = |i: usize| new.iter().position(|d| *d == old[i]);
    RecordState {
        healthy: new
            .iter()
            .map(|d| index_of(d).is_some_and(|i| state.healthy[i]))
            .collect(),
        active: state.active.iter().filter_map(|&i| new_index(i)).collect(),
        dr_on: state.dr_on,
        status: state.status,
    }
}

/// The answers and compiled form a configuration change replaced: large,
/// so freed outside the engine's lock, after DNS serves the new ones.
#[derive(Debug)]
struct Replaced {
    snapshot: Arc<Snapshot>,
    compiled: Compiled,
}

impl Replaced {
    /// Frees them (unless DNS still reads the snapshot) and gives the
    /// memory back.
    fn retire(self) {
        let Replaced { snapshot, compiled } = self;
        drop(snapshot);
        drop(compiled);
        release_freed_memory();
    }
}

/// Hands memory freed by a configuration swap back to the system. The
/// binary allocates with mimalloc (src/main.rs), which keeps freed pages a
/// while for reuse: after a swap, the previous configuration's are not
/// needed again soon (docs/decisions.md, "Allocator").
fn release_freed_memory() {
    // SAFETY: mi_collect only returns memory mimalloc holds unused; with
    // another global allocator (the tests') it has nothing to collect.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

#[cfg(test)]
mod size_tests {
    /// The engine holds one record per steered record: it stays in
    /// mimalloc's 128-byte class (it took 224 bytes, then 160,
    /// docs/performance.md), with no text of its own (its label is made
    /// when asked) and no copy of its compiled record's owner, TTL or
    /// steering (it holds the compiled record).
    #[test]
    fn an_engine_record_fits_128_bytes() {
        assert!(std::mem::size_of::<super::Steered>() <= 128);
    }
}

#[cfg(test)]
mod retire_tests {
    use super::*;
    use crate::dns::snapshot::Snapshot;

    const TEXT: &str = "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.1\" }]\n";

    /// What an install of a committed configuration replaced is kept until
    /// the write is answered (`retire_replaced`), and no longer.
    #[test]
    fn a_replaced_snapshot_is_freed_when_retired() {
        let state = DnsState::new(Snapshot::default(), crate::geo::Geo::none(), 1232);
        let prepared = Prepared::new(1, &Default::default(), Config::default(), &state).unwrap();
        let engine = Engine::new("gtm1", prepared, state, None);
        let first = Arc::downgrade(&engine.dns().snapshot.load_full());
        let kept = gtm_cluster::KeptConfig {
            version: 2,
            parts: gtm_cluster::parts::named(TEXT.as_bytes()),
            zone_versions: Vec::new(),
        };
        engine.apply_committed(kept, None).unwrap();
        assert!(
            first.upgrade().is_some(),
            "kept until the write is answered"
        );
        engine.retire_replaced();
        assert!(first.upgrade().is_none(), "freed once retired");
        // A second install frees what the first replaced if nobody did.
        let second = Arc::downgrade(&engine.dns().snapshot.load_full());
        let changed = TEXT.replace("192.0.2.1", "192.0.2.2");
        let kept = gtm_cluster::KeptConfig {
            version: 3,
            parts: gtm_cluster::parts::named(changed.as_bytes()),
            zone_versions: Vec::new(),
        };
        engine.apply_committed(kept.clone(), None).unwrap();
        engine
            .apply_committed(gtm_cluster::KeptConfig { version: 4, ..kept }, None)
            .unwrap();
        assert!(second.upgrade().is_none());
    }
}

#[cfg(test)]
mod servable_tests {
    use super::*;

    fn domain(records: &[(&str, &str)]) -> Config {
        let records: String = records
            .iter()
            .map(|(name, value)| {
                format!("\n[[domain.record]]\nname = \"{name}\"\ntype = \"TXT\"\nvalues = [\"{value}\"]\n")
            })
            .collect();
        crate::model::parse(&format!(
            "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n{records}"
        ))
        .unwrap()
    }

    #[test]
    fn a_changed_domain_is_proven_for_its_new_and_changed_records_only() {
        let before = compile(&domain(&[("www", "1"), ("api", "1"), ("old", "1")])).unwrap();
        let after = compile(&domain(&[("new", "1"), ("www", "1"), ("api", "2")])).unwrap();
        let proof = changed_records(&after.zones[0], &before.zones[0]);
        let names: Vec<String> = proof.records.iter().map(|r| r.label()).collect();
        assert_eq!(names, ["new.a.test/TXT", "api.a.test/TXT"]);
        assert_eq!(proof.apex, after.zones[0].apex);

        // servable takes the compiled zones of what it proved before.
        let proven = domain(&[("www", "1")]);
        let zones = compile(&proven).unwrap().zones;
        let next = servable(&domain(&[("www", "2")]), &proven, Some(&zones)).unwrap();
        assert_eq!(next.compiled.zones[0].records.len(), 1);

        // One record of three changed: proven alone. Two of three: the
        // zone is proven whole, from the very spec the install builds,
        // which takes the proof's build of it.
        let proven = domain(&[("www", "1"), ("api", "1"), ("old", "1")]);
        let zones = compile(&proven).unwrap().zones;
        let one = domain(&[("www", "1"), ("api", "2"), ("old", "1")]);
        let next = servable(&one, &proven, Some(&zones)).unwrap();
        assert_eq!(next.proof.zones[0].spec.records.len(), 1);
        let two = domain(&[("www", "2"), ("api", "2"), ("old", "1")]);
        let next = servable(&two, &proven, Some(&zones)).unwrap();
        assert!(Arc::ptr_eq(
            &next.proof.zones[0].spec,
            &next.compiled.zones[0]
        ));
    }
}

#[cfg(test)]
mod lock_tests {
    use std::time::Duration;

    use super::*;
    use crate::dns::snapshot::Snapshot;

    /// An install holds the engine lock while it evaluates the records
    /// (seconds for a million). The configuration and its version are read
    /// without it: the tasks that read them run on the async runtime, and
    /// one of them waiting there for an install stalled Raft's heartbeats.
    #[test]
    fn the_configuration_and_version_are_read_while_the_lock_is_held() {
        let state = DnsState::new(Snapshot::default(), crate::geo::Geo::none(), 1232);
        let config =
            crate::model::parse("[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n")
                .unwrap();
        let prepared = Prepared::new(7, &Default::default(), config, &state).unwrap();
        let engine = Arc::new(Engine::new("gtm1", prepared, state, None));
        let held = engine.lock();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = engine.clone();
        std::thread::spawn(move || {
            let _ = tx.send((reader.version(), reader.config().domains.len()));
        });
        let read = rx.recv_timeout(Duration::from_secs(60));
        drop(held);
        assert_eq!(read, Ok((7, 1)), "read while the lock was held");
    }
}
