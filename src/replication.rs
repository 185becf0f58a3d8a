//! Glue between a device and its cluster (spec §4): every configuration
//! write goes through Raft once the device is in a cluster, and every
//! device applies what Raft committed.
//!
//! The replicated map holds one key, `config`: the configuration text.
//! Its version is the Raft log index that wrote it. A device that belongs to
//! no cluster yet (before `gtm cluster init` or `join`) writes its own store
//! directly, as a single appliance.

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::{
    engine::{ApplyError, Engine},
    model::Config,
};
use gtm_cluster::{
    ClusterConfig, ClusterError, ClusterNode, ClusterStatus, NodeInfo, Request, SECRET_HEADER,
    Store, Write,
};

/// The key of the configuration text in the replicated map.
pub const CONFIG_KEY: &str = "config";
const NODE_ID_FILE: &str = "node-id";
const SECRET_FILE: &str = "cluster-secret";
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
        let id = node_id(dir)?;
        let secret = secret(dir)?;
        let mut config = ClusterConfig::new(id, info, secret);
        config.http = Some(raft_http);
        let node = ClusterNode::start(store, config).await?;
        let replication = Arc::new(Self {
            node,
            engine,
            dir: dir.to_path_buf(),
            http,
            stop: tokio_util::sync::CancellationToken::new(),
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

    fn secret(&self) -> Result<String> {
        Ok(std::fs::read_to_string(self.dir.join(SECRET_FILE))?
            .trim()
            .to_string())
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
        self.node.initialize().await.map_err(cluster_error)?;
        let text = toml::to_string_pretty(&self.engine.config())
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        let version = self.write_config(text).await?;
        self.wait_applied(version).await;
        Ok(())
    }

    /// The token a device needs to join: the cluster secret.
    pub fn token(&self) -> Result<String> {
        Ok(format!("{TOKEN_PREFIX}{}", self.secret()?))
    }

    /// Joins the cluster of the device at `address` (any member; followers
    /// forward to the leader). This device's configuration is replaced by
    /// the cluster's.
    pub async fn join(&self, address: &str, token: &str, voter: bool) -> Result<(), ApplyError> {
        let secret = token
            .strip_prefix(TOKEN_PREFIX)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ApplyError::Cluster(
                    "the token is not a gtm join token (gtm cluster token prints one)".into(),
                )
            })?;
        self.node.set_secret(secret).map_err(cluster_error)?;
        write_private(&self.dir.join(SECRET_FILE), secret)
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
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
        decode::<Written>(response).await?;
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
        let version = applied.borrow().index;
        self.wait_applied(version).await;
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

    /// Removes a member (this device, for `gtm cluster leave`).
    pub async fn remove(&self, id: u64) -> Result<(), ApplyError> {
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

/// This device's Raft id: random on first start, kept in the data directory.
fn node_id(dir: &Path) -> Result<u64> {
    let path = dir.join(NODE_ID_FILE);
    if let Some(text) = read_kept(&path)? {
        return text
            .trim()
            .parse()
            .with_context(|| format!("{} is corrupt", path.display()));
    }
    let id = u64::from_be_bytes(random_bytes::<8>()?) >> 1;
    write_private(&path, &id.to_string())?;
    Ok(id)
}

/// The cluster secret: made on first start; replaced when joining.
fn secret(dir: &Path) -> Result<String> {
    let path = dir.join(SECRET_FILE);
    if let Some(text) = read_kept(&path)? {
        let s = text.trim().to_string();
        if !s.is_empty() {
            return Ok(s);
        }
    }
    let s: String = random_bytes::<32>()?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    write_private(&path, &s)?;
    Ok(s)
}

pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut raw = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))
        .context("cannot read /dev/urandom")?;
    Ok(raw)
}

/// A file the device made on an earlier start, or `None` when there is
/// none yet. Any other failure (unreadable, not UTF-8) is an error: making a
/// new node id, secret or token over a file that exists but cannot be read
/// would silently take the device out of its cluster or lock out its users.
pub(crate) fn read_kept(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

pub(crate) fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::{io::Write as _, os::unix::fs::OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_that_cannot_be_read_is_an_error_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Absent: made once, then read back unchanged.
        let id = node_id(dir.path()).expect("new id");
        assert_eq!(node_id(dir.path()).expect("kept id"), id);
        let made = secret(dir.path()).expect("new secret");
        assert_eq!(secret(dir.path()).expect("kept secret"), made);
        // Present but not text: an error naming the file, and the file stays.
        for file in [NODE_ID_FILE, SECRET_FILE] {
            std::fs::write(dir.path().join(file), [0xff, 0xfe, 0x00]).expect("write");
        }
        let e = format!("{:#}", node_id(dir.path()).expect_err("binary node id"));
        assert!(e.contains(NODE_ID_FILE), "{e}");
        let e = format!("{:#}", secret(dir.path()).expect_err("binary secret"));
        assert!(e.contains(SECRET_FILE), "{e}");
        for file in [NODE_ID_FILE, SECRET_FILE] {
            let kept = std::fs::read(dir.path().join(file)).expect("read");
            assert_eq!(kept, [0xff, 0xfe, 0x00], "{file} was not replaced");
        }
    }
}
