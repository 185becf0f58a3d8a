//! [`ClusterNode`]: the facade the application drives the cluster through.
//!
//! It owns the openraft instance (rebuilt by [`ClusterNode::force_single`]),
//! the shared HTTP client, and the applied-state watch. Every call that needs
//! a quorum is bounded in time: without one it fails with
//! [`ClusterError::NoQuorum`] naming the members not heard from.

// openraft's `StorageError` (224 bytes) is fixed by its traits' signatures.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, Fatal, InitializeError, RaftError};
use openraft::{
    ChangeMembers, CommittedLeaderId, EntryPayload, Membership, RaftMetrics, ServerState,
    SnapshotPolicy,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::Store;
use crate::error::ClusterError;
use crate::log_store::{IN_FILE_BYTES, LogStore, PreWrite, PreWritten};
use crate::machine::Machine;
use crate::rpc_client::{Contacts, NetworkFactory, SharedSecret};
use crate::state_machine::StateMachine;
use crate::types::{Applied, Entry, LogId, NodeInfo, Proposal, Raft, Vote};

/// The largest command [`ClusterNode::propose`] accepts. Every entry
/// travels in one append RPC: one far larger would hold replication (and
/// the heartbeats behind it) for seconds. The application refuses larger
/// ones first, with its own message.
pub const MAX_COMMAND_BYTES: usize = 128 * 1024 * 1024;
/// A membership change that cannot reach a quorum fails after this.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long [`ClusterNode::propose`] keeps trying: following leader
/// changes, retrying a leader that cannot confirm its quorum. Longer than
/// an election (at most 1 s, plus the vote round trips).
pub const PROPOSE_DEADLINE: Duration = Duration::from_secs(8);
/// The rate at which a command's size is assumed to be applied: a leader
/// answers a command once it applied it, and a configuration of a million
/// records (60 MB) takes its state machine seconds to parse and check.
const APPLY_BYTES_PER_SEC: u64 = 2_000_000;

/// How much longer than [`PROPOSE_DEADLINE`] a command of `bytes` is
/// waited for, and an install of it: at [`APPLY_BYTES_PER_SEC`] (30 s for
/// 60 MB; nothing to speak of for a command of kilobytes).
pub fn apply_allowance(bytes: usize) -> Duration {
    Duration::from_millis((bytes as u64).saturating_mul(1000) / APPLY_BYTES_PER_SEC)
}
/// How long a leader waits for a quorum to confirm it leads, before it
/// proposes anything.
const QUORUM_CHECK: Duration = Duration::from_millis(1500);
/// Adding a member waits this long for it to catch up (it may need a
/// snapshot) before it is made a voter ([`ClusterConfig::join_timeout`]).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(30);
/// A snapshot is built after this many log entries since the last one.
pub const SNAPSHOT_EVERY: u64 = 1000;
/// The size of one chunk of a snapshot sent to a peer.
const SNAPSHOT_CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// Entries kept behind a snapshot, so a briefly lagging peer needs none.
pub const LOGS_KEPT_BEHIND_SNAPSHOT: u64 = 100;

/// Why a frozen node ([`ClusterConfig::frozen`]) refuses Raft.
pub const FROZEN: &str = "this device started on a read-only data directory: it takes no part in Raft until it can write its store";

/// How a device takes part in the cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub node_id: u64,
    pub info: NodeInfo,
    /// Shared by all devices; sent with, and required on, every Raft RPC.
    pub secret: String,
    pub heartbeat_ms: u64,
    /// Election timeout, randomised in `[min, max)` milliseconds.
    pub election_timeout_ms: (u64, u64),
    /// The HTTP client for Raft RPC, e.g. one that trusts the cluster's TLS
    /// certificates; `None`: a plain pooled client.
    pub http: Option<reqwest::Client>,
    /// The store is a copy (the device's data directory is read-only): Raft
    /// neither elects, nor sends heartbeats, nor answers its peers, so no
    /// vote or log entry is ever written where it would be lost.
    pub frozen: bool,
    /// How long adding a voter waits for it to catch up ([`JOIN_TIMEOUT`]).
    pub join_timeout: Duration,
}

impl ClusterConfig {
    /// With the default timing: heartbeat 50 ms, election 150–300 ms
    /// (docs/cluster.md: a new leader well within 1.5 s of a crash).
    pub fn new(node_id: u64, info: NodeInfo, secret: impl Into<String>) -> Self {
        Self {
            node_id,
            info,
            secret: secret.into(),
            heartbeat_ms: 50,
            election_timeout_ms: (150, 300),
            http: None,
            frozen: false,
            join_timeout: JOIN_TIMEOUT,
        }
    }
}

fn fatal(e: Fatal<u64>) -> ClusterError {
    match e {
        Fatal::StorageError(e) => ClusterError::Storage(e.to_string()),
        Fatal::Panicked => ClusterError::Storage("the raft core task panicked".into()),
        Fatal::Stopped => ClusterError::Invalid("the cluster node is shut down".into()),
    }
}

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

/// A running cluster member. Cheap to share (`Arc`); [`rpc_router`](crate::rpc_router)
/// serves its Raft RPC.
pub struct ClusterNode {
    id: AtomicU64,
    info: NodeInfo,
    secret: SharedSecret,
    /// The device's store: its engine, and the files beside it.
    store: Store,
    /// Large commands written to their files before Raft's core appends
    /// them.
    prewritten: PreWritten,
    /// Large appends from the leader being received now ([`ClusterNode::hold_elections`]).
    large_appends: AtomicU64,
    raft_config: Arc<openraft::Config>,
    network: NetworkFactory,
    contacts: Arc<Contacts>,
    applied_tx: Arc<watch::Sender<Applied>>,
    machine: Arc<dyn Machine>,
    /// Replaced by `force_single`; cloned out for each call.
    raft: Mutex<Raft>,
    /// Serialises `force_single` and `shutdown`.
    lifecycle: tokio::sync::Mutex<()>,
    /// [`ClusterConfig::frozen`].
    frozen: bool,
    /// [`ClusterConfig::join_timeout`].
    join_timeout: Duration,
}

impl fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterNode")
            .field("id", &self.id())
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl ClusterNode {
    /// Opens the Raft log and state machine in `store`'s database and starts
    /// Raft. A device that was a member resumes with its membership and data;
    /// a new one waits for [`initialize`](Self::initialize) or to be added.
    pub async fn start(
        store: &Store,
        config: ClusterConfig,
        machine: Arc<dyn Machine>,
    ) -> Result<Arc<Self>, ClusterError> {
        let ClusterConfig {
            node_id,
            info,
            secret,
            heartbeat_ms,
            election_timeout_ms: (election_min, election_max),
            http,
            frozen,
            join_timeout,
        } = config;
        if secret.is_empty() {
            return Err(ClusterError::Invalid("the cluster secret is empty".into()));
        }
        let raft_config = openraft::Config {
            cluster_name: "gtm".into(),
            heartbeat_interval: heartbeat_ms,
            election_timeout_min: election_min,
            election_timeout_max: election_max,
            install_snapshot_timeout: 10_000,
            // Snapshots travel in chunks of this size (`rpc_client`), each
            // within `install_snapshot_timeout`, however large the whole.
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY),
            max_in_snapshot_log_to_keep: LOGS_KEPT_BEHIND_SNAPSHOT,
            enable_tick: !frozen,
            enable_heartbeat: !frozen,
            enable_elect: !frozen,
            ..Default::default()
        }
        .validate()
        .map_err(|e| ClusterError::Invalid(format!("cluster timing: {e}")))?;
        let contacts = Arc::new(Contacts::default());
        let secret = SharedSecret::new(&secret);
        let network = NetworkFactory::new(secret.clone(), contacts.clone(), http)
            .map_err(|e| ClusterError::Network(format!("building the HTTP client: {e}")))?;
        let applied_tx = Arc::new(watch::Sender::new(Applied::default()));
        let store = store.clone();
        let prewritten = PreWritten::default();
        let raft = spawn_raft(
            node_id,
            &store,
            &prewritten,
            Arc::new(raft_config.clone()),
            &network,
            &applied_tx,
            &machine,
        )
        .await?;
        tracing::info!(node_id, %info, "cluster node started");
        Ok(Arc::new(Self {
            id: AtomicU64::new(node_id),
            info,
            secret,
            store,
            prewritten,
            large_appends: AtomicU64::new(0),
            raft_config: Arc::new(raft_config),
            network,
            contacts,
            applied_tx,
            machine,
            raft: Mutex::new(raft),
            lifecycle: tokio::sync::Mutex::new(()),
            frozen,
            join_timeout,
        }))
    }

    /// Whether this node runs on a copy of its store ([`ClusterConfig::frozen`]).
    pub fn frozen(&self) -> bool {
        self.frozen
    }

    pub fn id(&self) -> u64 {
        self.id.load(Ordering::SeqCst)
    }

    /// This device as membership records it.
    pub fn info(&self) -> &NodeInfo {
        &self.info
    }

    pub(crate) fn raft(&self) -> Raft {
        self.raft.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The cluster secret this device holds now (while a join is in flight,
    /// the joined cluster's, before it is kept on disk).
    pub fn secret(&self) -> Arc<str> {
        self.secret.get()
    }

    /// Adopts the secret of a cluster this device is about to join. Only a
    /// device that belongs to no cluster yet may change it.
    pub fn set_secret(&self, secret: &str) -> Result<(), ClusterError> {
        if secret.is_empty() {
            return Err(ClusterError::Invalid("the cluster secret is empty".into()));
        }
        if !self.status().members.is_empty() {
            return Err(ClusterError::Invalid(
                "this device already belongs to a cluster; leave it first".into(),
            ));
        }
        self.secret.set(secret);
        Ok(())
    }

    pub(crate) fn contacts(&self) -> &Contacts {
        &self.contacts
    }

    fn metrics(&self) -> RaftMetrics<u64, NodeInfo> {
        self.raft().metrics().borrow().clone()
    }

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

    /// Proposes `command` to the cluster and returns the outcome its
    /// [`Machine`] gave when the command was committed and applied, from any
    /// member: a follower forwards it to the leader, following leader
    /// changes until [`PROPOSE_DEADLINE`], and for as much longer as the
    /// command's size asks ([`apply_allowance`]).
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

    /// Keeps this device from standing for election while the returned
    /// guard lives: held while an append of 1 MiB or more from the leader
    /// is received, decoded and appended. openraft sends the leader's
    /// heartbeats on the stream that carries its appends, so none arrives
    /// while a large one is on its way; a 57 MB whole configuration takes
    /// longer than the election timeout to arrive and be written, and the
    /// follower stood for election during every whole apply, taking the
    /// leadership from a leader that was only busy sending. Standing is
    /// liveness, never safety: the device still answers votes, and stands
    /// again as soon as the append is done (its leader lease renewed by
    /// it) or has failed (its RPC timeout bounds it).
    pub(crate) fn hold_elections(&self) -> ElectionsHeld<'_> {
        if self.large_appends.fetch_add(1, Ordering::SeqCst) == 0 {
            self.raft().runtime_config().elect(false);
        }
        ElectionsHeld { node: self }
    }

    /// Where the Raft log keeps its large commands.
    pub(crate) fn log_files(&self) -> crate::side_files::SideFiles {
        self.store.log_files()
    }

    /// Writes each of `commands` of [`IN_FILE_BYTES`] or more to its file
    /// ahead of the append that will carry it (on the blocking pool), for
    /// the log store to rename rather than write while Raft's core waits.
    /// What cannot be written so is written by the append, as ever.
    pub(crate) async fn prewrite(&self, commands: &[crate::types::Value]) -> Vec<PreWrite> {
        let large: Vec<_> = commands
            .iter()
            .filter(|c| c.len() >= IN_FILE_BYTES)
            .cloned()
            .collect();
        if large.is_empty() {
            return Vec::new();
        }
        let (prewritten, files) = (self.prewritten.clone(), self.store.log_files());
        let written = tokio::task::spawn_blocking(move || {
            large
                .iter()
                .filter_map(|command| match prewritten.write(&files, command) {
                    Ok(guard) => Some(guard),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot write a large command ahead of its append");
                        None
                    }
                })
                .collect()
        })
        .await;
        written.unwrap_or_default()
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
            if metrics
                .membership_config
                .membership()
                .nodes()
                .next()
                .is_none()
            {
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

    fn ensure_leader(&self) -> Result<(), ClusterError> {
        let metrics = self.metrics();
        match metrics.current_leader {
            Some(l) if l == self.id() => Ok(()),
            Some(l) => Err(ClusterError::NotLeader {
                leader: leader_of(&metrics, l),
            }),
            None => Err(ClusterError::NotLeader { leader: None }),
        }
    }

    fn write_error(&self, e: RaftError<u64, ClientWriteError<u64, NodeInfo>>) -> ClusterError {
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

    /// The members (other than this device) not heard from within an
    /// election timeout.
    fn no_quorum(&self) -> ClusterError {
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

    /// The replicated map, updated after every apply and snapshot install.
    pub fn applied(&self) -> watch::Receiver<Applied> {
        self.applied_tx.subscribe()
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

    /// Builds a snapshot of everything applied, then purges the log up to
    /// it (openraft defers the purge while a member still replicates those
    /// entries). Returns the snapshot's last log index.
    pub async fn compact(&self) -> Result<u64, ClusterError> {
        let raft = self.raft();
        let Some(applied) = raft.metrics().borrow().last_applied else {
            return Err(ClusterError::Invalid(
                "nothing applied yet: nothing to compact".into(),
            ));
        };
        raft.trigger().snapshot().await.map_err(fatal)?;
        let metrics = raft
            .wait(Some(WRITE_TIMEOUT * 3))
            .metrics(
                move |m| m.snapshot.is_some_and(|s| s.index >= applied.index),
                "snapshot built",
            )
            .await
            .map_err(|e| ClusterError::Storage(format!("building a snapshot: {e}")))?;
        let upto = metrics.snapshot.map_or(applied.index, |s| s.index);
        raft.trigger().purge_log(upto).await.map_err(fatal)?;
        Ok(upto)
    }

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
        if metrics
            .membership_config
            .membership()
            .nodes()
            .next()
            .is_none()
        {
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

        let raft = spawn_raft(
            self.id(),
            &self.store,
            &self.prewritten,
            self.raft_config.clone(),
            &self.network,
            &self.applied_tx,
            &self.machine,
        )
        .await?;
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
        let raft = spawn_raft(
            id,
            &self.store,
            &self.prewritten,
            self.raft_config.clone(),
            &self.network,
            &self.applied_tx,
            &self.machine,
        )
        .await?;
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

    /// Stops Raft. The RPC routes then answer with an error; the caller
    /// stops its HTTP server.
    pub async fn shutdown(&self) {
        let _lifecycle = self.lifecycle.lock().await;
        if let Err(e) = self.raft().shutdown().await {
            tracing::error!(error = %e, "raft did not stop cleanly");
        }
    }
}

async fn spawn_raft(
    id: u64,
    store: &Store,
    prewritten: &PreWritten,
    config: Arc<openraft::Config>,
    network: &NetworkFactory,
    applied_tx: &Arc<watch::Sender<Applied>>,
    machine: &Arc<dyn Machine>,
) -> Result<Raft, ClusterError> {
    let log = LogStore::open(store.db(), store.log_files())?
        .preparing_for(machine.clone())
        .with_prewritten(prewritten.clone());
    let sm = StateMachine::open(
        store.db(),
        store.snapshot_files(),
        applied_tx.clone(),
        machine.clone(),
    )?;
    let raft = Raft::new(id, config, network.clone(), log, sm)
        .await
        .map_err(fatal)?;
    // One round trip to the core: it reports the state loaded from disk
    // (membership, log, vote) before serving it, so status() is right at once.
    raft.with_raft_state(|_| ()).await.map_err(fatal)?;
    Ok(raft)
}

/// Elections held off ([`ClusterNode::hold_elections`]) until this goes.
pub(crate) struct ElectionsHeld<'a> {
    node: &'a ClusterNode,
}

impl Drop for ElectionsHeld<'_> {
    fn drop(&mut self) {
        if self.node.large_appends.fetch_sub(1, Ordering::SeqCst) == 1 && !self.node.frozen {
            self.node.raft().runtime_config().elect(true);
        }
    }
}

fn leader_of(metrics: &RaftMetrics<u64, NodeInfo>, id: u64) -> Option<(u64, NodeInfo)> {
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
