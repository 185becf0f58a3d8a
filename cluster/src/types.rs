//! The openraft type configuration and the value types the application sees.
//!
//! `pub` here are only our own types; the openraft aliases are `pub(crate)`.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Cursor;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A device of the cluster, as membership records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    pub datacenter: String,
    /// Base URL of the device's API, where `rpc_router` is mounted,
    /// e.g. `http://127.0.0.1:8053`.
    pub api_addr: String,
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {})", self.name, self.datacenter, self.api_addr)
    }
}

/// A value of the replicated map. Shared: a copy of the map (each apply
/// publishes one) copies pointers, not the values.
pub type Value = ::bytes::Bytes;

/// The replicated key/value map.
pub type Map = BTreeMap<String, Value>;

/// One change to the replicated key/value map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Write {
    Put {
        key: String,
        #[serde(with = "bytes")]
        value: Vec<u8>,
    },
    Delete {
        key: String,
    },
}

impl Write {
    /// Makes this change to `map`.
    pub fn apply_to(self, map: &mut Map) {
        match self {
            Write::Put { key, value } => {
                map.insert(key, Value::from(value));
            }
            Write::Delete { key } => {
                map.remove(&key);
            }
        }
    }
}

/// A [`Write`] as a store kept it: the key and its new value (`None`:
/// removed), the value being the very bytes the store holds.
#[derive(Debug, Clone)]
pub struct Kept {
    pub key: String,
    pub value: Option<Value>,
}

impl Kept {
    /// Makes this change to `map`.
    pub fn apply_to(self, map: &mut Map) {
        match self.value {
            Some(value) => {
                map.insert(self.key, value);
            }
            None => {
                map.remove(&self.key);
            }
        }
    }
}

/// One command as the log carries it: the application's bytes, applied by
/// its [`Machine`](crate::Machine) on every device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal(#[serde(with = "bytes::shared")] pub Value);

/// A byte string through serde as one block, not a sequence of `u8`s: the
/// same bincode bytes (a length, then the bytes), copied at once instead of
/// one element at a time, which for a 30 MB command is the difference
/// between milliseconds and seconds.
pub(crate) mod bytes {
    use std::fmt;

    use serde::de::{Error, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(value: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(value)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }

    /// A shared byte string ([`Value`](super::Value)), as one block: a
    /// clone of what holds it (a log entry the log store keeps decoded)
    /// is a pointer's, not a copy of a command's megabytes.
    pub(crate) mod shared {
        use serde::{Deserializer, Serializer};

        pub(crate) fn serialize<S: Serializer>(
            value: &super::super::Value,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            super::serialize(value, s)
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<super::super::Value, D::Error> {
            super::deserialize(d).map(super::super::Value::from)
        }
    }

    /// A map of byte strings (the replicated map in a snapshot), each value
    /// as one block.
    pub(crate) mod map {
        use std::collections::BTreeMap;
        use std::fmt;

        use serde::de::{MapAccess, Visitor};
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        struct Out<'a>(&'a [u8]);

        impl Serialize for Out<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }

        struct In(Vec<u8>);

        impl<'de> Deserialize<'de> for In {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                super::deserialize(d).map(In)
            }
        }

        pub(crate) fn serialize<S: Serializer>(
            value: &super::super::Map,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_map(value.iter().map(|(k, v)| (k, Out(v))))
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<super::super::Map, D::Error> {
            d.deserialize_map(MapVisitor)
        }

        struct MapVisitor;

        impl<'de> Visitor<'de> for MapVisitor {
            type Value = super::super::Map;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of byte strings")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((k, In(v))) = m.next_entry::<String, In>()? {
                    out.insert(k, super::super::Value::from(v));
                }
                Ok(out)
            }
        }
    }

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }

        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            // Bounded by what the input holds, not by its size hint.
            let mut out = Vec::new();
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
}

/// The replicated map as of a log index, published after every apply and
/// every snapshot install. `kv` is shared, never mutated in place: compare
/// with `Arc::ptr_eq` to skip unchanged maps.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    pub index: u64,
    pub kv: Arc<Map>,
}

openraft::declare_raft_types!(
    /// gtm's Raft type configuration.
    pub(crate) TypeConfig:
        D = Proposal,
        R = Vec<u8>,
        NodeId = u64,
        Node = NodeInfo,
        SnapshotData = Cursor<Vec<u8>>,
);

pub(crate) type Raft = openraft::Raft<TypeConfig>;
pub(crate) type Entry = openraft::Entry<TypeConfig>;
pub(crate) type LogId = openraft::LogId<u64>;
pub(crate) type Vote = openraft::Vote<u64>;
pub(crate) type StorageError = openraft::StorageError<u64>;
pub(crate) type StorageIOError = openraft::StorageIOError<u64>;
pub(crate) type StoredMembership = openraft::StoredMembership<u64, NodeInfo>;
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<u64, NodeInfo>;
pub(crate) type Snapshot = openraft::Snapshot<TypeConfig>;

/// The first byte of every value this crate stores or sends: it marks the
/// value as carrying a format number in its second byte. No value of the
/// plain bincode that came before ("format 0") starts with 0xff: each
/// begins with an unsigned varint (a length, a term, a deadline) or an enum
/// or `Option` tag, for which bincode never writes 0xff.
pub(crate) const FORMAT_MARKER: u8 = 0xff;
/// The format written: 1 is bincode 2, standard configuration, serde mode.
pub(crate) const FORMAT: u8 = 1;

/// bincode 2 with its standard configuration, through serde (openraft's
/// types implement serde, not bincode's own traits), behind
/// [`FORMAT_MARKER`] and [`FORMAT`]: a later layout gets a new number and
/// this version refuses it by name instead of misreading it.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, bincode::error::EncodeError> {
    let mut out = vec![FORMAT_MARKER, FORMAT];
    bincode::serde::encode_into_std_write(value, &mut out, bincode::config::standard())?;
    Ok(out)
}

/// The most memory one decode may claim for its containers. bincode
/// allocates a byte string's declared length before reading it: without a
/// limit, a 20-byte body declaring a 200 TB string aborts the device. Claims
/// count in-memory sizes, which may exceed the encoded size (a `Vec` of
/// structs), so this is well above the 256 MiB largest body.
pub(crate) const DECODE_LIMIT: usize = 512 * 1024 * 1024;

/// The standard configuration with [`DECODE_LIMIT`]: the same encoding.
pub(crate) fn decoding() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<DECODE_LIMIT>()
}

/// Reads what [`encode`] wrote, and format 0 (the same bincode without the
/// two leading bytes, as devices stored and sent it before the format
/// byte; docs/decisions.md). Refuses a format newer than this version's.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, bincode::error::DecodeError> {
    let bytes = match bytes {
        [FORMAT_MARKER, FORMAT, rest @ ..] => rest,
        [FORMAT_MARKER, other, ..] => {
            return Err(bincode::error::DecodeError::OtherString(format!(
                "data in format {other}, written by a newer gtm; this version reads format {FORMAT} (and 0)"
            )));
        }
        [FORMAT_MARKER] => {
            return Err(bincode::error::DecodeError::OtherString(
                "data cut short after its format marker".into(),
            ));
        }
        legacy => legacy,
    };
    decode_body(bytes)
}

/// The bincode after a value's two leading bytes, whole.
fn decode_body<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, bincode::error::DecodeError> {
    let (value, read) = bincode::serde::decode_from_slice(bytes, decoding())?;
    if read != bytes.len() {
        return Err(bincode::error::DecodeError::OtherString(format!(
            "{} trailing bytes",
            bytes.len() - read
        )));
    }
    Ok(value)
}

/// The second byte of a log entry stored without its command, which is in
/// a file of its own (`log_files`): a layout of the log store's alone. A
/// gtm that predates it refuses such an entry by name ("format 128"), as
/// any newer format.
pub(crate) const FORMAT_COMMAND_IN_FILE: u8 = 0x80;

/// [`encode`] with [`FORMAT_COMMAND_IN_FILE`] for its format byte.
pub(crate) fn encode_command_in_file<T: Serialize>(
    value: &T,
) -> Result<Vec<u8>, bincode::error::EncodeError> {
    let mut out = vec![FORMAT_MARKER, FORMAT_COMMAND_IN_FILE];
    bincode::serde::encode_into_std_write(value, &mut out, bincode::config::standard())?;
    Ok(out)
}

/// What [`encode_command_in_file`] wrote, or `None` for any other value.
pub(crate) fn decode_command_in_file<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Option<Result<T, bincode::error::DecodeError>> {
    match bytes {
        [FORMAT_MARKER, FORMAT_COMMAND_IN_FILE, rest @ ..] => Some(decode_body(rest)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_length_beyond_the_limit_is_an_error_not_an_allocation() {
        // A byte string declaring 2^47 bytes (found by the raft_rpc fuzz
        // target): it used to abort the process on the allocation.
        let body = [0xfd, 0, 0, 0, 0, 0, 0x80, 0, 0];
        assert!(decode::<Vec<u8>>(&body).is_err());
        assert!(decode::<String>(&body).is_err());
        assert!(decode::<Proposal>(&body).is_err());
    }

    #[test]
    fn values_carry_their_format_and_format_0_still_reads() {
        let proposal = Proposal(vec![1, 2, 3].into());
        let bytes = encode(&proposal).unwrap();
        assert_eq!(&bytes[..2], &[FORMAT_MARKER, FORMAT]);
        assert_eq!(decode::<Proposal>(&bytes).unwrap(), proposal);
        // Written before the format byte: plain bincode.
        let legacy = bincode::serde::encode_to_vec(&proposal, bincode::config::standard()).unwrap();
        assert_ne!(legacy[0], FORMAT_MARKER);
        assert_eq!(decode::<Proposal>(&legacy).unwrap(), proposal);
        let vote = Vote::new(300, 2);
        let legacy = bincode::serde::encode_to_vec(vote, bincode::config::standard()).unwrap();
        assert_ne!(legacy[0], FORMAT_MARKER);
        assert_eq!(decode::<Vote>(&legacy).unwrap(), vote);
        // A newer format is refused by name, not misread.
        let mut newer = bytes.clone();
        newer[1] = FORMAT + 1;
        let err = decode::<Proposal>(&newer).unwrap_err().to_string();
        assert!(err.contains("format 2"), "{err}");
        assert!(decode::<Proposal>(&[FORMAT_MARKER]).is_err());
    }

    #[test]
    fn byte_strings_keep_the_bincode_of_a_sequence_of_bytes() {
        let proposal = Proposal(vec![0, 1, 250, 255].into());
        let as_seq =
            bincode::serde::encode_to_vec(vec![0u8, 1, 250, 255], bincode::config::standard())
                .unwrap();
        let as_bytes =
            bincode::serde::encode_to_vec(&proposal, bincode::config::standard()).unwrap();
        assert_eq!(as_seq, as_bytes);
        assert_eq!(decode::<Proposal>(&as_seq).unwrap(), proposal);
    }

    #[test]
    fn bodies_under_the_limit_still_decode() {
        let proposal = Proposal(vec![7; 1 << 20].into());
        let bytes = encode(&proposal).unwrap();
        assert_eq!(decode::<Proposal>(&bytes).unwrap(), proposal);
    }
}
