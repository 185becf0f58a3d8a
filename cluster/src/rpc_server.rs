//! Raft RPC over HTTP, the server half: the routes a device serves to its
//! peers, and the decoding of what they send (also run by the fuzz target).
//!
//! POST routes under `/cluster/v1/`: `append`, `vote`, `snapshot-chunk`
//! (one chunk of a snapshot, assembled by openraft), `snapshot` (a whole
//! snapshot in one body, as devices before chunked transfer send it) and
//! `propose` (a command forwarded by a follower). Each is guarded by the
//! cluster secret (401 without it). The client half is `rpc_client`.

use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request as HttpRequest, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use openraft::error::{Fatal, InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::node::ClusterNode;
use crate::rpc_client::{MAX_BODY, SECRET_HEADER};
use crate::types::{DECODE_LIMIT, Snapshot, SnapshotMeta, TypeConfig, Vote, decode, encode};

/// The Raft RPC routes (all `POST`), each guarded by the cluster secret.
pub const RPC_PATHS: [&str; 5] = [
    "/cluster/v1/append",
    "/cluster/v1/vote",
    "/cluster/v1/snapshot",
    "/cluster/v1/snapshot-chunk",
    "/cluster/v1/propose",
];

/// The Raft RPC routes of a device, to merge into its API server.
pub fn rpc_router(node: Arc<ClusterNode>) -> Router {
    let [
        append_path,
        vote_path,
        snapshot_path,
        chunk_path,
        propose_path,
    ] = RPC_PATHS;
    Router::new()
        .route(propose_path, post(propose))
        .route(append_path, post(append))
        .route(vote_path, post(vote))
        .route(snapshot_path, post(snapshot))
        .route(chunk_path, post(snapshot_chunk))
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
    if node.frozen() {
        // A vote or an entry taken here would be written to a copy of the
        // store and lost at the next start.
        return (StatusCode::SERVICE_UNAVAILABLE, crate::node::FROZEN).into_response();
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
    // No heartbeat arrives while a large append does (ClusterNode::hold_elections).
    let _held = (body.len() >= crate::log_store::IN_FILE_BYTES).then(|| node.hold_elections());
    let req: AppendEntriesRequest<TypeConfig> = match decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("append request", e),
    };
    if let Some(from) = req.vote.leader_id().voted_for() {
        node.contacts().touch(from);
    }
    // A large command goes to its file here, so that Raft's core only
    // renames it (it answers nothing while it appends); not again when
    // the leader sends an entry this log holds already.
    let files = node.log_files();
    let large: Vec<_> = req
        .entries
        .iter()
        .filter(|e| !crate::log_store::command_file_exists(&files, e))
        .filter_map(crate::log_store::command_for_file)
        .cloned()
        .collect();
    let _written = node.prewrite(&large).await;
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

/// One chunk of a snapshot; openraft assembles them in the state machine's
/// buffer and installs the whole when the last one arrives.
#[tracing::instrument(level = "debug", skip_all)]
async fn snapshot_chunk(State(node): State<Arc<ClusterNode>>, body: Bytes) -> Response {
    let req: InstallSnapshotRequest<TypeConfig> = match decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("snapshot chunk", e),
    };
    if let Err(e) = chunk_in_bounds(&req) {
        return bad_request("snapshot chunk", e);
    }
    if let Some(from) = req.vote.leader_id().voted_for() {
        node.contacts().touch(from);
    }
    let res = node.raft().install_snapshot(req).await;
    reply(&res)
}

/// A snapshot chunk that ends beyond the largest snapshot a device decodes.
#[derive(Debug, thiserror::Error)]
#[error("a chunk ending at byte {end} is beyond the largest snapshot ({DECODE_LIMIT} bytes)")]
pub struct ChunkOutOfBounds {
    pub end: u64,
}

/// The receiving buffer grows to the chunk's end: a chunk claiming an
/// offset far beyond any snapshot would make it allocate without bound.
fn chunk_in_bounds(req: &InstallSnapshotRequest<TypeConfig>) -> Result<(), ChunkOutOfBounds> {
    let end = req.offset.saturating_add(req.data.len() as u64);
    if end > DECODE_LIMIT as u64 {
        return Err(ChunkOutOfBounds { end });
    }
    Ok(())
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
    SnapshotChunkRequest,
    AppendReply,
    VoteReply,
    SnapshotReply,
    SnapshotChunkReply,
}

impl RpcBody {
    /// The fuzz target picks by index: new kinds go at the end, so the
    /// seeds' selectors keep their meaning.
    pub const ALL: [RpcBody; 8] = [
        RpcBody::AppendRequest,
        RpcBody::VoteRequest,
        RpcBody::SnapshotRequest,
        RpcBody::AppendReply,
        RpcBody::VoteReply,
        RpcBody::SnapshotReply,
        RpcBody::SnapshotChunkRequest,
        RpcBody::SnapshotChunkReply,
    ];
}

/// Why [`decode_rpc_body`] refused a body.
#[derive(Debug, thiserror::Error)]
pub enum RpcBodyError {
    #[error("{0}")]
    Decode(bincode::error::DecodeError),
    #[error("decoded but cannot encode again: {0}")]
    Encode(bincode::error::EncodeError),
    #[error("{0}")]
    Chunk(ChunkOutOfBounds),
}

/// Decodes `body` with the types the routes and the client use, and returns
/// the decoded value encoded again. Only the fuzz targets call it: it runs
/// exactly the decoding that a peer's bytes reach.
pub fn decode_rpc_body(kind: RpcBody, body: &[u8]) -> Result<Vec<u8>, RpcBodyError> {
    fn again<T: Serialize + DeserializeOwned>(body: &[u8]) -> Result<Vec<u8>, RpcBodyError> {
        let value: T = decode(body).map_err(RpcBodyError::Decode)?;
        encode(&value).map_err(RpcBodyError::Encode)
    }
    match kind {
        RpcBody::AppendRequest => again::<AppendEntriesRequest<TypeConfig>>(body),
        RpcBody::VoteRequest => again::<VoteRequest<u64>>(body),
        RpcBody::SnapshotRequest => {
            let (_, _, data): (Vote, SnapshotMeta, Vec<u8>) =
                decode(body).map_err(RpcBodyError::Decode)?;
            again::<crate::state_machine::SnapshotData>(&data)?;
            again::<(Vote, SnapshotMeta, Vec<u8>)>(body)
        }
        RpcBody::SnapshotChunkRequest => {
            let req: InstallSnapshotRequest<TypeConfig> =
                decode(body).map_err(RpcBodyError::Decode)?;
            chunk_in_bounds(&req).map_err(RpcBodyError::Chunk)?;
            encode(&req).map_err(RpcBodyError::Encode)
        }
        RpcBody::SnapshotChunkReply => again::<
            Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>,
        >(body),
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
