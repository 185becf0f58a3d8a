//! Test backends for the health probers, on loopback port 0: HTTP / HTTPS
//! (h1 and h2), TCP / TLS line servers, a DNS responder and a gRPC health
//! server. Each is started with `start...().await`, exposes `addr`, can be
//! stopped (`stop().await`: the listener is closed, new connections are
//! refused / datagrams get port unreachable) and restarted on the same
//! address (`restart().await`), and stops by itself when dropped.
//!
//! Every backend understands an optional PROXY v1 line before its protocol
//! and records it (`proxy_lines`).
#![allow(dead_code)]

// The one line naming the DNS library: in gtm it is `use hickory_server::proto;`.
use hickory_server::proto;

use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf,
};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

// ---------------------------------------------------------------------------
// Recording and waiting on state.

/// An append-only log that tests can wait on (no sleeps).
#[derive(Debug)]
pub struct Log<T> {
    tx: watch::Sender<Vec<T>>,
}

impl<T: Clone> Default for Log<T> {
    fn default() -> Self {
        Log {
            tx: watch::Sender::new(Vec::new()),
        }
    }
}

impl<T: Clone> Log<T> {
    pub fn push(&self, item: T) {
        self.tx.send_modify(|v| v.push(item));
    }

    pub fn snapshot(&self) -> Vec<T> {
        self.tx.borrow().clone()
    }

    pub fn len(&self) -> usize {
        self.tx.borrow().len()
    }

    /// Waits until the log holds at least `n` entries and returns them.
    pub async fn wait_len(&self, n: usize) -> Vec<T> {
        let mut rx = self.tx.subscribe();
        let v = rx
            .wait_for(|v| v.len() >= n)
            .await
            .expect("log sender lives as long as the log");
        v.clone()
    }
}

// ---------------------------------------------------------------------------
// Generic backend: a serving task over a socket, stoppable and restartable.

#[derive(Debug)]
pub enum Sock {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

type ServeFn<S> = fn(Sock, Arc<S>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// A running (or stopped) test backend with state `S`.
pub struct Backend<S: Send + Sync + 'static> {
    pub addr: SocketAddr,
    pub state: Arc<S>,
    udp: bool,
    serve: ServeFn<S>,
    task: Option<JoinHandle<()>>,
}

impl<S: Send + Sync + 'static> std::fmt::Debug for Backend<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("addr", &self.addr)
            .field("running", &self.task.is_some())
            .finish()
    }
}

impl<S: Send + Sync + 'static> Backend<S> {
    async fn bind(addr: SocketAddr, udp: bool) -> std::io::Result<Sock> {
        Ok(if udp {
            Sock::Udp(UdpSocket::bind(addr).await?)
        } else {
            Sock::Tcp(TcpListener::bind(addr).await?)
        })
    }

    async fn launch(udp: bool, state: S, serve: ServeFn<S>) -> Self {
        Self::launch_at(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            udp,
            state,
            serve,
        )
        .await
    }

    /// Like `launch`, on a chosen loopback address (e.g. 127.0.0.2 and the
    /// port of another backend, so one template check reaches both).
    async fn launch_at(at: SocketAddr, udp: bool, state: S, serve: ServeFn<S>) -> Self {
        let sock = Self::bind(at, udp).await.expect("bind loopback");
        let addr = match &sock {
            Sock::Tcp(l) => l.local_addr(),
            Sock::Udp(u) => u.local_addr(),
        }
        .expect("local addr");
        let state = Arc::new(state);
        let task = tokio::spawn(serve(sock, state.clone()));
        Backend {
            addr,
            state,
            udp,
            serve,
            task: Some(task),
        }
    }

    /// Stops serving: when this returns the socket is closed (new TCP
    /// connections are refused, datagrams get port unreachable) and open
    /// connections are dropped.
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
            self.wait_closed().await;
        }
    }

    /// Waits until the port really refuses. A process forked by a
    /// concurrent test (exec probes) holds a copy of every descriptor until
    /// it execs, so the socket can outlive our close for a moment.
    async fn wait_closed(&self) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let probe = if self.udp {
            let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
                .await
                .expect("bind");
            s.connect(self.addr).await.expect("connect udp");
            Some(s)
        } else {
            None
        };
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "backend {} still open 10 s after stop",
                self.addr
            );
            let refused = match &probe {
                None => matches!(
                    TcpStream::connect(self.addr).await,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
                ),
                Some(s) => {
                    let _ = s.send(&[0]).await;
                    let mut buf = [0u8; 16];
                    matches!(
                        tokio::time::timeout(std::time::Duration::from_millis(20), s.recv(&mut buf)).await,
                        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused
                    )
                }
            };
            if refused {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Serves again on the same address.
    pub async fn restart(&mut self) {
        self.stop().await;
        let sock = Self::bind(self.addr, self.udp).await.expect("rebind");
        self.task = Some(tokio::spawn((self.serve)(sock, self.state.clone())));
    }

    pub fn is_running(&self) -> bool {
        self.task.is_some()
    }
}

impl<S: Send + Sync + 'static> Drop for Backend<S> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Accepts connections until aborted; aborting drops the listener and
/// (through the JoinSet) every connection task.
async fn accept_loop<S, F, Fut>(sock: Sock, state: Arc<S>, handle: F)
where
    S: Send + Sync + 'static,
    F: Fn(TcpStream, Arc<S>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Sock::Tcp(listener) = sock else {
        return;
    };
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    conns.spawn(handle(stream, state.clone()));
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

// ---------------------------------------------------------------------------
// PROXY line handling and TLS.

/// A stream with some already-read bytes put back in front.
struct Prefixed<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = (self.prefix.len() - self.pos).min(buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Reads an optional `PROXY ...\r\n` line (recorded without CRLF) and
/// returns the stream with any other bytes put back. Needs the client to
/// send first (HTTP, TLS, gRPC do).
async fn strip_proxy(
    mut stream: TcpStream,
    proxy_lines: &Log<String>,
) -> Option<Prefixed<TcpStream>> {
    let mut head = [0u8; 6];
    stream.read_exact(&mut head).await.ok()?;
    let mut prefix = Vec::new();
    if &head == b"PROXY " {
        let mut line = head.to_vec();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\n") && line.len() < 108 {
            stream.read_exact(&mut byte).await.ok()?;
            line.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        proxy_lines.push(text);
    } else {
        prefix = head.to_vec();
    }
    Some(Prefixed {
        prefix,
        pos: 0,
        inner: stream,
    })
}

/// A self-signed certificate for `name` and a TLS acceptor using it (ALPN
/// as given).
#[derive(Clone)]
pub struct TestTls {
    pub acceptor: TlsAcceptor,
    pub cert_der: CertificateDer<'static>,
}

impl std::fmt::Debug for TestTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestTls")
    }
}

impl TestTls {
    pub fn new(name: &str, alpn: &[&[u8]]) -> Self {
        let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("rcgen");
        let cert_der = ck.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert_der.clone()], key)
            .expect("server cert");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TestTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            cert_der,
        }
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// PROXY line, then TLS when configured: the stream the protocol sees.
async fn prepare(
    stream: TcpStream,
    tls: Option<&TestTls>,
    proxy_lines: &Log<String>,
) -> Option<Box<dyn Io>> {
    let stream = strip_proxy(stream, proxy_lines).await?;
    match tls {
        None => Some(Box::new(stream)),
        Some(tls) => Some(Box::new(tls.acceptor.accept(stream).await.ok()?)),
    }
}

// ---------------------------------------------------------------------------
// HTTP / HTTPS (HTTP/1.1 and HTTP/2, h2c prior knowledge or ALPN h2).

/// What the HTTP backend answers; switch it at run time with the setters.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
    /// Accept and never answer.
    pub hang: bool,
    /// Answer after this long.
    pub delay: std::time::Duration,
}

/// One request as the HTTP backend saw it.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub host: Option<String>,
    pub user_agent: Option<String>,
    pub version: hyper::Version,
    pub headers: HeaderMap,
}

#[derive(Debug)]
pub struct HttpState {
    pub reply: Mutex<HttpReply>,
    pub requests: Log<SeenRequest>,
    pub proxy_lines: Log<String>,
    pub connections: AtomicUsize,
    pub tls: Option<TestTls>,
}

pub type HttpBackend = Backend<HttpState>;

impl Backend<HttpState> {
    /// Plain HTTP answering `200 ok`.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// HTTPS with a fresh self-signed certificate for `name`, answering `200 ok`.
    pub async fn start_tls(name: &str) -> Self {
        Self::start_with(Some(TestTls::new(name, &[b"h2", b"http/1.1"]))).await
    }

    /// Plain HTTP on a chosen loopback address.
    pub async fn start_at(at: SocketAddr) -> Self {
        Self::start_with_at(None, at).await
    }

    async fn start_with(tls: Option<TestTls>) -> Self {
        Self::start_with_at(tls, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    async fn start_with_at(tls: Option<TestTls>, at: SocketAddr) -> Self {
        let state = HttpState {
            reply: Mutex::new(HttpReply {
                status: 200,
                body: "ok".to_string(),
                headers: Vec::new(),
                hang: false,
                delay: std::time::Duration::ZERO,
            }),
            requests: Log::default(),
            proxy_lines: Log::default(),
            connections: AtomicUsize::new(0),
            tls,
        };
        Backend::launch_at(at, false, state, |sock, state| {
            Box::pin(accept_loop(sock, state, serve_http_conn))
        })
        .await
    }

    pub fn set_status(&self, status: u16) {
        self.state.reply.lock().unwrap().status = status;
    }

    pub fn set_body(&self, body: &str) {
        self.state.reply.lock().unwrap().body = body.to_string();
    }

    /// Answers `status` with a `Location` header.
    pub fn set_redirect(&self, status: u16, location: &str) {
        let mut reply = self.state.reply.lock().unwrap();
        reply.status = status;
        reply.headers = vec![("location".to_string(), location.to_string())];
    }

    pub fn set_hang(&self, hang: bool) {
        self.state.reply.lock().unwrap().hang = hang;
    }

    /// Answers after `delay` (a slow backend that still answers).
    pub fn set_delay(&self, delay: std::time::Duration) {
        self.state.reply.lock().unwrap().delay = delay;
    }

    /// Answers with this header too (e.g. a content type).
    pub fn set_header(&self, name: &str, value: &str) {
        self.state
            .reply
            .lock()
            .unwrap()
            .headers
            .push((name.to_string(), value.to_string()));
    }

    pub fn requests(&self) -> Vec<SeenRequest> {
        self.state.requests.snapshot()
    }
}

async fn serve_http_conn(stream: TcpStream, state: Arc<HttpState>) {
    state.connections.fetch_add(1, Ordering::SeqCst);
    let Some(io) = prepare(stream, state.tls.as_ref(), &state.proxy_lines).await else {
        return;
    };
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let state = state.clone();
        async move {
            state.requests.push(SeenRequest {
                method: req.method().to_string(),
                path: req.uri().path().to_string(),
                host: req
                    .headers()
                    .get(hyper::header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string)
                    .or_else(|| req.uri().authority().map(|a| a.to_string())),
                user_agent: req
                    .headers()
                    .get(hyper::header::USER_AGENT)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string),
                version: req.version(),
                headers: req.headers().clone(),
            });
            let reply = state.reply.lock().unwrap().clone();
            if reply.hang {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(reply.delay).await;
            let mut builder = Response::builder().status(reply.status);
            for (k, v) in &reply.headers {
                builder = builder.header(k.as_str(), v.as_str());
            }
            Ok::<_, Infallible>(builder.body(Full::new(Bytes::from(reply.body))).unwrap())
        }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), service)
        .await;
}

// ---------------------------------------------------------------------------
// TCP / TLS line servers.

#[derive(Debug)]
pub struct LineState {
    /// Written after the first request line; `None`: never answer.
    pub response: Mutex<Option<String>>,
    /// Request lines received (without line end).
    pub lines: Log<String>,
    pub proxy_lines: Log<String>,
    pub connections: AtomicUsize,
    pub tls: Option<TestTls>,
}

pub type TcpBackend = Backend<LineState>;

impl Backend<LineState> {
    /// Plain TCP: accepts; after each connection's first request line writes
    /// `response` (if any) and closes. With `None` it never answers.
    pub async fn start_tcp(response: Option<&str>) -> Self {
        Self::start_line(None, response).await
    }

    /// The same over TLS with a self-signed certificate for `name`.
    pub async fn start_tls_line(name: &str, response: Option<&str>) -> Self {
        Self::start_line(Some(TestTls::new(name, &[])), response).await
    }

    /// Accepts, reads whatever comes and never answers nor closes (for
    /// timeouts; a TLS client gets no ServerHello).
    pub async fn start_hanging() -> Self {
        Self::start_line(None, None).await
    }

    async fn start_line(tls: Option<TestTls>, response: Option<&str>) -> Self {
        let state = LineState {
            response: Mutex::new(response.map(str::to_string)),
            lines: Log::default(),
            proxy_lines: Log::default(),
            connections: AtomicUsize::new(0),
            tls,
        };
        Backend::launch(false, state, |sock, state| {
            Box::pin(accept_loop(sock, state, serve_line_conn))
        })
        .await
    }

    pub fn set_response(&self, response: Option<&str>) {
        *self.state.response.lock().unwrap() = response.map(str::to_string);
    }
}

async fn serve_line_conn(stream: TcpStream, state: Arc<LineState>) {
    state.connections.fetch_add(1, Ordering::SeqCst);
    // TLS needs the 6-byte PROXY sniff (the client speaks first); plain TCP
    // reads lines, so a client that sends nothing is fine.
    let io: Box<dyn Io> = match &state.tls {
        Some(_) => match prepare(stream, state.tls.as_ref(), &state.proxy_lines).await {
            Some(io) => io,
            None => return,
        },
        None => Box::new(stream),
    };
    let mut reader = BufReader::new(io);
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches(['\r', '\n'])
            .to_string();
        if std::mem::take(&mut first) && state.tls.is_none() && text.starts_with("PROXY ") {
            state.proxy_lines.push(text);
            continue;
        }
        state.lines.push(text);
        let response = state.response.lock().unwrap().clone();
        if let Some(response) = response {
            let mut io = reader.into_inner();
            let _ = io.write_all(response.as_bytes()).await;
            let _ = io.shutdown().await;
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// DNS: a tiny UDP responder.

#[derive(Debug)]
pub struct DnsState {
    /// Address answered to A queries (when the rcode is NOERROR).
    pub address: Mutex<Ipv4Addr>,
    pub rcode: AtomicU8,
    pub queries: AtomicU32,
}

pub type DnsBackend = Backend<DnsState>;

impl Backend<DnsState> {
    /// Answers A queries with `address` and every query with `rcode`
    /// (answers only with NOERROR).
    pub async fn start_dns(address: Ipv4Addr, rcode: u8) -> Self {
        let state = DnsState {
            address: Mutex::new(address),
            rcode: AtomicU8::new(rcode),
            queries: AtomicU32::new(0),
        };
        Backend::launch(true, state, |sock, state| Box::pin(serve_dns(sock, state))).await
    }

    pub fn set_rcode(&self, rcode: u8) {
        self.state.rcode.store(rcode, Ordering::SeqCst);
    }

    pub fn set_address(&self, address: Ipv4Addr) {
        *self.state.address.lock().unwrap() = address;
    }
}

async fn serve_dns(sock: Sock, state: Arc<DnsState>) {
    use proto::op::{Message, ResponseCode};
    use proto::rr::rdata::A;
    use proto::rr::{RData, Record, RecordType};

    let Sock::Udp(socket) = sock else { return };
    let mut buf = vec![0u8; 4096];
    loop {
        let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        let Ok(query) = Message::from_vec(&buf[..n]) else {
            continue;
        };
        state.queries.fetch_add(1, Ordering::SeqCst);
        let mut resp = Message::response(query.metadata.id, query.metadata.op_code);
        resp.metadata.authoritative = true;
        resp.metadata.recursion_desired = query.metadata.recursion_desired;
        let rcode = state.rcode.load(Ordering::SeqCst);
        resp.metadata.response_code = ResponseCode::from_low(rcode);
        for q in &query.queries {
            resp.add_query(q.clone());
            if rcode == 0 && q.query_type() == RecordType::A {
                let addr = *state.address.lock().unwrap();
                resp.add_answer(Record::from_rdata(q.name.clone(), 60, RData::A(A(addr))));
            }
        }
        if let Ok(wire) = resp.to_vec() {
            let _ = socket.send_to(&wire, peer).await;
        }
    }
}

// ---------------------------------------------------------------------------
// gRPC health (grpc.health.v1.Health/Check) over h2c or TLS (ALPN h2).

pub const SERVING: u8 = 1;
pub const NOT_SERVING: u8 = 2;
pub const SERVICE_UNKNOWN: u8 = 3;

#[derive(Debug)]
pub struct GrpcState {
    /// Status per service name ("" = the server as a whole). A service not
    /// in the map gets grpc-status 5 (NOT_FOUND), as the spec says.
    pub statuses: Mutex<Vec<(String, u8)>>,
    /// Service names asked for.
    pub requests: Log<String>,
    pub proxy_lines: Log<String>,
    pub tls: Option<TestTls>,
}

pub type GrpcBackend = Backend<GrpcState>;

impl Backend<GrpcState> {
    /// h2c (prior knowledge); "" is SERVING.
    pub async fn start_grpc() -> Self {
        Self::start_grpc_with(None).await
    }

    /// TLS with ALPN h2 and a self-signed certificate for `name`.
    pub async fn start_grpc_tls(name: &str) -> Self {
        Self::start_grpc_with(Some(TestTls::new(name, &[b"h2"]))).await
    }

    async fn start_grpc_with(tls: Option<TestTls>) -> Self {
        let state = GrpcState {
            statuses: Mutex::new(vec![(String::new(), SERVING)]),
            requests: Log::default(),
            proxy_lines: Log::default(),
            tls,
        };
        Backend::launch(false, state, |sock, state| {
            Box::pin(accept_loop(sock, state, serve_grpc_conn))
        })
        .await
    }

    /// Sets the status of `service` ("" = the whole server).
    pub fn set_status(&self, service: &str, status: u8) {
        let mut statuses = self.state.statuses.lock().unwrap();
        statuses.retain(|(s, _)| s != service);
        statuses.push((service.to_string(), status));
    }

    pub fn set_serving(&self, serving: bool) {
        self.set_status("", if serving { SERVING } else { NOT_SERVING });
    }
}

/// A response body: one data frame, then trailers.
struct GrpcBody {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl hyper::body::Body for GrpcBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
}

/// The service name in a framed HealthCheckRequest (field 1).
fn parse_health_request(body: &[u8]) -> Option<String> {
    let msg = body.get(5..)?;
    let mut pos = 0;
    let mut service = String::new();
    while pos < msg.len() {
        let key = msg[pos];
        pos += 1;
        if key != 0x0a {
            return None;
        }
        let len = usize::from(*msg.get(pos)?); // short names only (< 128)
        pos += 1;
        service = String::from_utf8(msg.get(pos..pos + len)?.to_vec()).ok()?;
        pos += len;
    }
    Some(service)
}

async fn serve_grpc_conn(stream: TcpStream, state: Arc<GrpcState>) {
    let Some(io) = prepare(stream, state.tls.as_ref(), &state.proxy_lines).await else {
        return;
    };
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let state = state.clone();
        async move {
            let path_ok = req.uri().path() == "/grpc.health.v1.Health/Check";
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let mut trailers = HeaderMap::new();
            let mut data = None;
            match parse_health_request(&body).filter(|_| path_ok) {
                None => {
                    trailers.insert("grpc-status", "12".parse().unwrap());
                    trailers.insert("grpc-message", "unimplemented".parse().unwrap());
                }
                Some(service) => {
                    state.requests.push(service.clone());
                    let status = state
                        .statuses
                        .lock()
                        .unwrap()
                        .iter()
                        .find(|(s, _)| *s == service)
                        .map(|(_, st)| *st);
                    match status {
                        Some(st) => {
                            trailers.insert("grpc-status", "0".parse().unwrap());
                            data = Some(Bytes::from(vec![0, 0, 0, 0, 2, 0x08, st]));
                        }
                        None => {
                            trailers.insert("grpc-status", "5".parse().unwrap());
                            trailers.insert("grpc-message", "unknown%20service".parse().unwrap());
                        }
                    }
                }
            }
            let resp = Response::builder()
                .status(200)
                .header("content-type", "application/grpc")
                .body(GrpcBody {
                    data,
                    trailers: Some(trailers),
                })
                .unwrap();
            Ok::<_, Infallible>(resp)
        }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .http2_only()
        .serve_connection(TokioIo::new(io), service)
        .await;
}
