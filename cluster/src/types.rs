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

/// A batch of writes: one Raft log entry, applied atomically.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request(pub Vec<Write>);

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
        D = Request,
        R = (),
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

pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, bincode::error::DecodeError> {
    let (value, read) = bincode::serde::decode_from_slice(bytes, bincode::config::standard())?;
    if read != bytes.len() {
        return Err(bincode::error::DecodeError::OtherString(format!(
            "{} trailing bytes",
            bytes.len() - read
        )));
    }
    Ok(value)
}
