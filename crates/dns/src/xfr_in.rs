//! Transfers in (docs/transfer.md, "Transfer in"): the SOA serial a
//! primary serves for a zone, and the zone itself by AXFR over TCP, each
//! signed with a TSIG key when one is given and every answer's signature
//! checked (RFC 8945 §5.3.1: each message of the transfer is signed).
//!
//! Bounded: a connection and each read wait at most [`READ_TIMEOUT`], a
//! whole transfer at most [`TRANSFER_TIMEOUT`], [`MAX_RECORDS`] records.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use hickory_server::proto::{
    op::{Message, MessageType, OpCode, Query, ResponseCode},
    rr::{Name, RData, RecordType, TSigner},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpStream, UdpSocket},
};

/// How long a connection or a read waits.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a whole transfer may take.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);
/// The most records a transferred zone may hold.
pub const MAX_RECORDS: usize = 1_000_000;

/// A zone as a transfer gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    pub serial: u32,
    /// Its records as a master file, one per line with absolute names
    /// (the SOA first).
    pub text: String,
    pub records: usize,
}

/// Seconds since the epoch, as TSIG times are.
fn now() -> u64 {
    crate::tsig::now_secs()
}

/// A query for `zone`'s `rtype`, signed with `key` when given; with the
/// verifier of its answers.
fn query(
    zone: &Name,
    rtype: RecordType,
    key: Option<&TSigner>,
) -> Result<(Vec<u8>, Option<hickory_server::proto::rr::TSigVerifier>), String> {
    let mut m = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Query);
    m.add_query(Query::query(zone.clone(), rtype));
    let verifier = match key {
        Some(signer) => m
            .finalize(signer, now())
            .map_err(|e| format!("cannot sign the query: {e}"))?,
        None => None,
    };
    let bytes = m
        .to_vec()
        .map_err(|e| format!("cannot encode the query: {e}"))?;
    Ok((bytes, verifier))
}

/// A response read and, with a key, its signature checked.
fn answer(
    bytes: &[u8],
    verifier: &mut Option<hickory_server::proto::rr::TSigVerifier>,
) -> Result<Message, String> {
    let m = match verifier {
        Some(v) => v
            .verify(bytes)
            .map_err(|e| format!("its TSIG does not verify: {e}"))?
            .into_message(),
        None => Message::from_vec(bytes).map_err(|e| format!("its answer does not read: {e}"))?,
    };
    if m.metadata.response_code != ResponseCode::NoError {
        return Err(format!("it answered {}", m.metadata.response_code));
    }
    Ok(m)
}

/// The serial of `zone`'s SOA at `primary`, asked over UDP.
pub async fn serial(
    primary: SocketAddr,
    zone: &Name,
    key: Option<&TSigner>,
) -> Result<u32, String> {
    let (bytes, mut verifier) = query(zone, RecordType::SOA, key)?;
    let bind: SocketAddr = if primary.is_ipv4() {
        "0.0.0.0:0".parse().unwrap_or(primary)
    } else {
        "[::]:0".parse().unwrap_or(primary)
    };
    let socket = UdpSocket::bind(bind)
        .await
        .map_err(|e| format!("cannot open a socket: {e}"))?;
    socket
        .send_to(&bytes, primary)
        .await
        .map_err(|e| format!("cannot send to {primary}: {e}"))?;
    let mut buf = vec![0u8; 65535];
    let n = tokio::time::timeout(READ_TIMEOUT, socket.recv(&mut buf))
        .await
        .map_err(|_| format!("no answer to the SOA query in {}s", READ_TIMEOUT.as_secs()))?
        .map_err(|e| format!("{e}"))?;
    let m = answer(&buf[..n], &mut verifier)?;
    m.answers
        .iter()
        .find_map(|r| match &r.data {
            RData::SOA(soa) if r.name == *zone => Some(soa.serial),
            _ => None,
        })
        .ok_or_else(|| format!("its answer has no SOA of {zone}: is it authoritative for it?"))
}

/// One length-prefixed message of a TCP stream.
async fn read_message(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut len = [0u8; 2];
    tokio::time::timeout(READ_TIMEOUT, stream.read_exact(&mut len))
        .await
        .map_err(|_| "it stopped sending".to_string())?
        .map_err(|e| format!("the connection ended: {e}"))?;
    let mut bytes = vec![0u8; usize::from(u16::from_be_bytes(len))];
    tokio::time::timeout(READ_TIMEOUT, stream.read_exact(&mut bytes))
        .await
        .map_err(|_| "it stopped sending".to_string())?
        .map_err(|e| format!("the connection ended: {e}"))?;
    Ok(bytes)
}

/// `zone` from `primary` by AXFR over TCP.
pub async fn axfr(primary: SocketAddr, zone: &Name, key: Option<&TSigner>) -> Result<Zone, String> {
    tokio::time::timeout(TRANSFER_TIMEOUT, axfr_within(primary, zone, key))
        .await
        .map_err(|_| format!("the transfer took over {}s", TRANSFER_TIMEOUT.as_secs()))?
}

async fn axfr_within(
    primary: SocketAddr,
    zone: &Name,
    key: Option<&TSigner>,
) -> Result<Zone, String> {
    let (bytes, mut verifier) = query(zone, RecordType::AXFR, key)?;
    let mut stream = tokio::time::timeout(READ_TIMEOUT, TcpStream::connect(primary))
        .await
        .map_err(|_| format!("cannot connect to {primary} in {}s", READ_TIMEOUT.as_secs()))?
        .map_err(|e| format!("cannot connect to {primary}: {e}"))?;
    let len = u16::try_from(bytes.len()).map_err(|_| "the query is too long".to_string())?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(&bytes);
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("cannot send the query: {e}"))?;
    let started = Instant::now();
    let mut text = String::new();
    let mut records = 0usize;
    let mut serial = None;
    loop {
        let bytes = read_message(&mut stream).await?;
        let m = answer(&bytes, &mut verifier)?;
        for r in m.answers {
            if r.record_type() == RecordType::TSIG {
                continue;
            }
            if let RData::SOA(soa) = &r.data {
                if r.name != *zone {
                    return Err(format!("an SOA of {} in the transfer of {zone}", r.name));
                }
                match serial {
                    // The SOA again: the transfer is whole.
                    Some(first) if first == soa.serial => {
                        tracing::debug!(%zone, records, ms = started.elapsed().as_millis() as u64, "transferred in");
                        return Ok(Zone {
                            serial: first,
                            text,
                            records,
                        });
                    }
                    Some(first) => {
                        return Err(format!(
                            "the transfer's last SOA has serial {}, its first {first}",
                            soa.serial
                        ));
                    }
                    None => serial = Some(soa.serial),
                }
            } else if serial.is_none() {
                return Err("the transfer does not start with the zone's SOA".into());
            }
            records += 1;
            if records > MAX_RECORDS {
                return Err(format!("the zone has over {MAX_RECORDS} records"));
            }
            let kind = gtm_model::config::RecordType::from_code(u16::from(r.record_type()));
            let data = gtm_model::compile::presentation(kind, &r.data);
            text.push_str(&format!(
                "{} {} IN {} {data}\n",
                r.name,
                r.ttl,
                kind.as_str()
            ));
        }
    }
}
