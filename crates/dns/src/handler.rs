//! The general answer path over the current snapshot, for UDP queries the
//! fast path declines and for every TCP message.
//!
//! Our reader checks the message first (EDNS and ECS rules, compression
//! pointers), hickory decodes it, and the handler decides the response:
//! opcode and class checks, EDNS (BADVERS, payload, DO, ECS, NSID), CH
//! identity names, and the lookup itself. This path also owns truncation
//! and the FORMERR of an unreadable query, the same over UDP and TCP.

use std::{cell::RefCell, sync::Arc};

use arc_swap::ArcSwap;
use hickory_server::{
    proto::{
        op::{Edns, Metadata, OpCode, ResponseCode},
        rr::{
            DNSClass, Name, Record, RecordType,
            rdata::opt::{ClientSubnet, EdnsOption},
        },
        serialize::binary::{BinDecoder, BinEncoder},
    },
    server::Request,
    zone_handler::{MessageResponseBuilder, Queries},
};

use super::{
    dnstap::{Note, TapSlot},
    ede::Ede,
    identity,
    lookup::lookup,
    malformed::Reason,
    metrics::DnsMetrics,
    resolved::Resolved,
    snapshot::{Client, Draw, Snapshot},
    tsig::Verified,
    wire::{self, EdnsInfo},
};
use gtm_geo::Geo;

/// What every answer path reads: swapped whole on change, never locked.
#[derive(Debug, Clone)]
pub struct DnsState {
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub geo: Arc<ArcSwap<Geo>>,
    /// The EDNS payload we advertise and the most a UDP response uses.
    pub edns_payload: u16,
    pub metrics: Arc<DnsMetrics>,
    /// This device's NSID value, also answered to CH TXT `id.server.`.
    pub nsid: Arc<str>,
    /// The UDP rate limit's table, shared by every UDP worker.
    pub rrl: Arc<super::rrl::Rrl>,
    /// The cluster's cookie secrets.
    pub cookies: Arc<super::cookies::Cookies>,
    /// The cluster's TSIG keys, swapped whole when a key command applies.
    pub tsig: Arc<ArcSwap<super::tsig::TsigKeys>>,
    /// Zone transfers: who may transfer what, the NOTIFY worker's state.
    pub transfers: Arc<super::xfr::transfers::Transfers>,
    /// The dnstap tap, when on (`dnstap::Dnstap` starts and swaps it).
    pub dnstap: Arc<TapSlot>,
    /// Dynamic updates: what decides them, and how many wait (`update`).
    pub updates: Arc<super::updater::Updates>,
    /// NOTIFYs from primaries: what takes them (`notify_in`).
    pub notices: Arc<super::notify_in::Notices>,
}

impl DnsState {
    pub fn new(snapshot: Snapshot, geo: Geo, edns_payload: u16) -> Self {
        Self {
            snapshot: Arc::new(ArcSwap::from_pointee(snapshot)),
            geo: Arc::new(ArcSwap::from_pointee(geo)),
            edns_payload,
            metrics: Arc::default(),
            nsid: Arc::from(""),
            rrl: Arc::default(),
            cookies: Arc::default(),
            tsig: Arc::default(),
            transfers: Arc::default(),
            dnstap: Arc::default(),
            updates: Arc::default(),
            notices: Arc::default(),
        }
    }

    /// The same state answering `nsid` as this device's identity.
    pub fn with_nsid(mut self, nsid: &str) -> Self {
        self.nsid = Arc::from(nsid);
        self
    }

    /// The largest UDP response for a query with this EDNS (RFC 6891 §6.2.5:
    /// at least 512; no EDNS means 512).
    pub fn udp_limit(&self, edns: Option<&wire::EdnsInfo>) -> u16 {
        match edns {
            Some(e) => e.payload.clamp(512, self.edns_payload.max(512)),
            None => 512,
        }
    }
}

thread_local! {
    /// Balance draws of this thread.
    pub(crate) static DRAW: RefCell<Draw> = RefCell::new(Draw::new(fastrand::u64(..)));
}

/// The hickory request handler of the general path.
#[derive(Debug, Clone)]
pub struct Handler {
    pub state: DnsState,
}

/// A response decided but not yet encoded.
#[derive(Debug)]
pub struct Decided {
    pub metadata: Metadata,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    /// The additional section (a referral's glue).
    pub additional: Vec<Record>,
    pub edns: Option<Edns>,
    /// False when the question itself is malformed and must not be echoed.
    pub echo_question: bool,
}

impl Handler {
    /// Decides the response to a request whose EDNS was read as `info`.
    pub fn decide_read(
        &self,
        request: &Request,
        info: Option<EdnsInfo>,
        draw: &mut Draw,
    ) -> Decided {
        self.decide_noted(request, info, draw, &mut ())
    }

    /// [`Handler::decide_read`], noting what decided a steered answer in
    /// `note` (dnstap).
    pub fn decide_noted(
        &self,
        request: &Request,
        info: Option<EdnsInfo>,
        draw: &mut Draw,
        note: &mut impl Note,
    ) -> Decided {
        let decided = |code: ResponseCode, resolved: Resolved, edns: Option<Edns>| {
            let mut metadata = Metadata::response_from_request(&request.metadata);
            metadata.response_code = code;
            // Authoritative for every answer from our zones, not for errors
            // nor for a referral to a child zone.
            metadata.authoritative = matches!(code, ResponseCode::NoError | ResponseCode::NXDomain)
                && !resolved.referral;
            Decided {
                metadata,
                answers: resolved.answers,
                authority: resolved.authority,
                additional: resolved.additional,
                edns,
                // A message with several questions gets FORMERR without
                // them: echoed, they could outgrow the client's limit.
                echo_question: request.queries.queries().len() <= 1,
            }
        };
        // The OPT of the response, when the query has one, with the
        // extended error `ede` (RFC 8914; crate::ede).
        let reply_edns = |scope: u8, ecs: Option<&wire::Ecs>, ede: Option<Ede>| -> Option<Edns> {
            let req = request.edns.as_ref()?;
            let mut e = Edns::new();
            e.set_max_payload(self.state.edns_payload);
            e.set_version(0);
            e.set_dnssec_ok(req.flags().dnssec_ok);
            if let Some(ecs) = ecs {
                e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
                    ecs.address,
                    ecs.source_prefix,
                    scope,
                )));
            }
            if info.is_some_and(|i| i.nsid)
                && let Some(payload) = identity::nsid_payload(&self.state.nsid)
            {
                e.options_mut().insert(EdnsOption::NSID(payload));
            }
            if let Some(ede) = ede {
                e.options_mut().insert(ede.option());
            }
            Some(e)
        };
        let ecs = info.and_then(|i| i.ecs);
        if info.is_some_and(|i| i.version > 0) {
            return decided(
                ResponseCode::BADVERS,
                Resolved::default(),
                reply_edns(0, None, None),
            );
        }
        if request.metadata.op_code != OpCode::Query {
            let mut d = decided(
                ResponseCode::NotImp,
                Resolved::default(),
                reply_edns(0, ecs.as_ref(), Some(Ede::NotSupported)),
            );
            // Nothing of the query's was done: no flag of it is echoed.
            d.metadata.recursion_desired = false;
            d.metadata.checking_disabled = false;
            return d;
        }
        let queries = request.queries.queries();
        // No question, only a cookie: a client learning our server cookie
        // (RFC 7873 §5.4) gets NOERROR and the cookie, added with the OPT.
        if queries.is_empty() && info.is_some_and(|i| i.cookie.is_some()) {
            let mut d = decided(
                ResponseCode::NoError,
                Resolved::default(),
                reply_edns(0, ecs.as_ref(), None),
            );
            d.metadata.authoritative = false;
            return d;
        }
        let [query] = queries else {
            return decided(
                ResponseCode::FormErr,
                Resolved::default(),
                reply_edns(0, ecs.as_ref(), None),
            );
        };
        let qname: Name = query.name().clone().into();
        if query.query_class() == DNSClass::CH {
            let resolved = identity::chaos(&self.state.nsid, &qname, query.query_type());
            let edns = reply_edns(0, ecs.as_ref(), resolved.ede);
            return decided(resolved.rcode, resolved, edns);
        }
        // No zone of another class is served.
        if query.query_class() != DNSClass::IN {
            return decided(
                ResponseCode::Refused,
                Resolved::default(),
                reply_edns(0, ecs.as_ref(), Some(Ede::NotAuthoritative)),
            );
        }
        // Transfers are answered over TCP (`xfr`); asked here (over UDP)
        // they are refused, not answered with an empty NOERROR that a
        // transfer client reads as a broken zone.
        if matches!(query.query_type(), RecordType::AXFR | RecordType::IXFR) {
            return decided(
                ResponseCode::Refused,
                Resolved::default(),
                reply_edns(0, ecs.as_ref(), Some(Ede::NotSupported)),
            );
        }
        // NXNAME is a meta-type of compact denial (RFC 9824 §3.5).
        if query.query_type() == crate::dnssec::signer::NXNAME {
            return decided(
                ResponseCode::FormErr,
                Resolved::default(),
                reply_edns(0, ecs.as_ref(), Some(Ede::InvalidQueryType)),
            );
        }
        let client = Client {
            src: request.src().ip(),
            ecs,
        };
        let dnssec_ok = info.is_some_and(|i| i.dnssec_ok);
        let snapshot = self.state.snapshot.load();
        let geo = self.state.geo.load();
        let resolved = lookup(
            &snapshot,
            &geo,
            &qname,
            query.query_type(),
            &client,
            draw,
            dnssec_ok,
            note,
        );
        let code = resolved.rcode;
        let edns = reply_edns(resolved.scope, ecs.as_ref(), resolved.ede);
        decided(code, resolved, edns)
    }
}

/// The queries a response echoes: the request's, or none (`None` only if
/// an empty section could not be made, which reading nothing cannot do).
fn echoed<'r>(request: &'r Request, d: &Decided, none: &'r Option<Queries>) -> Option<&'r Queries> {
    if d.echo_question {
        Some(&request.queries)
    } else {
        none.as_ref()
    }
}

/// An empty question section.
fn no_queries() -> Option<Queries> {
    Queries::read(&mut BinDecoder::new(&[]), 0).ok()
}

/// Answers one UDP query by the general path; `None` when nothing should be
/// sent back (not a query, or shorter than a header). Counts the response.
pub fn answer_udp(
    handler: &Handler,
    bytes: &[u8],
    src: std::net::SocketAddr,
    draw: &mut Draw,
) -> Option<Vec<u8>> {
    answer(handler, bytes, src, Transport::Udp, draw)
}

/// How a query came: the limit of its response follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The client's EDNS payload size (512 without EDNS), at most ours.
    Udp,
    /// 65,535 bytes: the two-byte length prefix's limit.
    Tcp,
}

/// Answers one query (UDP datagram or TCP message) by the general path;
/// `None` when nothing should be sent back (a response, or shorter than a
/// header). An unreadable query gets a FORMERR that keeps its question and
/// OPT whenever they read. Counts the response.
pub fn answer(
    handler: &Handler,
    bytes: &[u8],
    src: std::net::SocketAddr,
    transport: Transport,
    draw: &mut Draw,
) -> Option<Vec<u8>> {
    answer_noted(handler, bytes, src, transport, draw, &mut ())
}

/// [`answer`], noting what decided a steered answer in `note` (dnstap).
pub fn answer_noted(
    handler: &Handler,
    bytes: &[u8],
    src: std::net::SocketAddr,
    transport: Transport,
    draw: &mut Draw,
    note: &mut impl Note,
) -> Option<Vec<u8>> {
    use hickory_server::net::xfer::Protocol;
    if bytes.len() < 12 || bytes[2] & 0x80 != 0 {
        return None;
    }
    let state = &handler.state;
    // Our reader first: it refuses what hickory's decoder lets through
    // (ECS rules, pointers into the header) and sees malformed options
    // before hickory would log each one.
    let read = wire::edns(bytes).map_err(|e| Reason::from(&e));
    let request = match read {
        Ok(info) => {
            let protocol = match transport {
                Transport::Udp => Protocol::Udp,
                Transport::Tcp => Protocol::Tcp,
            };
            Request::from_bytes(bytes.to_vec(), src, protocol)
                .map(|r| (r, info))
                .map_err(|_| Reason::Undecodable)
        }
        Err(reason) => Err(reason),
    };
    let (request, info) = match request {
        Ok(read) => read,
        Err(reason) => {
            state.metrics.malformed.report(reason, src.ip());
            let out = wire::formerr(bytes, state.edns_payload);
            let qtype = wire::question(bytes).map_or(0, |q| q.qtype);
            state
                .metrics
                .response(qtype, u16::from(ResponseCode::FormErr));
            return Some(out);
        }
    };
    // A signed query is answered signed, or refused (RFC 8945 §5.2).
    let now = super::tsig::now_secs();
    let signing = match request.signature.as_deref() {
        None => None,
        Some(sig) => match super::tsig::verify(&state.tsig.load(), bytes, sig, now) {
            Verified::Good(signing) => Some(signing),
            refused => return tsig_refused(state, &request, refused, now),
        },
    };
    let max_size = match transport {
        Transport::Udp => usize::from(state.udp_limit(info.as_ref())),
        Transport::Tcp => usize::from(u16::MAX),
    };
    // Room for the TSIG record a signed answer ends with.
    let max_size = match &signing {
        Some(s) => max_size.saturating_sub(super::tsig::record_room(&s.key)),
        None => max_size,
    };
    let sign = |mut out: Vec<u8>| match &signing {
        Some(s) => s.sign(&mut out, now).map(|_| out),
        None => Some(out),
    };
    // A NOTIFY from a primary, when this device takes them.
    if request.metadata.op_code == OpCode::Notify
        && let Some((code, ede)) = state
            .notices
            .decide(&request, signing.as_ref().map(|s| s.key.as_str()))
    {
        // RFC 1996 §4.7: authoritative when taken.
        let mut d = bare(state, &request, code, ede);
        d.metadata.authoritative = code == ResponseCode::NoError;
        state
            .metrics
            .response(u16::from(RecordType::SOA), u16::from(code));
        return sign(encode(&request, &d, false)?);
    }
    let mut d = handler.decide_noted(&request, info, draw, note);
    super::cookies::add_options(
        &state.cookies,
        d.edns.as_mut(),
        info.as_ref(),
        src.ip(),
        transport == Transport::Tcp,
    );
    let qtype = request
        .queries
        .queries()
        .first()
        .map_or(0, |q| u16::from(q.query_type()));
    state
        .metrics
        .response(qtype, u16::from(d.metadata.response_code));
    let out = encode(&request, &d, true)?;
    if out.len() <= max_size {
        return sign(out);
    }
    // Too large for the client (or, over TCP, for any message): TC with the header, the question and the
    // OPT (ECS echo included) and no records at all, so nothing partial is
    // sent; the client asks again over TCP.
    d.metadata.truncation = true;
    let out = encode(&request, &d, false)?;
    if out.len() <= max_size {
        return sign(out);
    }
    // Not even the question fits (a long one under a 512-byte limit with a
    // large OPT): header and OPT only.
    d.echo_question = false;
    sign(encode(&request, &d, false)?)
}

/// A response with no records (to an UPDATE or a NOTIFY): the request's
/// header with `code`, its question, and an OPT (with the extended error
/// `ede`) when it had one.
pub(crate) fn bare(
    state: &DnsState,
    request: &Request,
    code: ResponseCode,
    ede: Option<Ede>,
) -> Decided {
    let mut metadata = Metadata::response_from_request(&request.metadata);
    metadata.response_code = code;
    let edns = request.edns.as_ref().map(|_| {
        let mut e = Edns::new();
        e.set_max_payload(state.edns_payload);
        e.set_version(0);
        if let Some(ede) = ede {
            e.options_mut().insert(ede.option());
        }
        e
    });
    Decided {
        metadata,
        answers: Vec::new(),
        authority: Vec::new(),
        additional: Vec::new(),
        edns,
        echo_question: request.queries.queries().len() <= 1,
    }
}

/// The NOTAUTH answer to a query whose TSIG failed (RFC 8945 §5.2): the
/// question, and a TSIG record with the error (signed for BADTIME only).
pub(crate) fn tsig_refused(
    state: &DnsState,
    request: &Request,
    refused: Verified,
    now: u64,
) -> Option<Vec<u8>> {
    let mut metadata = Metadata::response_from_request(&request.metadata);
    metadata.response_code = ResponseCode::NotAuth;
    let d = Decided {
        metadata,
        answers: Vec::new(),
        authority: Vec::new(),
        additional: Vec::new(),
        edns: None,
        echo_question: request.queries.queries().len() <= 1,
    };
    let qtype = request
        .queries
        .queries()
        .first()
        .map_or(0, |q| u16::from(q.query_type()));
    state
        .metrics
        .response(qtype, u16::from(ResponseCode::NotAuth));
    let mut out = encode(request, &d, false)?;
    match refused {
        Verified::Unsigned { tsig, .. } => super::tsig::append(&mut out, &tsig)?,
        Verified::BadTime {
            signing,
            request_time,
        } => signing.sign_badtime(&mut out, request_time, now)?,
        Verified::Good(_) => {}
    }
    Some(out)
}

/// Encodes a decided response, with its records or (`records` false)
/// without any.
pub(crate) fn encode(request: &Request, d: &Decided, records: bool) -> Option<Vec<u8>> {
    let none = no_queries();
    let mut builder = MessageResponseBuilder::new(echoed(request, d, &none)?, None);
    if let Some(edns) = &d.edns {
        builder.edns(edns);
    }
    let (answers, authority, additional): (&[Record], &[Record], &[Record]) = if records {
        (&d.answers, &d.authority, &d.additional)
    } else {
        (&[], &[], &[])
    };
    let message = builder.build(
        d.metadata,
        answers.iter(),
        authority.iter(),
        std::iter::empty(),
        additional.iter(),
    );
    let mut buf = Vec::with_capacity(512);
    let mut encoder = BinEncoder::new(&mut buf);
    message.destructive_emit(&mut encoder).ok()?;
    Some(buf)
}
