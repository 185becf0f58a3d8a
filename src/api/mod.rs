//! The device's REST API (JSON, under `/api/v1`), served with axum.
//!
//! Every route but `/health` needs `Authorization: Bearer <token>`. Errors
//! are JSON with an HTTP status and a stable label ([`ApiError`]).

use std::{net::IpAddr, path::PathBuf, sync::Arc};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Path, Query, Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post, put},
};
use serde::{Deserialize, Serialize};

use crate::{
    engine::{Engine, Event, RecordStatus, diff},
    geo::Geo,
    model::{self, ConfigErrors},
};
use gtm_cluster::{Store, StoredConfig};

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub engine: Arc<Engine>,
    pub store: Store,
    pub data_dir: PathBuf,
    pub token: Arc<str>,
}

/// An API error: status, stable label, and what to fix.
#[derive(Debug, Serialize, Deserialize)]
pub struct ApiError {
    pub error: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    #[serde(skip)]
    status: u16,
}

impl ApiError {
    fn new(status: StatusCode, label: &str, message: impl Into<String>) -> Self {
        Self {
            error: label.into(),
            message: message.into(),
            errors: Vec::new(),
            status: status.as_u16(),
        }
    }

    fn invalid(errors: ConfigErrors) -> Self {
        let mut e = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-config",
            format!(
                "the configuration has {} error(s); nothing was applied",
                errors.0.len()
            ),
        );
        e.errors = errors.0.iter().map(ToString::to_string).collect();
        e
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self)).into_response()
    }
}

/// The result of an apply or a dry run.
#[derive(Debug, Serialize, Deserialize)]
pub struct ApplyResult {
    pub applied: bool,
    pub version: u64,
    pub changes: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct StatusReport {
    pub device: String,
    pub version: u64,
    pub records: Vec<RecordStatus>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct GeoLookup {
    pub ip: IpAddr,
    pub country: Option<String>,
    pub continent: Option<String>,
    pub prefix: u8,
    pub database: String,
    pub note: Option<String>,
}

#[derive(Debug, Deserialize)]
struct DryRun {
    #[serde(default)]
    dry_run: bool,
}

/// Request bodies above this are refused (a configuration of 100,000
/// records is about 10 MiB of TOML; GeoIP country files are under 10 MiB).
const BODY_LIMIT: usize = 64 << 20;

pub fn router(state: ApiState) -> Router {
    let api = Router::new()
        .route("/config", get(export_config).put(apply_config))
        .route("/config/validate", post(validate_config))
        .route("/status", get(status))
        .route("/events", get(events))
        .route("/geoip/lookup/{ip}", get(geoip_lookup))
        .route("/geoip", put(geoip_import))
        .layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/health", get(|| async { "ok\n" }))
        .nest("/api/v1", api)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

async fn auth(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(t) if constant_time_eq(t.as_bytes(), state.token.as_bytes()) => next.run(request).await,
        Some(_) => ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "the bearer token is wrong").into_response(),
        None => ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "send Authorization: Bearer <token> (the token is in the data directory's api-token file)").into_response(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn export_config(State(state): State<ApiState>) -> Result<String, ApiError> {
    toml::to_string_pretty(&state.engine.config())
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))
}

fn parse_body(body: &Bytes) -> Result<(String, model::Config), ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad-request",
                "the configuration must be UTF-8 TOML text",
            )
        })?
        .to_string();
    let config = model::parse(&text).map_err(ApiError::invalid)?;
    model::compile(&config).map_err(ApiError::invalid)?;
    Ok((text, config))
}

async fn validate_config(body: Bytes) -> Result<Json<ApplyResult>, ApiError> {
    parse_body(&body)?;
    Ok(Json(ApplyResult {
        applied: false,
        version: 0,
        changes: Vec::new(),
    }))
}

async fn apply_config(
    State(state): State<ApiState>,
    Query(q): Query<DryRun>,
    body: Bytes,
) -> Result<Json<ApplyResult>, ApiError> {
    let (text, config) = parse_body(&body)?;
    let engine = state.engine.clone();
    let changes = diff(&engine.config(), &config);
    let current = engine.version();
    if q.dry_run {
        return Ok(Json(ApplyResult {
            applied: false,
            version: current,
            changes,
        }));
    }
    let version = current + 1;
    let store = state.store.clone();
    // Durable first: a crash after this keeps the new configuration.
    tokio::task::spawn_blocking(move || {
        store.save_config(&StoredConfig { version, text })?;
        engine
            .apply(version, config)
            .map_err(|e| gtm_cluster::StoreError::Corrupt {
                what: "configuration",
                why: e.to_string(),
            })
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
    .map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store-failed",
            e.to_string(),
        )
    })?;
    Ok(Json(ApplyResult {
        applied: true,
        version,
        changes,
    }))
}

async fn status(State(state): State<ApiState>) -> Json<StatusReport> {
    Json(StatusReport {
        device: state.engine.device().to_string(),
        version: state.engine.version(),
        records: state.engine.status(),
    })
}

async fn events(State(state): State<ApiState>) -> Json<Vec<Event>> {
    Json(state.engine.events())
}

async fn geoip_lookup(
    State(state): State<ApiState>,
    Path(ip): Path<String>,
) -> Result<Json<GeoLookup>, ApiError> {
    let ip: IpAddr = ip.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            format!("\"{ip}\" is not an IP address"),
        )
    })?;
    Ok(Json(lookup_in(&state.engine.dns().geo.load(), ip)))
}

/// Where `ip` is as the DNS path sees it.
pub fn lookup_in(geo: &Geo, ip: IpAddr) -> GeoLookup {
    let located = geo.locate(ip);
    GeoLookup {
        ip,
        country: located.place.country.map(|c| c.to_string()),
        continent: located.place.continent.map(|c| c.to_string()),
        prefix: located.prefix,
        database: geo.description().to_string(),
        note: located
            .unplaced
            .map(|why| format!("{why}: this client gets the default records")),
    }
}

async fn geoip_import(
    State(state): State<ApiState>,
    body: Bytes,
) -> Result<Json<GeoLookup>, ApiError> {
    let dir = state.data_dir.clone();
    let geo = tokio::task::spawn_blocking(move || install_geoip(&dir, &body))
        .await
        .map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
        })??;
    let probe = lookup_in(&geo, "8.8.8.8".parse().expect("literal"));
    state.engine.dns().geo.store(Arc::new(geo));
    Ok(Json(probe))
}

/// Checks a database in a temporary file and only then moves it in place,
/// so a bad file never replaces a good one.
fn install_geoip(dir: &std::path::Path, bytes: &[u8]) -> Result<Geo, ApiError> {
    let tmp = dir.join("geoip.mmdb.new");
    let fail =
        |e: std::io::Error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "io", e.to_string());
    std::fs::write(&tmp, bytes).map_err(fail)?;
    match Geo::open(&tmp) {
        Ok(geo) => {
            std::fs::rename(&tmp, dir.join("geoip.mmdb")).map_err(fail)?;
            Ok(geo)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-geoip",
                format!("{e}; the current database stays"),
            ))
        }
    }
}
