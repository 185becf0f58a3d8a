//! A configuration text kept in history as content-addressed parts.
//!
//! A text is cut before every line that opens a `[[domain]]` table, so a
//! change to one domain changes one part; each part is kept once in the
//! map under the hash of its bytes (`config-part/<hash>`), and a version
//! keeps the list of its parts (`history-parts/<version>`). Versions that
//! share parts share their bytes: history holds the changed domains of
//! each version, not a whole text per version. The cut is a storage
//! matter only: joining the parts gives the text back byte for byte,
//! whatever it holds.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use gtm_cluster::{Map, Write};

pub(super) const PART_PREFIX: &str = "config-part/";
pub(super) const PARTS_PREFIX: &str = "history-parts/";

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

/// The first 16 bytes of the SHA-256 of `bytes`, in hex: the same on every
/// device and with every build.
fn hash(bytes: &[u8]) -> String {
    crate::identity::hex(&ring::digest::digest(&ring::digest::SHA256, bytes).as_ref()[..16])
}

/// `text` cut before every line that opens a `[[domain]]` table.
pub(super) fn split(text: &[u8]) -> Vec<&[u8]> {
    const OPEN: &[u8] = b"[[domain]]";
    let mut parts = Vec::new();
    let mut start = 0;
    let mut line = 0;
    while line < text.len() {
        if line > start && text[line..].starts_with(OPEN) {
            parts.push(&text[start..line]);
            start = line;
        }
        line = match text[line..].iter().position(|&b| b == b'\n') {
            Some(end) => line + end + 1,
            None => text.len(),
        };
    }
    if start < text.len() {
        parts.push(&text[start..]);
    }
    parts
}

/// The parts of `text`, and the writes that keep those the map lacks. A
/// part equal to the one at the same place in `previous` (the newest
/// version's parts) takes its hash without hashing it again.
pub(super) fn keep(kv: &Map, text: &[u8], previous: &[PartRef]) -> (Vec<PartRef>, Vec<Write>) {
    let mut list = Vec::new();
    let mut writes = Vec::new();
    let mut written = HashSet::new();
    for (i, part) in split(text).into_iter().enumerate() {
        let same = previous.get(i).filter(|p| {
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
    fn a_text_is_cut_before_each_domain_and_joins_back_whole() {
        let text = b"[[check]]\nname = \"a\"\n\n[[domain]]\nname = \"x\"\n# [[domain]] in a comment\n[[domain.record]]\nname = \"w\"\n\n[[domain]]\nname = \"y\"\n";
        let parts = split(text);
        assert_eq!(parts.len(), 3);
        assert!(parts[1].starts_with(b"[[domain]]\nname = \"x\""));
        assert!(parts[2].starts_with(b"[[domain]]\nname = \"y\""));
        assert_eq!(parts.concat(), text);
        assert_eq!(split(b"[[domain]]\nname = \"x\"").len(), 1);
        assert!(split(b"").is_empty());
        assert_eq!(
            split(b"no domain, no end of line"),
            vec![&b"no domain, no end of line"[..]]
        );
    }

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
