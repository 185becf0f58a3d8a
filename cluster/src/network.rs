//! Raft RPC over HTTP, both ends.
//!
//! Three POST routes under `/cluster/v1/` (`append`, `vote`, `snapshot`), each
//! guarded by the cluster secret in [`SECRET_HEADER`] (401 without it).
//! Bodies are bincode (serde mode) of openraft's request, and of
//! `Result<response, RaftError>` back, so a remote Raft error travels as a
//! value, not as an HTTP status. Snapshots go whole, in one request: gtm's
//! replicated state is a configuration, not bulk data.
//!
//! The client side shares one pooled `reqwest::Client`; every call has a
//! timeout; a connection failure (or a rejected secret) is `Unreachable`, so
//! openraft backs off instead of hammering a dead peer.

use std::collections::HashMap;
use std::future::Future;
use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request as HttpRequest, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{AnyError, OptionalSend};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::node::ClusterNode;
use crate::types::{NodeInfo, Snapshot, SnapshotMeta, TypeConfig, Vote, decode, encode};

/// The header carrying the cluster secret on every Raft RPC.
pub const SECRET_HEADER: &str = "x-gtm-cluster-secret";

/// Largest RPC body accepted: an append batch or a whole snapshot.
const MAX_BODY: usize = 64 * 1024 * 1024;

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

// ---- client side ----

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
            // Plain HTTP peers; reqwest still wants a TLS configuration, so
            // give it one with an explicit provider and no trust anchors.
            // Plain HTTP peers: no trust anchors, calls set their own
            // timeouts; this bounds anything that does not.
            None => crate::http::http_client(None, None, Some(Duration::from_secs(30)))?,
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
        }
    }
}

#[derive(Debug)]
pub(crate) struct Connection {
    factory: NetworkFactory,
    target: u64,
    node: NodeInfo,
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

impl Connection {
    #[tracing::instrument(level = "trace", skip(self, body), fields(target = self.target))]
    async fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        route: &str,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, PostError> {
        let url = format!(
            "{}/cluster/v1/{route}",
            self.node.api_addr.trim_end_matches('/')
        );
        let body = encode(body).map_err(|e| network_error(format!("encoding {route}: {e}")))?;
        let response = self
            .factory
            .client
            .post(&url)
            .header(SECRET_HEADER, &*self.factory.secret.get())
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
        self.factory.contacts.touch(self.target);
        Ok(value)
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, NodeInfo, RaftError<u64>>> {
        let res: Result<AppendEntriesResponse<u64>, RaftError<u64>> =
            self.post("append", &rpc, option.hard_ttl()).await?;
        res.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                e,
            ))
        })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, NodeInfo, RaftError<u64>>> {
        let res: Result<VoteResponse<u64>, RaftError<u64>> =
            self.post("vote", &rpc, option.hard_ttl()).await?;
        res.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                e,
            ))
        })
    }

    /// Chunked transfer is not used: `full_snapshot` sends snapshots whole.
    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, NodeInfo, RaftError<u64, InstallSnapshotError>>,
    > {
        Err(RPCError::Network(NetworkError::new(&AnyError::error(
            "chunked snapshot transfer is not supported: snapshots are sent whole",
        ))))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<u64>, StreamingError<TypeConfig, Fatal<u64>>> {
        let body = (vote, snapshot.meta, snapshot.snapshot.into_inner());
        let sent = self.post::<_, Result<SnapshotResponse<u64>, Fatal<u64>>>(
            "snapshot",
            &body,
            option.hard_ttl(),
        );
        let res = tokio::select! {
            res = sent => res,
            closed = cancel => return Err(StreamingError::Closed(closed)),
        };
        match res {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(fatal)) => Err(StreamingError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                fatal,
            ))),
            Err(PostError::Unreachable(e)) => Err(StreamingError::Unreachable(e)),
            Err(PostError::Network(e)) => Err(StreamingError::Network(e)),
        }
    }
}

// ---- server side ----

/// The Raft RPC routes of a device, to merge into its API server.
/// The Raft RPC routes (all `POST`), each guarded by the cluster secret.
pub const RPC_PATHS: [&str; 4] = [
    "/cluster/v1/append",
    "/cluster/v1/vote",
    "/cluster/v1/snapshot",
    "/cluster/v1/propose",
];

pub fn rpc_router(node: Arc<ClusterNode>) -> Router {
    let [append_path, vote_path, snapshot_path, propose_path] = RPC_PATHS;
    Router::new()
        .route(propose_path, post(propose))
        .route(append_path, post(append))
        .route(vote_path, post(vote))
        .route(snapshot_path, post(snapshot))
        // Checked before the body is read.
        .route_layer(middleware::from_fn_with_state(node.clone(), require_secret))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(node)
}

/// Equal length and equal bytes, in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    diff == 0
}

async fn require_secret(
    State(node): State<Arc<ClusterNode>>,
    headers: HeaderMap,
    request: HttpRequest,
    next: Next,
) -> Response {
    let given = headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !constant_time_eq(given, node.secret().as_bytes()) {
        tracing::warn!(path = %request.uri().path(), "cluster RPC with a missing or wrong secret");
        return (StatusCode::UNAUTHORIZED, "missing or wrong cluster secret").into_response();
    }
    next.run(request).await
}

fn reply<T: Serialize>(value: &T) -> Response {
    match encode(value) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding the reply: {e}"),
        )
            .into_response(),
    }
}

fn bad_request(what: &str, e: impl std::fmt::Display) -> Response {
    (
        StatusCode::BAD_REQUEST,
        format!("cannot decode {what}: {e}"),
    )
        .into_response()
}

#[tracing::instrument(level = "trace", skip_all)]
async fn append(State(node): State<Arc<ClusterNode>>, body: Bytes) -> Response {
    let req: AppendEntriesRequest<TypeConfig> = match decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("append request", e),
    };
    if let Some(from) = req.vote.leader_id().voted_for() {
        node.contacts().touch(from);
    }
    let res = node.raft().append_entries(req).await;
    reply(&res)
}

#[tracing::instrument(level = "trace", skip_all)]
async fn vote(State(node): State<Arc<ClusterNode>>, body: Bytes) -> Response {
    let req: VoteRequest<u64> = match decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("vote request", e),
    };
    if let Some(from) = req.vote.leader_id().voted_for() {
        node.contacts().touch(from);
    }
    let res = node.raft().vote(req).await;
    reply(&res)
}

#[tracing::instrument(level = "debug", skip_all)]
async fn snapshot(State(node): State<Arc<ClusterNode>>, body: Bytes) -> Response {
    let (vote, meta, data): (Vote, SnapshotMeta, Vec<u8>) = match decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("snapshot", e),
    };
    if let Some(from) = vote.leader_id().voted_for() {
        node.contacts().touch(from);
    }
    let snapshot = Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(data)),
    };
    let res = node.raft().install_full_snapshot(vote, snapshot).await;
    reply(&res)
}

/// A command forwarded by a follower: proposed here if this device leads,
/// else `NotLeader` naming the leader (the follower follows it).
#[tracing::instrument(level = "debug", skip_all)]
async fn propose(State(node): State<Arc<ClusterNode>>, body: Bytes) -> Response {
    let forwarded: crate::forward::Forwarded = match decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("forwarded command", e),
    };
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis(
            forwarded
                .deadline_ms
                .min(crate::node::PROPOSE_DEADLINE.as_millis() as u64),
        );
    let res = node.propose_as_leader(forwarded.command, deadline).await;
    reply(&res)
}

/// The bodies a device decodes from its peers: the Raft RPC requests its
/// routes receive and the replies its client reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcBody {
    AppendRequest,
    VoteRequest,
    /// With the snapshot's data, decoded as installing it does.
    SnapshotRequest,
    AppendReply,
    VoteReply,
    SnapshotReply,
}

impl RpcBody {
    pub const ALL: [RpcBody; 6] = [
        RpcBody::AppendRequest,
        RpcBody::VoteRequest,
        RpcBody::SnapshotRequest,
        RpcBody::AppendReply,
        RpcBody::VoteReply,
        RpcBody::SnapshotReply,
    ];
}

/// Decodes `body` with the types the routes and the client use, and returns
/// the decoded value encoded again. Only the fuzz targets call it: it runs
/// exactly the decoding that a peer's bytes reach.
pub fn decode_rpc_body(kind: RpcBody, body: &[u8]) -> Result<Vec<u8>, String> {
    fn again<T: Serialize + DeserializeOwned>(body: &[u8]) -> Result<Vec<u8>, String> {
        let value: T = decode(body).map_err(|e| e.to_string())?;
        encode(&value).map_err(|e| format!("decoded but cannot encode again: {e}"))
    }
    match kind {
        RpcBody::AppendRequest => again::<AppendEntriesRequest<TypeConfig>>(body),
        RpcBody::VoteRequest => again::<VoteRequest<u64>>(body),
        RpcBody::SnapshotRequest => {
            let (_, _, data): (Vote, SnapshotMeta, Vec<u8>) =
                decode(body).map_err(|e| e.to_string())?;
            again::<crate::state_machine::SnapshotData>(&data)?;
            again::<(Vote, SnapshotMeta, Vec<u8>)>(body)
        }
        RpcBody::AppendReply => again::<Result<AppendEntriesResponse<u64>, RaftError<u64>>>(body),
        RpcBody::VoteReply => again::<Result<VoteResponse<u64>, RaftError<u64>>>(body),
        RpcBody::SnapshotReply => again::<Result<SnapshotResponse<u64>, Fatal<u64>>>(body),
    }
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn secret_comparison() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cret!"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
