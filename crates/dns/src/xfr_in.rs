//! Transfers in (docs/transfer.md, "Transfer in"): the SOA serial a
//! primary serves for a zone, and the zone itself over TCP: by IXFR
//! (RFC 1995) from a zone this device transferred before, else by AXFR.
//! With a TSIG key every query is signed and every answer checked
//! ([`Chain`]: RFC 8945 §5.3.1, a primary may leave up to 99 messages in
//! a row unsigned; the next signed one covers them, and the last must be
//! signed).
//!
//! Bounded: a connection and each read wait at most [`READ_TIMEOUT`], a
//! whole transfer at most [`TRANSFER_TIMEOUT`], [`MAX_RECORDS`] records.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    time::{Duration, Instant},
};

use hickory_server::proto::{
    op::{Message, MessageType, OpCode, Query, ResponseCode},
    rr::{
        Name, RData, Record, RecordType, TSigner,
        rdata::{
            SOA,
            tsig::{TsigAlgorithm, signed_bitmessage_to_buf},
        },
    },
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
/// The most messages in a row a signed transfer may leave unsigned
/// (RFC 8945 §5.3.1).
pub const MAX_UNSIGNED: usize = 99;

/// A zone as a transfer gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    pub serial: u32,
    /// Its records as a master file, one per line with absolute names:
    /// the SOA first, the others in the order of their owner, type and
    /// data (the same zone makes the same text, however transferred).
    pub text: String,
    pub records: usize,
    /// Its SOA's refresh: when the primary wants to be asked again.
    pub refresh: u32,
}

/// How a transfer came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The whole zone.
    Axfr,
    /// The held zone with the primary's differences applied.
    Ixfr,
    /// The held zone is the primary's serial already.
    Current,
}

impl How {
    pub fn as_str(self) -> &'static str {
        match self {
            How::Axfr => "AXFR",
            How::Ixfr => "IXFR",
            How::Current => "current",
        }
    }
}

/// Seconds since the epoch, as TSIG times are.
fn now() -> u64 {
    crate::tsig::now_secs()
}

/// A query for `zone`'s `rtype` (an IXFR's with the `held` serial in its
/// authority section), signed with `key` when given; with the chain its
/// answers are checked with.
fn query(
    zone: &Name,
    rtype: RecordType,
    held: Option<u32>,
    key: Option<&TSigner>,
) -> Result<(Vec<u8>, Option<Chain>), String> {
    let mut m = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Query);
    m.add_query(Query::query(zone.clone(), rtype));
    if let Some(serial) = held {
        // Only the serial is read (RFC 1995 §3).
        let soa = SOA::new(zone.clone(), zone.clone(), serial, 0, 0, 0, 0);
        m.authorities
            .push(Record::from_rdata(zone.clone(), 0, RData::SOA(soa)));
    }
    let chain = match key {
        Some(signer) => {
            m.finalize(signer, now())
                .map_err(|e| format!("cannot sign the query: {e}"))?;
            let mac = m
                .signature()
                .map(|s| s.data.mac.clone())
                .ok_or("the signed query has no TSIG")?;
            Some(Chain::new(signer.clone(), mac))
        }
        None => None,
    };
    let bytes = m
        .to_vec()
        .map_err(|e| format!("cannot encode the query: {e}"))?;
    Ok((bytes, chain))
}

/// The TSIG check of a transfer's answers (RFC 8945 §5.3.1): each signed
/// message's MAC covers the previous MAC (the query's for the first) and
/// every unsigned message since.
pub struct Chain {
    signer: TSigner,
    previous: Vec<u8>,
    first: bool,
    /// The messages since the last signed one, as they came.
    unsigned: Vec<u8>,
    unsigned_count: usize,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("key", self.signer.signer_name())
            .field("first", &self.first)
            .field("unsigned", &self.unsigned_count)
            .finish()
    }
}

impl Chain {
    pub fn new(signer: TSigner, request_mac: Vec<u8>) -> Self {
        Self {
            signer,
            previous: request_mac,
            first: true,
            unsigned: Vec::new(),
            unsigned_count: 0,
        }
    }

    /// Reads one answer at time `now`: the message, and whether it was
    /// signed (its records and every unsigned one's before it are then
    /// proven).
    pub fn read(&mut self, bytes: &[u8], now: u64) -> Result<(Message, bool), String> {
        let m = Message::from_vec(bytes).map_err(|e| format!("its answer does not read: {e}"))?;
        if m.signature().is_none() {
            if self.first {
                return Err("its first answer is not signed".into());
            }
            self.unsigned_count += 1;
            if self.unsigned_count > MAX_UNSIGNED {
                return Err(format!(
                    "over {MAX_UNSIGNED} answers in a row are not signed"
                ));
            }
            self.unsigned.extend_from_slice(bytes);
            return Ok((m, false));
        }
        let (body, record) = signed_bitmessage_to_buf(bytes, None, self.first)
            .map_err(|e| format!("its TSIG does not read: {e}"))?;
        let tsig = &record.data;
        if record.name != *self.signer.signer_name() || tsig.algorithm != TsigAlgorithm::HmacSha256
        {
            return Err(format!("it is signed with another key ({})", record.name));
        }
        if let Some(error) = &tsig.error {
            return Err(format!("it answered the TSIG error {error:?}"));
        }
        let previous = u16::try_from(self.previous.len()).map_err(|_| "a MAC is too long")?;
        let mut tbv =
            Vec::with_capacity(2 + self.previous.len() + self.unsigned.len() + body.len());
        tbv.extend_from_slice(&previous.to_be_bytes());
        tbv.extend_from_slice(&self.previous);
        tbv.extend_from_slice(&self.unsigned);
        tbv.extend_from_slice(&body);
        self.signer
            .verify(&tbv, &tsig.mac)
            .map_err(|_| "its TSIG does not verify".to_string())?;
        if now.abs_diff(tsig.time) > u64::from(tsig.fudge) {
            return Err(format!(
                "its TSIG time is {}s from ours (fudge {})",
                now.abs_diff(tsig.time),
                tsig.fudge
            ));
        }
        self.previous = tsig.mac.clone();
        self.first = false;
        self.unsigned.clear();
        self.unsigned_count = 0;
        Ok((m, true))
    }
}

/// A response read at time `now` (and, with a chain, checked): the
/// message and whether its records are proven (always, unsigned).
fn answer(bytes: &[u8], chain: &mut Option<Chain>, now: u64) -> Result<(Message, bool), String> {
    let (m, proven) = match chain {
        Some(c) => c.read(bytes, now)?,
        None => (
            Message::from_vec(bytes).map_err(|e| format!("its answer does not read: {e}"))?,
            true,
        ),
    };
    if m.metadata.response_code != ResponseCode::NoError {
        return Err(format!("it answered {}", m.metadata.response_code));
    }
    Ok((m, proven))
}

/// The serial of `zone`'s SOA at `primary`, asked over UDP.
pub async fn serial(
    primary: SocketAddr,
    zone: &Name,
    key: Option<&TSigner>,
) -> Result<u32, String> {
    let (bytes, mut chain) = query(zone, RecordType::SOA, None, key)?;
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
    let (m, _) = answer(&buf[..n], &mut chain, now())?;
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

/// `zone` from `primary`: by IXFR from `held` when given (the zone as
/// this device last transferred it), falling back to AXFR when the
/// primary's differences cannot be applied to it; else by AXFR.
pub async fn transfer(
    primary: SocketAddr,
    zone: &Name,
    key: Option<&TSigner>,
    held: Option<&Zone>,
) -> Result<(Zone, How), String> {
    if let Some(held) = held {
        match within(primary, zone, key, Some(held)).await {
            Ok(done) => return Ok(done),
            Err(why) => {
                tracing::info!(%zone, %primary, error = %why, "an IXFR failed; asking for the whole zone");
            }
        }
    }
    within(primary, zone, key, None).await
}

async fn within(
    primary: SocketAddr,
    zone: &Name,
    key: Option<&TSigner>,
    held: Option<&Zone>,
) -> Result<(Zone, How), String> {
    let what = if held.is_some() { "IXFR" } else { "AXFR" };
    tokio::time::timeout(TRANSFER_TIMEOUT, over_tcp(primary, zone, key, held))
        .await
        .map_err(|_| {
            format!(
                "{what}: the transfer took over {}s",
                TRANSFER_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("{what}: {e}"))
}

async fn over_tcp(
    primary: SocketAddr,
    zone: &Name,
    key: Option<&TSigner>,
    held: Option<&Zone>,
) -> Result<(Zone, How), String> {
    let rtype = if held.is_some() {
        RecordType::IXFR
    } else {
        RecordType::AXFR
    };
    let (bytes, chain) = query(zone, rtype, held.map(|h| h.serial), key)?;
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
    let mut incoming = Incoming::new(zone.clone(), held, chain)?;
    loop {
        let bytes = read_message(&mut stream).await?;
        if let Some((zone_read, how)) = incoming.message(&bytes, now())? {
            tracing::debug!(%zone, how = how.as_str(), records = zone_read.records, ms = started.elapsed().as_millis() as u64, "transferred in");
            return Ok((zone_read, how));
        }
    }
}

/// A transfer's answers read one message at a time, without I/O: each
/// checked with the chain (when signed) and its records read into the
/// zone they make.
#[derive(Debug)]
pub struct Incoming {
    chain: Option<Chain>,
    reading: Reading,
}

impl Incoming {
    /// The reading of a transfer of `zone` (an IXFR from `held` when
    /// given) whose query `chain` checks the answers of.
    pub fn new(zone: Name, held: Option<&Zone>, chain: Option<Chain>) -> Result<Self, String> {
        Ok(Self {
            chain,
            reading: Reading::new(zone, held)?,
        })
    }

    /// Reads one answer at time `now`: the zone, and how it came, once the
    /// transfer is whole; an error for anything wrong with it.
    pub fn message(&mut self, bytes: &[u8], now: u64) -> Result<Option<(Zone, How)>, String> {
        if matches!(self.reading.phase, Phase::Done(_)) {
            return Err("it sent more after the transfer was whole".into());
        }
        let (m, proven) = answer(bytes, &mut self.chain, now)?;
        for r in &m.answers {
            if self.reading.record(r)? {
                if !proven {
                    return Err("its last answer is not signed".into());
                }
                return self.reading.finish().map(Some);
            }
        }
        Ok(None)
    }
}

/// A record as a line of a zone's text, and its identity in the zone
/// (owner, type and data: RFC 1995 deletes by those, not by TTL).
fn line(r: &Record) -> (String, String) {
    let kind = gtm_model::config::RecordType::from_code(u16::from(r.record_type()));
    let data = gtm_model::compile::presentation(kind, &r.data);
    let owner = r.name.to_ascii();
    (
        format!("{} {} {data}", owner.to_ascii_lowercase(), kind.as_str()),
        format!("{owner} {} IN {} {data}", r.ttl, kind.as_str()),
    )
}

/// Where a transfer's record stream is (RFC 1995 §4, RFC 5936 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing read yet.
    Start,
    /// The first SOA (the newest serial) read.
    First,
    /// A whole zone (AXFR, or an IXFR answered so).
    Whole,
    /// An IXFR difference's deletions, from the serial it starts at.
    Deleting,
    /// A difference's additions, up to the serial it ends at.
    Adding(u32),
    Done(How),
}

/// A transfer's records read one by one into the zone they make.
#[derive(Debug)]
struct Reading {
    zone: Name,
    /// The held zone's serial (an IXFR).
    held: Option<u32>,
    phase: Phase,
    /// The newest serial and its SOA's line.
    newest: Option<(u32, String)>,
    /// The newest SOA's refresh.
    refresh: u32,
    /// The zone's records but its SOA, by identity.
    records: BTreeMap<String, String>,
    count: usize,
}

impl Reading {
    fn new(zone: Name, held: Option<&Zone>) -> Result<Self, String> {
        let mut records = BTreeMap::new();
        if let Some(held) = held {
            for text in held.text.lines().skip(1) {
                records.insert(identity(text)?, text.to_string());
            }
        }
        Ok(Self {
            zone,
            held: held.map(|h| h.serial),
            phase: Phase::Start,
            newest: None,
            refresh: 0,
            records,
            count: 0,
        })
    }

    /// Reads one record: whether the transfer is whole.
    fn record(&mut self, r: &Record) -> Result<bool, String> {
        if r.record_type() == RecordType::TSIG {
            return Ok(false);
        }
        self.count += 1;
        if self.count > MAX_RECORDS * 2 {
            return Err(format!("the transfer has over {} records", MAX_RECORDS * 2));
        }
        let (soa, refresh) = match &r.data {
            RData::SOA(soa) => {
                if r.name != self.zone {
                    return Err(format!(
                        "an SOA of {} in the transfer of {}",
                        r.name, self.zone
                    ));
                }
                (Some(soa.serial), soa.refresh)
            }
            _ => (None, 0),
        };
        let (identity, text) = line(r);
        let newest = self.newest.as_ref().map(|(s, _)| *s);
        self.phase = match (self.phase, soa) {
            (Phase::Start, Some(serial)) => {
                self.newest = Some((serial, text));
                self.refresh = u32::try_from(refresh).unwrap_or(0);
                if self.held == Some(serial) {
                    Phase::Done(How::Current)
                } else {
                    Phase::First
                }
            }
            (Phase::Start, None) => {
                return Err("the transfer does not start with the zone's SOA".into());
            }
            // The SOA again at once: a zone of its SOA alone.
            (Phase::First | Phase::Whole, Some(serial)) if Some(serial) == newest => {
                Phase::Done(How::Axfr)
            }
            (Phase::First, Some(serial)) if self.held.is_some() => {
                if Some(serial) != self.held {
                    return Err(format!(
                        "its differences start at serial {serial}, not at ours ({})",
                        self.held.unwrap_or_default()
                    ));
                }
                Phase::Deleting
            }
            (Phase::First | Phase::Whole, None) => {
                // An IXFR answered with the whole zone: the held one goes.
                if self.phase == Phase::First {
                    self.records.clear();
                }
                self.records.insert(identity, text);
                if self.records.len() > MAX_RECORDS {
                    return Err(format!("the zone has over {MAX_RECORDS} records"));
                }
                Phase::Whole
            }
            (Phase::First | Phase::Whole, Some(serial)) => {
                return Err(format!(
                    "the transfer's last SOA has serial {serial}, its first {}",
                    newest.unwrap_or_default()
                ));
            }
            (Phase::Deleting, Some(serial)) => Phase::Adding(serial),
            (Phase::Deleting, None) => {
                if self.records.remove(&identity).is_none() {
                    return Err(format!("it deletes {text}, which the held zone lacks"));
                }
                Phase::Deleting
            }
            (Phase::Adding(to), Some(serial)) if Some(to) == newest && serial == to => {
                Phase::Done(How::Ixfr)
            }
            (Phase::Adding(to), Some(serial)) => {
                if serial != to {
                    return Err(format!(
                        "a difference starts at serial {serial}, the one before ended at {to}"
                    ));
                }
                Phase::Deleting
            }
            (Phase::Adding(to), None) => {
                self.records.insert(identity, text);
                if self.records.len() > MAX_RECORDS {
                    return Err(format!("the zone has over {MAX_RECORDS} records"));
                }
                Phase::Adding(to)
            }
            (Phase::Done(_), _) => return Ok(true),
        };
        Ok(matches!(self.phase, Phase::Done(_)))
    }

    /// The zone read, and how (once: what was read is taken).
    fn finish(&mut self) -> Result<(Zone, How), String> {
        let Phase::Done(how) = self.phase else {
            return Err("the transfer ended early".into());
        };
        let Some((serial, soa)) = self.newest.take() else {
            return Err("the transfer has no SOA".into());
        };
        let body: Vec<String> = std::mem::take(&mut self.records).into_values().collect();
        let mut text =
            String::with_capacity(body.iter().map(|l| l.len() + 1).sum::<usize>() + soa.len() + 1);
        text.push_str(&soa);
        text.push('\n');
        for l in &body {
            text.push_str(l);
            text.push('\n');
        }
        Ok((
            Zone {
                serial,
                text,
                records: body.len() + 1,
                refresh: self.refresh,
            },
            how,
        ))
    }
}

/// A held zone line's identity ([`line`]'s first part): its owner lower
/// case, its type and data without the TTL and class.
fn identity(text: &str) -> Result<String, String> {
    let mut fields = text.splitn(4, ' ');
    let (Some(owner), Some(_ttl), Some("IN"), Some(rest)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(format!("a held record does not read: {text}"));
    };
    Ok(format!("{} {rest}", owner.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use hickory_server::proto::rr::rdata::A;

    use super::*;

    fn zone() -> Name {
        Name::from_ascii("example.").unwrap()
    }

    fn soa(serial: u32) -> Record {
        let z = zone();
        Record::from_rdata(
            z.clone(),
            300,
            RData::SOA(SOA::new(z.clone(), z, serial, 60, 60, 600, 60)),
        )
    }

    fn a(name: &str, last: u8) -> Record {
        Record::from_rdata(
            Name::from_ascii(name).unwrap(),
            60,
            RData::A(A(Ipv4Addr::new(192, 0, 2, last))),
        )
    }

    /// Reads `stream` from `held`: the zone and how, or why not.
    fn read(held: Option<&Zone>, stream: &[Record]) -> Result<(Zone, How), String> {
        let mut reading = Reading::new(zone(), held)?;
        for r in stream {
            if reading.record(r)? {
                return reading.finish();
            }
        }
        Err("the stream ended early".into())
    }

    fn names(zone: &Zone) -> Vec<String> {
        zone.text.lines().map(|l| l.to_string()).collect()
    }

    #[test]
    fn a_whole_zone_reads_with_its_soa_first_and_ends_at_its_soa_again() {
        let (z, how) = read(
            None,
            &[soa(5), a("www.example.", 1), a("a.example.", 2), soa(5)],
        )
        .unwrap();
        assert_eq!(how, How::Axfr);
        assert_eq!((z.serial, z.records), (5, 3));
        assert_eq!(
            names(&z),
            [
                "example. 300 IN SOA example. example. 5 60 60 600 60",
                "a.example. 60 IN A 192.0.2.2",
                "www.example. 60 IN A 192.0.2.1",
            ]
        );
        let err = read(None, &[soa(5), a("www.example.", 1), soa(6)]).unwrap_err();
        assert!(err.contains("last SOA has serial 6"), "{err}");
        let err = read(None, &[a("www.example.", 1)]).unwrap_err();
        assert!(err.contains("does not start"), "{err}");
    }

    #[test]
    fn differences_apply_to_the_held_zone_one_after_another() {
        let (held, _) = read(
            None,
            &[soa(5), a("www.example.", 1), a("a.example.", 2), soa(5)],
        )
        .unwrap();
        // 5 -> 6 replaces www's address; 6 -> 7 adds b.
        let stream = [
            soa(7),
            soa(5),
            a("WWW.example.", 1),
            soa(6),
            a("www.example.", 3),
            soa(6),
            soa(7),
            a("b.example.", 4),
            soa(7),
        ];
        let (z, how) = read(Some(&held), &stream).unwrap();
        assert_eq!(how, How::Ixfr);
        assert_eq!((z.serial, z.records), (7, 4));
        assert_eq!(
            names(&z),
            [
                "example. 300 IN SOA example. example. 7 60 60 600 60",
                "a.example. 60 IN A 192.0.2.2",
                "b.example. 60 IN A 192.0.2.4",
                "www.example. 60 IN A 192.0.2.3",
            ]
        );
        // The same zone from a whole transfer holds the same records.
        let (whole, _) = read(
            None,
            &[
                soa(7),
                a("a.example.", 2),
                a("b.example.", 4),
                a("www.example.", 3),
                soa(7),
            ],
        )
        .unwrap();
        assert_eq!(whole, z);
        // An IXFR answered with the whole zone reads as one.
        let (z, how) = read(Some(&held), &[soa(7), a("a.example.", 2), soa(7)]).unwrap();
        assert_eq!((how, z.records), (How::Axfr, 2));
        // Up to date: one SOA.
        let (z, how) = read(Some(&held), &[soa(5)]).unwrap();
        assert_eq!((how, z), (How::Current, held.clone()));
    }

    #[test]
    fn differences_that_do_not_fit_the_held_zone_are_refused() {
        let (held, _) = read(None, &[soa(5), a("www.example.", 1), soa(5)]).unwrap();
        let err = read(
            Some(&held),
            &[soa(7), soa(4), a("www.example.", 1), soa(7), soa(7)],
        )
        .unwrap_err();
        assert!(err.contains("start at serial 4"), "{err}");
        let err = read(
            Some(&held),
            &[soa(7), soa(5), a("x.example.", 9), soa(7), soa(7)],
        )
        .unwrap_err();
        assert!(err.contains("which the held zone lacks"), "{err}");
        let err = read(
            Some(&held),
            &[soa(7), soa(5), soa(6), soa(5), soa(7), soa(7)],
        )
        .unwrap_err();
        assert!(err.contains("the one before ended at 6"), "{err}");
    }

    /// A signer, the query it signed and the server's signing of answers.
    fn signed_query() -> (TSigner, Vec<u8>, crate::tsig::Signing) {
        let signer = crate::tsig::signer("xfr-key", &[7u8; 32]).unwrap();
        let (bytes, _) = query(&zone(), RecordType::AXFR, None, Some(&signer)).unwrap();
        let mut keys = crate::tsig::TsigKeys::default();
        keys.keys.insert(
            "xfr-key".into(),
            crate::tsig::StoredKey {
                algorithm: crate::tsig::ALGORITHM.into(),
                secret: crate::tsig::Secret::new(vec![7u8; 32]),
                time_ms: 0,
                by: gtm_model::actor::Actor {
                    user: "test".into(),
                    device: "test".into(),
                },
            },
        );
        let m = Message::from_vec(&bytes).unwrap();
        let sig = m.signature().unwrap().clone();
        let crate::tsig::Verified::Good(signing) = crate::tsig::verify(&keys, &bytes, &sig, now())
        else {
            panic!("the query does not verify");
        };
        (signer, bytes, signing)
    }

    /// An answer to the query `id`.
    fn response(id: u16, records: &[Record]) -> Vec<u8> {
        let mut m = Message::new(id, MessageType::Response, OpCode::Query);
        m.answers.extend(records.iter().cloned());
        m.to_vec().unwrap()
    }

    #[test]
    fn a_signed_transfer_verifies_message_by_message_and_a_changed_one_does_not() {
        let (signer, query, signing) = signed_query();
        let id = u16::from_be_bytes([query[0], query[1]]);
        let response = |records: &[Record]| response(id, records);
        let t = now();
        let mut first = response(&[soa(5)]);
        let mac = signing.sign(&mut first, t).unwrap();
        let mut second = response(&[a("www.example.", 1), soa(5)]);
        signing.sign_next(&mut second, &mac, t).unwrap();

        let mut chain = Chain::new(signer.clone(), signing.request_mac().to_vec());
        assert!(chain.read(&first, t).unwrap().1);
        assert!(chain.read(&second, t).unwrap().1);

        // A record changed in flight.
        let mut chain = Chain::new(signer.clone(), signing.request_mac().to_vec());
        chain.read(&first, t).unwrap();
        let mut changed = second.clone();
        let at = changed.len() - 100;
        changed[at] ^= 1;
        assert!(chain.read(&changed, t).is_err());

        // Out of time.
        let mut chain = Chain::new(signer.clone(), signing.request_mac().to_vec());
        let err = chain.read(&first, t + 1000).unwrap_err();
        assert!(err.contains("TSIG time"), "{err}");

        // An unsigned first answer, and too many unsigned in a row.
        let mut chain = Chain::new(signer.clone(), signing.request_mac().to_vec());
        let err = chain.read(&response(&[soa(5)]), t).unwrap_err();
        assert!(err.contains("first answer is not signed"), "{err}");
        let mut chain = Chain::new(signer, signing.request_mac().to_vec());
        chain.read(&first, t).unwrap();
        let plain = response(&[a("www.example.", 1)]);
        for _ in 0..MAX_UNSIGNED {
            assert!(!chain.read(&plain, t).unwrap().1);
        }
        let err = chain.read(&plain, t).unwrap_err();
        assert!(err.contains("not signed"), "{err}");
    }
}
