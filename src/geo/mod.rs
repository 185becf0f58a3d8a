//! GeoIP: where a client is, as GeoDNS sees it (spec §3, seed 002).
//!
//! A country database in MaxMind's `.mmdb` format (DB-IP Country Lite or
//! GeoLite2 Country layout) read with `maxminddb`. Without a database, or
//! for private addresses, a client has no place and gets the default
//! records.

use std::{net::IpAddr, path::Path};

use serde::Deserialize;

use crate::model::place::{Continent, Country, Place};

#[derive(Debug, thiserror::Error)]
pub enum GeoError {
    #[error("cannot read GeoIP database {path}: {source}")]
    Open {
        path: String,
        source: maxminddb::MaxMindDbError,
    },
    #[error("{path} is not a country database: {why}")]
    NotCountry { path: String, why: String },
}

/// Where an address is, and how wide the network it was placed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub place: Place,
    /// Prefix length of the database network holding the address; the ECS
    /// scope of an answer that depended on place. 0 when unplaced.
    pub prefix: u8,
    /// Why there is no place, if there is none.
    pub unplaced: Option<&'static str>,
}

/// An open country database, or none.
#[derive(Debug, Default)]
pub struct Geo {
    reader: Option<maxminddb::Reader<Vec<u8>>>,
    description: String,
}

#[derive(Deserialize)]
struct CountryRecord<'a> {
    #[serde(borrow)]
    country: Option<Code<'a>>,
    #[serde(borrow)]
    registered_country: Option<Code<'a>>,
    #[serde(borrow)]
    continent: Option<ContinentCode<'a>>,
}

#[derive(Deserialize)]
struct Code<'a> {
    iso_code: Option<&'a str>,
}

#[derive(Deserialize)]
struct ContinentCode<'a> {
    code: Option<&'a str>,
}

impl Geo {
    /// No database: every client has no place.
    pub fn none() -> Self {
        Self::default()
    }

    /// Opens and checks a database: it must decode as a country database.
    pub fn open(path: &Path) -> Result<Self, GeoError> {
        let shown = path.display().to_string();
        let reader = maxminddb::Reader::open_readfile(path).map_err(|source| GeoError::Open {
            path: shown.clone(),
            source,
        })?;
        let meta = reader.metadata();
        let description = format!(
            "{} (IPv{}, built {})",
            meta.database_type, meta.ip_version, meta.build_epoch
        );
        let kind = meta.database_type.to_ascii_lowercase();
        if !(kind.contains("country") || kind.contains("city")) {
            return Err(GeoError::NotCountry {
                path: shown,
                why: format!("its type is \"{}\"", meta.database_type),
            });
        }
        // Decode one lookup so a corrupt data section is found now, not per query.
        let probe: IpAddr = if meta.ip_version == 6 {
            "2001:4860::1"
        } else {
            "8.8.8.8"
        }
        .parse()
        .expect("literal address");
        reader
            .lookup(probe)
            .and_then(|r| r.decode::<CountryRecord>())
            .map_err(|e| GeoError::NotCountry {
                path: shown.clone(),
                why: e.to_string(),
            })?;
        Ok(Self {
            reader: Some(reader),
            description,
        })
    }

    pub fn is_loaded(&self) -> bool {
        self.reader.is_some()
    }

    /// `type (IPv6, built EPOCH)`, or "none".
    pub fn description(&self) -> &str {
        if self.reader.is_some() {
            &self.description
        } else {
            "none"
        }
    }

    /// Places an address. Never fails: anything unknown is no place.
    pub fn locate(&self, ip: IpAddr) -> Located {
        let unplaced = |why| Located {
            place: Place::default(),
            prefix: 0,
            unplaced: Some(why),
        };
        if is_private(ip) {
            return unplaced("private address");
        }
        let Some(reader) = &self.reader else {
            return unplaced("no GeoIP database");
        };
        let Ok(result) = reader.lookup(ip) else {
            return unplaced("lookup failed");
        };
        let prefix = result.network().map(|n| n.prefix()).unwrap_or(0);
        let record = match result.decode::<CountryRecord>() {
            Ok(Some(r)) => r,
            _ => {
                return Located {
                    place: Place::default(),
                    prefix,
                    unplaced: Some("not in the database"),
                };
            }
        };
        let country = record
            .country
            .or(record.registered_country)
            .and_then(|c| c.iso_code)
            .and_then(Country::parse);
        let continent = record
            .continent
            .and_then(|c| c.code)
            .and_then(Continent::parse);
        Located {
            place: Place { country, continent },
            prefix,
            unplaced: None,
        }
    }
}

/// Addresses no database can place: RFC 1918, loopback, link-local, CGNAT,
/// unique-local and the like.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (o[0] == 100 && (o[1] & 0xC0) == 64)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xFE00) == 0xFC00
                || (first & 0xFFC0) == 0xFE80
        }
    }
}
