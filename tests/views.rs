//! Views (split horizon) over real UDP (docs/views.md): resolvers at
//! 127.0.158.x and private ECS subnets are the internal view and get the
//! internal zone, everyone else the zone every client gets; NXDOMAIN,
//! SOA serials and ECS scopes per view; a pair of real processes answers
//! alike, also after a kill -9 and a restart, and a view edited as an
//! object through the follower moves the answers on both.
//!
//! Addresses: the pair's devices 127.0.157.1 and .2, internal resolvers
//! 127.0.158.x.

use std::net::{IpAddr, SocketAddr};

use hickory_server::proto::{
    op::{Message, ResponseCode},
    rr::{RData, RecordType},
};

use crate::{cluster::Proc, support::*};

const CONFIG: &str = r#"
[[view]]
name = "internal"
clients = ["127.0.158.0/24", "10.0.0.0/8"]

[[domain]]
name = "split.test"
nameservers = ["ns1.split.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.10" }]

[[domain.record]]
name = "www"
type = "A"
view = "internal"
addresses = [{ ip = "10.0.0.10" }]

[[domain.record]]
name = "intranet"
type = "A"
view = "internal"
addresses = [{ ip = "10.0.0.20" }]

[[domain.record]]
name = "mail"
type = "MX"
values = ["10 mx.split.test."]

[[domain]]
name = "corp.test"
nameservers = ["ns1.corp.test"]
view = "internal"

[[domain.record]]
name = "wiki"
type = "A"
addresses = [{ ip = "10.0.0.30" }]
"#;

/// Asks `name rtype` of `server` from `from`, with `ecs` when given.
async fn ask(
    from: IpAddr,
    server: SocketAddr,
    name: &str,
    rtype: RecordType,
    ecs: Option<&str>,
) -> Message {
    let mut q = query(name, rtype);
    if let Some(subnet) = ecs {
        q = with_ecs(q, subnet);
    }
    let raw = udp_raw_from(from, server, &q.to_vec().unwrap()).await;
    Message::from_vec(&raw).expect("a well-formed response")
}

/// What a response says, in short: its rcode and its answers' data.
fn said(m: &Message) -> String {
    let mut data = answers(m);
    data.sort();
    format!("{} {}", m.metadata.response_code, data.join(" "))
}

/// The zone's SOA serial in a response's answer or authority section.
fn serial(m: &Message) -> Option<u32> {
    m.answers
        .iter()
        .chain(m.authorities.iter())
        .find_map(|r| match &r.data {
            RData::SOA(soa) => Some(soa.serial),
            _ => None,
        })
}

const INSIDE: &str = "127.0.158.1";
const OUTSIDE: &str = "127.0.0.1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_resolvers_and_subnets_get_the_internal_zone_and_the_rest_the_other() {
    let d = TestDevice::start(CONFIG).await;
    let server = d.v4();
    let inside: IpAddr = INSIDE.parse().unwrap();
    let outside: IpAddr = OUTSIDE.parse().unwrap();
    let a = RecordType::A;

    // By the resolver's address.
    let m = ask(inside, server, "www.split.test.", a, None).await;
    assert_eq!(said(&m), "No Error 10.0.0.10");
    let m = ask(outside, server, "www.split.test.", a, None).await;
    assert_eq!(said(&m), "No Error 192.0.2.10");
    // A name of the view alone: NXDOMAIN outside, with the SOA.
    let m = ask(inside, server, "intranet.split.test.", a, None).await;
    assert_eq!(said(&m), "No Error 10.0.0.20");
    let m = ask(outside, server, "intranet.split.test.", a, None).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert!(serial(&m).is_some(), "the SOA in authority: {m:?}");
    // A name the view has no record at is answered in both.
    for from in [inside, outside] {
        let m = ask(from, server, "mail.split.test.", RecordType::MX, None).await;
        assert_eq!(said(&m), "No Error 10 mx.split.test.");
    }
    // A domain that is the view's alone: not served to others.
    let m = ask(inside, server, "wiki.corp.test.", a, None).await;
    assert_eq!(said(&m), "No Error 10.0.0.30");
    let m = ask(outside, server, "wiki.corp.test.", a, None).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    // Not this client's zone: Extended DNS Error 20, as outside every zone.
    assert_eq!(ede(&m), Some((20, String::new())), "{m:?}");
    if let Some(dig) = tool("dig", "bind9-dnsutils") {
        let port = server.port().to_string();
        let out = tokio::task::block_in_place(|| {
            std::process::Command::new(dig)
                .args(["-b", OUTSIDE, "-p", &port, "@127.0.0.1", "+norec"])
                .args(["+time=5", "+tries=1", "wiki.corp.test", "A"])
                .output()
        })
        .expect("dig runs");
        let out = String::from_utf8_lossy(&out.stdout);
        assert!(out.contains("status: REFUSED"), "{out}");
        assert!(out.contains("EDE: 20 (Not Authoritative)"), "{out}");
    }

    // By ECS: a private subnet of the view, and a public one. The scope
    // is the block the view's networks leave around the subnet: 10.0.0.0/8
    // holds 10.1.2.0/24 (scope 8); 192.0.2.0/24 lies in 128.0.0.0/1,
    // which no network of the views splits (scope 1).
    let m = ask(outside, server, "www.split.test.", a, Some("10.1.2.0/24")).await;
    assert_eq!(said(&m), "No Error 10.0.0.10");
    assert_eq!(ecs_scope(&m), Some(24), "a private subnet is scoped whole");
    let m = ask(outside, server, "www.split.test.", a, Some("192.0.2.0/24")).await;
    assert_eq!(said(&m), "No Error 192.0.2.10");
    assert_eq!(ecs_scope(&m), Some(1));
    // A name whose zone has no views answers with scope 0.
    let m = ask(
        outside,
        server,
        "mail.split.test.",
        RecordType::MX,
        Some("192.0.2.0/24"),
    )
    .await;
    assert_eq!(ecs_scope(&m), Some(1), "split.test answers per view");

    // The same over TCP (the general path).
    let q = query("intranet.split.test.", a);
    let m = tcp(server, &q).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);

    // Explain says which view a client is in.
    let out = run_gtm(
        &d,
        &[
            "record",
            "explain",
            "www.split.test",
            "A@internal",
            "--client",
            INSIDE,
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("the client is in view internal"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_one_view_moves_its_serial_and_leaves_the_others() {
    let root = tempfile::tempdir().unwrap();
    let (a, mut b) = tokio::task::block_in_place(|| {
        let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.157.1");
        let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.157.2");
        a.ok(&["cluster", "init"]);
        b.join(&a);
        a.apply_ok(CONFIG);
        (a, b)
    });
    let inside: IpAddr = INSIDE.parse().unwrap();
    let outside: IpAddr = OUTSIDE.parse().unwrap();
    // Waits (bounded) until `p` answers `name` from each address as wanted.
    let until = async |p: &Proc, name: &str, want: &[(IpAddr, &str)]| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let mut got = Vec::new();
            for (from, _) in want {
                got.push(said(&ask(*from, p.dns(), name, RecordType::A, None).await));
            }
            if got.iter().zip(want).all(|(g, (_, w))| g == w) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} answers {name} {got:?}, not {want:?}",
                p.name
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let before = [
        (inside, "No Error 10.0.0.10"),
        (outside, "No Error 192.0.2.10"),
    ];
    for p in [&a, &b] {
        until(p, "www.split.test.", &before).await;
    }
    let soa = async |p: &Proc, from: IpAddr| {
        serial(&ask(from, p.dns(), "split.test.", RecordType::SOA, None).await).expect("an SOA")
    };
    let (inside_was, outside_was) = (soa(&a, inside).await, soa(&a, outside).await);

    // Through the follower: the internal www moves.
    let changed = CONFIG.replace("10.0.0.10", "10.0.0.11");
    tokio::task::block_in_place(|| b.apply_ok(&changed));
    let after = [
        (inside, "No Error 10.0.0.11"),
        (outside, "No Error 192.0.2.10"),
    ];
    for p in [&a, &b] {
        until(p, "www.split.test.", &after).await;
        assert!(
            soa(p, inside).await > inside_was,
            "the internal serial moves"
        );
        assert_eq!(soa(p, outside).await, outside_was, "the other stays");
    }

    // The view edited as an object through the follower: 127.0.158.0/24
    // is no longer internal.
    let file = root.path().join("internal.toml");
    std::fs::write(&file, "clients = [\"10.0.0.0/8\"]\n").unwrap();
    let out = tokio::task::block_in_place(|| {
        b.gtm(&["view", "put", "internal", "--file", file.to_str().unwrap()])
    });
    assert!(out.status.success(), "{out:?}");
    let outside_now = [
        (inside, "No Error 192.0.2.10"),
        (outside, "No Error 192.0.2.10"),
    ];
    for p in [&a, &b] {
        until(p, "www.split.test.", &outside_now).await;
    }
    // kill -9 and a restart: the views as applied, from the store.
    b.kill();
    b.restart();
    until(&b, "www.split.test.", &outside_now).await;
    let m = ask(
        outside,
        b.dns(),
        "www.split.test.",
        RecordType::A,
        Some("10.9.0.0/16"),
    )
    .await;
    assert_eq!(said(&m), "No Error 10.0.0.11");
    drop(a);
}

/// What delv, bound to `from`, says of `name type` asked at `server`,
/// trusting `anchors` for split.test.
async fn delv_from(
    from: &str,
    server: SocketAddr,
    anchors: &std::path::Path,
    name: &str,
    rtype: &str,
) -> String {
    let out = tokio::process::Command::new("delv")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string(), "-b", from])
        .arg("-a")
        .arg(anchors)
        .args(["+root=split.test", name, rtype])
        .output()
        .await
        .expect("delv runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delv_validates_each_views_answers_and_denials_with_one_key() {
    let Some(_) = crate::dnssec::delv() else {
        return;
    };
    let config = CONFIG.replace(
        "nameservers = [\"ns1.split.test\"]\n",
        "nameservers = [\"ns1.split.test\"]\ndnssec = true\n",
    );
    let d = TestDevice::start(&config).await;
    let mut ds = None;
    for _ in 0..100 {
        if let Some(state) = d.device.engine.domain_dnssec("split.test")
            && state.signing
            && let Some(key) = state.keys.first()
        {
            ds = Some(key.ds.clone());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let ds = ds.expect("split.test is signed within 10 s");
    let dir = tempfile::tempdir().unwrap();
    let anchors = crate::dnssec::anchor_file(dir.path(), &ds);
    let server = d.v4();
    for (from, name, rtype, expect) in [
        (INSIDE, "www.split.test", "A", "10.0.0.10"),
        (INSIDE, "intranet.split.test", "A", "10.0.0.20"),
        (INSIDE, "mail.split.test", "MX", "mx.split.test."),
        (INSIDE, "split.test", "SOA", "; fully validated"),
        (OUTSIDE, "www.split.test", "A", "192.0.2.10"),
        (OUTSIDE, "mail.split.test", "MX", "mx.split.test."),
        (
            OUTSIDE,
            "intranet.split.test",
            "A",
            "; negative response, fully validated",
        ),
        (
            INSIDE,
            "nope.split.test",
            "A",
            "; negative response, fully validated",
        ),
    ] {
        let said = delv_from(from, server, &anchors, name, rtype).await;
        assert!(
            said.contains("; fully validated")
                || said.contains("; negative response, fully validated"),
            "{from} {name} {rtype}:\n{said}"
        );
        assert!(said.contains(expect), "{from} {name} {rtype}:\n{said}");
    }
}
