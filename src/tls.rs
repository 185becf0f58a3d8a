//! TLS for the API and the cluster traffic (rustls with the ring provider),
//! when the node settings give a certificate and key.
//!
//! One listener serves both the operator API and the device-to-device
//! routes, so one certificate covers both. Clients (peers, the CLI) trust
//! `tls_ca`, or this device's own certificate when the cluster shares one.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use anyhow::{Context, Result, bail};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The PEM file the CLI trusts for a device's API, in its data directory.
pub const CA_FILE: &str = "api-ca.pem";

/// A device's TLS material.
#[derive(Debug, Clone)]
pub struct Tls {
    pub server: Arc<rustls::ServerConfig>,
    /// PEM of the certificates clients trust.
    pub trust_pem: Vec<u8>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    /// Loads the node's certificate, key and trust anchors.
    pub fn load(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<Self> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("{} is not a PEM certificate chain", cert.display()))?;
        if chain.is_empty() {
            bail!("{} holds no certificate", cert.display());
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .with_context(|| format!("{} is not a PEM private key", key.display()))?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .context("the TLS certificate and key do not match")?;
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let trust_pem = std::fs::read(ca.unwrap_or(cert))
            .with_context(|| format!("cannot read {}", ca.unwrap_or(cert).display()))?;
        Ok(Self {
            server: Arc::new(server),
            trust_pem,
        })
    }
}

/// An HTTP client for devices' APIs: trusting `trust_pem` when given (TLS),
/// plain HTTP otherwise.
pub fn http_client(
    trust_pem: Option<&[u8]>,
    timeout: impl Into<Option<Duration>>,
) -> Result<reqwest::Client> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = trust_pem {
        for cert in CertificateDer::pem_slice_iter(pem) {
            roots
                .add(cert.context("a trusted certificate does not parse")?)
                .context("a trusted certificate is invalid")?;
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(2))
        .pool_idle_timeout(Duration::from_secs(30));
    if let Some(t) = timeout.into() {
        builder = builder.timeout(t);
    }
    builder.build().context("building the HTTP client")
}

/// Serves `router` over TLS on `listener` until `stop`.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    tls: Arc<rustls::ServerConfig>,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (stream, peer): (_, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "API accept failed");
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let (acceptor, router, stop) = (acceptor.clone(), router.clone(), stop.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls_stream)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
            else {
                tracing::debug!(%peer, "TLS handshake failed");
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tls_stream), service);
            tokio::select! {
                _ = conn => {}
                _ = stop.cancelled() => {}
            }
        });
    }
}
