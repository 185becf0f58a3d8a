//! The one HTTP client constructor for device-to-device calls and for
//! clients of a device's API (the CLI, tests).
//!
//! reqwest is built without a default crypto provider, so a client made any
//! other way (`reqwest::Client::new()`) panics when it is built: every client
//! comes from here, with the ring provider, the trust anchors and, for mutual
//! TLS, the device's own certificate.

use std::{sync::Arc, time::Duration};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpClientError(String);

fn err(what: &str) -> impl FnOnce(String) -> HttpClientError + '_ {
    move |e| HttpClientError(format!("{what}: {e}"))
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

/// An HTTP client trusting `trust_pem` (none: plain HTTP only), showing
/// `identity` (certificate chain and key, PEM) when a server asks for one,
/// with `timeout` for whole requests unless a request sets its own.
pub fn http_client(
    trust_pem: Option<&[u8]>,
    identity: Option<(&[u8], &[u8])>,
    timeout: Option<Duration>,
) -> Result<reqwest::Client, HttpClientError> {
    let roots = match trust_pem {
        Some(pem) => trust_roots(pem)?,
        None => rustls::RootCertStore::empty(),
    };
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| err("TLS protocol versions")(e.to_string()))?
    .with_root_certificates(roots);
    let tls = match identity {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| err("the device certificate does not parse")(e.to_string()))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| err("the device key does not parse")(e.to_string()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                err("the device certificate cannot authenticate as a client")(e.to_string())
            })?
        }
        None => builder.with_no_client_auth(),
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
