//! What a drain takes out of answers: the replicated operator state names
//! it, the engine applies it, the API and CLI parse it.

use serde::{Deserialize, Serialize};

/// What a drain takes out of answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DrainTarget {
    /// An address (IP or CNAME target) in one record (`Some(label)`) or in
    /// every record (`None`).
    Address {
        record: Option<String>,
        address: String,
    },
    /// Every address of a datacenter.
    Datacenter { name: String },
}

impl std::fmt::Display for DrainTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Address {
                record: None,
                address,
            } => write!(f, "{address} (every record)"),
            Self::Address {
                record: Some(r),
                address,
            } => write!(f, "{address} of {r}"),
            Self::Datacenter { name } => write!(f, "datacenter {name}"),
        }
    }
}
