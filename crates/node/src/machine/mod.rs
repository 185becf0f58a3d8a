//! The state machine: how a committed [`Command`] changes replicated state,
//! the same on every device (docs/design-commands.md).
//!
//! [`GtmMachine::apply`] reads only the committed map and the command, so
//! every device reaches the same map; a stale device cannot revert what the
//! cluster committed, because it never computes a result to ship. A device
//! in no cluster applies its commands with the same machine to its local
//! map ([`crate::replication`]).
//!
//! Keys of the map:
//! - `config-list`: the committed configuration text as the list of its
//!   parts, each part once under `config-part/<hash>` ([`parts`]; a map
//!   written before parts holds the whole text under `config`);
//!   `config-version`: the number of configuration changes (decimal),
//!   which elections and operator actions do not move;
//! - `zone-version/<domain>`: the configuration version that last changed
//!   the domain (decimal), its SOA serial ([`zone_versions`]);
//! - `operator`: JSON [`operator::OperatorState`] (drains, manual check
//!   states, failback resumes);
//! - `schedules`: JSON [`schedule::Book`], the scheduled operator actions;
//! - `inputs/pushes`, `inputs/alerts`: JSON, push checks' reports and the
//!   alerts reported firing ([`inputs`]);
//! - `dnssec/<domain>`: JSON [`gtm_dns::dnssec::keys::ZoneKeys`], a signed
//!   domain's keys;
//! - `cookie-secret`: JSON, the DNS cookie secrets ([`cookies`]);
//! - `tsig`: JSON [`gtm_dns::tsig::TsigKeys`], the TSIG keys;
//! - `history/<version, 20 digits>`: JSON [`HistoryEntry`], the last
//!   versions (as many as the command's `history_keep`, see
//!   [`HISTORY_KEPT`](gtm_model::node::HISTORY_KEPT)), and
//!   `history-parts/<version, 20 digits>`: the
//!   list of that version's text's parts while history keeps it (within
//!   [`HISTORY_TEXT_BUDGET`]), parts it shares with the committed text
//!   and other versions kept once; entries written before keep their
//!   whole text under `history-text/<version>` or in their `text` field;
//! - `outcome/<command id>`: JSON [`Outcome`] of the last [`OUTCOMES_KEPT`]
//!   commands, and `outcome-order/<index, 20 digits>` → command id, to drop
//!   the oldest: a command delivered twice gets the first outcome again.

mod accounts;
mod config;
pub mod cookies;
mod dnssec;
pub mod edit;
mod history;
pub mod inputs;
pub mod operator;
mod parts;
pub mod schedule;
mod transfer_in;
mod tsig;
mod update;
mod zone_versions;

use std::sync::{Arc, Mutex};

use crate::command::{Action, Command, CommandId, Outcome};
use gtm_cluster::{Effect, Map, Write, parts::Part};
use gtm_model as model;
use gtm_model::{
    Config,
    error::{ApiError, ErrorKind},
};
pub use history::{
    HISTORY_TEXT_BUDGET, HistoryEntry, HistorySummary, LINES_KEPT, TextSize, history_entry,
    history_of, history_summary,
};
#[cfg(test)]
use history::{history_key, history_writes, text_size};
pub use zone_versions::zone_versions;

/// The committed configuration's whole text, as maps written before
/// parts keep it (read, and replaced by the next configuration change).
pub const CONFIG_KEY: &str = "config";
pub const VERSION_KEY: &str = "config-version";
const OUTCOME_PREFIX: &str = "outcome/";
const ORDER_PREFIX: &str = "outcome-order/";

/// Outcomes kept for deduplication: far more commands than can be in
/// flight (retried) at once.
pub const OUTCOMES_KEPT: usize = 1000;
/// Whether the map holds a committed configuration.
/// The configuration the RFC 2136 `update` would make of `config` if it
/// were applied now, or `None` when the state machine would refuse it:
/// what an update is judged by on every device before it is proposed.
pub fn updated(
    config: &gtm_model::Config,
    update: &gtm_dns::update::Update,
) -> Option<gtm_model::Config> {
    update::apply(config, update).ok()
}

pub fn has_config(kv: &Map) -> bool {
    kv.contains_key(parts::LIST_KEY) || kv.contains_key(CONFIG_KEY)
}

/// The value that stands for the committed configuration: the list of its
/// parts (in a map written before parts, the whole text). The same value
/// is the same text, so its hash ([`text_hash`]) names the configuration
/// without joining megabytes.
pub fn config_value(kv: &Map) -> Option<&gtm_cluster::Value> {
    kv.get(parts::LIST_KEY).or_else(|| kv.get(CONFIG_KEY))
}

/// The committed configuration's text.
pub fn config_text(kv: &Map) -> Option<Vec<u8>> {
    config_pieces(kv).map(|pieces| gtm_cluster::parts::joined(&pieces))
}

/// The committed configuration's text in the pieces the map holds it in
/// (its parts, or the whole text in a map written before parts), not
/// joined, each inflated when read.
pub fn config_pieces(kv: &Map) -> Option<Vec<Part<'_>>> {
    match parts::current_list(kv) {
        Some(list) => parts::pieces(kv, &list),
        None => kv.get(CONFIG_KEY).map(|t| vec![Part::plain(&t[..])]),
    }
}

/// The committed configuration's text as its parts, each with its name
/// (a map written before parts holds the whole text: cut here).
pub fn config_parts(kv: &Map) -> Option<Vec<([u8; 16], Part<'_>)>> {
    match parts::current_list(kv) {
        Some(list) => {
            let pieces = parts::pieces(kv, &list)?;
            Some(list.iter().map(|p| p.hash).zip(pieces).collect())
        }
        None => kv.get(CONFIG_KEY).map(|t| gtm_cluster::parts::named(t)),
    }
}

/// The hash of the value a map would keep for `text` ([`config_value`]):
/// how a device knows that the copy it kept for restarts is the committed
/// configuration, without installing it again.
pub fn id_of_text(text: &[u8]) -> u64 {
    text_hash(&parts::encode_list(&parts::list_of_text(text)))
}

/// The configuration version of a map (0: none yet).
pub fn version_of(kv: &Map) -> u64 {
    kv.get(VERSION_KEY)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The outcome a map keeps for a command id, if it applied that command.
pub fn outcome_of(kv: &Map, id: &CommandId) -> Option<Outcome> {
    kv.get(&format!("{OUTCOME_PREFIX}{id}"))
        .and_then(|v| Outcome::decode(v).ok())
}

/// gtm's state machine. Keeps the last parsed configuration, so a command
/// does not parse the committed text again.
#[derive(Debug, Default)]
pub struct GtmMachine {
    parsed: Mutex<Option<Parsed>>,
    /// A text this device's API parsed before proposing it
    /// ([`GtmMachine::offer`]), by its hash: applying it here takes that
    /// parse instead of parsing the text again.
    offered: Mutex<Option<(u64, Config)>>,
    /// A parse of a large `apply` command's text, started when the command
    /// was appended to this device's log ([`GtmMachine::start_parse`]): applying
    /// the command at that index takes it instead of parsing the text.
    preparing: Mutex<Option<Preparing>>,
    /// Whether such a parse is under way: one at a time, so a follower
    /// catching up on several large commands holds one parse, not one
    /// each (the others are parsed when applied).
    parsing: Arc<std::sync::atomic::AtomicBool>,
}

/// Marks the parse under way done however its thread ends.
struct Parsing(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Parsing {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// A parse under way on a thread of its own: the index of the command
/// whose text it parses, and where the text's hash and the parse arrive
/// (nothing, when the thread found nothing to parse).
#[derive(Debug)]
struct Preparing {
    index: u64,
    parsed: std::sync::mpsc::Receiver<(u64, Result<Config, model::ConfigErrors>)>,
}

/// An offered parse ([`GtmMachine::offer`]): dropping it withdraws the
/// offer if it was not taken (one made since stays), so a proposal that
/// fails or is abandoned does not leave a configuration held.
#[derive(Debug)]
pub struct Offer<'a> {
    machine: &'a GtmMachine,
    hash: u64,
}

impl Drop for Offer<'_> {
    fn drop(&mut self) {
        let mut offered = self
            .machine
            .offered
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if offered.as_ref().is_some_and(|(h, _)| *h == self.hash) {
            *offered = None;
        }
    }
}

/// The configuration this machine parsed last, by the hash of its text
/// ([`text_hash`]), and its compiled form (with the proof that it can be
/// served) when the machine compiled it for a command and the engine has
/// not taken it yet.
#[derive(Debug)]
struct Parsed {
    hash: u64,
    config: Arc<Config>,
    compiled: Option<gtm_engine::Proven>,
    /// Its compiled zones, when it was compiled here: the next command
    /// takes those of unchanged domains as they are.
    zones: Option<Zones>,
    /// Where its domains lie in its text, when this machine wrote the text
    /// ([`model::text`]).
    layout: Option<model::text::Layout>,
}

/// The committed configuration, as [`GtmMachine::run`] reads it.
#[derive(Debug, Default)]
struct Current {
    config: Arc<Config>,
    zones: Option<Zones>,
    layout: Option<model::text::Layout>,
}

/// Why the committed configuration cannot be read on this device: a newer
/// binary's configuration may not parse here.
#[derive(Debug, thiserror::Error)]
enum CommittedError {
    #[error("a part of its text is missing from the map")]
    MissingPart,
    #[error("{0}")]
    NotUtf8(std::str::Utf8Error),
    #[error("{0}")]
    Parse(model::ConfigErrors),
}

/// A configuration's compiled zones, one per domain in order.
type Zones = Vec<Arc<gtm_model::compile::ZoneSpec>>;

pub fn text_hash(text: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// A change computed from the committed state.
struct Change {
    writes: Vec<Write>,
    outcome: Outcome,
}

fn rejected(kind: ErrorKind, message: impl Into<String>) -> Change {
    Change {
        writes: Vec::new(),
        outcome: Outcome::Rejected(ApiError::new(kind, message)),
    }
}

impl gtm_cluster::Machine for GtmMachine {
    fn prepare(&self, index: u64, command: &gtm_cluster::Value) {
        self.start_parse(index, command);
    }

    fn apply(&self, kv: &Map, index: u64, bytes: &[u8]) -> Effect {
        let command = match Command::decode(bytes) {
            Ok(c) => c,
            Err(e) => {
                return Effect {
                    writes: Vec::new(),
                    outcome: Outcome::Rejected(ApiError::new(ErrorKind::BadRequest, e.to_string()))
                        .encode(),
                };
            }
        };
        let outcome_key = format!("{OUTCOME_PREFIX}{}", command.id);
        if let Some(first) = kv.get(&outcome_key) {
            // Delivered again (a retried forward): applied once already.
            return Effect {
                writes: Vec::new(),
                outcome: first.to_vec(),
            };
        }
        let id = command.id.to_string();
        let Change {
            mut writes,
            outcome,
        } = self.run(kv, index, command);
        // A parse started for this index and not taken is not needed now.
        drop(self.take_preparing(index));
        let encoded = outcome.encode();
        writes.push(Write::Put {
            key: outcome_key,
            value: encoded.clone(),
        });
        writes.push(Write::Put {
            key: format!("{ORDER_PREFIX}{index:020}"),
            value: id.into_bytes(),
        });
        let order: Vec<(&String, &gtm_cluster::Value)> = kv
            .range(ORDER_PREFIX.to_string()..)
            .take_while(|(k, _)| k.starts_with(ORDER_PREFIX))
            .collect();
        let excess = (order.len() + 1).saturating_sub(OUTCOMES_KEPT);
        for (key, id) in order.into_iter().take(excess) {
            writes.push(Write::Delete { key: key.clone() });
            writes.push(Write::Delete {
                key: format!("{OUTCOME_PREFIX}{}", String::from_utf8_lossy(id)),
            });
        }
        Effect {
            writes,
            outcome: encoded,
        }
    }
}

impl GtmMachine {
    fn run(&self, kv: &Map, index: u64, command: Command) -> Change {
        let version = version_of(kv);
        if let Some(expected) = command.expect_version
            && expected != version
        {
            return rejected(
                ErrorKind::Conflict,
                format!(
                    "the configuration is at version {version}, not {expected}; read it again and retry"
                ),
            );
        }
        if let Some(change) = accounts::run(kv, index, version, &command) {
            return change;
        }
        if let Some(change) = cookies::run(kv, index, version, &command) {
            return change;
        }
        let current = match self.current(kv) {
            Ok(c) => c,
            // The committed text always parsed when it was committed; a
            // newer binary's configuration may not parse here.
            Err(e) => {
                return rejected(
                    ErrorKind::Cluster,
                    format!("the committed configuration does not parse on this device: {e}"),
                );
            }
        };
        if let Some(change) = tsig::run(kv, index, version, &current.config, &command) {
            return change;
        }
        if let Some(change) = operator::run(kv, index, version, &current.config, &command) {
            return change;
        }
        if let Some(change) = inputs::run(kv, index, version, &current.config, &command) {
            return change;
        }
        if let Some(change) = schedule::run(kv, index, version, &current.config, &command) {
            return change;
        }
        if let Some(change) = dnssec::run(kv, index, version, &current.config, &command) {
            return change;
        }
        self.configure(kv, index, version, current, command)
    }

    /// What this machine would answer to `command`, an
    /// [`Action::AddSchedule`], applied to `kv` now, without applying it:
    /// the same checks as the add itself (the schedules waiting, the
    /// times, the action and its target in the committed configuration).
    /// A schedule's dry run asks it; nothing is written.
    pub fn check_schedule(&self, kv: &Map, command: &Command) -> Result<(), ApiError> {
        if !matches!(
            command.action,
            Action::AddSchedule(_) | Action::AddForcedSchedule(_)
        ) {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                "only the add of a schedule is checked without applying it",
            ));
        }
        let config = self.peek_current(kv).map_err(|e| {
            ApiError::new(
                ErrorKind::Cluster,
                format!("the committed configuration does not parse on this device: {e}"),
            )
        })?;
        let index = 0;
        match schedule::run(kv, index, version_of(kv), &config, command) {
            Some(Change {
                outcome: Outcome::Rejected(e),
                ..
            }) => Err(e),
            _ => Ok(()),
        }
    }

    /// Offers `config`, parsed from `text`, for when this machine applies
    /// a command with that text: the device that receives a configuration
    /// parses it to check it before proposing it, and its own machine then
    /// takes that parse instead of parsing the same text again (a million
    /// records take seconds). A text parses to one configuration, so the
    /// outcome is the same on every device. One offer is held, until it
    /// is taken or the returned [`Offer`] is dropped.
    pub fn offer(&self, text: &str, config: Config) -> Offer<'_> {
        let hash = text_hash(text.as_bytes());
        *self.offered.lock().unwrap_or_else(|p| p.into_inner()) = Some((hash, config));
        Offer {
            machine: self,
            hash,
        }
    }

    /// `read` of the configuration offered for `text` ([`Self::offer`]),
    /// when that is the one offered; the offer stays.
    fn offered_config<T>(&self, text: &str, read: impl FnOnce(&Config) -> T) -> Option<T> {
        let hash = text_hash(text.as_bytes());
        let offered = self.offered.lock().unwrap_or_else(|p| p.into_inner());
        offered
            .as_ref()
            .filter(|(h, _)| *h == hash)
            .map(|(_, config)| read(config))
    }

    /// A parse of `text`, the text of the command at `index`, made before
    /// it was applied: the one this device's API offered, else the one
    /// started when the command was appended to the log (waited for).
    fn take_parse(&self, index: u64, text: &str) -> Option<Result<Config, model::ConfigErrors>> {
        let hash = text_hash(text.as_bytes());
        let preparing = self.take_preparing(index);
        {
            let mut offered = self.offered.lock().unwrap_or_else(|p| p.into_inner());
            if offered.as_ref().is_some_and(|(h, _)| *h == hash) {
                return offered.take().map(|(_, config)| Ok(config));
            }
        }
        // Nothing arrives when the thread found no text to parse.
        let (prepared_hash, parsed) = preparing?.parsed.recv().ok()?;
        (prepared_hash == hash).then_some(parsed)
    }

    /// The parse started for the command at `index`, if any; one started
    /// for an earlier index (an entry replaced before it committed) is
    /// dropped.
    fn take_preparing(&self, index: u64) -> Option<Preparing> {
        let mut preparing = self.preparing.lock().unwrap_or_else(|p| p.into_inner());
        match preparing.as_ref()?.index {
            i if i == index => preparing.take(),
            i if i < index => {
                *preparing = None;
                None
            }
            _ => None,
        }
    }

    /// Starts parsing the text of `command`, appended to this device's log
    /// at `index`, when it is a configuration to apply that this device's
    /// API did not parse already: a follower receives a large `apply`
    /// before it commits, and parses it meanwhile rather than after
    /// (docs/cluster.md, "Bounded entries"). Decoding, hashing and parsing
    /// run on a thread of their own.
    fn start_parse(&self, index: u64, command: &gtm_cluster::Value) {
        let offered = self
            .offered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(hash, _)| *hash);
        if self.parsing.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let parsing = Parsing(self.parsing.clone());
        let (done, parsed) = std::sync::mpsc::channel();
        let command = command.clone();
        // What the text gives again is taken from the configuration
        // parsed last (most often the committed one).
        let like = self
            .parsed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|p| p.config.clone());
        let started = std::thread::Builder::new()
            .name("gtm-prepare".into())
            .spawn(move || {
                // Done before the parse is sent (or, on the returns
                // below, before the sender goes): whoever receives it may
                // start the next at once.
                let parsing = parsing;
                let Ok(Command {
                    action: Action::ApplyConfig { text },
                    ..
                }) = Command::decode(&command)
                else {
                    return;
                };
                let hash = text_hash(text.as_bytes());
                if offered != Some(hash) {
                    let parsed = model::parse_like(&text, like.as_deref());
                    drop(parsing);
                    // The receiver may be gone: nothing waits for it then.
                    let _ = done.send((hash, parsed));
                }
            });
        if started.is_ok() {
            *self.preparing.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Preparing { index, parsed });
        }
    }

    /// The configuration whose value hashes to `hash` ([`config_value`],
    /// [`text_hash`]), when
    /// it is the one this machine parsed last, with its compiled form the
    /// first time it is asked for: the engine installs it without parsing
    /// or compiling the same text again.
    pub fn parsed(&self, hash: u64) -> Option<(Arc<Config>, Option<gtm_engine::Proven>)> {
        let mut cached = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        cached
            .as_mut()
            .filter(|p| p.hash == hash)
            .map(|p| (p.config.clone(), p.compiled.take()))
    }

    /// The layout of the committed text, whose parts are `pieces` and
    /// which parses to `config`, read from it ([`model::text::Layout::of`])
    /// and kept with its parse.
    fn layout_of(&self, kv: &Map, config: &Config, pieces: &[Part]) -> Option<model::text::Layout> {
        let text = gtm_cluster::parts::joined(pieces);
        let layout = model::text::Layout::of(std::str::from_utf8(&text).ok()?, config)?;
        let hash = text_hash(config_value(kv)?);
        let mut cached = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cached.as_mut().filter(|p| p.hash == hash) {
            p.layout = Some(layout.clone());
        }
        Some(layout)
    }

    /// The configuration committed in `kv`: the cached parse when it is
    /// that one, else parsed here and not cached, so a look from outside
    /// the log (a dry run, on a map that may be a little behind) never
    /// displaces the parse a command left for the engine.
    fn peek_current(&self, kv: &Map) -> Result<Arc<Config>, CommittedError> {
        let Some(value) = config_value(kv) else {
            return Ok(Arc::default());
        };
        let hash = text_hash(value);
        if let Some(p) = &*self.parsed.lock().unwrap_or_else(|p| p.into_inner())
            && p.hash == hash
        {
            return Ok(p.config.clone());
        }
        let text = config_text(kv).ok_or(CommittedError::MissingPart)?;
        let text = std::str::from_utf8(&text).map_err(CommittedError::NotUtf8)?;
        Ok(Arc::new(model::parse(text).map_err(CommittedError::Parse)?))
    }

    /// The committed configuration, parsed (cached by its value), with its
    /// compiled zones and its text's layout when this machine made them.
    fn current(&self, kv: &Map) -> Result<Current, CommittedError> {
        let Some(value) = config_value(kv) else {
            return Ok(Current::default());
        };
        let hash = text_hash(value);
        let mut cached = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = &*cached
            && p.hash == hash
        {
            return Ok(Current {
                config: p.config.clone(),
                zones: p.zones.clone(),
                layout: p.layout.clone(),
            });
        }
        let text = config_text(kv).ok_or(CommittedError::MissingPart)?;
        let text = std::str::from_utf8(&text).map_err(CommittedError::NotUtf8)?;
        let config = Arc::new(model::parse(text).map_err(CommittedError::Parse)?);
        *cached = Some(Parsed {
            hash,
            config: config.clone(),
            compiled: None,
            zones: None,
            layout: None,
        });
        Ok(Current {
            config,
            ..Current::default()
        })
    }
}

/// A text that takes nothing from the committed one. Its outcome keeps
/// the errors as the model lists them: the first
/// [`model::ERRORS_LISTED`] and a line counting the rest.
fn invalid(e: model::ConfigErrors) -> Change {
    let error = ApiError::invalid(e);
    Change {
        writes: Vec::new(),
        outcome: Outcome::Rejected(error),
    }
}

/// The domain an edit changes (by the name it gives), or `None` when it
/// changes no domain.
fn touched_domain(e: &crate::command::Edit) -> Option<&str> {
    use crate::command::{Edit, Kind};
    match e {
        Edit::Put {
            kind: Kind::Domain,
            name,
            ..
        }
        | Edit::Delete {
            kind: Kind::Domain,
            name,
        }
        | Edit::Patch {
            kind: Kind::Domain,
            name,
            ..
        } => Some(name),
        Edit::Put { .. } | Edit::Delete { .. } | Edit::Patch { .. } => None,
        Edit::PutRecord { domain, .. }
        | Edit::DeleteRecord { domain, .. }
        | Edit::PutAddress { domain, .. }
        | Edit::DeleteAddress { domain, .. }
        | Edit::PatchRecord { domain, .. }
        | Edit::PatchAddress { domain, .. } => Some(domain),
    }
}

/// `create check web`, `update record www A in example.test`, `delete
/// address 192.0.2.1 of www A in example.test`: a put or a patch creates
/// what `existed` says was not there, and updates what was.
fn describe(e: &crate::command::Edit, existed: bool) -> String {
    use crate::command::Edit;
    let verb = match e {
        Edit::Delete { .. } | Edit::DeleteRecord { .. } | Edit::DeleteAddress { .. } => "delete",
        _ if existed => "update",
        _ => "create",
    };
    let what = match e {
        Edit::Put { kind, name, .. }
        | Edit::Patch { kind, name, .. }
        | Edit::Delete { kind, name } => format!("{} {name}", kind.noun()),
        Edit::PutRecord {
            domain,
            name,
            rtype,
            ..
        }
        | Edit::PatchRecord {
            domain,
            name,
            rtype,
            ..
        }
        | Edit::DeleteRecord {
            domain,
            name,
            rtype,
        } => format!("record {name} {rtype} in {domain}"),
        Edit::PutAddress {
            domain,
            name,
            rtype,
            key,
            ..
        }
        | Edit::PatchAddress {
            domain,
            name,
            rtype,
            key,
            ..
        }
        | Edit::DeleteAddress {
            domain,
            name,
            rtype,
            key,
        } => format!("address {key} of {name} {rtype} in {domain}"),
    };
    format!("{verb} {what}")
}

#[cfg(test)]
mod history_tests;

/// A command of user `admin` received on `gtm1` (tests of the machine).
#[cfg(test)]
pub(crate) fn admin_command(action: Action) -> Command {
    Command::new(
        gtm_model::actor::Actor {
            user: "admin".into(),
            device: "gtm1".into(),
        },
        None,
        action,
    )
}

/// Applies `command` at log `index` through the whole machine, as every
/// device does, keeping its writes in `kv` (tests of the machine's parts).
#[cfg(test)]
pub(crate) fn apply_for_test(
    machine: &GtmMachine,
    kv: &mut Map,
    index: u64,
    command: &Command,
) -> Outcome {
    use gtm_cluster::Machine;
    let effect = machine.apply(kv, index, &command.encode().unwrap_or_default());
    for w in effect.writes {
        w.apply_to(kv);
    }
    Outcome::decode(&effect.outcome).unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod text_tests;

#[cfg(test)]
mod offer_tests;
