//! HTTP, HTTPS and HTTP/2 probes with hyper's client connection API over our
//! own stream (so the PROXY header can go first). One connection per probe,
//! or with `reuse_connection` one kept open between the probes of a check
//! instance ([`Kept`]); redirects are not followed.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{CONNECTION, HOST, USER_AGENT};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};

use super::tcp::{connect_proxied, tls_handshake};
use super::{Alpn, Down, Host, HttpVersion, ProbeResult, Prober, Target, tls_name};

/// How much of the body is searched for the expected text.
const BODY_PREFIX: usize = 1024;

/// The longest body read to its end so that a kept connection can carry
/// the next request; a longer one closes the connection instead.
const DRAIN_LIMIT: usize = 64 * 1024;

#[derive(Debug)]
pub(crate) struct HttpParams<'a> {
    pub tls: bool,
    pub version: HttpVersion,
    pub path: &'a str,
    pub expect_status: &'a [(u16, u16)],
    pub expect_body: Option<&'a str>,
    pub tls_verify: bool,
    pub proxy_protocol: bool,
    pub reuse_connection: bool,
}

/// Aborts a spawned connection task when the probe ends, however it ends.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `host` as an URI authority / Host header value (IPv6 in brackets).
pub(crate) fn authority(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

pub(crate) fn hyper_error(e: &hyper::Error) -> String {
    // The innermost cause is usually the informative one (reset, eof, ...).
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    if e.is_incomplete_message() || e.is_canceled() {
        return format!("connection closed before a response ({text})");
    }
    format!("HTTP error: {text}")
}

/// The client half of an HTTP/1 or HTTP/2 connection.
#[derive(Debug)]
pub(crate) enum Sender<B> {
    Http1(hyper::client::conn::http1::SendRequest<B>),
    Http2(hyper::client::conn::http2::SendRequest<B>),
}

impl<B> Sender<B>
where
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// Opens HTTP/1 or HTTP/2 over `io`: the sender, and the connection's
    /// task, which ends when the guard is dropped.
    pub(crate) async fn open<S>(io: S, version: HttpVersion) -> Result<(Self, AbortOnDrop), Down>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(io);
        match version {
            HttpVersion::Http1 => {
                let (sender, conn) = hyper::client::conn::http1::handshake(io)
                    .await
                    .map_err(|e| hyper_error(&e))?;
                let guard = AbortOnDrop(tokio::spawn(async move {
                    let _ = conn.await;
                }));
                Ok((Self::Http1(sender), guard))
            }
            HttpVersion::Http2 => {
                let (sender, conn) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                        .await
                        .map_err(|e| hyper_error(&e))?;
                let guard = AbortOnDrop(tokio::spawn(async move {
                    let _ = conn.await;
                }));
                Ok((Self::Http2(sender), guard))
            }
        }
    }

    pub(crate) async fn send(&mut self, req: Request<B>) -> Result<Response<Incoming>, Down> {
        match self {
            Self::Http1(s) => s.send_request(req).await,
            Self::Http2(s) => s.send_request(req).await,
        }
        .map_err(|e| hyper_error(&e))
    }

    /// Whether a request can go now (a hint: the server may be closing it).
    fn ready(&self) -> bool {
        match self {
            Self::Http1(s) => s.is_ready(),
            Self::Http2(s) => s.is_ready(),
        }
    }
}

/// Sends `req` on a fresh HTTP/1 or HTTP/2 connection over `io`.
pub(crate) async fn send_request<S, B>(
    io: S,
    version: HttpVersion,
    req: Request<B>,
) -> Result<(Response<Incoming>, AbortOnDrop), Down>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (mut sender, guard) = Sender::open(io, version).await?;
    let resp = sender.send(req).await?;
    Ok((resp, guard))
}

/// An HTTP connection kept open between the probes of one check instance
/// (`reuse_connection`): used again while the server keeps it open and its
/// address is still one the target resolves to and the fence lets through.
#[derive(Debug)]
pub struct Kept {
    sender: Sender<Empty<Bytes>>,
    peer: SocketAddr,
    _conn: AbortOnDrop,
}

impl Kept {
    fn reaches(&self, target: &Target) -> bool {
        self.peer.port() == target.port
            && match &target.host {
                Host::Ip(ip) => *ip == self.peer.ip(),
                Host::Resolved(_, ips) => ips.contains(&self.peer.ip()),
                Host::Name(_) => false,
            }
    }
}

fn build_request(p: &HttpParams<'_>, target: &Target) -> Result<Request<Empty<Bytes>>, Down> {
    let host = authority(&tls_name(target));
    let path = if p.path.is_empty() {
        "/".to_string()
    } else if p.path.starts_with('/') {
        p.path.to_string()
    } else {
        format!("/{}", p.path)
    };
    let builder = match p.version {
        HttpVersion::Http1 if p.reuse_connection => {
            Request::get(path.as_str()).header(HOST, host.as_str())
        }
        HttpVersion::Http1 => Request::get(path.as_str())
            .header(HOST, host.as_str())
            .header(CONNECTION, "close"),
        HttpVersion::Http2 => {
            // HTTP/2 carries the host as :authority and has no Connection header.
            let scheme = if p.tls { "https" } else { "http" };
            Request::get(format!("{scheme}://{host}{path}"))
        }
    };
    builder
        .header(USER_AGENT, "gtm-health")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("invalid request (path {path:?}, host {host:?}): {e}"))
}

/// One probe; with `reuse_connection`, on the connection `kept` holds when
/// it is still open, and the connection is kept for the next probe when
/// its response was read to the end.
pub(crate) async fn probe(
    prober: &Prober,
    p: &HttpParams<'_>,
    target: &Target,
    kept: &mut Option<Kept>,
) -> ProbeResult {
    if p.reuse_connection
        && let Some(mut k) = kept
            .take()
            .filter(|k| k.sender.ready() && k.reaches(target))
    {
        // A connection the server closed meanwhile fails before any
        // response; a new one is tried then, as if none had been kept.
        if let Ok(resp) = k.sender.send(build_request(p, target)?).await {
            let closing = closing(&resp);
            let (result, complete) = judge(p, resp).await;
            if complete && !closing {
                *kept = Some(k);
            }
            return result;
        }
    }
    let req = build_request(p, target)?;
    let stream = connect_proxied(target, p.proxy_protocol).await?;
    let peer = stream
        .peer_addr()
        .map_err(|e| super::io_error("connection", &e))?;
    let (mut sender, conn) = if p.tls {
        let alpn = match p.version {
            HttpVersion::Http1 => Alpn::Http1,
            HttpVersion::Http2 => Alpn::H2,
        };
        let tls = tls_handshake(prober, target, stream, p.tls_verify, alpn).await?;
        if p.version == HttpVersion::Http2 && tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err("server did not negotiate HTTP/2 (ALPN h2)".to_string());
        }
        Sender::open(tls, p.version).await?
    } else {
        Sender::open(stream, p.version).await?
    };
    let resp = sender.send(req).await?;
    let closing = closing(&resp);
    let (result, complete) = judge(p, resp).await;
    if p.reuse_connection && complete && !closing {
        *kept = Some(Kept {
            sender,
            peer,
            _conn: conn,
        });
    }
    result
}

/// Whether the server says it closes the connection after this response.
fn closing(resp: &Response<Incoming>) -> bool {
    resp.headers()
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("close"))
}

/// The probe's result from the response, and whether its body was read to
/// the end (so that the connection can carry another request).
async fn judge(p: &HttpParams<'_>, resp: Response<Incoming>) -> (ProbeResult, bool) {
    let status = resp.status().as_u16();
    let expected = p
        .expect_status
        .iter()
        .any(|&(lo, hi)| lo <= status && status <= hi);
    let want = p.expect_body.filter(|w| !w.is_empty());
    if !p.reuse_connection && (!expected || want.is_none()) {
        let result = if expected {
            Ok(format!("status {status}"))
        } else {
            Err(format!("status {status}"))
        };
        return (result, false);
    }
    let limit = if p.reuse_connection {
        DRAIN_LIMIT
    } else {
        BODY_PREFIX
    };
    let body = read_body(resp.into_body(), limit).await;
    let complete = body.as_ref().is_ok_and(|b| b.complete);
    let result = if !expected {
        Err(format!("status {status}"))
    } else {
        match (want, body) {
            (None, _) => Ok(format!("status {status}")),
            (Some(_), Err(e)) => Err(e),
            (Some(want), Ok(body)) if contains(&body.prefix, want.as_bytes()) => {
                Ok(format!("status {status}"))
            }
            (Some(want), Ok(_)) => Err(format!("body did not contain \"{}\"", want.escape_debug())),
        }
    };
    (result, complete)
}

/// What was read of a response body.
struct Body {
    /// Its first `BODY_PREFIX` bytes.
    prefix: Vec<u8>,
    /// Whether it was read to its end.
    complete: bool,
}

/// Reads the body until its end or `limit` bytes, keeping the first
/// `BODY_PREFIX`.
async fn read_body(mut body: Incoming, limit: usize) -> Result<Body, Down> {
    let mut prefix = Vec::new();
    let mut read = 0;
    loop {
        if read >= limit {
            return Ok(Body {
                prefix,
                complete: false,
            });
        }
        match body.frame().await {
            None => {
                return Ok(Body {
                    prefix,
                    complete: true,
                });
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = BODY_PREFIX.saturating_sub(prefix.len());
                    prefix.extend_from_slice(&data[..data.len().min(room)]);
                    read += data.len();
                }
            }
            // A body cut short: judge what arrived, if anything did.
            Some(Err(e)) if prefix.is_empty() => {
                return Err(format!("reading body failed: {}", hyper_error(&e)));
            }
            Some(Err(_)) => {
                return Ok(Body {
                    prefix,
                    complete: false,
                });
            }
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_and_authority() {
        assert!(contains(b"all ok here", b"ok"));
        assert!(!contains(b"o", b"ok"));
        assert_eq!(authority("::1"), "[::1]");
        assert_eq!(authority("www.example.test"), "www.example.test");
    }
}
