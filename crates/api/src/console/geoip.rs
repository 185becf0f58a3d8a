//! The GeoIP card (docs/console.md): the country (or City) and ASN
//! databases each device of the cluster answers with (this device's, and each peer's as its last
//! report said; a warning when they differ), a look-up of an address
//! as this device's DNS path places it (the API's own function), and
//! changing this device's database: **Download now** from the configured
//! source (operators), **Import** of an uploaded `.mmdb` (admins), each the
//! API's own handler; and the `[geoip]` refresh (`update`, monthly or
//! off) switched by admins through the configuration API, dry run first.

use std::net::IpAddr;

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Query, State},
    http::{HeaderMap, header},
    response::{IntoResponse, Response},
};
use maud::html;
use serde::Deserialize;

use super::layout::{self, csrf_field};
use crate::ApiState;
use gtm_model::config::{Geoip, GeoipUpdate};
use gtm_node::access::{Principal, Role};

/// What the last action did.
enum Outcome {
    Done(String),
    Failed(String),
    /// The dry run of switching the refresh: the changes, the version.
    UpdatePreview {
        monthly: bool,
        version: u64,
        changes: Vec<String>,
    },
}

#[derive(Debug, Default, Deserialize)]
pub struct LookupQuery {
    #[serde(default)]
    pub ip: String,
}

pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<LookupQuery>,
) -> Response {
    render(&state, &who, &q.ip, None)
}

/// The database a form names (`kind=asn`, else the country or City one).
fn kind_of(text: &str) -> crate::geoip::KindQuery {
    crate::geoip::KindQuery {
        kind: Some(if text.trim() == "asn" {
            gtm_geo::Kind::Asn
        } else {
            gtm_geo::Kind::Place
        }),
    }
}

/// Download now, from the configured source (`POST /api/v1/geoip/download`).
pub async fn download(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let kind = form_urlencoded::parse(&form)
        .find(|(k, _)| k == "kind")
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    let asn = kind == "asn";
    let outcome = match crate::geoip::download(State(state.clone()), Query(kind_of(&kind))).await {
        Ok(Json(status)) => {
            let db = if asn {
                status.asn_database
            } else {
                status.database
            };
            Outcome::Done(match db {
                Some(db) => format!(
                    "downloaded: this device answers with {} built {}",
                    db.name, db.built
                ),
                None => "downloaded".to_string(),
            })
        }
        Err(e) => Outcome::Failed(e.message),
    };
    render(&state, &who, "", Some(outcome))
}

/// Import an uploaded database (`PUT /api/v1/geoip`): the `file` part of a
/// `multipart/form-data` form, or the body itself of any other type.
pub async fn import(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut kind = String::new();
    let file = match crate::auth::form_boundary(content_type) {
        None => Ok(body),
        Some(Err(e)) => Err(e),
        Some(Ok(boundary)) => {
            if let Ok(Some(k)) = crate::auth::form_field(body.clone(), &boundary, "kind").await {
                kind = String::from_utf8_lossy(&k).into_owned();
            }
            match crate::auth::form_field(body, &boundary, "file").await {
                Ok(Some(file)) => Ok(file),
                Ok(None) => Err("the form has no file (field \"file\")".to_string()),
                Err(e) => Err(format!("the uploaded form: {e}")),
            }
        }
    };
    let outcome = match file {
        Err(why) => Outcome::Failed(why),
        Ok(file) if file.is_empty() => Outcome::Failed("choose a .mmdb file to import".into()),
        Ok(file) => {
            match crate::geoip::import(State(state.clone()), Query(kind_of(&kind)), file).await {
                Ok(Json(_)) => Outcome::Done(format!(
                    "imported: this device answers with {}",
                    state.engine.geoip().description()
                )),
                Err(e) => Outcome::Failed(e.message),
            }
        }
    };
    render(&state, &who, "", Some(outcome))
}

/// Switch the `[geoip]` refresh (`update`): a dry run of the configuration
/// with it switched (`PUT /api/v1/config?dry_run=true`), then the apply
/// with `?version=` of the dry run, refused if the configuration changed
/// meanwhile.
pub async fn update(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let field = |name: &str| {
        form_urlencoded::parse(&form)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let monthly = match field("update").as_str() {
        "monthly" => true,
        "off" => false,
        other => {
            let why = format!("update: \"{other}\" is neither monthly nor off");
            return render(&state, &who, "", Some(Outcome::Failed(why)));
        }
    };
    let apply = field("action") == "apply";
    let outcome = match switched(&state, &who, monthly, apply, &field("version")).await {
        Ok(result) if apply => Outcome::Done(format!(
            "the GeoIP refresh is now {}: version {}",
            if monthly { "monthly" } else { "off" },
            result.version
        )),
        Ok(result) => Outcome::UpdatePreview {
            monthly,
            version: result.version,
            changes: result.changes,
        },
        Err(why) => Outcome::Failed(why),
    };
    render(&state, &who, "", Some(outcome))
}

/// The configuration applied here with the refresh switched, through the
/// configuration API: a dry run, or applied if the configuration is still
/// at `version` (the dry run's: a change made meanwhile is refused, not
/// overwritten).
async fn switched(
    state: &ApiState,
    who: &Principal,
    monthly: bool,
    apply: bool,
    version: &str,
) -> Result<crate::ApplyResult, String> {
    let version = match version {
        "" => None,
        v => Some(
            v.parse::<u64>()
                .map_err(|_| format!("version: \"{v}\" is not a version number"))?,
        ),
    };
    let config = state.engine.config();
    let text = tokio::task::spawn_blocking(move || {
        let mut config = gtm_model::Config::clone(&config);
        let geoip = config.geoip.get_or_insert_with(Geoip::default);
        geoip.update = Some(if monthly {
            GeoipUpdate::Monthly
        } else {
            GeoipUpdate::Off
        });
        toml::to_string_pretty(&config)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("the configuration does not serialize: {e}"))?;
    crate::config::apply_config(
        State(state.clone()),
        Extension(who.clone()),
        Query(crate::config::ApplyOptions {
            dry_run: !apply,
            allow_empty: false,
            version,
            force: false,
        }),
        Bytes::from(text),
    )
    .await
    .map(|Json(r)| r)
    .map_err(|e| match e.errors.is_empty() {
        true => e.message,
        false => format!("{}: {}", e.message, e.errors.join("; ")),
    })
}

fn render(state: &ApiState, who: &Principal, ip: &str, outcome: Option<Outcome>) -> Response {
    let geo = state.engine.geoip();
    let here = geo.description().to_string();
    let mut databases = vec![(state.engine.device().to_string(), Some(here.clone()))];
    databases.extend(
        state
            .peers
            .devices(&state.replication)
            .into_iter()
            .map(|p| (p.device, p.geoip)),
    );
    let differ = databases
        .iter()
        .any(|(_, db)| db.as_ref().is_some_and(|d| *d != here));
    let ip = ip.trim();
    let lookup = (!ip.is_empty()).then(|| {
        ip.parse::<IpAddr>()
            .map(|ip| crate::lookup_in(&geo, ip))
            .map_err(|_| format!("\"{ip}\" is not an IP address"))
    });
    let status = crate::GeoipStatus::of(&state.engine);
    let configured = state.engine.with_config(|c| c.geoip.is_some());
    let body = html! {
        h1 { "GeoIP" }
        h2 { "This device's database" }
        dl.facts #geoip-here {
            @match &status.database {
                Some(db) => {
                    dt { "Name" } dd #geoip-name { (db.name) " (IPv" (db.ip_version) ")" }
                    dt { "Built" } dd #geoip-built { (db.built) }
                    dt { "Age" } dd { (status.age_days.unwrap_or(0)) " days" }
                    dt { "Networks" } dd { (db.networks) }
                    dt { "From" } dd #geoip-from { (db.source) }
                },
                None => { dt { "Name" } dd #geoip-name { "none: every client gets the default records" } },
            }
            dt { "Source" } dd #geoip-source {
                (status.source.as_deref().unwrap_or("none"))
                @if !configured { " (not configured: no device downloads without a [geoip] table)" }
            }
            dt { "Update" } dd #geoip-update { (if status.monthly { "monthly, by each device" } else { "off" }) }
            dt { "ASN database" } dd #geoip-asn {
                @match &status.asn_database {
                    Some(db) => { (db.name) " (IPv" (db.ip_version) "), built " (db.built) ", " (db.networks) " networks, from " (db.source) },
                    None => "none: asn: topology rules hold no client",
                }
            }
            dt { "ASN source" } dd #geoip-asn-source { (status.asn_source.as_deref().unwrap_or("none")) }
        }
        @match &outcome {
            None => {},
            Some(Outcome::Done(text)) => p.notice role="status" #geoip-done { (text) },
            Some(Outcome::Failed(why)) => p.error role="alert" #geoip-error { (why) },
            Some(Outcome::UpdatePreview { monthly, version, changes }) => {
                div.notice role="status" #update-preview {
                    p { "Dry run: switching the refresh " (if *monthly { "to monthly" } else { "off" }) " would make these changes to version " (version) " (nothing is applied yet):" }
                    @if changes.is_empty() { p { "no changes" } }
                    pre.changes tabindex="0" { @for c in changes { (c) "\n" } }
                }
                form method="post" action="/ui/geoip/update" {
                    (csrf_field(who))
                    input type="hidden" name="update" value=(if *monthly { "monthly" } else { "off" });
                    input type="hidden" name="version" value=(version);
                    div.actions {
                        button type="submit" name="action" value="apply" #update-apply { "Apply" }
                        " "
                        a href="/ui/geoip" { "Cancel" }
                    }
                }
            },
        }
        @if who.allows(Role::Operator) {
            h2 { "Change this device's database" }
            h3 { "Download" }
            form method="post" action="/ui/geoip/download" {
                (csrf_field(who))
                @if configured {
                    p { "From the configured source, on this device." }
                } @else {
                    p { "The configuration has no [geoip] table, so the download is refused: add one (below, or in the configuration), or import a file." }
                }
                div.field {
                    label for="g-download-kind" { "Database" }
                    select #g-download-kind name="kind" {
                        option value="place" { "Country or City" }
                        option value="asn" { "ASN" }
                    }
                }
                div.actions { button type="submit" #geoip-download { "Download now" } }
            }
        }
        @if who.allows(Role::Admin) {
            h3 { "Import a file" }
            form.filters method="post" action="/ui/geoip/import" enctype="multipart/form-data" {
                (csrf_field(who))
                div.field {
                    label for="g-kind" { "Database" }
                    select #g-kind name="kind" {
                        option value="place" { "Country or City" }
                        option value="asn" { "ASN" }
                    }
                }
                div.field {
                    label for="g-file" { "Import a database (.mmdb, checked whole before it is used)" }
                    input #g-file name="file" type="file" accept=".mmdb";
                }
                div.actions { button type="submit" #geoip-import { "Import" } }
            }
            h3 { "Refresh" }
            form.filters method="post" action="/ui/geoip/update" {
                (csrf_field(who))
                div.field {
                    label for="g-update" { "Refresh by each device ([geoip] update, for the whole cluster)" }
                    select #g-update name="update" {
                        option value="monthly" selected[status.monthly] { "monthly" }
                        option value="off" selected[!status.monthly] { "off" }
                    }
                }
                div.actions { button type="submit" name="action" value="preview" #update-preview-button { "Preview" } }
            }
        }
        h2 { "Databases" }
        @if differ {
            p.error role="alert" #geoip-differ {
                "The devices of this cluster answer with different GeoIP databases: \
                 the same client may get different answers from each."
            }
        }
        table.geoip {
            caption { "The databases each device answers with" }
            thead { tr { th scope="col" { "Device" } th scope="col" { "Database" } } }
            tbody {
                @for (device, db) in &databases {
                    tr data-device=(device) {
                        th scope="row" { (device) }
                        td { (db.as_deref().unwrap_or("not reported yet")) }
                    }
                }
            }
        }
        h2 { "Look up an address" }
        form.filters method="get" action="/ui/geoip" {
            div.field {
                label for="g-ip" { "Address" }
                input #g-ip name="ip" type="text" value=(ip) placeholder="81.2.69.160";
            }
            div.actions { button type="submit" #lookup { "Look up" } }
        }
        @match &lookup {
            None => {},
            Some(Err(why)) => p.error role="alert" { (why) },
            Some(Ok(found)) => dl.facts #located {
                dt { "Address" } dd { (found.ip) }
                dt { "Country" } dd.country { (found.country.as_deref().unwrap_or("-")) }
                dt { "Continent" } dd.continent { (found.continent.as_deref().unwrap_or("-")) }
                @if let Some(d) = &found.subdivision {
                    dt { "Subdivision" } dd.subdivision { (d) }
                }
                dt { "Network" } dd { (found.network) }
                dt { "Database" } dd { (found.database) }
                @if let Some(note) = &found.note { dt { "Note" } dd { (note) } }
            },
        }
    };
    layout::page("GeoIP", state.engine.device(), Some(who), body).into_response()
}
