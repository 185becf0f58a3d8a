//! Configuration history: the versions kept (`history/<version>`), their
//! texts as part lists within a byte budget, and the lines a version and a
//! command's outcome keep of a long list of changes or errors.

use serde::{Deserialize, Serialize};

use super::parts;
use gtm_cluster::{Map, Write};
use gtm_model::actor::Actor;

const HISTORY_PREFIX: &str = "history/";

const HISTORY_TEXT_PREFIX: &str = "history-text/";

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

/// One configuration version, as history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryEntry {
    pub version: u64,
    pub time_ms: u64,
    pub actor: Actor,
    /// The command that made it (32 hex digits).
    pub command: String,
    /// What was asked: `apply`, `create check web`, `rollback to 6`, ….
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

pub(super) fn history_key(version: u64) -> String {
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
pub(super) fn text_size(kv: &Map, version: u64) -> usize {
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

/// The change lines history and the outcome keep of version `version`'s
/// `changes`.
pub(super) fn kept_changes(changes: &[String], version: u64) -> Vec<String> {
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

/// The new entry, whose text is the new committed one (`list`, its parts,
/// written already), and what keeps history within `keep` entries (at
/// least the new one) and `budget` bytes of text (newest texts first, a
/// part that versions share counted once; the new entry keeps its text
/// whatever its size). Only the entries whose whole text drops out
/// (written before parts) are read whole.
pub(super) fn history_writes(
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
