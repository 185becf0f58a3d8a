//! Forwarding a command to the leader: the client half of
//! `POST /cluster/v1/propose` (the route is in `rpc_server`).
//!
//! The body is bincode of [`Forwarded`]; the answer is bincode of
//! `Result<outcome, ClusterError>`, so the leader's typed error arrives as
//! it was made. Whether a failure may have left the command proposed
//! decides its kind: a connection that was never made is `Network` (safe to
//! retry anywhere), a request that was sent and not answered is `Unknown`.

use std::time::Duration;

use axum::http::header;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::ClusterError;
use crate::rpc_client::SECRET_HEADER;
use crate::types::{NodeInfo, decode, encode};

/// A command forwarded to the leader, with the time left to decide it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Forwarded {
    pub(crate) deadline_ms: u64,
    #[serde(with = "crate::types::bytes")]
    pub(crate) command: Vec<u8>,
}

/// Extra time the HTTP call waits beyond the leader's own deadline, for the
/// answer to travel back.
const ANSWER_SLACK: Duration = Duration::from_millis(500);

/// Sends `command` to `leader` and returns its outcome or its typed error.
pub(crate) async fn propose(
    client: &reqwest::Client,
    secret: &str,
    leader: &NodeInfo,
    command: &[u8],
    deadline: Instant,
) -> Result<Vec<u8>, ClusterError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let body = encode(&Forwarded {
        deadline_ms: left.as_millis() as u64,
        command: command.to_vec(),
    })
    .map_err(|e| ClusterError::Invalid(format!("encoding the command: {e}")))?;
    let url = format!(
        "{}/cluster/v1/propose",
        leader.api_addr.trim_end_matches('/')
    );
    let sent = client
        .post(&url)
        .header(SECRET_HEADER, secret)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .timeout(left + ANSWER_SLACK)
        .body(body)
        .send()
        .await;
    let response = match sent {
        Ok(r) => r,
        Err(e) if e.is_connect() => {
            return Err(ClusterError::Network(format!(
                "cannot reach the leader {leader}: {e}"
            )));
        }
        Err(e) => {
            return Err(ClusterError::Unknown(format!(
                "the leader {leader} did not answer: {e}"
            )));
        }
    };
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Err(ClusterError::Invalid(format!(
            "the leader {leader} rejected this device's cluster secret"
        )));
    }
    let bytes = match response.bytes().await {
        Ok(b) => b,
        Err(e) => {
            return Err(ClusterError::Unknown(format!(
                "the leader {leader} did not finish its answer: {e}"
            )));
        }
    };
    if !status.is_success() {
        // The route answers every decided outcome with 200: anything else
        // came before the command reached Raft (a body it refused) or from
        // something in between.
        let text = String::from_utf8_lossy(&bytes);
        return Err(if status.is_client_error() {
            ClusterError::Invalid(format!("the leader {leader} refused the command: {text}"))
        } else {
            ClusterError::Unknown(format!("the leader {leader} answered {status}: {text}"))
        });
    }
    match decode::<Result<Vec<u8>, ClusterError>>(&bytes) {
        Ok(answer) => answer,
        Err(e) => Err(ClusterError::Unknown(format!(
            "the leader {leader} answered something unreadable: {e}"
        ))),
    }
}
