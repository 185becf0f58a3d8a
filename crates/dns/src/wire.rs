//! Reading a DNS query straight from its wire bytes.
//!
//! Both answer paths use this for what hickory's decoder is lenient about:
//! EDNS Client Subnet (RFC 7871 §6: wrong lengths, bits set beyond the
//! source prefix, unknown families and duplicate options are FORMERR). The
//! fast path also takes its question from here, with no allocation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// RFC 7871 option code.
pub const ECS_CODE: u16 = 8;
/// RFC 5001 option code.
pub const NSID_CODE: u16 = 3;
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
    /// The query carries an NSID option (RFC 5001).
    pub nsid: bool,
    /// The query's COOKIE option (RFC 7873), the first if several.
    pub cookie: Option<QueryCookie>,
    /// The query carries an edns-tcp-keepalive option (RFC 7828).
    pub keepalive: bool,
}

/// The options of an OPT record that matter to us.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    pub ecs: Option<Ecs>,
    pub nsid: bool,
    pub cookie: Option<QueryCookie>,
    pub keepalive: bool,
}

/// Why a query is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message ends early")]
    Short,
    #[error("malformed name")]
    BadName,
    #[error("compression pointer not pointing backwards past the header")]
    BadPointer,
    #[error("more than one OPT record")]
    TwoOpts,
    #[error("malformed EDNS Client Subnet option: {0}")]
    BadEcs(&'static str),
    #[error("more than one EDNS Client Subnet option")]
    TwoEcs,
    #[error("a COOKIE option of a length RFC 7873 does not allow")]
    BadCookie,
    #[error("an edns-tcp-keepalive option longer than its TIMEOUT")]
    BadKeepalive,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Refuse compression pointers that point into the header or not
    /// backwards (RFC 1035 §4.1.4 allows only earlier names).
    strict: bool,
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
                    let at = self.pos - 1;
                    let target = usize::from(l & 0x3F) << 8 | usize::from(self.u8()?);
                    if self.strict && !(12..at).contains(&target) {
                        return Err(WireError::BadPointer);
                    }
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
    let mut r = Reader {
        buf: msg,
        pos: 12,
        strict: true,
    };
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

/// The OPT record of a message as found, its options not yet read.
#[derive(Debug, Clone, Copy)]
struct OptRr<'a> {
    payload: u16,
    version: u8,
    dnssec_ok: bool,
    rdata: &'a [u8],
}

/// Walks the message to its OPT record. `strict`: compression pointers
/// are checked and a second OPT is an error; otherwise the first OPT found
/// is returned (to shape a FORMERR as well as the message allows).
fn find_opt(msg: &[u8], strict: bool) -> Result<Option<OptRr<'_>>, WireError> {
    let header = msg.get(..12).ok_or(WireError::Short)?;
    let count = |i: usize| usize::from(u16::from_be_bytes([header[i], header[i + 1]]));
    let (qd, an, ns, ar) = (count(4), count(6), count(8), count(10));
    let mut r = Reader {
        buf: msg,
        pos: 12,
        strict,
    };
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
            if !strict {
                break;
            }
            return Err(WireError::TwoOpts);
        }
        found = Some(OptRr {
            payload: class,
            version: ttl[1],
            dnssec_ok: ttl[2] & 0x80 != 0,
            rdata,
        });
    }
    Ok(found)
}

/// Finds and reads the OPT record of a message, if any, checking every
/// name's compression pointers on the way.
pub fn edns(msg: &[u8]) -> Result<Option<EdnsInfo>, WireError> {
    let Some(opt) = find_opt(msg, true)? else {
        return Ok(None);
    };
    let o = options(opt.rdata)?;
    Ok(Some(EdnsInfo {
        payload: opt.payload,
        version: opt.version,
        dnssec_ok: opt.dnssec_ok,
        ecs: o.ecs,
        nsid: o.nsid,
        cookie: o.cookie,
        keepalive: o.keepalive,
    }))
}

/// A FORMERR for a query we could not read: the header's id, opcode and
/// RD, the question when it reads cleanly (uncompressed), and an OPT when
/// the query has one (RFC 6891 §7), with no options.
pub fn formerr(msg: &[u8], payload: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    let Some(header) = msg.get(..12) else {
        return out;
    };
    let qdcount = u16::from_be_bytes([header[4], header[5]]);
    let question = match question(msg) {
        Ok(q) if qdcount == 1 => msg.get(12..q.end),
        _ => None,
    };
    let opt = find_opt(msg, false).ok().flatten();
    out.extend_from_slice(&header[..2]);
    // QR, opcode and RD kept; AA, TC, RA cleared.
    out.push(0x80 | (header[2] & 0x79));
    out.push(1); // FORMERR
    out.extend_from_slice(&u16::from(question.is_some()).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&u16::from(opt.is_some()).to_be_bytes());
    if let Some(q) = question {
        out.extend_from_slice(q);
    }
    if let Some(opt) = opt {
        push_opt_header(&mut out, payload, opt.dnssec_ok);
        out.extend_from_slice(&[0, 0]);
    }
    out
}

/// Appends an OPT record up to its RDLENGTH: root owner, our payload,
/// extended RCODE 0, version 0, DO as the query had it.
pub fn push_opt_header(out: &mut Vec<u8>, payload: u16, dnssec_ok: bool) {
    out.push(0);
    out.extend_from_slice(&OPT_TYPE.to_be_bytes());
    out.extend_from_slice(&payload.to_be_bytes());
    out.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0]);
}

/// The options of an OPT record that matter to us: the client subnet,
/// whether the client asked for our NSID (RFC 5001), its cookie (RFC 7873)
/// and whether it sent edns-tcp-keepalive (RFC 7828).
pub fn options(rdata: &[u8]) -> Result<Options, WireError> {
    let mut r = Reader {
        buf: rdata,
        pos: 0,
        strict: true,
    };
    let mut o = Options::default();
    while r.pos < rdata.len() {
        let code = r.u16()?;
        let len = r.u16()? as usize;
        let data = r.bytes(len)?;
        match code {
            ECS_CODE => {
                if o.ecs.is_some() {
                    return Err(WireError::TwoEcs);
                }
                o.ecs = Some(client_subnet(data)?);
            }
            NSID_CODE => o.nsid = true,
            COOKIE_CODE => {
                let cookie = QueryCookie::read(data)?;
                o.cookie.get_or_insert(cookie);
            }
            KEEPALIVE_CODE => {
                read_keepalive(data)?;
                o.keepalive = true;
            }
            _ => {}
        }
    }
    Ok(o)
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

/// RFC 7873 option code.
pub const COOKIE_CODE: u16 = 10;

/// RFC 7828 option code.
pub const KEEPALIVE_CODE: u16 = 11;

/// A COOKIE option as a query carries it: the client cookie, and a server
/// cookie (8 to 32 bytes) when the client had learnt one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct QueryCookie {
    pub client: [u8; 8],
    server: [u8; 32],
    server_len: u8,
}

impl std::fmt::Debug for QueryCookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryCookie")
            .field("server_len", &self.server_len)
            .finish_non_exhaustive()
    }
}

impl QueryCookie {
    /// RFC 7873 §5.2.2: a client cookie of 8 bytes alone, or with a server
    /// cookie of 8 to 32 bytes; any other length is FORMERR.
    pub fn read(data: &[u8]) -> Result<Self, WireError> {
        let len = data.len();
        if len != 8 && !(16..=40).contains(&len) {
            return Err(WireError::BadCookie);
        }
        let (client, server) = data.split_at(8);
        let mut cookie = Self {
            client: client.try_into().map_err(|_| WireError::BadCookie)?,
            server: [0; 32],
            server_len: server.len() as u8,
        };
        cookie
            .server
            .get_mut(..server.len())
            .ok_or(WireError::BadCookie)?
            .copy_from_slice(server);
        Ok(cookie)
    }

    /// The server cookie the client sent back, if any.
    pub fn server(&self) -> &[u8] {
        self.server
            .get(..usize::from(self.server_len))
            .unwrap_or_default()
    }
}

/// The RFC 7828 option in a query: present, with or without a TIMEOUT
/// (clients send none; one sent is ignored). Other lengths are FORMERR.
pub fn read_keepalive(data: &[u8]) -> Result<(), WireError> {
    match data.len() {
        0 | 2 => Ok(()),
        _ => Err(WireError::BadKeepalive),
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

    /// A query: header (id 0x1234, RD, one question, one OPT with DO),
    /// then `qname` A IN, then the OPT with `opts`.
    fn query(qname: &[u8], opts: &[u8]) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        q.extend_from_slice(qname);
        q.extend_from_slice(&[0, 1, 0, 1, 0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0]);
        q.extend_from_slice(&(opts.len() as u16).to_be_bytes());
        q.extend_from_slice(opts);
        q
    }

    #[test]
    fn pointers_must_point_backwards_past_the_header() {
        // Into the header, at itself, forwards: refused.
        for ptr in [[0xC0, 4], [0xC0, 12], [0xC0, 0x30]] {
            assert_eq!(
                edns(&query(&ptr, &[])),
                Err(WireError::BadPointer),
                "{ptr:?}"
            );
        }
        // Backwards past the header: the second question points at the first.
        let mut q = query(b"\x01a\x00", &[]);
        q[5] = 2;
        q.splice(19..19, [0xC0, 12, 0, 1, 0, 1]);
        assert!(edns(&q).expect("valid").is_some());
    }

    #[test]
    fn formerr_keeps_a_clean_question_and_the_opt() {
        let www = b"\x03www\x07example\x04test\x00";
        // A bad ECS: question and OPT (DO kept, no options) come back.
        let q = query(www, &[0, 8, 0, 7, 0, 1, 23, 0, 1, 2, 3]);
        assert!(matches!(edns(&q), Err(WireError::BadEcs(_))));
        let f = formerr(&q, 1232);
        let mut expect = vec![0x12, 0x34, 0x81, 1, 0, 1, 0, 0, 0, 0, 0, 1];
        expect.extend_from_slice(www);
        expect.extend_from_slice(&[0, 1, 0, 1, 0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]);
        assert_eq!(f, expect);
        // A pointer as the question: no question, the OPT still found.
        let f = formerr(&query(&[0xC0, 4], &[]), 1232);
        assert_eq!(&f[..12], &[0x12, 0x34, 0x81, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(f.len(), 12 + 11);
        // Cut inside the question: the header alone.
        assert_eq!(formerr(&query(www, &[])[..20], 1232).len(), 12);
    }
}
