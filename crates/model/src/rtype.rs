//! Record types: a type code, written as its mnemonic (`MX`) or, for a type
//! with none, as RFC 3597 writes it (`TYPE65280`).

use std::{borrow::Cow, fmt, str::FromStr};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A record type, by its code. Ordered by code (the order of DNSSEC's type
/// bitmaps and of `gtm zone export`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordType(u16);

/// The mnemonics gtm reads and writes, with their codes (IANA "Resource
/// Record (RR) TYPEs"). Any other code is written `TYPEnnn`.
const NAMES: &[(&str, u16)] = &[
    ("A", 1),
    ("NS", 2),
    ("CNAME", 5),
    ("SOA", 6),
    ("NULL", 10),
    ("PTR", 12),
    ("HINFO", 13),
    ("MX", 15),
    ("TXT", 16),
    ("RP", 17),
    ("AFSDB", 18),
    ("SIG", 24),
    ("KEY", 25),
    ("AAAA", 28),
    ("LOC", 29),
    ("SRV", 33),
    ("NAPTR", 35),
    ("CERT", 37),
    ("DNAME", 39),
    ("OPT", 41),
    ("DS", 43),
    ("SSHFP", 44),
    ("RRSIG", 46),
    ("NSEC", 47),
    ("DNSKEY", 48),
    ("NSEC3", 50),
    ("NSEC3PARAM", 51),
    ("TLSA", 52),
    ("SMIMEA", 53),
    ("CDS", 59),
    ("CDNSKEY", 60),
    ("OPENPGPKEY", 61),
    ("CSYNC", 62),
    ("ZONEMD", 63),
    ("SVCB", 64),
    ("HTTPS", 65),
    ("NXNAME", 128),
    ("TKEY", 249),
    ("TSIG", 250),
    ("IXFR", 251),
    ("AXFR", 252),
    ("MAILB", 253),
    ("MAILA", 254),
    ("ANY", 255),
    ("URI", 256),
    ("CAA", 257),
];

impl RecordType {
    pub const A: Self = Self(1);
    pub const NS: Self = Self(2);
    pub const CNAME: Self = Self(5);
    pub const SOA: Self = Self(6);
    pub const PTR: Self = Self(12);
    pub const MX: Self = Self(15);
    pub const TXT: Self = Self(16);
    pub const AAAA: Self = Self(28);
    pub const LOC: Self = Self(29);
    pub const SRV: Self = Self(33);
    pub const NAPTR: Self = Self(35);
    pub const DNAME: Self = Self(39);
    pub const DS: Self = Self(43);
    pub const SSHFP: Self = Self(44);
    pub const TLSA: Self = Self(52);
    pub const SVCB: Self = Self(64);
    pub const HTTPS: Self = Self(65);
    pub const CAA: Self = Self(257);

    /// The type of a code.
    pub const fn from_code(code: u16) -> Self {
        Self(code)
    }

    /// Its code on the wire.
    pub const fn code(self) -> u16 {
        self.0
    }

    /// Its mnemonic, or `TYPEnnn` for a type with none.
    pub fn as_str(self) -> Cow<'static, str> {
        match NAMES.iter().find(|(_, c)| *c == self.0) {
            Some((name, _)) => Cow::Borrowed(name),
            None => Cow::Owned(format!("TYPE{}", self.0)),
        }
    }

    /// A, AAAA and CNAME take `addresses` and can be steered; the rest are
    /// static and take `values`.
    pub fn is_steerable(self) -> bool {
        matches!(self, Self::A | Self::AAAA | Self::CNAME)
    }

    /// MX and SRV: static with `values`, or steered with `addresses`
    /// whose `value` is the data and whose `ip` its check probes.
    pub fn steers_values(self) -> bool {
        matches!(self, Self::MX | Self::SRV)
    }

    /// Why a record of this type cannot be configured, when it cannot.
    pub fn refusal(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "type 0 is reserved",
            6 => "the SOA record is the domain's soa = { ... }",
            39 => "DNAME is not served (its answers are synthesized names); use CNAME records",
            41 | 128..=255 => "is a meta-type or a question type, never a record of a zone",
            46 | 47 | 48 | 50 | 51 | 59 | 60 | 63 => {
                "is made by gtm when the domain is signed (dnssec = true)"
            }
            _ => return None,
        })
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// A type written neither as a known mnemonic nor as `TYPEnnn`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "\"{0}\" is not a record type (a mnemonic such as MX, or TYPE followed by a number from 1 to 65535)"
)]
pub struct UnknownType(pub String);

impl FromStr for RecordType {
    type Err = UnknownType;

    /// A mnemonic in any case, or `TYPEnnn` (RFC 3597 §5), which names
    /// the type with that mnemonic when it has one.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some((_, code)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
            return Ok(Self(*code));
        }
        let digits = s
            .get(..4)
            .filter(|p| p.eq_ignore_ascii_case("TYPE"))
            .and_then(|_| s.get(4..))
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        match digits.and_then(|d| d.parse::<u16>().ok()) {
            Some(code) => Ok(Self(code)),
            None => Err(UnknownType(s.to_string())),
        }
    }
}

impl Serialize for RecordType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

impl<'de> Deserialize<'de> for RecordType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for RecordType {
    fn schema_name() -> Cow<'static, str> {
        "RecordType".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A record type: its mnemonic (A, AAAA, CNAME, MX, TXT, SRV, CAA, NS, DS, PTR, SVCB, HTTPS, TLSA, SSHFP, NAPTR, LOC, ...) or TYPEnnn (RFC 3597) for any other",
            "examples": ["A", "MX", "TYPE65280"]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics_and_generic_names_read_and_write_back() {
        for (text, code, written) in [
            ("A", 1, "A"),
            ("aaaa", 28, "AAAA"),
            ("Https", 65, "HTTPS"),
            ("TYPE65280", 65280, "TYPE65280"),
            ("type15", 15, "MX"),
            ("TYPE29", 29, "LOC"),
        ] {
            let t: RecordType = text.parse().unwrap();
            assert_eq!(t.code(), code, "{text}");
            assert_eq!(t.to_string(), written, "{text}");
        }
        for bad in ["", "TYPE", "TYPE65536", "TYPE-1", "MXX", "TYPE 1"] {
            assert!(bad.parse::<RecordType>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_types_gtm_makes_or_cannot_serve_are_refused() {
        for t in [
            "SOA", "RRSIG", "NSEC", "DNSKEY", "ANY", "AXFR", "OPT", "DNAME", "TYPE0",
        ] {
            let t: RecordType = t.parse().unwrap();
            assert!(t.refusal().is_some(), "{t}");
        }
        for t in ["A", "NS", "DS", "LOC", "URI", "TYPE65280", "TYPE256"] {
            let t: RecordType = t.parse().unwrap();
            assert!(t.refusal().is_none(), "{t}");
        }
    }

    #[test]
    fn serde_round_trips_as_the_written_name() {
        let t: RecordType = serde_json::from_str("\"type65280\"").unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"TYPE65280\"");
        let e = serde_json::from_str::<RecordType>("\"BOGUS\"").unwrap_err();
        assert!(
            e.to_string().contains("\"BOGUS\" is not a record type"),
            "{e}"
        );
    }
}
