//! The device's REST API (JSON, under `/api/v1`), served with axum: one
//! module per resource, the route table in [`routes`], and here the state
//! the handlers share, the router and the helpers every module uses.
//!
//! Who may call what is in [`routes::operations`]: `/health` and
//! `/metrics` are public; every `/api/v1` route needs
//! `Authorization: Bearer <token>` (or a console session) of a role at
//! least the route's; the device-to-device routes (`/cluster/v1/...`) need
//! the cluster secret (and, with TLS, a device's client certificate).
//! Errors are JSON with an HTTP status and a stable label ([`ApiError`]).

mod alerts;
pub mod console;

pub(crate) mod accounts;
pub mod auth;
mod checks;
mod cluster;
pub mod compression;
mod config;
mod dnssec;
mod drains;
pub mod error;
mod events;
pub(crate) mod geoip;
mod history;
mod inputs;
mod metrics;
pub mod objects;
mod peer;
mod records;
pub mod routes;
pub mod schedules;
mod stats;
mod status;
pub mod tsig;
mod zones;

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{Router, extract::DefaultBodyLimit, http::StatusCode, middleware};

pub use accounts::{NewToken, TokenRequest, UserRequest, WhoAmI};
pub use alerts::AlertTest;
pub use checks::{CheckStateRequest, ProbeRequest, TestRequest, TestResult};
pub(crate) use checks::{test_check, test_unsaved};
pub(crate) use cluster::cluster_token;
pub use cluster::{ClusterMessage, JoinCommand, TokenResponse};
pub use config::ApplyResult;
pub use drains::{DrainAddress, DrainDatacenter};
pub use events::{EventFilter, event_page};
pub use geoip::{GeoLookup, GeoipStatus, lookup_in};
pub use history::{CommandStatus, ConfigDiff, Fate, HistoryItem, RollbackRequest};
pub use inputs::{AlertmanagerNotification, AlertsTaken, PushRequest};
pub(crate) use records::{DeviceQuery, ExplainQuery, explain, preview, resume};
pub use stats::DeviceRecordStats;
pub use status::{RAFT_WORKER, STORE_WORKER, StatusReport, failed_workers, health};

use gtm_cluster::Store;
use gtm_engine::Engine;
use gtm_model as model;
use gtm_model::{
    actor::Actor,
    error::{ApiError, ErrorKind},
};
use gtm_node::access::{Principal, Role};
use gtm_node::replication::Replication;

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub engine: Arc<Engine>,
    pub replication: Arc<Replication>,
    pub peers: Arc<gtm_node::peers::Peers>,
    pub datacenter: String,
    pub prober: Arc<gtm_health::probe::Prober>,
    pub store: Store,
    pub data_dir: PathBuf,
    pub token: Arc<str>,
    /// The console's sessions on this device.
    pub sessions: Arc<gtm_node::access::sessions::Sessions>,
    /// TLS is on: device-to-device calls must show a client certificate.
    pub mutual_tls: bool,
    /// The client of the other devices' APIs (remote previews): the
    /// cluster's trust anchors and, with TLS, this device's certificate.
    pub peer_http: reqwest::Client,
    /// The device's workers and their states.
    pub workers: Arc<gtm_node::workers::Workers>,
    /// The configuration checks of requests, for `/metrics`.
    pub validations: Arc<Validations>,
    /// This device's alert workers.
    pub alerts: Arc<gtm_alerts::Alerts>,
    /// The `transfer-in` worker's state (docs/transfer.md, "Transfer in").
    pub transfer_in: Arc<gtm_node::workers::transfer_in::TransferIn>,
}

/// Configuration checks run for requests (validate, apply, dry runs) on
/// the blocking pool: how many run now, and how many had their client go
/// away before they ended (each of those stops at its next piece,
/// section or record: docs/api.md, "Metrics").
#[derive(Debug, Default)]
pub struct Validations {
    running: AtomicU64,
    cancelled: AtomicU64,
}

impl Validations {
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    pub fn cancelled(&self) -> u64 {
        self.cancelled.load(Ordering::Relaxed)
    }
}

impl ApiState {
    /// The cluster's accounts as this device applied them.
    pub async fn accounts(&self) -> gtm_node::access::accounts::Accounts {
        gtm_node::access::accounts::Accounts::of(&*self.replication.state().await)
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

/// `www.Example.test.` + `a` → `www.example.test/A`, the engine's label.
pub fn record_label(name: &str, rtype: &str) -> String {
    let (rtype, view) = gtm_model::names::type_and_view(rtype);
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let rtype = rtype.to_ascii_uppercase();
    match view {
        None => format!("{name}/{rtype}"),
        Some(view) => format!("{name}/{rtype}@{view}"),
    }
}

/// Request bodies above this are refused: a configuration of a million
/// records is 60–100 MiB of TOML, and its command may be up to 128 MiB
/// (`gtm_cluster::MAX_COMMAND_BYTES`, refused with its own message).
const BODY_LIMIT: usize = 160 << 20;

/// The API's routes (`/api/v1`, `/cluster/v1`, `/health`, `/metrics`) and
/// the Raft RPC, with the JSON error layer. The console's pages are merged
/// beside it by the device (outside that layer: they answer HTML).
pub fn router(state: ApiState) -> Router {
    let (mut public, mut secret) = (Router::new(), Router::new());
    let mut by_role: Vec<(Role, Router<ApiState>)> =
        Role::ALL.into_iter().map(|r| (r, Router::new())).collect();
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
    let mut app =
        Router::new()
            .merge(public)
            .merge(secret.route_layer(middleware::from_fn_with_state(
                state.clone(),
                peer::peer_auth,
            )));
    for (role, group) in by_role {
        app = app.merge(group.route_layer(middleware::from_fn_with_state(
            (state.clone(), role),
            auth::api,
        )));
    }
    app.layer(middleware::from_fn(history::client_command_id))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state.clone())
        .merge(state.replication.rpc_router())
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(middleware::from_fn_with_state(
            state.mutual_tls,
            peer::device_certificate,
        ))
        .layer(middleware::from_fn(error::json_errors))
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

/// Runs `check` (parsing, listing the errors of or compiling a client's
/// configuration) on the blocking pool with a [`model::Cancel`] that is
/// set when this future is dropped: the request's client went away (the
/// HTTP server drops a request's future when its connection closes), so
/// nobody waits for the answer and the check stops instead of keeping a
/// core busy.
async fn checking<T: Send + 'static>(
    validations: &Arc<Validations>,
    check: impl FnOnce(&model::Cancel) -> T + Send + 'static,
) -> Result<T, ApiError> {
    /// Sets the flag when the request's future is dropped, answered or not.
    struct CancelOnDrop(model::Cancel);
    impl Drop for CancelOnDrop {
        fn drop(&mut self) {
            self.0.cancel();
        }
    }
    /// Counts a check out of `running` however it ends.
    struct Running(Arc<Validations>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.running.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let cancel = model::Cancel::new();
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    let validations = Arc::clone(validations);
    blocking(move || {
        validations.running.fetch_add(1, Ordering::Relaxed);
        let running = Running(validations);
        let out = check(&cancel);
        if cancel.is_cancelled() {
            running.0.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        out
    })
    .await
}

/// The answer to a client's configuration that did not check out.
fn refused(e: model::CheckError) -> ApiError {
    match e {
        model::CheckError::Invalid(errors) => ApiError::invalid(errors),
        // Nobody reads it: the request is gone.
        model::CheckError::Cancelled(c) => ApiError::internal(c),
    }
}

/// Refuses a write while the store cannot be written (full or read-only
/// disk): nothing would be half-applied, and the operator learns why.
fn writable(state: &ApiState) -> Result<(), ApiError> {
    if state.replication.clustered()
        && let Some(why) = state.replication.fault()
    {
        return Err(gtm_node::replication::ApplyError::RaftFailed(why).into());
    }
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

impl ApiState {
    /// What judges an operator action on every device.
    pub(crate) fn judge(&self) -> gtm_node::judge::Judge {
        gtm_node::judge::Judge {
            engine: self.engine.clone(),
            peers: self.peers.clone(),
            replication: self.replication.clone(),
            http: self.peer_http.clone(),
        }
    }
}

fn not_found(what: String) -> ApiError {
    ApiError::new(ErrorKind::NotFound, what)
}
