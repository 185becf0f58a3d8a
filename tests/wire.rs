//! Correct on the wire: every response is judged by a strict reader
//! (hickory's decoder, plus a walk that requires every counted record to end
//! exactly at the end of the message and every compression pointer to
//! point backwards past the header), and one test puts a real unbound with
//! its ECS subnet cache in front of a device.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use gtm::device::Device;
use gtm_model::node::NodeSettings;
use hickory_server::proto::{
    op::{Message, ResponseCode},
    rr::{
        DNSClass, RData, RecordType,
        rdata::opt::{EdnsCode, EdnsOption, NSIDPayload},
    },
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::support::*;

/// A device with its own NSID and EDNS payload (the defaults otherwise).
async fn start(
    config: &str,
    geoip: Option<PathBuf>,
    nsid: Option<&str>,
    edns_payload: Option<u16>,
) -> TestDevice {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = NodeSettings {
        name: "wire1".into(),
        nsid: nsid.map(str::to_string),
        edns_payload,
        geoip_file: geoip,
        dns_listen: vec!["127.0.0.1:0".parse().unwrap(), "[::1]:0".parse().unwrap()],
        api_listen: "127.0.0.1:0".parse().unwrap(),
        udp_workers: Some(1),
        probe_networks: vec!["127.0.0.0/8".to_string().try_into().unwrap()],
        ..NodeSettings::demo(dir.path().to_path_buf())
    };
    let device = Device::start(settings, false).await.expect("device starts");
    crate::support::apply_text(&device, config)
        .await
        .expect("test config is valid");
    TestDevice { device, dir }
}

/// `n` A records at `name` in zone `conf.test`.
fn big_zone() -> String {
    let mut out =
        String::from("[[domain]]\nname = \"conf.test\"\nnameservers = [\"ns1.conf.test\"]\n");
    for (name, n) in [("big", 300), ("mid", 150), ("small", 40)] {
        out.push_str(&format!(
            "\n[[domain.record]]\nname = \"{name}\"\ntype = \"A\"\naddresses = ["
        ));
        for i in 0..n {
            out.push_str(&format!("{{ ip = \"10.{}.{}.1\" }},", i / 256, i % 256));
        }
        out.push_str("]\n");
    }
    out
}

/// Skips a name at `pos`, requiring pointers backwards past the header.
fn skip_name(raw: &[u8], mut pos: usize) -> usize {
    loop {
        let len = raw[pos];
        match len {
            0 => return pos + 1,
            l if l & 0xC0 == 0xC0 => {
                let target = usize::from(l & 0x3F) << 8 | usize::from(raw[pos + 1]);
                assert!(
                    (12..pos).contains(&target),
                    "pointer at {pos} to {target}: must point backwards past the header"
                );
                return pos + 2;
            }
            l => {
                assert_eq!(l & 0xC0, 0, "label type at {pos}");
                pos += 1 + usize::from(l);
            }
        }
    }
}

/// Judges a response strictly and returns it decoded.
fn strict(raw: &[u8]) -> Message {
    let m = Message::from_vec(raw).unwrap_or_else(|e| panic!("response does not decode: {e}"));
    let count = |i: usize| usize::from(u16::from_be_bytes([raw[i], raw[i + 1]]));
    let mut pos = 12;
    for _ in 0..count(4) {
        pos = skip_name(raw, pos) + 4;
    }
    for _ in 0..count(6) + count(8) + count(10) {
        pos = skip_name(raw, pos);
        let rdlen = usize::from(u16::from_be_bytes([raw[pos + 8], raw[pos + 9]]));
        pos += 10 + rdlen;
    }
    assert_eq!(pos, raw.len(), "no bytes after the counted records");
    assert_eq!(m.queries.len(), count(4));
    assert_eq!(m.answers.len(), count(6));
    assert_eq!(m.authorities.len(), count(8));
    assert_eq!(
        m.additionals.len() + usize::from(m.edns.is_some()),
        count(10)
    );
    m
}

async fn tcp_raw(server: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(server).await.unwrap();
    let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(bytes);
    stream.write_all(&framed).await.unwrap();
    let mut len = [0u8; 2];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut len))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut buf).await.unwrap();
    buf
}

fn with_payload(mut m: Message, payload: u16) -> Message {
    m.edns.as_mut().unwrap().set_max_payload(payload);
    m
}

/// The ECS option of a response: (source prefix, scope prefix).
fn ecs_of(m: &Message) -> Option<(u8, u8)> {
    m.edns
        .as_ref()?
        .options()
        .options
        .iter()
        .find_map(|(_, o)| match o {
            EdnsOption::Subnet(s) => Some((s.source_prefix(), s.scope_prefix())),
            _ => None,
        })
}

#[tokio::test]
async fn truncated_answers_keep_question_and_opt_and_never_exceed_the_limit() {
    let d = start(&big_zone(), None, None, Some(4096)).await;
    // (name, client payload or none, fits)
    for (name, payload, fits) in [
        ("small.conf.test.", None, false),
        ("small.conf.test.", Some(512), false),
        ("small.conf.test.", Some(1232), true),
        ("mid.conf.test.", Some(1232), false),
        ("mid.conf.test.", Some(4096), true),
        ("big.conf.test.", Some(4096), false),
        ("big.conf.test.", Some(65535), false),
    ] {
        let q = query(name, RecordType::A);
        let q = match payload {
            Some(p) => with_ecs(with_payload(q, p), "198.51.100.0/24"),
            None => without_edns(q),
        };
        let raw = udp_raw(d.v4(), &q.to_vec().unwrap()).await;
        let limit = usize::from(payload.unwrap_or(512).clamp(512, 4096));
        let what = format!("{name} payload {payload:?}");
        assert!(raw.len() <= limit, "{what}: {} bytes > {limit}", raw.len());
        let m = strict(&raw);
        assert_eq!(m.queries, q.queries, "{what}: question kept");
        assert_eq!(m.metadata.truncation, !fits, "{what}: TC");
        if fits {
            assert!(m.answers.len() > 1, "{what}");
        } else {
            assert!(m.answers.is_empty(), "{what}: no partial answer");
        }
        match payload {
            Some(_) => {
                let edns = m
                    .edns
                    .as_ref()
                    .unwrap_or_else(|| panic!("{what}: OPT kept"));
                assert_eq!(edns.max_payload(), 4096);
                assert_eq!(ecs_of(&m), Some((24, 0)), "{what}: ECS echoed");
            }
            None => assert!(m.edns.is_none(), "{what}: no OPT without EDNS"),
        }
    }
    // Over TCP the whole RRset comes.
    let m = strict(
        &tcp_raw(
            d.v4(),
            &query("big.conf.test.", RecordType::A).to_vec().unwrap(),
        )
        .await,
    );
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 300);
}

#[tokio::test]
async fn the_reported_truncation_query_gets_a_clean_tc() {
    let d = start(&big_zone(), None, None, None).await;
    let hex =
        "abcd000000010000000000010362696704636f6e660474657374000001000100002904d0000000000000";
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let raw = udp_raw(d.v4(), &bytes).await;
    assert!(raw.len() <= 1232);
    let m = strict(&raw);
    assert!(m.metadata.truncation);
    assert_eq!(m.metadata.id, 0xabcd);
    assert_eq!(m.queries.len(), 1);
    assert!(m.edns.is_some(), "the OPT record is kept (RFC 6891 §7)");
}

#[tokio::test]
async fn private_ecs_addresses_are_answered_with_their_own_subnet_as_scope() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    crate::geo::write_mmdb(&db);
    let d = start(ZONE, Some(db), None, None).await;
    for (name, subnet, source) in [
        ("geo", "10.1.2.0/24", 24),
        ("geo", "100.64.7.0/24", 24),
        ("geo", "127.0.0.0/24", 24),
        ("geo", "192.168.1.1/32", 32),
        ("geo", "169.254.0.0/16", 16),
        ("geo", "fd00:1:2::/48", 48),
        ("geo", "fe80::/64", 64),
        ("sticky", "10.1.2.0/24", 24),
        ("sticky", "172.16.0.0/12", 12),
        ("sticky", "fd00:1:2::/56", 56),
    ] {
        let q = with_ecs(
            query(&format!("{name}.example.test."), RecordType::A),
            subnet,
        );
        let raw = udp_raw(d.v4(), &q.to_vec().unwrap()).await;
        let m = strict(&raw);
        assert_eq!(m.answers.len(), 1, "{name} {subnet}");
        if name == "geo" {
            assert_eq!(
                answers(&m),
                ["192.0.2.52"],
                "{subnet}: as for an unknown place"
            );
        }
        assert_eq!(
            ecs_of(&m),
            Some((source, source)),
            "{name} {subnet}: the scope covers the source prefix, no wider"
        );
        // The general path (TCP) decides the same.
        let t = strict(&tcp_raw(d.v4(), &q.to_vec().unwrap()).await);
        assert_eq!(ecs_of(&t), ecs_of(&m), "{name} {subnet}: TCP");
        assert_eq!(answers(&t), answers(&m), "{name} {subnet}: TCP");
    }
    // An answer that does not depend on the client stays scope 0.
    let m = strict(
        &udp_raw(
            d.v4(),
            &with_ecs(query("v6.example.test.", RecordType::AAAA), "10.1.2.0/24")
                .to_vec()
                .unwrap(),
        )
        .await,
    );
    assert_eq!(ecs_of(&m), Some((24, 0)));
}

#[tokio::test]
async fn zone_transfers_are_refused_over_udp_and_tcp() {
    let d = TestDevice::start(ZONE).await;
    for rtype in [RecordType::AXFR, RecordType::IXFR] {
        let q = query("example.test.", rtype);
        for raw in [
            udp_raw(d.v4(), &q.to_vec().unwrap()).await,
            tcp_raw(d.v4(), &q.to_vec().unwrap()).await,
        ] {
            let m = strict(&raw);
            assert_eq!(m.metadata.response_code, ResponseCode::Refused, "{rtype}");
            assert!(m.answers.is_empty());
            assert_eq!(m.queries, q.queries);
        }
    }
}

/// A query for `www.example.test. A` with an OPT whose options are `opts`.
fn raw_query(id: u16, qname: &[u8], opts: &[u8]) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]);
    q.extend_from_slice(qname);
    q.extend_from_slice(&[0, 1, 0, 1]);
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0]);
    q.extend_from_slice(&(opts.len() as u16).to_be_bytes());
    q.extend_from_slice(opts);
    q
}

const WWW: &[u8] = b"\x03www\x07example\x04test\x00";

async fn metric(d: &TestDevice, reason: &str) -> u64 {
    let text = metrics(d).await;
    let key = format!("gtm_dns_malformed_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .unwrap_or_else(|| panic!("no {key} in /metrics:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn formerr_keeps_question_and_opt_and_malformed_queries_are_counted() {
    let d = TestDevice::start(ZONE).await;
    let (ecs_before, trunc_before) = (metric(&d, "ecs").await, metric(&d, "truncated").await);
    // ECS with bits set beyond its source prefix; an option longer than
    // the OPT's data (hickory would drop such options with a log line).
    for (opts, what) in [
        (&[0, 8, 0, 7, 0, 1, 23, 0, 1, 2, 3][..], "ecs bits"),
        (&[0, 8, 0, 40, 0, 1, 24, 0][..], "option overruns"),
        (&[0, 8, 0, 6, 0, 1, 24, 0][..], "option cut short"),
    ] {
        let q = raw_query(0x1234, WWW, opts);
        for (raw, proto) in [
            (udp_raw(d.v4(), &q).await, "udp"),
            (tcp_raw(d.v4(), &q).await, "tcp"),
        ] {
            let m = strict(&raw);
            assert_eq!(
                m.metadata.response_code,
                ResponseCode::FormErr,
                "{what} {proto}"
            );
            assert_eq!(m.metadata.id, 0x1234);
            // The same shape over TCP as over UDP: one answer path.
            assert_eq!(m.queries.len(), 1, "{what} {proto}: question kept");
            assert_eq!(m.queries[0].name().to_ascii(), "www.example.test.");
            let edns = m
                .edns
                .as_ref()
                .unwrap_or_else(|| panic!("{what} {proto}: OPT"));
            assert!(edns.flags().dnssec_ok, "{what} {proto}: DO copied");
            assert_eq!(
                ecs_of(&m),
                None,
                "{what} {proto}: the bad ECS is not echoed"
            );
        }
    }
    assert!(metric(&d, "ecs").await >= ecs_before + 2);
    assert!(metric(&d, "truncated").await >= trunc_before + 4);
}

/// Several messages on one TCP connection, sent in one write: each gets
/// its answer, in order (RFC 7766 §6.2.1.1), a malformed one a FORMERR.
#[tokio::test]
async fn pipelined_tcp_queries_are_answered_in_order() {
    let d = TestDevice::start(ZONE).await;
    let mut stream = TcpStream::connect(d.v4()).await.unwrap();
    let queries = [
        raw_query(1, WWW, &[]),
        raw_query(2, WWW, &[0, 8, 0, 40, 0, 1, 24, 0]),
        raw_query(3, WWW, &[]),
    ];
    let mut out = Vec::new();
    for q in &queries {
        out.extend_from_slice(&(q.len() as u16).to_be_bytes());
        out.extend_from_slice(q);
    }
    stream.write_all(&out).await.unwrap();
    for (id, rcode) in [
        (1, ResponseCode::NoError),
        (2, ResponseCode::FormErr),
        (3, ResponseCode::NoError),
    ] {
        let mut len = [0u8; 2];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut len))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut buf).await.unwrap();
        let m = strict(&buf);
        assert_eq!((m.metadata.id, m.metadata.response_code), (id, rcode));
        assert_eq!(m.queries.len(), 1, "message {id}: question kept");
    }
}

/// Found by the `udp_query` fuzz target: a query with many questions got a
/// FORMERR that echoed them all, 720 bytes against a 512-byte limit. Every
/// response fits the client's limit, whatever the query holds.
#[tokio::test]
async fn a_query_with_many_questions_gets_a_formerr_within_the_limit() {
    let d = TestDevice::start(ZONE).await;
    let long_name = b"\x3faaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\x07example\x04test\x00";
    for (questions, name) in [(2u16, WWW), (40, WWW), (12, &long_name[..])] {
        let mut q = 0x5151u16.to_be_bytes().to_vec();
        q.extend_from_slice(&[0x01, 0x00]);
        q.extend_from_slice(&questions.to_be_bytes());
        q.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        for _ in 0..questions {
            q.extend_from_slice(name);
            q.extend_from_slice(&[0, 1, 0, 1]);
        }
        let raw = udp_raw(d.v4(), &q).await;
        assert!(
            raw.len() <= 512,
            "{questions} questions: {} bytes",
            raw.len()
        );
        let m = strict(&raw);
        assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
        assert_eq!(m.metadata.id, 0x5151);
        assert!(m.queries.is_empty(), "{questions} questions are not echoed");
    }
}

#[tokio::test]
async fn compression_pointers_must_point_backwards_past_the_header() {
    let d = TestDevice::start(ZONE).await;
    let before = metric(&d, "compression").await;
    // A question name pointing into the header, and one pointing forwards.
    for qname in [&[0xC0, 0x04][..], &[0xC0, 0x40][..]] {
        let q = raw_query(0x4321, qname, &[]);
        for (raw, proto) in [
            (udp_raw(d.v4(), &q).await, "udp"),
            (tcp_raw(d.v4(), &q).await, "tcp"),
        ] {
            let m = strict(&raw);
            assert_eq!(
                m.metadata.response_code,
                ResponseCode::FormErr,
                "{qname:?} {proto}"
            );
            assert!(
                m.queries.is_empty(),
                "{qname:?} {proto}: the bad name is not echoed"
            );
            assert!(m.answers.is_empty());
        }
    }
    assert!(metric(&d, "compression").await > before);
}

fn nsid_query(name: &str) -> Message {
    let mut m = query(name, RecordType::A);
    m.edns
        .as_mut()
        .unwrap()
        .options_mut()
        .insert(EdnsOption::NSID(NSIDPayload::new(Vec::new()).unwrap()));
    m
}

fn nsid_of(m: &Message) -> Option<Vec<u8>> {
    match m.edns.as_ref()?.options().get(EdnsCode::NSID)? {
        EdnsOption::NSID(p) => Some(p.as_ref().to_vec()),
        EdnsOption::Unknown(_, v) => Some(v.clone()),
        _ => None,
    }
}

#[tokio::test]
async fn nsid_and_chaos_names_tell_which_device_answered() {
    let named = start(ZONE, None, Some("edge-7"), None).await;
    let default = TestDevice::start(ZONE).await;
    for (d, expect) in [(&named, "edge-7"), (&default, "test1")] {
        let q = nsid_query("v6.example.test.");
        for raw in [
            udp_raw(d.v4(), &q.to_vec().unwrap()).await,
            tcp_raw(d.v4(), &q.to_vec().unwrap()).await,
        ] {
            let m = strict(&raw);
            assert_eq!(nsid_of(&m).as_deref(), Some(expect.as_bytes()));
        }
        // Without the option, no NSID.
        let m = strict(
            &udp_raw(
                d.v4(),
                &query("v6.example.test.", RecordType::AAAA)
                    .to_vec()
                    .unwrap(),
            )
            .await,
        );
        assert_eq!(nsid_of(&m), None);

        for name in ["id.server.", "hostname.bind.", "ID.Server."] {
            let mut q = query(name, RecordType::TXT);
            q.queries[0].set_query_class(DNSClass::CH);
            for raw in [
                udp_raw(d.v4(), &q.to_vec().unwrap()).await,
                tcp_raw(d.v4(), &q.to_vec().unwrap()).await,
            ] {
                let m = strict(&raw);
                assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
                assert!(m.metadata.authoritative, "{name}: AA");
                assert_eq!(m.answers.len(), 1);
                assert_eq!(m.answers[0].dns_class, DNSClass::CH);
                match &m.answers[0].data {
                    RData::TXT(t) => assert_eq!(t.to_string(), expect),
                    other => panic!("{name}: not TXT: {other:?}"),
                }
            }
        }
        let mut q = query("version.bind.", RecordType::TXT);
        q.queries[0].set_query_class(DNSClass::CH);
        let m = strict(&udp_raw(d.v4(), &q.to_vec().unwrap()).await);
        assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    }
}

/// Asks unbound for `geo.example.test. A`, with an ECS option or none.
async fn via_unbound(u: &Unbound, ecs: Option<&str>) -> Vec<String> {
    let q = query("geo.example.test.", RecordType::A);
    let q = match ecs {
        Some(subnet) => with_ecs(q, subnet),
        None => q,
    };
    let m = udp(u.addr, &q).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{ecs:?}");
    answers(&m)
}

/// One query from a private subnet, or from a loopback client (unbound
/// then sends 127.0.0.0/24), must not put a place-dependent answer in
/// unbound's cache for every subnet.
#[tokio::test]
async fn a_private_client_subnet_does_not_poison_a_resolver_cache() {
    let Some(binary) = unbound_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    crate::geo::write_mmdb(&db);
    let d = start(ZONE, Some(db), None, None).await;
    let u = Unbound::start(&binary, "example.test", d.v4(), ECS_CACHE).await;
    // A plain client on loopback: no place, the default answer.
    assert_eq!(via_unbound(&u, None).await, ["192.0.2.52"]);
    // A private subnet: no place either.
    assert_eq!(via_unbound(&u, Some("10.1.2.0/24")).await, ["192.0.2.52"]);
    // Clients elsewhere still get their place's answer, not the cached one.
    assert_eq!(
        via_unbound(&u, Some("81.2.69.0/24")).await,
        ["192.0.2.50"],
        "Germany"
    );
    assert_eq!(
        via_unbound(&u, Some("2.2.2.0/24")).await,
        ["192.0.2.51"],
        "France: Europe"
    );
    assert_eq!(
        via_unbound(&u, Some("3.3.3.0/24")).await,
        ["192.0.2.52"],
        "US: default"
    );
    // And the same subnets again, now from unbound's cache.
    assert_eq!(via_unbound(&u, Some("81.2.69.0/24")).await, ["192.0.2.50"]);
    assert_eq!(via_unbound(&u, Some("10.1.2.0/24")).await, ["192.0.2.52"]);
}

/// The value of one sample (`name{labels}`) in `/metrics`, 0 if absent.
fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// BADVERS is an extended rcode (16: 4 bits in the header, the rest in the
/// OPT); it is counted as itself, not as the NOERROR of its low bits.
#[tokio::test]
async fn badvers_is_counted_under_its_own_label() {
    let d = TestDevice::start(ZONE).await;
    let mut q = query("www.example.test.", RecordType::A);
    q.edns.as_mut().unwrap().set_version(1);
    let q = q.to_vec().unwrap();
    for (raw, proto) in [
        (udp_raw(d.v4(), &q).await, "udp"),
        (tcp_raw(d.v4(), &q).await, "tcp"),
    ] {
        let m = strict(&raw);
        assert_eq!(u16::from(m.metadata.response_code), 16, "{proto}: BADVERS");
        assert_eq!(raw[3] & 0x0F, 0, "{proto}: the header's 4 bits of 16");
    }
    let text = metrics(&d).await;
    let count = |rcode: &str| {
        sample(
            &text,
            &format!("gtm_dns_responses_total{{type=\"A\",rcode=\"{rcode}\"}}"),
        )
    };
    assert_eq!(count("BADVERS"), 2, "{text}");
    assert_eq!(count("NOERROR"), 0, "{text}");
}

/// A query with no question and only a COOKIE option asks for a server
/// cookie (RFC 7873 §5.4): NOERROR, with the cookie.
#[tokio::test]
async fn a_cookie_only_query_gets_noerror_and_the_server_cookie() {
    let d = TestDevice::start(ZONE).await;
    // The device in no cluster makes its cookie secret by itself.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sample(&metrics(&d).await, "gtm_dns_cookie_secret_created_seconds") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no cookie secret was made"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = *b"\x01\x23\x45\x67\x89\xab\xcd\xef";
    // Header: QDCOUNT 0, ARCOUNT 1; the OPT carries the client cookie alone.
    let mut q = vec![0x77, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 12, 0, 10, 0, 8]);
    q.extend_from_slice(&client);
    for (raw, proto) in [
        (udp_raw(d.v4(), &q).await, "udp"),
        (tcp_raw(d.v4(), &q).await, "tcp"),
    ] {
        let m = strict(&raw);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{proto}");
        assert_eq!(m.metadata.id, 0x7701);
        assert!(m.queries.is_empty() && m.answers.is_empty(), "{proto}");
        let cookie = m
            .edns
            .as_ref()
            .and_then(|e| e.options().get(EdnsCode::Cookie))
            .unwrap_or_else(|| panic!("{proto}: no COOKIE option in {m:?}"));
        let bytes = match cookie {
            EdnsOption::Unknown(_, v) => v.clone(),
            other => panic!("{proto}: {other:?}"),
        };
        assert_eq!(bytes.len(), 8 + 16, "{proto}: client and server cookie");
        assert_eq!(bytes[..8], client, "{proto}: our client cookie back");
        assert_eq!(bytes[8], 1, "{proto}: an RFC 9018 server cookie");
    }
}

/// NOTIMP does nothing the query asked for: RD and CD are not echoed
/// (ISC's EDNS compliance test `opcodeflg` expects them clear), nor any
/// other flag.
#[tokio::test]
async fn notimp_clears_the_query_flags() {
    let d = TestDevice::start(ZONE).await;
    // Opcode 15 (unassigned) with RD, AD and CD set.
    let mut q = raw_query(0x0f0f, WWW, &[]);
    q[2] = 15 << 3 | 0x01;
    q[3] = 0x30;
    for (raw, proto) in [
        (udp_raw(d.v4(), &q).await, "udp"),
        (tcp_raw(d.v4(), &q).await, "tcp"),
    ] {
        strict(&raw);
        assert_eq!(raw[3] & 0x0F, 4, "{proto}: NOTIMP");
        assert_eq!(raw[2], 0x80 | 15 << 3, "{proto}: QR and the opcode only");
        assert_eq!(raw[3] & 0xF0, 0, "{proto}: RA, Z, AD and CD clear");
    }
}
