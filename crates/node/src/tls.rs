//! TLS for the API and the cluster traffic (rustls with the ring provider),
//! when the node settings give a certificate and key.
//!
//! One listener serves both the operator API and the device-to-device
//! routes, so one certificate covers both. Clients (peers, the CLI) trust
//! `tls_ca`, or this device's own certificate when the cluster shares one.
//! The same certificate is the device's identity towards the other devices
//! (mutual TLS); a reload swaps both sides ([`Live`]).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use gtm_cluster::{ClientTls, HttpClientError, PeerCredentials, PeerTls};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The PEM file the CLI trusts for a device's API, in its data directory.
pub const CA_FILE: &str = "api-ca.pem";

/// A device's TLS material, loaded and checked whole: the server side and
/// the identity towards the other devices come from the same files.
#[derive(Debug, Clone)]
pub struct Tls {
    pub server: Arc<rustls::ServerConfig>,
    /// The same certificate for zone transfers over TLS (TLS 1.3, ALPN
    /// `dot`: `gtm_dns::xot`).
    pub xot: Arc<rustls::ServerConfig>,
    /// PEM of the certificates clients trust.
    pub trust_pem: Vec<u8>,
    /// This device's certificate chain and key, and the trusted
    /// certificates: its identity and trust as a client of the other
    /// devices (mutual TLS).
    pub peer: PeerCredentials,
}

/// Why a device's TLS material did not load ([`Tls::load`]): the file or
/// the step that failed, with the error underneath as its source.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {path}")]
    ReadCertificate {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a PEM certificate chain")]
    CertificateNotPem {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("cannot read the TLS key {path}")]
    ReadKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a PEM private key")]
    KeyNotPem {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    /// The trusted certificates (`tls_ca`, or the certificate itself).
    #[error("cannot read {path}")]
    ReadTrusted {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A trusted certificate does not parse or is not a trust anchor.
    #[error(transparent)]
    Trusted(HttpClientError),
    #[error("the trusted certificates cannot verify clients")]
    ClientVerifier(#[source] rustls::server::VerifierBuilderError),
    #[error("TLS protocol versions")]
    ProtocolVersions(#[source] rustls::Error),
    #[error("the TLS certificate and key do not match")]
    KeyMismatch(#[source] rustls::Error),
    /// The certificate and key as this device's identity towards the other
    /// devices (mutual TLS).
    #[error("{certificate} and {key} as this device's client certificate")]
    PeerIdentity {
        certificate: PathBuf,
        key: PathBuf,
        source: HttpClientError,
    },
}

/// Set on each request of a TLS connection whose client presented a
/// certificate that chains to the trusted CA.
#[derive(Debug, Clone, Copy)]
pub struct ClientCertificate;

fn roots(pem: &[u8]) -> Result<rustls::RootCertStore, TlsError> {
    gtm_cluster::trust_roots(pem).map_err(TlsError::Trusted)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    /// Loads the node's certificate, key and trust anchors.
    pub fn load(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<Self, TlsError> {
        // Each file is read once: the server and the client sides are
        // built from the same bytes, even while a renewal rewrites them.
        let cert_pem = std::fs::read(cert).map_err(|source| TlsError::ReadCertificate {
            path: cert.to_path_buf(),
            source,
        })?;
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|source| TlsError::CertificateNotPem {
                path: cert.to_path_buf(),
                source,
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_path_buf(),
            });
        }
        let key_pem = std::fs::read(key).map_err(|source| TlsError::ReadKey {
            path: key.to_path_buf(),
            source,
        })?;
        let key_der =
            PrivateKeyDer::from_pem_slice(&key_pem).map_err(|source| TlsError::KeyNotPem {
                path: key.to_path_buf(),
                source,
            })?;
        let trusted = ca.unwrap_or(cert);
        let trust_pem = std::fs::read(trusted).map_err(|source| TlsError::ReadTrusted {
            path: trusted.to_path_buf(),
            source,
        })?;
        // A client may come without a certificate (the CLI, with the API
        // token); one that shows a certificate must show one of the cluster.
        // Device-to-device routes then require it (api::router).
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots(&trust_pem)?),
            provider(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(TlsError::ClientVerifier)?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::ProtocolVersions)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key_der)
            .map_err(TlsError::KeyMismatch)?;
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let xot = gtm_dns::xot::server_config(&server).map_err(TlsError::ProtocolVersions)?;
        let peer =
            PeerCredentials::from_pem(&trust_pem, &cert_pem, &key_pem).map_err(|source| {
                TlsError::PeerIdentity {
                    certificate: cert.to_path_buf(),
                    key: key.to_path_buf(),
                    source,
                }
            })?;
        Ok(Self {
            server: Arc::new(server),
            xot: Arc::new(xot),
            trust_pem,
            peer,
        })
    }

    /// A client of the other devices with this material, fixed. A device's
    /// own clients share a [`Live`] one, which a reload changes.
    pub fn peer_client(&self, timeout: Duration) -> Result<reqwest::Client, HttpClientError> {
        peer_client(&PeerTls::new(self.peer.clone()), timeout)
    }
}

/// A client of the other devices: trusts and shows what `peer` holds at
/// each handshake.
pub fn peer_client(
    peer: &Arc<PeerTls>,
    timeout: Duration,
) -> Result<reqwest::Client, HttpClientError> {
    gtm_cluster::http_client(ClientTls::Peer(peer), Some(timeout))
}

/// An HTTP client for devices' APIs: trusting `trust_pem` when given (TLS),
/// plain HTTP otherwise.
pub fn http_client(
    trust_pem: Option<&[u8]>,
    timeout: impl Into<Option<Duration>>,
) -> Result<reqwest::Client, HttpClientError> {
    let tls = match trust_pem {
        Some(pem) => ClientTls::Trust(pem),
        None => ClientTls::Plain,
    };
    gtm_cluster::http_client(tls, timeout.into())
}

/// A running device's TLS: the API's server side and the identity and
/// trust of its clients of the other devices, each shared by everything
/// that uses it and swapped by a reload (SIGHUP).
#[derive(Debug, Clone)]
pub struct Live {
    pub server: ServerConfigs,
    /// The server side of zone transfers over TLS.
    pub xot: ServerConfigs,
    pub peer: Arc<PeerTls>,
}

impl Live {
    pub fn new(tls: Tls) -> Self {
        Self {
            server: Arc::new(arc_swap::ArcSwap::new(tls.server)),
            xot: Arc::new(arc_swap::ArcSwap::new(tls.xot)),
            peer: PeerTls::new(tls.peer),
        }
    }

    /// Puts `tls` in place of what runs: handshakes from now on, accepted
    /// or made, use it. Cannot fail: `tls` was loaded and checked whole.
    pub fn replace(&self, tls: Tls) {
        self.server.store(tls.server);
        self.xot.store(tls.xot);
        self.peer.replace(tls.peer);
    }
}

/// The server side of a device's TLS, swapped whole by a reload (SIGHUP):
/// connections accepted afterwards get the new certificate, open ones keep
/// theirs.
pub type ServerConfigs = Arc<arc_swap::ArcSwap<rustls::ServerConfig>>;

/// Serves `router` over TLS on `listener` until `stop`; then lets the
/// requests in flight finish (at most 10 s) before it returns.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    tls: ServerConfigs,
    stop: CancellationToken,
) {
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, peer): (_, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "API accept failed");
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.load_full());
        let (router, stop) = (router.clone(), stop.clone());
        connections.spawn(async move {
            let Ok(Ok(tls_stream)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
            else {
                tracing::debug!(%peer, "TLS handshake failed");
                return;
            };
            // Verified by the handshake: rustls keeps a client's chain only
            // when it chains to the trusted CA.
            let router = if tls_stream.get_ref().1.peer_certificates().is_some() {
                router.layer(axum::Extension(ClientCertificate))
            } else {
                router
            };
            // As `axum::serve` records it without TLS: the console's login
            // limit counts failures per client address.
            let router = router.layer(axum::Extension(axum::extract::ConnectInfo(peer)));
            let service = hyper_util::service::TowerToHyperService::new(router);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tls_stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.cancelled() => {
                    // Requests in flight are answered; idle connections close.
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
                }
            }
        });
    }
    connections.close();
    connections.wait().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::{ResolvesClientCert, danger::ServerCertVerifier};
    use rustls::pki_types::{ServerName, UnixTime};
    use std::path::PathBuf;

    /// A CA's certificate and a certificate for 127.0.0.1 it issued,
    /// written with its key and the CA (as `tls_ca`) into `dir`.
    fn issued(dir: &Path, ca_name: &str) -> (PathBuf, PathBuf, PathBuf, CertificateDer<'static>) {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, ca_name);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let (c, k, a) = (
            dir.join(format!("{ca_name}.pem")),
            dir.join(format!("{ca_name}.key")),
            dir.join(format!("{ca_name}-ca.pem")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        std::fs::write(&a, ca_cert.pem()).unwrap();
        (c, k, a, cert.der().clone())
    }

    fn shown(live: &Live) -> CertificateDer<'static> {
        live.peer.resolve(&[], &[]).unwrap().cert[0].clone()
    }

    fn trusts(live: &Live, cert: &CertificateDer<'_>) -> bool {
        let name = ServerName::try_from("127.0.0.1").unwrap();
        live.peer
            .verify_server_cert(cert, &[], &name, &[], UnixTime::now())
            .is_ok()
    }

    #[test]
    fn a_replace_swaps_the_certificate_shown_and_the_ca_trusted_by_peer_clients() {
        let dir = tempfile::tempdir().unwrap();
        let (c1, k1, ca1, der1) = issued(dir.path(), "one");
        let (c2, k2, ca2, der2) = issued(dir.path(), "two");
        let live = Live::new(Tls::load(&c1, &k1, Some(&ca1)).unwrap());
        assert_eq!(shown(&live), der1);
        assert!(trusts(&live, &der1) && !trusts(&live, &der2));
        live.replace(Tls::load(&c2, &k2, Some(&ca2)).unwrap());
        assert_eq!(shown(&live), der2);
        assert!(trusts(&live, &der2) && !trusts(&live, &der1));
    }

    #[test]
    fn a_key_of_another_certificate_does_not_load() {
        let dir = tempfile::tempdir().unwrap();
        let (c1, _, ca1, _) = issued(dir.path(), "one");
        let (_, k2, _, _) = issued(dir.path(), "two");
        let e = format!("{:#}", Tls::load(&c1, &k2, Some(&ca1)).unwrap_err());
        assert!(e.contains("do not match"), "{e}");
    }
}
