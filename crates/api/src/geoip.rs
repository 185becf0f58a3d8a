//! The GeoIP routes: where an address is, what databases each device
//! answers with (a country or City one and an ASN one), importing a file
//! and downloading from the configured source. The databases are per
//! device (docs/operations.md, GeoIP); the sources are replicated
//! configuration (`[geoip]`).

use gtm_engine::Severity;
use std::net::IpAddr;

use axum::{
    Json,
    body::Bytes,
    extract::{Path, Query, State},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::{ApiState, writable};

use gtm_engine::{Engine, EventKind};
use gtm_geo::{Geo, GeoInfo, Kind, install, update};
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
    /// The autonomous system of the address's network, from an ASN
    /// database, and that network (`asn_network`).
    #[serde(default)]
    pub asn: Option<u32>,
    #[serde(default)]
    pub asn_network: Option<String>,
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
    /// The ASN database this device answers `asn:` rules with; `None`
    /// without one.
    #[serde(default)]
    pub asn_database: Option<GeoInfo>,
    /// Whole days since it was built.
    #[serde(default)]
    pub asn_age_days: Option<u64>,
    /// The configured ASN source template (`[geoip] asn_source`); `null`
    /// when none is, and no device downloads one.
    #[serde(default)]
    pub asn_source: Option<String>,
}

/// Which database an import or a download is of: `kind=asn` for the ASN
/// database, else the country or City one.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct KindQuery {
    #[serde(default)]
    pub(crate) kind: Option<Kind>,
}

impl GeoipStatus {
    pub fn of(engine: &Engine) -> Self {
        let geo = engine.geoip();
        let database = geo.info().cloned();
        let asn_database = geo.database(Kind::Asn).map(|d| d.info().clone());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let age = |d: &Option<GeoInfo>| {
            d.as_ref()
                .map(|d| now.saturating_sub(d.build_epoch) / 86_400)
        };
        let (source, monthly, asn_source) = engine.with_config(|c| {
            (
                c.geoip.is_some().then(|| c.geoip_source().to_string()),
                c.geoip_monthly(),
                c.asn_source().map(str::to_string),
            )
        });
        Self {
            age_days: age(&database),
            database,
            source,
            monthly,
            asn_age_days: age(&asn_database),
            asn_database,
            asn_source,
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
    let asn = geo.asn(ip);
    GeoLookup {
        ip,
        country: located.place.country.map(|c| c.to_string()),
        continent: located.place.continent.map(|c| c.to_string()),
        subdivision: located.place.subdivision.map(|d| d.to_string()),
        latitude: located.place.location.map(|l| l.latitude()),
        longitude: located.place.location.map(|l| l.longitude()),
        asn: asn.0,
        asn_network: asn
            .0
            .map(|_| gtm_model::node::Network::of(ip, asn.1).to_string()),
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

/// `PUT /api/v1/geoip[?kind=asn]`: checks the uploaded database whole and
/// installs it.
pub(crate) async fn import(
    State(state): State<ApiState>,
    Query(q): Query<KindQuery>,
    body: Bytes,
) -> Result<Json<GeoLookup>, ApiError> {
    writable(&state)?;
    let kind = q.kind.unwrap_or(Kind::Place);
    let dir = state.data_dir.clone();
    let size = body.len();
    let installed = tokio::task::spawn_blocking(move || {
        install::install(kind, &dir, body.to_vec(), "the uploaded file", "import")
    })
    .await
    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?;
    let db = match installed {
        Ok(db) => db,
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
            db.description()
        ),
    );
    state.engine.install_geoip(db);
    Ok(Json(lookup_in(
        &state.engine.geoip(),
        std::net::IpAddr::from([8, 8, 8, 8]),
    )))
}

/// `POST /api/v1/geoip/download[?kind=asn]`: this device downloads its
/// database from the configured source now.
pub(crate) async fn download(
    State(state): State<ApiState>,
    Query(q): Query<KindQuery>,
) -> Result<Json<GeoipStatus>, ApiError> {
    writable(&state)?;
    let kind = q.kind.unwrap_or(Kind::Place);
    // Downloads are configured, like everything the cluster does: without
    // a `[geoip]` table a device never reaches out, by itself or on request.
    let template = state
        .engine
        .with_config(|c| match kind {
            Kind::Place => c.geoip.is_some().then(|| c.geoip_source().to_string()),
            Kind::Asn => c.asn_source().map(str::to_string),
        })
        .ok_or_else(|| {
            ApiError::new(
                ErrorKind::Conflict,
                match kind {
                    Kind::Place => "the configuration has no [geoip] table, so no device downloads a GeoIP database: \
                 add one (`[geoip]` alone means DB-IP's IP to Country Lite, updated monthly), or import a file",
                    Kind::Asn => "the configuration has no [geoip] asn_source, so no device downloads an ASN database: \
                 set one (e.g. DB-IP's https://download.db-ip.com/free/dbip-asn-lite-{year}-{month}.mmdb.gz), or import a file with --asn",
                },
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
        kind,
        &state.data_dir,
        &template,
        now,
        |db| engine.install_geoip(db),
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
