//! DNS over TCP (RFC 1035 §4.2.2, RFC 7766): each message behind a two-byte
//! length, several per connection, answered in order by the general path
//! ([`handler::answer`]), so a TCP query gets exactly the answer (and the
//! FORMERR shape) the same query gets over UDP, without the UDP limit.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections per listener (one more
//! is closed at once), and a connection idle for [`IDLE`] (no complete
//! message) is closed.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
};
use tokio_util::sync::CancellationToken;

use super::handler::{DRAW, Handler, Transport, answer};

/// Connections served at once per listener.
pub const MAX_CONNECTIONS: usize = 1024;
/// A connection that sends no complete message for this long is closed.
pub const IDLE: Duration = Duration::from_secs(10);

/// Accepts and serves connections on `listener` until `stop`.
pub async fn serve(listener: TcpListener, handler: Handler, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, mostly: wait rather than spin.
                    tracing::debug!(error = %e, "DNS TCP accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let (handler, stop) = (handler.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = connection(stream, peer, &handler) => {}
                _ = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
}

/// Serves one connection: message after message, until the client closes
/// it, sends an incomplete or no message for [`IDLE`], or a write fails.
async fn connection(stream: TcpStream, peer: SocketAddr, handler: &Handler) {
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut message = Vec::new();
    loop {
        let Ok(Ok(len)) = tokio::time::timeout(IDLE, read.read_u16()).await else {
            return;
        };
        message.resize(usize::from(len), 0);
        let Ok(Ok(_)) = tokio::time::timeout(IDLE, read.read_exact(&mut message)).await else {
            return;
        };
        let start = std::time::Instant::now();
        // A zone transfer: several messages, built off the async workers.
        if super::xfr::is_transfer(&message) {
            let (h, m) = (handler.clone(), message.clone());
            let built =
                tokio::task::spawn_blocking(move || super::xfr::answer_tcp(&h, &m, peer)).await;
            // `None`: a request hickory cannot read; the general path says so.
            if let Ok(Some(messages)) = built {
                for framed in messages {
                    if write.write_all(&framed).await.is_err() {
                        return;
                    }
                }
                handler.state.metrics.latency.observe(start.elapsed(), 1);
                continue;
            }
        }
        let Some(reply) = reply(handler, &message, peer) else {
            continue;
        };
        if write.write_all(&reply).await.is_err() {
            return;
        }
        handler.state.metrics.latency.observe(start.elapsed(), 1);
    }
}

/// The framed reply to one message (its length, then the response), or
/// `None` when nothing is sent back (a response, or no header).
pub fn reply(handler: &Handler, message: &[u8], peer: SocketAddr) -> Option<Vec<u8>> {
    let response =
        DRAW.with(|d| answer(handler, message, peer, Transport::Tcp, &mut d.borrow_mut()))?;
    // `answer` keeps a response within 65,535 bytes over TCP.
    let len = u16::try_from(response.len()).ok()?;
    let mut framed = Vec::with_capacity(response.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(&response);
    Some(framed)
}
