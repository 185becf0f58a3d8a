//! Configuration texts in the replicated map as content-addressed parts.
//!
//! A text is cut as [`gtm_cluster::parts::cut`] says (before each
//! `[[domain]]` line, and inside a long domain where the bytes at a line
//! say), each part kept once in the map under the hash of
//! its bytes (`config-part/<hash>`). The committed configuration is the
//! list of its parts (`config-list`), and so is each version history
//! keeps (`history-parts/<version>`): versions share what they did not
//! change, and an edit writes the parts it changed and a list, not the
//! whole text. The cut is a storage matter only: joining the parts gives
//! the text back byte for byte, whatever it holds.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use gtm_cluster::{Map, Write, parts::cut};

pub(super) const PART_PREFIX: &str = "config-part/";
pub(super) const PARTS_PREFIX: &str = "history-parts/";
/// The committed configuration's parts, in order (JSON `[PartRef]`).
pub(super) const LIST_KEY: &str = "config-list";

/// One part of a text: the hash of its bytes and their length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PartRef {
    pub hash: String,
    pub len: usize,
}

pub(super) fn parts_key(version: u64) -> String {
    format!("{PARTS_PREFIX}{version:020}")
}

fn part_key(hash: &str) -> String {
    format!("{PART_PREFIX}{hash}")
}

/// The hash of a part, in hex: the same on every device and with every
/// build.
fn hash(bytes: &[u8]) -> String {
    crate::identity::hex(&gtm_cluster::parts::part_hash(bytes))
}

/// The parts of `text` without the map: what a list of them would be.
pub(super) fn list_of_text(text: &[u8]) -> Vec<PartRef> {
    cut(text)
        .into_iter()
        .map(|part| PartRef {
            hash: hash(part),
            len: part.len(),
        })
        .collect()
}

/// The parts of `text`, and the writes that keep those the map lacks. A
/// part equal to the one at the same place in `previous` (the committed
/// text's parts), counted from the start or from the end, takes its hash
/// without hashing it again: an edit hashes what it changed.
pub(super) fn keep(kv: &Map, text: &[u8], previous: &[PartRef]) -> (Vec<PartRef>, Vec<Write>) {
    let mut list = Vec::new();
    let mut writes = Vec::new();
    let mut written = HashSet::new();
    let parts = cut(text);
    let count = parts.len();
    for (i, part) in parts.into_iter().enumerate() {
        let from_end = (previous.len() + i).checked_sub(count);
        let same = [previous.get(i), from_end.and_then(|j| previous.get(j))]
            .into_iter()
            .flatten()
            .find(|p| {
                p.len == part.len() && kv.get(&part_key(&p.hash)).is_some_and(|b| b[..] == *part)
            });
        let hash = match same {
            Some(p) => p.hash.clone(),
            None => hash(part),
        };
        let key = part_key(&hash);
        if !kv.contains_key(&key) && written.insert(hash.clone()) {
            writes.push(Write::Put {
                key,
                value: part.to_vec(),
            });
        }
        list.push(PartRef {
            hash,
            len: part.len(),
        });
    }
    (list, writes)
}

/// The committed configuration's parts, when the map keeps it so.
pub(super) fn current_list(kv: &Map) -> Option<Vec<PartRef>> {
    kv.get(LIST_KEY)
        .and_then(|v| serde_json::from_slice(v).ok())
}

/// The parts version `version` keeps, if it keeps its text as parts.
pub(super) fn list_of(kv: &Map, version: u64) -> Option<Vec<PartRef>> {
    kv.get(&parts_key(version))
        .and_then(|v| serde_json::from_slice(v).ok())
}

/// The text the parts make, if the map holds every one.
pub(super) fn join(kv: &Map, list: &[PartRef]) -> Option<Vec<u8>> {
    let mut text = Vec::with_capacity(list.iter().map(|p| p.len).sum());
    for p in list {
        text.extend_from_slice(kv.get(&part_key(&p.hash))?);
    }
    Some(text)
}

/// Deletes the parts of the map that no list in `kept` names.
pub(super) fn unreferenced(kv: &Map, kept: &[&[PartRef]]) -> Vec<Write> {
    let named: HashSet<&str> = kept
        .iter()
        .flat_map(|list| list.iter().map(|p| p.hash.as_str()))
        .collect();
    kv.range(PART_PREFIX.to_string()..)
        .take_while(|(k, _)| k.starts_with(PART_PREFIX))
        .filter(|(k, _)| !named.contains(&k[PART_PREFIX.len()..]))
        .map(|(k, _)| Write::Delete { key: k.clone() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_parts_are_kept_once() {
        let mut kv = Map::new();
        let one = b"head\n[[domain]]\nname = \"x\"\n[[domain]]\nname = \"y\"\n";
        let (first, writes) = keep(&kv, one, &[]);
        assert_eq!(writes.len(), 3);
        for w in writes {
            w.apply_to(&mut kv);
        }
        assert_eq!(join(&kv, &first).unwrap(), one);
        // The second text changes one domain: one part is new.
        let two = b"head\n[[domain]]\nname = \"x\"\nttl = 5\n[[domain]]\nname = \"y\"\n";
        let (second, writes) = keep(&kv, two, &first);
        assert_eq!(writes.len(), 1);
        for w in writes {
            w.apply_to(&mut kv);
        }
        assert_eq!((&second[0], &second[2]), (&first[0], &first[2]));
        assert_eq!(join(&kv, &second).unwrap(), two);
        // Only what no kept list names goes.
        let gone = unreferenced(&kv, &[&second]);
        assert_eq!(gone.len(), 1);
        assert!(matches!(&gone[0], Write::Delete { key } if *key == part_key(&first[1].hash)));
    }
}
