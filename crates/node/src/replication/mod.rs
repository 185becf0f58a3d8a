//! Glue between a device and its cluster (spec §4, docs/design-commands.md):
//! every change to replicated state is a [`Command`](crate::command::Command)
//! proposed to the cluster's leader and applied by every device's state
//! machine ([`GtmMachine`]) to the committed state; this module hands what
//! the machine applied to the engine.
//!
//! A device that belongs to no cluster yet (before `gtm cluster init` or
//! `join`) applies its commands with the same machine to its local map in
//! the store, as a single appliance.
//!
//! This file holds [`Replication`], its start, shutdown and status. The
//! rest by concern: `propose` (a change proposed to the cluster, or applied
//! to the local map in no cluster), `membership` (init, join, leave,
//! recover; the cluster secret and join token), `install` (what Raft
//! applied, handed to the engine), `error` (why an apply did not happen).

mod error;
mod install;
mod membership;
mod propose;

use std::{path::Path, sync::Arc};

pub use error::{ApplyError, StartError};
pub use membership::{JoinRequest, LeaveRequest, RemoteError, Written};
pub use propose::Applied;

use tokio::sync::watch;

use crate::{
    command::Command,
    identity,
    machine::{self, GtmMachine},
};
use gtm_cluster::{ClusterConfig, ClusterNode, ClusterStatus, LowPriority, Map, NodeInfo, Store};
use gtm_engine::Engine;
use gtm_model::error::ApiError;
use install::Handled;
use propose::local_map;

/// A device's membership in its cluster.
#[derive(Debug)]
pub struct Replication {
    node: Arc<ClusterNode>,
    engine: Arc<Engine>,
    store: Store,
    machine: Arc<GtmMachine>,
    /// The map of a device in no cluster; the lock serialises its commands.
    local: tokio::sync::Mutex<Arc<Map>>,
    /// The configuration (version, text hash) last handed to the engine.
    handled: std::sync::Mutex<Option<Handled>>,
    /// The log index up to which the engine has what Raft applied.
    installed: watch::Sender<u64>,
    dir: std::path::PathBuf,
    http: reqwest::Client,
    stop: tokio_util::sync::CancellationToken,
    /// Serialises joining and leaving.
    membership: tokio::sync::Mutex<()>,
    /// This device's `history_keep` node setting, put into its commands.
    history_keep: std::sync::atomic::AtomicU32,
    /// Device-to-device traffic is mutual TLS here: only then do DNSSEC
    /// keys travel in this device's commands when it is clustered.
    mutual_tls: std::sync::atomic::AtomicBool,
    /// Where committed state is installed (and a device in no cluster
    /// applies its commands): below Raft's and DNS's threads.
    install_thread: LowPriority,
}

impl Replication {
    /// Starts the device's Raft node (resuming its membership, if any). The
    /// task that installs committed state is [`Replication::install_committed`],
    /// run by the caller as a worker.
    /// `http` carries forwarded joins; `raft_http` the Raft RPC and
    /// forwarded commands (both trust the cluster's certificates when TLS
    /// is on). `frozen`: `store` is a copy of a read-only store, and Raft
    /// must not run on it ([`ClusterConfig::frozen`]).
    pub async fn start(
        store: &Store,
        dir: &Path,
        info: NodeInfo,
        engine: Arc<Engine>,
        http: reqwest::Client,
        raft_http: reqwest::Client,
        frozen: bool,
    ) -> Result<Arc<Self>, StartError> {
        let id = identity::node_id(dir)?;
        let secret = identity::secret(dir)?;
        let mut config = ClusterConfig::new(id, info, secret);
        config.http = Some(raft_http);
        config.frozen = frozen;
        let machine = Arc::new(GtmMachine::default());
        let node = ClusterNode::start(store, config, machine.clone()).await?;
        let local = local_map(store, &engine)?;
        let handled = store.load_config()?.map(|c| Handled {
            version: c.version,
            hash: machine::id_of_text(c.text.as_bytes()),
            value: None,
            zone_versions: c.zone_versions.into_iter().collect(),
        });
        let replication = Arc::new(Self {
            node,
            engine,
            store: store.clone(),
            machine,
            local: tokio::sync::Mutex::new(Arc::new(local)),
            handled: std::sync::Mutex::new(handled),
            installed: watch::Sender::new(0),
            dir: dir.to_path_buf(),
            http,
            stop: tokio_util::sync::CancellationToken::new(),
            membership: tokio::sync::Mutex::new(()),
            history_keep: std::sync::atomic::AtomicU32::new(gtm_model::node::HISTORY_KEPT as u32),
            mutual_tls: std::sync::atomic::AtomicBool::new(false),
            install_thread: LowPriority::spawn("gtm-install").map_err(StartError::InstallThread)?,
        });
        if !replication.clustered() {
            // A clustered device installs its state from Raft's first apply.
            let local = replication.local.lock().await.clone();
            replication
                .engine
                .set_operator(&machine::operator::state_of(&local));
            install::set_inputs(&replication.engine, &local);
            replication
                .engine
                .set_keys(gtm_dns::dnssec::keys::keyring_of(&local));
            replication
                .engine
                .dns()
                .cookies
                .install(machine::cookies::secrets_of(&local));
            replication
                .engine
                .dns()
                .tsig
                .store(Arc::new(gtm_dns::tsig::TsigKeys::of(&local)));
        }
        Ok(replication)
    }

    /// Stops Raft and the installing task, releasing the store.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.node.shutdown().await;
    }

    /// The Raft RPC routes the other devices call (append, vote, snapshot,
    /// forwarded proposals: `gtm_cluster::RPC_PATHS`), served by this
    /// device's node.
    pub fn rpc_router(&self) -> axum::Router {
        gtm_cluster::rpc_router(self.node.clone())
    }

    /// The configuration versions this device's commands keep in history
    /// (the `history_keep` node setting).
    pub fn set_history_keep(&self, keep: u32) {
        self.history_keep
            .store(keep, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether device-to-device traffic is mutual TLS here (the node
    /// file's `tls_cert` and `tls_key`): keys made by this device travel
    /// in its commands only then.
    pub fn set_mutual_tls(&self, mutual: bool) {
        self.mutual_tls
            .store(mutual, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether this device may make DNSSEC keys: alone, or under mutual
    /// TLS in a cluster (keys travel in the Raft log).
    pub fn makes_keys(&self) -> bool {
        !self.clustered() || self.mutual_tls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether this device belongs to a cluster.
    pub fn clustered(&self) -> bool {
        !self.node.status().members.is_empty()
    }

    pub fn status(&self) -> ClusterStatus {
        self.node.status()
    }

    /// Why this device's Raft stopped by itself (its storage failed): it
    /// then commits, applies and installs nothing until restarted.
    pub fn fault(&self) -> Option<String> {
        self.node.status().failure
    }

    /// Whether this device proposes the cluster's own commands (schedule
    /// firings, key and secret making): it leads with quorum, or is in no
    /// cluster. A leader without quorum proposes nothing: its entry would
    /// wait in its log and commit late, stamped with a time long past.
    pub fn proposes_for_cluster(&self) -> bool {
        if !self.clustered() {
            return true;
        }
        let status = self.status();
        status.state == gtm_cluster::NodeState::Leader && status.quorum
    }

    /// Whether the state this device applied would take `command`, the add
    /// of a schedule ([`GtmMachine::check_schedule`]): a schedule's dry
    /// run, answered without proposing anything. Reads the committed
    /// configuration (compiled to find the action's target) off the
    /// async threads.
    pub async fn check_schedule(&self, command: Command) -> Result<(), ApiError> {
        let (machine, kv) = (self.machine.clone(), self.state().await);
        tokio::task::spawn_blocking(move || machine.check_schedule(&kv, &command))
            .await
            .map_err(ApiError::internal)?
    }

    /// The replicated state this device applied: the cluster's map, or its
    /// local one while in no cluster.
    pub async fn state(&self) -> Arc<Map> {
        if self.clustered() {
            self.node.applied().borrow().kv.clone()
        } else {
            self.local.lock().await.clone()
        }
    }
}
