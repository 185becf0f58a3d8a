//! Why a proposed change did not apply, and how the API says so.

use crate::identity::IdentityError;
use gtm_cluster::{ClusterError, StoreError};
use gtm_model::{
    ConfigErrors,
    error::{ApiError, ErrorKind},
};

/// Why an apply did not happen. Nothing of the configuration was applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Invalid(ConfigErrors),
    #[error("{0}")]
    Store(gtm_cluster::StoreError),
    /// The cluster cannot commit; the message names the devices not heard
    /// from ([`ApplyError::no_quorum`]).
    #[error("{0}")]
    NoQuorum(String),
    /// Handed to a leader that stopped answering: it may still apply.
    #[error(
        "outcome unknown for command {command}: {why}. It may still apply: `gtm command status {command}` shows its fate"
    )]
    Unknown { command: String, why: String },
    /// Refused by the state machine: nothing changed, and nothing will.
    /// Shown as the validation errors when there are some, as before.
    #[error("{}", if .0.errors.is_empty() { .0.message.clone() } else { .0.errors.join("\n") })]
    Rejected(ApiError),
    #[error("{0}")]
    Cluster(String),
    /// This device's Raft stopped by itself (its storage failed): it can
    /// commit nothing until it is restarted.
    #[error(
        "this device cannot take writes: {0}; nothing was applied. Another device of the cluster \
         can; restart this one once its data directory can be written (docs/operations.md)"
    )]
    RaftFailed(String),
}

/// Why a device's replication did not start ([`Replication::start`]). Each
/// variant shows the message of the error it carries.
///
/// [`Replication::start`]: super::Replication::start
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The node id or the cluster secret in the data directory.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The Raft node did not start on the store.
    #[error(transparent)]
    Raft(#[from] ClusterError),
    /// The store did not give, or keep, the local map or the configuration
    /// it holds.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The configuration served (a device that kept none) could not be
    /// written as the text of the local map.
    #[error(transparent)]
    ServedConfig(toml::ser::Error),
    /// The thread that installs committed state could not be started.
    #[error(transparent)]
    InstallThread(std::io::Error),
}

impl ApplyError {
    /// No quorum, with the devices not heard from: none named when every
    /// device answers but the leader could not confirm a quorum in time (a
    /// busy machine, an election under way).
    pub fn no_quorum(unreachable: &[String]) -> Self {
        let why = if unreachable.is_empty() {
            "every device answers, but no quorum confirmed this device's leadership in time \
             (an election may be under way); nothing was applied, and nothing will be. Retry shortly"
                .to_string()
        } else {
            format!(
                "not heard from {}; nothing was applied, and nothing will be. Bring them back, \
                 or run `gtm cluster recover --force-single` on this device if they are lost for good",
                unreachable.join(", ")
            )
        };
        Self::NoQuorum(format!("no quorum: {why}"))
    }
}

impl From<ApplyError> for ApiError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Invalid(errors) => ApiError::invalid(errors),
            ApplyError::Store(e) => {
                ApiError::new(ErrorKind::StoreFailed, format!("{e}; nothing was applied"))
            }
            ApplyError::NoQuorum(_) => ApiError::new(ErrorKind::NoQuorum, e.to_string()),
            ApplyError::Unknown { .. } => ApiError::new(ErrorKind::OutcomeUnknown, e.to_string()),
            ApplyError::Rejected(e) => e,
            ApplyError::Cluster(message) => ApiError::new(ErrorKind::Cluster, message),
            ApplyError::RaftFailed(_) => ApiError::new(ErrorKind::Storage, e.to_string()),
        }
    }
}

pub(super) fn cluster_error(e: ClusterError) -> ApplyError {
    match e {
        ClusterError::NoQuorum { unreachable } => ApplyError::no_quorum(
            &unreachable
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
        ),
        other => ApplyError::Cluster(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_cluster::NodeInfo;

    #[test]
    fn no_quorum_names_the_devices_not_heard_from_or_says_none_is_missing() {
        let gtm2 = NodeInfo {
            name: "gtm2".into(),
            datacenter: "dc2".into(),
            api_addr: "http://127.0.0.2:8053".into(),
        };
        let named = cluster_error(ClusterError::NoQuorum {
            unreachable: vec![gtm2],
        })
        .to_string();
        assert!(
            named.starts_with(
                "no quorum: not heard from gtm2 (dc2, http://127.0.0.2:8053); nothing was applied"
            ),
            "{named}"
        );
        let none = cluster_error(ClusterError::NoQuorum {
            unreachable: Vec::new(),
        })
        .to_string();
        assert!(
            none.starts_with("no quorum: every device answers"),
            "{none}"
        );
        assert!(!none.contains("not heard from"), "{none}");
    }
}
