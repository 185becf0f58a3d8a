//! Membership: a new cluster initialized on this device, members added
//! (as learners that catch up, then voters) and removed. Only on the
//! leader, each bounded by [`WRITE_TIMEOUT`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::ChangeMembers;
use openraft::error::{InitializeError, RaftError};
use tokio::time::Instant;

use super::{ClusterNode, WRITE_TIMEOUT, fatal};
use crate::error::ClusterError;
use crate::types::{LogId, NodeInfo, Raft};

impl ClusterNode {
    /// Makes this device the single member of a new cluster (the first
    /// device), and returns once it leads it.
    pub async fn initialize(&self) -> Result<(), ClusterError> {
        let raft = self.raft();
        let members = BTreeMap::from([(self.id(), self.info.clone())]);
        raft.initialize(members).await.map_err(|e| match e {
            RaftError::APIError(InitializeError::NotAllowed(_)) => ClusterError::Invalid(
                "this device is already part of a cluster: it cannot be initialized again".into(),
            ),
            RaftError::APIError(e) => ClusterError::Invalid(e.to_string()),
            RaftError::Fatal(e) => fatal(e),
        })?;
        let id = self.id();
        raft.wait(Some(WRITE_TIMEOUT * 3))
            .metrics(
                move |m| m.current_leader == Some(id),
                "leader of a new cluster",
            )
            .await
            .map_err(|e| {
                ClusterError::Invalid(format!("initialized but did not become leader: {e}"))
            })?;
        Ok(())
    }

    /// Adds a device: first as a learner, which waits until it has caught
    /// up (from a snapshot if needed), then as a voter if `voter`. Only on
    /// the leader.
    pub async fn add_member(
        &self,
        id: u64,
        info: NodeInfo,
        voter: bool,
    ) -> Result<(), ClusterError> {
        self.ensure_leader()?;
        let raft = self.raft();
        let started = Instant::now();
        let added =
            match tokio::time::timeout(WRITE_TIMEOUT, raft.add_learner(id, info, false)).await {
                Err(_) => return Err(self.no_quorum()),
                Ok(res) => res.map_err(|e| self.write_error(e))?,
            };
        if voter {
            // Made a voter only once it holds the log: until then every
            // entry would wait on it (with a pair, on it alone). openraft's
            // own wait (`add_learner`'s `blocking`) gives up after half a
            // second, before a large configuration's snapshot is installed.
            let left = self.join_timeout.saturating_sub(started.elapsed());
            if let Err(e) = self.until_caught_up(&raft, id, added.log_id, left).await {
                // Not left half-added: the learner goes again.
                let gone = ChangeMembers::RemoveNodes(BTreeSet::from([id]));
                if let Err(removing) = self.change_membership(&raft, gone).await {
                    tracing::error!(id, error = %removing, "cannot remove a device that did not catch up");
                }
                return Err(e);
            }
            let change = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
            self.change_membership(&raft, change).await?;
        }
        tracing::info!(id, voter, "member added");
        Ok(())
    }

    /// Waits until the leader has replicated to `id` up to `log_id`.
    async fn until_caught_up(
        &self,
        raft: &Raft,
        id: u64,
        log_id: LogId,
        within: Duration,
    ) -> Result<(), ClusterError> {
        raft.wait(Some(within))
            .metrics(
                |m| {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id).copied().flatten())
                        .is_some_and(|matched| matched.index >= log_id.index)
                },
                "the new device holds the log",
            )
            .await
            .map(|_| ())
            .map_err(|_| {
                ClusterError::Network(format!(
                    "the device did not catch up with the cluster within {} s (the snapshot of a large configuration, or the device cannot be reached from here); it was not added",
                    self.join_timeout.as_secs()
                ))
            })
    }

    /// Removes a device from the cluster entirely. Only on the leader.
    pub async fn remove_member(&self, id: u64) -> Result<(), ClusterError> {
        self.ensure_leader()?;
        let raft = self.raft();
        let metrics = raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership();
        let change = if membership.voter_ids().any(|v| v == id) {
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else if membership.get_node(&id).is_some() {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        } else {
            return Err(ClusterError::Invalid(format!(
                "device {id} is not a member"
            )));
        };
        self.change_membership(&raft, change).await?;
        tracing::info!(id, "member removed");
        Ok(())
    }

    async fn change_membership(
        &self,
        raft: &Raft,
        change: ChangeMembers<u64, NodeInfo>,
    ) -> Result<(), ClusterError> {
        match tokio::time::timeout(WRITE_TIMEOUT, raft.change_membership(change, false)).await {
            Err(_) => Err(self.no_quorum()),
            Ok(res) => res.map(|_| ()).map_err(|e| self.write_error(e)),
        }
    }
}
