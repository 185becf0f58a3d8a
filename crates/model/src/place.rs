//! Places as GeoDNS knows them: ISO 3166 country codes and the seven
//! continent codes of seed 002.

use std::fmt;

/// An ISO 3166 two-letter country code, upper case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Country(pub [u8; 2]);

impl Country {
    /// Parses `de` or `DE`; anything but two ASCII letters is refused.
    pub fn parse(text: &str) -> Option<Self> {
        match text.as_bytes() {
            [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                Some(Self([a.to_ascii_uppercase(), b.to_ascii_uppercase()]))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Country {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.0[0] as char, self.0[1] as char)
    }
}

/// The continents, by the codes GeoIP databases use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Continent {
    Af,
    An,
    As,
    Eu,
    Na,
    Oc,
    Sa,
}

impl Continent {
    pub const ALL: [Continent; 7] = [
        Self::Af,
        Self::An,
        Self::As,
        Self::Eu,
        Self::Na,
        Self::Oc,
        Self::Sa,
    ];

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.code().eq_ignore_ascii_case(text))
    }

    pub fn code(self) -> &'static str {
        match self {
            Self::Af => "AF",
            Self::An => "AN",
            Self::As => "AS",
            Self::Eu => "EU",
            Self::Na => "NA",
            Self::Oc => "OC",
            Self::Sa => "SA",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Af => "Africa",
            Self::An => "Antarctica",
            Self::As => "Asia",
            Self::Eu => "Europe",
            Self::Na => "North America",
            Self::Oc => "Oceania",
            Self::Sa => "South America",
        }
    }
}

impl fmt::Display for Continent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// An ISO 3166-2 subdivision: a country's code, a dash, and one to three
/// letters or digits (`US-CA`, `DE-BY`, `FR-75C`), upper case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Subdivision {
    pub country: Country,
    code: [u8; 3],
    len: u8,
}

impl Subdivision {
    /// Parses `US-CA` or `us-ca`; anything else is refused.
    pub fn parse(text: &str) -> Option<Self> {
        let (country, code) = text.split_once('-')?;
        Self::of(Country::parse(country)?, code)
    }

    /// The subdivision `code` (`CA`) of `country`, as a City database
    /// names it.
    pub fn of(country: Country, code: &str) -> Option<Self> {
        let bytes = code.as_bytes();
        if bytes.is_empty() || bytes.len() > 3 || !bytes.iter().all(u8::is_ascii_alphanumeric) {
            return None;
        }
        let mut c = [0u8; 3];
        for (to, from) in c.iter_mut().zip(bytes) {
            *to = from.to_ascii_uppercase();
        }
        Some(Self {
            country,
            code: c,
            len: bytes.len() as u8,
        })
    }
}

impl fmt::Display for Subdivision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-", self.country)?;
        for b in &self.code[..usize::from(self.len)] {
            write!(f, "{}", *b as char)?;
        }
        Ok(())
    }
}

/// Where a client is, as far as GeoDNS could tell. Every part is `None`
/// without a database, for private addresses, or for unknown networks;
/// the subdivision and location also with a country database (a City
/// database has them), the ASN without an ASN database.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Place {
    pub country: Option<Country>,
    pub continent: Option<Continent>,
    pub subdivision: Option<Subdivision>,
    /// Where on Earth, from a City database's location (nearest by
    /// distance, docs/topology.md).
    pub location: Option<Coordinates>,
    /// The autonomous system of the client's network, from an ASN
    /// database: looked up only for rules that name ASNs.
    pub asn: Option<u32>,
}

/// A point on Earth in millionths of a degree (about 0.1 m), so that
/// places compare and hash exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Coordinates {
    lat_e6: i32,
    lon_e6: i32,
}

/// The mean radius of the Earth (IUGG), in kilometres.
const EARTH_RADIUS_KM: f64 = 6371.0088;

impl Coordinates {
    /// A latitude of −90 to 90 and a longitude of −180 to 180 degrees;
    /// `None` for anything else (or not a number).
    pub fn from_degrees(latitude: f64, longitude: f64) -> Option<Self> {
        let ok = (-90.0..=90.0).contains(&latitude) && (-180.0..=180.0).contains(&longitude);
        ok.then(|| Self {
            lat_e6: (latitude * 1e6).round() as i32,
            lon_e6: (longitude * 1e6).round() as i32,
        })
    }

    pub fn latitude(self) -> f64 {
        f64::from(self.lat_e6) / 1e6
    }

    pub fn longitude(self) -> f64 {
        f64::from(self.lon_e6) / 1e6
    }

    /// The great-circle distance to `other` in kilometres (haversine, on
    /// a sphere of the Earth's mean radius).
    #[inline]
    pub fn km_to(self, other: Coordinates) -> f64 {
        Self::km_of(self.haversine(other))
    }

    /// The haversine of the central angle to `other`, 0 to 1: it orders
    /// distances as they are ordered, without the arc sine that makes it
    /// kilometres ([`Coordinates::km_of`]).
    #[inline]
    pub fn haversine(self, other: Coordinates) -> f64 {
        let (la1, la2) = (self.latitude().to_radians(), other.latitude().to_radians());
        let dlat = la2 - la1;
        let dlon = (other.longitude() - self.longitude()).to_radians();
        (dlat / 2.0).sin().powi(2) + la1.cos() * la2.cos() * (dlon / 2.0).sin().powi(2)
    }

    /// Kilometres of a haversine [`Coordinates::haversine`] gave.
    #[inline]
    pub fn km_of(haversine: f64) -> f64 {
        2.0 * EARTH_RADIUS_KM * haversine.clamp(0.0, 1.0).sqrt().asin()
    }
}

impl fmt::Display for Coordinates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.4}, {:.4}", self.latitude(), self.longitude())
    }
}

/// An autonomous system number as a configuration writes it: `64500` or
/// `"AS64500"`; written back as the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Asn(pub u32);

impl Asn {
    /// `64500`, `AS64500` or `as64500`; anything else is refused.
    pub fn parse(text: &str) -> Option<Self> {
        let digits = text
            .strip_prefix("AS")
            .or_else(|| text.strip_prefix("as"))
            .unwrap_or(text);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok().map(Self)
    }
}

impl fmt::Display for Asn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AS{}", self.0)
    }
}

impl serde::Serialize for Asn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Asn {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Asn;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an AS number (64500 or \"AS64500\")")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Asn, E> {
                u32::try_from(v)
                    .map(Asn)
                    .map_err(|_| E::custom(format!("{v} is not an AS number (at most 4294967295)")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Asn, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("{v} is not an AS number")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Asn, E> {
                Asn::parse(v.trim()).ok_or_else(|| {
                    E::custom(format!("\"{v}\" is not an AS number (64500 or AS64500)"))
                })
            }
        }
        d.deserialize_any(Visit)
    }
}

impl schemars::JsonSchema for Asn {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Asn".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An autonomous system number: 64500, or the text AS64500",
            "oneOf": [
                { "type": "integer", "minimum": 0, "maximum": 4294967295u64 },
                { "type": "string", "pattern": "^(AS|as)?[0-9]+$" }
            ],
            "examples": [64500]
        })
    }
}

/// Degrees as a configuration writes them (a datacenter's latitude or
/// longitude): a number, compared by its bits so that configurations
/// compare exactly.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Degrees(pub f64);

impl PartialEq for Degrees {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Degrees {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdivisions_read_as_iso_3166_2_writes_them() {
        let ca = Subdivision::parse("us-ca").unwrap();
        assert_eq!(ca.to_string(), "US-CA");
        assert_eq!(ca.country, Country::parse("US").unwrap());
        assert_eq!(Subdivision::parse("FR-75C").unwrap().to_string(), "FR-75C");
        for bad in ["US", "US-", "USA-CA", "US-CALI", "US-C A", "-CA"] {
            assert_eq!(Subdivision::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn as_numbers_read_with_or_without_their_prefix() {
        assert_eq!(Asn::parse("64500"), Some(Asn(64500)));
        assert_eq!(Asn::parse("AS64500"), Some(Asn(64500)));
        assert_eq!(Asn::parse("as4200000000"), Some(Asn(4_200_000_000)));
        for bad in ["", "AS", "AS-1", "64500x", "4294967296", " 1"] {
            assert_eq!(Asn::parse(bad), None, "{bad}");
        }
        assert_eq!(Asn(64500).to_string(), "AS64500");
        let read: Vec<Asn> = serde_json::from_str(r#"[64500, "AS64501"]"#).unwrap();
        assert_eq!(read, [Asn(64500), Asn(64501)]);
        assert_eq!(serde_json::to_string(&read).unwrap(), "[64500,64501]");
        let bad = serde_json::from_str::<Vec<Asn>>(r#"["ASX"]"#).unwrap_err();
        assert!(
            bad.to_string().contains("\"ASX\" is not an AS number"),
            "{bad}"
        );
        assert!(serde_json::from_str::<Vec<Asn>>("[-1]").is_err());
    }

    #[test]
    fn great_circle_distances_match_known_ones() {
        let at = |lat, lon| Coordinates::from_degrees(lat, lon).unwrap();
        // San Francisco to New York: about 4,130 km; London to Paris 344 km.
        let sf_ny = at(37.7749, -122.4194).km_to(at(40.7128, -74.0060));
        assert!((4120.0..4140.0).contains(&sf_ny), "{sf_ny}");
        let lon_par = at(51.5074, -0.1278).km_to(at(48.8566, 2.3522));
        assert!((340.0..348.0).contains(&lon_par), "{lon_par}");
        // Across the antimeridian, and to the antipode.
        let fiji_samoa = at(-17.7, 178.0).km_to(at(-13.8, -172.0));
        assert!((1100.0..1200.0).contains(&fiji_samoa), "{fiji_samoa}");
        let half = at(0.0, 0.0).km_to(at(0.0, 180.0));
        assert!((20010.0..20020.0).contains(&half), "{half}");
        assert_eq!(at(10.0, 10.0).km_to(at(10.0, 10.0)), 0.0);
        for (lat, lon) in [
            (91.0, 0.0),
            (0.0, 180.5),
            (f64::NAN, 0.0),
            (0.0, f64::INFINITY),
        ] {
            assert_eq!(Coordinates::from_degrees(lat, lon), None);
        }
    }
}
