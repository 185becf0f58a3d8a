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

/// Addresses no database can place, and answers for them would be wrong
/// for every other client: RFC 1918, loopback, link-local, CGNAT,
/// unique-local, "this network" 0.0.0.0/8, IETF protocol assignments
/// 192.0.0.0/24, benchmarking 198.18.0.0/15, multicast (224.0.0.0/4,
/// ff00::/8), reserved 240.0.0.0/4 (with broadcast) and `::`. An IPv6 form
/// of an IPv4 address (mapped, compatible, NAT64, see
/// [`crate::addr::embedded_v4`]) is judged by its IPv4 address.
///
/// The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
/// 2001:db8::/32) are left routable on purpose: tests and examples use them
/// as ordinary client addresses.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xC0) == 64)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] & 0xFE) == 18)
                || o[0] >= 224
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = crate::addr::embedded_v4(v6) {
                return is_private(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xFE00) == 0xFC00
                || (first & 0xFFC0) == 0xFE80
                || (first & 0xFF00) == 0xFF00
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_private;

    fn private(text: &str) -> bool {
        is_private(text.parse().expect("test literal"))
    }

    #[test]
    fn unroutable_ranges_are_private() {
        for a in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "192.0.0.8",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "ff0e::101",
            "::ffff:10.0.0.1",
            "::ffff:198.18.0.1",
            "::10.0.0.1",
            "::127.0.0.1",
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::c0a8:0101",
            "64:ff9b::e000:1",
        ] {
            assert!(private(a), "{a} must count as private or unroutable");
        }
    }

    #[test]
    fn routable_and_documentation_ranges_are_not_private() {
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.0",
            "192.0.1.255",
            "192.0.2.1",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.100.7",
            "203.0.113.9",
            "223.255.255.255",
            "2001:db8::1",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "::8.8.8.8",
            "64:ff9b::808:808",
            "64:ff9b:1::a00:1",
        ] {
            assert!(!private(a), "{a} is routable");
        }
    }
}
