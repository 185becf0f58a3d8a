//! TCP and TLS probes, plus the helpers the HTTP and gRPC probers share:
//! connecting with an optional PROXY protocol v1 header and the TLS handshake.

use std::net::SocketAddr;

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::{
    Alpn, Down, ProbeResult, Prober, Target, connect, escape_truncated, io_error, tls_name,
};

/// The PROXY protocol v1 line for a connection from `local` to `peer`.
pub(crate) fn proxy_v1_header(local: SocketAddr, peer: SocketAddr) -> String {
    let (local_ip, peer_ip) = (local.ip().to_canonical(), peer.ip().to_canonical());
    let family = if local_ip.is_ipv4() && peer_ip.is_ipv4() {
        "TCP4"
    } else {
        "TCP6"
    };
    let show = |ip: std::net::IpAddr| match (family, ip) {
        ("TCP6", std::net::IpAddr::V4(v4)) => v4.to_ipv6_mapped().to_string(),
        (_, ip) => ip.to_string(),
    };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        show(local_ip),
        show(peer_ip),
        local.port(),
        peer.port()
    )
}

/// Connects to the target and, if asked, writes the PROXY v1 header.
pub(crate) async fn connect_proxied(
    target: &Target,
    proxy_protocol: bool,
) -> Result<TcpStream, Down> {
    let mut stream = connect(target).await?;
    if proxy_protocol {
        let (local, peer) = match (stream.local_addr(), stream.peer_addr()) {
            (Ok(l), Ok(p)) => (l, p),
            (Err(e), _) | (_, Err(e)) => return Err(io_error("PROXY header", &e)),
        };
        let header = proxy_v1_header(local, peer);
        stream
            .write_all(header.as_bytes())
            .await
            .map_err(|e| io_error("PROXY header", &e))?;
    }
    Ok(stream)
}

/// Short text for a rustls certificate error.
fn short_cert_error(e: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match e {
        C::UnknownIssuer => "unknown issuer (self-signed or untrusted CA)".to_string(),
        C::Expired | C::ExpiredContext { .. } => "certificate expired".to_string(),
        C::NotValidYet | C::NotValidYetContext { .. } => "certificate not yet valid".to_string(),
        C::NotValidForName | C::NotValidForNameContext { .. } => "name mismatch".to_string(),
        C::Revoked => "certificate revoked".to_string(),
        C::BadSignature => "bad signature".to_string(),
        C::BadEncoding => "bad encoding".to_string(),
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => "invalid purpose".to_string(),
        other => {
            let mut s = format!("{other:?}");
            s.truncate(80);
            s
        }
    }
}

/// Text for a failed TLS handshake.
fn handshake_error(name: &str, e: &std::io::Error) -> String {
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return match inner {
            rustls::Error::InvalidCertificate(cert) => {
                format!(
                    "certificate not valid for {name}: {}",
                    short_cert_error(cert)
                )
            }
            other => format!("TLS handshake failed: {other}"),
        };
    }
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            "TLS handshake failed: connection closed by peer".to_string()
        }
        std::io::ErrorKind::ConnectionReset => "TLS handshake failed: connection reset".to_string(),
        _ => format!("TLS handshake failed: {e}"),
    }
}

/// TLS handshake over an established stream, verifying against webpki-roots
/// for the target's server name when `verify`.
pub(crate) async fn tls_handshake(
    prober: &Prober,
    target: &Target,
    stream: TcpStream,
    verify: bool,
    alpn: Alpn,
) -> Result<TlsStream<TcpStream>, Down> {
    let config = prober.tls_config(verify, alpn)?;
    let name = tls_name(target);
    let server_name =
        ServerName::try_from(name.clone()).map_err(|_| format!("invalid TLS name {name}"))?;
    tokio_rustls::TlsConnector::from(config)
        .connect(server_name, stream)
        .await
        .map_err(|e| handshake_error(&name, &e))
}

/// Optional request / exact-response exchange shared by TCP and TLS probes.
/// `Ok(())` when the exchange is as expected.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    send: Option<&str>,
    expect: Option<&str>,
) -> Result<(), Down> {
    if let Some(send) = send.filter(|s| !s.is_empty()) {
        stream
            .write_all(send.as_bytes())
            .await
            .map_err(|e| io_error("send", &e))?;
        stream.flush().await.map_err(|e| io_error("send", &e))?;
    }
    let Some(expect) = expect.filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    let want = expect.as_bytes();
    let mut got = Vec::with_capacity(want.len());
    let mut buf = [0u8; 1024];
    while got.len() < want.len() {
        let room = (want.len() - got.len()).min(buf.len());
        match stream.read(&mut buf[..room]).await {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if got.is_empty() => return Err(io_error("read", &e)),
            // A reset after some data: judge what arrived.
            Err(_) => break,
        }
    }
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "response did not match: got \"{}\"",
            escape_truncated(&got)
        ))
    }
}

pub(crate) async fn probe_tcp(
    target: &Target,
    send: Option<&str>,
    expect: Option<&str>,
    proxy_protocol: bool,
) -> ProbeResult {
    let mut stream = connect_proxied(target, proxy_protocol).await?;
    exchange(&mut stream, send, expect).await?;
    Ok("connected".to_string())
}

pub(crate) async fn probe_tls(
    prober: &Prober,
    target: &Target,
    send: Option<&str>,
    expect: Option<&str>,
    tls_verify: bool,
    proxy_protocol: bool,
) -> ProbeResult {
    let stream = connect_proxied(target, proxy_protocol).await?;
    let mut tls = tls_handshake(prober, target, stream, tls_verify, Alpn::None).await?;
    exchange(&mut tls, send, expect).await?;
    // Best effort close_notify; the verdict is already known.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(50), tls.shutdown()).await;
    Ok("handshake ok".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_header_v4_and_v6() {
        let l: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let p: SocketAddr = "127.0.0.2:80".parse().unwrap();
        assert_eq!(
            proxy_v1_header(l, p),
            "PROXY TCP4 127.0.0.1 127.0.0.2 40000 80\r\n"
        );
        let l: SocketAddr = "[::1]:40000".parse().unwrap();
        let p: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        assert_eq!(
            proxy_v1_header(l, p),
            "PROXY TCP6 ::1 2001:db8::1 40000 443\r\n"
        );
        let l: SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        let p: SocketAddr = "[::ffff:127.0.0.1]:2".parse().unwrap();
        assert_eq!(
            proxy_v1_header(l, p),
            "PROXY TCP4 127.0.0.1 127.0.0.1 1 2\r\n"
        );
    }
}
