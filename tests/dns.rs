//! DNS behaviour (spec §3) through real UDP and TCP sockets.

use gtm_model::condition::CheckRef;
use gtm_resolve::CheckState;
use hickory_server::proto::{
    op::{Edns, OpCode, ResponseCode},
    rr::{RData, RecordType},
};

use crate::support::*;

fn web_ok(d: &TestDevice, ok: bool) {
    let state = if ok {
        CheckState::Ok
    } else {
        CheckState::Error
    };
    for ip in ["192.0.2.10", "192.0.2.11", "192.0.2.20"] {
        let check = CheckRef {
            name: "web".into(),
            address: Some(ip.parse().unwrap()),
        };
        d.device.engine.set_check(&check, state, "set by the test");
    }
}

#[tokio::test]
async fn answers_authoritatively_over_udp_and_tcp_on_ipv4_and_ipv6() {
    let d = TestDevice::start(ZONE).await;
    web_ok(&d, true);
    for resp in [
        udp(d.v4(), &query("www.example.test.", RecordType::A)).await,
        tcp(d.v4(), &query("www.example.test.", RecordType::A)).await,
        udp(d.v6(), &query("www.example.test.", RecordType::A)).await,
        tcp(d.v6(), &query("www.example.test.", RecordType::A)).await,
    ] {
        assert_eq!(resp.metadata.response_code, ResponseCode::NoError);
        assert!(resp.metadata.authoritative, "AA is set");
        assert!(resp.metadata.recursion_desired, "RD is copied");
        assert!(!resp.metadata.recursion_available);
        let mut got = answers(&resp);
        got.sort();
        assert_eq!(got, ["192.0.2.10", "192.0.2.11"]);
        assert!(resp.answers.iter().all(|r| r.ttl == 60), "the record's TTL");
    }
}

#[tokio::test]
async fn soa_and_ns_at_the_apex_and_static_types() {
    let d = TestDevice::start(ZONE).await;
    let soa = udp(d.v4(), &query("example.test.", RecordType::SOA)).await;
    assert!(matches!(soa.answers[0].data, RData::SOA(_)));
    let ns = udp(d.v4(), &query("example.test.", RecordType::NS)).await;
    assert_eq!(answers(&ns), ["ns1.example.test.", "ns2.example.test."]);
    let mx = udp(d.v4(), &query("example.test.", RecordType::MX)).await;
    assert_eq!(answers(&mx), ["10 mail.example.test."]);
    let txt = udp(d.v4(), &query("example.test.", RecordType::TXT)).await;
    assert_eq!(answers(&txt), ["hello world"]);
    let srv = udp(d.v4(), &query("_sip._udp.example.test.", RecordType::SRV)).await;
    assert_eq!(answers(&srv), ["10 5 5060 sip.example.test."]);
    let caa = udp(d.v4(), &query("example.test.", RecordType::CAA)).await;
    assert_eq!(caa.answers.len(), 1);
    let aaaa = udp(d.v6(), &query("v6.example.test.", RecordType::AAAA)).await;
    assert_eq!(answers(&aaaa), ["2001:db8::1"]);
}

#[tokio::test]
async fn nxdomain_and_nodata_carry_the_soa_with_the_negative_ttl() {
    let d = TestDevice::start(ZONE).await;
    let nx = udp(d.v4(), &query("missing.example.test.", RecordType::A)).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    assert!(nx.metadata.authoritative);
    assert!(nx.answers.is_empty());
    assert!(matches!(nx.authorities[0].data, RData::SOA(_)));
    assert_eq!(nx.authorities[0].ttl, 20, "min(SOA TTL 30, minimum 20)");

    let nodata = udp(d.v4(), &query("v6.example.test.", RecordType::A)).await;
    assert_eq!(nodata.metadata.response_code, ResponseCode::NoError);
    assert!(nodata.answers.is_empty());
    assert!(matches!(nodata.authorities[0].data, RData::SOA(_)));
    let over_tcp = tcp(d.v4(), &query("v6.example.test.", RecordType::A)).await;
    assert_eq!(over_tcp.authorities.len(), 1);
}

#[tokio::test]
async fn refused_outside_served_zones() {
    let d = TestDevice::start(ZONE).await;
    for name in ["other.test.", "test.", "example.org."] {
        let r = udp(d.v4(), &query(name, RecordType::A)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::Refused, "{name}");
        assert!(!r.metadata.authoritative);
    }
}

#[tokio::test]
async fn names_match_in_any_case_and_the_question_is_echoed() {
    let d = TestDevice::start(ZONE).await;
    let r = udp(d.v4(), &query("ALIAS.ExAmPlE.tEsT.", RecordType::CNAME)).await;
    assert_eq!(r.queries[0].name().to_string(), "ALIAS.ExAmPlE.tEsT.");
    // The target may be compressed against the question, taking its case.
    assert_eq!(answers(&r)[0].to_lowercase(), "www.example.test.");
}

#[tokio::test]
async fn wildcards_answer_for_the_names_below_them() {
    let d = TestDevice::start(ZONE).await;
    let r = udp(d.v4(), &query("anything.wild.example.test.", RecordType::A)).await;
    assert_eq!(answers(&r), ["192.0.2.70"]);
    assert_eq!(
        r.answers[0].name.to_string(),
        "anything.wild.example.test.",
        "owner is the query name"
    );
    let deeper = udp(d.v4(), &query("a.b.wild.example.test.", RecordType::A)).await;
    assert_eq!(answers(&deeper), ["192.0.2.70"]);
    // The wildcard's parent exists as an empty non-terminal: NODATA.
    let parent = udp(d.v4(), &query("wild.example.test.", RecordType::A)).await;
    assert_eq!(parent.metadata.response_code, ResponseCode::NoError);
    assert!(parent.answers.is_empty());
}

#[tokio::test]
async fn a_cname_is_followed_within_served_zones() {
    let d = TestDevice::start(ZONE).await;
    web_ok(&d, true);
    let r = udp(d.v4(), &query("alias.example.test.", RecordType::A)).await;
    assert_eq!(r.answers[0].record_type(), RecordType::CNAME);
    let mut rest = answers(&r)[1..].to_vec();
    rest.sort();
    assert_eq!(rest, ["192.0.2.10", "192.0.2.11"]);
}

#[tokio::test]
async fn edns_payload_version_and_options() {
    let d = TestDevice::start(ZONE).await;
    let r = udp(d.v4(), &query("v6.example.test.", RecordType::AAAA)).await;
    let edns = r.edns.expect("EDNS answered with EDNS");
    assert_eq!(edns.max_payload(), 1232);
    assert_eq!(edns.version(), 0);

    let plain = udp(
        d.v4(),
        &without_edns(query("v6.example.test.", RecordType::AAAA)),
    )
    .await;
    assert!(plain.edns.is_none(), "no EDNS in, none out");

    let mut v1 = query("v6.example.test.", RecordType::AAAA);
    let mut e = Edns::new();
    e.set_version(1);
    v1.set_edns(e);
    let bad = udp(d.v4(), &v1).await;
    assert_eq!(u16::from(bad.metadata.response_code), 16, "BADVERS (16)");
    assert_eq!(bad.edns.unwrap().version(), 0);

    // An unknown option (code 65001) is ignored and not echoed.
    let mut unknown = query("v6.example.test.", RecordType::AAAA);
    unknown.edns.as_mut().unwrap().options_mut().insert(
        hickory_server::proto::rr::rdata::opt::EdnsOption::Unknown(65001, vec![1, 2, 3]),
    );
    let r = udp(d.v4(), &unknown).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.edns.unwrap().options().options.is_empty());
}

#[tokio::test]
async fn large_answers_truncate_over_udp_and_come_whole_over_tcp() {
    let d = TestDevice::start(ZONE).await;
    let small = udp(
        d.v4(),
        &without_edns(query("big.example.test.", RecordType::TXT)),
    )
    .await;
    assert!(small.metadata.truncation, "TC over 512 bytes without EDNS");
    let with_edns = udp(d.v4(), &query("big.example.test.", RecordType::TXT)).await;
    assert!(!with_edns.metadata.truncation, "fits in 1232 bytes");
    assert_eq!(with_edns.answers.len(), 4);
    let whole = tcp(
        d.v4(),
        &without_edns(query("big.example.test.", RecordType::TXT)),
    )
    .await;
    assert!(!whole.metadata.truncation);
    assert_eq!(whole.answers.len(), 4);
}

#[tokio::test]
async fn unknown_opcodes_get_notimp() {
    let d = TestDevice::start(ZONE).await;
    let mut m = query("www.example.test.", RecordType::A);
    m.metadata.op_code = OpCode::Status;
    let r = udp(d.v4(), &m).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NotImp);
}

#[tokio::test]
async fn ecs_is_echoed_with_scope_zero_when_the_answer_does_not_depend_on_place() {
    let d = TestDevice::start(ZONE).await;
    let m = with_ecs(
        query("v6.example.test.", RecordType::AAAA),
        "198.51.100.0/24",
    );
    let raw = udp_raw(d.v4(), &m.to_vec().unwrap()).await;
    // The OPT is the last record: its ECS option is the last 11 bytes.
    let tail = &raw[raw.len() - 11..];
    assert_eq!(
        tail,
        [0, 8, 0, 7, 0, 1, 24, 0, 198, 51, 100],
        "code, length, family, source, scope, address"
    );
    // NXDOMAIN also echoes ECS, scope 0.
    let nx = udp(
        d.v4(),
        &with_ecs(
            query("nope.example.test.", RecordType::A),
            "198.51.100.0/24",
        ),
    )
    .await;
    match nx.edns.unwrap().options().options.first() {
        Some((_, hickory_server::proto::rr::rdata::opt::EdnsOption::Subnet(s))) => {
            assert_eq!(s.scope_prefix(), 0)
        }
        other => panic!("no ECS echoed: {other:?}"),
    }
}

#[tokio::test]
async fn malformed_ecs_is_formerr() {
    let d = TestDevice::start(ZONE).await;
    let good = with_ecs(
        query("v6.example.test.", RecordType::AAAA),
        "198.51.100.0/24",
    )
    .to_vec()
    .unwrap();
    // Family 3 does not exist.
    let mut bad = good.clone();
    let at = bad.len() - 7;
    bad[at] = 3;
    let r = Message_from(&udp_raw(d.v4(), &bad).await);
    assert_eq!(r, ResponseCode::FormErr);
    // A bit set beyond the /24 source prefix.
    let mut bits = good.clone();
    let last = bits.len() - 1;
    bits[last] = 1;
    bits[last - 3] = 23; // source prefix 23 with 3 address bytes: the last byte's low bit is beyond it
    let r = Message_from(&udp_raw(d.v4(), &bits).await);
    assert_eq!(r, ResponseCode::FormErr);
}

#[allow(non_snake_case)]
fn Message_from(raw: &[u8]) -> ResponseCode {
    let rcode = raw[3] & 0x0F;
    ResponseCode::from(0, rcode)
}

#[tokio::test]
async fn answers_follow_health_within_one_change() {
    let d = TestDevice::start(ZONE).await;
    web_ok(&d, true);
    let dr = udp(d.v4(), &query("dr.example.test.", RecordType::A)).await;
    assert_eq!(answers(&dr), ["192.0.2.20"]);
    web_ok(&d, false);
    let dr = udp(d.v4(), &query("dr.example.test.", RecordType::A)).await;
    assert_eq!(answers(&dr), ["198.51.100.20"], "DR is on");
    let www = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert!(
        www.answers.is_empty(),
        "no healthy records and on_no_healthy = empty"
    );
    assert_eq!(www.metadata.response_code, ResponseCode::NoError);
    let texts: Vec<String> = d
        .device
        .engine
        .events()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert!(
        texts.contains(&"dr.example.test/A: DR is on".to_string()),
        "{texts:?}"
    );
    assert!(
        texts.contains(&"www.example.test/A: No healthy records left".to_string()),
        "{texts:?}"
    );
    web_ok(&d, true);
    let dr = udp(d.v4(), &query("dr.example.test.", RecordType::A)).await;
    assert_eq!(answers(&dr), ["192.0.2.20"], "back to Main");
    let texts: Vec<String> = d
        .device
        .engine
        .events()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert!(texts.contains(&"dr.example.test/A: DR ended".to_string()));
}

#[tokio::test]
async fn weighted_answers_follow_the_weights() {
    let d = TestDevice::start(ZONE).await;
    let (mut a, mut b) = (0u32, 0u32);
    for _ in 0..2000 {
        let r = udp(d.v4(), &query("w.example.test.", RecordType::A)).await;
        assert_eq!(r.answers.len(), 1, "weighted answers one");
        match answers(&r)[0].as_str() {
            "192.0.2.40" => a += 1,
            "192.0.2.41" => b += 1,
            other => panic!("weight 0 answered while others are in: {other}"),
        }
    }
    let share = f64::from(b) / f64::from(a + b);
    assert!(
        (0.70..0.80).contains(&share),
        "weight 3 of 4 got {share:.3}"
    );
}

#[tokio::test]
async fn persist_keeps_a_subnet_on_one_answer() {
    let d = TestDevice::start(ZONE).await;
    let mut seen = std::collections::HashSet::new();
    for subnet in 0..30u8 {
        let ecs = format!("198.51.{subnet}.0/24");
        let first = answers(
            &udp(
                d.v4(),
                &with_ecs(query("sticky.example.test.", RecordType::A), &ecs),
            )
            .await,
        );
        for _ in 0..5 {
            let again = answers(
                &udp(
                    d.v4(),
                    &with_ecs(query("sticky.example.test.", RecordType::A), &ecs),
                )
                .await,
            );
            assert_eq!(again, first, "same subnet, same answer");
        }
        seen.insert(first);
    }
    assert!(
        seen.len() > 1,
        "different subnets spread over the addresses"
    );
}

#[tokio::test]
async fn applying_a_configuration_drops_no_query() {
    let d = TestDevice::start(ZONE).await;
    let server = d.v4();
    let querier = tokio::spawn(async move {
        let mut answered = 0;
        for _ in 0..300 {
            let r = udp(server, &query("v6.example.test.", RecordType::AAAA)).await;
            assert_eq!(r.metadata.response_code, ResponseCode::NoError);
            answered += 1;
        }
        answered
    });
    for version in 2..40 {
        let config = gtm_model::parse(ZONE).unwrap();
        d.device.engine.apply(version, config).unwrap();
        tokio::task::yield_now().await;
    }
    assert_eq!(querier.await.unwrap(), 300);
}

/// A change that leaves a steered record's steering alone keeps its
/// evaluation and answer; health changes after it still reach the answer,
/// and the record that changed answers its new addresses.
#[tokio::test]
async fn a_record_untouched_by_a_change_keeps_its_answer_and_follows_health_after_it() {
    let d = TestDevice::start(ZONE).await;
    let www = || async {
        sorted(answers(
            &udp(d.v4(), &query("www.example.test.", RecordType::A)).await,
        ))
    };
    let w = || async {
        sorted(answers(
            &udp(d.v4(), &query("w.example.test.", RecordType::A)).await,
        ))
    };
    let down = web_down_on_10(&d);
    assert_eq!(www().await, ["192.0.2.11"]);

    // Only `w` changes: www keeps its answer without the address down.
    let changed = ZONE.replace(
        r#"{ ip = "192.0.2.42", weight = 0 }"#,
        r#"{ ip = "192.0.2.43", weight = 5 }"#,
    );
    assert_ne!(changed, ZONE);
    d.device
        .engine
        .apply(2, gtm_model::parse(&changed).unwrap())
        .unwrap();
    assert_eq!(www().await, ["192.0.2.11"]);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        seen.extend(w().await);
    }
    assert!(
        seen.contains("192.0.2.43"),
        "the changed record answers its new address: {seen:?}"
    );
    assert!(!seen.contains("192.0.2.42"), "{seen:?}");

    // Health after the change reaches the kept record's answer.
    www_follows(&d, &down).await;

    // A change to www itself (its TTL) is not kept: its new answer has
    // the new TTL and, from its state, still not the address down.
    let ttl_changed = changed.replace("type = \"A\"\nttl = 60\n", "type = \"A\"\nttl = 61\n");
    assert_ne!(ttl_changed, changed);
    d.device
        .engine
        .apply(3, gtm_model::parse(&ttl_changed).unwrap())
        .unwrap();
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(sorted(answers(&r)), ["192.0.2.11"]);
    assert!(r.answers.iter().all(|a| a.ttl == 61), "{:?}", r.answers);
}

#[tokio::test]
async fn a_zone_untouched_by_a_change_is_kept_and_follows_health_after_it() {
    let other = |txt: &str| {
        format!(
            "\n[[domain]]\nname = \"other.test\"\nnameservers = [\"ns1.other.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n"
        )
    };
    let d = TestDevice::start(ZONE).await;
    apply_text(&d.device, &format!("{ZONE}{}", other("one")))
        .await
        .unwrap();
    let www = || async {
        sorted(answers(
            &udp(d.v4(), &query("www.example.test.", RecordType::A)).await,
        ))
    };
    let other_txt = || async {
        let r = udp(d.v4(), &query("www.other.test.", RecordType::TXT)).await;
        r.answers
            .iter()
            .map(|a| a.data.to_string())
            .collect::<Vec<_>>()
    };
    let down = web_down_on_10(&d);
    assert_eq!(www().await, ["192.0.2.11"]);
    let snapshot = d.device.engine.dns().snapshot.load_full();

    // Only other.test changes: example.test is kept as it was, answer
    // included, and answers from the same slots.
    apply_text(&d.device, &format!("{ZONE}{}", other("two")))
        .await
        .unwrap();
    assert_eq!(other_txt().await, ["two"]);
    assert_eq!(www().await, ["192.0.2.11"]);
    let name = hickory_server::proto::rr::Name::from_ascii("www.example.test.").unwrap();
    let now = d.device.engine.dns().snapshot.load_full();
    assert!(std::sync::Arc::ptr_eq(
        snapshot.slot(&name, RecordType::A).unwrap(),
        now.slot(&name, RecordType::A).unwrap()
    ));

    // Its records' states came along.
    let status = d.device.engine.status();
    assert!(status.iter().any(|r| r.record == "www.example.test/A"));

    // Health after the change reaches the kept zone's answers.
    www_follows(&d, &down).await;
}

/// `down` (the web check of 192.0.2.10) up, then down again: www's
/// answers follow.
async fn www_follows(d: &TestDevice, down: &CheckRef) {
    let steps: [(CheckState, &[&str]); 2] = [
        (CheckState::Ok, &["192.0.2.10", "192.0.2.11"]),
        (CheckState::Error, &["192.0.2.11"]),
    ];
    for (state, want) in steps {
        d.device.engine.set_check(down, state, "set by the test");
        let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
        assert_eq!(sorted(answers(&r)), want);
    }
}

/// The checks up, then the web check of 192.0.2.10 down (set by hand):
/// that check.
fn web_down_on_10(d: &TestDevice) -> CheckRef {
    web_ok(d, true);
    let down = CheckRef {
        name: "web".into(),
        address: Some("192.0.2.10".parse().unwrap()),
    };
    d.device
        .engine
        .set_check(&down, CheckState::Error, "set by the test");
    down
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The test zone with `fs`, a record whose one address is checked and
/// whose fail-safe value answers when it is down.
fn fail_safe_zone() -> String {
    format!(
        "{ZONE}\n[[domain.record]]\nname = \"fs\"\ntype = \"A\"\n\
         fail_safe = [\"192.0.2.250\"]\n\
         addresses = [{{ ip = \"192.0.2.20\", hc = \"check:web\" }}]\n"
    )
}

/// What a DNS tool (kdig or dig) prints for `args`, asked of the device's
/// IPv4 address without recursion.
fn said_by(tool: &std::path::Path, d: &TestDevice, args: &[&str]) -> String {
    let port = d.v4().port().to_string();
    let server = format!("@{}", d.v4().ip());
    let kdig = tool.ends_with("kdig");
    let (time, tries) = match kdig {
        true => ("+timeout=5", "+retry=0"),
        false => ("+time=5", "+tries=1"),
    };
    let mut all = vec!["-p", &port, server.as_str(), "+norec", time, tries];
    all.extend_from_slice(args);
    let out = tokio::task::block_in_place(|| std::process::Command::new(tool).args(&all).output())
        .expect("the tool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("$ {} {}\n{text}", tool.display(), all.join(" "));
    text
}

/// Extended DNS Errors (RFC 8914) as kdig and dig read them, over UDP
/// (a fail-safe answer from the fast path) and TCP (the general path):
/// REFUSED outside the zones says Not Authoritative, a fail-safe answer
/// says so in Other's text, an ordinary answer says nothing, and a query
/// without EDNS gets no OPT at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_errors_are_read_by_kdig_and_dig_only_with_edns() {
    let d = TestDevice::start(&fail_safe_zone()).await;
    web_ok(&d, false);
    let fs = udp(d.v4(), &query("fs.example.test.", RecordType::A)).await;
    assert_eq!(answers(&fs), ["192.0.2.250"]);
    assert_eq!(ede(&fs), Some((0, "fail-safe answer".to_string())));
    for (name, package) in [("kdig", "knot-dnsutils"), ("dig", "bind9-dnsutils")] {
        let Some(bin) = tool(name, package) else {
            continue;
        };
        for transport in ["+notcp", "+tcp"] {
            let out = said_by(&bin, &d, &[transport, "+edns", "other.test", "A"]);
            assert!(out.contains("REFUSED"), "{name} {transport}: {out}");
            assert!(
                out.contains("EDE: 20 (Not Authoritative)"),
                "{name} {transport}: {out}"
            );
            let out = said_by(&bin, &d, &[transport, "+noedns", "other.test", "A"]);
            assert!(out.contains("REFUSED"), "{name} {transport}: {out}");
            assert!(
                !out.contains("EDE") && !out.contains("PSEUDOSECTION"),
                "no OPT without EDNS: {name} {transport}: {out}"
            );
            let out = said_by(&bin, &d, &[transport, "+edns", "fs.example.test", "A"]);
            assert!(out.contains("192.0.2.250"), "{name} {transport}: {out}");
            assert!(
                out.contains("EDE: 0 (Other)") && out.contains("fail-safe answer"),
                "{name} {transport}: {out}"
            );
            let out = said_by(&bin, &d, &[transport, "+noedns", "fs.example.test", "A"]);
            assert!(out.contains("192.0.2.250"), "{name} {transport}: {out}");
            assert!(!out.contains("EDE"), "{name} {transport}: {out}");
            let out = said_by(&bin, &d, &[transport, "+edns", "v6.example.test", "AAAA"]);
            assert!(out.contains("2001:db8::1"), "{name} {transport}: {out}");
            assert!(!out.contains("EDE"), "an answer says nothing: {out}");
        }
    }
    // STATUS (an opcode gtm does not take): NOTIMP, Not Supported. A
    // NOTIFY for a domain with no primary: REFUSED, Prohibited.
    if let Some(bin) = tool("dig", "bind9-dnsutils") {
        let out = said_by(&bin, &d, &["+opcode=status", "example.test", "SOA"]);
        assert!(out.contains("NOTIMP"), "{out}");
        assert!(out.contains("EDE: 21 (Not Supported)"), "{out}");
        let out = said_by(&bin, &d, &["+opcode=notify", "example.test", "SOA"]);
        assert!(out.contains("status: REFUSED"), "{out}");
        assert!(out.contains("EDE: 18 (Prohibited)"), "{out}");
    }
}

/// ANY (RFC 8482 §4.1) gets one RRset of the name, the same over UDP and
/// TCP: the smallest (at the apex the MX of its SOA, NS, MX, TXT and CAA),
/// a CNAME alone at its name, a wildcard's expansion; NXDOMAIN as for any
/// type.
#[tokio::test]
async fn any_gets_one_rrset_of_the_name_over_udp_and_tcp() {
    let d = TestDevice::start(ZONE).await;
    web_ok(&d, true);
    for (name, want, data) in [
        ("example.test.", RecordType::MX, "10 mail.example.test."),
        (
            "alias.example.test.",
            RecordType::CNAME,
            "www.example.test.",
        ),
        ("x.wild.example.test.", RecordType::A, "192.0.2.70"),
        ("v6.example.test.", RecordType::AAAA, "2001:db8::1"),
    ] {
        let m = query(name, RecordType::ANY);
        for r in [udp(d.v4(), &m).await, tcp(d.v4(), &m).await] {
            assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{name}");
            assert!(r.metadata.authoritative, "{name}");
            let got: Vec<(RecordType, String)> = r
                .answers
                .iter()
                .map(|a| (a.record_type(), a.data.to_string()))
                .collect();
            assert_eq!(got, [(want, data.to_string())], "{name}");
        }
    }
    let nx = udp(d.v4(), &query("missing.example.test.", RecordType::ANY)).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    assert!(matches!(nx.authorities[0].data, RData::SOA(_)));
    // A name with no record of its own (an empty non-terminal): NODATA.
    let ent = tcp(d.v4(), &query("_udp.example.test.", RecordType::ANY)).await;
    assert_eq!(ent.metadata.response_code, ResponseCode::NoError);
    assert!(ent.answers.is_empty());
    assert!(matches!(ent.authorities[0].data, RData::SOA(_)));
}
