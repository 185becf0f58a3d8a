//! Names and record data as written, read into their wire forms.

use std::{net::IpAddr, str::FromStr};

use hickory_server::proto::rr::{
    Name, RData,
    rdata::{A, AAAA, CNAME, TXT},
};

use hickory_server::proto::serialize::txt::{ParseError, Parser};

use crate::{config::RecordType, names::NameError};

/// The longest character-string of a TXT record; longer values are split
/// into consecutive strings of this length.
pub const MAX_CHARACTER_STRING: usize = 255;

/// What is wrong with a value written for a record's data.
#[derive(Debug, thiserror::Error)]
pub(super) enum DataError {
    /// A CNAME's target that is not a name.
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("\"{value}\" is not an IPv4 address, as an A record needs")]
    NotIpv4 { value: String },
    #[error("\"{value}\" is not an IPv6 address, as an AAAA record needs")]
    NotIpv6 { value: String },
    /// A type whose data is static, not answered from addresses.
    #[error("{ty} is not an answer type", ty = .kind.as_str())]
    NotAnAnswer { kind: RecordType },
    /// Not the type's data in zone-file syntax.
    #[error("\"{value}\" is not valid {ty} data: {reason}", ty = .kind.as_str())]
    Syntax {
        kind: RecordType,
        value: String,
        reason: ParseError,
    },
    /// Read, but no data came of it.
    #[error("\"{value}\" holds no {ty} data", ty = .kind.as_str())]
    Empty { kind: RecordType, value: String },
    /// A TXT record needs one string at least (RFC 1035 §3.3.14).
    #[error("\"{value}\" holds no TXT string; write '\"\"' for one empty string")]
    NoTxtString { value: String },
}

/// A lower-case absolute name: `name` as is when it ends in a dot, else
/// relative to `origin`.
pub(super) fn fqdn(name: &str, origin: &Name) -> Result<Name, NameError> {
    let parsed = Name::from_ascii(name).map_err(|reason| NameError::Invalid {
        name: name.to_string(),
        reason,
    })?;
    let full = if parsed.is_fqdn() || origin.is_root() {
        let mut p = parsed;
        p.set_fqdn(true);
        p
    } else {
        parsed
            .append_domain(origin)
            .map_err(|reason| NameError::TooLong {
                name: name.to_string(),
                reason,
            })?
    };
    Ok(full.to_lowercase())
}

/// The data of an A, AAAA or CNAME answer.
pub(super) fn answer_rdata(kind: RecordType, value: &str) -> Result<RData, DataError> {
    match kind {
        RecordType::A => match IpAddr::from_str(value) {
            Ok(IpAddr::V4(v4)) => Ok(RData::A(A(v4))),
            _ => Err(DataError::NotIpv4 {
                value: value.to_string(),
            }),
        },
        RecordType::Aaaa => match IpAddr::from_str(value) {
            Ok(IpAddr::V6(v6)) => Ok(RData::AAAA(AAAA(v6))),
            _ => Err(DataError::NotIpv6 {
                value: value.to_string(),
            }),
        },
        // Targets are full names, with or without the final dot.
        RecordType::Cname => Ok(RData::CNAME(CNAME(fqdn(value, &Name::root())?))),
        kind => Err(DataError::NotAnAnswer { kind }),
    }
}

/// Parses one static value in zone-file syntax with hickory's zone parser.
pub(super) fn static_rdata(kind: RecordType, value: &str, apex: &Name) -> Result<RData, DataError> {
    let line = format!("@ 60 IN {} {}\n", kind.as_str(), value);
    let (_, sets) = Parser::new(line, None, Some(apex.clone()))
        .parse()
        .map_err(|reason| DataError::Syntax {
            kind,
            value: value.to_string(),
            reason,
        })?;
    let data = sets
        .into_values()
        .flat_map(|set| {
            set.records_without_rrsigs()
                .map(|r| r.data.clone())
                .collect::<Vec<_>>()
        })
        .next()
        .ok_or_else(|| DataError::Empty {
            kind,
            value: value.to_string(),
        })?;
    Ok(match data {
        // RFC 1035 §3.3.14: one or more strings; an empty RDATA does not
        // decode at the other end.
        RData::TXT(txt) if txt.txt_data.is_empty() => {
            return Err(DataError::NoTxtString {
                value: value.to_string(),
            });
        }
        RData::TXT(txt) if txt.txt_data.iter().any(|s| s.len() > MAX_CHARACTER_STRING) => {
            RData::TXT(split_txt(&txt))
        }
        other => other,
    })
}

/// A TXT value with each string longer than 255 bytes split into
/// consecutive 255-byte character-strings, as a DKIM key is published:
/// readers concatenate them (RFC 7208 §3.3, RFC 6376 §3.6.2.2).
fn split_txt(txt: &TXT) -> TXT {
    let parts: Vec<&[u8]> = txt
        .txt_data
        .iter()
        .flat_map(|s| {
            let chunks: Vec<&[u8]> = if s.is_empty() {
                vec![&s[..]]
            } else {
                s.chunks(MAX_CHARACTER_STRING).collect()
            };
            chunks
        })
        .collect();
    TXT::from_bytes(parts)
}
