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

/// One change to the replicated key/value map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Write {
    Put { key: String, value: Vec<u8> },
    Delete { key: String },
}

impl Write {
    /// Makes this change to `map`.
    pub fn apply_to(self, map: &mut BTreeMap<String, Vec<u8>>) {
        match self {
            Write::Put { key, value } => {
                map.insert(key, value);
            }
            Write::Delete { key } => {
                map.remove(&key);
            }
        }
    }
}

/// One command as the log carries it: the application's bytes, applied by
/// its [`Machine`](crate::Machine) on every device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal(pub Vec<u8>);

/// The replicated map as of a log index, published after every apply and
/// every snapshot install. `kv` is shared, never mutated in place: compare
/// with `Arc::ptr_eq` to skip unchanged maps.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    pub index: u64,
    pub kv: Arc<BTreeMap<String, Vec<u8>>>,
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

/// bincode 2 with its standard configuration, through serde: openraft's
/// types implement serde, not bincode's own traits.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, bincode::error::EncodeError> {
    bincode::serde::encode_to_vec(value, bincode::config::standard())
}

/// The most memory one decode may claim for its containers. bincode
/// allocates a byte string's declared length before reading it: without a
/// limit, a 20-byte body declaring a 200 TB string aborts the device. Claims
/// count in-memory sizes, which may exceed the encoded size (a `Vec` of
/// structs), so this is well above the 64 MiB largest body.
pub(crate) const DECODE_LIMIT: usize = 256 * 1024 * 1024;

/// The standard configuration with [`DECODE_LIMIT`]: the same encoding.
pub(crate) fn decoding() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<DECODE_LIMIT>()
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(
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
    fn bodies_under_the_limit_still_decode() {
        let proposal = Proposal(vec![7; 1 << 20]);
        let bytes = encode(&proposal).unwrap();
        assert_eq!(decode::<Proposal>(&bytes).unwrap(), proposal);
    }
}
