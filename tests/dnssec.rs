//! DNSSEC judged by independent validators: delv (BIND) with the zone's DS
//! as its trust anchor, and a validating unbound in front of a device, on
//! the demo-like test zone signed online.

use std::{net::SocketAddr, path::Path, time::Duration};

use hickory_server::proto::{
    dnssec::rdata::{DNSSECRData, RRSIG},
    op::{Message, ResponseCode},
    rr::{RData, RecordType},
};

use crate::{
    backends::HttpBackend,
    cluster::{Proc, tls_pair, until_answer, zone},
    support::*,
};

/// The test zone, signed.
pub fn signed_zone() -> String {
    ZONE.replace(
        "soa = { minimum = 20 }",
        "soa = { minimum = 20 }\ndnssec = true",
    )
}

/// Waits (bounded) until the device signs example.test; its DS record.
pub(crate) async fn ds_of(d: &TestDevice) -> String {
    signed_ds(d, "example.test").await
}

/// Waits (bounded) until the device signs `zone`; its DS record.
pub(crate) async fn signed_ds(d: &TestDevice, zone: &str) -> String {
    for _ in 0..100 {
        if let Some(state) = d.device.engine.domain_dnssec(zone)
            && state.signing
            && let Some(key) = state.keys.first()
        {
            return key.ds.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{zone} was not signed within 10 s");
}

/// delv, from bind9-dnsutils.
pub(crate) fn delv() -> Option<std::path::PathBuf> {
    tool("delv", "bind9-dnsutils")
}

/// delv's trust-anchor file for a DS in zone-file form.
pub(crate) fn anchor_file(dir: &Path, ds: &str) -> std::path::PathBuf {
    let f: Vec<&str> = ds.split_whitespace().collect();
    // owner ttl class DS tag algorithm digest-type digest
    assert_eq!(f.get(3), Some(&"DS"), "{ds}");
    let text = format!(
        "trust-anchors {{ \"{}\" static-ds {} {} {} \"{}\"; }};\n",
        f[0],
        f[4],
        f[5],
        f[6],
        f[7..].concat()
    );
    let path = dir.join("anchors.conf");
    std::fs::write(&path, text).unwrap();
    path
}

/// What delv says of `name type` in example.test asked at `server` (`tcp`:
/// over TCP).
async fn ask_delv(
    server: SocketAddr,
    anchors: &Path,
    name: &str,
    rtype: &str,
    tcp: bool,
) -> String {
    ask(server, anchors, "example.test", name, rtype, tcp).await
}

/// What delv says over UDP, trusting `anchors` for `zone`.
pub(crate) async fn ask_delv_in(
    server: SocketAddr,
    anchors: &Path,
    zone: &str,
    name: &str,
    rtype: &str,
) -> String {
    ask(server, anchors, zone, name, rtype, false).await
}

/// Awaited, not blocking: a device in this test answers on its runtime.
async fn ask(
    server: SocketAddr,
    anchors: &Path,
    zone: &str,
    name: &str,
    rtype: &str,
    tcp: bool,
) -> String {
    let out = tokio::process::Command::new("delv")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string()])
        .arg("-a")
        .arg(anchors)
        .arg(format!("+root={zone}"))
        .arg(if tcp { "+tcp" } else { "+notcp" })
        .args([name, rtype])
        .output()
        .await
        .expect("delv runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn delv_validates_signed_answers_and_compact_denials() {
    let Some(_) = delv() else { return };
    let d = TestDevice::start(&signed_zone()).await;
    let ds = ds_of(&d).await;
    let dir = tempfile::tempdir().unwrap();
    let anchors = anchor_file(dir.path(), &ds);
    // The zone is signed from its first answer, before www's checks have
    // failed: wait (bounded) until www answers empty.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !answers(&udp(d.v4(), &query("www.example.test.", RecordType::A)).await).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "www's checks never failed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (name, rtype, expect) in [
        ("example.test", "DNSKEY", "; fully validated"),
        ("example.test", "SOA", "; fully validated"),
        ("example.test", "MX", "; fully validated"),
        ("big.example.test", "TXT", "; fully validated"),
        // Steered: a weighted, a persist and a topology record.
        ("w.example.test", "A", "; fully validated"),
        ("sticky.example.test", "A", "; fully validated"),
        ("geo.example.test", "A", "; fully validated"),
        // A wildcard's expansion and a CNAME to a steered name.
        ("x.wild.example.test", "A", "; fully validated"),
        ("alias.example.test", "A", "; fully validated"),
        // ANY: one RRset with its RRSIG (RFC 8482), a wildcard's signed
        // as its expansion.
        ("example.test", "ANY", "; fully validated"),
        ("w.example.test", "ANY", "; fully validated"),
        ("x.wild.example.test", "ANY", "; fully validated"),
        // Compact denial: no such name, no such type, an empty non-terminal,
        // a steered record answering empty (its checks probe addresses
        // outside loopback, refused here: no address is healthy).
        (
            "www.example.test",
            "A",
            "; negative response, fully validated",
        ),
        (
            "nope.example.test",
            "A",
            "; negative response, fully validated",
        ),
        (
            "www.example.test",
            "AAAA",
            "; negative response, fully validated",
        ),
        (
            "_udp.example.test",
            "TXT",
            "; negative response, fully validated",
        ),
        (
            "x.wild.example.test",
            "TXT",
            "; negative response, fully validated",
        ),
    ] {
        // Over UDP (the fast path answers most) and TCP (the general one).
        for tcp in [false, true] {
            let said = ask_delv(d.v4(), &anchors, name, rtype, tcp).await;
            assert!(said.contains(expect), "{name} {rtype} (tcp {tcp}):\n{said}");
        }
    }
}

#[tokio::test]
async fn answers_carry_signatures_only_when_asked_and_nxname_is_formerr() {
    let d = TestDevice::start(&signed_zone()).await;
    ds_of(&d).await;
    let sigs = |m: &Message| {
        m.answers
            .iter()
            .chain(&m.authorities)
            .filter(|r| r.record_type() == RecordType::RRSIG)
            .count()
    };
    let plain = udp(d.v4(), &query("w.example.test.", RecordType::A)).await;
    assert_eq!(sigs(&plain), 0, "no DO, no RRSIG");
    let signed = udp(d.v4(), &with_do(query("w.example.test.", RecordType::A))).await;
    assert_eq!(sigs(&signed), 1);
    assert_eq!(plain.answers.len() + 1, signed.answers.len());
    // The fast and the general path agree (TCP is the general path).
    let over_tcp = tcp(d.v4(), &with_do(query("w.example.test.", RecordType::A))).await;
    assert_eq!(sigs(&over_tcp), 1);
    // A name that does not exist: NOERROR and an NSEC with NXNAME, with DO;
    // NXDOMAIN without.
    let nx = udp(d.v4(), &with_do(query("nope.example.test.", RecordType::A))).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NoError);
    let nsec = nx
        .authorities
        .iter()
        .find_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::NSEC(n)) => Some(n.clone()),
            _ => None,
        })
        .expect("an NSEC");
    assert!(
        nsec.type_bit_maps().any(|t| t == RecordType::Unknown(128)),
        "{nsec:?}"
    );
    let nx = udp(d.v4(), &query("nope.example.test.", RecordType::A)).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    // Too large for the client's 512 bytes with its signature: TC and no
    // records at all (never an RRset without its RRSIG); whole over TCP.
    let mut big = with_do(query("big.example.test.", RecordType::TXT));
    if let Some(e) = big.edns.as_mut() {
        e.set_max_payload(512);
    }
    let cut = udp(d.v4(), &big).await;
    assert!(cut.metadata.truncation, "{cut:?}");
    assert!(cut.answers.is_empty() && cut.authorities.is_empty());
    let whole = tcp(d.v4(), &big).await;
    assert!(!whole.metadata.truncation);
    assert_eq!(sigs(&whole), 1);
    assert_eq!(whole.answers.len(), 5);
    let nxname = udp(
        d.v4(),
        &with_do(query("www.example.test.", RecordType::Unknown(128))),
    )
    .await;
    assert_eq!(nxname.metadata.response_code, ResponseCode::FormErr);
    // RFC 9824 §3.5's Extended DNS Error: 30, Invalid Query Type.
    assert_eq!(ede(&nxname), Some((30, String::new())));
    // ANY: one RRset and the RRSIG over it, at the apex and a wildcard.
    for name in ["example.test.", "x.wild.example.test."] {
        let any = tcp(d.v4(), &with_do(query(name, RecordType::ANY))).await;
        let types: Vec<RecordType> = any.answers.iter().map(|r| r.record_type()).collect();
        let covered: Vec<RecordType> = any
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::DNSSEC(DNSSECRData::RRSIG(sig)) => Some(sig.input().type_covered),
                _ => None,
            })
            .collect();
        let rrsets: Vec<&RecordType> = types.iter().filter(|t| **t != RecordType::RRSIG).collect();
        assert_eq!(covered.len(), 1, "{name}: {types:?}");
        assert!(
            rrsets.iter().all(|t| **t == covered[0]),
            "{name}: {types:?}"
        );
    }
}

/// The (inception, expiration) of every RRSIG of an answer, static,
/// steered and denial alike.
fn validity(m: &Message) -> Vec<(u32, u32)> {
    m.answers
        .iter()
        .chain(&m.authorities)
        .filter_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::RRSIG(s)) => Some((
                s.input().sig_inception.get(),
                s.input().sig_expiration.get(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_new_week_signs_every_answer_again_with_the_next_window() {
    let d = TestDevice::start(&signed_zone()).await;
    ds_of(&d).await;
    let ask = |name: &'static str, rtype| {
        let server = d.v4();
        async move { udp(server, &with_do(query(name, rtype))).await }
    };
    let questions = [
        ("example.test.", RecordType::SOA),
        ("w.example.test.", RecordType::A),
        ("nope.example.test.", RecordType::A),
        ("example.test.", RecordType::TXT),
    ];
    let mut before = Vec::new();
    for (name, rtype) in questions {
        let v = validity(&ask(name, rtype).await);
        assert!(!v.is_empty(), "{name} {rtype}: unsigned");
        before.push(v);
    }
    // What the `dnssec` worker does when its clock enters the next week.
    let week = 7 * 24 * 3600;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let engine = d.device.engine.clone();
    tokio::task::spawn_blocking(move || engine.resign_at(now + week))
        .await
        .unwrap();
    for ((name, rtype), old) in questions.into_iter().zip(before) {
        let new = validity(&ask(name, rtype).await);
        assert_eq!(new.len(), old.len(), "{name} {rtype}");
        for ((i0, e0), (i1, e1)) in old.iter().zip(&new) {
            assert_eq!(
                (i1 - i0, e1 - e0),
                (week as u32, week as u32),
                "{name} {rtype}"
            );
        }
    }
}

/// Sets the AD bit of a query: a resolver says whether it validated the
/// answer only to a client that asks (RFC 6840 §5.7).
fn with_ad(mut m: Message) -> Message {
    m.metadata.authentic_data = true;
    m
}

/// Sets the DO bit of a query's EDNS.
fn with_do(mut m: Message) -> Message {
    if let Some(e) = m.edns.as_mut() {
        e.set_dnssec_ok(true);
    }
    m
}

/// A UDP relay on loopback between a resolver and a device that spoils
/// the signature of every RRSIG it carries back (when `spoil`), as a
/// broken signer or an attacker would; stops with the test.
async fn relay(upstream: SocketAddr) -> SocketAddr {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65535];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let out = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            out.send_to(&buf[..n], upstream).await.unwrap();
            let mut back = vec![0u8; 65535];
            let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(2), out.recv(&mut back)).await
            else {
                continue;
            };
            let reply = match Message::from_vec(&back[..m]) {
                Ok(mut msg) => {
                    for r in msg.answers.iter_mut().chain(msg.authorities.iter_mut()) {
                        if let RData::DNSSEC(DNSSECRData::RRSIG(sig)) = &r.data {
                            let mut bytes = sig.sig().to_vec();
                            if let Some(b) = bytes.last_mut() {
                                *b ^= 0x01;
                            }
                            r.data = RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(
                                sig.input().clone(),
                                bytes,
                            )));
                        }
                    }
                    msg.to_vec().unwrap()
                }
                Err(_) => back[..m].to_vec(),
            };
            let _ = sock.send_to(&reply, from).await;
        }
    });
    addr
}

#[tokio::test]
async fn a_validating_unbound_trusts_steered_answers_from_every_place_and_not_a_broken_one() {
    let Some(binary) = unbound_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    crate::geo::write_mmdb(&db);
    let d = TestDevice::start_with(&signed_zone(), Some(db)).await;
    let ds = ds_of(&d).await;
    let u = Unbound::start(&binary, "example.test", d.v4(), &validating(&ds)).await;
    // Each place gets its own answer, and each validates (AD).
    for (subnet, expect) in [
        (Some("81.2.69.0/24"), "192.0.2.50"),
        (Some("2.2.2.0/24"), "192.0.2.51"),
        (None, "192.0.2.52"),
    ] {
        let q = query("geo.example.test.", RecordType::A);
        let q = match subnet {
            Some(s) => with_ecs(q, s),
            None => q,
        };
        let m = udp(u.addr, &with_ad(q)).await;
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::NoError,
            "{subnet:?}"
        );
        assert_eq!(answers(&m), [expect], "{subnet:?}");
        assert!(m.metadata.authentic_data, "{subnet:?}: AD");
    }
    for (name, rtype, code) in [
        ("nope.example.test.", RecordType::A, ResponseCode::NoError),
        ("www.example.test.", RecordType::AAAA, ResponseCode::NoError),
    ] {
        let m = udp(u.addr, &with_ad(query(name, rtype))).await;
        assert_eq!(m.metadata.response_code, code, "{name} {rtype}");
        assert!(m.answers.is_empty(), "{name} {rtype}");
        assert!(m.metadata.authentic_data, "{name} {rtype}: AD");
    }
    // Behind a relay that spoils signatures, the same zone is bogus.
    let spoiled = relay(d.v4()).await;
    let bad = Unbound::start(&binary, "example.test", spoiled, &validating(&ds)).await;
    let m = udp(bad.addr, &query("www.example.test.", RecordType::A)).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(m.answers.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_devices_of_a_pair_sign_with_one_key_after_a_restart_and_through_a_rollover() {
    let Some(_) = delv() else { return };
    let root = tempfile::tempdir().unwrap();
    let (a, mut b, _) = tls_pair(root.path(), 181);
    b.apply_ok(&zone("192.0.2.7"));
    until_answer(&a, "192.0.2.7").await;
    // Enabled through the follower: the leader makes the key, the CLI
    // waits for it and prints the DS.
    let printed = b.ok(&["domain", "dnssec", "enable", "pair.test"]);
    assert!(printed.contains(" DS "), "{printed}");
    let ds_a = a.ok(&["domain", "ds", "pair.test"]);
    let ds_b = b.ok(&["domain", "ds", "pair.test"]);
    assert_eq!(ds_a, ds_b, "one key for the cluster");
    // The change as applied, then the DS.
    assert!(printed.contains("dnssec (unset) → true"), "{printed}");
    assert_eq!(Some(ds_a.trim()), printed.lines().last());
    let anchors = anchor_file(root.path(), ds_a.trim());
    let validated = async |p: &Proc, what: &str| {
        for (name, rtype, expect) in [
            ("www.pair.test", "A", "; fully validated"),
            (
                "nope.pair.test",
                "A",
                "; negative response, fully validated",
            ),
        ] {
            let said = ask_delv_in(p.dns(), &anchors, "pair.test", name, rtype).await;
            assert!(said.contains(expect), "{} {what}: {name}:\n{said}", p.name);
        }
    };
    validated(&a, "").await;
    validated(&b, "").await;
    // The key is kept: after kill -9 and a restart, the same DS validates.
    b.kill();
    b.restart();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while b.gtm(&["domain", "ds", "pair.test"]).stdout != ds_a.as_bytes() {
        assert!(std::time::Instant::now() < deadline, "gtm2 lost its key");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    validated(&b, "after a restart").await;
    // The key is never in the configuration or its history.
    let export = a.ok(&["config", "export"]);
    assert!(export.contains("dnssec = true"), "{export}");
    assert!(!export.contains("pkcs8"), "{export}");

    // A rollover driven through either device moves both: one-second TTLs
    // so that each wait is a second.
    a.apply_ok(&zone("192.0.2.7").replace(
        "nameservers = [\"ns1.pair.test\"]",
        "nameservers = [\"ns1.pair.test\"]\nttl = 1\nsoa = { minimum = 1 }\ndnssec = true",
    ));
    let step = async |p: &Proc, step: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let out = p.gtm(&["domain", "dnssec", "rollover", "pair.test", step]);
            if out.status.success() {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{step}: {out:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let dnskeys = async |p: &Proc| {
        let m = udp(p.dns(), &query("pair.test.", RecordType::DNSKEY)).await;
        m.answers.len()
    };
    let signer_tag = async |p: &Proc| {
        let m = udp(p.dns(), &with_do(query("www.pair.test.", RecordType::A))).await;
        m.answers
            .iter()
            .find_map(|r| match &r.data {
                RData::DNSSEC(DNSSECRData::RRSIG(s)) => Some(s.input().key_tag),
                _ => None,
            })
            .expect("signed")
    };
    let old_tag = signer_tag(&a).await;
    step(&b, "publish").await;
    for p in [&a, &b] {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while dnskeys(p).await != 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{}: one DNSKEY",
                p.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            signer_tag(p).await,
            old_tag,
            "{}: published, not active",
            p.name
        );
    }
    step(&a, "swap").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let new_tag = loop {
        let (ta, tb) = (signer_tag(&a).await, signer_tag(&b).await);
        if ta != old_tag && ta == tb {
            break ta;
        }
        assert!(std::time::Instant::now() < deadline, "swap: {ta} and {tb}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    step(&b, "retire").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while dnskeys(&a).await != 1 || dnskeys(&b).await != 1 {
        assert!(std::time::Instant::now() < deadline, "retire");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ds_a = a.ok(&["domain", "ds", "pair.test"]);
    assert_eq!(ds_a, b.ok(&["domain", "ds", "pair.test"]));
    assert!(ds_a.contains(&format!("DS {new_tag} ")), "{ds_a}");
    let anchors = anchor_file(root.path(), ds_a.trim());
    for p in [&a, &b] {
        let said = ask_delv_in(p.dns(), &anchors, "pair.test", "www.pair.test", "A").await;
        assert!(
            said.contains("; fully validated"),
            "{} after the rollover:\n{said}",
            p.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_without_mutual_tls_makes_no_key_and_says_why() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.182.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.182.2");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    let signed = zone("192.0.2.7").replace(
        "nameservers = [\"ns1.pair.test\"]",
        "nameservers = [\"ns1.pair.test\"]\ndnssec = true",
    );
    a.apply_ok(&signed);
    until_answer(&b, "192.0.2.7").await;
    // The leader looks once a second: the refusal is logged, once.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let logs = a.ok(&["logs", "--kind", "config"]);
        if logs.contains("mutual TLS") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{logs}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status = a.ok(&["domain", "dnssec", "status", "pair.test"]);
    assert!(status.contains("no key in force yet"), "{status}");
    let ds = a.gtm(&["domain", "ds", "pair.test"]);
    assert_eq!(ds.status.code(), Some(5), "{ds:?}");
    // Unsigned meanwhile: no RRSIG even with DO.
    let m = udp(b.dns(), &with_do(query("www.pair.test.", RecordType::A))).await;
    assert_eq!(answers(&m), ["192.0.2.7"]);
    assert!(
        m.answers
            .iter()
            .all(|r| r.record_type() != RecordType::RRSIG)
    );
}

/// A zone with one-second TTLs, so each rollover wait is a second.
const ROLL: &str = r#"
[[domain]]
name = "roll.test"
ttl = 1
nameservers = ["ns1.roll.test"]
soa = { minimum = 1 }
dnssec = true

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.80" }]
"#;

/// `gtm domain dnssec rollover roll.test STEP`, asked until its wait is
/// over (bounded). With `early`, first shown refused while it is certainly
/// too early: the zone's TTL raised to an hour makes the wait an hour from
/// the last step (whatever the time the steps between took), and then put
/// back to a second.
async fn roll(d: &TestDevice, step: &str, early: bool) {
    let run = |step: &str| {
        tokio::task::block_in_place(|| {
            run_gtm(d, &["domain", "dnssec", "rollover", "roll.test", step])
        })
    };
    if early {
        let hour = ROLL.replace("\nttl = 1\n", "\nttl = 3600\n");
        apply_text(&d.device, &hour).await.expect("valid");
        let first = run(step);
        assert_ne!(first.code, Some(0), "{step} right away: {first:?}");
        assert!(first.stderr.contains("is allowed from"), "{first:?}");
        apply_text(&d.device, ROLL).await.expect("valid");
    }
    for _ in 0..50 {
        if run(step).code == Some(0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{step} was never allowed");
}

/// The DS records `gtm domain ds` prints (for the parent).
fn parent_ds(d: &TestDevice) -> Vec<String> {
    let out = tokio::task::block_in_place(|| run_gtm(d, &["domain", "ds", "roll.test"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    out.stdout.lines().map(str::to_string).collect()
}

/// unbound trusting `ds` (one DS per anchor line).
fn trusting(ds: &[String]) -> String {
    let lines: Vec<String> = ds
        .iter()
        .map(|d| format!("  trust-anchor: \"{d}\""))
        .collect();
    let mut conf = validating(&ds[0]);
    conf = conf.replace(&format!("  trust-anchor: \"{}\"", ds[0]), &lines.join("\n"));
    conf
}

async fn validated(u: &Unbound, what: &str) {
    let m = udp(u.addr, &with_ad(query("www.roll.test.", RecordType::A))).await;
    assert_eq!(answers(&m), ["192.0.2.80"], "{what}");
    assert!(m.metadata.authentic_data, "{what}: AD");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rollover_keeps_a_validating_resolver_validating_at_every_step() {
    let Some(binary) = unbound_binary() else {
        return;
    };
    let d = TestDevice::start(ROLL).await;
    let mut old = Vec::new();
    for _ in 0..100 {
        if let Some(s) = d.device.engine.domain_dnssec("roll.test")
            && s.signing
        {
            old = parent_ds(&d);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(old.len(), 1, "one key, one DS: {old:?}");
    // A resolver whose parent has the old DS only.
    let before = Unbound::start(&binary, "roll.test", d.v4(), &trusting(&old)).await;
    validated(&before, "before").await;

    // 1. Publish: a second DNSKEY, the CDS names both; the old key signs.
    roll(&d, "publish", false).await;
    let both = parent_ds(&d);
    assert_eq!(both.len(), 2, "{both:?}");
    assert!(both.contains(&old[0]));
    let cds = udp(d.v4(), &query("roll.test.", RecordType::CDS)).await;
    assert_eq!(cds.answers.len(), 2);
    validated(&before, "published, parent with the old DS").await;
    // The parent adds the new DS.
    let parent_both = Unbound::start(&binary, "roll.test", d.v4(), &trusting(&both)).await;
    validated(&parent_both, "published, parent with both").await;

    // 2. Swap, refused until the DNSKEY TTL has passed: the new key signs,
    // the old one stays in the DNSKEY set, the CDS names the new one only.
    roll(&d, "swap", true).await;
    let new = parent_ds(&d);
    assert_eq!(new.len(), 1);
    assert_ne!(new, old);
    validated(&parent_both, "swapped, parent with both").await;
    let dnskeys = udp(d.v4(), &query("roll.test.", RecordType::DNSKEY)).await;
    assert_eq!(
        dnskeys.answers.len(),
        2,
        "the retired key is still published"
    );
    // The parent removes the old DS.
    let after = Unbound::start(&binary, "roll.test", d.v4(), &trusting(&new)).await;
    validated(&after, "swapped, parent with the new DS").await;

    // 3. Retire, refused until the longest TTL has passed: one key again.
    roll(&d, "retire", true).await;
    let dnskeys = udp(d.v4(), &query("roll.test.", RecordType::DNSKEY)).await;
    assert_eq!(dnskeys.answers.len(), 1);
    validated(&after, "retired").await;
    validated(&parent_both, "retired, a resolver still trusting both").await;
    let logs = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--kind", "operator"]));
    assert!(logs.stdout.contains("the rollover is done"), "{logs:?}");
}

/// A signed zone whose record follows two real HTTP backends.
fn health_zone(port: u16) -> String {
    format!(
        r#"
[[check]]
name = "web"
type = "http"
port = {port}
path = "/health"
expect_body = "ok"
interval = "100ms"
timeout = "80ms"
failures = 2
successes = 2

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
dnssec = true

[[domain.record]]
name = "www"
type = "A"
addresses = [
  {{ ip = "127.0.183.2", hc = "check:web" }},
  {{ ip = "127.0.183.3", hc = "check:web" }},
]
"#
    )
}

/// delv's verdict and the addresses it validated for `www.example.test A`.
async fn delv_www(d: &TestDevice, anchors: &Path) -> (bool, Vec<String>) {
    let said = ask_delv(d.v4(), anchors, "www.example.test", "A", false).await;
    let mut addresses: Vec<String> = said
        .lines()
        .filter(|l| l.contains("\tA\t") || l.contains(" IN A "))
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect();
    addresses.sort();
    (said.contains("; fully validated"), addresses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_changed_by_health_are_signed_as_they_change() {
    let Some(_) = delv() else { return };
    let mut a = HttpBackend::start_at("127.0.183.2:0".parse().unwrap()).await;
    let b = HttpBackend::start_at(SocketAddr::new(
        "127.0.183.3".parse().unwrap(),
        a.addr.port(),
    ))
    .await;
    let d = TestDevice::start(&health_zone(a.addr.port())).await;
    let ds = ds_of(&d).await;
    let dir = tempfile::tempdir().unwrap();
    let anchors = anchor_file(dir.path(), &ds);
    let until = async |want: &[&str]| {
        for _ in 0..300 {
            let (valid, got) = delv_www(&d, &anchors).await;
            if valid && got == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "never validated as {want:?}: {:?}",
            delv_www(&d, &anchors).await
        );
    };
    until(&["127.0.183.2", "127.0.183.3"]).await;
    // A backend goes down: the new answer is signed when it is made.
    a.stop().await;
    until(&["127.0.183.3"]).await;
    a.restart().await;
    until(&["127.0.183.2", "127.0.183.3"]).await;
    drop(b);
}

/// `gtm domain ds` right after the apply that signs a domain prints its
/// DS (it waits the moment the key takes to be made) and never tells the
/// operator to run a command that is not needed; of a domain not signed,
/// it says so and how to sign it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ds_of_a_domain_an_apply_signs_is_printed_right_after_it() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.186.1");
    a.apply_ok(&zone("192.0.2.7"));
    let unsigned = a.gtm(&["domain", "ds", "pair.test"]);
    assert!(!unsigned.status.success());
    let said = String::from_utf8_lossy(&unsigned.stderr);
    assert!(said.contains("pair.test is not signed"), "{said}");
    let signed = zone("192.0.2.7").replace(
        "nameservers = [\"ns1.pair.test\"]",
        "nameservers = [\"ns1.pair.test\"]\ndnssec = true",
    );
    a.apply_ok(&signed);
    // Signed from the first answer after the apply: the key came with it.
    let m = udp(a.dns(), &with_do(query("www.pair.test.", RecordType::A))).await;
    assert!(
        m.answers
            .iter()
            .any(|r| r.record_type() == RecordType::RRSIG),
        "{m:?}"
    );
    let ds = a.ok(&["domain", "ds", "pair.test"]);
    assert!(ds.contains(" DS "), "{ds}");
}

/// A domain a configuration adds signed is answered signed from its first
/// answer on every device: the device that receives the apply makes the
/// key and sends it in the same command, so no device ever serves the
/// zone before it holds the key. One key for the cluster, logged once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_an_apply_signs_is_answered_signed_from_its_first_answer_on_every_device() {
    let root = tempfile::tempdir().unwrap();
    let (a, b, _) = tls_pair(root.path(), 187);
    a.apply_ok(&zone("192.0.2.7"));
    until_answer(&b, "192.0.2.7").await;
    // A watcher on each device asks for the new zone until it answers.
    let first_answer = |p: &Proc| {
        let dns = p.dns();
        tokio::spawn(async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                let m = udp(dns, &with_do(query("www.signed.test.", RecordType::A))).await;
                if m.response_code == ResponseCode::NoError && !m.answers.is_empty() {
                    return m;
                }
                assert!(std::time::Instant::now() < deadline, "never answered");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let (on_a, on_b) = (first_answer(&a), first_answer(&b));
    let with_signed = format!(
        "{}{}",
        zone("192.0.2.7"),
        r#"
[[domain]]
name = "signed.test"
nameservers = ["ns1.signed.test"]
dnssec = true

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.9" }]
"#
    );
    // Through the follower: it makes the key, not the leader's worker.
    b.apply_ok(&with_signed);
    for (p, first) in [(&a, on_a), (&b, on_b)] {
        let m = first.await.unwrap();
        assert!(
            m.answers
                .iter()
                .any(|r| r.record_type() == RecordType::RRSIG),
            "{}'s first answer is unsigned: {m:?}",
            p.name
        );
    }
    let ds = a.ok(&["domain", "ds", "signed.test"]);
    assert_eq!(ds, b.ok(&["domain", "ds", "signed.test"]), "one key");
    let logs = a.ok(&["logs", "--kind", "operator"]);
    let made: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("made for signed.test"))
        .collect();
    assert_eq!(made.len(), 1, "{logs}");
    assert!(made[0].contains("on gtm2"), "{logs}");
}
