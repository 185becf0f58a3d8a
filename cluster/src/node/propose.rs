//! Proposing a command: on the leader after it confirmed its quorum, or
//! forwarded to the leader from a follower (`crate::forward`), following
//! leader changes until the deadline.

use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use tokio::time::Instant;

use super::status::{leader_of, no_members};
use super::{
    ClusterNode, FROZEN, MAX_COMMAND_BYTES, PROPOSE_DEADLINE, QUORUM_CHECK, apply_allowance, fatal,
};
use crate::error::ClusterError;
use crate::types::{NodeInfo, Proposal, Raft};

impl ClusterNode {
    /// Proposes `command` to the cluster and returns the outcome its
    /// [`Machine`](crate::Machine) gave when the command was committed and
    /// applied, from any member: a follower forwards it to the leader,
    /// following leader changes until [`PROPOSE_DEADLINE`], and for as much
    /// longer as the command's size asks ([`apply_allowance`]).
    ///
    /// A retry may deliver a command twice: the application recognises a
    /// command it applied already (by an id inside it) and answers the
    /// first outcome again. Errors:
    /// - [`ClusterError::NoQuorum`]: refused before it was proposed
    ///   anywhere; it will never apply;
    /// - [`ClusterError::Unknown`]: it was handed to a leader that then
    ///   stopped answering; it may still apply;
    /// - `Invalid`, `Storage`: this device cannot propose at all.
    pub async fn propose(&self, command: Vec<u8>) -> Result<Vec<u8>, ClusterError> {
        if self.frozen {
            return Err(ClusterError::Storage(FROZEN.into()));
        }
        if command.len() > MAX_COMMAND_BYTES {
            return Err(ClusterError::Invalid(format!(
                "the command is {} bytes; the limit is {MAX_COMMAND_BYTES} bytes",
                command.len()
            )));
        }
        let waited = PROPOSE_DEADLINE + apply_allowance(command.len());
        let deadline = Instant::now() + waited;
        let mut maybe_proposed = None;
        loop {
            let attempt = match self.wait_for_leader(deadline).await {
                Ok(raft) => self.propose_here(&raft, command.clone(), deadline).await,
                Err(ClusterError::NotLeader {
                    leader: Some((id, leader)),
                }) => {
                    let secret = self.secret.get();
                    let sent = crate::forward::propose(
                        &self.network.client,
                        &secret,
                        &leader,
                        &command,
                        deadline,
                    );
                    // A leader that stops answering (paused, cut off) is
                    // replaced by an election: give up on it then and send
                    // the command (same id) to the new one.
                    tokio::select! {
                        answer = sent => answer,
                        () = self.leader_moves_from(id) => Err(ClusterError::Unknown(format!(
                            "the leader {leader} was replaced while it held the command"
                        ))),
                    }
                }
                Err(e) => Err(e),
            };
            let last = match attempt {
                Ok(outcome) => return Ok(outcome),
                Err(ClusterError::Unknown(why)) => {
                    maybe_proposed = Some(why.clone());
                    ClusterError::Unknown(why)
                }
                Err(e @ (ClusterError::NotLeader { .. } | ClusterError::NoQuorum { .. })) => e,
                Err(ClusterError::Network(why)) => ClusterError::Network(why),
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(match (maybe_proposed, last) {
                    (Some(why), _) => ClusterError::Unknown(format!(
                        "{why}; no leader confirmed the command within {}s",
                        waited.as_secs()
                    )),
                    (None, e @ ClusterError::NoQuorum { .. }) => e,
                    (None, _) => self.no_quorum(),
                });
            }
            tokio::time::sleep((deadline - now).min(Duration::from_millis(100))).await;
        }
    }

    /// Returns once this device knows a leader other than `id`.
    async fn leader_moves_from(&self, id: u64) {
        let mut rx = self.raft().metrics();
        loop {
            if rx
                .borrow_and_update()
                .current_leader
                .is_some_and(|l| l != id)
            {
                return;
            }
            if rx.changed().await.is_err() {
                // Raft stopped: the forward's own deadline ends the wait.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The leader's half of [`propose`](Self::propose), also what a
    /// forwarded command runs: refuses (`NotLeader`) unless this device
    /// leads.
    pub async fn propose_as_leader(
        &self,
        command: Vec<u8>,
        deadline: Instant,
    ) -> Result<Vec<u8>, ClusterError> {
        self.ensure_leader()?;
        self.propose_here(&self.raft(), command, deadline).await
    }

    /// Confirms leadership with a quorum first, then proposes: a leader cut
    /// off from its quorum refuses (`NoQuorum`) before anything enters its
    /// log, so "no quorum" means the command will never apply.
    async fn propose_here(
        &self,
        raft: &Raft,
        command: Vec<u8>,
        deadline: Instant,
    ) -> Result<Vec<u8>, ClusterError> {
        let check = QUORUM_CHECK.min(deadline.saturating_duration_since(Instant::now()));
        match tokio::time::timeout(check, raft.ensure_linearizable()).await {
            Err(_) => return Err(self.no_quorum()),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => {
                return Err(ClusterError::NotLeader {
                    leader: f.leader_id.zip(f.leader_node),
                });
            }
            Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)))) => {
                return Err(self.no_quorum());
            }
            Ok(Err(RaftError::Fatal(e))) => return Err(fatal(e)),
            Ok(Ok(_)) => {}
        }
        let command: crate::types::Value = command.into();
        // Written to its file here, not by Raft's core, which would answer
        // nothing meanwhile.
        let _written = self.prewrite(std::slice::from_ref(&command)).await;
        match tokio::time::timeout_at(deadline, raft.client_write(Proposal(command))).await {
            Err(_) => Err(ClusterError::Unknown(
                "the leader proposed the command but it was not committed in time".into(),
            )),
            Ok(Ok(resp)) => Ok(resp.data),
            // Not appended, or truncated away by a newer leader: it will
            // never apply here, and the caller may retry it elsewhere.
            Ok(Err(e)) => Err(self.write_error(e)),
        }
    }

    /// Returns this device's Raft handle if it leads; `NotLeader` if another
    /// live device leads; waits (until `deadline`) while no live leader is
    /// known, then `NoQuorum`.
    async fn wait_for_leader(&self, deadline: Instant) -> Result<Raft, ClusterError> {
        let stale = Duration::from_millis(self.raft_config.election_timeout_max);
        loop {
            let raft = self.raft();
            let mut rx = raft.metrics();
            let metrics = rx.borrow_and_update().clone();
            if no_members(&metrics) {
                return Err(ClusterError::Invalid(
                    "this device is not part of a cluster yet: initialize it or add it to one"
                        .into(),
                ));
            }
            match metrics.current_leader {
                Some(l) if l == self.id() => return Ok(raft),
                // A leader we heard from recently is worth forwarding to.
                Some(l) if self.contacts.age(l).is_some_and(|a| a < stale) => {
                    return Err(ClusterError::NotLeader {
                        leader: leader_of(&metrics, l),
                    });
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err(self.no_quorum());
            }
            // Heartbeats do not change metrics: poll them too.
            let tick = (deadline - Instant::now()).min(Duration::from_millis(100));
            let _ = tokio::time::timeout(tick, rx.changed()).await;
        }
    }

    pub(super) fn ensure_leader(&self) -> Result<(), ClusterError> {
        let metrics = self.metrics();
        match metrics.current_leader {
            Some(l) if l == self.id() => Ok(()),
            Some(l) => Err(ClusterError::NotLeader {
                leader: leader_of(&metrics, l),
            }),
            None => Err(ClusterError::NotLeader { leader: None }),
        }
    }

    pub(super) fn write_error(
        &self,
        e: RaftError<u64, ClientWriteError<u64, NodeInfo>>,
    ) -> ClusterError {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ClusterError::NotLeader {
                leader: f.leader_id.zip(f.leader_node),
            },
            RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
                ClusterError::Invalid(e.to_string())
            }
            RaftError::Fatal(e) => fatal(e),
        }
    }
}
