//! [`ClusterError`]: why a cluster operation failed, shared by the facade
//! (`node`), the forwarding client (`forward`) and the RPC routes. On its
//! own so that none of them imports another for the error type.

use serde::{Deserialize, Serialize};

use crate::types::{NodeInfo, StorageError};

/// Why a cluster operation failed. Each message says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ClusterError {
    #[error("this device is not the cluster leader; {}", match leader {
        Some((id, info)) => format!("send the request to the leader, device {id} {info}"),
        None => "no leader is known right now; retry shortly".to_string(),
    })]
    NotLeader { leader: Option<(u64, NodeInfo)> },
    #[error(
        "no quorum: the change cannot be committed; not heard from: {}. \
         Bring those devices back, or, if they are lost for good, run the \
         recovery command on this device to continue alone",
        if unreachable.is_empty() { "(none identified)".to_string() }
        else { unreachable.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ") }
    )]
    NoQuorum { unreachable: Vec<NodeInfo> },
    /// A proposed command whose fate is not known: it was handed to a
    /// leader that then stopped answering. It may still apply.
    #[error("outcome unknown: {0}")]
    Unknown(String),
    #[error("cluster storage failed: {0}")]
    Storage(String),
    #[error("cluster network failed: {0}")]
    Network(String),
    #[error("invalid cluster request: {0}")]
    Invalid(String),
}

impl From<StorageError> for ClusterError {
    fn from(e: StorageError) -> Self {
        Self::Storage(e.to_string())
    }
}
