//! Installing a configuration: the committed one applied to the engine's
//! records, health state and snapshot, the records carried from the one
//! before, and what a failed install leaves.

use super::*;
use gtm_dns::snapshot::ZoneData;

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

/// A configuration proven servable: validated, with its answers built. What
/// a device needs before it starts serving a configuration.
#[derive(Debug)]
pub struct Prepared {
    pub(super) version: u64,
    pub(super) config: Arc<Config>,
    pub(super) compiled: Compiled,
    pub(super) snapshot: Snapshot,
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

/// Validates a configuration and builds its answers: everything that can
/// fail about installing it, done before anything is kept or changed. A
/// zone's SOA serial follows the version that last changed it in
/// `zone_versions`, else `version` (see [`ZoneSpec::serial_at`]).
///
/// [`ZoneSpec::serial_at`]: gtm_model::compile::ZoneSpec::serial_at
pub(super) fn prepare(
    config: &Config,
    version: u64,
    zone_versions: &HashMap<String, u64>,
    previous: &Snapshot,
    keys: &gtm_dns::dnssec::keys::Keyring,
) -> Result<(Compiled, Snapshot), ConfigErrors> {
    prepare_compiled(config, None, (version, zone_versions), previous, keys)
}

/// [`prepare`], given `config` compiled and proven already (by the state
/// machine) when it is.
pub(super) fn prepare_compiled(
    config: &Config,
    proven: Option<Proven>,
    (version, zone_versions): (u64, &HashMap<String, u64>),
    previous: &Snapshot,
    keys: &gtm_dns::dnssec::keys::Keyring,
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
        .then(gtm_dns::xfr::next_serial);
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
    let signers = gtm_dns::dnssec::signer::signers(&compiled, keys, now_ms() / 1000);
    let snapshot =
        Snapshot::build(&compiled, previous, proof, &signers, &serials).map_err(build_error)?;
    Ok((compiled, snapshot))
}

/// What a steered record keeps from the answers served when a new
/// snapshot is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kept {
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
pub(super) struct Carried {
    pub(super) front: Vec<Box<Steered>>,
    pub(super) back: Vec<Box<Steered>>,
}

/// Puts steered records' answers (signed when their zone is) into the
/// slots of a snapshot not served yet, each slot with its record and what
/// the record keeps from `serving`; a record whose answer cannot be built
/// answers empty.
pub(super) fn store_steered<'a>(
    records: impl Iterator<Item = ((&'a Arc<RrsetSlot>, &'a Steered), Kept)>,
    serving: &Snapshot,
) {
    for ((slot, r), kept) in records {
        let before = (kept == Kept::Answer)
            .then(|| serving.own_slot(r.owner(), slot.rtype, r.spec.view()))
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
pub(super) fn steered_between(
    zone: &ZoneSpec,
    range: Range<usize>,
    steered: usize,
) -> Vec<&Arc<RecordSpec>> {
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
pub(super) fn held_at_stop(
    holds: &HashSet<String>,
    label: &str,
    steering: &Steering,
) -> Option<RecordState> {
    let manual = matches!(
        &steering.mode,
        ModeSpec::DisasterRecovery(spec) if spec.failback == gtm_model::config::Failback::Manual
    );
    let ModeSpec::DisasterRecovery(spec) = &steering.mode else {
        return None;
    };
    // What the hold answered at the stop: the DR DC's addresses (the
    // first evaluation logs only what differs from them).
    let dr = |a: &gtm_model::compile::AddressSpec| {
        a.dc() == Some(spec.dr) && a.hc != gtm_model::compile::Hc::Disabled
    };
    (manual && holds.contains(label)).then(|| RecordState {
        healthy: vec![true; steering.addresses.len()].into(),
        dr_on: true,
        status: Status::Dr,
        active: (0..steering.addresses.len())
            .filter(|&i| dr(&steering.addresses[i]))
            .collect(),
    })
}

/// The first errors of a configuration, on one line, for an event.
/// Why a committed configuration was not installed on this device.
#[derive(Debug, thiserror::Error)]
pub enum NotInstalled {
    #[error("it does not parse: {0}")]
    NotText(#[source] std::str::Utf8Error),
    #[error("it does not parse: {0}")]
    Parse(#[source] ConfigErrors),
    #[error("it does not validate here: {}", summary(.0))]
    Invalid(ConfigErrors),
}

pub(super) fn summary(errors: &ConfigErrors) -> String {
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

pub(super) fn deps(
    compiled: &Compiled,
    zones: &[(Arc<ZoneSpec>, Arc<zone_health::ZoneHealth>)],
) -> Deps {
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
pub(super) fn remap(state: RecordState, old: &[String], steering: &Steering) -> RecordState {
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
pub(super) struct Replaced {
    pub(super) snapshot: Arc<Snapshot>,
    pub(super) compiled: Compiled,
}

impl Replaced {
    /// Frees them (unless DNS still reads the snapshot) and gives the
    /// memory back.
    pub(super) fn retire(self) {
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
pub(super) fn release_freed_memory() {
    // SAFETY: mi_collect only returns memory mimalloc holds unused; with
    // another global allocator (the tests') it has nothing to collect.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

impl Engine {
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
    /// `gtm_node::machine::zone_versions`). `parsed`: the text already
    /// parsed (by the state machine), if at hand, and compiled and proven
    /// ([`Proven`]), if that is at hand too; the text is joined to be
    /// parsed only without it.
    pub fn apply_committed(
        &self,
        config: gtm_cluster::KeptConfig<'_>,
        parsed: Option<(Arc<Config>, Option<Proven>)>,
    ) -> Result<(), NotInstalled> {
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
                    .map_err(NotInstalled::NotText)
                    .and_then(|text| gtm_model::parse(text).map_err(NotInstalled::Parse))
                    .map(|c| (Arc::new(c), None))
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
            .map_err(NotInstalled::Invalid)
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
                self.install_failed(version, &reason.to_string());
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
            Severity::Error,
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
    pub(super) fn install(
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
        let (zone_health, instances) = keep_health(inner, &compiled);
        let serving = self.dns.snapshot.load();
        let (mut carried, previous) = carry(inner, &snapshot, &serving, same_globals);
        let mut pass = Pass {
            compiled: &compiled,
            serving: &serving,
            same_globals,
            generation: inner.records_gen + 1,
            previous,
            events: Vec::new(),
        };
        let mut zones = Vec::with_capacity(compiled.zones.len());
        for (zi, zone) in compiled.zones.iter().enumerate() {
            let kept = carried.remove(&zi).unwrap_or_default();
            zones.push(self.install_zone(inner, &mut pass, zone, snapshot.zones.get(zi), kept));
        }
        let (generation, events) = (pass.generation, pass.events);
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
        for (kind, severity, object, text) in events {
            self.log(inner, kind, severity, object, text);
        }
        self.clear_install_failure(inner, version);
        tracing::info!(
            version,
            records = inner.records.len(),
            "configuration applied"
        );
        Replaced { snapshot, compiled }
    }

    /// One zone's steered records: those carried keep their record as it
    /// stands, the others are evaluated (keeping their evaluation when
    /// nothing they read changed) and their answers stored into the new
    /// snapshot's slots.
    #[expect(
        clippy::vec_box,
        reason = "the records move between lists as they are held: boxed, a move is a pointer's"
    )]
    fn install_zone(
        &self,
        inner: &Inner,
        pass: &mut Pass<'_>,
        zone: &ZoneSpec,
        data: Option<&ZoneData>,
        carried: Carried,
    ) -> Vec<Box<Steered>> {
        let Carried { front, back } = carried;
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
            let before = match pass.previous.remove(&key) {
                Some(mut b)
                    if pass.same_globals
                        && b.ttl() == record.ttl
                        && *b.steering() == **steering =>
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
            list.push(self.evaluate_new(inner, pass, record, steering, before));
        }
        // The snapshot was built (and its static answers proven) before
        // anything changed; the evaluated records' answers come from
        // their evaluation.
        if let Some(data) = data {
            let evaluated = list.get(first..).unwrap_or_default();
            let slots = data.steered.iter().skip(first);
            store_steered(
                slots.zip(evaluated.iter().map(|r| &**r)).zip(kept),
                pass.serving,
            );
        }
        list.extend(back);
        list
    }

    /// A record evaluated afresh: from its state before (its addresses
    /// remapped), or from a DR hold kept over a restart.
    fn evaluate_new(
        &self,
        inner: &Inner,
        pass: &mut Pass<'_>,
        record: &Arc<RecordSpec>,
        steering: &Steering,
        before: Option<Box<Steered>>,
    ) -> Box<Steered> {
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
            &pass.compiled.datacenters,
            &inner.health,
            prev.as_ref(),
            Operator::default(),
        );
        pass.events.extend(
            eval.events
                .into_iter()
                .map(|e| (EventKind::Record, e.severity, label.clone(), e.text)),
        );
        if was_on != Some(eval.state.dr_on) {
            self.keep_dr_state(&label, eval.state.dr_on);
        }
        Box::new(Steered {
            spec: record.clone(),
            state: eval.state,
            answers: eval.answers,
            decision: eval.decision,
            held: eval.held,
            changed: pass.generation,
        })
    }

    /// A version installed at or after the one that failed clears the
    /// failure, and says so.
    fn clear_install_failure(&self, inner: &mut Inner, version: u64) {
        let cleared = self
            .install_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_if(|f| f.version <= version);
        if let Some(failed) = cleared {
            self.log(
                inner,
                EventKind::Config,
                Severity::Info,
                format!("version {version}"),
                format!(
                    "configuration version {version} installed: no longer degraded (version {} had failed)",
                    failed.version
                ),
            );
        }
    }
}

/// What each zone's steered records read of health, zone by zone.
type ZoneHealths = Vec<(Arc<ZoneSpec>, Arc<zone_health::ZoneHealth>)>;

/// What one install pass shares between its zones.
struct Pass<'a> {
    compiled: &'a Compiled,
    /// The snapshot served while the new one is built.
    serving: &'a Snapshot,
    same_globals: bool,
    /// The records' generation this install makes.
    generation: u64,
    /// The records not carried, by owner and type: an evaluated record
    /// takes its state before from here.
    previous: HashMap<RecordKey, Box<Steered>>,
    events: Vec<(EventKind, Severity, String, String)>,
}

/// Check instances of the new configuration: unchanged ones keep their
/// state, others start over; scenarios are decided again.
fn keep_health(inner: &mut Inner, compiled: &Compiled) -> (ZoneHealths, Vec<Instance>) {
    let zone_health = zone_health::of_zones(&compiled.zones, &inner.zone_health);
    let instances =
        gtm_health::instances(compiled, zone_health.iter().map(|(_, h)| &h.instances[..]));
    let old_specs: HashMap<String, &gtm_model::compile::CheckSpec> = inner
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
    (zone_health, instances)
}

/// The serving snapshot's records, split into those the new snapshot
/// keeps slots for (every record of a zone taken whole, and the records
/// before and after what changed in a zone built from its build before:
/// `Snapshot::build`), by zone, and the others by owner and type.
fn carry(
    inner: &mut Inner,
    snapshot: &Snapshot,
    serving: &Snapshot,
    same_globals: bool,
) -> (HashMap<usize, Carried>, HashMap<RecordKey, Box<Steered>>) {
    let mut old: Vec<Option<Vec<Box<Steered>>>> = std::mem::take(&mut inner.records)
        .into_zones()
        .into_iter()
        .map(Some)
        .collect();
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
    let previous = old
        .into_iter()
        .flatten()
        .chain(between)
        .flatten()
        .map(|r| (RecordKey::of_spec(&r.spec), r))
        .collect();
    (carried, previous)
}

#[cfg(test)]
mod retire_tests {
    use super::*;
    use gtm_dns::snapshot::Snapshot;

    const TEXT: &str = "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.1\" }]\n";

    /// What an install of a committed configuration replaced is kept until
    /// the write is answered (`retire_replaced`), and no longer.
    #[test]
    fn a_replaced_snapshot_is_freed_when_retired() {
        let state = DnsState::new(Snapshot::default(), gtm_geo::Geo::none(), 1232);
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
