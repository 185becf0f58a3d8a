//! The one HTTP client constructor for device-to-device calls and for
//! clients of a device's API (the CLI, tests), and the swappable TLS
//! identity and trust a device's peer clients share.
//!
//! reqwest is built without a default crypto provider, so a client made any
//! other way (`reqwest::Client::new()`) panics when it is built: every client
//! comes from here, with the ring provider, the trust anchors and, for mutual
//! TLS, the device's own certificate.

use std::{sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use rustls::{
    DigitallySignedStruct, SignatureScheme,
    client::{
        ResolvesClientCert, Resumption, WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject},
    sign::CertifiedKey,
};

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpClientError(String);

fn err(what: &str) -> impl FnOnce(String) -> HttpClientError + '_ {
    move |e| HttpClientError(format!("{what}: {e}"))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM bundle, as trust anchors.
pub fn trust_roots(pem: &[u8]) -> Result<rustls::RootCertStore, HttpClientError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| err("a trusted certificate does not parse")(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| err("a trusted certificate is invalid")(e.to_string()))?;
    }
    Ok(roots)
}

/// What a client speaks and shows.
#[derive(Debug, Clone, Copy)]
pub enum ClientTls<'a> {
    /// Plain HTTP only.
    Plain,
    /// TLS to servers whose certificate chains to one of this PEM bundle;
    /// no client certificate (the CLI, authenticated by its token).
    Trust(&'a [u8]),
    /// A device's client of the other devices (mutual TLS): the trust
    /// anchors and the certificate of `PeerTls`, as they are at each
    /// handshake.
    Peer(&'a Arc<PeerTls>),
}

/// A device's certificate and trust anchors as a client of the other
/// devices, loaded and checked, ready to be swapped into a [`PeerTls`].
#[derive(Debug, Clone)]
pub struct PeerCredentials {
    key: Arc<CertifiedKey>,
    verifier: Arc<WebPkiServerVerifier>,
}

impl PeerCredentials {
    /// From PEM: the trusted certificates, the device's certificate chain
    /// and its private key (which must match the chain's first certificate).
    pub fn from_pem(
        trust_pem: &[u8],
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<Self, HttpClientError> {
        let verifier = WebPkiServerVerifier::builder_with_provider(
            Arc::new(trust_roots(trust_pem)?),
            provider(),
        )
        .build()
        .map_err(|e| {
            err("the trusted certificates cannot verify the other devices")(e.to_string())
        })?;
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err("the device certificate does not parse")(e.to_string()))?;
        if chain.is_empty() {
            return Err(HttpClientError(
                "the device certificate file holds no certificate".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| err("the device key does not parse")(e.to_string()))?;
        let key = CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
            err("the device certificate cannot authenticate as a client")(e.to_string())
        })?;
        Ok(Self {
            key: Arc::new(key),
            verifier,
        })
    }
}

/// The certificate a device shows to the other devices and the anchors it
/// verifies them with, shared by all its peer clients and swapped whole by
/// a reload: every handshake from then on uses the new ones, without
/// rebuilding the clients. Connections already open keep what they were
/// made with.
#[derive(Debug)]
pub struct PeerTls {
    key: ArcSwap<CertifiedKey>,
    verifier: ArcSwap<WebPkiServerVerifier>,
}

impl PeerTls {
    pub fn new(credentials: PeerCredentials) -> Arc<Self> {
        Arc::new(Self {
            key: ArcSwap::new(credentials.key),
            verifier: ArcSwap::new(credentials.verifier),
        })
    }

    /// Swaps in `credentials` for the handshakes that follow.
    pub fn replace(&self, credentials: PeerCredentials) {
        self.verifier.store(credentials.verifier);
        self.key.store(credentials.key);
    }
}

impl ResolvesClientCert for PeerTls {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.key.load_full())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl ServerCertVerifier for PeerTls {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier.load().verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier
            .load()
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier
            .load()
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier.load().supported_verify_schemes()
    }
}

/// An HTTP client speaking `tls`, with `timeout` for whole requests unless
/// a request sets its own.
pub fn http_client(
    tls: ClientTls<'_>,
    timeout: Option<Duration>,
) -> Result<reqwest::Client, HttpClientError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| err("TLS protocol versions")(e.to_string()))?;
    let tls = match tls {
        ClientTls::Plain => builder
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
        ClientTls::Trust(pem) => builder
            .with_root_certificates(trust_roots(pem)?)
            .with_no_client_auth(),
        ClientTls::Peer(peer) => {
            let mut config = builder
                .dangerous()
                .with_custom_certificate_verifier(peer.clone())
                .with_client_cert_resolver(peer.clone());
            // A resumed session keeps the identities of the handshake it
            // resumes: every new connection makes a full one, so it shows
            // and verifies what the last reload put in place.
            config.resumption = Resumption::disabled();
            config
        }
    };
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(2))
        .pool_idle_timeout(Duration::from_secs(30));
    if let Some(t) = timeout {
        builder = builder.timeout(t);
    }
    builder
        .build()
        .map_err(|e| err("building the HTTP client")(e.to_string()))
}
