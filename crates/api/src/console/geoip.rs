//! The GeoIP card (docs/console.md): the country database each device of
//! the cluster answers with (this device's, and each peer's as its last
//! report said; a warning when they differ), and a look-up of an address
//! as this device's DNS path places it (the API's own function).

use std::net::IpAddr;

use axum::{
    Extension,
    extract::{Query, State},
    response::{IntoResponse, Response},
};
use maud::html;
use serde::Deserialize;

use super::layout;
use crate::ApiState;
use gtm_node::access::Principal;

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
    let geo = state.engine.geoip();
    let here = geo.description().to_string();
    let mut databases = vec![(state.engine.device().to_string(), Some(here.clone()))];
    databases.extend(
        state
            .peers
            .status(&state.replication)
            .into_iter()
            .map(|p| (p.device, p.geoip)),
    );
    let differ = databases
        .iter()
        .any(|(_, db)| db.as_ref().is_some_and(|d| *d != here));
    let ip = q.ip.trim();
    let lookup = (!ip.is_empty()).then(|| {
        ip.parse::<IpAddr>()
            .map(|ip| crate::lookup_in(&geo, ip))
            .map_err(|_| format!("\"{ip}\" is not an IP address"))
    });
    let status = crate::GeoipStatus::of(&state.engine);
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
            dt { "Source" } dd #geoip-source { (status.source) }
            dt { "Update" } dd { (if status.monthly { "monthly, by each device" } else { "off" }) }
        }
        h2 { "Databases" }
        @if differ {
            p.error role="alert" #geoip-differ {
                "The devices of this cluster answer with different GeoIP databases: \
                 the same client may get different answers from each."
            }
        }
        table.geoip {
            caption { "The country database each device answers with" }
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
                dt { "Network" } dd { "/" (found.prefix) }
                dt { "Database" } dd { (found.database) }
                @if let Some(note) = &found.note { dt { "Note" } dd { (note) } }
            },
        }
    };
    layout::page("GeoIP", state.engine.device(), Some(&who), body).into_response()
}
