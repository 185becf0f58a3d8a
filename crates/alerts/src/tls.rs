//! The TLS clients of notifiers: the web's public roots, and the CAs of a
//! notifier's `ca_file` (read when a connection is made, so a replaced
//! file counts from the next message).

use std::{path::Path, sync::Arc};

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, pem::PemObject};

/// The CA certificates of a PEM file.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("ca_file {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("ca_file {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

/// A rustls client trusting the public roots and `ca_file`'s CAs.
pub fn client(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = ca_file {
        for cert in certificates(path)? {
            roots
                .add(cert)
                .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
        }
    }
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(Arc::new(config))
}
