//! Raft rebuilt on this device's own storage: a single member forced
//! after the permanent loss of the other voters, and the cluster forgotten
//! once this device's removal committed. Both stop Raft, change its state
//! on disk and start it again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use openraft::{CommittedLeaderId, EntryPayload, Membership};

use super::status::no_members;
use super::{ClusterNode, WRITE_TIMEOUT, spawn_raft};
use crate::error::ClusterError;
use crate::log_store::LogStore;
use crate::state_machine::StateMachine;
use crate::types::Raft;
use crate::types::{Entry, LogId, Vote};

impl ClusterNode {
    /// Recovery after the permanent loss of the other voters: makes this
    /// device the only member, without a quorum.
    ///
    /// openraft cannot change membership without a quorum, and refuses to
    /// initialize a node that has a log. So this stops Raft, appends to the
    /// local log a membership entry `{this device}` under a new term (and
    /// saves a vote for that term), and starts Raft again. On start-up the
    /// last membership in the log is the effective one even uncommitted, so
    /// this device, sole voter, elects itself and commits that entry and
    /// everything before it. Entries the lost leader committed but never sent
    /// here are lost. The lost devices must have their data wiped before
    /// being added back.
    pub async fn force_single(&self) -> Result<(), ClusterError> {
        let _lifecycle = self.lifecycle.lock().await;
        let raft = self.raft();
        let metrics = raft.metrics().borrow().clone();
        if no_members(&metrics) {
            return Err(ClusterError::Invalid(
                "this device is not part of a cluster: nothing to recover".into(),
            ));
        }
        tracing::warn!(id = self.id(), "forcing a single-member cluster");
        if let Err(e) = raft.shutdown().await {
            return Err(ClusterError::Storage(format!("stopping raft: {e}")));
        }

        let log = LogStore::open(self.store.db(), self.store.log_files())?;
        let vote = log.vote()?;
        let last = log.last_log_id()?;
        let term = vote
            .map_or(0, |v| v.leader_id().get_term())
            .max(last.map_or(0, |l| l.leader_id.get_term()))
            + 1;
        let index = last.map_or(0, |l| l.index + 1);
        let membership = Membership::new(
            vec![BTreeSet::from([self.id()])],
            BTreeMap::from([(self.id(), self.info.clone())]),
        );
        let entry = Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, self.id()), index),
            payload: EntryPayload::Membership(membership),
        };
        log.write_direct(&[entry], &Vote::new(term, self.id()))
            .await?;

        let raft = self.respawn_raft(self.id()).await?;
        *self.raft.lock().unwrap_or_else(|p| p.into_inner()) = raft.clone();
        let id = self.id();
        raft.wait(Some(WRITE_TIMEOUT * 3))
            .metrics(
                move |m| {
                    m.current_leader == Some(id) && m.last_applied.is_some_and(|l| l.index >= index)
                },
                "sole leader after recovery",
            )
            .await
            .map_err(|e| ClusterError::Invalid(format!("recovery did not take effect: {e}")))?;
        tracing::warn!(id, index, "now the only member of the cluster");
        Ok(())
    }

    /// Forgets the cluster, once the cluster committed this device's
    /// removal: stops Raft, clears its log, vote, state machine and snapshot
    /// (one transaction: a crash leaves all of it or none), and starts Raft
    /// again as `new_id`, a member of no cluster, guarded by `secret`. The
    /// device can then initialize a cluster or join one.
    ///
    /// The id must be new: with its log and vote wiped, a device that kept
    /// its id could vote twice in one term. The new secret makes the old
    /// cluster's RPCs (a late heartbeat) fail instead of feeding its log to
    /// a device that left. The rest of the store (the application's
    /// configuration, events, health) is not touched.
    pub async fn reset(&self, new_id: u64, secret: &str) -> Result<(), ClusterError> {
        if secret.is_empty() {
            return Err(ClusterError::Invalid("the cluster secret is empty".into()));
        }
        let _lifecycle = self.lifecycle.lock().await;
        let old_id = self.id();
        if new_id == old_id {
            return Err(ClusterError::Invalid(
                "a device that forgets its cluster needs a new node id".into(),
            ));
        }
        if let Err(e) = self.raft().shutdown().await {
            return Err(ClusterError::Storage(format!("stopping raft: {e}")));
        }
        let cleared = match (
            LogStore::open(self.store.db(), self.store.log_files()),
            StateMachine::tree(self.store.db()),
        ) {
            (Ok(log), Ok(sm)) => log.clear_with(&sm).await,
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        // Nothing was cleared: run on as before rather than without Raft.
        let id = if cleared.is_ok() { new_id } else { old_id };
        if cleared.is_ok() {
            self.secret.set(secret);
        }
        let raft = self.respawn_raft(id).await?;
        {
            let mut current = self.raft.lock().unwrap_or_else(|p| p.into_inner());
            *current = raft;
            self.id.store(id, Ordering::SeqCst);
        }
        cleared?;
        tracing::warn!(
            old_id,
            new_id,
            "left the cluster: raft state cleared, new node id"
        );
        Ok(())
    }
}

impl ClusterNode {
    /// A new Raft instance as `id` over this node's store and network,
    /// replacing one shut down by a recovery or a reset.
    async fn respawn_raft(&self, id: u64) -> Result<Raft, ClusterError> {
        spawn_raft(
            id,
            &self.store,
            &self.prewritten,
            self.raft_config.clone(),
            &self.network,
            &self.applied_tx,
            &self.machine,
        )
        .await
    }
}
