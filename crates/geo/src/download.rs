//! Fetching a country database from the configured source (`[geoip]
//! source`): `{year}` and `{month}` are filled with the current UTC month,
//! and with the month before when the current month's file is not
//! published yet (HTTP 404, early in a month). Web PKI roots (rustls), a
//! size limit on what is read, gzip undone when the body is gzipped.

use std::{io::Read, sync::Arc, time::Duration};

use super::MAX_DATABASE_BYTES;

/// Why a download gave no database.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("{url}: {why}")]
    Fetch { url: String, why: String },
    #[error("{url}: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url}: more than {MAX_DATABASE_BYTES} bytes")]
    TooLarge { url: String },
    #[error("{url}: the gzip stream is damaged: {why}")]
    Gzip { url: String, why: String },
}

/// Why no HTTP client for downloads could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Tls(#[from] rustls::Error),
    #[error("{0}")]
    Http(#[from] reqwest::Error),
}

/// A fetched (and un-gzipped) database, not yet checked.
#[derive(Debug)]
pub struct Downloaded {
    pub bytes: Vec<u8>,
    pub url: String,
    /// The month filled into the URL.
    pub month: (i64, u32),
    /// Whether the current month's file was missing and the month before's
    /// was taken.
    pub fell_back: bool,
}

/// `template` with `{year}` (four digits) and `{month}` (two) filled.
pub fn fill(template: &str, (year, month): (i64, u32)) -> String {
    template
        .replace("{year}", &format!("{year:04}"))
        .replace("{month}", &format!("{month:02}"))
}

/// The month before `(year, month)`.
pub fn previous((year, month): (i64, u32)) -> (i64, u32) {
    if month <= 1 {
        (year - 1, 12)
    } else {
        (year, month - 1)
    }
}

/// The UTC month of `now_ms`.
pub fn month_of(now_ms: u64) -> (i64, u32) {
    let (y, m, _) = gtm_model::when::ymd(now_ms);
    (y, m)
}

/// The client downloads use: public web PKI roots, bounded time.
pub fn client() -> Result<reqwest::Client, ClientError> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(300))
        .build()?)
}

/// Downloads the database for the month of `now_ms`, or the month before's
/// when the current one answers 404 (and the URL depends on the month).
pub async fn fetch(
    http: &reqwest::Client,
    template: &str,
    now_ms: u64,
) -> Result<Downloaded, DownloadError> {
    let month = month_of(now_ms);
    let url = fill(template, month);
    match get(http, &url).await {
        Ok(bytes) => Ok(Downloaded {
            bytes,
            url,
            month,
            fell_back: false,
        }),
        Err(DownloadError::Status { status: 404, .. })
            if fill(template, previous(month)) != url =>
        {
            let month = previous(month);
            let url = fill(template, month);
            let bytes = get(http, &url).await?;
            Ok(Downloaded {
                bytes,
                url,
                month,
                fell_back: true,
            })
        }
        Err(e) => Err(e),
    }
}

async fn get(http: &reqwest::Client, url: &str) -> Result<Vec<u8>, DownloadError> {
    let fetch = |why: String| DownloadError::Fetch {
        url: url.to_string(),
        why,
    };
    let mut response = http
        .get(url)
        .send()
        .await
        .map_err(|e| fetch(e.to_string()))?;
    let status = response.status().as_u16();
    if !response.status().is_success() {
        return Err(DownloadError::Status {
            url: url.to_string(),
            status,
        });
    }
    let too_large = || DownloadError::TooLarge {
        url: url.to_string(),
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_DATABASE_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| fetch(e.to_string()))? {
        if body.len() + chunk.len() > MAX_DATABASE_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    gunzip(body, url)
}

/// Undoes gzip when the body starts with its magic number, whatever the
/// URL says; at most [`MAX_DATABASE_BYTES`] come out.
pub fn gunzip(body: Vec<u8>, url: &str) -> Result<Vec<u8>, DownloadError> {
    if !body.starts_with(&[0x1f, 0x8b]) {
        return Ok(body);
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body.as_slice())
        .take(MAX_DATABASE_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| DownloadError::Gzip {
            url: url.to_string(),
            why: e.to_string(),
        })?;
    if out.len() > MAX_DATABASE_BYTES {
        return Err(DownloadError::TooLarge {
            url: url.to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_filled_and_stepped_back_across_a_year() {
        assert_eq!(
            fill(gtm_model::config::DEFAULT_GEOIP_SOURCE, (2026, 3)),
            "https://download.db-ip.com/free/dbip-country-lite-2026-03.mmdb.gz"
        );
        assert_eq!(previous((2026, 1)), (2025, 12));
        assert_eq!(previous((2026, 12)), (2026, 11));
        // 2026-12-01T00:30:00Z
        assert_eq!(month_of(1_796_085_000_000), (2026, 12));
    }

    #[test]
    fn gzip_is_undone_and_plain_bodies_pass() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"database bytes").unwrap();
        let packed = gz.finish().unwrap();
        assert_eq!(gunzip(packed.clone(), "u").unwrap(), b"database bytes");
        assert_eq!(gunzip(b"plain".to_vec(), "u").unwrap(), b"plain");
        let cut = packed[..packed.len() / 2].to_vec();
        assert!(matches!(gunzip(cut, "u"), Err(DownloadError::Gzip { .. })));
    }
}
