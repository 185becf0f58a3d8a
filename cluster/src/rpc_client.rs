//! Raft RPC over HTTP, the client half: what a device sends to its peers.
//!
//! Three POST routes under `/cluster/v1/` (`append`, `vote`,
//! `snapshot-chunk`, served by `rpc_server`), each carrying the cluster
//! secret in [`SECRET_HEADER`]. Bodies are bincode (serde mode, behind the
//! format byte of `types::encode`) of openraft's request, and of
//! `Result<response, RaftError>` back, so a remote Raft error travels as a
//! value, not as an HTTP status.
//!
//! All connections share one pooled `reqwest::Client`; every call has a
//! timeout that grows with its payload; a connection failure (or a rejected
//! secret) is `Unreachable`, so openraft backs off instead of hammering a
//! dead peer. This module imports nothing of `node` or `rpc_server`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header;
use openraft::AnyError;
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::types::{LogId, NodeInfo, TypeConfig, Vote, decode, encode};

/// The header carrying the cluster secret on every Raft RPC.
pub const SECRET_HEADER: &str = "x-gtm-cluster-secret";

/// Largest RPC body a device accepts (`rpc_server`) and sends: an append
/// batch larger than this is split (openraft's `PayloadTooLarge`).
pub(crate) const MAX_BODY: usize = 256 * 1024 * 1024;

/// Floor of an RPC's timeout once its body is large, and the transfer rate
/// its size is assumed to need on top: a 30 MB entry gets 4 s, not the
/// heartbeat interval openraft gives every append.
const LARGE_BASE: Duration = Duration::from_secs(1);
const ASSUMED_BYTES_PER_SEC: u64 = 10_000_000;
/// An append body above this is sent by a task of its own, which outlives
/// openraft's per-append timeout (the heartbeat interval): openraft's
/// retry of the same entries joins it instead of starting over.
const DETACHED_BODY: usize = 1024 * 1024;

/// The time an RPC of `bytes` may take: `floor` (openraft's), or more for a
/// large body.
pub(crate) fn rpc_timeout(floor: Duration, bytes: usize) -> Duration {
    let transfer = Duration::from_millis(bytes as u64 * 1000 / ASSUMED_BYTES_PER_SEC);
    if bytes < DETACHED_BODY {
        floor
    } else {
        floor.max(LARGE_BASE + transfer)
    }
}

/// When each peer was last heard from: a successful RPC to it, or an
/// authenticated RPC from it. Feeds `status()` and `NoQuorum`.
#[derive(Debug, Default)]
pub(crate) struct Contacts(Mutex<HashMap<u64, Instant>>);

impl Contacts {
    pub(crate) fn touch(&self, id: u64) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(id, Instant::now());
    }

    pub(crate) fn age(&self, id: u64) -> Option<Duration> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&id).map(Instant::elapsed)
    }
}

/// The cluster secret, shared by the RPC client and server of a node and
/// replaced when a device adopts the secret of the cluster it joins.
#[derive(Debug, Clone)]
pub(crate) struct SharedSecret(Arc<std::sync::RwLock<Arc<str>>>);

impl SharedSecret {
    pub(crate) fn new(secret: &str) -> Self {
        Self(Arc::new(std::sync::RwLock::new(secret.into())))
    }

    pub(crate) fn get(&self) -> Arc<str> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set(&self, secret: &str) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = secret.into();
    }
}

/// Builds one connection per target; all share one HTTP client (and pool).
#[derive(Debug, Clone)]
pub(crate) struct NetworkFactory {
    pub(crate) client: reqwest::Client,
    pub(crate) secret: SharedSecret,
    pub(crate) contacts: Arc<Contacts>,
}

impl NetworkFactory {
    pub(crate) fn new(
        secret: SharedSecret,
        contacts: Arc<Contacts>,
        client: Option<reqwest::Client>,
    ) -> Result<Self, crate::http::HttpClientError> {
        let client = match client {
            Some(c) => c,
            // Plain HTTP peers: no trust anchors, calls set their own
            // timeouts; this bounds anything that does not.
            None => crate::http::http_client(
                crate::http::ClientTls::Plain,
                Some(Duration::from_secs(30)),
            )?,
        };
        Ok(Self {
            client,
            secret,
            contacts,
        })
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, node: &NodeInfo) -> Connection {
        Connection {
            factory: self.clone(),
            target,
            node: node.clone(),
            in_flight: None,
        }
    }
}

type AppendReply = Result<AppendEntriesResponse<u64>, RaftError<u64>>;

/// Which append a detached request carries: a retry of the same entries
/// under the same vote may take over its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AppendKey {
    vote: Vote,
    prev: Option<LogId>,
    last: Option<LogId>,
    entries: usize,
}

#[derive(Debug)]
pub(crate) struct Connection {
    factory: NetworkFactory,
    target: u64,
    node: NodeInfo,
    /// A large append still being sent (see [`DETACHED_BODY`]).
    in_flight: Option<(AppendKey, JoinHandle<Result<AppendReply, PostError>>)>,
}

#[derive(Debug)]
enum PostError {
    Unreachable(Unreachable),
    Network(NetworkError),
}

impl<E: std::error::Error> From<PostError> for RPCError<u64, NodeInfo, E> {
    fn from(e: PostError) -> Self {
        match e {
            PostError::Unreachable(e) => RPCError::Unreachable(e),
            PostError::Network(e) => RPCError::Network(e),
        }
    }
}

fn network_error(msg: String) -> PostError {
    PostError::Network(NetworkError::new(&AnyError::error(msg)))
}

/// One encoded request to one peer, owning everything it needs so that it
/// can run as a task of its own.
struct Post {
    factory: NetworkFactory,
    target: u64,
    url: String,
    body: Vec<u8>,
    timeout: Duration,
}

impl Post {
    async fn send<Resp: DeserializeOwned>(self) -> Result<Resp, PostError> {
        let Post {
            factory,
            target,
            url,
            body,
            timeout,
        } = self;
        let response = factory
            .client
            .post(&url)
            .header(SECRET_HEADER, &*factory.secret.get())
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .timeout(timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_connect() {
                    PostError::Unreachable(Unreachable::new(&e))
                } else {
                    PostError::Network(NetworkError::new(&e))
                }
            })?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            // A secret mismatch will not heal by retrying at full speed.
            return Err(PostError::Unreachable(Unreachable::new(&AnyError::error(
                format!("{url}: the peer rejected the cluster secret"),
            ))));
        }
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(network_error(format!("{url}: HTTP {status}: {text}")));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| PostError::Network(NetworkError::new(&e)))?;
        let value =
            decode(&bytes).map_err(|e| network_error(format!("{url}: bad response: {e}")))?;
        factory.contacts.touch(target);
        Ok(value)
    }
}

impl Connection {
    fn prepare<Req: Serialize>(
        &self,
        route: &str,
        body: &Req,
        floor: Duration,
    ) -> Result<Post, PostError> {
        let url = format!(
            "{}/cluster/v1/{route}",
            self.node.api_addr.trim_end_matches('/')
        );
        let body = encode(body).map_err(|e| network_error(format!("encoding {route}: {e}")))?;
        Ok(Post {
            factory: self.factory.clone(),
            target: self.target,
            url,
            timeout: rpc_timeout(floor, body.len()),
            body,
        })
    }

    fn remote<E: std::error::Error>(&self, e: E) -> RPCError<u64, NodeInfo, E> {
        RPCError::RemoteError(RemoteError::new_with_node(
            self.target,
            self.node.clone(),
            e,
        ))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    #[tracing::instrument(level = "trace", skip_all, fields(target = self.target))]
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, NodeInfo, RaftError<u64>>> {
        let key = AppendKey {
            vote: rpc.vote,
            prev: rpc.prev_log_id,
            last: rpc.entries.last().map(|e| e.log_id),
            entries: rpc.entries.len(),
        };
        let joined = match self.in_flight.take() {
            Some((k, handle)) if k == key => Some(handle),
            // Another append: the detached one finishes (or fails) alone;
            // its answer would not be about these entries.
            _ => None,
        };
        let handle = match joined {
            Some(handle) => handle,
            None => {
                let entries = rpc.entries.len();
                let post = self.prepare("append", &rpc, option.hard_ttl())?;
                if post.body.len() > MAX_BODY {
                    // openraft resends fewer entries at once; a single
                    // entry is never this large (`MAX_COMMAND_BYTES`).
                    return Err(RPCError::PayloadTooLarge(
                        PayloadTooLarge::new_entries_hint((entries as u64 / 2).max(1)),
                    ));
                }
                if post.body.len() < DETACHED_BODY {
                    let res: AppendReply = post.send().await?;
                    return res.map_err(|e| self.remote(e));
                }
                tokio::spawn(post.send::<AppendReply>())
            }
        };
        // If openraft's timeout drops this future, the handle stays here
        // for its retry to join.
        let (_, handle) = self.in_flight.insert((key, handle));
        let res = handle.await;
        self.in_flight = None;
        let res = res.map_err(|e| network_error(format!("append task: {e}")))??;
        res.map_err(|e| self.remote(e))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, NodeInfo, RaftError<u64>>> {
        let res: Result<VoteResponse<u64>, RaftError<u64>> = self
            .prepare("vote", &rpc, option.hard_ttl())?
            .send()
            .await?;
        res.map_err(|e| self.remote(e))
    }

    /// One chunk of a snapshot (at most `snapshot_max_chunk_size`);
    /// openraft's default `full_snapshot` sends them in turn and resumes
    /// from the offset the receiver reports.
    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, NodeInfo, RaftError<u64, InstallSnapshotError>>,
    > {
        let res: Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> = self
            .prepare("snapshot-chunk", &rpc, option.hard_ttl())?
            .send()
            .await?;
        res.map_err(|e| self.remote(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_grow_with_large_bodies_only() {
        let floor = Duration::from_millis(100);
        assert_eq!(rpc_timeout(floor, 1000), floor);
        assert_eq!(rpc_timeout(floor, 30_000_000), Duration::from_secs(4));
        let long = Duration::from_secs(10);
        assert_eq!(rpc_timeout(long, 30_000_000), long);
    }
}
