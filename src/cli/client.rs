//! The CLI's side of the API: the HTTP client of a device (address, token
//! and trust from the flags or the local data directory, found through the
//! node file), reading input files, and the one place errors become exit
//! codes.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::device::{API_FILE, TOKEN_FILE};
use gtm_model as model;
use gtm_model::{
    error::{ApiError, ErrorKind},
    node::{NodeSettings, default_data_dir},
};

/// Exit codes: 0 ok, 1 error, 2 bad input (clap's too), 3 unreachable,
/// 4 no quorum, 5 not found, 6 outcome unknown (an API error's, by
/// `api_exit_code`).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("{0}")]
    NoQuorum(String),
    #[error("{0}")]
    NotFound(String),
    /// An error the device answered, with its kind.
    #[error("{message}")]
    Api { kind: ErrorKind, message: String },
}

/// The process's exit code for an error of `run`.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<CliError>() {
        Some(CliError::BadInput(_)) => 2,
        Some(CliError::Unreachable(_)) => 3,
        Some(CliError::NoQuorum(_)) => 4,
        Some(CliError::NotFound(_)) => 5,
        Some(CliError::Api { kind, .. }) => api_exit_code(*kind),
        None => 1,
    }
}

/// The exit code of each kind of API error: the one place the CLI maps them.
pub fn api_exit_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::Unreachable => 3,
        ErrorKind::NoQuorum => 4,
        ErrorKind::NotFound => 5,
        ErrorKind::OutcomeUnknown => 6,
        k if (400..500).contains(&k.status()) => 2,
        _ => 1,
    }
}

/// A file's text; `-` is standard input.
pub(super) fn read(file: &PathBuf) -> Result<String> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    };
    text.map_err(|e| CliError::BadInput(format!("cannot read {}: {e}", file.display())).into())
}

pub(super) fn bad_file(file: &std::path::Path, e: &model::ConfigErrors) -> anyhow::Error {
    let lines: Vec<String> = e
        .lines()
        .iter()
        .map(|e| format!("{}: {e}", file.display()))
        .collect();
    CliError::BadInput(lines.join("\n")).into()
}

/// Where the package installs the node file.
pub const DEFAULT_NODE_FILE: &str = "/etc/gtm/node.toml";

/// Names another node file for `gtm node check` without FILE and for
/// finding the local device's data directory.
pub const NODE_FILE_ENV: &str = "GTM_NODE_FILE";

/// The node file looked up when none is given: `$GTM_NODE_FILE`, else
/// /etc/gtm/node.toml.
pub(super) fn default_node_file() -> PathBuf {
    std::env::var_os(NODE_FILE_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_NODE_FILE), PathBuf::from)
}

/// The local device's data directory when neither `--data-dir` nor
/// `GTM_DATA_DIR` gives it: the node file's `data_dir` when the node file
/// exists (an installed device), else the default of `gtm serve`'s demo.
/// A node file that exists but does not read or parse is an error, not a
/// silent fallback to another directory.
pub(super) fn local_data_dir() -> Result<PathBuf> {
    let file = default_node_file();
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(default_data_dir()),
        Err(e) => {
            return Err(CliError::BadInput(format!(
                "cannot read the node file {} for its data_dir: {e} (give --data-dir or GTM_DATA_DIR)",
                file.display()
            ))
            .into());
        }
    };
    match NodeSettings::parse(&text) {
        Ok(settings) => Ok(settings.data_dir),
        Err(e) => Err(CliError::BadInput(format!(
            "{}: {e} (read for its data_dir: fix it, or give --data-dir or GTM_DATA_DIR)",
            file.display()
        ))
        .into()),
    }
}

/// Which device the CLI talks to, and how: the options every command
/// takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Connect {
    /// Data directory of the local device, where the CLI finds its API
    /// address and token (default: the data_dir of the node file,
    /// /etc/gtm/node.toml or GTM_NODE_FILE, when it exists; else
    /// ~/.local/share/gtm).
    #[arg(long, global = true, env = "GTM_DATA_DIR", hide_env_values = true)]
    pub data_dir: Option<PathBuf>,
    /// API base URL of the device to talk to, e.g. http://127.0.0.1:8053.
    #[arg(long, global = true, env = "GTM_API", hide_env_values = true)]
    pub api: Option<String>,
    /// API bearer token.
    #[arg(long, global = true, env = "GTM_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// PEM certificate(s) to trust for an https API (default: the local
    /// device's api-ca.pem in the data directory).
    #[arg(long, global = true, env = "GTM_CA", hide_env_values = true)]
    pub ca_file: Option<PathBuf>,
}

pub(super) struct Client {
    pub(super) http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    pub(super) fn new(cli: &Connect) -> Result<Self> {
        // Looked up only when needed: with --api and --api-token given, an
        // unreadable node file is none of this command's business.
        let mut known: Option<PathBuf> = None;
        let mut local_dir = || -> Result<PathBuf> {
            if let Some(dir) = &known {
                return Ok(dir.clone());
            }
            let dir = match &cli.data_dir {
                Some(dir) => dir.clone(),
                None => local_data_dir()?,
            };
            known = Some(dir.clone());
            Ok(dir)
        };
        let base = match &cli.api {
            Some(a) => a.trim_end_matches('/').to_string(),
            None => {
                let dir = local_dir()?;
                std::fs::read_to_string(dir.join(API_FILE))
                .map(|s| s.trim().to_string())
                .map_err(|_| CliError::Unreachable(format!("no local device: {} has no {API_FILE} (is `gtm serve` running? else give --api or GTM_API)", dir.display())))?
            }
        };
        let token = match &cli.api_token {
            Some(t) => t.clone(),
            None => {
                let dir = local_dir()?;
                std::fs::read_to_string(dir.join(TOKEN_FILE))
                    .map(|s| s.trim().to_string())
                    .map_err(|_| {
                        CliError::BadInput(format!(
                            "no API token: {} has no {TOKEN_FILE} (give --api-token or GTM_TOKEN)",
                            dir.display()
                        ))
                    })?
            }
        };
        // An https device is trusted by --ca-file, else by the certificate
        // the local device keeps in its data directory.
        let trust = if base.starts_with("https://") {
            let path = match &cli.ca_file {
                Some(path) => path.clone(),
                None => local_dir()?.join(gtm_node::tls::CA_FILE),
            };
            Some(std::fs::read(&path).map_err(|e| {
                CliError::BadInput(format!("{base} uses TLS: cannot read the certificate to trust, {}: {e} (give --ca-file)", path.display()))
            })?)
        } else {
            None
        };
        let http = gtm_node::tls::http_client(trust.as_deref(), None)?;
        Ok(Self { http, base, token })
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(super) async fn response(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp = req.bearer_auth(&self.token).send().await.map_err(|e| {
            CliError::Unreachable(format!("cannot reach the device at {}: {e}", self.base))
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        match serde_json::from_str::<ApiError>(&body) {
            Ok(e) => {
                let mut msg = e.message;
                for line in e.errors {
                    msg.push_str("\n  ");
                    msg.push_str(&line);
                }
                // A label this version does not know: its HTTP status says
                // whose fault it was.
                let kind = match e.error {
                    ErrorKind::Unknown if status.is_client_error() => ErrorKind::BadRequest,
                    kind => kind,
                };
                bail!(CliError::Api { kind, message: msg })
            }
            Err(_) => bail!("the device answered {status}: {body}"),
        }
    }

    pub(super) async fn send<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T> {
        Ok(self.response(req).await?.json().await?)
    }

    pub(super) async fn text(&self, req: reqwest::RequestBuilder) -> Result<String> {
        Ok(self.response(req).await?.text().await?)
    }
}
