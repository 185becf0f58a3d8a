//! Every prober against its real backend on loopback.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use crate::backends::*;
// The one line naming the crate under test: in gtm it is `use gtm_health::probe::*;`.
use gtm_health::probe::*;

const NAME: &str = "www.example.test";

fn target(b_addr: std::net::SocketAddr, server_name: &str) -> Target {
    Target {
        host: Host::Ip(b_addr.ip()),
        port: b_addr.port(),
        server_name: server_name.to_string(),
    }
}

fn spec(kind: ProbeKind) -> ProbeSpec {
    ProbeSpec {
        kind,
        timeout: Duration::from_secs(3),
        max_latency: None,
    }
}

fn http(tls: bool, version: HttpVersion) -> ProbeKind {
    ProbeKind::Http {
        tls,
        version,
        path: "/health".to_string(),
        expect_status: vec![(200, 399)],
        expect_body: None,
        tls_verify: false,
        proxy_protocol: false,
        reuse_connection: false,
    }
}

/// `kind` with `reuse_connection` on.
fn reusing(kind: ProbeKind) -> ProbeKind {
    let mut kind = kind;
    if let ProbeKind::Http {
        reuse_connection, ..
    } = &mut kind
    {
        *reuse_connection = true;
    }
    kind
}

fn with_http(
    kind: ProbeKind,
    f: impl FnOnce(&mut Vec<(u16, u16)>, &mut Option<String>, &mut bool, &mut bool),
) -> ProbeKind {
    let mut kind = kind;
    if let ProbeKind::Http {
        expect_status,
        expect_body,
        tls_verify,
        proxy_protocol,
        ..
    } = &mut kind
    {
        f(expect_status, expect_body, tls_verify, proxy_protocol);
    }
    kind
}

async fn run(kind: ProbeKind, t: &Target) -> Outcome {
    Prober::new(false).probe(&spec(kind), t).await
}

#[track_caller]
fn assert_outcome(o: &Outcome, ok: bool, reason: &str) {
    assert_eq!((o.ok, o.reason.as_str()), (ok, reason), "{o:?}");
}

#[tokio::test]
async fn http_up_down_and_back() {
    let mut b = HttpBackend::start().await;
    let t = target(b.addr, NAME);
    let o = run(http(false, HttpVersion::Http1), &t).await;
    assert_outcome(&o, true, "status 200");
    let seen = b.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/health");
    assert_eq!(seen[0].host.as_deref(), Some(NAME));
    assert_eq!(seen[0].user_agent.as_deref(), Some("gtm-health"));
    assert_eq!(seen[0].version, hyper::Version::HTTP_11);

    b.stop().await;
    assert_outcome(
        &run(http(false, HttpVersion::Http1), &t).await,
        false,
        "connect refused",
    );
    b.restart().await;
    assert_outcome(
        &run(http(false, HttpVersion::Http1), &t).await,
        true,
        "status 200",
    );
}

#[tokio::test]
async fn http_wrong_status_and_body() {
    let b = HttpBackend::start().await;
    let t = target(b.addr, NAME);
    b.set_status(503);
    assert_outcome(
        &run(http(false, HttpVersion::Http1), &t).await,
        false,
        "status 503",
    );

    b.set_status(200);
    let want_ok = with_http(http(false, HttpVersion::Http1), |_, body, _, _| {
        *body = Some("ok".into())
    });
    b.set_body("all is ok here");
    assert_outcome(&run(want_ok.clone(), &t).await, true, "status 200");
    b.set_body("degraded");
    assert_outcome(
        &run(want_ok.clone(), &t).await,
        false,
        "body did not contain \"ok\"",
    );
    // Only the first 1,024 bytes count.
    b.set_body(&format!("{}ok", "x".repeat(1024)));
    assert_outcome(
        &run(want_ok, &t).await,
        false,
        "body did not contain \"ok\"",
    );
}

#[tokio::test]
async fn http_status_lists_and_redirects_not_followed() {
    let b = HttpBackend::start().await;
    let t = target(b.addr, NAME);
    b.set_redirect(301, "http://elsewhere.test/");
    let only_2xx = with_http(http(false, HttpVersion::Http1), |st, _, _, _| {
        *st = vec![(200, 299)]
    });
    assert_outcome(&run(only_2xx, &t).await, false, "status 301");
    assert_outcome(
        &run(http(false, HttpVersion::Http1), &t).await,
        true,
        "status 301",
    );
    b.set_status(204);
    let list = with_http(http(false, HttpVersion::Http1), |st, _, _, _| {
        *st = vec![(200, 200), (204, 204)]
    });
    assert_outcome(&run(list, &t).await, true, "status 204");
    assert_eq!(
        b.requests().len(),
        3,
        "one request per probe, no redirect followed"
    );
}

#[tokio::test]
async fn https_verification_on_and_off() {
    let b = HttpBackend::start_tls(NAME).await;
    let t = target(b.addr, NAME);
    let verify = with_http(http(true, HttpVersion::Http1), |_, _, v, _| *v = true);
    let o = run(verify, &t).await;
    assert!(!o.ok);
    assert!(
        o.reason
            .starts_with("certificate not valid for www.example.test: "),
        "{o:?}"
    );
    assert_outcome(
        &run(http(true, HttpVersion::Http1), &t).await,
        true,
        "status 200",
    );
    assert_eq!(b.requests()[0].host.as_deref(), Some(NAME));
}

#[tokio::test]
async fn http2_over_tls_and_cleartext() {
    let b = HttpBackend::start_tls(NAME).await;
    let t = target(b.addr, NAME);
    assert_outcome(
        &run(http(true, HttpVersion::Http2), &t).await,
        true,
        "status 200",
    );
    let seen = b.requests();
    assert_eq!(seen[0].version, hyper::Version::HTTP_2);
    assert_eq!(seen[0].host.as_deref(), Some(NAME));
    assert_eq!(seen[0].user_agent.as_deref(), Some("gtm-health"));

    let c = HttpBackend::start().await;
    let t = target(c.addr, NAME);
    c.set_status(503);
    assert_outcome(
        &run(http(false, HttpVersion::Http2), &t).await,
        false,
        "status 503",
    );
    assert_eq!(c.requests()[0].version, hyper::Version::HTTP_2);
}

#[tokio::test]
async fn http_proxy_protocol_header() {
    let b = HttpBackend::start().await;
    let t = target(b.addr, NAME);
    let kind = with_http(http(false, HttpVersion::Http1), |_, _, _, p| *p = true);
    assert_outcome(&run(kind, &t).await, true, "status 200");
    let lines = b.state.proxy_lines.wait_len(1).await;
    let prefix = "PROXY TCP4 127.0.0.1 127.0.0.1 ";
    assert!(lines[0].starts_with(prefix), "{lines:?}");
    assert!(
        lines[0].ends_with(&format!(" {}", b.addr.port())),
        "{lines:?}"
    );
}

#[tokio::test]
async fn http_connections_are_reused_only_when_the_check_says_so() {
    let connections = |b: &HttpBackend| {
        b.state
            .connections
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    let prober = Prober::new(false);
    let b = HttpBackend::start().await;
    let t = target(b.addr, NAME);

    // By default a connection per probe, closed after it.
    let mut session = Session::default();
    for _ in 0..3 {
        let o = prober
            .probe_in(&spec(http(false, HttpVersion::Http1)), &t, &mut session)
            .await;
        assert_outcome(&o, true, "status 200");
    }
    assert_eq!(connections(&b), 3);
    assert!(!session.holds_connection());
    let seen = b.requests();
    assert!(
        seen.iter().all(|r| r.headers["connection"] == "close"),
        "{seen:?}"
    );

    // With reuse_connection, one connection carries every probe, whatever
    // the status, and no request asks to close it.
    let kind = reusing(http(false, HttpVersion::Http1));
    let mut session = Session::default();
    for status in [200, 503, 200] {
        b.set_status(status);
        let o = prober.probe_in(&spec(kind.clone()), &t, &mut session).await;
        assert_eq!(o.reason, format!("status {status}"), "{o:?}");
    }
    assert_eq!(connections(&b), 4);
    assert!(session.holds_connection());
    assert!(
        b.requests()[3..]
            .iter()
            .all(|r| !r.headers.contains_key("connection")),
        "{:?}",
        b.requests()
    );

    // A server that went away and came back: the kept connection is dead,
    // and the probe opens a new one instead of failing.
    let mut b = b;
    b.restart().await;
    let o = prober.probe_in(&spec(kind.clone()), &t, &mut session).await;
    assert_outcome(&o, true, "status 200");
    assert_eq!(connections(&b), 5);
    let o = prober.probe_in(&spec(kind.clone()), &t, &mut session).await;
    assert_outcome(&o, true, "status 200");
    assert_eq!(connections(&b), 5);

    // A server that closes after its answer (the kept connection carries
    // one more probe), or a body too long to read to its end: nothing is
    // kept.
    b.state.reply.lock().unwrap().headers = vec![("connection".into(), "close".into())];
    for _ in 0..3 {
        let o = prober.probe_in(&spec(kind.clone()), &t, &mut session).await;
        assert_outcome(&o, true, "status 200");
    }
    assert_eq!(connections(&b), 7);
    assert!(!session.holds_connection());
    b.state.reply.lock().unwrap().headers.clear();
    b.set_body(&"x".repeat(200 * 1024));
    for _ in 0..2 {
        let o = prober.probe_in(&spec(kind.clone()), &t, &mut session).await;
        assert_outcome(&o, true, "status 200");
    }
    assert_eq!(connections(&b), 9);
    assert!(!session.holds_connection());

    // HTTP/2: one connection, a stream per probe.
    let c = HttpBackend::start().await;
    let t = target(c.addr, NAME);
    let kind = reusing(http(false, HttpVersion::Http2));
    let mut session = Session::default();
    for _ in 0..3 {
        let o = prober.probe_in(&spec(kind.clone()), &t, &mut session).await;
        assert_outcome(&o, true, "status 200");
    }
    assert_eq!(connections(&c), 1);
    assert!(
        c.requests()
            .iter()
            .all(|r| r.version == hyper::Version::HTTP_2)
    );
}

#[tokio::test]
async fn timeouts_against_hanging_backends() {
    let hang = TcpBackend::start_hanging().await;
    let t = target(hang.addr, NAME);
    let short = |kind| ProbeSpec {
        kind,
        timeout: Duration::from_millis(300),
        max_latency: None,
    };
    let prober = Prober::new(false);
    let tcp = ProbeKind::Tcp {
        send: Some("PING\n".into()),
        expect: Some("PONG".into()),
        proxy_protocol: false,
    };
    for kind in [
        tcp,
        http(false, HttpVersion::Http1),
        http(true, HttpVersion::Http1),
    ] {
        let o = prober.probe(&short(kind), &t).await;
        assert_outcome(&o, false, "timeout after 300 ms");
        assert!(
            o.elapsed >= Duration::from_millis(300) && o.elapsed < Duration::from_secs(2),
            "{o:?}"
        );
    }

    let h = HttpBackend::start().await;
    h.set_hang(true);
    let o = prober
        .probe(
            &short(http(false, HttpVersion::Http1)),
            &target(h.addr, NAME),
        )
        .await;
    assert_outcome(&o, false, "timeout after 300 ms");
}

#[tokio::test]
async fn tcp_connect_send_expect_and_proxy() {
    let mut b = TcpBackend::start_tcp(Some("PONG\r\n")).await;
    let t = target(b.addr, NAME);
    let plain = ProbeKind::Tcp {
        send: None,
        expect: None,
        proxy_protocol: false,
    };
    assert_outcome(&run(plain.clone(), &t).await, true, "connected");

    let ping = |expect: &str, proxy: bool| ProbeKind::Tcp {
        send: Some("PING\r\n".into()),
        expect: Some(expect.into()),
        proxy_protocol: proxy,
    };
    assert_outcome(&run(ping("PONG\r\n", false), &t).await, true, "connected");
    // Exact comparison of the first expect.len() bytes.
    assert_outcome(&run(ping("PONG", false), &t).await, true, "connected");
    assert_outcome(
        &run(ping("PANG\r\n", false), &t).await,
        false,
        "response did not match: got \"PONG\\r\\n\"",
    );
    // Shorter answer than expected (EOF before expect.len() bytes).
    assert_outcome(
        &run(ping("PONG\r\nPONG", false), &t).await,
        false,
        "response did not match: got \"PONG\\r\\n\"",
    );
    // Long answers are truncated in the reason.
    b.set_response(Some(&"y".repeat(200)));
    let o = run(ping(&"z".repeat(200), false), &t).await;
    assert_eq!(
        o.reason,
        format!("response did not match: got \"{}…\"", "y".repeat(64))
    );

    b.set_response(Some("PONG\r\n"));
    let before = b.state.proxy_lines.len();
    assert_outcome(&run(ping("PONG\r\n", true), &t).await, true, "connected");
    let lines = b.state.proxy_lines.wait_len(before + 1).await;
    let line = &lines[before];
    assert!(
        line.starts_with("PROXY TCP4 127.0.0.1 127.0.0.1 "),
        "{line}"
    );
    assert!(line.ends_with(&format!(" {}", b.addr.port())), "{line}");
    let lines = b.state.lines.snapshot();
    assert!(
        lines.iter().all(|l| l == "PING"),
        "the PROXY line is not a request: {lines:?}"
    );

    b.stop().await;
    assert_outcome(&run(plain, &t).await, false, "connect refused");
}

#[tokio::test]
async fn tcp_proxy_header_without_send() {
    let b = TcpBackend::start_tcp(None).await;
    let t = target(b.addr, NAME);
    let kind = ProbeKind::Tcp {
        send: None,
        expect: None,
        proxy_protocol: true,
    };
    assert_outcome(&run(kind, &t).await, true, "connected");
    let lines = b.state.proxy_lines.wait_len(1).await;
    assert!(
        lines[0].starts_with("PROXY TCP4 127.0.0.1 127.0.0.1 "),
        "{lines:?}"
    );
}

#[tokio::test]
async fn tls_handshake_verify_and_exchange() {
    let mut b = TcpBackend::start_tls_line(NAME, Some("PONG\n")).await;
    let t = target(b.addr, NAME);
    let tls =
        |send: Option<&str>, expect: Option<&str>, verify: bool, proxy: bool| ProbeKind::Tls {
            send: send.map(str::to_string),
            expect: expect.map(str::to_string),
            tls_verify: verify,
            proxy_protocol: proxy,
        };
    assert_outcome(
        &run(tls(None, None, false, false), &t).await,
        true,
        "handshake ok",
    );
    let o = run(tls(None, None, true, false), &t).await;
    assert!(
        !o.ok
            && o.reason
                .starts_with("certificate not valid for www.example.test: "),
        "{o:?}"
    );
    assert_outcome(
        &run(tls(Some("PING\n"), Some("PONG\n"), false, false), &t).await,
        true,
        "handshake ok",
    );
    assert_outcome(
        &run(tls(Some("PING\n"), Some("PANG\n"), false, false), &t).await,
        false,
        "response did not match: got \"PONG\\n\"",
    );
    assert_outcome(
        &run(tls(Some("PING\n"), Some("PONG\n"), false, true), &t).await,
        true,
        "handshake ok",
    );
    let lines = b.state.proxy_lines.wait_len(1).await;
    assert!(
        lines[0].starts_with("PROXY TCP4 127.0.0.1 127.0.0.1 "),
        "{lines:?}"
    );

    // Verification for another name than the certificate's.
    let other = target(b.addr, "other.example.test");
    let o = run(tls(None, None, true, false), &other).await;
    assert!(
        o.reason
            .starts_with("certificate not valid for other.example.test: "),
        "{o:?}"
    );

    // TLS probe against a plain TCP backend: a handshake failure, not a pass.
    let plain = TcpBackend::start_tcp(Some("HELLO\n")).await;
    let o = run(tls(None, None, false, false), &target(plain.addr, NAME)).await;
    assert!(
        !o.ok && o.reason.starts_with("TLS handshake failed"),
        "{o:?}"
    );

    b.stop().await;
    assert_outcome(
        &run(tls(None, None, false, false), &t).await,
        false,
        "connect refused",
    );
}

#[tokio::test]
async fn dns_rcode_and_answer() {
    let mut b = DnsBackend::start_dns(Ipv4Addr::new(192, 0, 2, 10), 0).await;
    let t = target(b.addr, NAME);
    let dns = |rcode: u8, answer: Option<&str>| ProbeKind::Dns {
        query_name: "www.example.test".into(),
        query_type: 1,
        expect_rcode: rcode,
        expect_answer: answer.map(str::to_string),
    };
    assert_outcome(&run(dns(0, None), &t).await, true, "rcode NOERROR");
    assert_outcome(
        &run(dns(0, Some("192.0.2.10")), &t).await,
        true,
        "rcode NOERROR",
    );
    b.set_address(Ipv4Addr::new(192, 0, 2, 11));
    assert_outcome(
        &run(dns(0, Some("192.0.2.10")), &t).await,
        false,
        "answer did not contain 192.0.2.10",
    );
    b.set_rcode(2);
    assert_outcome(
        &run(dns(0, None), &t).await,
        false,
        "rcode SERVFAIL, expected NOERROR",
    );
    b.set_rcode(3);
    assert_outcome(&run(dns(3, None), &t).await, true, "rcode NXDOMAIN");
    b.set_rcode(5);
    assert_outcome(
        &run(dns(0, None), &t).await,
        false,
        "rcode REFUSED, expected NOERROR",
    );
    b.stop().await;
    assert_outcome(&run(dns(0, None), &t).await, false, "connect refused");
    b.restart().await;
    b.set_rcode(0);
    assert_outcome(&run(dns(0, None), &t).await, true, "rcode NOERROR");
}

#[tokio::test]
async fn grpc_health() {
    let mut b = GrpcBackend::start_grpc().await;
    let t = target(b.addr, NAME);
    let grpc = |service: &str, tls: bool, verify: bool| ProbeKind::Grpc {
        service: service.into(),
        tls,
        tls_verify: verify,
    };
    assert_outcome(&run(grpc("", false, false), &t).await, true, "SERVING");
    b.set_serving(false);
    assert_outcome(&run(grpc("", false, false), &t).await, false, "NOT_SERVING");
    b.set_status("api", SERVING);
    assert_outcome(&run(grpc("api", false, false), &t).await, true, "SERVING");
    b.set_status("api", SERVICE_UNKNOWN);
    assert_outcome(
        &run(grpc("api", false, false), &t).await,
        false,
        "SERVICE_UNKNOWN",
    );
    assert_outcome(
        &run(grpc("nope", false, false), &t).await,
        false,
        "grpc-status 5: unknown service",
    );
    assert_eq!(
        b.state.requests.snapshot(),
        vec!["", "", "api", "api", "nope"]
    );
    b.stop().await;
    assert_outcome(
        &run(grpc("", false, false), &t).await,
        false,
        "connect refused",
    );

    let s = GrpcBackend::start_grpc_tls(NAME).await;
    let t = target(s.addr, NAME);
    assert_outcome(&run(grpc("", true, false), &t).await, true, "SERVING");
    let o = run(grpc("", true, true), &t).await;
    assert!(
        o.reason
            .starts_with("certificate not valid for www.example.test: "),
        "{o:?}"
    );

    // A plain HTTP/1-only server is not a gRPC health service.
    let h = HttpBackend::start().await;
    let o = run(grpc("", false, false), &target(h.addr, NAME)).await;
    assert!(!o.ok, "{o:?}");
}

#[tokio::test]
async fn exec_checks() {
    let t = Target {
        host: Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        port: 8080,
        server_name: NAME.into(),
    };
    let exec = |args: &[&str]| ProbeKind::Exec {
        command: args.iter().map(|s| s.to_string()).collect(),
    };
    let disabled = Prober::new(false).probe(&spec(exec(&["true"])), &t).await;
    assert_outcome(
        &disabled,
        false,
        "exec checks are disabled on this device (node setting allow_exec)",
    );

    let p = Prober::new(true);
    assert_outcome(&p.probe(&spec(exec(&["true"])), &t).await, true, "exit 0");
    assert_outcome(
        &p.probe(&spec(exec(&["false"])), &t).await,
        false,
        "exit status 1",
    );
    let script = "echo boom >&2; echo second >&2; exit 2";
    assert_outcome(
        &p.probe(&spec(exec(&["sh", "-c", script])), &t).await,
        false,
        "exit status 2: boom",
    );
    let env = r#"test "$GTM_TARGET:$GTM_PORT:$GTM_HOST" = "127.0.0.1:8080:www.example.test""#;
    assert_outcome(
        &p.probe(&spec(exec(&["sh", "-c", env])), &t).await,
        true,
        "exit 0",
    );
    let o = p.probe(&spec(exec(&["/nonexistent/gtm-check"])), &t).await;
    assert!(
        !o.ok && o.reason.starts_with("cannot run /nonexistent/gtm-check"),
        "{o:?}"
    );
    let slow = ProbeSpec {
        kind: exec(&["sleep", "30"]),
        timeout: Duration::from_millis(300),
        max_latency: None,
    };
    assert_outcome(&p.probe(&slow, &t).await, false, "timeout after 300 ms");
}

#[tokio::test]
async fn icmp_echo_loopback() {
    let t = Target {
        host: Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        port: 0,
        server_name: String::new(),
    };
    let o = run(ProbeKind::Icmp, &t).await;
    assert_outcome(&o, true, "echo reply");
    let by_name = Target {
        host: Host::Name("localhost".into()),
        ..t
    };
    assert_outcome(&run(ProbeKind::Icmp, &by_name).await, true, "echo reply");
    let v6 = Target {
        host: Host::Ip("::1".parse().unwrap()),
        port: 0,
        server_name: String::new(),
    };
    assert_outcome(&run(ProbeKind::Icmp, &v6).await, true, "echo reply");
}

#[tokio::test]
async fn names_are_resolved_at_probe_time() {
    let b = HttpBackend::start().await;
    let t = Target {
        host: Host::Name("localhost".into()),
        port: b.addr.port(),
        server_name: NAME.into(),
    };
    assert_outcome(
        &run(http(false, HttpVersion::Http1), &t).await,
        true,
        "status 200",
    );
    let bad = Target {
        host: Host::Name("nonexistent.invalid".into()),
        ..t
    };
    assert_outcome(
        &run(http(false, HttpVersion::Http1), &bad).await,
        false,
        "cannot resolve nonexistent.invalid",
    );
}

/// Link-local targets (metadata services) are refused unless the node
/// settings allow them, and `probe_networks` fences probes in; the refusal
/// comes before any packet is sent.
#[tokio::test]
async fn probes_are_fenced() {
    let tcp = || ProbeKind::Tcp {
        send: None,
        expect: None,
        proxy_protocol: false,
    };
    let at = |ip: &str, port: u16| Target {
        host: Host::Ip(ip.parse().unwrap()),
        port,
        server_name: String::new(),
    };
    for ip in ["169.254.169.254", "fe80::1", "::ffff:169.254.169.254"] {
        let o = run(tcp(), &at(ip, 80)).await;
        assert!(!o.ok, "{o:?}");
        assert!(
            o.reason.contains("link-local") && o.reason.contains("allow_link_local_probes"),
            "{o:?}"
        );
    }
    let metadata: IpAddr = "169.254.169.254".parse().unwrap();
    let open = Fence {
        allow_link_local: true,
        only: Vec::new(),
    };
    assert_eq!(open.check(metadata), Ok(()));

    let b = HttpBackend::start().await;
    let only_v4_loopback = Prober::fenced(
        false,
        Fence {
            allow_link_local: false,
            only: vec!["127.0.0.0/8".to_string().try_into().unwrap()],
        },
    );
    let inside = only_v4_loopback
        .probe(
            &spec(http(false, HttpVersion::Http1)),
            &target(b.addr, NAME),
        )
        .await;
    assert_outcome(&inside, true, "status 200");
    let outside = only_v4_loopback
        .probe(&spec(tcp()), &at("::1", b.addr.port()))
        .await;
    assert_outcome(
        &outside,
        false,
        "::1 is outside the node setting probe_networks; probes there are refused",
    );
    // A name is probed on its addresses inside the fence.
    let by_name = Target {
        host: Host::Name("localhost".into()),
        ..target(b.addr, NAME)
    };
    let o = only_v4_loopback
        .probe(&spec(http(false, HttpVersion::Http1)), &by_name)
        .await;
    assert_outcome(&o, true, "status 200");
}
