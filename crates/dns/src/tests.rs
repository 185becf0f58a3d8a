//! Responses of the general path to whole queries: the Extended DNS Error
//! each cause gets (crate::ede) and the one RRset an ANY question gets
//! (RFC 8482).

use hickory_server::proto::{
    op::{Edns, Message, MessageType, OpCode, Query, ResponseCode},
    rr::{DNSClass, Name, RecordType as Rt, rdata::opt::EdnsCode},
};

use crate::{
    handler::{DnsState, Handler, answer_udp},
    snapshot::{Draw, Snapshot},
};

const ZONE: &str = r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test", "ns2.example.test"]

[[domain.record]]
name = "@"
type = "TXT"
values = ["\"a text longer than the name servers take together\""]

[[domain.record]]
name = "@"
type = "MX"
values = ["10 mail.example.test."]

[[domain.record]]
name = "www"
type = "TXT"
values = ["\"w\""]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }, { ip = "192.0.2.2" }]
"#;

fn handler() -> Handler {
    let compiled = gtm_model::compile::compile(&gtm_model::parse(ZONE).unwrap()).unwrap();
    let snapshot = Snapshot::build(&compiled, &Snapshot::default(), None, &[], &[]).unwrap();
    Handler {
        state: DnsState::new(snapshot, gtm_geo::Geo::default(), 1232),
    }
}

fn ask(h: &Handler, m: &Message) -> Message {
    let src = "127.0.0.1:5300".parse().unwrap();
    let out = answer_udp(h, &m.to_vec().unwrap(), src, &mut Draw::new(1)).unwrap();
    Message::from_vec(&out).unwrap()
}

fn question(name: &str, rtype: Rt, class: DNSClass, opcode: OpCode, edns: bool) -> Message {
    let mut m = Message::new(7, MessageType::Query, opcode);
    let mut q = Query::query(Name::from_ascii(name).unwrap(), rtype);
    q.set_query_class(class);
    m.add_query(q);
    if edns {
        m.edns = Some(Edns::new());
    }
    m
}

/// The INFO-CODE and EXTRA-TEXT of a response's EDE option, if any.
fn ede(m: &Message) -> Option<(u16, String)> {
    use hickory_server::proto::rr::rdata::opt::EdnsOption;
    match m.edns.as_ref()?.option(EdnsCode::from(15u16))? {
        EdnsOption::Unknown(15, data) => Some((
            u16::from_be_bytes([*data.first()?, *data.get(1)?]),
            String::from_utf8(data.get(2..)?.to_vec()).ok()?,
        )),
        _ => None,
    }
}

/// One row per cause of the table in docs/architecture.md ("Extended DNS
/// Errors") that a query alone can reach; without EDNS none has an OPT.
#[test]
fn each_refusal_carries_its_extended_error_only_with_edns() {
    let h = handler();
    let (a, q) = (DNSClass::IN, OpCode::Query);
    // Name, type, class, opcode; the rcode and EDE code expected.
    type Row = (
        &'static str,
        Rt,
        DNSClass,
        OpCode,
        ResponseCode,
        Option<u16>,
    );
    let rows: [Row; 9] = [
        ("other.test.", Rt::A, a, q, ResponseCode::Refused, Some(20)),
        (
            "version.bind.",
            Rt::TXT,
            DNSClass::CH,
            q,
            ResponseCode::Refused,
            Some(20),
        ),
        (
            "example.test.",
            Rt::A,
            DNSClass::HS,
            q,
            ResponseCode::Refused,
            Some(20),
        ),
        (
            "example.test.",
            Rt::AXFR,
            a,
            q,
            ResponseCode::Refused,
            Some(21),
        ),
        (
            "example.test.",
            Rt::IXFR,
            a,
            q,
            ResponseCode::Refused,
            Some(21),
        ),
        (
            "example.test.",
            Rt::SOA,
            a,
            OpCode::Notify,
            ResponseCode::NotImp,
            Some(21),
        ),
        (
            "example.test.",
            Rt::from(128),
            a,
            q,
            ResponseCode::FormErr,
            Some(30),
        ),
        // Answers and negative answers carry none.
        (
            "www.example.test.",
            Rt::A,
            a,
            q,
            ResponseCode::NoError,
            None,
        ),
        (
            "nx.example.test.",
            Rt::A,
            a,
            q,
            ResponseCode::NXDomain,
            None,
        ),
    ];
    for (name, rtype, class, opcode, rcode, code) in rows {
        let with = ask(&h, &question(name, rtype, class, opcode, true));
        assert_eq!(with.metadata.response_code, rcode, "{name} {rtype} {class}");
        assert_eq!(
            ede(&with),
            code.map(|c| (c, String::new())),
            "{name} {rtype} {class} {opcode:?}"
        );
        let without = ask(&h, &question(name, rtype, class, opcode, false));
        assert_eq!(without.metadata.response_code, rcode, "{name} {rtype}");
        assert!(without.edns.is_none(), "{name} {rtype}: no OPT added");
    }
}

/// ANY gets one RRset of the name: the smallest (at the apex the MX, at
/// `www` its one TXT beside two addresses), and NXDOMAIN as before.
#[test]
fn any_is_answered_with_the_smallest_rrset_of_the_name() {
    let h = handler();
    for (name, want) in [("example.test.", Rt::MX), ("www.example.test.", Rt::TXT)] {
        for edns in [true, false] {
            let r = ask(
                &h,
                &question(name, Rt::ANY, DNSClass::IN, OpCode::Query, edns),
            );
            assert_eq!(r.metadata.response_code, ResponseCode::NoError);
            assert!(r.metadata.authoritative);
            let types: Vec<Rt> = r.answers.iter().map(|r| r.record_type()).collect();
            assert_eq!(types, [want], "{name}");
        }
    }
    let nx = ask(
        &h,
        &question(
            "nx.example.test.",
            Rt::ANY,
            DNSClass::IN,
            OpCode::Query,
            true,
        ),
    );
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    assert!(nx.answers.is_empty());
}
