//! GeoIP: where a client is, as GeoDNS sees it (spec §3, seed 002), and
//! whose network it is in.
//!
//! A country or City database in MaxMind's `.mmdb` format (DB-IP Country
//! or City Lite, GeoLite2 Country or City layout) and, beside it, an ASN
//! database (DB-IP ASN Lite, GeoLite2 ASN), read with `maxminddb`. Without
//! a database, or for private addresses, a client has no place and gets
//! the default records. A database is checked whole before it is used
//! ([`Db::from_bytes`]), installed atomically by [`install`], fetched by
//! [`download`] and kept fresh by [`refresh`], each of its [`Kind`].

pub mod download;
pub mod install;
pub mod refresh;
pub mod update;

use std::{net::IpAddr, path::Path, sync::Arc};

use serde::{Deserialize, Serialize};

use gtm_model::place::{Continent, Country, Place};

#[derive(Debug, thiserror::Error)]
pub enum GeoError {
    #[error("cannot read GeoIP database {path}: {source}")]
    Open {
        path: String,
        source: maxminddb::MaxMindDbError,
    },
    #[error("{path} is not {what}: {why}")]
    WrongKind {
        path: String,
        what: &'static str,
        why: String,
    },
    #[error("{path} is damaged: {why}")]
    Damaged { path: String, why: String },
}

/// Which database a file is: where clients are, or whose network they are
/// in. A device answers with one of each at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A country database (DB-IP Country Lite, GeoLite2 Country) or a
    /// City one (subdivisions and locations too).
    Place,
    /// An ASN database (DB-IP ASN Lite, GeoLite2 ASN): the autonomous
    /// system of a network, for `asn:` topology rules.
    Asn,
}

impl Kind {
    /// `a country database`, `an ASN database`: what a refused file is not.
    pub fn article(self) -> &'static str {
        match self {
            Self::Place => "a country or city database",
            Self::Asn => "an ASN database",
        }
    }

    /// The name of its file in a data directory, without extension.
    pub fn stem(self) -> &'static str {
        match self {
            Self::Place => "geoip",
            Self::Asn => "asn",
        }
    }

    /// Whether a database of type `database_type` (its metadata) is one.
    fn accepts(self, database_type: &str) -> bool {
        let t = database_type.to_ascii_lowercase();
        match self {
            Self::Place => t.contains("country") || t.contains("city"),
            Self::Asn => t.contains("asn"),
        }
    }
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

/// What a device answers with, as status, the console and `/metrics` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GeoInfo {
    /// The database type from its metadata, e.g. `DBIP-Country-Lite`.
    pub name: String,
    /// 4 or 6.
    pub ip_version: u16,
    /// The build date (UTC), e.g. `2026-11-01`.
    pub built: String,
    /// The build time, seconds since the Unix epoch.
    pub build_epoch: u64,
    /// Networks in the database.
    pub networks: u64,
    /// First 16 hex digits of the file's SHA-256: tells two databases with
    /// the same name and date apart.
    pub sha256: String,
    /// Where it came from: a download URL, `import`, `embedded demo
    /// database` or a file path.
    pub source: String,
}

/// One open, checked database.
#[derive(Debug)]
pub struct Db {
    kind: Kind,
    reader: maxminddb::Reader<Vec<u8>>,
    info: GeoInfo,
    description: String,
}

/// The databases a device answers with: a place one and an ASN one, each
/// or both absent. Replaced whole when one of them is
/// ([`Geo::with`]), so a query reads one consistent pair.
#[derive(Debug, Default, Clone)]
pub struct Geo {
    place: Option<Arc<Db>>,
    asn: Option<Arc<Db>>,
    /// Both databases' descriptions: what peers compare.
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
    /// A City database's subdivisions, largest first: the first is the
    /// one topology rules name (`US-CA`).
    #[serde(borrow, default)]
    subdivisions: Option<FirstCode<'a>>,
    /// A City database's location of the network: for nearest by
    /// distance.
    #[serde(default)]
    location: Option<Location>,
}

#[derive(Deserialize)]
struct Location {
    latitude: Option<f64>,
    longitude: Option<f64>,
}

/// An ASN database's record (GeoLite2-ASN and DB-IP ASN Lite name the
/// number alike); the organisation's name is not read.
#[derive(Deserialize)]
struct AsnRecord {
    autonomous_system_number: Option<u32>,
}

/// The `iso_code` of a list's first element, read without collecting the
/// list (a query allocates nothing).
struct FirstCode<'a>(Option<&'a str>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstCode<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = FirstCode<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of subdivisions")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<Code<'de>>()?.and_then(|c| c.iso_code);
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(FirstCode(first))
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Code<'a> {
    iso_code: Option<&'a str>,
}

#[derive(Deserialize)]
struct ContinentCode<'a> {
    code: Option<&'a str>,
}

/// The demo's country database (generated by the test
/// `geo::the_demo_database_is_generated_here`): 81.2.69.0/24 in DE,
/// 2.2.2.0/24 in FR, 3.3.0.0/16 in the US; nothing downloaded.
pub const DEMO_DATABASE: &[u8] = include_bytes!("demo.mmdb");

/// Databases larger than this are refused (DB-IP's country file is about
/// 8 MiB, GeoLite2 Country 10 MiB, DB-IP ASN Lite about 40 MiB, DB-IP City
/// Lite about 130 MiB: a City database gives subdivisions and locations,
/// docs/topology.md).
pub const MAX_DATABASE_BYTES: usize = 256 * 1024 * 1024;

impl Db {
    /// Opens and checks a database file (see [`Db::from_bytes`]).
    pub fn open(kind: Kind, path: &Path) -> Result<Self, GeoError> {
        let shown = path.display().to_string();
        Self::from_bytes(kind, read_bounded(path)?, &shown, &shown)
    }

    /// Checks a whole database before it is used: it must open, be of
    /// `kind` by its type, and every network of its search tree must be
    /// reachable and its record decode as that kind's record (the
    /// reader's own `verify` is not used: it also refuses metadata without
    /// a description, which real files are allowed to lack). A damaged
    /// file is refused here rather than found by one query after another.
    /// `shown` names it in errors; `source` is where it came from.
    pub fn from_bytes(
        kind: Kind,
        bytes: Vec<u8>,
        shown: &str,
        source: &str,
    ) -> Result<Self, GeoError> {
        let damaged = |why: String| GeoError::Damaged {
            path: shown.to_string(),
            why,
        };
        if bytes.len() > MAX_DATABASE_BYTES {
            return Err(damaged(format!(
                "it is {} bytes, more than the {MAX_DATABASE_BYTES} a GeoIP database can be",
                bytes.len()
            )));
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        let sha256: String = digest
            .as_ref()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let reader = maxminddb::Reader::from_source(bytes).map_err(|source| GeoError::Open {
            path: shown.to_string(),
            source,
        })?;
        let meta = reader.metadata();
        if !kind.accepts(&meta.database_type) {
            return Err(GeoError::WrongKind {
                path: shown.to_string(),
                what: kind.article(),
                why: format!("its type is \"{}\"", meta.database_type),
            });
        }
        let mut networks = 0u64;
        let walk = reader
            .networks(Default::default())
            .map_err(|e| damaged(e.to_string()))?;
        for found in walk {
            let found = found.map_err(|e| damaged(e.to_string()))?;
            let decoded = match kind {
                Kind::Place => found.decode::<CountryRecord>().map(|_| ()),
                Kind::Asn => found.decode::<AsnRecord>().map(|_| ()),
            };
            decoded.map_err(|e| damaged(format!("a record does not decode: {e}")))?;
            networks += 1;
        }
        if networks == 0 {
            return Err(damaged("it holds no network".into()));
        }
        let build_epoch = meta.build_epoch;
        let info = GeoInfo {
            name: meta.database_type.clone(),
            ip_version: meta.ip_version,
            built: gtm_model::when::date(build_epoch.saturating_mul(1000)),
            build_epoch,
            networks,
            sha256,
            source: source.to_string(),
        };
        let description = format!(
            "{} (IPv{}, built {}, sha256 {})",
            info.name, info.ip_version, info.built, info.sha256
        );
        Ok(Self {
            kind,
            reader,
            info,
            description,
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn info(&self) -> &GeoInfo {
        &self.info
    }

    /// `type (IPv6, built 2026-11-01, sha256 …)`.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl Geo {
    /// No database: every client has no place and no ASN.
    pub fn none() -> Self {
        Self::default().described()
    }

    /// Only `db`.
    pub fn of(db: Db) -> Self {
        Self::none().with(db)
    }

    /// A place database from the file `path` (see [`Db::from_bytes`]) and
    /// no ASN one.
    pub fn open(path: &Path) -> Result<Self, GeoError> {
        Db::open(Kind::Place, path).map(Self::of)
    }

    /// A place database from `bytes` (see [`Db::from_bytes`]) and no ASN
    /// one.
    pub fn from_bytes(bytes: Vec<u8>, shown: &str, source: &str) -> Result<Self, GeoError> {
        Db::from_bytes(Kind::Place, bytes, shown, source).map(Self::of)
    }

    /// These databases with `db` in place of the one of its kind.
    pub fn with(&self, db: Db) -> Self {
        self.with_shared(Arc::new(db))
    }

    /// [`Geo::with`] for a database already shared.
    pub fn with_shared(&self, db: Arc<Db>) -> Self {
        let mut next = self.clone();
        match db.kind {
            Kind::Place => next.place = Some(db),
            Kind::Asn => next.asn = Some(db),
        }
        next.described()
    }

    fn described(mut self) -> Self {
        let place = self.place.as_ref().map_or("none", |d| d.description());
        self.description = match &self.asn {
            Some(asn) => format!("{place}; ASN {}", asn.description()),
            None => place.to_string(),
        };
        self
    }

    /// The database of `kind`, if there is one.
    pub fn database(&self, kind: Kind) -> Option<&Db> {
        match kind {
            Kind::Place => self.place.as_deref(),
            Kind::Asn => self.asn.as_deref(),
        }
    }

    /// What the place database is, or `None` without one.
    pub fn info(&self) -> Option<&GeoInfo> {
        self.place.as_deref().map(Db::info)
    }

    /// Whether there is a place database.
    pub fn is_loaded(&self) -> bool {
        self.place.is_some()
    }

    /// `type (IPv6, built 2026-11-01, sha256 …)` of the place database, or
    /// "none", then `; ASN type (…)` with an ASN database: what peers
    /// report to each other, so different databases show as different.
    pub fn description(&self) -> &str {
        &self.description
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
        let Some(db) = &self.place else {
            return unplaced("no GeoIP database");
        };
        let Ok(result) = db.reader.lookup(ip) else {
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
        let subdivision = country
            .zip(record.subdivisions.and_then(|s| s.0))
            .and_then(|(country, code)| gtm_model::place::Subdivision::of(country, code));
        let location = record
            .location
            .and_then(|l| l.latitude.zip(l.longitude))
            .and_then(|(lat, lon)| gtm_model::place::Coordinates::from_degrees(lat, lon));
        Located {
            place: Place {
                country,
                continent,
                subdivision,
                location,
                asn: None,
            },
            prefix,
            unplaced: None,
        }
    }

    /// The autonomous system of the network holding `ip` (`None` without
    /// an ASN database, for a private address or one the database does
    /// not hold), and the prefix length of the database network looked at
    /// (the ECS scope of an answer that depended on it; 0 when none was).
    /// Allocates nothing.
    pub fn asn(&self, ip: IpAddr) -> (Option<u32>, u8) {
        let Some(db) = self.asn.as_ref().filter(|_| !is_private(ip)) else {
            return (None, 0);
        };
        let Ok(result) = db.reader.lookup(ip) else {
            return (None, 0);
        };
        let prefix = result.network().map(|n| n.prefix()).unwrap_or(0);
        let number = match result.decode::<AsnRecord>() {
            Ok(Some(r)) => r.autonomous_system_number,
            _ => None,
        };
        (number, prefix)
    }
}

/// Reads a database file, refusing one too large to be a country database
/// before reading it into memory.
pub(crate) fn read_bounded(path: &Path) -> Result<Vec<u8>, GeoError> {
    let shown = path.display().to_string();
    let open = |e: std::io::Error| GeoError::Open {
        path: shown.clone(),
        source: maxminddb::MaxMindDbError::Io(e),
    };
    let len = std::fs::metadata(path).map_err(open)?.len();
    if len > MAX_DATABASE_BYTES as u64 {
        return Err(GeoError::Damaged {
            path: shown.clone(),
            why: format!(
                "it is {len} bytes, more than the {MAX_DATABASE_BYTES} a GeoIP database can be"
            ),
        });
    }
    std::fs::read(path).map_err(open)
}

/// Addresses no database can place, and answers for them would be wrong
/// for every other client: RFC 1918, loopback, link-local, CGNAT,
/// unique-local, "this network" 0.0.0.0/8, IETF protocol assignments
/// 192.0.0.0/24, benchmarking 198.18.0.0/15, multicast (224.0.0.0/4,
/// ff00::/8), reserved 240.0.0.0/4 (with broadcast) and `::`. An IPv6 form
/// of an IPv4 address (mapped, compatible, NAT64, see
/// [`gtm_model::addr::embedded_v4`]) is judged by its IPv4 address.
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
            if let Some(v4) = gtm_model::addr::embedded_v4(v6) {
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
    use super::*;

    /// An ASN database of one network, 81.2.64.0/20 in `asn`.
    fn asn_db(asn: u32) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Entry {
            autonomous_system_number: u32,
        }
        let mut w = mmdb_writer::Writer::new("GeoLite2-ASN");
        let net: mmdb_writer::ipnet::IpNet = "81.2.64.0/20".parse().unwrap();
        w.insert(
            net,
            &Entry {
                autonomous_system_number: asn,
            },
        )
        .unwrap();
        w.to_bytes().unwrap()
    }

    #[test]
    fn an_asn_database_sits_beside_the_place_one() {
        let ip = |t: &str| -> IpAddr { t.parse().unwrap() };
        let asn = Db::from_bytes(Kind::Asn, asn_db(64500), "asn.mmdb", "import").unwrap();
        assert!(matches!(
            Db::from_bytes(Kind::Place, asn_db(64500), "asn.mmdb", "import"),
            Err(GeoError::WrongKind {
                what: "a country or city database",
                ..
            })
        ));
        let place = Db::from_bytes(Kind::Place, DEMO_DATABASE.to_vec(), "demo", "demo").unwrap();
        let geo = Geo::of(place).with(asn);
        assert_eq!(geo.asn(ip("81.2.69.160")), (Some(64500), 20));
        assert_eq!(geo.asn(ip("10.1.1.1")), (None, 0), "private");
        assert_eq!(geo.asn(ip("2.2.2.2")).0, None, "not in the database");
        assert_eq!(
            geo.locate(ip("81.2.69.160")).place.country,
            Country::parse("DE"),
            "the place database stays"
        );
        assert!(
            geo.description().contains("; ASN GeoLite2-ASN"),
            "{}",
            geo.description()
        );
        // A new ASN database replaces the old, and only it.
        let newer = Db::from_bytes(Kind::Asn, asn_db(64501), "asn.mmdb", "import").unwrap();
        let geo = geo.with(newer);
        assert_eq!(geo.asn(ip("81.2.69.160")).0, Some(64501));
        assert!(geo.is_loaded());
        assert_eq!(Geo::none().asn(ip("81.2.69.160")), (None, 0));
    }

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
