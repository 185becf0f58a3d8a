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
//! the text back byte for byte, whatever it holds. A part is kept
//! deflated ([`gtm_cluster::parts::pack`]; a map written before holds
//! them as they are, and reads either) and inflated when read.

use std::collections::HashSet;

use serde::Deserialize;

use gtm_cluster::{
    Map, Write,
    parts::{Cut, Part, Splice, cut, pack, recut},
};

pub(super) const PART_PREFIX: &str = "config-part/";
pub(super) const PARTS_PREFIX: &str = "history-parts/";
/// The committed configuration's parts, in order ([`encode_list`]).
pub(super) const LIST_KEY: &str = "config-list";
/// The first byte of a list as [`encode_list`] writes it.
const LIST_FORMAT: u8 = 1;
/// The bytes of one part in a list: its hash and its length.
const ENTRY_BYTES: usize = 16 + 8;

/// One part of a text: the hash of its bytes and their length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PartRef {
    pub hash: [u8; 16],
    pub len: usize,
}

/// A list of parts as the map keeps it: a format byte, then per part its
/// hash and its length (8 bytes, little-endian). A list of a million
/// records' text has thousands of parts, and history keeps a list per
/// version: read back on every configuration change, it is copied, not
/// parsed.
pub(super) fn encode_list(list: &[PartRef]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + list.len() * ENTRY_BYTES);
    bytes.push(LIST_FORMAT);
    for p in list {
        bytes.extend_from_slice(&p.hash);
        bytes.extend_from_slice(&(p.len as u64).to_le_bytes());
    }
    bytes
}

/// A list as [`encode_list`] writes it, or as JSON (`[{"hash": hex,
/// "len": n}]`, lists written before); `None` for anything else.
pub(super) fn decode_list(bytes: &[u8]) -> Option<Vec<PartRef>> {
    match bytes.split_first() {
        Some((&LIST_FORMAT, entries)) if entries.len().is_multiple_of(ENTRY_BYTES) => entries
            .chunks_exact(ENTRY_BYTES)
            .map(|e| {
                let (hash, len) = e.split_first_chunk::<16>()?;
                let len = u64::from_le_bytes(len.try_into().ok()?);
                Some(PartRef {
                    hash: *hash,
                    len: usize::try_from(len).ok()?,
                })
            })
            .collect(),
        Some((b'[', _)) => {
            #[derive(Deserialize)]
            struct Json {
                hash: String,
                len: usize,
            }
            let list: Vec<Json> = serde_json::from_slice(bytes).ok()?;
            list.into_iter()
                .map(|p| {
                    Some(PartRef {
                        hash: unhex(&p.hash)?,
                        len: p.len,
                    })
                })
                .collect()
        }
        _ => None,
    }
}

/// 32 hex digits as 16 bytes.
fn unhex(hex: &str) -> Option<[u8; 16]> {
    let mut out = [0; 16];
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

pub(super) fn parts_key(version: u64) -> String {
    format!("{PARTS_PREFIX}{version:020}")
}

/// The key of a part: its hash in hex.
fn part_key(hash: &[u8; 16]) -> String {
    format!("{PART_PREFIX}{}", gtm_model::random::hex(hash))
}

/// The hash of a part: the same on every device and with every build.
fn hash(bytes: &[u8]) -> [u8; 16] {
    gtm_cluster::parts::part_hash(bytes)
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

/// The parts of the text `splice` makes of the committed one (whose parts
/// are `previous`, their bytes `pieces` when the caller has them), and
/// the writes that keep those the map lacks. The parts away from the edit
/// are taken from `previous` (neither cut nor hashed again), so an edit
/// cuts and hashes what it changed. `None` when the edit takes bytes from
/// a committed text the map lacks a part of.
pub(super) fn keep(
    kv: &Map,
    splice: Splice,
    previous: &[PartRef],
    pieces: Option<&[Part]>,
) -> Option<(Vec<PartRef>, Vec<Write>)> {
    let looked_up;
    let before: &[Part] = match pieces {
        Some(pieces) if pieces.len() == previous.len() => pieces,
        _ if splice.front + splice.back == 0 => &[],
        _ => {
            looked_up = self::pieces(kv, previous)?;
            &looked_up
        }
    };
    let mut list = Vec::new();
    let mut writes = Vec::new();
    let mut written = HashSet::new();
    let recut = recut(before, splice);
    for part in &recut.parts {
        let (hash, len) = match part {
            Cut::Before(i) => (previous.get(*i)?.hash, before.get(*i)?.len()),
            Cut::New(_) => {
                let bytes = recut.of(part, before)?;
                let hash = hash(bytes);
                let key = part_key(&hash);
                // Copied only when not kept already (a text applied again
                // has every part).
                if !kv.contains_key(&key) && written.insert(hash) {
                    writes.push(Write::Put {
                        key,
                        value: pack(bytes),
                    });
                }
                (hash, bytes.len())
            }
        };
        list.push(PartRef { hash, len });
    }
    Some((list, writes))
}

/// The committed configuration's parts, when the map keeps it so.
pub(super) fn current_list(kv: &Map) -> Option<Vec<PartRef>> {
    kv.get(LIST_KEY).and_then(|v| decode_list(v))
}

/// The parts version `version` keeps, if it keeps its text as parts.
pub(super) fn list_of(kv: &Map, version: u64) -> Option<Vec<PartRef>> {
    kv.get(&parts_key(version)).and_then(|v| decode_list(v))
}

/// The text the parts make, if the map holds every one.
pub(super) fn join(kv: &Map, list: &[PartRef]) -> Option<Vec<u8>> {
    pieces(kv, list).map(|pieces| gtm_cluster::parts::joined(&pieces))
}

/// The parts of a list as the map holds them, in order, if it holds every
/// one (each of the length the list says), not yet inflated.
pub(super) fn pieces<'a>(kv: &'a Map, list: &[PartRef]) -> Option<Vec<Part<'a>>> {
    list.iter()
        .map(|p| {
            kv.get(&part_key(&p.hash))
                .and_then(|v| Part::kept(v))
                .filter(|part| part.len() == p.len)
        })
        .collect()
}

/// Deletes the parts of the map that no list in `kept` names.
pub(super) fn unreferenced(kv: &Map, kept: &[&[PartRef]]) -> Vec<Write> {
    let named: HashSet<[u8; 16]> = kept
        .iter()
        .flat_map(|list| list.iter().map(|p| p.hash))
        .collect();
    kv.range(PART_PREFIX.to_string()..)
        .take_while(|(k, _)| k.starts_with(PART_PREFIX))
        .filter(|(k, _)| unhex(&k[PART_PREFIX.len()..]).is_none_or(|h| !named.contains(&h)))
        .map(|(k, _)| Write::Delete { key: k.clone() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_back_and_a_list_written_as_json_still_reads() {
        let list = vec![
            PartRef {
                hash: [7; 16],
                len: 5,
            },
            PartRef {
                hash: hash(b"x"),
                len: 1,
            },
        ];
        assert_eq!(decode_list(&encode_list(&list)), Some(list.clone()));
        assert_eq!(decode_list(&encode_list(&[])), Some(Vec::new()));
        let json = format!(
            r#"[{{"hash":"{}","len":5}}]"#,
            gtm_model::random::hex(&[7; 16])
        );
        assert_eq!(decode_list(json.as_bytes()), Some(vec![list[0]]));
        for bad in [
            &b""[..],
            b"\x01abc",
            b"\x02",
            "[{\"hash\":\"\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\",\"len\":1}]".as_bytes(),
            br#"[{"hash":"zz","len":1}]"#,
        ] {
            assert_eq!(decode_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn equal_parts_are_kept_once() {
        let mut kv = Map::new();
        let one = b"head\n[[domain]]\nname = \"x\"\n[[domain]]\nname = \"y\"\n";
        let (first, writes) = keep(&kv, Splice::whole(one.to_vec()), &[], None).unwrap();
        assert_eq!(writes.len(), 3);
        for w in writes {
            w.apply_to(&mut kv);
        }
        assert_eq!(join(&kv, &first).unwrap(), one);
        // The second text changes one domain: one part is new.
        let two = b"head\n[[domain]]\nname = \"x\"\nttl = 5\n[[domain]]\nname = \"y\"\n";
        // As an edit of the first: a line inserted after `name = "x"`.
        let at = one.windows(4).position(|w| w == b"\"x\"\n").unwrap() + 4;
        let edit = Splice {
            front: at,
            middle: b"ttl = 5\n".to_vec(),
            back: one.len() - at,
        };
        let (second, writes) = keep(&kv, edit, &first, None).unwrap();
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
