//! The GeoIP routes: where an address is, what database each device
//! answers with, importing a file and downloading from the configured
//! source. The database is per device (docs/operations.md, GeoIP); the
//! source is replicated configuration (`[geoip]`).

use gtm_engine::Severity;
use std::net::IpAddr;

use axum::{
    Json,
    body::Bytes,
    extract::{Path, State},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, writable};

use gtm_engine::{Engine, EventKind};
use gtm_geo::{Geo, GeoInfo, install, update};
use gtm_model::error::ErrorKind;

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GeoLookup {
    pub ip: IpAddr,
    pub country: Option<String>,
    pub continent: Option<String>,
    /// The ISO 3166-2 subdivision (`US-CA`), from a City database.
    #[serde(default)]
    pub subdivision: Option<String>,
    /// Decimal degrees north and east, from a City database's location
    /// (what nearest by distance measures from).
    #[serde(default)]
    pub latitude: Option<f64>,
    #[serde(default)]
    pub longitude: Option<f64>,
    /// The network of the database's entry that holds the address, e.g.
    /// `81.2.69.0/24`.
    pub network: String,
    pub prefix: u8,
    pub database: String,
    pub note: Option<String>,
}

/// A device's GeoIP database and where the cluster gets it from.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GeoipStatus {
    /// The database this device answers with; `None` without one.
    pub database: Option<GeoInfo>,
    /// Whole days since it was built.
    pub age_days: Option<u64>,
    /// The configured source template (`[geoip] source`, or the default
    /// one in a `[geoip]` table without it); `null` without a `[geoip]`
    /// table, when no device downloads a database.
    #[serde(default)]
    pub source: Option<String>,
    /// Whether devices refresh it monthly by themselves.
    pub monthly: bool,
}

impl GeoipStatus {
    pub fn of(engine: &Engine) -> Self {
        let geo = engine.geoip();
        let database = geo.info().cloned();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let age_days = database
            .as_ref()
            .map(|d| now.saturating_sub(d.build_epoch) / 86_400);
        let (source, monthly) = engine.with_config(|c| {
            (
                c.geoip.is_some().then(|| c.geoip_source().to_string()),
                c.geoip_monthly(),
            )
        });
        Self {
            database,
            age_days,
            source,
            monthly,
        }
    }
}

pub(super) async fn lookup(
    State(state): State<ApiState>,
    Path(ip): Path<String>,
) -> Result<Json<GeoLookup>, ApiError> {
    let ip: IpAddr = ip.parse().map_err(|_| {
        ApiError::new(
            ErrorKind::BadRequest,
            format!("\"{ip}\" is not an IP address"),
        )
    })?;
    Ok(Json(lookup_in(&state.engine.geoip(), ip)))
}

/// Where `ip` is as the DNS path sees it.
pub fn lookup_in(geo: &Geo, ip: IpAddr) -> GeoLookup {
    let located = geo.locate(ip);
    GeoLookup {
        ip,
        country: located.place.country.map(|c| c.to_string()),
        continent: located.place.continent.map(|c| c.to_string()),
        subdivision: located.place.subdivision.map(|d| d.to_string()),
        latitude: located.place.location.map(|l| l.latitude()),
        longitude: located.place.location.map(|l| l.longitude()),
        network: gtm_model::node::Network::of(ip, located.prefix).to_string(),
        prefix: located.prefix,
        database: geo.description().to_string(),
        note: located
            .unplaced
            .map(|why| format!("{why}: this client gets the default records")),
    }
}

/// `GET /api/v1/geoip`: this device's database and the configured source.
pub(super) async fn show(State(state): State<ApiState>) -> Json<GeoipStatus> {
    Json(GeoipStatus::of(&state.engine))
}

fn log(engine: &Engine, severity: Severity, text: String) {
    engine.record_event(EventKind::Geoip, severity, "geoip".to_string(), text);
}

/// `PUT /api/v1/geoip`: checks the uploaded database whole and installs it.
pub(crate) async fn import(
    State(state): State<ApiState>,
    body: Bytes,
) -> Result<Json<GeoLookup>, ApiError> {
    writable(&state)?;
    let dir = state.data_dir.clone();
    let size = body.len();
    let installed = tokio::task::spawn_blocking(move || {
        install::install(&dir, body.to_vec(), "the uploaded file", "import")
    })
    .await
    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
    let geo = match installed {
        Ok(geo) => geo,
        Err(e) => {
            log(
                &state.engine,
                Severity::Warning,
                format!("refused an imported database: {e}"),
            );
            let kind = match e {
                install::InstallError::Invalid(_) => ErrorKind::InvalidGeoip,
                install::InstallError::Io { .. } => ErrorKind::Io,
            };
            return Err(ApiError::new(kind, e.to_string()));
        }
    };
    log(
        &state.engine,
        Severity::Info,
        format!(
            "imported a database ({size} bytes): now answering with {}",
            geo.description()
        ),
    );
    let probe = lookup_in(&geo, std::net::IpAddr::from([8, 8, 8, 8]));
    state.engine.install_geoip(geo);
    Ok(Json(probe))
}

/// `POST /api/v1/geoip/download`: this device downloads its database from
/// the configured source now.
pub(crate) async fn download(State(state): State<ApiState>) -> Result<Json<GeoipStatus>, ApiError> {
    writable(&state)?;
    // Downloads are configured, like everything the cluster does: without
    // a `[geoip]` table a device never reaches out, by itself or on request.
    let template = state
        .engine
        .with_config(|c| c.geoip.is_some().then(|| c.geoip_source().to_string()))
        .ok_or_else(|| {
            ApiError::new(
                ErrorKind::Conflict,
                "the configuration has no [geoip] table, so no device downloads a GeoIP database: \
                 add one (`[geoip]` alone means DB-IP's IP to Country Lite, updated monthly), or import a file",
            )
        })?;
    let http = gtm_geo::download::client().map_err(ApiError::internal)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let engine = state.engine.clone();
    let swapped = update::update(
        &http,
        &state.data_dir,
        &template,
        now,
        |geo| engine.install_geoip(geo),
        |severity, text| log(&engine, severity, text),
    )
    .await;
    match swapped {
        Ok(_) => Ok(Json(GeoipStatus::of(&state.engine))),
        Err(e @ update::UpdateError::Download(_)) => {
            Err(ApiError::new(ErrorKind::Unreachable, e.to_string()))
        }
        Err(e @ update::UpdateError::Refused { .. }) => {
            Err(ApiError::new(ErrorKind::InvalidGeoip, e.to_string()))
        }
    }
}
