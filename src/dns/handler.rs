//! The general answer path: a hickory-server [`RequestHandler`] over the
//! current snapshot.
//!
//! hickory decodes the message and, for TCP, owns the connection; this
//! handler decides the response: opcode and class checks, EDNS (BADVERS,
//! payload, DO, ECS), and the lookup itself. UDP queries come here only when
//! the fast path declines them.

use std::{cell::RefCell, sync::Arc};

use arc_swap::ArcSwap;
use hickory_server::{
    net::runtime::Time,
    proto::{
        op::{Edns, MessageType, Metadata, OpCode, ResponseCode},
        rr::{
            DNSClass, Name, Record,
            rdata::opt::{ClientSubnet, EdnsOption},
        },
        serialize::binary::BinEncoder,
    },
    server::{Request, RequestHandler, ResponseHandler, ResponseInfo},
    zone_handler::MessageResponseBuilder,
};

use super::{
    lookup::{Resolved, lookup},
    snapshot::{Client, Draw, Snapshot},
    wire,
};
use crate::geo::Geo;

/// What every answer path reads: swapped whole on change, never locked.
#[derive(Debug, Clone)]
pub struct DnsState {
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub geo: Arc<ArcSwap<Geo>>,
    /// The EDNS payload we advertise and the most a UDP response uses.
    pub edns_payload: u16,
    pub metrics: Arc<crate::metrics::DnsMetrics>,
}

impl DnsState {
    pub fn new(snapshot: Snapshot, geo: Geo, edns_payload: u16) -> Self {
        Self {
            snapshot: Arc::new(ArcSwap::from_pointee(snapshot)),
            geo: Arc::new(ArcSwap::from_pointee(geo)),
            edns_payload,
            metrics: Arc::default(),
        }
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
    pub edns: Option<Edns>,
}

impl Handler {
    /// Decides the response to a decoded request.
    pub fn decide(&self, request: &Request, draw: &mut Draw) -> Decided {
        let decided = |code: ResponseCode, resolved: Resolved, edns: Option<Edns>| {
            let mut metadata = Metadata::response_from_request(&request.metadata);
            metadata.response_code = code;
            // Authoritative for every answer from our zones, not for errors.
            metadata.authoritative = matches!(code, ResponseCode::NoError | ResponseCode::NXDomain);
            Decided {
                metadata,
                answers: resolved.answers,
                authority: resolved.authority,
                edns,
            }
        };
        let request_edns = wire::edns(request.as_slice());
        let reply_edns = |scope: u8, ecs: Option<&wire::Ecs>| -> Option<Edns> {
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
            Some(e)
        };
        let info = match request_edns {
            Ok(info) => info,
            Err(_) => {
                return decided(
                    ResponseCode::FormErr,
                    Resolved::default(),
                    reply_edns(0, None),
                );
            }
        };
        let ecs = info.and_then(|i| i.ecs);
        if info.is_some_and(|i| i.version > 0) {
            return decided(
                ResponseCode::BADVERS,
                Resolved::default(),
                reply_edns(0, None),
            );
        }
        if request.metadata.op_code != OpCode::Query {
            return decided(
                ResponseCode::NotImp,
                Resolved::default(),
                reply_edns(0, ecs.as_ref()),
            );
        }
        let queries = request.queries.queries();
        let [query] = queries else {
            return decided(
                ResponseCode::FormErr,
                Resolved::default(),
                reply_edns(0, ecs.as_ref()),
            );
        };
        if query.query_class() != DNSClass::IN {
            return decided(
                ResponseCode::Refused,
                Resolved::default(),
                reply_edns(0, ecs.as_ref()),
            );
        }
        let client = Client {
            src: request.src().ip(),
            ecs,
        };
        let snapshot = self.state.snapshot.load();
        let geo = self.state.geo.load();
        let qname: Name = query.name().clone().into();
        let resolved = lookup(&snapshot, &geo, &qname, query.query_type(), &client, draw);
        let code = resolved.rcode;
        let edns = reply_edns(resolved.scope, ecs.as_ref());
        decided(code, resolved, edns)
    }
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        if request.metadata.message_type != MessageType::Query {
            return ResponseInfo::from(hickory_server::proto::op::Header {
                metadata: request.metadata,
                counts: Default::default(),
            });
        }
        let start = std::time::Instant::now();
        let d = DRAW.with(|draw| self.decide(request, &mut draw.borrow_mut()));
        let qtype = request
            .queries
            .queries()
            .first()
            .map_or(0, |q| u16::from(q.query_type()));
        let metrics = &self.state.metrics;
        metrics.response(qtype, d.metadata.response_code.low());
        let mut builder = MessageResponseBuilder::from_message_request(request);
        if let Some(edns) = &d.edns {
            builder.edns(edns);
        }
        let message = builder.build(
            d.metadata,
            d.answers.iter(),
            d.authority.iter(),
            std::iter::empty(),
            std::iter::empty(),
        );
        let sent = response.send_response(message).await;
        metrics.latency.observe(start.elapsed(), 1);
        match sent {
            Ok(info) => info,
            Err(error) => {
                tracing::debug!(%error, "could not send a response");
                ResponseInfo::from(hickory_server::proto::op::Header {
                    metadata: d.metadata,
                    counts: Default::default(),
                })
            }
        }
    }
}

/// Answers one UDP query by the general path; `None` when nothing should be
/// sent back (not a query, or shorter than a header).
pub fn answer_udp(
    handler: &Handler,
    bytes: &[u8],
    src: std::net::SocketAddr,
    draw: &mut Draw,
) -> Option<Vec<u8>> {
    use hickory_server::net::xfer::Protocol;
    if bytes.len() < 12 || bytes[2] & 0x80 != 0 {
        return None;
    }
    let Ok(request) = Request::from_bytes(bytes.to_vec(), src, Protocol::Udp) else {
        // Undecodable past the header: FORMERR with the header's id.
        let mut out = bytes[..12].to_vec();
        out[2] = 0x80 | (bytes[2] & 0x79);
        out[3] = ResponseCode::FormErr.low();
        out[4..12].fill(0);
        return Some(out);
    };
    let max_size = handler
        .state
        .udp_limit(wire::edns(bytes).ok().flatten().as_ref());
    let d = handler.decide(&request, draw);
    let mut builder = MessageResponseBuilder::from_message_request(&request);
    if let Some(edns) = &d.edns {
        builder.edns(edns);
    }
    let message = builder.build(
        d.metadata,
        d.answers.iter(),
        d.authority.iter(),
        std::iter::empty(),
        std::iter::empty(),
    );
    let mut buf = Vec::with_capacity(512);
    let mut encoder = BinEncoder::new(&mut buf);
    encoder.set_max_size(max_size);
    message.destructive_emit(&mut encoder).ok()?;
    Some(buf)
}
