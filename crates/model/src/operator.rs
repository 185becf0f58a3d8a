//! The operator state as it is replicated (key `operator` of the committed
//! map): active drains, manual checks' states and failback resumes. The
//! state machine changes it (`gtm_node::machine::operator`); every device's
//! engine installs it (`gtm_engine::Engine::set_operator`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{actor::Actor, drain::DrainTarget};

pub const OPERATOR_KEY: &str = "operator";
/// Operator actions kept as event lines for the devices that install them.
pub const RECENT_KEPT: usize = 100;

/// Everything operators decided, as every device installs it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OperatorState {
    #[serde(default)]
    pub drains: Vec<Drain>,
    /// Manual checks' states, by check name.
    #[serde(default)]
    pub checks: BTreeMap<String, ManualCheck>,
    /// Resumes of each record (label): a device releases a manual-failback
    /// hold when the count moves past what it last saw.
    #[serde(default)]
    pub resumes: BTreeMap<String, u64>,
    /// The last operator actions, numbered: each device logs the ones it has
    /// not logged yet (one event per change, naming who).
    #[serde(default)]
    pub recent: Vec<Recent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Drain {
    /// `address`, with `record` (a label) when the drain is of one record;
    /// or `datacenter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<String>,
    pub actor: Actor,
    pub time_ms: u64,
}

impl Drain {
    pub fn target(&self) -> Option<DrainTarget> {
        match (&self.address, &self.datacenter) {
            (Some(address), None) => Some(DrainTarget::Address {
                record: self.record.clone(),
                address: address.clone(),
            }),
            (None, Some(name)) => Some(DrainTarget::Datacenter { name: name.clone() }),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ManualCheck {
    /// `ok` or `error`.
    pub state: String,
    pub actor: Actor,
    pub time_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recent {
    pub seq: u64,
    /// The record or object the action is about (the event's subject).
    pub object: String,
    pub text: String,
    /// `info` when absent.
    #[serde(default, skip_serializing_if = "crate::severity::Severity::is_info")]
    pub severity: crate::severity::Severity,
}

/// The operator state of a map (empty when none was ever set).
pub fn state_of(kv: &gtm_cluster::Map) -> OperatorState {
    kv.get(OPERATOR_KEY)
        .and_then(|v| serde_json::from_slice(v).ok())
        .unwrap_or_default()
}
