//! Glue between a device and its cluster (spec §4, docs/design-commands.md):
//! every change to replicated state is a [`Command`] proposed to the
//! cluster's leader and applied by every device's state machine
//! ([`GtmMachine`]) to the committed state; this module hands what the
//! machine applied to the engine.
//!
//! A device that belongs to no cluster yet (before `gtm cluster init` or
//! `join`) applies its commands with the same machine to its local map in
//! the store, as a single appliance.

mod error;

use std::{path::Path, sync::Arc, time::Duration};

pub use error::ApplyError;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::{
    command::{AccountChange, Action, Command, Outcome},
    identity,
    machine::{self, CONFIG_KEY, GtmMachine},
};
use gtm_cluster::{
    ClusterConfig, ClusterError, ClusterNode, ClusterStatus, LowPriority, MAX_COMMAND_BYTES, Map,
    NodeInfo, SECRET_HEADER, Store, Write,
};
use gtm_engine::{Engine, EventKind};
use gtm_model::{
    actor::Actor,
    error::{ApiError, ErrorKind},
};

const TOKEN_PREFIX: &str = "gtm1.";
/// The local map's count of applied commands (a device in no cluster).
const LOCAL_INDEX_KEY: &str = "local-index";

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
    /// Where committed state is installed (and a device in no cluster
    /// applies its commands): below Raft's and DNS's threads.
    install_thread: LowPriority,
}

/// What a device asks of the leader to join.
#[derive(Debug, Serialize, Deserialize)]
pub struct JoinRequest {
    pub id: u64,
    pub info: NodeInfo,
    pub voter: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LeaveRequest {
    pub id: u64,
}

/// The answer of a forwarded join or leave.
#[derive(Debug, Serialize, Deserialize)]
pub struct Written {
    pub version: u64,
}

/// An error from another device, forwarded as it said it.
#[derive(Debug, Serialize, Deserialize)]
pub struct RemoteError {
    pub error: String,
    pub message: String,
}

/// An applied command, as its proposer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub version: u64,
    /// False when the command changed nothing (already so).
    pub changed: bool,
    pub changes: Vec<String>,
    /// Whether this device installed it before answering. A committed
    /// change this device has not installed within its deadline is still
    /// applied (the cluster has it, and this device installs it when it
    /// can); the answer says so instead of waiting on.
    pub installed: bool,
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
    ) -> Result<Arc<Self>> {
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
            install_thread: LowPriority::spawn("gtm-install")?,
        });
        if !replication.clustered() {
            // A clustered device installs its state from Raft's first apply.
            let local = replication.local.lock().await.clone();
            replication
                .engine
                .set_operator(&machine::operator::state_of(&local));
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

    /// Installs every state Raft applies on this device, until `stop` is
    /// cancelled or Raft goes: the device's `raft-install` worker.
    pub async fn install_committed(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        tokio::select! {
            _ = install_committed(self.clone()) => {}
            _ = stop.cancelled() => {}
        }
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

    /// The cluster secret, for device-to-device requests.
    pub fn secret_value(&self) -> Result<String> {
        self.secret()
    }

    /// The secret held in memory: the one on disk, except while a join is
    /// in flight (then the joined cluster's, kept only once accepted).
    fn secret(&self) -> Result<String> {
        Ok(self.node.secret().to_string())
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

    /// Proposes `text` as the configuration, as [`Replication::propose`]
    /// does, with its parse (`config`) offered to this device's machine:
    /// the text is not parsed a second time here.
    pub async fn apply_config(
        &self,
        actor: Actor,
        text: String,
        config: gtm_model::Config,
    ) -> Result<Applied, ApplyError> {
        let _offer = self.machine.offer(&text, config);
        self.propose(actor, None, Action::ApplyConfig { text })
            .await
    }

    /// Proposes a change on behalf of `actor` and returns its real outcome:
    /// applied (installed on this device before this returns), rejected
    /// (nothing changed anywhere), no quorum (refused before it was
    /// proposed), or outcome unknown (with the command's id).
    pub async fn propose(
        &self,
        actor: Actor,
        expect_version: Option<u64>,
        action: Action,
    ) -> Result<Applied, ApplyError> {
        let mut command = Command::new(actor, expect_version, action);
        command.history_keep = self.history_keep.load(std::sync::atomic::Ordering::Relaxed);
        let bytes = command.encode().map_err(ApplyError::Cluster)?;
        let size = bytes.len();
        // Refused before anything is proposed: an entry this large would
        // stall replication for every device (docs/cluster.md, "Bounded
        // entries"). The same limit holds in no cluster, so a configuration
        // a single device accepts can later be clustered.
        if bytes.len() > MAX_COMMAND_BYTES {
            return Err(ApplyError::Rejected(ApiError::new(
                ErrorKind::TooLarge,
                format!(
                    "the configuration is {} MiB; the limit is {} MiB",
                    bytes.len().div_ceil(1 << 20),
                    MAX_COMMAND_BYTES >> 20
                ),
            )));
        }
        let clustered = self.clustered();
        // Refused before it is proposed or forwarded: this device could
        // neither commit it nor install it.
        if clustered && let Some(why) = self.fault() {
            return Err(ApplyError::RaftFailed(why));
        }
        let outcome = if clustered {
            self.node.propose(bytes).await.map_err(|e| match e {
                ClusterError::Unknown(why) => ApplyError::Unknown {
                    command: command.id.to_string(),
                    why,
                },
                other => cluster_error(other),
            })?
        } else {
            self.apply_local(bytes).await?
        };
        match Outcome::decode(&outcome).map_err(ApplyError::Cluster)? {
            Outcome::Applied {
                version,
                index,
                changed,
                changes,
            } => {
                let installed = !clustered || self.wait_installed(index, size).await;
                if !installed {
                    self.not_installed(&command.id.to_string(), version, index);
                }
                Ok(Applied {
                    version,
                    changed,
                    changes,
                    installed,
                })
            }
            Outcome::Rejected(e) => Err(ApplyError::Rejected(e)),
        }
    }

    /// A device in no cluster: the machine applies the command to the local
    /// map, the store keeps the result (flushed), the engine installs it.
    async fn apply_local(&self, bytes: Vec<u8>) -> Result<Vec<u8>, ApplyError> {
        let mut local = self.local.lock().await;
        let index = local
            .get(LOCAL_INDEX_KEY)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            + 1;
        let (machine, kv) = (self.machine.clone(), local.clone());
        let effect = self
            .install_thread
            .run(move || gtm_cluster::Machine::apply(&*machine, &kv, index, &bytes))
            .await
            .ok_or_else(|| ApplyError::Cluster("the install thread stopped".into()))?;
        let mut writes = effect.writes;
        writes.push(Write::Put {
            key: LOCAL_INDEX_KEY.into(),
            value: index.to_string().into_bytes(),
        });
        self.write_local(&mut local, writes)
            .await
            .map_err(ApplyError::Store)?;
        let state = local.clone();
        self.install_blocking(state).await;
        self.retire_replaced();
        Ok(effect.outcome)
    }

    /// Replaces the local map with `state` (a device leaving its cluster
    /// goes on from the cluster's state), keeping the local command count.
    async fn set_local(&self, state: &Map) -> Result<(), gtm_cluster::StoreError> {
        let mut local = self.local.lock().await;
        let mut writes: Vec<Write> = local
            .keys()
            .filter(|k| *k != LOCAL_INDEX_KEY && !state.contains_key(*k))
            .map(|k| Write::Delete { key: k.clone() })
            .collect();
        writes.extend(state.iter().map(|(k, v)| Write::Put {
            key: k.clone(),
            value: v.to_vec(),
        }));
        self.write_local(&mut local, writes).await
    }

    /// Keeps `writes` in the store's local map (flushed), then in memory.
    async fn write_local(
        &self,
        local: &mut Arc<Map>,
        writes: Vec<Write>,
    ) -> Result<(), gtm_cluster::StoreError> {
        let store = self.store.clone();
        let kept = tokio::task::spawn_blocking(move || store.apply_local(writes))
            .await
            .map_err(|e| gtm_cluster::StoreError::Corrupt {
                what: "local state",
                why: e.to_string(),
            })??;
        let map = Arc::make_mut(local);
        for write in kept {
            write.apply_to(map);
        }
        Ok(())
    }

    /// Has the install thread free what the last install replaced, after
    /// the jobs it was given (the writes waiting for the install are
    /// answered meanwhile).
    fn retire_replaced(&self) {
        let engine = self.engine.clone();
        if !self.install_thread.submit(move || engine.retire_replaced()) {
            // The thread is gone: freed here rather than kept.
            self.engine.retire_replaced();
        }
    }

    /// Hands `kv` to the engine on the install thread.
    async fn install_blocking(&self, kv: Arc<Map>) {
        let (engine, handled) = (self.engine.clone(), self.handled_snapshot());
        let machine = self.machine.clone();
        let done = self
            .install_thread
            .run(move || install(&engine, &machine, &kv, handled))
            .await;
        match done {
            Some(Some(now)) => *self.handled.lock().unwrap_or_else(|p| p.into_inner()) = Some(now),
            Some(None) => {}
            None => tracing::error!(
                "installing the committed state stopped: the install thread is gone"
            ),
        }
    }

    fn handled_snapshot(&self) -> Option<Handled> {
        self.handled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits (bounded, longer for a larger command of `bytes`) until this
    /// device installed the state up to `index`. False when it did not in
    /// time (or its Raft failed meanwhile).
    async fn wait_installed(&self, index: u64, bytes: usize) -> bool {
        let mut installed = self.installed.subscribe();
        let bound = Duration::from_secs(5) + gtm_cluster::apply_allowance(bytes);
        matches!(
            tokio::time::timeout(bound, installed.wait_for(|i| *i >= index)).await,
            Ok(Ok(_))
        )
    }

    /// Reports a committed command this device did not install within its
    /// deadline: logged, and an event, besides the answer's `installed`.
    fn not_installed(&self, command: &str, version: u64, index: u64) {
        let why = match self.fault() {
            Some(fault) => format!(": {fault}"),
            None => " within its deadline; it installs it when it can".to_string(),
        };
        let text = format!(
            "command {command} was committed (configuration version {version}, log index {index}) but this device has not installed it{why}"
        );
        tracing::warn!(command, version, index, "{text}");
        self.engine
            .record_event(EventKind::Config, format!("version {version}"), text);
    }

    /// Sends a join or leave to the leader's `/cluster/v1/<route>`.
    async fn to_leader(
        &self,
        leader: &NodeInfo,
        route: &str,
        body: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Written, ApplyError> {
        let url = format!(
            "{}/cluster/v1/{route}",
            leader.api_addr.trim_end_matches('/')
        );
        let secret = self
            .secret()
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        let response = body(self.http.post(&url).header(SECRET_HEADER, secret))
            .send()
            .await
            .map_err(|e| ApplyError::Cluster(format!("cannot reach the leader {leader}: {e}")))?;
        decode::<Written>(response).await
    }

    /// Makes this device the first member of a new cluster, whose state
    /// starts as this device's: its configuration, at its version.
    pub async fn init(&self, actor: Actor) -> Result<(), ApplyError> {
        let _changing = self.membership.lock().await;
        let local = self.local.lock().await.clone();
        let text = match machine::config_text(&local) {
            Some(text) => String::from_utf8_lossy(&text).into_owned(),
            None => toml::to_string_pretty(&self.engine.config())
                .map_err(|e| ApplyError::Cluster(e.to_string()))?,
        };
        let version = machine::version_of(&local);
        self.node.initialize().await.map_err(cluster_error)?;
        // The TSIG keys first (their secrets, as `gtm tsig add` carried them):
        // the configuration's secondaries name them.
        let keys: Vec<Action> = gtm_dns::tsig::TsigKeys::of(&local)
            .keys
            .into_iter()
            .map(|(name, k)| {
                Action::Tsig(crate::command::TsigChange::Add {
                    name,
                    algorithm: k.algorithm.clone(),
                    secret: k.secret.clone(),
                })
            })
            .collect();
        for action in keys {
            self.propose(actor.clone(), None, action).await?;
        }
        self.propose(actor.clone(), None, Action::Adopt { text, version })
            .await?;
        // The accounts made before the cluster existed come along, as the
        // commands that would make them (their digests, never secrets).
        let accounts = crate::access::accounts::Accounts::of(&local);
        let users = accounts
            .users
            .into_iter()
            .map(|(name, u)| AccountChange::PutUser {
                name,
                role: u.role,
                password: Some(u.password),
            });
        let tokens = accounts
            .tokens
            .into_iter()
            .map(|(name, t)| AccountChange::PutToken {
                name,
                role: t.role,
                digest: t.digest,
            });
        let accounts = users.chain(tokens).map(Action::Account);
        // So do the drains and the manual checks' states in force.
        let operator = machine::operator::state_of(&local);
        let drains = operator
            .drains
            .iter()
            .filter_map(|d| d.target())
            .map(|target| Action::Drain {
                target,
                drained: true,
            });
        let checks = operator.checks.iter().map(|(check, m)| Action::SetCheck {
            check: check.clone(),
            state: m.state.clone(),
        });
        // And the zones' DNSSEC keys: their DS may be at the parent already.
        let keys: Vec<_> = gtm_dns::dnssec::keys::keyring_of(&local)
            .into_iter()
            .filter_map(|(domain, keys)| Some((domain, keys.active()?.clone())))
            .collect();
        let keys = (!keys.is_empty())
            .then(|| Action::Dnssec(crate::command::DnssecChange::AddKeys { keys }));
        for action in accounts
            .chain(drains)
            .chain(checks)
            .chain(keys)
            .collect::<Vec<_>>()
        {
            self.propose(actor.clone(), None, action).await?;
        }
        Ok(())
    }

    /// The token a device needs to join: the cluster secret.
    pub fn token(&self) -> Result<String> {
        Ok(format!("{TOKEN_PREFIX}{}", self.secret()?))
    }

    /// Joins the cluster of the device at `address` (any member; followers
    /// forward to the leader). This device's configuration is replaced by
    /// the cluster's.
    ///
    /// The leader replicates to this device as soon as it adds it, with the
    /// joined cluster's secret, so that secret is held in memory while the
    /// request is in flight; it is written to disk only once the cluster
    /// accepted the join. A refused join puts the old secret back in memory
    /// and changes nothing on disk.
    pub async fn join(&self, address: &str, token: &str, voter: bool) -> Result<(), ApplyError> {
        let _changing = self.membership.lock().await;
        let secret = token
            .strip_prefix(TOKEN_PREFIX)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ApplyError::Cluster(
                    "the token is not a gtm join token (gtm cluster token prints one)".into(),
                )
            })?;
        let previous = self.node.secret();
        self.node.set_secret(secret).map_err(cluster_error)?;
        let asked = self.ask_to_join(address, secret, voter).await;
        if let Err(e) = asked {
            // Added although the answer failed (it was lost, or the voter
            // step failed after the learner step): this device is in the
            // cluster's membership and must keep talking to it.
            if !self.clustered() {
                if let Err(restore) = self.node.set_secret(&previous) {
                    tracing::error!(error = %restore, "cannot restore the cluster secret after a failed join");
                }
                return Err(match e {
                    ApplyError::Cluster(why) => {
                        ApplyError::Cluster(format!("{why}; nothing changed on this device"))
                    }
                    other => other,
                });
            }
            self.keep_joined_secret(secret)?;
            return Err(e);
        }
        self.keep_joined_secret(secret)?;
        // The leader replicates to us; wait until the configuration arrived.
        let mut applied = self.node.applied();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !machine::has_config(&applied.borrow().kv) || !self.clustered() {
            if tokio::time::timeout_at(deadline, applied.changed())
                .await
                .is_err()
            {
                return Err(ApplyError::Cluster(
                    "joined, but no configuration arrived within 30 s; see gtm cluster status"
                        .into(),
                ));
            }
        }
        let index = applied.borrow().index;
        let size = machine::config_pieces(&applied.borrow().kv)
            .map_or(0, |pieces| pieces.iter().map(|p| p.len()).sum());
        if !self.wait_installed(index, size).await {
            // Joined all the same: said, and installed when it can be.
            tracing::warn!(
                index,
                "joined, but the cluster's state was not installed here within its deadline"
            );
        }
        Ok(())
    }

    /// Asks the device at `address` to add this one.
    async fn ask_to_join(
        &self,
        address: &str,
        secret: &str,
        voter: bool,
    ) -> Result<(), ApplyError> {
        let request = JoinRequest {
            id: self.node.id(),
            info: self.status_info(),
            voter,
        };
        let url = format!("{}/cluster/v1/join", address.trim_end_matches('/'));
        let response = self
            .http
            .post(&url)
            .header(SECRET_HEADER, secret)
            .json(&request)
            .send()
            .await
            .map_err(|e| ApplyError::Cluster(format!("cannot reach {address}: {e}")))?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Err(ApplyError::Cluster(format!(
                "{address} refused the join: wrong token (it does not carry that cluster's \
                 secret; gtm cluster token on a member prints the right one)"
            )));
        }
        decode::<Written>(response).await.map(|_| ())
    }

    /// Keeps the secret of the cluster this device now belongs to.
    fn keep_joined_secret(&self, secret: &str) -> Result<(), ApplyError> {
        identity::keep_secret(&self.dir, secret).map_err(|e| {
            ApplyError::Cluster(format!(
                "joined, but {e}: after a restart this device cannot talk to its cluster \
                 until the file holds the cluster's secret"
            ))
        })
    }

    /// Takes this device out of its cluster (`gtm cluster leave`): the leader
    /// commits the removal, then this device forgets the cluster (Raft log,
    /// vote, state machine, snapshot), takes a new node id and a new secret,
    /// and runs on as a device in no cluster, serving the configuration it
    /// had. It can then join a cluster again, or initialize one.
    ///
    /// The only member of a cluster has no one to ask: it forgets the
    /// cluster at once (the cluster ends with it).
    pub async fn leave(&self) -> Result<(), ApplyError> {
        let _changing = self.membership.lock().await;
        let status = self.node.status();
        let id = status.id;
        if status.members.is_empty() {
            return Err(ApplyError::Cluster(
                "this device belongs to no cluster".into(),
            ));
        }
        if !status.members.iter().any(|m| m.id != id) {
            return self.forget_cluster(id).await;
        }
        self.remove(id).await?;
        self.forget_cluster(id).await
    }

    /// Resets this device's Raft state under a new node id and secret.
    ///
    /// Order matters for a crash: the Raft state is cleared first (one
    /// transaction), then the new id, then the new secret are written. A
    /// crash in between leaves a device in no cluster under its old id or
    /// secret, never the new id on the old log (a member the cluster does
    /// not know, that could neither leave nor join).
    async fn forget_cluster(&self, old_id: u64) -> Result<(), ApplyError> {
        let failed = |e: &dyn std::fmt::Display| {
            ApplyError::Cluster(format!(
                "this device is out of the cluster's membership, but forgetting the cluster \
                 failed: {e}"
            ))
        };
        // The device goes on from the cluster's state: its next local
        // command applies to what it serves now.
        let state = self.node.applied().borrow().kv.clone();
        self.set_local(&state).await.map_err(|e| failed(&e))?;
        let new_id = identity::fresh_node_id(old_id).map_err(|e| failed(&e))?;
        let secret = identity::new_secret().map_err(|e| failed(&e))?;
        self.node
            .reset(new_id, &secret)
            .await
            .map_err(|e| failed(&e))?;
        self.installed.send_replace(0);
        identity::keep_node_id(&self.dir, new_id).map_err(|e| failed(&e))?;
        identity::keep_secret(&self.dir, &secret).map_err(|e| failed(&e))?;
        tracing::info!(old_id, new_id, "left the cluster");
        Ok(())
    }

    fn status_info(&self) -> NodeInfo {
        let status = self.node.status();
        status
            .members
            .iter()
            .find(|m| m.id == status.id)
            .map(|m| m.info.clone())
            .unwrap_or_else(|| self.node.info().clone())
    }

    /// Handles a join request on the leader (a follower forwards it).
    pub async fn admit(&self, request: JoinRequest) -> Result<(), ApplyError> {
        match self
            .node
            .add_member(request.id, request.info.clone(), request.voter)
            .await
        {
            Ok(()) => Ok(()),
            Err(ClusterError::NotLeader {
                leader: Some((_, leader)),
            }) => self
                .to_leader(&leader, "join", |r| r.json(&request))
                .await
                .map(|_| ()),
            Err(e) => Err(cluster_error(e)),
        }
    }

    /// Removes a member (this device, for `gtm cluster leave`). On the
    /// leader, a device that is no longer a member is already removed: a
    /// device that stopped after its removal committed, before it forgot the
    /// cluster, can leave again.
    pub async fn remove(&self, id: u64) -> Result<(), ApplyError> {
        let status = self.node.status();
        if status.leader.as_ref().is_some_and(|(l, _)| *l == status.id)
            && !status.members.iter().any(|m| m.id == id)
        {
            return Ok(());
        }
        match self.node.remove_member(id).await {
            Ok(()) => Ok(()),
            Err(ClusterError::NotLeader {
                leader: Some((_, leader)),
            }) => self
                .to_leader(&leader, "leave", |r| r.json(&LeaveRequest { id }))
                .await
                .map(|_| ()),
            Err(e) => Err(cluster_error(e)),
        }
    }

    /// After the permanent loss of the peer: continue as the only voter.
    pub async fn recover_single(&self) -> Result<(), ApplyError> {
        self.node.force_single().await.map_err(cluster_error)
    }

    /// Checks a cluster RPC's secret.
    pub fn secret_ok(&self, given: Option<&str>) -> bool {
        match (given, self.secret()) {
            (Some(g), Ok(s)) => gtm_cluster::constant_time_eq(g.as_bytes(), s.as_bytes()),
            _ => false,
        }
    }
}

/// Installs every state Raft applies on this device, and publishes how far
/// it got. A configuration that cannot be installed here leaves the device
/// serving its last good one, degraded (see `Engine::apply_committed`); it
/// is not retried until another commits.
async fn install_committed(r: Arc<Replication>) {
    let mut applied = r.node.applied();
    loop {
        // Cloned out: a borrow held across the install would hold back
        // Raft's next apply.
        let state = applied.borrow_and_update().clone();
        // Not `>`: a device that left and started or joined another
        // cluster counts that cluster's log from the start again.
        if r.clustered() && state.index != *r.installed.borrow() {
            r.install_blocking(state.kv.clone()).await;
            r.installed.send_replace(state.index);
            r.retire_replaced();
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = r.stop.cancelled() => return,
        }
    }
}

/// The configuration last handed to the engine: its version, the hash of
/// the map's value for it ([`machine::config_value`]), and that value as
/// the replicated map holds it, so that the same value is known again
/// without hashing after every command; and the zone versions it was
/// handed with (the SOA serials).
#[derive(Debug, Clone)]
struct Handled {
    version: u64,
    hash: u64,
    value: Option<gtm_cluster::Value>,
    zone_versions: std::collections::HashMap<String, u64>,
}

impl Handled {
    /// Whether `value` at `version` is this very value of the map.
    fn is(&self, version: u64, value: &gtm_cluster::Value) -> bool {
        self.version == version
            && self
                .value
                .as_ref()
                .is_some_and(|v| v.as_ptr() == value.as_ptr() && v.len() == value.len())
    }
}

/// Hands the configuration of `kv` to the engine unless it is the one last
/// handed (`handled`, by version and text). Returns what it handed.
fn install(
    engine: &Engine,
    machine: &GtmMachine,
    kv: &Map,
    handled: Option<Handled>,
) -> Option<Handled> {
    // The TSIG keys first: a configuration naming one finds it.
    engine
        .dns()
        .tsig
        .store(std::sync::Arc::new(gtm_dns::tsig::TsigKeys::of(kv)));
    let installed = install_config(engine, machine, kv, handled);
    engine
        .dns()
        .cookies
        .install(machine::cookies::secrets_of(kv));
    // After the configuration, which the operator state is checked against.
    if machine::has_config(kv) {
        engine.set_operator(&machine::operator::state_of(kv));
    }
    // After the configuration, which says which zones are signed.
    engine.set_keys(gtm_dns::dnssec::keys::keyring_of(kv));
    installed
}

fn install_config(
    engine: &Engine,
    machine: &GtmMachine,
    kv: &Map,
    handled: Option<Handled>,
) -> Option<Handled> {
    let value = machine::config_value(kv)?;
    let version = machine::version_of(kv);
    if handled.as_ref().is_some_and(|h| h.is(version, value)) {
        return None;
    }
    let now = Handled {
        version,
        hash: machine::text_hash(value),
        value: Some(value.clone()),
        zone_versions: machine::zone_versions(kv),
    };
    // The state machine parsed and compiled this text when it applied the
    // command: the engine takes that, not a parse of its own (taken even
    // when handled, so the compiled form is not kept for nothing).
    let parsed = machine.parsed(now.hash);
    if handled.is_some_and(|h| {
        (h.version, h.hash, &h.zone_versions) == (now.version, now.hash, &now.zone_versions)
    }) {
        // Handled before this device kept the value (a restart). Kept by
        // a gtm before zone versions, it is installed again with them.
        return Some(now);
    }
    let Some(parts) = machine::config_parts(kv) else {
        // Never so in a map the machine wrote; said rather than served
        // short.
        engine.install_failed(
            version,
            "a part of its text is missing from the replicated map",
        );
        return Some(now);
    };
    let kept = gtm_cluster::KeptConfig {
        version,
        parts,
        zone_versions: now.zone_versions.clone().into_iter().collect(),
    };
    // Installed or not (degraded), this version is handled: a later state
    // with the same configuration does not report it again.
    if engine.apply_committed(kept, parsed).is_ok() {
        let text = match machine::history_summary(kv, version) {
            Some(e) => format!(
                "configuration version {version} applied: {} by {} ({} changes)",
                e.what,
                e.actor,
                e.change_count()
            ),
            None => format!("configuration version {version} installed"),
        };
        engine.record_event(EventKind::Config, format!("version {version}"), text);
        // Durable before the version counts as installed (and a write that
        // waits for it is answered): a crash right after keeps its event.
        engine.flush_storage();
    }
    Some(now)
}

/// The local map of a device in no cluster. A device that kept only a
/// configuration (an older gtm) starts its map from it; a device that kept
/// none starts from what it serves (the demo configuration), so its first
/// write edits that, not an empty one.
fn local_map(store: &Store, engine: &Engine) -> Result<Map> {
    let mut map = store.local_map()?;
    if machine::has_config(&map) {
        return Ok(map);
    }
    let (version, text) = match store.load_config()? {
        Some(stored) => (stored.version, stored.text),
        None => {
            let serving = engine.config();
            if *serving == gtm_model::Config::default() {
                return Ok(map);
            }
            (engine.version(), toml::to_string_pretty(&serving)?)
        }
    };
    let writes = vec![
        Write::Put {
            key: CONFIG_KEY.into(),
            value: text.into_bytes(),
        },
        Write::Put {
            key: machine::VERSION_KEY.into(),
            value: version.to_string().into_bytes(),
        },
    ];
    store.apply_local(writes)?;
    map = store.local_map()?;
    Ok(map)
}

fn cluster_error(e: ClusterError) -> ApplyError {
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

async fn decode<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
) -> Result<T, ApplyError> {
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| ApplyError::Cluster(e.to_string()))?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map_err(|e| ApplyError::Cluster(format!("unexpected answer: {e}")));
    }
    match serde_json::from_slice::<RemoteError>(&body) {
        // The peer's message names its own unreachable devices.
        Ok(e) if e.error == "no-quorum" => Err(ApplyError::NoQuorum(e.message)),
        Ok(e) => Err(ApplyError::Cluster(e.message)),
        Err(_) => Err(ApplyError::Cluster(format!(
            "the peer answered {status}: {}",
            String::from_utf8_lossy(&body)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
