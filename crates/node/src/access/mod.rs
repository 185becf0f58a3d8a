//! Who may do what (docs/access.md): the four roles, the principal a
//! request acts as, and the console's sessions.
//!
//! A request acts as a [`Principal`]: a named API token or user (with the
//! role it was given), or the device's own `api-token` file (`admin`). The
//! API's route table names the least role each route needs; the console's
//! pages ask for one the same way.

pub mod accounts;
pub mod password;
pub mod sessions;

use serde::{Deserialize, Serialize};

/// What a principal may do. Ordered: each role may do all the one below it
/// may (the order is [`Role::ALL`]'s, not the variants': stored commands
/// name a role by its variant's position, so a new one is appended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads everything: status, configuration, history, logs.
    Viewer,
    /// Also drains, check states, failback resumes and "Test now"; no
    /// configuration edits.
    Operator,
    /// Everything, the configuration, the cluster and the accounts included.
    Admin,
    /// Only reports health inputs: push checks' states and Alertmanager
    /// notifications (docs/health.md, "Inputs"); reads nothing.
    Reporter,
}

impl Role {
    /// Every role, least first.
    pub const ALL: [Role; 4] = [Role::Reporter, Role::Viewer, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
            Role::Reporter => "reporter",
        }
    }

    fn rank(self) -> usize {
        match self {
            Role::Reporter => 0,
            Role::Viewer => 1,
            Role::Operator => 2,
            Role::Admin => 3,
        }
    }
}

impl PartialOrd for Role {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Role {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role's name that is none of the four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?}: give reporter, viewer, operator or admin")]
pub struct UnknownRole(pub String);

impl std::str::FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            "reporter" => Ok(Role::Reporter),
            other => Err(UnknownRole(other.to_string())),
        }
    }
}

/// Who a request acts as, put in the request's extensions by the API's and
/// the console's authentication layers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The user's or token's name (`admin` for the device's `api-token`
    /// file): what history and the GTM Logs name as who made a change.
    pub name: String,
    pub role: Role,
    /// Set when the request came with a console session cookie.
    pub session: Option<SessionRef>,
}

/// The console session a request came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    pub id: String,
    /// The session's CSRF token: every state-changing request of the
    /// session must carry it (header `X-CSRF-Token` or form field `csrf`).
    pub csrf: String,
}

impl Principal {
    /// Whether this principal may do what `needed` may.
    pub fn allows(&self, needed: Role) -> bool {
        self.role >= needed
    }
}
