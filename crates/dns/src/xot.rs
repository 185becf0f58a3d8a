//! Zone transfers over TLS (XoT, RFC 9103): DNS over TCP inside TLS 1.3,
//! on the listeners of the node setting `xot_listen` (docs/transfer.md,
//! "Over TLS").
//!
//! A connection is TLS 1.3 with the ALPN protocol `dot`, as RFC 9103
//! requires; one that does not agree on `dot` is closed after the
//! handshake. Past
//! the handshake it is a DNS-over-TCP connection of `tcp`, with its
//! limits and its answers: a transfer still needs the TSIG key of a
//! secondary of the zone and its address (`xfr`); TLS adds privacy, not
//! permission. The certificate is the device's (`tls_cert`, `tls_key`),
//! swapped by a reload for the connections accepted after it.

use std::{net::SocketAddr, sync::Arc};

use arc_swap::ArcSwap;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_util::sync::CancellationToken;

use super::{
    dnstap::SocketProtocol,
    handler::Handler,
    limits::IDLE,
    tcp::{self, Stream, Table},
};

/// The ALPN protocol of DNS over TLS and of XoT (RFC 7858, RFC 9103).
pub const ALPN: &[u8] = b"dot";

impl Stream for TlsStream<TcpStream> {
    const PROTOCOL: SocketProtocol = SocketProtocol::Dot;
    fn socket(&self) -> &TcpStream {
        self.get_ref().0
    }
}

/// The server side of XoT from the device's TLS configuration: the same
/// certificate, TLS 1.3 only, ALPN `dot` only.
pub fn server_config(device: &rustls::ServerConfig) -> Result<rustls::ServerConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_cert_resolver(device.cert_resolver.clone());
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// Accepts and serves XoT connections on `listener` until `stop`, with the
/// TLS configuration `tls` holds when each connection arrives.
pub async fn serve(
    listener: TcpListener,
    handler: Handler,
    tls: Arc<ArcSwap<rustls::ServerConfig>>,
    stop: CancellationToken,
) {
    let table = Arc::new(Table::new());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(error = %e, "DNS over TLS accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
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
                // A reset, as over TCP: nothing of it lingers here.
                let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
                drop(stream);
                continue;
            }
        };
        let (handler, acceptor) = (handler.clone(), TlsAcceptor::from(tls.load_full()));
        tokio::spawn(async move {
            let Some(stream) = handshake(acceptor, stream, peer).await else {
                return;
            };
            if let Some(why) = tcp::connection(stream, peer, &handler, &seat).await {
                handler.state.metrics.tcp_closed(why);
            }
        });
    }
}

/// The TLS handshake, within the idle time a connection gets for its
/// first message; `None` when it fails or does not agree on `dot`.
async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    let stream = match tokio::time::timeout(IDLE, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "DNS over TLS handshake failed");
            return None;
        }
        Err(_) => return None,
    };
    if stream.get_ref().1.alpn_protocol() != Some(ALPN) {
        tracing::debug!(%peer, "DNS over TLS without ALPN dot: closed");
        return None;
    }
    Some(stream)
}
