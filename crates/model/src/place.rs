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

/// Where a client is, as far as GeoDNS could tell. Both parts are `None`
/// without a database, for private addresses, or for unknown networks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Place {
    pub country: Option<Country>,
    pub continent: Option<Continent>,
}
