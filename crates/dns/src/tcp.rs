//! DNS over TCP (RFC 1035 §4.2.2, RFC 7766): each message behind a two-byte
//! length, several per connection, answered in order by the general path
//! (`handler::answer`), so a TCP query gets exactly the answer (and the
//! FORMERR shape) the same query gets over UDP, without the UDP limit.
//!
//! Bounded so that no client can shut the others out (RFC 7766 §6.2):
//! - at most [`MAX_CONNECTIONS`] connections per listener, and at most
//!   [`PER_CLIENT`] of them from one client (an IPv4 address, an IPv6 /64);
//! - a connection that sends no complete message for [`IDLE`] is closed,
//!   and so is one whose response the client does not take within
//!   [`WRITE`] (a client that asks for large answers and never reads);
//! - a new connection over either limit takes the place of the connection
//!   idle the longest (of its client, then of the listener: RFC 7766
//!   §6.2.3); when none is idle (every one is answering, each bounded by
//!   [`WRITE`]) the new one is closed at once.
//!
//! Idle means waiting for the next message with none read ahead and
//! nothing left to write. A connection closed for a response it does not
//! take, or to make room, is reset: what waits unsent is dropped, not
//! left queued in the kernel.
//!
//! Accepting keeps up with a burst of connects: the listen backlog is
//! [`BACKLOG`], and admitting a connection is a lookup in a table of at
//! most [`MAX_CONNECTIONS`].

use std::{
    collections::HashMap,
    io,
    net::{IpAddr, SocketAddr},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::{Duration, Instant, SystemTime},
};

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
};
use tokio_util::sync::CancellationToken;

use super::{
    dnstap::{Seen, SocketProtocol, Tapped},
    handler::{DRAW, Handler, Transport, answer, answer_noted},
    limits::IDLE,
    metrics::{DnsMetrics, TcpClosed},
};

/// Connections served at once per listener.
pub const MAX_CONNECTIONS: usize = 1024;
/// Connections served at once per listener to one client: an IPv4
/// address, or an IPv6 /64 (what one host usually holds).
pub const PER_CLIENT: usize = 64;
/// A connection whose client takes no response (a whole message) within
/// this long is closed.
pub const WRITE: Duration = Duration::from_secs(5);
/// Connections the kernel completes before they are accepted (it caps
/// this at `net.core.somaxconn`). A connect beyond it is dropped and waits
/// a second for its retry: 128 was too few for a burst of connects.
pub const BACKLOG: i32 = 4096;

/// A listening socket for DNS over TCP on `addr`.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    // As tokio's own bind: a restart need not wait for old connections.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// A connection's bytes: plain TCP, or TLS over it (`xot`).
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// How dnstap names the transport.
    const PROTOCOL: SocketProtocol;
    /// The TCP socket underneath.
    fn socket(&self) -> &TcpStream;
}

impl Stream for TcpStream {
    const PROTOCOL: SocketProtocol = SocketProtocol::Tcp;
    fn socket(&self) -> &TcpStream {
        self
    }
}

/// Accepts and serves connections on `listener` until `stop`.
pub async fn serve(listener: TcpListener, handler: Handler, stop: CancellationToken) {
    let table = Arc::new(Table::new());
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
        let metrics = &handler.state.metrics;
        let seat = match table.admit(peer.ip(), &stop, metrics) {
            Ok(seat) => seat,
            Err(refused) => {
                metrics.tcp_closed(refused);
                // A reset: nothing of it lingers here (no TIME_WAIT).
                let _ = SockRef::from(&stream).set_linger(Some(Duration::ZERO));
                drop(stream);
                continue;
            }
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            if let Some(why) = connection(stream, peer, &handler, &seat).await {
                handler.state.metrics.tcp_closed(why);
            }
            // Dropping the seat frees its place.
        });
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The client closed it, or it broke.
    Client,
    /// The server closed it (idle, or a response not taken).
    Server(TcpClosed),
    /// Closed from outside: evicted (counted then), or shutdown.
    Closed,
}

/// Serves one connection: message after message, until the client closes
/// it, sends no complete message for [`IDLE`], takes no response for
/// [`WRITE`], a read or write fails, or it is closed from outside. Returns
/// why the server closed it, if it did on its own.
pub(crate) async fn connection<S: Stream>(
    stream: S,
    peer: SocketAddr,
    handler: &Handler,
    seat: &Seat,
) -> Option<TcpClosed> {
    let _ = stream.socket().set_nodelay(true);
    // The address dnstap names as the response's.
    let local = stream
        .socket()
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    // Messages are read and answered in turn: one buffered stream serves
    // both directions (writes pass through the buffer).
    let mut read = BufReader::new(stream);
    let mut message = Vec::new();
    let close = &seat.activity.close;
    let ended = loop {
        // Idle: nothing to answer until more comes (a message already
        // read ahead is answered first).
        if !holds_message(read.buffer()) {
            seat.idle();
        }
        let next = tokio::select! {
            next = tokio::time::timeout(IDLE, read_message(&mut read, &mut message)) => next,
            _ = close.cancelled() => break Ended::Closed,
        };
        match next {
            Err(_) => break Ended::Server(TcpClosed::Idle),
            Ok(Err(_)) => break Ended::Client,
            Ok(Ok(())) => {}
        }
        seat.busy();
        if let Err(ended) = respond::<S>(&message, peer, local, handler, &mut read, close).await {
            break ended;
        }
    };
    // A response not taken, or closed from outside: reset, dropping what
    // waits unsent (a plain close would leave it queued in the kernel
    // behind a window the client never opens).
    if matches!(
        ended,
        Ended::Closed | Ended::Server(TcpClosed::WriteTimeout)
    ) {
        let _ = SockRef::from(read.get_ref().socket()).set_linger(Some(Duration::ZERO));
    }
    match ended {
        Ended::Server(why) => Some(why),
        Ended::Client | Ended::Closed => None,
    }
}

/// Whether `buffered` starts with a whole length-prefixed message.
fn holds_message(buffered: &[u8]) -> bool {
    match buffered {
        [hi, lo, rest @ ..] => rest.len() >= usize::from(u16::from_be_bytes([*hi, *lo])),
        _ => false,
    }
}

/// Reads one length-prefixed message into `message`.
async fn read_message(
    read: &mut (impl AsyncRead + Unpin),
    message: &mut Vec<u8>,
) -> io::Result<()> {
    let len = read.read_u16().await?;
    message.resize(usize::from(len), 0);
    read.read_exact(message).await?;
    Ok(())
}

/// Answers one message: its response, or a zone transfer's messages.
async fn respond<S: Stream>(
    message: &[u8],
    peer: SocketAddr,
    local: SocketAddr,
    handler: &Handler,
    write: &mut (impl AsyncWrite + Unpin),
    close: &CancellationToken,
) -> Result<(), Ended> {
    let start = Instant::now();
    // A zone transfer: several messages, built off the async workers.
    if super::xfr::is_transfer(message) {
        let (h, m) = (handler.clone(), message.to_vec());
        let built = tokio::select! {
            built = tokio::task::spawn_blocking(move || super::xfr::answer_tcp(&h, &m, peer)) => built,
            _ = close.cancelled() => return Err(Ended::Closed),
        };
        // `None`: a request hickory cannot read; the general path says so.
        if let Ok(Some(messages)) = built {
            for framed in messages {
                send(write, &framed, close).await?;
            }
            handler.state.metrics.latency.observe(start.elapsed(), 1);
            return Ok(());
        }
    }
    // A dynamic update: answered once its change is committed, or refused.
    if super::update::is_update(message)
        && let Some(response) = tokio::select! {
            r = super::update::tcp(handler, message, peer) => r,
            _ = close.cancelled() => return Err(Ended::Closed),
        }
    {
        if let Some(framed) = response.as_deref().and_then(frame) {
            send(write, &framed, close).await?;
            handler.state.metrics.latency.observe(start.elapsed(), 1);
        }
        return Ok(());
    }
    let Some(reply) = reply_tapped(handler, message, peer, local, S::PROTOCOL) else {
        return Ok(());
    };
    send(write, &reply, close).await?;
    handler.state.metrics.latency.observe(start.elapsed(), 1);
    Ok(())
}

/// Writes one framed response, within [`WRITE`] (flushed: TLS holds
/// what it has not sent until then).
async fn send(
    write: &mut (impl AsyncWrite + Unpin),
    framed: &[u8],
    close: &CancellationToken,
) -> Result<(), Ended> {
    let written = async {
        write.write_all(framed).await?;
        write.flush().await
    };
    tokio::select! {
        written = tokio::time::timeout(WRITE, written) => match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Ended::Client),
            Err(_) => Err(Ended::Server(TcpClosed::WriteTimeout)),
        },
        _ = close.cancelled() => Err(Ended::Closed),
    }
}

/// The framed reply to one message (its length, then the response), or
/// `None` when nothing is sent back (a response, or no header).
pub fn reply(handler: &Handler, message: &[u8], peer: SocketAddr) -> Option<Vec<u8>> {
    let response =
        DRAW.with(|d| answer(handler, message, peer, Transport::Tcp, &mut d.borrow_mut()))?;
    frame(&response)
}

/// [`reply`], handing the query and its response to dnstap when it is on
/// and samples this one; `local` is the listener's address.
fn reply_tapped(
    handler: &Handler,
    message: &[u8],
    peer: SocketAddr,
    local: SocketAddr,
    protocol: SocketProtocol,
) -> Option<Vec<u8>> {
    let tap = handler.state.dnstap.tap.load();
    let Some(tap) = tap.as_deref().filter(|t| t.sampled()) else {
        return reply(handler, message, peer);
    };
    let query_time = SystemTime::now();
    let mut note = None;
    let response = DRAW.with(|d| {
        let draw = &mut d.borrow_mut();
        answer_noted(handler, message, peer, Transport::Tcp, draw, &mut note)
    })?;
    let framed = frame(&response)?;
    tap.send(Tapped {
        seen: Seen {
            protocol,
            client: peer,
            server: local,
            query_time,
            query: bytes::Bytes::copy_from_slice(message),
            response_time: SystemTime::now(),
            response: response.into(),
        },
        steered: note,
    });
    Some(framed)
}

/// A response behind its two-byte length.
fn frame(response: &[u8]) -> Option<Vec<u8>> {
    // `answer` keeps a response within 65,535 bytes over TCP.
    let len = u16::try_from(response.len()).ok()?;
    let mut framed = Vec::with_capacity(response.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(response);
    Some(framed)
}

/// Whom a connection counts against for [`PER_CLIENT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    V4(u32),
    /// The /64.
    V6(u64),
}

impl From<IpAddr> for Client {
    fn from(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(a) => Self::V4(u32::from(a)),
            IpAddr::V6(a) => Self::V6((u128::from(a) >> 64) as u64),
        }
    }
}

/// `idle_since` of a connection that is answering.
const BUSY: u64 = u64::MAX;

/// What the table knows of a connection, shared with its task.
#[derive(Debug)]
struct Activity {
    /// Milliseconds from the table's epoch to when the connection last
    /// became idle, or [`BUSY`].
    idle_since: AtomicU64,
    /// Cancelled to close the connection (a child of the listener's stop).
    close: CancellationToken,
}

#[derive(Debug)]
struct Entry {
    client: Client,
    activity: Arc<Activity>,
}

/// The connections of one listener: how many per client, and which are
/// idle since when, to admit a new one or choose whom it replaces. Locked
/// only to admit and to free; the connections mark themselves idle or
/// busy with one atomic store.
#[derive(Debug)]
pub(crate) struct Table {
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<u64, Entry>,
    per_client: HashMap<Client, usize>,
    next_id: u64,
}

/// An admitted connection's place in the table, freed when dropped.
pub(crate) struct Seat {
    table: Arc<Table>,
    id: u64,
    activity: Arc<Activity>,
    metrics: Arc<DnsMetrics>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            inner: Mutex::default(),
        }
    }

    fn now_ms(&self) -> u64 {
        // Below BUSY for 584 million years.
        self.epoch.elapsed().as_millis() as u64
    }

    /// Admits a connection from `ip`, closing the connection idle the
    /// longest of its client, then of the listener, when either is at its
    /// limit. `Err`: refused, nobody being idle.
    pub(crate) fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        stop: &CancellationToken,
        metrics: &Arc<DnsMetrics>,
    ) -> Result<Seat, TcpClosed> {
        let client = Client::from(ip);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.per_client.get(&client).copied().unwrap_or(0) >= PER_CLIENT {
            let id = inner
                .longest_idle(|e| e.client == client)
                .ok_or(TcpClosed::ClientLimit)?;
            inner.evict(id, metrics);
        }
        if inner.entries.len() >= MAX_CONNECTIONS {
            let id = inner
                .longest_idle(|_| true)
                .ok_or(TcpClosed::ListenerFull)?;
            inner.evict(id, metrics);
        }
        let id = inner.next_id;
        inner.next_id += 1;
        let activity = Arc::new(Activity {
            idle_since: AtomicU64::new(self.now_ms()),
            close: stop.child_token(),
        });
        inner.entries.insert(
            id,
            Entry {
                client,
                activity: activity.clone(),
            },
        );
        *inner.per_client.entry(client).or_default() += 1;
        metrics.tcp_open(true);
        Ok(Seat {
            table: self.clone(),
            id,
            activity,
            metrics: metrics.clone(),
        })
    }
}

impl Inner {
    /// The connection idle the longest among those `pick` takes.
    fn longest_idle(&self, pick: impl Fn(&Entry) -> bool) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(_, e)| pick(e))
            .map(|(id, e)| (e.activity.idle_since.load(Relaxed), *id))
            .filter(|(since, _)| *since != BUSY)
            .min()
            .map(|(_, id)| id)
    }

    /// Frees a connection's place, if it still has one.
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        if let Some(n) = self.per_client.get_mut(&entry.client) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&entry.client);
            }
        }
        Some(entry)
    }

    /// Closes an idle connection to make room: its place is free at once,
    /// its task ends at its next poll.
    fn evict(&mut self, id: u64, metrics: &DnsMetrics) {
        if let Some(entry) = self.remove(id) {
            entry.activity.close.cancel();
            metrics.tcp_closed(TcpClosed::Evicted);
            metrics.tcp_open(false);
        }
    }
}

impl Seat {
    fn idle(&self) {
        self.activity.idle_since.store(self.table.now_ms(), Relaxed);
    }

    fn busy(&self) {
        self.activity.idle_since.store(BUSY, Relaxed);
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut inner = self
            .table
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Evicted ones were freed (and counted) already.
        if inner.remove(self.id).is_some() {
            self.metrics.tcp_open(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_message_read_ahead_is_whole_or_not() {
        assert!(!holds_message(&[]));
        assert!(!holds_message(&[0]));
        assert!(holds_message(&[0, 0]));
        assert!(!holds_message(&[0, 3, 1, 2]));
        assert!(holds_message(&[0, 3, 1, 2, 3]));
        assert!(holds_message(&[0, 1, 1, 0]));
    }

    #[test]
    fn a_client_is_an_ipv4_address_or_an_ipv6_64() {
        assert_eq!(
            Client::from(ip("192.0.2.1")),
            Client::from(ip("::ffff:192.0.2.1"))
        );
        assert_ne!(Client::from(ip("192.0.2.1")), Client::from(ip("192.0.2.2")));
        assert_eq!(
            Client::from(ip("2001:db8:1:2::1")),
            Client::from(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            Client::from(ip("2001:db8:1:2::1")),
            Client::from(ip("2001:db8:1:3::1"))
        );
    }

    #[test]
    fn the_longest_idle_makes_room_and_busy_ones_never_do() {
        let table = Arc::new(Table::new());
        let (stop, metrics) = (CancellationToken::new(), Arc::new(DnsMetrics::default()));
        let a = ip("192.0.2.1");
        let mut seats: Vec<Seat> = (0..PER_CLIENT)
            .map(|_| table.admit(a, &stop, &metrics).unwrap())
            .collect();
        // All busy: the client's next connection is refused.
        for s in &seats {
            s.busy();
        }
        assert_eq!(
            table.admit(a, &stop, &metrics).err(),
            Some(TcpClosed::ClientLimit)
        );
        // Two idle, the older replaced first.
        seats[7].activity.idle_since.store(5, Relaxed);
        seats[3].activity.idle_since.store(2, Relaxed);
        let newer = table.admit(a, &stop, &metrics).unwrap();
        assert!(seats[3].activity.close.is_cancelled());
        assert!(!seats[7].activity.close.is_cancelled());
        // Another client is not held back by this one.
        let other = table.admit(ip("192.0.2.2"), &stop, &metrics).unwrap();
        let inner = table.inner.lock().unwrap();
        assert_eq!(inner.entries.len(), PER_CLIENT + 1);
        assert_eq!(inner.per_client[&Client::from(a)], PER_CLIENT);
        drop(inner);
        // Freeing an evicted seat frees nothing twice.
        drop(seats.remove(3));
        drop((newer, other));
        assert_eq!(table.inner.lock().unwrap().entries.len(), PER_CLIENT - 1);
        drop(seats);
        let inner = table.inner.lock().unwrap();
        assert!(inner.entries.is_empty() && inner.per_client.is_empty());
    }

    #[test]
    fn a_full_listener_replaces_its_longest_idle_connection() {
        let table = Arc::new(Table::new());
        let (stop, metrics) = (CancellationToken::new(), Arc::new(DnsMetrics::default()));
        let seats: Vec<Seat> = (0..MAX_CONNECTIONS)
            .map(|i| {
                let s = table
                    .admit(ip(&format!("10.0.{}.{}", i / 50, i % 50)), &stop, &metrics)
                    .unwrap();
                s.busy();
                s
            })
            .collect();
        assert_eq!(
            table.admit(ip("192.0.2.9"), &stop, &metrics).err(),
            Some(TcpClosed::ListenerFull)
        );
        seats[100].activity.idle_since.store(1, Relaxed);
        let _admitted = table.admit(ip("192.0.2.9"), &stop, &metrics).unwrap();
        assert!(seats[100].activity.close.is_cancelled());
        assert_eq!(table.inner.lock().unwrap().entries.len(), MAX_CONNECTIONS);
        // Stopping the listener closes every connection.
        stop.cancel();
        assert!(seats.iter().all(|s| s.activity.close.is_cancelled()));
    }
}
