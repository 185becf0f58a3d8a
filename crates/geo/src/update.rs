//! One download, start to end: fetch from the source, check the whole
//! database, replace the file, swap it into the running DNS state. Every
//! outcome is logged (GTM Logs, kind `geoip`) through `log`; on any failure
//! the database in use stays.

use gtm_model::severity::Severity;
use std::path::Path;

use super::{Db, Kind, download, install};

/// Why an update installed nothing.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// The source could not be read.
    #[error("download failed: {0}; the current database stays")]
    Download(String),
    /// What it gave is not a sound database of its kind (or cannot be
    /// written).
    #[error("refused the database from {url}: {why}")]
    Refused { url: String, why: String },
}

/// Downloads, checks and installs the database of `kind` for the month of
/// `now_ms` from `template`. Returns the month it was for.
pub async fn update(
    http: &reqwest::Client,
    kind: Kind,
    data_dir: &Path,
    template: &str,
    now_ms: u64,
    swap: impl Fn(Db),
    log: impl Fn(Severity, String),
) -> Result<(i64, u32), UpdateError> {
    let got = match download::fetch(http, template, now_ms).await {
        Ok(got) => got,
        Err(e) => {
            let e = UpdateError::Download(e.to_string());
            log(Severity::Warning, e.to_string());
            return Err(e);
        }
    };
    if got.fell_back {
        log(
            Severity::Info,
            format!(
                "the current month's file is not published yet; took {}",
                got.url
            ),
        );
    }
    let (month, url, size) = (got.month, got.url.clone(), got.bytes.len());
    let dir = data_dir.to_path_buf();
    let installed = tokio::task::spawn_blocking(move || {
        install::install(kind, &dir, got.bytes, &got.url, &got.url)
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r.map_err(|e| e.to_string()));
    match installed {
        Ok(db) => {
            log(
                Severity::Info,
                format!(
                    "downloaded {url} ({size} bytes): now answering with {}",
                    db.description()
                ),
            );
            swap(db);
            Ok(month)
        }
        Err(why) => {
            let e = UpdateError::Refused { url, why };
            log(Severity::Warning, e.to_string());
            Err(e)
        }
    }
}
