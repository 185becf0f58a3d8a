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
/// the subdivision also with a country database (a City database has
/// it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Place {
    pub country: Option<Country>,
    pub continent: Option<Continent>,
    pub subdivision: Option<Subdivision>,
}

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
}
