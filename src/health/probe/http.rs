//! HTTP, HTTPS and HTTP/2 probes with hyper's client connection API over our
//! own stream (so the PROXY header can go first). One connection per probe;
//! redirects are not followed.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{CONNECTION, HOST, USER_AGENT};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};

use super::tcp::{connect_proxied, tls_handshake};
use super::{Alpn, HttpVersion, ProbeResult, Prober, Target, tls_name};

/// How much of the body is searched for the expected text.
const BODY_PREFIX: usize = 1024;

#[derive(Debug)]
pub(crate) struct HttpParams<'a> {
    pub tls: bool,
    pub version: HttpVersion,
    pub path: &'a str,
    pub expect_status: &'a [(u16, u16)],
    pub expect_body: Option<&'a str>,
    pub tls_verify: bool,
    pub proxy_protocol: bool,
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

/// Sends `req` on a fresh HTTP/1 or HTTP/2 connection over `io`.
pub(crate) async fn send_request<S, B>(
    io: S,
    version: HttpVersion,
    req: Request<B>,
) -> Result<(Response<Incoming>, AbortOnDrop), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(io);
    match version {
        HttpVersion::Http1 => {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| hyper_error(&e))?;
            let guard = AbortOnDrop(tokio::spawn(async move {
                let _ = conn.await;
            }));
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| hyper_error(&e))?;
            Ok((resp, guard))
        }
        HttpVersion::Http2 => {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(|e| hyper_error(&e))?;
            let guard = AbortOnDrop(tokio::spawn(async move {
                let _ = conn.await;
            }));
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| hyper_error(&e))?;
            Ok((resp, guard))
        }
    }
}

fn build_request(p: &HttpParams<'_>, target: &Target) -> Result<Request<Empty<Bytes>>, String> {
    let host = authority(&tls_name(target));
    let path = if p.path.is_empty() {
        "/".to_string()
    } else if p.path.starts_with('/') {
        p.path.to_string()
    } else {
        format!("/{}", p.path)
    };
    let builder = match p.version {
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

pub(crate) async fn probe(prober: &Prober, p: &HttpParams<'_>, target: &Target) -> ProbeResult {
    let req = build_request(p, target)?;
    let stream = connect_proxied(target, p.proxy_protocol).await?;
    let (resp, _conn) = if p.tls {
        let alpn = match p.version {
            HttpVersion::Http1 => Alpn::Http1,
            HttpVersion::Http2 => Alpn::H2,
        };
        let tls = tls_handshake(prober, target, stream, p.tls_verify, alpn).await?;
        if p.version == HttpVersion::Http2 && tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err("server did not negotiate HTTP/2 (ALPN h2)".to_string());
        }
        send_request(tls, p.version, req).await?
    } else {
        send_request(stream, p.version, req).await?
    };
    judge(p, resp).await
}

async fn judge(p: &HttpParams<'_>, resp: Response<Incoming>) -> ProbeResult {
    let status = resp.status().as_u16();
    let expected = p
        .expect_status
        .iter()
        .any(|&(lo, hi)| lo <= status && status <= hi);
    if !expected {
        return Err(format!("status {status}"));
    }
    if let Some(want) = p.expect_body.filter(|w| !w.is_empty()) {
        let prefix = read_prefix(resp.into_body(), BODY_PREFIX).await?;
        if !contains(&prefix, want.as_bytes()) {
            return Err(format!("body did not contain \"{}\"", want.escape_debug()));
        }
    }
    Ok(format!("status {status}"))
}

/// Reads at most `limit` bytes of the body (stops at its end).
async fn read_prefix(mut body: Incoming, limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while out.len() < limit {
        match body.frame().await {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = limit - out.len();
                    out.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            // A body cut short: judge what arrived, if anything did.
            Some(Err(e)) if out.is_empty() => {
                return Err(format!("reading body failed: {}", hyper_error(&e)));
            }
            Some(Err(_)) => break,
        }
    }
    Ok(out)
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
