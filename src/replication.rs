//! Glue between a device and its cluster (spec §4): every configuration
//! write goes through Raft once the device is in a cluster, and every
//! device applies what Raft committed.
//!
//! The replicated map holds one key, `config`: the configuration text.
//! Its version is the Raft log index that wrote it. A device that belongs to
//! no cluster yet (before `gtm cluster init` or `join`) writes its own store
//! directly, as a single appliance.

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::{
    engine::{ApplyError, Engine},
    identity,
    model::Config,
};
use gtm_cluster::{
    ClusterConfig, ClusterError, ClusterNode, ClusterStatus, NodeInfo, Request, SECRET_HEADER,
    Store, Write,
};

/// The key of the configuration text in the replicated map.
pub const CONFIG_KEY: &str = "config";
const TOKEN_PREFIX: &str = "gtm1.";
const UNREACHABLE: &str = "cannot reach the leader";

/// A device's membership in its cluster.
#[derive(Debug)]
pub struct Replication {
    pub node: Arc<ClusterNode>,
    engine: Arc<Engine>,
    dir: std::path::PathBuf,
    http: reqwest::Client,
    stop: tokio_util::sync::CancellationToken,
    /// Serialises joining and leaving.
    membership: tokio::sync::Mutex<()>,
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

/// The answer of a forwarded configuration write.
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

impl Replication {
    /// Starts the device's Raft node (resuming its membership, if any) and
    /// the task that applies committed configurations.
    /// `http` carries forwarded writes and joins; `raft_http` the Raft RPC
    /// (both trust the cluster's certificates when TLS is on).
    pub async fn start(
        store: &Store,
        dir: &Path,
        info: NodeInfo,
        engine: Arc<Engine>,
        http: reqwest::Client,
        raft_http: reqwest::Client,
    ) -> Result<Arc<Self>> {
        let id = identity::node_id(dir)?;
        let secret = identity::secret(dir)?;
        let mut config = ClusterConfig::new(id, info, secret);
        config.http = Some(raft_http);
        let node = ClusterNode::start(store, config).await?;
        let replication = Arc::new(Self {
            node,
            engine,
            dir: dir.to_path_buf(),
            http,
            stop: tokio_util::sync::CancellationToken::new(),
            membership: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(apply_committed(replication.clone()));
        Ok(replication)
    }

    /// Stops Raft and the applying task, releasing the store.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.node.shutdown().await;
    }

    /// Whether this device belongs to a cluster.
    pub fn clustered(&self) -> bool {
        !self.node.status().members.is_empty()
    }

    pub fn status(&self) -> ClusterStatus {
        self.node.status()
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

    /// Validates and applies a configuration: through Raft in a cluster
    /// (forwarded to the leader from a follower), else to the local store.
    pub async fn apply(
        &self,
        text: String,
        config: Config,
    ) -> Result<(u64, Vec<String>), ApplyError> {
        if !self.clustered() {
            let engine = self.engine.clone();
            return tokio::task::spawn_blocking(move || engine.apply_persisted(text, config))
                .await
                .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        }
        // Proven servable here (validated, its answers built) before it is
        // proposed: what the cluster commits, every device must install.
        // Every device (this one too) parses the committed text again: the
        // configuration and the trial answers are dropped before the write.
        let engine = self.engine.clone();
        let changes = tokio::task::spawn_blocking(move || {
            engine.check(&config).map_err(ApplyError::Invalid)?;
            Ok::<_, ApplyError>(engine.changes(&config))
        })
        .await
        .map_err(|e| ApplyError::Cluster(e.to_string()))??;
        let version = self.write_config(text).await?;
        self.wait_applied(version).await;
        Ok((version, changes))
    }

    /// Writes the configuration text through the leader; returns its version.
    ///
    /// A leader that cannot be reached may just have died: retry (bounded)
    /// until the cluster elects another or says there is no quorum.
    pub async fn write_config(&self, text: String) -> Result<u64, ApplyError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
        loop {
            let request = Request(vec![Write::Put {
                key: CONFIG_KEY.into(),
                value: text.clone().into_bytes(),
            }]);
            let leader = match self.node.write(request).await {
                Ok(index) => return Ok(index),
                Err(ClusterError::NotLeader {
                    leader: Some((_, leader)),
                }) => leader,
                Err(e) => return Err(cluster_error(e)),
            };
            match self.forward(&leader, text.clone()).await {
                Err(ApplyError::Cluster(why)) if why.starts_with(UNREACHABLE) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(ApplyError::NoQuorum(vec![leader.to_string()]));
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                other => return other,
            }
        }
    }

    async fn forward(&self, leader: &NodeInfo, text: String) -> Result<u64, ApplyError> {
        self.to_leader(leader, "write", |r| r.body(text))
            .await
            .map(|w| w.version)
    }

    /// Sends a device-to-device request to the leader's `/cluster/v1/<route>`.
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
            .map_err(|e| ApplyError::Cluster(format!("{UNREACHABLE} {leader}: {e}")))?;
        decode::<Written>(response).await
    }

    /// Waits (bounded) until this device has applied `version`.
    async fn wait_applied(&self, version: u64) {
        let mut applied = self.engine.applied_version();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), applied.wait_for(|v| *v >= version)).await;
    }

    /// Makes this device the first member of a new cluster and commits its
    /// configuration as the cluster's.
    pub async fn init(&self) -> Result<(), ApplyError> {
        let _changing = self.membership.lock().await;
        let local_version = self.engine.version();
        self.node.initialize().await.map_err(cluster_error)?;
        let text = toml::to_string_pretty(&self.engine.config())
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        self.write_config(text).await?;
        self.adopt_cluster_config(local_version).await;
        Ok(())
    }

    /// Installs the cluster's configuration on a device that has just
    /// entered a cluster (init, join). Its version counted its own applies
    /// while it was in no cluster, or a cluster it left, and may be at or
    /// above this cluster's log index, which `apply_committed` would then
    /// skip as old. So a committed configuration at or below `local_version`
    /// is installed here, and then whatever is newest, until the newest
    /// committed one is the one installed.
    async fn adopt_cluster_config(&self, local_version: u64) {
        let applied = self.node.applied();
        let mut adopted = false;
        // Bounded: each round installs the newest, and writes rarely race a
        // join.
        for _ in 0..20 {
            let (index, text) = {
                let a = applied.borrow();
                (a.index, a.kv.get(CONFIG_KEY).cloned())
            };
            let Some(text) = text else { return };
            if index > local_version {
                // The applying task installs it.
                self.wait_applied(index).await;
            } else if !adopted {
                adopted = true;
                self.install_committed(index, text).await;
                continue;
            }
            // Installed; or it cannot be installed here, which leaves the
            // device degraded and reported (trying again would not help).
            if self.engine.version() == index
                || self
                    .engine
                    .install_failure()
                    .is_some_and(|f| f.version == index)
            {
                return;
            }
            adopted = true;
            self.install_committed(index, text).await;
        }
    }

    async fn install_committed(&self, index: u64, text: Vec<u8>) {
        let engine = self.engine.clone();
        let text = String::from_utf8_lossy(&text).into_owned();
        // A failure leaves the device degraded and reported, as for any
        // committed configuration (`Engine::apply_committed`).
        if let Err(e) =
            tokio::task::spawn_blocking(move || engine.apply_committed(index, text)).await
        {
            tracing::error!(index, error = %e, "installing the cluster's configuration stopped");
        }
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
        let local_version = self.engine.version();
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
        while !applied.borrow().kv.contains_key(CONFIG_KEY) || !self.clustered() {
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
        self.adopt_cluster_config(local_version).await;
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
        let new_id = identity::fresh_node_id(old_id).map_err(|e| failed(&e))?;
        let secret = identity::new_secret().map_err(|e| failed(&e))?;
        self.node
            .reset(new_id, &secret)
            .await
            .map_err(|e| failed(&e))?;
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

/// Applies every configuration Raft commits, and keeps it in the local store
/// so a restart serves it at once. One that cannot be installed here leaves
/// the device serving its last good configuration, degraded (see
/// `Engine::apply_committed`); it is not retried until another commits.
async fn apply_committed(r: Arc<Replication>) {
    let mut applied = r.node.applied();
    // The text that last failed to install here: a later log entry that is
    // not a configuration (a membership change) must not retry it as a new
    // version and report it again.
    let mut failed: Option<u64> = None;
    loop {
        // Read before borrowing: the borrow holds back Raft's next apply.
        let (version, failure) = (r.engine.version(), r.engine.install_failure());
        let job = {
            let a = applied.borrow_and_update();
            let index = a.index;
            a.kv.get(CONFIG_KEY)
                .filter(|_| index > version)
                .filter(|_| failure.as_ref().is_none_or(|f| f.version != index))
                .filter(|v| failed != Some(text_hash(v)))
                .map(|v| (index, text_hash(v), String::from_utf8_lossy(v).into_owned()))
        };
        if let Some((index, hash, text)) = job {
            // Parsing, validating and building a large configuration is
            // blocking work.
            let engine = r.engine.clone();
            match tokio::task::spawn_blocking(move || engine.apply_committed(index, text)).await {
                Ok(Ok(())) => failed = None,
                Ok(Err(_)) => failed = Some(hash),
                Err(e) => {
                    tracing::error!(index, error = %e, "installing a committed configuration stopped")
                }
            }
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = r.stop.cancelled() => return,
        }
    }
}

fn text_hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn cluster_error(e: ClusterError) -> ApplyError {
    match e {
        ClusterError::NoQuorum { unreachable } => {
            ApplyError::NoQuorum(unreachable.iter().map(ToString::to_string).collect())
        }
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
        Ok(e) if e.error == "no-quorum" => Err(ApplyError::NoQuorum(vec![e.message])),
        Ok(e) => Err(ApplyError::Cluster(e.message)),
        Err(_) => Err(ApplyError::Cluster(format!(
            "the peer answered {status}: {}",
            String::from_utf8_lossy(&body)
        ))),
    }
}
