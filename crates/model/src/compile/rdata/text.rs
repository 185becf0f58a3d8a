//! Record data written back in zone-file syntax (`gtm zone export`, and
//! imported values whose relative names another `$ORIGIN` moved).

use std::fmt::Write;

use hickory_server::proto::{
    rr::{
        Name, RData,
        rdata::svcb::{SVCB, SvcParamValue},
    },
    serialize::binary::BinEncodable,
};

use super::{generic, loc, static_rdata};
use crate::config::RecordType;

/// `data`, of type `kind`, in zone-file syntax, names absolute: as hickory
/// writes the types it models, TXT as quoted strings, LOC as RFC 1876
/// writes it; any data whose text would not read back as the same data
/// (and any other type) in RFC 3597's generic form.
pub fn presentation(kind: RecordType, data: &RData) -> String {
    let text = match data {
        RData::A(_) | RData::AAAA(_) | RData::CNAME(_) | RData::SOA(_) => return data.to_string(),
        RData::Unknown { rdata, .. } if kind == RecordType::LOC => {
            loc::write(&rdata.anything).unwrap_or_else(|| generic::write(&rdata.anything))
        }
        RData::SVCB(svcb) => svcb_text(svcb).unwrap_or_default(),
        RData::HTTPS(https) => svcb_text(&https.0).unwrap_or_default(),
        RData::TXT(txt) => txt
            .txt_data
            .iter()
            .map(|s| quoted(s))
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    };
    match static_rdata(kind, &text, &Name::root()) {
        Ok(back) if back == *data => text,
        _ => generic::write(&data.to_bytes().unwrap_or_default()),
    }
}

/// A character-string in quotes: `"` and `\` escaped, bytes outside
/// printable ASCII as `\DDD`.
fn quoted(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(b));
            }
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03}")),
        }
    }
    out.push('"');
    out
}

/// SVCB and HTTPS data as RFC 9460 §2.1 writes it; `None` for parameters
/// written here only generically (ech, unknown keys, ALPN ids needing
/// escapes), so that the record is.
fn svcb_text(svcb: &SVCB) -> Option<String> {
    let mut out = format!("{} {}", svcb.svc_priority, svcb.target_name);
    let list = |items: Vec<String>| items.join(",");
    for (_, value) in &svcb.svc_params {
        let _ = match value {
            SvcParamValue::Mandatory(m) => write!(
                out,
                " mandatory={}",
                list(m.0.iter().map(|k| k.to_string()).collect())
            ),
            SvcParamValue::Alpn(a) => {
                if a.0.iter().any(|id| {
                    id.is_empty()
                        || id.bytes().any(|b| {
                            matches!(b, b',' | b'\\' | b'"') || !(0x21..=0x7e).contains(&b)
                        })
                }) {
                    return None;
                }
                write!(out, " alpn=\"{}\"", list(a.0.clone()))
            }
            SvcParamValue::NoDefaultAlpn => write!(out, " no-default-alpn"),
            SvcParamValue::Port(p) => write!(out, " port={p}"),
            SvcParamValue::Ipv4Hint(h) => write!(
                out,
                " ipv4hint={}",
                list(h.0.iter().map(|a| a.to_string()).collect())
            ),
            SvcParamValue::Ipv6Hint(h) => write!(
                out,
                " ipv6hint={}",
                list(h.0.iter().map(|a| a.to_string()).collect())
            ),
            _ => return None,
        };
    }
    Some(out)
}
