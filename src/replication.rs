//! Glue between a device and its cluster (spec §4, docs/design-commands.md):
//! every change to replicated state is a [`Command`] proposed to the
//! cluster's leader and applied by every device's state machine
//! ([`GtmMachine`]) to the committed state; this module hands what the
//! machine applied to the engine.
//!
//! A device that belongs to no cluster yet (before `gtm cluster init` or
//! `join`) applies its commands with the same machine to its local map in
//! the store, as a single appliance.

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::{
    api::{ApiError, ErrorKind},
    command::{Action, Actor, Command, Outcome},
    engine::{ApplyError, Engine, EventKind},
    machine::{self, CONFIG_KEY, GtmMachine},
};
use gtm_cluster::{
    ClusterConfig, ClusterError, ClusterNode, ClusterStatus, MAX_COMMAND_BYTES, NodeInfo,
    SECRET_HEADER, Store, Write,
};

const NODE_ID_FILE: &str = "node-id";
const SECRET_FILE: &str = "cluster-secret";
const TOKEN_PREFIX: &str = "gtm1.";
/// The local map's count of applied commands (a device in no cluster).
const LOCAL_INDEX_KEY: &str = "local-index";

/// A device's membership in its cluster.
#[derive(Debug)]
pub struct Replication {
    pub node: Arc<ClusterNode>,
    engine: Arc<Engine>,
    store: Store,
    machine: Arc<GtmMachine>,
    /// The map of a device in no cluster; the lock serialises its commands.
    local: tokio::sync::Mutex<Arc<BTreeMap<String, Vec<u8>>>>,
    /// The configuration (version, text hash) last handed to the engine.
    handled: std::sync::Mutex<Option<(u64, u64)>>,
    /// The log index up to which the engine has what Raft applied.
    installed: watch::Sender<u64>,
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
}

impl Replication {
    /// Starts the device's Raft node (resuming its membership, if any) and
    /// the task that installs committed state.
    /// `http` carries forwarded joins; `raft_http` the Raft RPC and
    /// forwarded commands (both trust the cluster's certificates when TLS
    /// is on).
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
        let machine = Arc::new(GtmMachine::default());
        let node = ClusterNode::start(store, config, machine.clone()).await?;
        let local = local_map(store)?;
        let handled = store
            .load_config()?
            .map(|c| (c.version, text_hash(c.text.as_bytes())));
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
        });
        tokio::spawn(install_committed(replication.clone()));
        Ok(replication)
    }

    /// Stops Raft and the installing task, releasing the store.
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

    /// The replicated state this device applied: the cluster's map, or its
    /// local one while in no cluster.
    pub async fn state(&self) -> Arc<BTreeMap<String, Vec<u8>>> {
        if self.clustered() {
            self.node.applied().borrow().kv.clone()
        } else {
            self.local.lock().await.clone()
        }
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
        let command = Command::new(actor, expect_version, action);
        let bytes = command.encode().map_err(ApplyError::Cluster)?;
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
                if clustered {
                    self.wait_installed(index).await;
                }
                Ok(Applied {
                    version,
                    changed,
                    changes,
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
        let effect = tokio::task::spawn_blocking(move || {
            gtm_cluster::Machine::apply(&*machine, &kv, index, &bytes)
        })
        .await
        .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        let mut writes = effect.writes;
        writes.push(Write::Put {
            key: LOCAL_INDEX_KEY.into(),
            value: index.to_string().into_bytes(),
        });
        let store = self.store.clone();
        let kept = writes.clone();
        tokio::task::spawn_blocking(move || store.apply_local(&kept))
            .await
            .map_err(|e| ApplyError::Cluster(e.to_string()))?
            .map_err(ApplyError::Store)?;
        let map = Arc::make_mut(&mut local);
        for write in writes {
            match write {
                Write::Put { key, value } => {
                    map.insert(key, value);
                }
                Write::Delete { key } => {
                    map.remove(&key);
                }
            }
        }
        let state = local.clone();
        self.install_blocking(state).await;
        Ok(effect.outcome)
    }

    /// Hands `kv` to the engine on the blocking pool.
    async fn install_blocking(&self, kv: Arc<BTreeMap<String, Vec<u8>>>) {
        let (engine, handled) = (self.engine.clone(), self.handled_snapshot());
        let done = tokio::task::spawn_blocking(move || install(&engine, &kv, handled)).await;
        match done {
            Ok(Some(now)) => *self.handled.lock().unwrap_or_else(|p| p.into_inner()) = Some(now),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "installing the committed state stopped"),
        }
    }

    fn handled_snapshot(&self) -> Option<(u64, u64)> {
        *self.handled.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits (bounded) until this device installed the state up to `index`.
    async fn wait_installed(&self, index: u64) {
        let mut installed = self.installed.subscribe();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), installed.wait_for(|i| *i >= index)).await;
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
        let local = self.local.lock().await.clone();
        let text = match local.get(CONFIG_KEY) {
            Some(text) => String::from_utf8_lossy(text).into_owned(),
            None => toml::to_string_pretty(&self.engine.config())
                .map_err(|e| ApplyError::Cluster(e.to_string()))?,
        };
        let version = machine::version_of(&local);
        self.node.initialize().await.map_err(cluster_error)?;
        self.propose(actor, None, Action::Adopt { text, version })
            .await
            .map(drop)
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
        let index = applied.borrow().index;
        self.wait_installed(index).await;
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
        if r.clustered() && state.index > *r.installed.borrow() {
            r.install_blocking(state.kv.clone()).await;
            r.installed.send_replace(state.index);
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = r.stop.cancelled() => return,
        }
    }
}

/// Hands the configuration of `kv` to the engine unless it is the one last
/// handed (`handled`, by version and text). Returns what it handed.
fn install(
    engine: &Engine,
    kv: &BTreeMap<String, Vec<u8>>,
    handled: Option<(u64, u64)>,
) -> Option<(u64, u64)> {
    let text = kv.get(CONFIG_KEY)?;
    let now = (machine::version_of(kv), text_hash(text));
    if handled == Some(now) {
        return None;
    }
    let text = String::from_utf8_lossy(text).into_owned();
    // Installed or not (degraded), this version is handled: a later state
    // with the same configuration does not report it again.
    if engine.apply_committed(now.0, text).is_ok() {
        let version = now.0;
        let text = match machine::history_entry(kv, version) {
            Some(e) => format!(
                "configuration version {version} applied: {} by {} ({} changes)",
                e.what,
                e.actor,
                e.changes.len()
            ),
            None => format!("configuration version {version} installed"),
        };
        engine.record_event(EventKind::Config, format!("version {version}"), text);
    }
    Some(now)
}

/// The local map of a device in no cluster. A device that kept only a
/// configuration (an older gtm) starts its map from it.
fn local_map(store: &Store) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut map = store.local_map()?;
    if !map.contains_key(CONFIG_KEY)
        && let Some(stored) = store.load_config()?
    {
        let writes = vec![
            Write::Put {
                key: CONFIG_KEY.into(),
                value: stored.text.into_bytes(),
            },
            Write::Put {
                key: machine::VERSION_KEY.into(),
                value: stored.version.to_string().into_bytes(),
            },
        ];
        store.apply_local(&writes)?;
        map = store.local_map()?;
    }
    Ok(map)
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
