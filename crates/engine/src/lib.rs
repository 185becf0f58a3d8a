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
pub mod config_preview;
mod diff;
pub mod dnssec;
pub mod dry_run;
mod events;
mod explain;
pub mod health;
mod inputs;
mod install;
mod operator;
mod proving;
pub mod record_changes;
pub mod record_states;
mod records;
mod scenarios;
mod storage;
pub mod store_writer;
mod transitions;
mod views;
mod zone_health;

use std::{
    borrow::Cow,
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    ops::Range,
    sync::{Arc, Mutex, MutexGuard},
};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

pub use answered::{
    AddressHealth, AddressState, NearestAnswered, PlaceAnswered, RuleAnswered, active_texts,
    percents,
};
use answered::{
    answered_by_default, answered_by_nearest, answered_by_place, answered_by_rule,
    answered_states_by_default, reported,
};
pub use diff::diff;
pub use explain::{Explain, ExplainAnswer, ExplainClient, ExplainStep, PossibleAnswer};
pub use health::{CheckStatus, HealthState};
pub use scenarios::{Piece, ScenarioView};
pub use store_writer::{StorageFault, StoreWriter};

use gtm_cluster::Store;
use gtm_dns::{
    handler::DnsState,
    snapshot::{RrsetSlot, Snapshot, label, same_signer, steered_answer, wire_type},
};
use gtm_health::{Instance, threshold::Threshold};
use gtm_model::{
    Compiled, Config, ConfigErrors,
    clock::now_ms,
    compile,
    compile::{
        AddressSpec, Content, DrCondition, Hc, ModeSpec, RecordSpec, Steering, ZoneSpec,
        same_record,
    },
    condition::CheckRef,
    config::RecordType,
    names::{key_name, wire_key},
};
use gtm_resolve as resolve;
use gtm_resolve::{CheckState, Operator, PlaceAnswers, RecordState, Status};
use records::Records;
// The files of this module see each other's items through `super::*`.
pub use gtm_model::severity::Severity;
pub use install::{InstallFailure, NotInstalled, Prepared};
pub use proving::{Proven, servable};
pub use storage::Stored;
pub use views::{
    AddressView, Event, EventKind, Preview, RecordStatus, RecordView, RuleStatus, ScenarioStatus,
};
use {install::*, proving::*, storage::*};

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
    probe_metrics: gtm_model::metrics::ProbeMetrics,
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
    keys: Mutex<gtm_dns::dnssec::keys::Keyring>,
    /// Names this process's record generations ([`record_changes`]): a
    /// restarted device counts them anew.
    records_epoch: u64,
    /// The committed health inputs push and alertmanager checks read.
    inputs: Arc<gtm_health::probe::inputs::Inputs>,
    inputs_seen: inputs::Seen,
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
    operator: Option<gtm_model::operator::OperatorState>,
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
    /// [`gtm_resolve::Evaluation::held`].
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
            on_no_healthy: Default::default(),
            topology: false,
            nearest: false,
            addresses: Box::default(),
            extra: None,
        });
        match &self.spec.content {
            Content::Steered(steering) => steering,
            _ => &NONE,
        }
    }

    /// Whether this is the record `key` names.
    fn is(&self, key: &RecordKey) -> bool {
        self.kind() == key.kind
            && *self.owner() == *key.owner
            && match (self.spec.view(), key.view.as_deref()) {
                (None, None) => true,
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => false,
            }
    }

    /// Adds its state to `states` ([`Steered::status`], without one).
    fn push_status(&self, states: &mut record_states::RecordStates, snapshot: &Snapshot) {
        let (status, decision) = self.shown(snapshot);
        states.push(
            &self.label(),
            Some(status),
            &answered_by_default(self.steering(), &self.answers),
            &decision,
            self.held,
        );
    }

    fn status(&self, snapshot: &Snapshot) -> RecordStatus {
        let (status, decision) = self.shown(snapshot);
        RecordStatus {
            record: self.label(),
            status: Some(status),
            active: answered_by_default(self.steering(), &self.answers),
            decision: decision.into_owned(),
            held: self.held,
        }
    }

    /// Its status and decision as shown: a CNAME's follow its targets. A
    /// CNAME answered with in-zone targets that answer nothing (no such
    /// name, or none of its records answers anything now) leads clients
    /// nowhere: with every target so it is `No healthy records`, with
    /// some `Partially OK (a record is down)`, and the decision names
    /// them. Targets out of the device's zones are not judged.
    fn shown(&self, snapshot: &Snapshot) -> (Status, Cow<'_, str>) {
        let status = self.state.status;
        if self.kind() != RecordType::CNAME
            || matches!(status, Status::FailSafe | Status::NoHealthy)
        {
            return (status, Cow::Borrowed(&*self.decision));
        }
        let Some(resolve::Answer::Addresses(list)) = self.answers.groups.get(self.answers.default)
        else {
            return (status, Cow::Borrowed(&*self.decision));
        };
        let targets: Vec<&str> = list
            .iter()
            .filter_map(|&i| self.steering().addresses.get(i)?.target())
            .collect();
        let dead: Vec<&str> = targets
            .iter()
            .copied()
            .filter(|t| answers_nothing(snapshot, t))
            .collect();
        if dead.is_empty() {
            return (status, Cow::Borrowed(&*self.decision));
        }
        let shown = if dead.len() == targets.len() {
            Status::NoHealthy
        } else if status == Status::Ok {
            Status::PartiallyOkRecordDown
        } else {
            status
        };
        let decision = format!(
            "{}; in-zone target{} {} answer{} nothing",
            self.decision,
            if dead.len() == 1 { "" } else { "s" },
            dead.join(", "),
            if dead.len() == 1 { "s" } else { "" },
        );
        (shown, Cow::Owned(decision))
    }
}

/// Whether `target` (a name as a CNAME writes it) is in one of the
/// snapshot's zones and answers nothing there: no such name, or no record
/// of it answers anything now (a steered one with nothing healthy).
fn answers_nothing(snapshot: &Snapshot, target: &str) -> bool {
    let Ok(mut name) = hickory_server::proto::rr::Name::from_ascii(target) else {
        return false;
    };
    name.set_fqdn(true);
    let key = wire_key(&name);
    if snapshot.zone_at(&key).is_none() {
        return false;
    }
    match snapshot.node(&key) {
        None => true,
        Some(node) => !node.rrsets.iter().any(|slot| {
            slot.answer
                .load()
                .groups
                .iter()
                .any(|g| !g.values.is_empty())
        }),
    }
}

/// A steered record as its label (`www.example.test/A`) names it: its
/// owner in lower-case wire form and its type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RecordKey {
    owner: Box<[u8]>,
    kind: RecordType,
    /// A view's record: its view (docs/views.md).
    view: Option<Box<str>>,
}

impl RecordKey {
    /// The record `label` names; `None` when it names no steerable type or
    /// no name.
    fn of(label: &str) -> Option<Self> {
        let (name, kind) = label.rsplit_once('/')?;
        let (kind, view) = gtm_model::names::type_and_view(kind);
        let view = view.map(Box::from);
        let kind = [
            RecordType::A,
            RecordType::AAAA,
            RecordType::CNAME,
            RecordType::MX,
            RecordType::SRV,
        ]
        .into_iter()
        .find(|k| k.as_str() == kind)?;
        let mut name = hickory_server::proto::rr::Name::from_ascii(name).ok()?;
        name.set_fqdn(true);
        Some(Self {
            owner: wire_key(&name),
            kind,
            view,
        })
    }

    fn of_spec(record: &RecordSpec) -> Self {
        Self {
            owner: record.owner.clone(),
            kind: record.kind,
            view: record.view().map(Box::from),
        }
    }
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
            inputs: Arc::default(),
            inputs_seen: Default::default(),
        };
        let replaced = engine.install(&mut engine.lock(), version, config, compiled, snapshot);
        replaced.retire();
        engine
    }

    /// Probe durations, by check instance.
    pub fn probe_metrics(&self) -> &gtm_model::metrics::ProbeMetrics {
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

    pub fn compiled_check(&self, name: &str) -> Option<gtm_model::compile::CheckSpec> {
        self.lock()
            .compiled
            .checks
            .iter()
            .find(|c| c.name == name)
            .cloned()
    }
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
mod lock_tests {
    use std::time::Duration;

    use super::*;
    use gtm_dns::snapshot::Snapshot;

    /// An install holds the engine lock while it evaluates the records
    /// (seconds for a million). The configuration and its version are read
    /// without it: the tasks that read them run on the async runtime, and
    /// one of them waiting there for an install stalled Raft's heartbeats.
    #[test]
    fn the_configuration_and_version_are_read_while_the_lock_is_held() {
        let state = DnsState::new(Snapshot::default(), gtm_geo::Geo::none(), 1232);
        let config =
            gtm_model::parse("[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n")
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
