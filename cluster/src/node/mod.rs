//! [`ClusterNode`]: the facade the application drives the cluster through.
//!
//! It owns the openraft instance (rebuilt by [`ClusterNode::force_single`]),
//! the shared HTTP client, and the applied-state watch. Every call that needs
//! a quorum is bounded in time: without one it fails with
//! [`ClusterError::NoQuorum`] naming the members not heard from.
//!
//! This file holds the node itself: its settings, start, accessors and
//! shutdown. Its calls live by concern: `membership` (initialize, add and
//! remove members), `propose` (commands to the leader, forwarded when this
//! device follows), `status` (a device's view of the cluster, quorum),
//! `log` (large commands written ahead, elections held off meanwhile,
//! compaction) and `recovery` (a single member forced, the cluster
//! forgotten).

// openraft's `StorageError` (224 bytes) is fixed by its traits' signatures.
#![allow(clippy::result_large_err)]

mod log;
mod membership;
mod propose;
mod recovery;
mod status;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::Fatal;
use openraft::{RaftMetrics, SnapshotPolicy};
use tokio::sync::watch;

use crate::Store;
use crate::error::ClusterError;
use crate::log_store::{LogStore, PreWritten};
use crate::machine::Machine;
use crate::rpc_client::{Contacts, NetworkFactory, SharedSecret};
use crate::state_machine::StateMachine;
use crate::types::{Applied, NodeInfo, Raft};

pub use status::{ClusterStatus, MemberStatus, NodeState};

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

    /// The replicated map, updated after every apply and snapshot install.
    pub fn applied(&self) -> watch::Receiver<Applied> {
        self.applied_tx.subscribe()
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
