//! Who asked for a change: carried by every command, shown in history and
//! GTM Logs, and by every layer that records a change.

use serde::{Deserialize, Serialize};

/// Who asked for a change: the API token's name and the device that
/// received the request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Actor {
    pub user: String,
    pub device: String,
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {}", self.user, self.device)
    }
}
