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
//! - `dnssec/<domain>`: JSON [`crate::dnssec::keys::ZoneKeys`], a signed
//!   domain's keys;
//! - `cookie-secret`: JSON, the DNS cookie secrets ([`cookies`]);
//! - `tsig`: JSON [`crate::dns::tsig::TsigKeys`], the TSIG keys;
//! - `history/<version, 20 digits>`: JSON [`HistoryEntry`], the last
//!   versions (as many as the command's `history_keep`, see
//!   [`HISTORY_KEPT`]), and `history-parts/<version, 20 digits>`: the
//!   list of that version's text's parts while history keeps it (within
//!   [`HISTORY_TEXT_BUDGET`]), parts it shares with the committed text
//!   and other versions kept once; entries written before keep their
//!   whole text under `history-text/<version>` or in their `text` field;
//! - `outcome/<command id>`: JSON [`Outcome`] of the last [`OUTCOMES_KEPT`]
//!   commands, and `outcome-order/<index, 20 digits>` → command id, to drop
//!   the oldest: a command delivered twice gets the first outcome again.

mod accounts;
pub mod cookies;
mod dnssec;
pub mod edit;
pub mod operator;
mod parts;
pub mod schedule;
mod tsig;
mod zone_versions;

use std::{
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use crate::{
    api::{ApiError, ErrorKind},
    command::{Action, Actor, Command, CommandId, Outcome},
    model::{self, Config},
};
use gtm_cluster::{
    Effect, Map, Write,
    parts::{Part, Splice},
};
use zone_versions::zone_version_writes;
pub use zone_versions::zone_versions;

/// The committed configuration's whole text, as maps written before
/// parts keep it (read, and replaced by the next configuration change).
pub const CONFIG_KEY: &str = "config";
pub const VERSION_KEY: &str = "config-version";
const HISTORY_PREFIX: &str = "history/";
const HISTORY_TEXT_PREFIX: &str = "history-text/";
const OUTCOME_PREFIX: &str = "outcome/";
const ORDER_PREFIX: &str = "outcome-order/";

/// Outcomes kept for deduplication: far more commands than can be in
/// flight (retried) at once.
pub const OUTCOMES_KEPT: usize = 1000;
/// Configuration versions kept in history by default (the `history_keep`
/// node setting; each command carries its proposer's).
pub const HISTORY_KEPT: usize = 100;
/// The configuration texts kept in history, in bytes at most, a part that
/// versions share counted once: beyond it the oldest entries keep their
/// metadata and diff but not their text (and cannot be shown whole or
/// rolled back to).
pub const HISTORY_TEXT_BUDGET: usize = 32 << 20;
/// Lines a history entry, and a command's outcome, keep of a list of
/// changes: an apply that changes a million records keeps its
/// first ones and a line saying how many more there are (`gtm config
/// diff` lists them all while history keeps both texts), not 40 MB that
/// every listing of history reads and every device's store writes again
/// beside the outcomes of the commands after it.
pub const LINES_KEPT: usize = 1000;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One configuration version, as history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryEntry {
    pub version: u64,
    pub time_ms: u64,
    pub actor: Actor,
    /// The command that made it (32 hex digits).
    pub command: String,
    /// What was asked: `apply`, `put check web`, `rollback to 6`, ….
    pub what: String,
    /// The changes, the first 1,000 when there are more (then a last line
    /// counts the rest).
    pub changes: Vec<String>,
    /// How many changes there are, when `changes` lists only the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes_in_all: Option<usize>,
    // `text` and `text_bytes` stay the last fields, written only when
    // set: [`text_size`] tells an entry without either by its JSON's end.
    /// The whole configuration; `None` once it fell out of the text budget.
    /// Kept under a key of its own ([`history_entry`] reads it from
    /// there), so listing history does not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The size of the text in bytes while it is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_bytes: Option<usize>,
}

impl HistoryEntry {
    /// How many changes the version made (more than `changes` lists when
    /// they were cut).
    pub fn change_count(&self) -> usize {
        self.changes_in_all.unwrap_or(self.changes.len())
    }
}

/// Whether the map holds a committed configuration.
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

fn history_key(version: u64) -> String {
    format!("{HISTORY_PREFIX}{version:020}")
}

fn history_text_key(version: u64) -> String {
    format!("{HISTORY_TEXT_PREFIX}{version:020}")
}

/// A history entry without its text, which can be megabytes: what listing
/// history needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HistorySummary {
    pub version: u64,
    pub time_ms: u64,
    pub actor: Actor,
    pub command: String,
    pub what: String,
    pub changes: Vec<String>,
    #[serde(default)]
    changes_in_all: Option<usize>,
    /// The text held in the entry itself (entries written before the text
    /// had a key of its own), by its size only.
    #[serde(default, rename = "text")]
    embedded: Option<TextSize>,
    #[serde(default)]
    text_bytes: Option<usize>,
}

impl HistorySummary {
    /// How many changes the version made (more than `changes` lists when
    /// they were cut).
    pub fn change_count(&self) -> usize {
        self.changes_in_all.unwrap_or(self.changes.len())
    }

    /// The size of the whole text in bytes; `None` once it fell out of the
    /// text budget.
    pub fn text_size(&self) -> Option<usize> {
        self.text_bytes.or(self.embedded.map(|t| t.0))
    }
}

/// The size of a text read past without keeping it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextSize(pub usize);

impl<'de> Deserialize<'de> for TextSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Len;
        impl serde::de::Visitor<'_> for Len {
            type Value = TextSize;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a text")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TextSize, E> {
                Ok(TextSize(v.len()))
            }
        }
        d.deserialize_str(Len)
    }
}

/// The history of a map, oldest first, without the texts.
pub fn history_of(kv: &Map) -> Vec<HistorySummary> {
    kv.range(HISTORY_PREFIX.to_string()..)
        .take_while(|(k, _)| k.starts_with(HISTORY_PREFIX))
        .filter_map(|(_, v)| serde_json::from_slice(v).ok())
        .collect()
}

/// The versions history keeps, oldest first, read from their keys: an
/// entry is not parsed to be counted (the entry of an apply over a large
/// configuration lists a change per record).
fn history_versions(kv: &Map) -> Vec<u64> {
    kv.range(HISTORY_PREFIX.to_string()..)
        .take_while(|(k, _)| k.starts_with(HISTORY_PREFIX))
        .filter_map(|(k, _)| k[HISTORY_PREFIX.len()..].parse().ok())
        .collect()
}

/// The size of the text a version's entry holds or counts (`text`,
/// `text_bytes`), 0 without one. An entry is JSON whose last fields are
/// those two, written only when set: one that ends with its `changes`
/// list (`]}`) has neither, and is not parsed for that (an apply over a
/// large configuration lists a change per record, megabytes of them).
fn text_size(kv: &Map, version: u64) -> usize {
    match kv.get(&history_key(version)) {
        Some(v) if v.ends_with(b"]}") => 0,
        Some(_) => history_summary(kv, version)
            .and_then(|e| e.text_size())
            .unwrap_or(0),
        None => 0,
    }
}

/// One version's history entry without its text.
pub fn history_summary(kv: &Map, version: u64) -> Option<HistorySummary> {
    kv.get(&history_key(version))
        .and_then(|v| serde_json::from_slice(v).ok())
}

/// One version's entry, with its text when history keeps it.
pub fn history_entry(kv: &Map, version: u64) -> Option<HistoryEntry> {
    let mut entry: HistoryEntry = kv
        .get(&history_key(version))
        .and_then(|v| serde_json::from_slice(v).ok())?;
    if entry.text.is_none() {
        let text = match kv.get(&history_text_key(version)) {
            Some(text) => Some(text.to_vec()),
            None => parts::list_of(kv, version).and_then(|list| parts::join(kv, &list)),
        };
        entry.text = text.map(|t| String::from_utf8_lossy(&t).into_owned());
    }
    Some(entry)
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
    compiled: Option<crate::engine::Proven>,
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

/// A configuration's compiled zones, one per domain in order.
type Zones = Vec<Arc<crate::model::compile::ZoneSpec>>;

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
                    outcome: Outcome::Rejected(ApiError::new(ErrorKind::BadRequest, e)).encode(),
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
    fn run(&self, kv: &Map, index: u64, mut command: Command) -> Change {
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
        let Current {
            config: current,
            zones: current_zones,
            layout: current_layout,
        } = match self.current(kv) {
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
        if let Some(change) = tsig::run(kv, index, version, &current, &command) {
            return change;
        }
        if let Some(change) = operator::run(kv, index, version, &current, &command) {
            return change;
        }
        if let Some(change) = schedule::run(kv, index, version, &current, &command) {
            return change;
        }
        if let Some(change) = dnssec::run(kv, index, version, &current, &command) {
            return change;
        }
        let adopt = matches!(command.action, Action::Adopt { .. });
        // The committed text's parts, and their bytes when an edit takes
        // from them (looked up once, for the edit and for its parts).
        let committed = parts::current_list(kv).unwrap_or_default();
        let committed_pieces = match &command.action {
            Action::Edit(_) => parts::pieces(kv, &committed),
            _ => None,
        };
        // Where the committed text's parts lie: known when this machine
        // wrote it, read from it otherwise (an operator's text, or after
        // a restart).
        let current_layout = match (current_layout, &committed_pieces) {
            (None, Some(pieces)) => self.layout_of(kv, &current, pieces),
            (layout, _) => layout,
        };
        // An applied text becomes the map's parts without a copy: taken
        // out of the command, which nothing reads it from after this.
        let given = match &mut command.action {
            Action::ApplyConfig { text } | Action::Adopt { text, .. } => std::mem::take(text),
            _ => String::new(),
        };
        let (new, text, what, new_version, layout) = match &command.action {
            Action::Adopt { version: v, .. } => {
                if has_config(kv) {
                    return rejected(
                        ErrorKind::AlreadyClustered,
                        "the cluster has a configuration already",
                    );
                }
                match model::parse(&given) {
                    Ok(c) => {
                        let layout = model::text::Layout::of(&given, &c);
                        let text = Splice::whole(given.into_bytes());
                        (c, text, "adopt".to_string(), *v, layout)
                    }
                    Err(e) => return invalid(e),
                }
            }
            Action::ApplyConfig { .. } => {
                let c = match self.take_parse(index, &given) {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => return invalid(e),
                    None => match model::parse_like(&given, Some(&current)) {
                        Ok(c) => c,
                        Err(e) => return invalid(e),
                    },
                };
                // Where its parts lie, read once here rather than by the
                // first edit.
                let layout = model::text::Layout::of(&given, &c);
                let text = Splice::whole(given.into_bytes());
                (c, text, "apply".to_string(), version + 1, layout)
            }
            Action::Edit(e) => {
                let mut config = (*current).clone();
                if let Err(e) = edit::apply(&mut config, e) {
                    return Change {
                        writes: Vec::new(),
                        outcome: Outcome::Rejected(e),
                    };
                }
                // The text before, when this machine wrote it: the
                // domains the edit did not touch are copied from it.
                let before = current_layout
                    .as_ref()
                    .zip(committed_pieces.as_deref())
                    .map(|(layout, text)| model::text::Before {
                        text,
                        layout,
                        config: &current,
                        touched: touched_domain(e),
                    });
                let (text, layout) = match model::text::write(&config, before) {
                    Ok(written) => written,
                    Err(e) => {
                        return rejected(
                            ErrorKind::Internal,
                            format!("the configuration cannot be written as TOML: {e}"),
                        );
                    }
                };
                (config, text, describe(e), version + 1, Some(layout))
            }
            Action::Drain { .. }
            | Action::SetCheck { .. }
            | Action::Resume { .. }
            | Action::AddSchedule(_)
            | Action::CancelSchedule { .. }
            | Action::FireSchedule { .. }
            | Action::Dnssec(_)
            | Action::RotateCookieSecret { .. }
            | Action::Account(_)
            | Action::Tsig(_) => {
                return rejected(
                    ErrorKind::Internal,
                    "an operator command reached the configuration path",
                );
            }
            Action::Rollback { version: to } => {
                let Some(entry) = history_entry(kv, *to) else {
                    return rejected(
                        ErrorKind::NotFound,
                        format!(
                            "version {to} is not in the configuration history (gtm config history lists what is kept)"
                        ),
                    );
                };
                let Some(text) = entry.text else {
                    return rejected(
                        ErrorKind::NotFound,
                        format!(
                            "version {to} is in the history without its text (older versions keep only their changes); it cannot be rolled back to"
                        ),
                    );
                };
                match model::parse_like(&text, Some(&current)) {
                    Ok(c) => {
                        let layout = model::text::Layout::of(&text, &c);
                        (
                            c,
                            Splice::whole(text.into_bytes()),
                            format!("rollback to {to}"),
                            version + 1,
                            layout,
                        )
                    }
                    Err(e) => return invalid(e),
                }
            }
        };
        let proven = match crate::engine::servable(&new, &current, current_zones.as_deref()) {
            Ok(p) => p,
            Err(e) => return invalid(e),
        };
        // The secondaries' keys are the cluster's, not the text's: checked
        // against the keys committed before this command.
        if let Some(errors) = tsig::unknown_keys(kv, &new) {
            return invalid(errors);
        }
        if new == *current && has_config(kv) {
            // A retried apply of what is applied makes no new version.
            return Change {
                writes: Vec::new(),
                outcome: Outcome::Applied {
                    version,
                    index,
                    changed: false,
                    changes: Vec::new(),
                },
            };
        }
        let all = crate::engine::diff(&current, &new);
        let changes = kept_changes(&all, new_version);
        let changes_in_all = (all.len() > LINES_KEPT).then_some(all.len());
        let entry = HistoryEntry {
            version: new_version,
            time_ms: command.time_ms,
            actor: command.actor.clone(),
            command: command.id.to_string(),
            what,
            changes: changes.clone(),
            changes_in_all,
            text: None,
            text_bytes: Some(text.len()),
        };
        // The text as parts: those it shares with the committed one are
        // not written again.
        let Some((list, mut writes)) =
            parts::keep(kv, text, &committed, committed_pieces.as_deref())
        else {
            return rejected(
                ErrorKind::Internal,
                "a part of the committed text is missing from the map",
            );
        };
        let list_value = parts::encode_list(&list);
        let hash = text_hash(&list_value);
        writes.push(Write::Put {
            key: parts::LIST_KEY.into(),
            value: list_value,
        });
        if kv.contains_key(CONFIG_KEY) {
            writes.push(Write::Delete {
                key: CONFIG_KEY.into(),
            });
        }
        writes.push(Write::Put {
            key: VERSION_KEY.into(),
            value: new_version.to_string().into_bytes(),
        });
        writes.extend(history_writes(
            kv,
            entry,
            list,
            command.history_keep as usize,
            HISTORY_TEXT_BUDGET,
        ));
        writes.extend(zone_version_writes(
            kv,
            &current,
            &new,
            &proven.compiled,
            (version, new_version),
            adopt,
        ));
        // Operator state naming what the new configuration lacks drops out.
        writes.extend(operator::prune(kv, &proven.compiled));
        *self.parsed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Parsed {
            hash,
            config: Arc::new(new),
            zones: Some(proven.compiled.zones.clone()),
            compiled: Some(proven),
            layout,
        });
        Change {
            writes,
            outcome: Outcome::Applied {
                version: new_version,
                index,
                changed: true,
                changes,
            },
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
    pub fn parsed(&self, hash: u64) -> Option<(Arc<Config>, Option<crate::engine::Proven>)> {
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

    /// The committed configuration, parsed (cached by its value), with its
    /// compiled zones and its text's layout when this machine made them.
    fn current(&self, kv: &Map) -> Result<Current, String> {
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
        let text = config_text(kv).ok_or("a part of its text is missing from the map")?;
        let text = std::str::from_utf8(&text).map_err(|e| e.to_string())?;
        let config = Arc::new(model::parse(text).map_err(|e| e.to_string())?);
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

/// `put check web`, `delete address 192.0.2.1 of www A in example.test`.
fn describe(e: &crate::command::Edit) -> String {
    use crate::command::{Edit, Kind};
    let noun = |k: &Kind| match k {
        Kind::Datacenter => "datacenter",
        Kind::Check => "check",
        Kind::Scenario => "scenario",
        Kind::Service => "service",
        Kind::Domain => "domain",
    };
    match e {
        Edit::Put { kind, name, .. } => format!("put {} {name}", noun(kind)),
        Edit::Delete { kind, name } => format!("delete {} {name}", noun(kind)),
        Edit::PutRecord {
            domain,
            name,
            rtype,
            ..
        } => format!("put record {name} {rtype} in {domain}"),
        Edit::DeleteRecord {
            domain,
            name,
            rtype,
        } => format!("delete record {name} {rtype} in {domain}"),
        Edit::PutAddress {
            domain,
            name,
            rtype,
            key,
            ..
        } => format!("put address {key} of {name} {rtype} in {domain}"),
        Edit::DeleteAddress {
            domain,
            name,
            rtype,
            key,
        } => format!("delete address {key} of {name} {rtype} in {domain}"),
        Edit::Patch { kind, name, .. } => format!("update {} {name}", noun(kind)),
        Edit::PatchRecord {
            domain,
            name,
            rtype,
            ..
        } => format!("update record {name} {rtype} in {domain}"),
        Edit::PatchAddress {
            domain,
            name,
            rtype,
            key,
            ..
        } => format!("update address {key} of {name} {rtype} in {domain}"),
    }
}

/// The new entry, whose text is the new committed one (`list`, its parts,
/// written already), and what keeps history within `keep` entries (at
/// least the new one) and `budget` bytes of text (newest texts first, a
/// part that versions share counted once; the new entry keeps its text
/// whatever its size). Only the entries whose whole text drops out
/// (written before parts) are read whole.
/// The change lines history and the outcome keep of version `version`'s
/// `changes`.
fn kept_changes(changes: &[String], version: u64) -> Vec<String> {
    kept_lines(changes, |more| {
        format!(
            "… and {more} more changes ({} in all; `gtm config diff {} {version}` lists them while history keeps both texts)",
            changes.len(),
            version.saturating_sub(1),
        )
    })
}

/// The first [`LINES_KEPT`] of `lines`, then, when there are more, the
/// line `more` makes of how many more.
fn kept_lines(lines: &[String], more: impl FnOnce(usize) -> String) -> Vec<String> {
    let mut kept = lines.get(..LINES_KEPT).unwrap_or(lines).to_vec();
    if let Some(rest) = lines.len().checked_sub(LINES_KEPT).filter(|m| *m > 0) {
        kept.push(more(rest));
    }
    kept
}

fn history_writes(
    kv: &Map,
    entry: HistoryEntry,
    list: Vec<parts::PartRef>,
    keep: usize,
    budget: usize,
) -> Vec<Write> {
    let mut writes = Vec::new();
    let mut older = history_versions(kv);
    let drop = (older.len() + 1).saturating_sub(keep.max(1));
    for version in older.drain(..drop.min(older.len())) {
        for key in [
            history_key(version),
            history_text_key(version),
            parts::parts_key(version),
        ] {
            writes.push(Write::Delete { key });
        }
    }
    let text_bytes = list.iter().map(|p| p.len).sum::<usize>();

    // Newest first: what each older version adds to the bytes kept.
    let mut counted: std::collections::HashSet<[u8; 16]> = list.iter().map(|p| p.hash).collect();
    let mut budget = budget.saturating_sub(text_bytes);
    let mut kept_lists = vec![list.clone()];
    for &version in older.iter().rev() {
        let (size, list) = match parts::list_of(kv, version) {
            Some(list) => {
                let fresh: usize = list
                    .iter()
                    .filter(|p| !counted.contains(&p.hash))
                    .map(|p| p.len)
                    .sum();
                (fresh, Some(list))
            }
            None => (text_size(kv, version), None),
        };
        if size > 0 && size > budget {
            writes.push(Write::Delete {
                key: history_text_key(version),
            });
            writes.push(Write::Delete {
                key: parts::parts_key(version),
            });
            // An entry of the layout before holds its text itself.
            if let Some(mut old) = kv
                .get(&history_key(version))
                .and_then(|v| serde_json::from_slice::<HistoryEntry>(v).ok())
            {
                old.text = None;
                old.text_bytes = None;
                writes.push(Write::Put {
                    key: history_key(version),
                    value: serde_json::to_vec(&old).unwrap_or_default(),
                });
            }
        } else if let Some(list) = list {
            counted.extend(list.iter().map(|p| p.hash));
            kept_lists.push(list);
        }
        budget = budget.saturating_sub(size);
    }
    let kept: Vec<&[parts::PartRef]> = kept_lists.iter().map(Vec::as_slice).collect();
    writes.extend(parts::unreferenced(kv, &kept));
    writes.push(Write::Put {
        key: parts::parts_key(entry.version),
        value: parts::encode_list(&list),
    });
    writes.push(Write::Put {
        key: history_key(entry.version),
        value: serde_json::to_vec(&entry).unwrap_or_default(),
    });
    writes
}

#[cfg(test)]
mod history_tests;

/// A command of user `admin` received on `gtm1` (tests of the machine).
#[cfg(test)]
pub(crate) fn admin_command(action: Action) -> Command {
    Command::new(
        Actor {
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
