//! RFC 2136 dynamic update over UDP and TCP (docs/transfer.md, "Dynamic
//! update").
//!
//! An UPDATE (opcode 5) must be signed with a TSIG key of the cluster:
//! unsigned, it is REFUSED; a signature that does not verify gets NOTAUTH
//! with the TSIG error, as a query's does (RFC 8945 §5.2). A signed one is
//! read here into an [`Update`] (the zone, the prerequisites, the changes,
//! each record's data in zone-file syntax) and handed to the [`Updater`]
//! the device serves with ([`Updates::serve`]): the layer above proposes
//! it as one replicated command and decides its response code once the
//! command is committed and applied (or refused). This layer never sees
//! the configuration: grants, prerequisites and the change itself are the
//! state machine's.
//!
//! Bounded: at most [`MAX_IN_FLIGHT`] updates wait for their outcome per
//! device (one more is answered SERVFAIL at once, so the client tries
//! again or another server), each of at most [`MAX_RECORDS`] records
//! (more: REFUSED), each waited for at most [`DEADLINE`] (then SERVFAIL).
//! UDP workers are threads: an update they read is decided on the tokio
//! runtime the device gave, which sends the response from a clone of the
//! worker's socket.

use std::{net::SocketAddr, sync::Arc};

pub use super::updater::*;
use hickory_server::{
    proto::{
        op::OpCode,
        rr::{DNSClass, Name, RData, Record, RecordType},
    },
    server::Request,
};

use super::{
    handler::{Handler, Transport, bare, encode, tsig_refused},
    malformed::Reason,
    tsig::{self, Signing, Verified},
    wire,
};

/// Whether a message is an UPDATE request (QR clear, opcode 5).
pub fn is_update(bytes: &[u8]) -> bool {
    bytes
        .get(2)
        .is_some_and(|b| b & 0x80 == 0 && (b >> 3) & 0x0f == 5)
}

/// A verified update waiting for its outcome.
struct Pending {
    request: Request,
    signing: Signing,
    id: [u8; 16],
    update: Update,
}

/// What reading an update came to.
enum Read {
    /// Answered without deciding anything (`None`: nothing to send).
    Done(Option<Vec<u8>>),
    Pending(Box<Pending>),
}

/// An UPDATE read by a UDP worker: `None` when this device decides no
/// updates (the general path answers it, NOTIMP); else the response to
/// send now, if any (an update to decide is decided on the runtime, which
/// sends its response from `socket`).
pub fn udp(
    handler: &Handler,
    query: &[u8],
    src: SocketAddr,
    socket: &Arc<std::net::UdpSocket>,
) -> Option<Option<Vec<u8>>> {
    let serving = handler.state.updates.serving()?;
    Some(match read(handler, query, src, Transport::Udp) {
        Read::Done(out) => out,
        Read::Pending(pending) => match handler.state.updates.seat() {
            None => respond(handler, &pending, ResponseCode::ServFail),
            Some(seat) => {
                let (handler, socket) = (handler.clone(), socket.clone());
                serving.runtime.spawn(async move {
                    let code = decide(&handler, &pending, seat).await;
                    if let Some(out) = respond(&handler, &pending, code) {
                        // A datagram this small is sent at once or dropped.
                        let _ = socket.send_to(&out, src);
                    }
                });
                None
            }
        },
    })
}

/// An UPDATE read from a TCP connection: `None` when this device decides
/// no updates (the general path answers it); else its response, if any,
/// once decided.
pub async fn tcp(handler: &Handler, message: &[u8], peer: SocketAddr) -> Option<Option<Vec<u8>>> {
    handler.state.updates.serving()?;
    Some(match read(handler, message, peer, Transport::Tcp) {
        Read::Done(out) => out,
        Read::Pending(pending) => match handler.state.updates.seat() {
            None => respond(handler, &pending, ResponseCode::ServFail),
            Some(seat) => {
                let code = decide(handler, &pending, seat).await;
                respond(handler, &pending, code)
            }
        },
    })
}

/// Reads and verifies an update: what to answer at once, or the update
/// to decide.
fn read(handler: &Handler, bytes: &[u8], src: SocketAddr, transport: Transport) -> Read {
    use hickory_server::net::xfer::Protocol;
    let state = &handler.state;
    if bytes.len() < 12 {
        return Read::Done(None);
    }
    let protocol = match transport {
        Transport::Udp => Protocol::Udp,
        Transport::Tcp => Protocol::Tcp,
    };
    let request = wire::edns(bytes)
        .map_err(|e| Reason::from(&e))
        .and_then(|_| {
            Request::from_bytes(bytes.to_vec(), src, protocol).map_err(|_| Reason::Undecodable)
        });
    let request = match request {
        Ok(r) => r,
        Err(reason) => {
            state.metrics.malformed.report(reason, src.ip());
            state
                .metrics
                .response(u16::from(RecordType::SOA), u16::from(ResponseCode::FormErr));
            return Read::Done(Some(wire::formerr(bytes, state.edns_payload)));
        }
    };
    let now = tsig::now_secs();
    let signing = match request.signature.as_deref() {
        // Only a key of the cluster may change anything.
        None => return Read::Done(answer(handler, &request, ResponseCode::Refused, None)),
        Some(sig) => match tsig::verify(&state.tsig.load(), bytes, sig, now) {
            Verified::Good(signing) => signing,
            refused => return Read::Done(tsig_refused(state, &request, refused, now)),
        },
    };
    match parse(&request, &signing.key) {
        Err(code) => Read::Done(answer(handler, &request, code, Some(&signing))),
        Ok(update) => {
            let mut id = [0u8; 16];
            for (to, from) in id.iter_mut().zip(signing.request_mac()) {
                *to = *from;
            }
            Read::Pending(Box::new(Pending {
                request,
                signing,
                id,
                update,
            }))
        }
    }
}

/// The update's outcome from the updater, within [`DEADLINE`].
async fn decide(handler: &Handler, pending: &Pending, seat: Seat) -> ResponseCode {
    let Some(serving) = handler.state.updates.serving() else {
        return ResponseCode::NotImp;
    };
    let decision = serving.updater.update(pending.id, pending.update.clone());
    let code = tokio::time::timeout(DEADLINE, decision)
        .await
        .unwrap_or(ResponseCode::ServFail);
    drop(seat);
    code
}

fn respond(handler: &Handler, pending: &Pending, code: ResponseCode) -> Option<Vec<u8>> {
    answer(handler, &pending.request, code, Some(&pending.signing))
}

/// The response to an update: its header with `code`, its zone section,
/// an OPT when it had one, signed with its key when it was verified.
fn answer(
    handler: &Handler,
    request: &Request,
    code: ResponseCode,
    signing: Option<&Signing>,
) -> Option<Vec<u8>> {
    let state = &handler.state;
    let d = bare(state, request, code, None);
    state
        .metrics
        .response(u16::from(RecordType::SOA), u16::from(code));
    let mut out = encode(request, &d, false)?;
    if let Some(s) = signing {
        s.sign(&mut out, tsig::now_secs())?;
    }
    Some(out)
}

/// The update a verified request asks for, signed with `key`, or the
/// response code of what is wrong with its form (RFC 2136 §3.1, §3.2.1,
/// §3.4.1.1): not exactly one zone of type SOA (FORMERR), a zone class
/// other than IN (NOTAUTH), a record outside the zone (NOTZONE), more
/// than [`MAX_RECORDS`] records (REFUSED). Everything else is the state
/// machine's to judge.
fn parse(request: &Request, key: &str) -> Result<Update, ResponseCode> {
    if request.metadata.op_code != OpCode::Update {
        return Err(ResponseCode::NotImp);
    }
    let [zone] = request.queries.queries() else {
        return Err(ResponseCode::FormErr);
    };
    if zone.query_type() != RecordType::SOA {
        return Err(ResponseCode::FormErr);
    }
    if zone.query_class() != DNSClass::IN {
        return Err(ResponseCode::NotAuth);
    }
    let apex = plain(&zone.name().clone().into());
    if request.answers.len() + request.authorities.len() > MAX_RECORDS {
        return Err(ResponseCode::Refused);
    }
    let within = |r: &Record| -> Result<UpdateRr, ResponseCode> {
        let name = plain(&r.name);
        let inside = name == apex
            || name
                .strip_suffix(apex.as_str())
                .is_some_and(|p| p.ends_with('.'));
        if !inside || apex.is_empty() {
            return Err(ResponseCode::NotZone);
        }
        let rtype = u16::from(r.record_type());
        let data = match &r.data {
            RData::Update0(_) => None,
            data => Some(gtm_model::compile::presentation(
                gtm_model::config::RecordType::from_code(rtype),
                data,
            )),
        };
        Ok(UpdateRr {
            name,
            class: u16::from(r.dns_class),
            rtype,
            ttl: r.ttl,
            data,
        })
    };
    Ok(Update {
        key: key.to_string(),
        zone: apex.clone(),
        prerequisites: request
            .answers
            .iter()
            .map(within)
            .collect::<Result<_, _>>()?,
        updates: request
            .authorities
            .iter()
            .map(within)
            .collect::<Result<_, _>>()?,
    })
}

/// A name lower case, without its final dot.
fn plain(name: &Name) -> String {
    name.to_lowercase()
        .to_ascii()
        .trim_end_matches('.')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_their_code() {
        for code in [
            ResponseCode::FormErr,
            ResponseCode::NXDomain,
            ResponseCode::Refused,
            ResponseCode::YXDomain,
            ResponseCode::YXRRSet,
            ResponseCode::NXRRSet,
            ResponseCode::NotAuth,
            ResponseCode::NotZone,
            ResponseCode::ServFail,
        ] {
            assert_eq!(code_of(&refusal(code, "why: because")), Some(code));
        }
        assert_eq!(code_of("the configuration is invalid"), None);
    }

    #[test]
    fn only_update_requests_are_updates() {
        let mut header = [0u8; 12];
        header[2] = 5 << 3;
        assert!(is_update(&header));
        header[2] |= 0x80;
        assert!(!is_update(&header), "a response");
        header[2] = 0;
        assert!(!is_update(&header));
        assert!(!is_update(&[0, 0]));
    }
}

#[cfg(test)]
mod knsupdate_tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_compressed_update_reads() {
        let bytes = hex(
            "b12828000001000000010001037570640474657374000006000104686f7374036b3873c00c000100010000003c0004c000020a0461636d650000fa00ff00000000003d0b686d61632d7368613235360000006b158365012c00201d24cb95f1fedb41c21ca33112aa0234e46122d03ce8d8c3c9809166a60cf49eb12800000000",
        );
        wire::edns(&bytes).unwrap();
        let request = Request::from_bytes(
            bytes,
            "127.0.0.1:5".parse().unwrap(),
            hickory_server::net::xfer::Protocol::Udp,
        )
        .unwrap();
        let update = parse(&request, "acme").unwrap();
        assert_eq!(update.updates[0].name, "host.k8s.upd.test", "{update:?}");
    }
}
