//! A device's view of the cluster ([`ClusterStatus`]): its role, its
//! leader, its members and whether it sees a working quorum; and, for a
//! call refused without one, the members not heard from.

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::error::Fatal;
use openraft::{RaftMetrics, ServerState};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::ClusterNode;
use crate::error::ClusterError;
use crate::rpc_client::Contacts;
use crate::types::NodeInfo;

/// A device's role, as Raft sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeState {
    Leader,
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

/// One member of the cluster, as seen from this device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    pub id: u64,
    pub info: NodeInfo,
    pub voter: bool,
    /// Milliseconds since this device last exchanged a Raft RPC with the
    /// member (None: not since start, or this device itself). On the leader
    /// it is the age of the last replication reply.
    pub last_contact_ms: Option<u64>,
}

/// A device's view of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub id: u64,
    pub state: NodeState,
    pub leader: Option<(u64, NodeInfo)>,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub applied_index: Option<u64>,
    /// Last log index covered by this device's current snapshot.
    pub snapshot_index: Option<u64>,
    /// Last log index removed from this device's log.
    pub purged_index: Option<u64>,
    /// Whether this device sees a working quorum: as leader, a majority of
    /// the voters (itself included) answered it within an election timeout;
    /// as follower or learner, its leader was heard from within one. False
    /// for a candidate. A leader without it shows as `Leader (no quorum)`:
    /// it refuses writes (`NoQuorum`) until its peers answer or a new
    /// leader replaces it.
    #[serde(default = "quorum_unknown")]
    pub quorum: bool,
    pub members: Vec<MemberStatus>,
    /// Why this device's Raft stopped by itself (a storage error, a
    /// panicked core): it then commits, applies and votes no more until it
    /// is restarted. `None` while it runs, and after an ordinary shutdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// A status from a device that does not report `quorum` yet: assumed held,
/// as its state alone said before.
fn quorum_unknown() -> bool {
    true
}

impl ClusterNode {
    /// The members (other than this device) not heard from within an
    /// election timeout.
    pub(super) fn no_quorum(&self) -> ClusterError {
        let stale = Duration::from_millis(self.raft_config.election_timeout_max);
        let metrics = self.metrics();
        let unreachable = metrics
            .membership_config
            .membership()
            .nodes()
            .filter(|(id, _)| **id != self.id())
            .filter(|(id, _)| self.contacts.age(**id).is_none_or(|a| a >= stale))
            .map(|(_, info)| info.clone())
            .collect();
        ClusterError::NoQuorum { unreachable }
    }

    pub fn status(&self) -> ClusterStatus {
        status_of(
            self.id(),
            &self.metrics(),
            &self.contacts,
            self.quorum_window(),
        )
    }

    /// How recent a contact must be to count towards a quorum: the time a
    /// follower waits before it may start an election (openraft's leader
    /// lease, the election timeout's upper bound, plus at most one more),
    /// so a heartbeat delayed by a busy machine does not flap the flag.
    fn quorum_window(&self) -> Duration {
        Duration::from_millis(2 * self.raft_config.election_timeout_max)
    }

    /// Waits until `pred` holds for this device's status, at most `timeout`.
    pub async fn wait_status(
        &self,
        timeout: Duration,
        pred: impl Fn(&ClusterStatus) -> bool,
    ) -> Result<ClusterStatus, ClusterError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut rx = self.raft().metrics();
            let status = status_of(
                self.id(),
                &rx.borrow_and_update(),
                &self.contacts,
                self.quorum_window(),
            );
            if pred(&status) {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(ClusterError::Invalid(format!(
                    "timed out after {timeout:?} waiting for the cluster state; last: {status:?}"
                )));
            }
            // Contact ages change without a metrics change: poll as well.
            let tick = (deadline - Instant::now()).min(Duration::from_millis(100));
            let _ = tokio::time::timeout(tick, rx.changed()).await;
        }
    }
}

/// Whether the membership these metrics show has no member: the device
/// belongs to no cluster yet (or any more).
pub(super) fn no_members(metrics: &RaftMetrics<u64, NodeInfo>) -> bool {
    metrics
        .membership_config
        .membership()
        .nodes()
        .next()
        .is_none()
}

pub(super) fn leader_of(metrics: &RaftMetrics<u64, NodeInfo>, id: u64) -> Option<(u64, NodeInfo)> {
    metrics
        .membership_config
        .membership()
        .get_node(&id)
        .map(|info| (id, info.clone()))
}

fn status_of(
    id: u64,
    m: &RaftMetrics<u64, NodeInfo>,
    contacts: &Contacts,
    window: Duration,
) -> ClusterStatus {
    let membership = m.membership_config.membership();
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let recent = |peer: u64| contacts.age(peer).is_some_and(|a| a < window);
    let quorum = match m.state {
        ServerState::Leader => {
            // In joint consensus `voter_ids` is the union of both
            // configurations: close enough for a status flag; writes are
            // guarded by `ensure_linearizable`, not by this.
            let acked = voters.iter().filter(|v| **v == id || recent(**v)).count();
            acked * 2 > voters.len()
        }
        ServerState::Follower | ServerState::Learner => {
            m.current_leader.is_some_and(|l| l == id || recent(l))
        }
        ServerState::Candidate | ServerState::Shutdown => false,
    };
    let members = membership
        .nodes()
        .map(|(mid, info)| MemberStatus {
            id: *mid,
            info: info.clone(),
            voter: voters.contains(mid),
            last_contact_ms: if *mid == id {
                None
            } else {
                contacts.age(*mid).map(|a| a.as_millis() as u64)
            },
        })
        .collect();
    ClusterStatus {
        id,
        state: match m.state {
            ServerState::Leader => NodeState::Leader,
            ServerState::Follower => NodeState::Follower,
            ServerState::Candidate => NodeState::Candidate,
            ServerState::Learner => NodeState::Learner,
            ServerState::Shutdown => NodeState::Shutdown,
        },
        leader: m.current_leader.and_then(|l| leader_of(m, l)),
        term: m.current_term,
        last_log_index: m.last_log_index,
        applied_index: m.last_applied.map(|l| l.index),
        snapshot_index: m.snapshot.map(|l| l.index),
        purged_index: m.purged.map(|l| l.index),
        quorum,
        members,
        failure: match &m.running_state {
            Ok(()) | Err(Fatal::Stopped) => None,
            Err(Fatal::StorageError(e)) => Some(format!("Raft storage failed: {e}")),
            Err(Fatal::Panicked) => Some("Raft's core task panicked".into()),
        },
    }
}
