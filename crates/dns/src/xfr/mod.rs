//! Zone transfers (AXFR, RFC 5936; IXFR, RFC 1995) to the secondaries a
//! domain lists, and the serial of a transferred zone (docs/transfer.md).
//!
//! Only over TCP (plain, or inside TLS: `xot`), only for a query signed
//! with a TSIG key the domain's secondaries name, and only from the IP of
//! a secondary with that key; anything else asking for a transfer is
//! REFUSED (with Extended DNS Error 18 when it has EDNS). The transferred view is
//! the zone as a client of no particular place sees it ([`view`]), signed
//! with an NSEC chain when the zone is signed. Transfers serve the views
//! the `notify` worker recorded in the [`journal::Journal`] with each new
//! serial, never the live snapshot, so IXFR's differences start exactly
//! where a secondary is.
//!
//! The serial of a zone with secondaries is not the configuration version:
//! the view also changes when health moves a steered record's default
//! answer. It is a clock ([`next_serial`]): seconds since the epoch when
//! this device built the view, and always above the last one it gave, so it
//! moves with every configuration installed and, through the NOTIFY worker
//! (`notify`), with every change of a default answer.

use std::{
    net::{IpAddr, SocketAddr},
    sync::atomic::{AtomicU32, Ordering},
};

use hickory_server::{
    net::xfer::Protocol,
    proto::{
        op::{Edns, Message, MessageType, OpCode, Query, ResponseCode},
        rr::{Name, RData, RecordType},
    },
    server::Request,
};

pub mod journal;
pub mod transfers;
pub mod view;

use transfers::Kind;
pub use transfers::{NotifyStatus, TransferZone, Transfers};
pub use view::{NsecCache, view};

use super::{
    ede::Ede,
    handler::Handler,
    snapshot::Snapshot,
    tsig::{self, Verified},
    wire,
};

/// Bytes of records (as encoded alone) per transfer message: well within a
/// message's 65,535 with compression, the header and the TSIG record.
const MESSAGE_BYTES: usize = 16_000;

const TYPE_AXFR: u16 = 252;
const TYPE_IXFR: u16 = 251;

/// The last serial this process gave a transferred zone.
static LAST_SERIAL: AtomicU32 = AtomicU32::new(0);

/// A new serial for a transferred view: the time in seconds, or one above
/// the last serial given when that is not below it (several changes in one
/// second, or a clock stepped back).
pub fn next_serial() -> u32 {
    let now = u32::try_from(tsig::now_secs()).unwrap_or(u32::MAX);
    let mut last = LAST_SERIAL.load(Ordering::Relaxed);
    loop {
        let next = now.max(last.wrapping_add(1));
        match LAST_SERIAL.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// The serial a zone's view is at: its SOA's.
pub fn serial(snapshot: &Snapshot, zone: usize) -> Option<u32> {
    let apex = &snapshot.zones.get(zone)?.apex;
    let slot = snapshot.apex_slot(zone, RecordType::SOA)?;
    let answer = slot.answer.load();
    let record = answer.groups.first()?.first(apex)?;
    match &record.data {
        RData::SOA(soa) => Some(soa.serial),
        _ => None,
    }
}

/// Answers a transfer request (AXFR or IXFR) over TCP: the framed
/// messages to send, or `None` for any other message (the general path
/// answers it).
pub fn answer_tcp(handler: &Handler, bytes: &[u8], peer: SocketAddr) -> Option<Vec<Vec<u8>>> {
    if !is_transfer(bytes) {
        return None;
    }
    let request = Request::from_bytes(bytes.to_vec(), peer, Protocol::Tcp).ok()?;
    let state = &handler.state;
    let query = request.queries.queries().first()?;
    let qname: Name = query.name().clone().into();
    let qtype = query.query_type();
    let question = Query::query(qname.clone(), qtype);
    let id = request.metadata.id;
    // A refusal carries Extended DNS Error 18 (Prohibited) when the query
    // has EDNS.
    let prohibited = request.edns.as_ref().map(|e| {
        let mut reply = Edns::new();
        reply.set_max_payload(state.edns_payload);
        reply.set_version(0);
        reply.set_dnssec_ok(e.flags().dnssec_ok);
        reply.options_mut().insert(Ede::Prohibited.option());
        reply
    });
    let Some(sig) = request.signature.as_deref() else {
        return frame(vec![refused(id, &question, prohibited)?]);
    };
    let now = tsig::now_secs();
    let signing = match tsig::verify(&state.tsig.load(), bytes, sig, now) {
        Verified::Good(s) => s,
        Verified::Unsigned { tsig: record, .. } => {
            let mut out = error(id, &question, ResponseCode::NotAuth)?;
            tsig::append(&mut out, &record)?;
            return frame(vec![out]);
        }
        Verified::BadTime {
            signing,
            request_time,
        } => {
            let mut out = error(id, &question, ResponseCode::NotAuth)?;
            signing.sign_badtime(&mut out, request_time, now)?;
            return frame(vec![out]);
        }
    };
    let zones = state.transfers.zones.load();
    // The zone of the secondary asking: a view's when it names one
    // (docs/views.md).
    let allowed = zones.iter().find(|z| {
        z.apex == qname
            && z.secondaries
                .iter()
                .any(|s| s.key == signing.key && same_ip(s.address.ip(), peer.ip()))
    });
    let Some(allowed) = allowed else {
        tracing::info!(zone = %qname, peer = %peer, key = %signing.key, "zone transfer refused: not a secondary of this zone with this key");
        let mut out = refused(id, &question, prohibited)?;
        signing.sign(&mut out, now)?;
        return frame(vec![out]);
    };
    let Some(history) = state.transfers.journal.get(&allowed.key) else {
        // The notify worker records a zone's first view within moments of
        // its configuration (or of a start); until then there is nothing
        // consistent to send. A secondary retries.
        tracing::info!(zone = %qname, peer = %peer, "zone transfer answered SERVFAIL: the zone's transfer view is not recorded yet");
        let mut out = error(id, &question, ResponseCode::ServFail)?;
        signing.sign(&mut out, now)?;
        return frame(vec![out]);
    };
    let current = &history.current;
    // IXFR (RFC 1995 §4): the SOA alone to a client at our serial, the
    // differences since its serial when the history reaches back to it,
    // else the whole zone as AXFR sends it.
    let mut records: Vec<&[u8]> = vec![&current.soa];
    let diffs = match (qtype, client_serial(&request)) {
        (RecordType::IXFR, Some(serial)) => history.since(serial),
        _ => None,
    };
    let kind = match diffs {
        Some(diffs) if diffs.is_empty() => Kind::UpToDate,
        Some(diffs) => {
            for d in &diffs {
                records.push(&d.from_soa);
                records.extend(d.removed.iter());
                records.push(&d.to_soa);
                records.extend(d.added.iter());
            }
            records.push(&current.soa);
            // `records` borrows from `diffs`: sent before they go.
            return send(
                &state.transfers,
                &qname,
                peer,
                &signing,
                Kind::Incremental,
                current.serial,
                &records,
                id,
                &question,
                now,
            );
        }
        None => {
            records.extend(current.records.iter());
            records.push(&current.soa);
            Kind::Whole
        }
    };
    send(
        &state.transfers,
        &qname,
        peer,
        &signing,
        kind,
        current.serial,
        &records,
        id,
        &question,
        now,
    )
}

/// Assembles, counts, logs and frames a transfer's messages.
#[allow(clippy::too_many_arguments)]
fn send(
    transfers: &Transfers,
    zone: &Name,
    peer: SocketAddr,
    signing: &tsig::Signing,
    kind: Kind,
    serial: u32,
    records: &[&[u8]],
    id: u16,
    question: &Query,
    now: u64,
) -> Option<Vec<Vec<u8>>> {
    let messages = assemble(id, question, records, signing, now)?;
    transfers.count(kind);
    let (key, count, sent) = (&signing.key, records.len(), messages.len());
    tracing::info!(zone = %zone, peer = %peer, key, kind = kind.label(), serial, records = count, messages = sent, "zone transferred");
    frame(messages)
}

/// The transfer's messages, each with its TSIG: the encoded records cut
/// into messages of about [`MESSAGE_BYTES`] after the question.
fn assemble(
    id: u16,
    question: &Query,
    records: &[&[u8]],
    signing: &tsig::Signing,
    now: u64,
) -> Option<Vec<Vec<u8>>> {
    let mut head = Message::new(id, MessageType::Response, OpCode::Query);
    head.metadata.authoritative = true;
    head.add_query(question.clone());
    let head = head.to_vec().ok()?;
    let mut messages = Vec::new();
    let mut mac: Option<Vec<u8>> = None;
    let mut rest = records;
    while !rest.is_empty() {
        let (mut size, mut count) = (0, 0);
        for r in rest {
            if count > 0 && size + r.len() > MESSAGE_BYTES {
                break;
            }
            size += r.len();
            count += 1;
        }
        let (these, later) = rest.split_at(count);
        rest = later;
        let mut out = Vec::with_capacity(head.len() + size + 128);
        out.extend_from_slice(&head);
        out.get_mut(6..8)?
            .copy_from_slice(&u16::try_from(count).ok()?.to_be_bytes());
        for r in these {
            out.extend_from_slice(r);
        }
        mac = Some(match &mac {
            None => signing.sign(&mut out, now)?,
            Some(previous) => signing.sign_next(&mut out, previous, now)?,
        });
        messages.push(out);
    }
    Some(messages)
}

/// Whether a message is a transfer request: a query (QR=0, opcode 0) of
/// one question, class IN, for AXFR or IXFR.
pub fn is_transfer(bytes: &[u8]) -> bool {
    if bytes.len() < 12 || bytes[2] & 0xF8 != 0 || bytes[4..6] != [0, 1] {
        return false;
    }
    wire::question(bytes).is_ok_and(|q| matches!(q.qtype, TYPE_AXFR | TYPE_IXFR) && q.qclass == 1)
}

fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// The serial of the SOA an IXFR query carries in its authority section.
fn client_serial(request: &Request) -> Option<u32> {
    let message = Message::from_vec(request.as_slice()).ok()?;
    message.authorities.iter().find_map(|r| match &r.data {
        RData::SOA(soa) => Some(soa.serial),
        _ => None,
    })
}

fn error(id: u16, question: &Query, code: ResponseCode) -> Option<Vec<u8>> {
    let mut m = Message::new(id, MessageType::Response, OpCode::Query);
    m.metadata.response_code = code;
    m.add_query(question.clone());
    m.to_vec().ok()
}

/// REFUSED, with the OPT `edns` when the query had one.
fn refused(id: u16, question: &Query, edns: Option<Edns>) -> Option<Vec<u8>> {
    let mut m = Message::new(id, MessageType::Response, OpCode::Query);
    m.metadata.response_code = ResponseCode::Refused;
    m.add_query(question.clone());
    m.edns = edns;
    m.to_vec().ok()
}

/// Each message behind its two-byte length.
fn frame(messages: Vec<Vec<u8>>) -> Option<Vec<Vec<u8>>> {
    messages
        .into_iter()
        .map(|m| {
            let len = u16::try_from(m.len()).ok()?;
            let mut framed = Vec::with_capacity(m.len() + 2);
            framed.extend_from_slice(&len.to_be_bytes());
            framed.extend_from_slice(&m);
            Some(framed)
        })
        .collect()
}
