//! Names and record data as written, read into their wire forms.
//!
//! A static value is read in zone-file syntax: by hickory's zone parser for
//! the types it knows, by [`loc`] for LOC, and in RFC 3597's generic form
//! (`\# LENGTH HEX`, [`generic`]) for any type. Then [`rules`] checks what
//! the type's data must hold beyond its syntax.

use std::{net::IpAddr, str::FromStr};

use hickory_server::proto::{
    rr::{
        Name, RData, RecordType as Rt,
        rdata::{A, AAAA, CNAME, NULL, TXT},
    },
    serialize::binary::{BinDecoder, BinEncodable, Restrict},
};

use hickory_server::proto::serialize::txt::{ParseError, Parser};

use crate::{config::RecordType, names::NameError};

pub mod generic;
pub mod loc;
mod rules;
mod text;

pub use text::presentation;

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
    /// Not the type's data by a rule of its own (a digest's length, RFC
    /// 9460's rules), or not RFC 3597's generic form.
    #[error("\"{value}\" is not valid {ty} data: {reason}", ty = .kind.as_str())]
    Rule {
        kind: RecordType,
        value: String,
        reason: String,
    },
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

/// The data of a steered answer: an A, AAAA or CNAME, or an MX or SRV
/// (relative names under `apex`).
pub(super) fn answer_rdata(kind: RecordType, value: &str, apex: &Name) -> Result<RData, DataError> {
    match kind {
        RecordType::A => match IpAddr::from_str(value) {
            Ok(IpAddr::V4(v4)) => Ok(RData::A(A(v4))),
            _ => Err(DataError::NotIpv4 {
                value: value.to_string(),
            }),
        },
        RecordType::AAAA => match IpAddr::from_str(value) {
            Ok(IpAddr::V6(v6)) => Ok(RData::AAAA(AAAA(v6))),
            _ => Err(DataError::NotIpv6 {
                value: value.to_string(),
            }),
        },
        // Targets are full names, with or without the final dot.
        RecordType::CNAME => Ok(RData::CNAME(CNAME(fqdn(value, &Name::root())?))),
        kind if kind.steers_values() => static_rdata(kind, value, apex),
        kind => Err(DataError::NotAnAnswer { kind }),
    }
}

/// Reads one static value of type `kind`, relative names under `apex`.
pub(super) fn static_rdata(kind: RecordType, value: &str, apex: &Name) -> Result<RData, DataError> {
    let rule = |reason: String| DataError::Rule {
        kind,
        value: value.to_string(),
        reason,
    };
    let mut data = if generic::is_generic(value) {
        generic_rdata(kind, &generic::bytes(value).map_err(rule)?).map_err(rule)?
    } else if kind == RecordType::LOC {
        unknown(kind, loc::parse(value).map_err(rule)?)
    } else if has_parser(kind) {
        parsed(kind, value, apex)?
    } else {
        return Err(rule(format!(
            "{kind} data is written in the generic form, \\# LENGTH HEX (RFC 3597 §5), e.g. \"\\# 4 0A000001\""
        )));
    };
    if let RData::TXT(txt) = &data {
        // RFC 1035 §3.3.14: one or more strings; an empty RDATA does not
        // decode at the other end.
        if txt.txt_data.is_empty() {
            return Err(DataError::NoTxtString {
                value: value.to_string(),
            });
        }
        if txt.txt_data.iter().any(|s| s.len() > MAX_CHARACTER_STRING) {
            data = RData::TXT(split_txt(txt));
        }
    }
    rules::settle(&mut data).map_err(rule)?;
    let wire = data.to_bytes().map_err(|e| rule(e.to_string()))?;
    rules::judge(kind, &wire).map_err(rule)?;
    Ok(data)
}

/// The types hickory's zone parser reads.
fn has_parser(kind: RecordType) -> bool {
    matches!(
        kind.code(),
        2 | 12 | 13 | 15 | 16 | 33 | 35 | 37 | 43 | 44 | 52 | 53 | 61 | 62 | 64 | 65 | 257
    )
}

/// Data of a type hickory does not model, as its bytes.
fn unknown(kind: RecordType, bytes: Vec<u8>) -> RData {
    RData::Unknown {
        code: Rt::from(kind.code()),
        // `NULL::with` asserts its data is not empty.
        rdata: if bytes.is_empty() {
            NULL::new()
        } else {
            NULL::with(bytes)
        },
    }
}

/// The data written generically as `bytes`: decoded as its type when
/// hickory models it (so that it is checked, and signed in canonical form),
/// else kept as bytes.
fn generic_rdata(kind: RecordType, bytes: &[u8]) -> Result<RData, String> {
    if kind == RecordType::LOC {
        loc::check(bytes)?;
        return Ok(unknown(kind, bytes.to_vec()));
    }
    let rt = Rt::from(kind.code());
    if matches!(rt, Rt::Unknown(_) | Rt::NULL) {
        return Ok(unknown(kind, bytes.to_vec()));
    }
    let len = u16::try_from(bytes.len()).map_err(|_| "over 65535 bytes".to_string())?;
    let mut decoder = BinDecoder::new(bytes);
    let data = RData::read(&mut decoder, rt, Restrict::new(len))
        .map_err(|e| format!("the bytes are not {kind} data: {e}"))?;
    if decoder.index() != bytes.len() {
        return Err(format!(
            "{} bytes follow the {kind} data",
            bytes.len() - decoder.index()
        ));
    }
    Ok(data)
}

/// A value read by hickory's zone parser.
fn parsed(kind: RecordType, value: &str, apex: &Name) -> Result<RData, DataError> {
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
        // A relative SVCB target is under the apex, as any name of a value.
        RData::SVCB(mut svcb) if !svcb.target_name.is_fqdn() => {
            svcb.target_name =
                svcb.target_name
                    .append_domain(apex)
                    .map_err(|e| DataError::Rule {
                        kind,
                        value: value.to_string(),
                        reason: e.to_string(),
                    })?;
            RData::SVCB(svcb)
        }
        RData::HTTPS(mut https) if !https.0.target_name.is_fqdn() => {
            https.0.target_name =
                https
                    .0
                    .target_name
                    .append_domain(apex)
                    .map_err(|e| DataError::Rule {
                        kind,
                        value: value.to_string(),
                        reason: e.to_string(),
                    })?;
            RData::HTTPS(https)
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

/// A static value of type `kind` written in zone-file syntax, relative
/// names under `origin`: its data, or what is wrong with it.
pub fn read_value(kind: RecordType, value: &str, origin: &Name) -> Result<RData, String> {
    static_rdata(kind, value, origin).map_err(|e| e.to_string())
}

/// `name` as a lower-case absolute name: as is when it ends in a dot, else
/// under `origin`.
pub fn absolute(name: &str, origin: &Name) -> Result<Name, String> {
    fqdn(name, origin).map_err(|e| e.to_string())
}
