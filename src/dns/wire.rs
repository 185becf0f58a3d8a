//! Reading a DNS query straight from its wire bytes.
//!
//! Both answer paths use this for what hickory's decoder is lenient about:
//! EDNS Client Subnet (RFC 7871 §6: wrong lengths, bits set beyond the
//! source prefix, unknown families and duplicate options are FORMERR). The
//! fast path also takes its question from here, with no allocation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// RFC 7871 option code.
pub const ECS_CODE: u16 = 8;
/// RR type of the EDNS OPT pseudo-record.
pub const OPT_TYPE: u16 = 41;

/// An EDNS Client Subnet option as the client sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ecs {
    /// 1 = IPv4, 2 = IPv6.
    pub family: u16,
    pub source_prefix: u8,
    /// The address, zero beyond the source prefix.
    pub address: IpAddr,
}

/// The EDNS part of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdnsInfo {
    pub payload: u16,
    pub version: u8,
    pub dnssec_ok: bool,
    pub ecs: Option<Ecs>,
}

/// Why a query is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message ends early")]
    Short,
    #[error("malformed name")]
    BadName,
    #[error("more than one OPT record")]
    TwoOpts,
    #[error("malformed EDNS Client Subnet option: {0}")]
    BadEcs(&'static str),
    #[error("more than one EDNS Client Subnet option")]
    TwoEcs,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, WireError> {
        let b = *self.buf.get(self.pos).ok_or(WireError::Short)?;
        self.pos += 1;
        Ok(b)
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Short)?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Short)?;
        self.pos = end;
        Ok(s)
    }

    /// Skips a possibly compressed name.
    fn skip_name(&mut self) -> Result<(), WireError> {
        loop {
            let len = self.u8()?;
            match len {
                0 => return Ok(()),
                l if l & 0xC0 == 0xC0 => {
                    self.u8()?;
                    return Ok(());
                }
                l if l & 0xC0 != 0 => return Err(WireError::BadName),
                l => {
                    self.bytes(l as usize)?;
                }
            }
        }
    }
}

/// The question of a query whose name is stored lower-cased in wire form.
#[derive(Debug)]
pub struct Question {
    /// Lower-cased wire-form name, root label included.
    pub name: [u8; 255],
    pub name_len: usize,
    pub qtype: u16,
    pub qclass: u16,
    /// Offset just past the question in the query.
    pub end: usize,
}

impl Question {
    pub fn name(&self) -> &[u8] {
        &self.name[..self.name_len]
    }
}

/// Reads the first question, refusing compression (a query's first name
/// has nothing to point at).
pub fn question(msg: &[u8]) -> Result<Question, WireError> {
    let mut q = Question {
        name: [0; 255],
        name_len: 0,
        qtype: 0,
        qclass: 0,
        end: 0,
    };
    let mut r = Reader { buf: msg, pos: 12 };
    loop {
        let len = r.u8()? as usize;
        if len & 0xC0 != 0 {
            return Err(WireError::BadName);
        }
        if q.name_len + 1 + len > 255 {
            return Err(WireError::BadName);
        }
        q.name[q.name_len] = len as u8;
        q.name_len += 1;
        if len == 0 {
            break;
        }
        for b in r.bytes(len)? {
            q.name[q.name_len] = b.to_ascii_lowercase();
            q.name_len += 1;
        }
    }
    q.qtype = r.u16()?;
    q.qclass = r.u16()?;
    q.end = r.pos;
    Ok(q)
}

/// Finds and reads the OPT record of a message, if any.
pub fn edns(msg: &[u8]) -> Result<Option<EdnsInfo>, WireError> {
    if msg.len() < 12 {
        return Err(WireError::Short);
    }
    let count = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]) as usize;
    let (qd, an, ns, ar) = (count(4), count(6), count(8), count(10));
    let mut r = Reader { buf: msg, pos: 12 };
    for _ in 0..qd {
        r.skip_name()?;
        r.bytes(4)?;
    }
    for _ in 0..an + ns {
        r.skip_name()?;
        r.bytes(8)?;
        let len = r.u16()? as usize;
        r.bytes(len)?;
    }
    let mut found = None;
    for _ in 0..ar {
        r.skip_name()?;
        let rtype = r.u16()?;
        let class = r.u16()?;
        let ttl = r.bytes(4)?;
        let len = r.u16()? as usize;
        let rdata = r.bytes(len)?;
        if rtype != OPT_TYPE {
            continue;
        }
        if found.is_some() {
            return Err(WireError::TwoOpts);
        }
        found = Some(EdnsInfo {
            payload: class,
            version: ttl[1],
            dnssec_ok: ttl[2] & 0x80 != 0,
            ecs: options(rdata)?,
        });
    }
    Ok(found)
}

pub fn options(rdata: &[u8]) -> Result<Option<Ecs>, WireError> {
    let mut r = Reader { buf: rdata, pos: 0 };
    let mut ecs = None;
    while r.pos < rdata.len() {
        let code = r.u16()?;
        let len = r.u16()? as usize;
        let data = r.bytes(len)?;
        if code == ECS_CODE {
            if ecs.is_some() {
                return Err(WireError::TwoEcs);
            }
            ecs = Some(client_subnet(data)?);
        }
    }
    Ok(ecs)
}

/// RFC 7871 §6 rules for a query's ECS option.
fn client_subnet(data: &[u8]) -> Result<Ecs, WireError> {
    if data.len() < 4 {
        return Err(WireError::BadEcs("shorter than 4 bytes"));
    }
    let family = u16::from_be_bytes([data[0], data[1]]);
    let source_prefix = data[2];
    let scope_prefix = data[3];
    let addr = &data[4..];
    let max = match family {
        1 => 32,
        2 => 128,
        _ => return Err(WireError::BadEcs("unknown address family")),
    };
    if source_prefix > max {
        return Err(WireError::BadEcs("source prefix longer than the address"));
    }
    if scope_prefix != 0 {
        return Err(WireError::BadEcs("scope prefix must be 0 in a query"));
    }
    let needed = (source_prefix as usize).div_ceil(8);
    if addr.len() != needed {
        return Err(WireError::BadEcs(
            "address length does not match the source prefix",
        ));
    }
    if let Some(last) = addr.last() {
        let used_bits = source_prefix as usize - (needed - 1) * 8;
        let mask = if used_bits == 8 {
            0
        } else {
            0xFFu8 >> used_bits
        };
        if last & mask != 0 {
            return Err(WireError::BadEcs(
                "address bits set beyond the source prefix",
            ));
        }
    }
    let address = if family == 1 {
        let mut o = [0u8; 4];
        o[..addr.len()].copy_from_slice(addr);
        IpAddr::V4(Ipv4Addr::from(o))
    } else {
        let mut o = [0u8; 16];
        o[..addr.len()].copy_from_slice(addr);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    Ok(Ecs {
        family,
        source_prefix,
        address,
    })
}

/// Appends an ECS option (code, length, family, prefixes, address bytes).
pub fn push_ecs(out: &mut Vec<u8>, ecs: &Ecs, scope: u8) {
    let n = (ecs.source_prefix as usize).div_ceil(8);
    out.extend_from_slice(&ECS_CODE.to_be_bytes());
    out.extend_from_slice(&((4 + n) as u16).to_be_bytes());
    out.extend_from_slice(&ecs.family.to_be_bytes());
    out.push(ecs.source_prefix);
    out.push(scope);
    match ecs.address {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()[..n]),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()[..n]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ecs(data: &[u8]) -> Result<Ecs, WireError> {
        client_subnet(data)
    }

    #[test]
    fn ecs_rules_of_rfc7871() {
        assert_eq!(
            ecs(&[0, 1, 24, 0, 198, 51, 100]).unwrap().address,
            "198.51.100.0".parse::<IpAddr>().unwrap()
        );
        assert_eq!(ecs(&[0, 1, 0, 0]).unwrap().source_prefix, 0);
        assert!(ecs(&[0, 2, 56, 0, 0x20, 1, 0xd, 0xb8, 0, 0, 0]).is_ok());
        for (bytes, why) in [
            (&[0, 3, 24, 0, 1, 2, 3][..], "unknown address family"),
            (
                &[0, 1, 33, 0, 1, 2, 3, 4, 5],
                "source prefix longer than the address",
            ),
            (
                &[0, 1, 24, 0, 1, 2],
                "address length does not match the source prefix",
            ),
            (
                &[0, 1, 24, 0, 1, 2, 3, 4],
                "address length does not match the source prefix",
            ),
            (
                &[0, 1, 23, 0, 1, 2, 3],
                "address bits set beyond the source prefix",
            ),
            (&[0, 1, 24, 8, 1, 2, 3], "scope prefix must be 0 in a query"),
            (&[0, 1], "shorter than 4 bytes"),
        ] {
            assert_eq!(ecs(bytes), Err(WireError::BadEcs(why)), "{bytes:?}");
        }
    }

    #[test]
    fn question_is_lowercased_and_compression_refused() {
        let mut q = vec![0u8; 12];
        q.extend_from_slice(b"\x03WwW\x07example\x04TEST\x00\x00\x01\x00\x01");
        let parsed = question(&q).unwrap();
        assert_eq!(parsed.name(), b"\x03www\x07example\x04test\x00");
        assert_eq!((parsed.qtype, parsed.qclass, parsed.end), (1, 1, q.len()));
        let mut bad = vec![0u8; 12];
        bad.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
        assert_eq!(question(&bad).unwrap_err(), WireError::BadName);
    }
}
