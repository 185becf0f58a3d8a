//! The CLI's side of the API: the HTTP client of a device (address, token
//! and trust from the flags or the local data directory, found through the
//! node file), reading input files, and the one place errors become exit
//! codes.

use std::{path::PathBuf, time::Duration};

use anyhow::{Result, anyhow};
use reqwest::{Method, StatusCode, header::HeaderValue};

use crate::device::{API_FILE, TOKEN_FILE};
use gtm_model as model;
use gtm_model::{
    duration::Interval,
    error::{ApiError, ErrorKind},
    node::{NodeSettings, default_data_dir},
};
use gtm_node::command::{COMMAND_HEADER, CommandId};

/// The process's exit codes, each with what it means: [`exit_code`] gives
/// only these, and [`EXIT_STATUS`] says them in the man pages and in
/// docs/cli-reference.md.
pub mod exit {
    pub const DONE: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const BAD_INPUT: i32 = 2;
    pub const UNREACHABLE: i32 = 3;
    pub const NO_QUORUM: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const OUTCOME_UNKNOWN: i32 = 6;
}

/// Every exit code of `gtm` and its meaning (EXIT STATUS in gtm(1)).
pub const EXIT_STATUS: [(i32, &str); 7] = [
    (exit::DONE, "Done."),
    (
        exit::FAILED,
        "Failed: an error none of the codes below names, a Test now probe that failed \
         (gtm check test), or a device that cannot write its store (503 storage).",
    ),
    (
        exit::BAD_INPUT,
        "Bad input; the message says what to fix: an argument, a file, the node file, a role \
         that does not allow the command, or a request the device refused (an HTTP 4xx).",
    ),
    (
        exit::UNREACHABLE,
        "The device, or another device a command is forwarded to, could not be reached, or a \
         read got no answer within its deadline (--timeout).",
    ),
    (
        exit::NO_QUORUM,
        "No quorum: nothing was applied and nothing will be.",
    ),
    (
        exit::NOT_FOUND,
        "Not found: the object, version or command named does not exist.",
    ),
    (
        exit::OUTCOME_UNKNOWN,
        "Outcome unknown: a write was sent, or may have been, and no answer came; it may still \
         apply. gtm command status ID, with the command id the message names, shows its fate.",
    ),
];

/// Exit codes: 0 ok, 1 error, 2 bad input (clap's too), 3 unreachable,
/// 4 no quorum, 5 not found, 6 outcome unknown (an API error's, by
/// `api_exit_code`, or a write whose answer never came): [`EXIT_STATUS`].
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
    /// A write was (perhaps) sent and no answer came: it may apply or not.
    #[error("{0}")]
    OutcomeUnknown(String),
    /// An error the device answered, with its kind.
    #[error("{message}")]
    Api { kind: ErrorKind, message: String },
}

/// The process's exit code for an error of `run`.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<CliError>() {
        Some(CliError::BadInput(_)) => exit::BAD_INPUT,
        Some(CliError::Unreachable(_)) => exit::UNREACHABLE,
        Some(CliError::NoQuorum(_)) => exit::NO_QUORUM,
        Some(CliError::NotFound(_)) => exit::NOT_FOUND,
        Some(CliError::OutcomeUnknown(_)) => exit::OUTCOME_UNKNOWN,
        Some(CliError::Api { kind, .. }) => api_exit_code(*kind),
        None => exit::FAILED,
    }
}

/// The exit code of each kind of API error: the one place the CLI maps them.
pub fn api_exit_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::Unreachable => exit::UNREACHABLE,
        ErrorKind::NoQuorum => exit::NO_QUORUM,
        ErrorKind::NotFound => exit::NOT_FOUND,
        ErrorKind::OutcomeUnknown => exit::OUTCOME_UNKNOWN,
        k if (400..500).contains(&k.status()) => exit::BAD_INPUT,
        _ => exit::FAILED,
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
    /// How long each request to the device may take, e.g. 5s, 2m (default:
    /// 15s for a read, 60s for a write; `logs --follow`: until the stream
    /// starts).
    #[arg(
        long,
        global = true,
        env = "GTM_TIMEOUT",
        hide_env_values = true,
        value_name = "DURATION",
        value_parser = deadline
    )]
    pub timeout: Option<Duration>,
}

/// A read's deadline: a device answers one at once.
const READ_DEADLINE: Duration = Duration::from_secs(15);
/// A write's deadline: the cluster tries to commit a command for 8 s (more
/// for a large one), then the device installs it; a write of a large
/// configuration or GeoIP database also has a long body to send.
const WRITE_DEADLINE: Duration = Duration::from_secs(60);

/// `--timeout`: a duration as configuration writes them, more than zero.
fn deadline(text: &str) -> Result<Duration, String> {
    match text.parse::<Interval>() {
        Ok(Interval(d)) if d.is_zero() => Err("the deadline must be more than 0s".into()),
        Ok(Interval(d)) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

pub(super) struct Client {
    pub(super) http: reqwest::Client,
    base: String,
    token: String,
    /// `--timeout`, else each request's default.
    timeout: Option<Duration>,
}

/// What a request may change, which says what it means when no answer
/// comes.
#[derive(Debug, Clone, Copy)]
enum Changes {
    /// Nothing (a GET, a probe, a dry run): the device is unreachable.
    Nothing,
    /// A write, made by the device into a replicated command (every write
    /// but those below): the CLI chooses its id.
    Command,
    /// A write to the device's own state, not a command: `look` says how
    /// to learn what became of it.
    Device { look: &'static str },
}

/// What was written, when a write got no answer.
#[derive(Debug, Clone, Copy)]
enum Written {
    /// The command's id, sent in `x-gtm-command`.
    Command(CommandId),
    Device {
        look: &'static str,
    },
}

/// One request on its way: where it goes, by when, and what it writes.
struct Call {
    base: String,
    /// `PUT /api/v1/checks/web`.
    route: String,
    deadline: Duration,
    /// None for a read.
    written: Option<Written>,
}

impl Call {
    /// The error of a request that got no answer: within its deadline
    /// (`error` none) or by a failure of its connection. Nothing was sent
    /// when the connection could not be made: the device is unreachable.
    /// Else a write may have been received, and may apply: its outcome is
    /// unknown, and its command id is how to learn it.
    fn failed(&self, error: Option<reqwest::Error>) -> anyhow::Error {
        let Self {
            base,
            route,
            deadline,
            written,
        } = self;
        let what = match &error {
            None => format!(
                "{base} did not answer {route} within {} (the deadline; --timeout or GTM_TIMEOUT sets it)",
                Interval(*deadline)
            ),
            Some(e) if e.is_connect() => {
                return CliError::Unreachable(format!(
                    "cannot reach the device at {base} ({route}): {}",
                    chain(e)
                ))
                .into();
            }
            Some(e) => format!("{base} did not answer {route}: {}", chain(e)),
        };
        match written {
            None => CliError::Unreachable(what).into(),
            Some(Written::Command(id)) => CliError::OutcomeUnknown(format!(
                "{what}\nthe write may have been received: it may still apply. Its command id is {id}; \
                 `gtm command status {id}` (GET /api/v1/commands/{id}) shows what became of it"
            ))
            .into(),
            Some(Written::Device { look }) => CliError::OutcomeUnknown(format!(
                "{what}\nthe request may have been received: it may still take effect; {look}"
            ))
            .into(),
        }
    }
}

/// An error with its causes, as one line (reqwest's own message is only
/// the outermost, e.g. "error sending request").
fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The error a device answered (not 2xx), as the CLI reports it.
fn answered(status: StatusCode, body: &[u8]) -> anyhow::Error {
    match serde_json::from_slice::<ApiError>(body) {
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
            CliError::Api { kind, message: msg }.into()
        }
        Err(_) => anyhow!(
            "the device answered {status}: {}",
            String::from_utf8_lossy(body)
        ),
    }
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
        Ok(Self {
            http,
            base,
            token,
            timeout: cli.timeout,
        })
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `req` made ready to send: authorised, its deadline, and a
    /// command's id in its header. A request by any method but GET and HEAD
    /// writes what `changes` says, unless it is a dry run (`?dry_run=true`).
    fn prepare(
        &self,
        req: reqwest::RequestBuilder,
        changes: Changes,
    ) -> Result<(reqwest::Client, reqwest::Request, Call)> {
        let (http, request) = req.bearer_auth(&self.token).build_split();
        let mut request = request.map_err(|e| anyhow!("cannot make the request: {e}"))?;
        let method = request.method().clone();
        let dry_run = request
            .url()
            .query_pairs()
            .any(|(k, v)| k == "dry_run" && v == "true");
        let read = dry_run || matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
        let written = match changes {
            _ if read => None,
            Changes::Nothing => None,
            Changes::Command => Some(Written::Command(CommandId::random())),
            Changes::Device { look } => Some(Written::Device { look }),
        };
        if let Some(Written::Command(id)) = written {
            let value = HeaderValue::from_str(&id.to_string())
                .map_err(|e| anyhow!("cannot make the request: {e}"))?;
            request.headers_mut().insert(COMMAND_HEADER, value);
        }
        let default = match written {
            None => READ_DEADLINE,
            Some(_) => WRITE_DEADLINE,
        };
        let call = Call {
            base: self.base.clone(),
            route: format!("{method} {}", request.url().path()),
            deadline: self.timeout.unwrap_or(default),
            written,
        };
        Ok((http, request, call))
    }

    /// One request, answer and all, within its deadline: the answer's body
    /// when it succeeded.
    async fn exchange(&self, req: reqwest::RequestBuilder, changes: Changes) -> Result<Vec<u8>> {
        let (http, request, call) = self.prepare(req, changes)?;
        let answer = tokio::time::timeout(call.deadline, async {
            let resp = http.execute(request).await?;
            let status = resp.status();
            Ok::<_, reqwest::Error>((status, resp.bytes().await?.to_vec()))
        })
        .await;
        let (status, body) = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(call.failed(Some(e))),
            Err(_) => return Err(call.failed(None)),
        };
        if !status.is_success() {
            return Err(answered(status, &body));
        }
        Ok(body)
    }

    /// A followed stream (`logs --follow`): the deadline holds until it
    /// starts; then it runs as long as the device sends.
    pub(super) async fn stream(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let (http, request, call) = self.prepare(req, Changes::Nothing)?;
        let resp = match tokio::time::timeout(call.deadline, http.execute(request)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(call.failed(Some(e))),
            Err(_) => return Err(call.failed(None)),
        };
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let body = tokio::time::timeout(call.deadline, resp.bytes())
            .await
            .ok()
            .and_then(|b| b.ok())
            .unwrap_or_default();
        Err(answered(status, &body))
    }

    pub(super) async fn send<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T> {
        let body = self.exchange(req, Changes::Command).await?;
        json(&body)
    }

    /// A request that changes nothing whatever its method (a probe, a dry
    /// run asked in its body): without an answer it fails as a read does.
    pub(super) async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T> {
        let body = self.exchange(req, Changes::Nothing).await?;
        json(&body)
    }

    /// A write to the device's own state, not a replicated command (its
    /// GeoIP database, the cluster's members): without an answer its
    /// outcome is unknown, and `look` says how to learn it.
    pub(super) async fn send_device<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        look: &'static str,
    ) -> Result<T> {
        let body = self.exchange(req, Changes::Device { look }).await?;
        json(&body)
    }

    pub(super) async fn text(&self, req: reqwest::RequestBuilder) -> Result<String> {
        let body = self.exchange(req, Changes::Command).await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

fn json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| anyhow!("the device's answer is not what this gtm reads: {e}"))
}
