//! The device's REST API (JSON, under `/api/v1`), served with axum.
//!
//! Every route but `/health` needs `Authorization: Bearer <token>`. Errors
//! are JSON with an HTTP status and a stable label ([`ApiError`]).

pub(crate) mod accounts;
pub mod auth;
mod drains;
mod error;
pub(crate) mod geoip;
mod history;
mod metrics;
pub(crate) mod objects;
pub mod routes;
pub mod schedules;
mod stats;

use std::{net::IpAddr, path::PathBuf, sync::Arc};

use axum::{
    Extension, Json, Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Path, Query, Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

pub use accounts::{NewToken, TokenRequest, UserRequest, WhoAmI};
pub use error::{ApiError, ErrorKind};
pub use geoip::{GeoLookup, GeoipStatus, lookup_in};
pub use history::{CommandStatus, ConfigDiff, Fate, HistoryItem, RollbackRequest};
pub use stats::DeviceRecordStats;

use crate::access::{Principal, Role};
use crate::command::{Action, Actor, DrainTarget};
use crate::replication::{JoinRequest, LeaveRequest, Replication, Written};
use crate::{
    engine::{CheckStatus, Engine, Event, EventKind, Preview, RecordStatus, ScenarioStatus},
    model,
};
use gtm_cluster::{ClusterStatus, SECRET_HEADER, Store};

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub engine: Arc<Engine>,
    pub replication: Arc<Replication>,
    pub peers: Arc<crate::peers::Peers>,
    pub datacenter: String,
    pub prober: Arc<crate::health::probe::Prober>,
    pub store: Store,
    pub data_dir: PathBuf,
    pub token: Arc<str>,
    /// The console's sessions on this device.
    pub sessions: Arc<crate::access::sessions::Sessions>,
    /// TLS is on: device-to-device calls must show a client certificate.
    pub mutual_tls: bool,
    /// The client of the other devices' APIs (remote previews): the
    /// cluster's trust anchors and, with TLS, this device's certificate.
    pub peer_http: reqwest::Client,
}

impl ApiState {
    /// The cluster's accounts as this device applied them.
    pub async fn accounts(&self) -> crate::access::accounts::Accounts {
        crate::access::accounts::Accounts::of(&*self.replication.state().await)
    }

    /// Who a request comes from, for history and the GTM Logs: the user's
    /// or token's name and this device.
    pub fn actor(&self, principal: &Principal) -> Actor {
        Actor {
            user: principal.name.clone(),
            device: self.engine.device().to_string(),
        }
    }
}

/// The name the device's own API token (the `api-token` file) acts as.
pub const API_TOKEN_NAME: &str = "admin";

/// The result of an apply or a dry run.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplyResult {
    pub applied: bool,
    pub version: u64,
    pub changes: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusReport {
    pub device: String,
    pub version: u64,
    pub records: Vec<RecordStatus>,
    pub checks: Vec<CheckStatus>,
    pub scenarios: Vec<ScenarioStatus>,
    /// The other devices of the cluster, as their reports last said.
    #[serde(default)]
    pub peers: Vec<crate::peers::PeerStatus>,
    /// Set while this device is degraded: the committed configuration it
    /// could not install (it serves `version`, its last good one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<crate::engine::InstallFailure>,
    /// Set while this device cannot write its store (full or read-only
    /// disk): it serves DNS from what it holds and refuses writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_degraded: Option<crate::engine::StorageFault>,
    /// This device's GeoIP database (absent from older devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geoip: Option<GeoipStatus>,
    /// Set when the devices of the cluster answer with different GeoIP
    /// databases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geoip_warning: Option<String>,
}

/// Filters of the event log.
#[derive(Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventFilter {
    /// A record label, e.g. `www.example.test/A`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// record, check, scenario, operator or config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<EventKind>,
    /// Only events newer than this long ago, e.g. `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Keep the response open and stream new events as NDJSON.
    #[serde(default)]
    pub follow: bool,
    /// Every device's events (from the peer reports), not only this one's.
    #[serde(default)]
    pub all: bool,
    /// Only the events of this device (with `all`, any device's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Only events older than this (ms since the epoch): the `time_ms` of
    /// the oldest event of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    /// At most this many events, the newest of those that match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// "Test now": which address to probe a template check against.
#[derive(Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestRequest {
    #[serde(default)]
    pub address: Option<IpAddr>,
}

/// The result of one probe run by "Test now"; nothing is saved.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestResult {
    pub check: String,
    pub ok: bool,
    pub reason: String,
    pub elapsed_ms: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckStateRequest {
    /// `ok` or `error`.
    pub state: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrainAddress {
    pub address: String,
    /// Only this record (`www.example.test/A`); every record when absent.
    #[serde(default)]
    pub record: Option<String>,
    pub drained: bool,
    /// Only say what would change (`?dry_run=true` too).
    #[serde(default)]
    pub dry_run: bool,
    /// Drain even if a record is left with no answer (`?force=true` too).
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrainDatacenter {
    pub datacenter: String,
    pub drained: bool,
    /// Only say what would change (`?dry_run=true` too).
    #[serde(default)]
    pub dry_run: bool,
    /// Drain even if a record is left with no answer (`?force=true` too).
    #[serde(default)]
    pub force: bool,
}

/// `www.Example.test.` + `a` → `www.example.test/A`, the engine's label.
pub fn record_label(name: &str, rtype: &str) -> String {
    format!(
        "{}/{}",
        name.trim_end_matches('.').to_ascii_lowercase(),
        rtype.to_ascii_uppercase()
    )
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct DryRun {
    #[serde(default)]
    dry_run: bool,
}

#[derive(Debug, Deserialize)]
struct ApplyOptions {
    #[serde(default)]
    dry_run: bool,
    /// Apply a configuration with no domain over one that has some.
    #[serde(default)]
    allow_empty: bool,
}

/// Request bodies above this are refused (a configuration of 100,000
/// records is about 10 MiB of TOML; GeoIP country files are under 10 MiB).
const BODY_LIMIT: usize = 64 << 20;

/// Events in one page of `GET /events` (without `limit`, or above it).
const MAX_EVENTS: usize = 10_000;

pub fn router(state: ApiState) -> Router {
    let (mut public, mut secret) = (Router::new(), Router::new());
    let mut by_role: Vec<(Role, Router<ApiState>)> = [Role::Viewer, Role::Operator, Role::Admin]
        .into_iter()
        .map(|r| (r, Router::new()))
        .collect();
    for op in routes::operations() {
        let group = match op.access {
            routes::Access::Public => &mut public,
            routes::Access::ClusterSecret => &mut secret,
            routes::Access::Token => match by_role.iter_mut().find(|(r, _)| *r == op.role) {
                Some((_, g)) => g,
                None => continue,
            },
        };
        *group = std::mem::take(group).route(op.path, op.handler);
    }
    let mut app = Router::new()
        .merge(public)
        .merge(secret.route_layer(middleware::from_fn_with_state(state.clone(), peer_auth)));
    for (role, group) in by_role {
        app = app.merge(group.route_layer(middleware::from_fn_with_state(
            (state.clone(), role),
            auth::api,
        )));
    }
    app.layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state.clone())
        .merge(gtm_cluster::rpc_router(state.replication.node.clone()))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(middleware::from_fn_with_state(
            state.mutual_tls,
            device_certificate,
        ))
        .layer(middleware::from_fn(json_errors))
        // The console's pages answer HTML, errors included: merged outside
        // the JSON error layer.
        .merge(crate::console::router(state))
}

/// With TLS, a device-to-device route (`/cluster/v1/...`: Raft RPC, peer
/// reports, forwarded writes) also needs the client certificate of a
/// device, besides the cluster secret.
async fn device_certificate(
    State(mutual_tls): State<bool>,
    request: Request,
    next: Next,
) -> Response {
    if mutual_tls
        && request.uri().path().starts_with("/cluster/v1/")
        && request
            .extensions()
            .get::<crate::tls::ClientCertificate>()
            .is_none()
    {
        return ApiError::new(
            ErrorKind::Unauthorized,
            "device-to-device calls need a client certificate signed by the cluster's CA (tls_ca)",
        )
        .into_response();
    }
    next.run(request).await
}

/// Errors that axum itself answers (a body that does not parse, an unknown
/// route, a wrong method, a body over the limit) come as plain text: give
/// them the same JSON shape and stable labels as every other error.
async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 64 << 10).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let hint = match status {
        StatusCode::NOT_FOUND => "no such route; the routes are in /api/v1/openapi.json",
        StatusCode::METHOD_NOT_ALLOWED => "this route does not take that method",
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is over the limit",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "send the body as Content-Type: application/json",
        s if s.is_client_error() => "the request does not parse",
        _ => "the device failed to answer",
    };
    let message = if text.is_empty() {
        hint.to_string()
    } else {
        format!("{text} ({hint})")
    };
    // The route extractors' "unprocessable" means a body of the wrong shape:
    // a bad request, like any other client error axum answers.
    ApiError::new(ErrorKind::of_status(status), message).into_response()
}

async fn export_config(State(state): State<ApiState>) -> Result<String, ApiError> {
    // Copied out first: serializing a large configuration under the engine's
    // lock would hold up health changes for as long.
    toml::to_string_pretty(&state.engine.config())
        .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))
}

/// Runs `work` on the blocking pool: parsing a large configuration, or
/// anything that takes the engine's lock or reads the store, would
/// otherwise hold up an async worker (and every request queued on it).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(ApiError::internal)
}

/// [`parse_body`] on the blocking pool.
async fn parse_body_off(body: Bytes) -> Result<(String, model::Config), ApiError> {
    blocking(move || parse_body(&body)).await?
}

fn parse_body(body: &Bytes) -> Result<(String, model::Config), ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| {
            ApiError::new(
                ErrorKind::BadRequest,
                "the configuration must be UTF-8 TOML text",
            )
        })?
        .to_string();
    let config = model::parse(&text).map_err(ApiError::invalid)?;
    model::compile(&config).map_err(ApiError::invalid)?;
    Ok((text, config))
}

async fn validate_config(body: Bytes) -> Result<Json<ApplyResult>, ApiError> {
    parse_body_off(body).await?;
    Ok(Json(ApplyResult {
        applied: false,
        version: 0,
        changes: Vec::new(),
    }))
}

async fn apply_config(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<ApplyOptions>,
    body: Bytes,
) -> Result<Json<ApplyResult>, ApiError> {
    let (text, config) = parse_body_off(body).await?;
    if config.domains.is_empty() && !q.allow_empty {
        let served = state
            .engine
            .with_config(|c| c.domains.iter().map(|d| d.name.clone()).collect::<Vec<_>>());
        if !served.is_empty() {
            let mut named = served
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if served.len() > 5 {
                named.push_str(&format!(" and {} more", served.len() - 5));
            }
            return Err(ApiError::new(
                ErrorKind::ConfirmationNeeded,
                format!(
                    "this configuration has no domain: applying it would stop answering for every domain now served ({named}); nothing was applied. To do that, apply it with --allow-empty (API: allow_empty=true)"
                ),
            ));
        }
    }
    if q.dry_run {
        let engine = state.engine.clone();
        let (version, changes) =
            blocking(move || (engine.version(), engine.changes(&config))).await?;
        return Ok(Json(ApplyResult {
            applied: false,
            version,
            changes,
        }));
    }
    drop(config);
    writable(&state)?;
    let applied = state
        .replication
        .propose(state.actor(&who), None, Action::ApplyConfig { text })
        .await?;
    Ok(Json(ApplyResult {
        applied: applied.changed,
        version: applied.version,
        changes: applied.changes,
    }))
}

/// A `?version=N` that is not the current version.
fn conflict(version: u64, expected: u64) -> ApiError {
    ApiError::new(
        ErrorKind::Conflict,
        format!(
            "the configuration is at version {version}, not {expected}; read it again and retry"
        ),
    )
}

async fn status(State(state): State<ApiState>) -> Json<StatusReport> {
    Json(StatusReport {
        device: state.engine.device().to_string(),
        version: state.engine.version(),
        records: state.engine.status(),
        checks: state.engine.checks(),
        scenarios: state.engine.scenarios(),
        peers: state.peers.status(&state.replication),
        degraded: state.engine.install_failure(),
        storage_degraded: state.engine.storage_fault(),
        geoip: Some(GeoipStatus::of(&state.engine)),
        geoip_warning: geoip_warning(&state),
    })
}

/// A warning when the devices answer with different GeoIP databases: the
/// same client could then get different answers from each.
pub(crate) fn geoip_warning(state: &ApiState) -> Option<String> {
    let here = state.engine.dns().geo.load().description().to_string();
    let differ: Vec<String> = state
        .peers
        .status(&state.replication)
        .into_iter()
        .filter_map(|p| {
            p.geoip
                .filter(|db| *db != here)
                .map(|db| format!("{}: {db}", p.device))
        })
        .collect();
    (!differ.is_empty()).then(|| {
        format!(
            "the devices answer with different GeoIP databases (this device: {here}; {}): the same client may get different answers from each",
            differ.join("; ")
        )
    })
}

/// Refuses a write while the store cannot be written (full or read-only
/// disk): nothing would be half-applied, and the operator learns why.
fn writable(state: &ApiState) -> Result<(), ApiError> {
    match state.engine.storage_fault() {
        Some(fault) => Err(ApiError::new(
            ErrorKind::Storage,
            format!(
                "{fault}; nothing was changed. Free space on that filesystem (or make it writable): the device recovers by itself"
            ),
        )),
        None => Ok(()),
    }
}

/// `GET /health`: 200 while the device runs and answers DNS; the body says
/// `ok`, or `degraded` with one line per condition.
pub async fn health(State(state): State<ApiState>) -> String {
    let mut conditions = Vec::new();
    if let Some(f) = state.engine.install_failure() {
        conditions.push(format!(
            "configuration: version {} cannot be installed on this device (serving version {}): {}",
            f.version, f.serving, f.reason
        ));
    }
    if let Some(fault) = state.engine.storage_fault() {
        conditions.push(format!("storage: {fault}"));
    }
    if conditions.is_empty() {
        "ok\n".to_string()
    } else {
        format!("degraded\n{}\n", conditions.join("\n"))
    }
}

/// One page of the GTM Logs as `filter` selects it (newest last), and the
/// filter as a predicate for what follows. Shared by `GET /events` and the
/// console's logs page.
pub async fn event_page(
    state: &ApiState,
    filter: &EventFilter,
) -> Result<
    (
        Vec<Event>,
        impl Fn(&Event) -> bool + Clone + Send + Sync + 'static,
    ),
    ApiError,
> {
    let since_ms = match &filter.since {
        Some(text) => {
            let age: crate::model::duration::Interval = text
                .parse()
                .map_err(|e: String| ApiError::new(ErrorKind::BadRequest, format!("since: {e}")))?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            now.saturating_sub(age.0.as_millis() as u64)
        }
        None => 0,
    };
    let (before, limit) = (
        filter.before,
        filter.limit.unwrap_or(MAX_EVENTS).min(MAX_EVENTS),
    );
    let (record, kind, device) = (filter.record.clone(), filter.kind, filter.device.clone());
    let matches = move |e: &Event| {
        e.time_ms >= since_ms
            && record.as_ref().is_none_or(|r| e.object == *r)
            && kind.is_none_or(|k| e.kind == k)
            && device.as_ref().is_none_or(|d| e.device == *d)
    };
    // A page read from the time index: only what it returns (and what the
    // filters skip on the way), off the async workers.
    let (engine, page_filter) = (state.engine.clone(), matches.clone());
    let mut backlog = tokio::task::spawn_blocking(move || {
        engine.events_page(before, since_ms, limit, page_filter)
    })
    .await
    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?
    .map_err(|e| {
        ApiError::new(
            ErrorKind::Storage,
            format!("cannot read the event log: {e}"),
        )
    })?;
    if filter.all {
        backlog.extend(
            state
                .peers
                .events()
                .into_iter()
                .filter(|e| matches(e) && before.is_none_or(|b| e.time_ms < b)),
        );
        backlog.sort_by_key(|e| e.time_ms);
        backlog.drain(..backlog.len().saturating_sub(limit));
    }
    Ok((backlog, matches))
}

async fn events(
    State(state): State<ApiState>,
    Query(filter): Query<EventFilter>,
) -> Result<Response, ApiError> {
    // Subscribe before reading the backlog so nothing falls in between.
    let live = state.engine.subscribe_events();
    let (backlog, matches) = event_page(&state, &filter).await?;
    if !filter.follow {
        return Ok(Json(backlog).into_response());
    }
    let last = backlog.last().map_or(0, |e| e.seq);
    let lines = backlog.into_iter().map(|e| ndjson(&e)).collect::<Vec<_>>();
    let head = futures_util::stream::iter(lines.into_iter().map(Ok::<_, std::convert::Infallible>));
    let tail = futures_util::stream::unfold(
        (live, matches, last),
        |(mut rx, matches, last)| async move {
            loop {
                match rx.recv().await {
                    Ok(e) if e.seq > last && matches(&e) => {
                        return Some((Ok(ndjson(&e)), (rx, matches, last)));
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    let body = axum::body::Body::from_stream(futures_util::StreamExt::chain(head, tail));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

fn ndjson(e: &Event) -> String {
    let mut line = serde_json::to_string(e).unwrap_or_default();
    line.push('\n');
    line
}

fn not_found(what: String) -> ApiError {
    ApiError::new(ErrorKind::NotFound, what)
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct DeviceQuery {
    pub(crate) device: Option<String>,
}

/// Also the console's record preview (`crate::console`).
pub(crate) async fn preview(
    State(state): State<ApiState>,
    Path((name, rtype)): Path<(String, String)>,
    Query(q): Query<DeviceQuery>,
) -> Result<Json<Preview>, ApiError> {
    if let Some(device) = q.device.as_deref().filter(|d| *d != state.engine.device()) {
        return remote_preview(&state, device, &name, &rtype)
            .await
            .map(Json);
    }
    let label = record_label(&name, &rtype);
    let engine = state.engine.clone();
    let found = {
        let label = label.clone();
        blocking(move || engine.preview(&label)).await?
    };
    found.map(Json).ok_or_else(|| {
        not_found(format!(
            "no steered record {label} (see gtm status for the records)"
        ))
    })
}

/// Also the console's Resume button.
pub(crate) async fn resume(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((name, rtype)): Path<(String, String)>,
) -> Result<Json<Preview>, ApiError> {
    let label = record_label(&name, &rtype);
    writable(&state)?;
    // Holds are each device's own: refused only when no device of the
    // cluster (by its last report) holds the record.
    let here = state.engine.status();
    let peers = state.peers.status(&state.replication);
    let mine = here.iter().find(|r| r.record == label);
    if mine.is_some() {
        let held = mine.is_some_and(|r| r.held)
            || peers
                .iter()
                .any(|p| p.records.iter().any(|r| r.record == label && r.held));
        if !held {
            let mut seen = vec![format!(
                "{} on {}",
                mine.and_then(|r| r.status)
                    .map_or("-".into(), |s| s.to_string()),
                state.engine.device()
            )];
            seen.extend(peers.iter().filter_map(|p| {
                let r = p.records.iter().find(|r| r.record == label)?;
                Some(format!(
                    "{} on {}",
                    r.status.map_or("-".into(), |s| s.to_string()),
                    p.device
                ))
            }));
            return Err(ApiError::new(
                ErrorKind::Conflict,
                format!(
                    "{label} is not held by manual failback on any device ({}); there is nothing to resume",
                    seen.join(", ")
                ),
            ));
        }
    }
    // Every device applies it; this one has once propose returns.
    state
        .replication
        .propose(
            state.actor(&who),
            None,
            Action::Resume {
                record: label.clone(),
            },
        )
        .await?;
    let (engine, what) = (state.engine.clone(), label.clone());
    blocking(move || engine.preview(&what))
        .await?
        .map(Json)
        .ok_or_else(|| not_found(label))
}

async fn set_check_state(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Json(req): Json<CheckStateRequest>,
) -> Result<Json<Vec<CheckStatus>>, ApiError> {
    writable(&state)?;
    // The state machine checks the name, the kind and the state.
    let action = Action::SetCheck {
        check: name.clone(),
        state: req.state.clone(),
    };
    state
        .replication
        .propose(state.actor(&who), None, action)
        .await?;
    Ok(Json(
        state
            .engine
            .checks()
            .into_iter()
            .filter(|c| c.check == name)
            .collect(),
    ))
}

pub(crate) async fn test_check(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    body: Option<Json<TestRequest>>,
) -> Result<Json<TestResult>, ApiError> {
    let req = body.map(|Json(b)| b).unwrap_or_default();
    let Some(spec) = state.engine.compiled_check(&name) else {
        return Err(not_found(format!("no check named \"{name}\"")));
    };
    probe_once(&state, spec, req.address).await.map(Json)
}

/// A check not saved: given whole in the body, probed once.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeRequest {
    /// The check as the configuration file writes it (`name` may be left
    /// out).
    pub check: serde_json::Map<String, serde_json::Value>,
    /// For a template check: the address to probe.
    #[serde(default)]
    pub address: Option<IpAddr>,
}

/// The name an unsaved check is tested under when its body gives none.
const UNSAVED_CHECK: &str = "unsaved";

/// "Test now" of a check that is not saved: it is validated with the
/// configuration (as if it were added; nothing is) and probed once.
pub(crate) async fn test_unsaved(
    State(state): State<ApiState>,
    Json(req): Json<ProbeRequest>,
) -> Result<Json<TestResult>, ApiError> {
    let mut body = req.check;
    if !body.contains_key("name") {
        body.insert("name".into(), UNSAVED_CHECK.into());
    }
    let check: model::config::Check = serde_json::from_value(body.into())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("check: {e}")))?;
    let name = check.name.clone();
    let engine = state.engine.clone();
    let spec = blocking(move || {
        let mut config = engine.config();
        config.checks.retain(|c| c.name != check.name);
        config.checks.push(check);
        model::compile(&config)
            .map_err(ApiError::invalid)
            .and_then(|c| {
                c.checks
                    .into_iter()
                    .find(|s| s.name == name)
                    .ok_or_else(|| ApiError::new(ErrorKind::Internal, "the tested check vanished"))
            })
    })
    .await??;
    probe_once(&state, spec, req.address).await.map(Json)
}

/// One probe of `spec` (against `address` for a template); nothing saved.
async fn probe_once(
    state: &ApiState,
    spec: crate::model::compile::CheckSpec,
    address: Option<IpAddr>,
) -> Result<TestResult, ApiError> {
    use crate::model::config::CheckType;
    let name = spec.name.clone();
    if spec.kind == CheckType::Manual {
        return Err(ApiError::new(
            ErrorKind::NotProbed,
            format!("check \"{name}\" is manual: it is set by an operator, not probed"),
        ));
    }
    match (&spec.target, address) {
        (None, None) => {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                format!(
                    "check \"{name}\" is a template: give the address to probe (gtm check test {name} --address IP)"
                ),
            ));
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                format!("check \"{name}\" has a fixed target; it takes no address"),
            ));
        }
        _ => {}
    }
    let check = crate::model::condition::CheckRef {
        name: name.clone(),
        address,
    };
    let server_name = state
        .engine
        .instances()
        .borrow()
        .iter()
        .find(|i| i.check == check)
        .map_or_else(
            || {
                address.map_or_else(
                    || spec.target.clone().unwrap_or_default(),
                    |a| a.to_string(),
                )
            },
            |i| i.server_name.clone(),
        );
    let instance = crate::health::Instance {
        check: check.clone(),
        spec,
        server_name,
    };
    let outcome = state
        .prober
        .probe(
            &crate::health::probe_spec(&instance.spec),
            &crate::health::target_of(&instance),
        )
        .await;
    Ok(TestResult {
        check: check.to_string(),
        ok: outcome.ok,
        reason: outcome.reason,
        elapsed_ms: outcome.elapsed.as_secs_f64() * 1000.0,
    })
}

async fn drain_address(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(flags): Query<drains::DrainFlags>,
    Json(req): Json<DrainAddress>,
) -> Result<axum::response::Response, ApiError> {
    let record = req.record.as_deref().map(|r| match r.rsplit_once('/') {
        Some((n, t)) => record_label(n, t),
        None => r.to_string(),
    });
    let target = DrainTarget::Address {
        record,
        address: req.address,
    };
    let flags = drains::DrainFlags {
        dry_run: flags.dry_run || req.dry_run,
        force: flags.force || req.force,
    };
    drains::drain(state, &who, target, req.drained, flags).await
}

async fn drain_datacenter(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(flags): Query<drains::DrainFlags>,
    Json(req): Json<DrainDatacenter>,
) -> Result<axum::response::Response, ApiError> {
    let target = DrainTarget::Datacenter {
        name: req.datacenter,
    };
    let flags = drains::DrainFlags {
        dry_run: flags.dry_run || req.dry_run,
        force: flags.force || req.force,
    };
    drains::drain(state, &who, target, req.drained, flags).await
}

/// The active drains, with who made them and when.
async fn drains(State(state): State<ApiState>) -> Json<Vec<crate::operator::Drain>> {
    let kv = state.replication.state().await;
    Json(crate::operator::state_of(&kv).drains)
}

async fn peer_auth(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(SECRET_HEADER)
        .and_then(|v| v.to_str().ok());
    if state.replication.secret_ok(given) {
        next.run(request).await
    } else {
        ApiError::new(ErrorKind::Unauthorized, "missing or wrong cluster secret").into_response()
    }
}

async fn peer_join(
    State(state): State<ApiState>,
    Json(req): Json<JoinRequest>,
) -> Result<Json<Written>, ApiError> {
    state.replication.admit(req).await?;
    Ok(Json(Written {
        version: state.engine.version(),
    }))
}

async fn peer_leave(
    State(state): State<ApiState>,
    Json(req): Json<LeaveRequest>,
) -> Result<Json<Written>, ApiError> {
    state.replication.remove(req.id).await?;
    Ok(Json(Written {
        version: state.engine.version(),
    }))
}

/// What `gtm cluster init` and `recover` report.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterMessage {
    pub message: String,
    /// As `GET /api/v1/cluster/status` gives it.
    #[schemars(with = "serde_json::Value")]
    pub status: ClusterStatus,
}

async fn cluster_init(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
) -> Result<Json<ClusterMessage>, ApiError> {
    writable(&state)?;
    if state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::AlreadyClustered,
            "this device already belongs to a cluster (gtm cluster status)",
        ));
    }
    state.replication.init(state.actor(&who)).await?;
    Ok(Json(ClusterMessage {
        message: "cluster initialized with this device as its only voter. \
                  Join the second device of the pair with `gtm cluster join <this device's API address> --token <gtm cluster token>`. \
                  Two voters cannot survive the loss of one: with a pair, losing either device stops configuration writes \
                  (DNS keeps answering). Join a remote device in another datacenter as the third voter so that either \
                  device of the pair can fail, or use `gtm cluster recover --force-single` on the survivor."
            .into(),
        status: state.replication.status(),
    }))
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenResponse {
    pub token: String,
}

pub(crate) async fn cluster_token(
    State(state): State<ApiState>,
) -> Result<Json<TokenResponse>, ApiError> {
    if !state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::NotClustered,
            "this device belongs to no cluster yet: run gtm cluster init first",
        ));
    }
    let token = state
        .replication
        .token()
        .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
    Ok(Json(TokenResponse { token }))
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JoinCommand {
    /// API address of any member, e.g. http://127.0.0.11:8053.
    pub address: String,
    pub token: String,
    #[serde(default)]
    pub learner: bool,
}

async fn cluster_join(
    State(state): State<ApiState>,
    Json(req): Json<JoinCommand>,
) -> Result<Json<ClusterStatus>, ApiError> {
    writable(&state)?;
    if state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::AlreadyClustered,
            "this device already belongs to a cluster; gtm cluster leave first",
        ));
    }
    let address = if req.address.contains("://") {
        req.address.clone()
    } else {
        format!("http://{}", req.address)
    };
    state
        .replication
        .join(&address, &req.token, !req.learner)
        .await?;
    Ok(Json(state.replication.status()))
}

async fn cluster_leave(State(state): State<ApiState>) -> Result<Json<ClusterStatus>, ApiError> {
    writable(&state)?;
    if !state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::NotClustered,
            "this device belongs to no cluster",
        ));
    }
    state.replication.leave().await?;
    Ok(Json(state.replication.status()))
}

async fn cluster_status(State(state): State<ApiState>) -> Json<ClusterStatus> {
    Json(state.replication.status())
}

async fn cluster_recover(State(state): State<ApiState>) -> Result<Json<ClusterMessage>, ApiError> {
    writable(&state)?;
    if !state.replication.clustered() {
        return Err(ApiError::new(
            ErrorKind::NotClustered,
            "this device belongs to no cluster",
        ));
    }
    state.replication.recover_single().await?;
    Ok(Json(ClusterMessage {
        message: "this device now continues alone as the only voter; wipe the lost device's data directory before it joins again".into(),
        status: state.replication.status(),
    }))
}

async fn peer_report(State(state): State<ApiState>, body: Bytes) -> Result<StatusCode, ApiError> {
    let (peers, replication, engine, dc) = (
        state.peers.clone(),
        state.replication.clone(),
        state.engine.clone(),
        state.datacenter.clone(),
    );
    // A report carries every record's status: decoded, taken in and judged
    // (under the engine's lock) off the async workers.
    let report: crate::peers::Report = blocking(move || serde_json::from_slice(&body))
        .await?
        .map_err(|e| {
            ApiError::new(
                ErrorKind::BadRequest,
                format!("the peer report does not parse: {e}"),
            )
        })?;
    tokio::task::spawn_blocking(move || {
        peers.receive(report);
        peers.judge(&replication, &engine, &dc);
    });
    Ok(StatusCode::NO_CONTENT)
}

async fn peer_preview(
    State(state): State<ApiState>,
    Path((name, rtype)): Path<(String, String)>,
) -> Result<Json<Preview>, ApiError> {
    let label = record_label(&name, &rtype);
    let (engine, what) = (state.engine.clone(), label.clone());
    blocking(move || engine.preview(&what))
        .await?
        .map(Json)
        .ok_or_else(|| not_found(format!("no steered record {label}")))
}

/// Asks another device of the cluster for a record's preview.
async fn remote_preview(
    state: &ApiState,
    device: &str,
    name: &str,
    rtype: &str,
) -> Result<Preview, ApiError> {
    let status = state.replication.status();
    let Some(member) = status.members.iter().find(|m| m.info.name == device) else {
        return Err(not_found(format!(
            "no device named \"{device}\" in the cluster (gtm device list)"
        )));
    };
    let secret = state
        .replication
        .secret_value()
        .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
    let url = format!(
        "{}/cluster/v1/preview/{name}/{rtype}",
        member.info.api_addr.trim_end_matches('/')
    );
    let unreachable = |e: String| {
        ApiError::new(
            ErrorKind::Unreachable,
            format!("cannot reach device {device}: {e}"),
        )
    };
    let response = state
        .peer_http
        .get(url)
        .header(SECRET_HEADER, secret)
        .timeout(std::time::Duration::from_secs(3))
        .send()
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    if response.status() == StatusCode::NOT_FOUND {
        return Err(not_found(format!(
            "device {device} has no steered record {}",
            record_label(name, rtype)
        )));
    }
    response
        .json::<Preview>()
        .await
        .map_err(|e| unreachable(e.to_string()))
}
