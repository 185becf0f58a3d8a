//! dnstap messages (dnstap.proto, <https://dnstap.info>): the protobuf
//! structs, written by hand with the schema's field numbers, and the two
//! messages of an answered query, AUTH_QUERY and AUTH_RESPONSE.
//!
//! Only the fields an authoritative server fills are declared; a reader
//! skips what it does not know, so the schema's other fields need no place
//! here.

use std::{
    net::{IpAddr, SocketAddr},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::Bytes;
use prost::Message as _;

/// `Dnstap`: the outer message of every frame.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dnstap {
    #[prost(bytes = "bytes", optional, tag = "1")]
    pub identity: Option<Bytes>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    pub version: Option<Bytes>,
    /// Free-form: gtm's steering decision for a steered answer
    /// (docs/operations.md, "dnstap").
    #[prost(bytes = "bytes", optional, tag = "3")]
    pub extra: Option<Bytes>,
    #[prost(message, optional, tag = "14")]
    pub message: Option<Message>,
    /// `Dnstap.Type`: always MESSAGE.
    #[prost(enumeration = "DnstapType", required, tag = "15")]
    pub r#type: i32,
}

/// `Dnstap.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum DnstapType {
    Message = 1,
}

/// `Message`: one DNS message seen by the server.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Message {
    #[prost(enumeration = "MessageType", required, tag = "1")]
    pub r#type: i32,
    #[prost(enumeration = "SocketFamily", optional, tag = "2")]
    pub socket_family: Option<i32>,
    #[prost(enumeration = "SocketProtocol", optional, tag = "3")]
    pub socket_protocol: Option<i32>,
    #[prost(bytes = "bytes", optional, tag = "4")]
    pub query_address: Option<Bytes>,
    #[prost(bytes = "bytes", optional, tag = "5")]
    pub response_address: Option<Bytes>,
    #[prost(uint32, optional, tag = "6")]
    pub query_port: Option<u32>,
    #[prost(uint32, optional, tag = "7")]
    pub response_port: Option<u32>,
    #[prost(uint64, optional, tag = "8")]
    pub query_time_sec: Option<u64>,
    #[prost(fixed32, optional, tag = "9")]
    pub query_time_nsec: Option<u32>,
    #[prost(bytes = "bytes", optional, tag = "10")]
    pub query_message: Option<Bytes>,
    #[prost(uint64, optional, tag = "12")]
    pub response_time_sec: Option<u64>,
    #[prost(fixed32, optional, tag = "13")]
    pub response_time_nsec: Option<u32>,
    #[prost(bytes = "bytes", optional, tag = "14")]
    pub response_message: Option<Bytes>,
}

/// `Message.Type`: the two an authoritative server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MessageType {
    AuthQuery = 1,
    AuthResponse = 2,
}

/// `SocketFamily`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SocketFamily {
    Inet = 1,
    Inet6 = 2,
}

/// `SocketProtocol`: the transports gtm answers over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SocketProtocol {
    Udp = 1,
    Tcp = 2,
    /// TLS over TCP (zone transfers over TLS, `xot`).
    Dot = 3,
}

/// What the DNS path saw of one answered query: everything a message
/// needs but its encoding, which the writer does.
#[derive(Debug, Clone)]
pub struct Seen {
    pub protocol: SocketProtocol,
    /// The client's address and port.
    pub client: SocketAddr,
    /// The listener's address and port.
    pub server: SocketAddr,
    pub query_time: SystemTime,
    pub query: Bytes,
    pub response_time: SystemTime,
    pub response: Bytes,
}

/// The address bytes dnstap carries: 4 for IPv4 (an IPv4-mapped IPv6
/// address included), else 16; and the family they are of.
fn address(ip: IpAddr) -> (SocketFamily, Bytes) {
    match ip.to_canonical() {
        IpAddr::V4(v4) => (SocketFamily::Inet, Bytes::copy_from_slice(&v4.octets())),
        IpAddr::V6(v6) => (SocketFamily::Inet6, Bytes::copy_from_slice(&v6.octets())),
    }
}

/// The addresses of a query's messages, made once for both, the
/// listener's kept from one query to the next (most share it).
#[derive(Debug, Default)]
pub struct Addresses {
    family: Option<SocketFamily>,
    client: Bytes,
    server_ip: Option<IpAddr>,
    server: Bytes,
}

impl Addresses {
    /// Makes them `seen`'s.
    pub fn of(&mut self, seen: &Seen) {
        let (family, client) = address(seen.client.ip());
        self.family = Some(family);
        self.client = client;
        if self.server_ip != Some(seen.server.ip()) {
            self.server_ip = Some(seen.server.ip());
            self.server = address(seen.server.ip()).1;
        }
    }
}

fn since_epoch(t: SystemTime) -> (u64, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    (d.as_secs(), d.subsec_nanos())
}

/// One dnstap message of `seen` (`kind` says which), appended to `out` as
/// a Frame Streams data frame. The byte fields share `seen`'s and the
/// writer's buffers: nothing is copied but into `out`.
pub fn push_frame(
    out: &mut Vec<u8>,
    kind: MessageType,
    seen: &Seen,
    addresses: &Addresses,
    identity: &Bytes,
    version: &Bytes,
    extra: Option<Bytes>,
) {
    let (query_sec, query_nsec) = since_epoch(seen.query_time);
    let mut message = Message {
        r#type: kind as i32,
        socket_family: addresses.family.map(|f| f as i32),
        socket_protocol: Some(seen.protocol as i32),
        query_address: Some(addresses.client.clone()),
        response_address: Some(addresses.server.clone()),
        query_port: Some(u32::from(seen.client.port())),
        response_port: Some(u32::from(seen.server.port())),
        query_time_sec: Some(query_sec),
        query_time_nsec: Some(query_nsec),
        query_message: None,
        response_time_sec: None,
        response_time_nsec: None,
        response_message: None,
    };
    match kind {
        MessageType::AuthQuery => message.query_message = Some(seen.query.clone()),
        MessageType::AuthResponse => {
            let (sec, nsec) = since_epoch(seen.response_time);
            message.response_time_sec = Some(sec);
            message.response_time_nsec = Some(nsec);
            message.response_message = Some(seen.response.clone());
        }
    }
    let dnstap = Dnstap {
        identity: (!identity.is_empty()).then(|| identity.clone()),
        version: (!version.is_empty()).then(|| version.clone()),
        extra,
        message: Some(message),
        r#type: DnstapType::Message as i32,
    };
    let len = dnstap.encoded_len();
    out.reserve(4 + len);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    // A `Vec` grows as needed: encoding into one does not fail.
    let _ = dnstap.encode(out);
}

/// One dnstap message of `seen`, encoded alone (without its frame).
pub fn encode(
    kind: MessageType,
    seen: &Seen,
    identity: &[u8],
    version: &[u8],
    extra: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut addresses = Addresses::default();
    addresses.of(seen);
    push_frame(
        &mut out,
        kind,
        seen,
        &addresses,
        &Bytes::copy_from_slice(identity),
        &Bytes::copy_from_slice(version),
        extra.map(Bytes::copy_from_slice),
    );
    out.split_off(4)
}

/// A dnstap frame decoded; `None` when it is not one.
pub fn decode(frame: &[u8]) -> Option<Dnstap> {
    Dnstap::decode(frame).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen() -> Seen {
        Seen {
            protocol: SocketProtocol::Udp,
            client: "[::ffff:192.0.2.7]:5353".parse().unwrap(),
            server: "127.0.0.1:53".parse().unwrap(),
            query_time: UNIX_EPOCH + Duration::new(1_700_000_000, 5),
            query: Bytes::from_static(&[1, 2, 3]),
            response_time: UNIX_EPOCH + Duration::new(1_700_000_001, 6),
            response: Bytes::from_static(&[4, 5]),
        }
    }

    #[test]
    fn a_query_and_its_response_decode_as_dnstap() {
        let q = encode(MessageType::AuthQuery, &seen(), b"dev-1", b"gtm 0.1", None);
        let d = Dnstap::decode(&q[..]).unwrap();
        assert_eq!(d.identity.as_deref(), Some(&b"dev-1"[..]));
        assert_eq!(d.r#type, 1);
        assert_eq!(d.extra, None);
        let m = d.message.unwrap();
        assert_eq!(m.r#type, MessageType::AuthQuery as i32);
        assert_eq!(m.socket_family, Some(1));
        assert_eq!(m.query_address.as_deref(), Some(&[192, 0, 2, 7][..]));
        assert_eq!(m.query_port, Some(5353));
        assert_eq!(m.response_port, Some(53));
        assert_eq!(m.query_time_sec, Some(1_700_000_000));
        assert_eq!(m.query_time_nsec, Some(5));
        assert_eq!(m.query_message.as_deref(), Some(&[1, 2, 3][..]));
        assert_eq!(m.response_message, None);

        let r = encode(
            MessageType::AuthResponse,
            &seen(),
            b"dev-1",
            b"",
            Some(b"gtm record=x"),
        );
        let d = Dnstap::decode(&r[..]).unwrap();
        assert_eq!(d.version, None);
        assert_eq!(d.extra.as_deref(), Some(&b"gtm record=x"[..]));
        let m = d.message.unwrap();
        assert_eq!(m.r#type, MessageType::AuthResponse as i32);
        assert_eq!(m.response_time_sec, Some(1_700_000_001));
        assert_eq!(m.response_message.as_deref(), Some(&[4, 5][..]));
        assert_eq!(m.query_message, None);
    }
}
