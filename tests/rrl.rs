//! Abuse resistance with real tools on loopback (block 127.0.161.x –
//! 127.0.165.x): response rate limiting judged by dnsperf floods, dig and
//! strictly parsed bursts, DNS cookies made by one device of a real pair and validated by the
//! other (also across a rotation), EDNS TCP keepalive shown by dig.
//!
//! Addresses: flood 127.0.161.x, a second client 127.0.162.x, an exempt
//! network 127.0.163.0/24, the pair's devices 127.0.164.1 and .2.

use std::{
    net::SocketAddr,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::{
    cluster::Proc,
    support::{TestDevice, metrics, query, tool, udp_raw},
};
use hickory_server::proto::{op::Message, rr::RecordType};

const ZONE: &str = r#"
[[domain]]
name = "rrl.test"
nameservers = ["ns1.rrl.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }]
"#;

const RATE: u64 = 50;

fn limited() -> String {
    format!(
        "[rate_limit]\nresponses_per_second = {RATE}\nslip = 2\nexempt = [\"127.0.163.0/24\"]\n{ZONE}"
    )
}

/// Runs dig with `args` against `server`; its whole output.
fn dig(server: SocketAddr, args: &[&str]) -> String {
    let out = Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .arg("-p")
        .arg(server.port().to_string())
        .args(["+tries=1", "+time=3"])
        .args(args)
        .output()
        .expect("dig runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of an unlabelled counter (or one sample's line prefix) in
/// `/metrics` text; 0 when absent.
fn counter(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// What dnsperf reported.
#[derive(Debug)]
struct Perf {
    sent: u64,
    completed: u64,
    lost: u64,
}

fn perf_field(out: &str, field: &str) -> u64 {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("dnsperf printed no {field:?}:\n{out}"))
}

/// Starts dnsperf from `from` against `server` at `qps` for `seconds`.
fn dnsperf(
    server: SocketAddr,
    from: &str,
    qps: u64,
    seconds: u64,
    extra: &[&str],
) -> std::process::Child {
    let dir = std::env::temp_dir().join(format!("gtm-rrl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let queries = dir.join("queries.txt");
    std::fs::write(&queries, "www.rrl.test A\n".repeat(10)).unwrap();
    Command::new("dnsperf")
        .args(["-s", &server.ip().to_string()])
        .args(["-p", &server.port().to_string()])
        .args(["-a", from])
        .arg("-d")
        .arg(&queries)
        .args(["-Q", &qps.to_string()])
        .args(["-l", &seconds.to_string()])
        .args(["-t", "1", "-c", "1", "-q", "2000"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dnsperf starts")
}

fn finish(child: std::process::Child) -> Perf {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "dnsperf failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Perf {
        sent: perf_field(&text, "Queries sent:"),
        completed: perf_field(&text, "Queries completed:"),
        lost: perf_field(&text, "Queries lost:"),
    }
}

/// What a burst of queries from one address got back.
#[derive(Debug)]
struct Burst {
    full: u64,
    slipped: u64,
    unanswered: u64,
    /// The first truncated response, parsed strictly.
    truncated: Option<Message>,
}

/// Sends `count` queries for `www.rrl.test` from `from` to `server` at once,
/// then reads responses until none comes for a second.
fn burst(server: SocketAddr, from: &str, count: u64) -> Burst {
    let socket = std::net::UdpSocket::bind((from, 0)).expect("bind the burst's address");
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    for _ in 0..count {
        let q = query("www.rrl.test.", RecordType::A);
        socket.send_to(&q.to_vec().unwrap(), server).unwrap();
    }
    let (mut full, mut slipped, mut truncated) = (0, 0, None);
    let mut buf = [0u8; 4096];
    while let Ok(n) = socket.recv(&mut buf) {
        let m = Message::from_vec(&buf[..n]).expect("a well-formed response");
        if m.metadata.truncation {
            slipped += 1;
            truncated.get_or_insert(m);
        } else {
            full += 1;
        }
    }
    Burst {
        full,
        slipped,
        unanswered: count - full - slipped,
        truncated,
    }
}

/// Whether a dig answer is a full NOERROR answer of `www.rrl.test` (not
/// truncated, the address in it).
fn full_answer(out: &str) -> bool {
    let flags = out
        .lines()
        .find(|l| l.contains(";; flags:"))
        .unwrap_or_default();
    out.contains("status: NOERROR") && !flags.contains(" tc") && out.contains("192.0.2.1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_gets_the_rate_and_slips_while_other_networks_and_tcp_are_answered() {
    if tool("dnsperf", "dnsperf").is_none() || tool("dig", "bind9-dnsutils").is_none() {
        return;
    }
    let d = TestDevice::start(&limited()).await;
    let server = d.v4();
    let before = metrics(&d).await;

    // 10× the limit from one network; meanwhile another network (UDP) and
    // the flooding network over TCP ask with dig, and are answered.
    let started = Instant::now();
    let flood = dnsperf(server, "127.0.161.1", 10 * RATE, 6, &[]);
    let checks = tokio::task::spawn_blocking(move || {
        // A burst of two seconds' rate and more from the flooded network:
        // even across a second's turn, at least 20 of it are over the
        // limit, and every second response over it comes back truncated.
        let probe = burst(server, "127.0.161.1", 2 * RATE + 20);
        let mut failures = Vec::new();
        match &probe.truncated {
            Some(m) if m.answers.is_empty() && m.queries.len() == 1 => {}
            other => failures.push(format!(
                "no truncated response with the question and no records: {other:?}"
            )),
        }
        let (mut other, mut over_tcp) = (0, 0);
        for i in 0..12 {
            let out = dig(
                server,
                &["-b", "127.0.162.1", "+ignore", "www.rrl.test", "A"],
            );
            if full_answer(&out) {
                other += 1;
            } else {
                failures.push(format!("UDP from 127.0.162.1, #{i}:\n{out}"));
            }
            let out = dig(server, &["-b", "127.0.161.1", "+tcp", "www.rrl.test", "A"]);
            if full_answer(&out) {
                over_tcp += 1;
            } else {
                failures.push(format!("TCP from 127.0.161.1, #{i}:\n{out}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        (other, over_tcp, failures, probe)
    });
    let perf = tokio::task::spawn_blocking(move || finish(flood))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let (other, over_tcp, failures, probe) = checks.await.unwrap();
    assert!(failures.is_empty(), "not answered in full: {failures:#?}");
    assert_eq!((other, over_tcp), (12, 12));

    let after = metrics(&d).await;
    let dropped = counter(&after, "gtm_dns_rrl_dropped_total")
        - counter(&before, "gtm_dns_rrl_dropped_total");
    let slipped = counter(&after, "gtm_dns_rrl_slipped_total")
        - counter(&before, "gtm_dns_rrl_slipped_total");
    let (dropped, slipped) = (dropped as u64, slipped as u64);
    eprintln!("flood: {perf:?}, {probe:?}, dropped {dropped}, slipped {slipped}, {elapsed:?}");
    // Every query was either answered (in full or truncated) or dropped.
    // The counters also hold the burst's queries.
    assert_eq!(perf.completed + perf.lost, perf.sent, "{perf:?}");
    assert!(
        (perf.lost..=perf.lost + probe.unanswered).contains(&dropped),
        "what dnsperf and the burst lost was dropped: {perf:?}, {probe:?}, dropped {dropped}"
    );
    assert!(slipped >= probe.slipped, "{probe:?}, slipped {slipped}");
    let full = perf.completed - (slipped - probe.slipped) + probe.full;
    // The table's seconds the flood spanned: at most its wall time rounded
    // up, plus one for a second begun before it.
    let seconds = elapsed.as_secs() + 2;
    assert!(
        full <= RATE * seconds,
        "{full} full answers in at most {seconds} s is over {RATE}/s"
    );
    assert!(
        full >= RATE,
        "the network got at least one second's rate: {full}"
    );
    // Every second limited response is truncated (slip 2).
    assert!(
        dropped > 0 && slipped > 0,
        "dropped {dropped}, slipped {slipped}"
    );
    assert!(
        slipped.abs_diff(dropped) <= seconds,
        "slip 2 truncates every second limited response: dropped {dropped}, slipped {slipped}"
    );

    // The exempt network is never limited.
    let before = metrics(&d).await;
    let exempt = dnsperf(server, "127.0.163.7", 10 * RATE, 2, &[]);
    let perf = tokio::task::spawn_blocking(move || finish(exempt))
        .await
        .unwrap();
    let after = metrics(&d).await;
    assert_eq!(perf.lost, 0, "{perf:?}");
    assert!(perf.completed > 4 * RATE, "{perf:?}");
    assert_eq!(
        counter(&after, "gtm_dns_rrl_dropped_total") + counter(&after, "gtm_dns_rrl_slipped_total"),
        counter(&before, "gtm_dns_rrl_dropped_total")
            + counter(&before, "gtm_dns_rrl_slipped_total"),
        "nothing from the exempt network was limited"
    );
}

/// The server cookie in a dig answer (hex), if any.
fn server_cookie(out: &str) -> Option<String> {
    let line = out.lines().find(|l| l.starts_with("; COOKIE: "))?;
    let hex = line
        .trim_start_matches("; COOKIE: ")
        .split_whitespace()
        .next()?;
    (hex.len() > 16).then(|| hex[16..].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_exempt_a_limited_network_and_keepalive_answers_over_tcp_only() {
    if tool("dnsperf", "dnsperf").is_none() || tool("dig", "bind9-dnsutils").is_none() {
        return;
    }
    let d = TestDevice::start(&limited()).await;
    let server = d.v4();
    // The device in no cluster makes its secret by itself.
    let deadline = Instant::now() + Duration::from_secs(20);
    while counter(&metrics(&d).await, "gtm_dns_cookie_secret_created_seconds") == 0.0 {
        assert!(Instant::now() < deadline, "no cookie secret was made");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // `dig +cookie` gets a server cookie (fast path: a plain A query; and
    // general path: NXDOMAIN).
    let client = "0123456789abcdef";
    let asked = format!("+cookie={client}");
    let out = dig(server, &["-b", "127.0.161.9", &asked, "www.rrl.test", "A"]);
    let cookie = server_cookie(&out).unwrap_or_else(|| panic!("no server cookie:\n{out}"));
    assert_eq!(cookie.len(), 32, "16 bytes: {out}");
    assert!(
        cookie.starts_with("01000000"),
        "RFC 9018 version 1: {cookie}"
    );
    let out = dig(server, &["-b", "127.0.161.9", &asked, "nx.rrl.test", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    assert!(server_cookie(&out).is_some(), "general path: {out}");

    // A flood showing the valid server cookie is never limited; without it,
    // the same network is.
    let full = format!("10:{client}{cookie}");
    let before = metrics(&d).await;
    let flood = dnsperf(server, "127.0.161.9", 10 * RATE, 2, &["-E", &full]);
    let perf = tokio::task::spawn_blocking(move || finish(flood))
        .await
        .unwrap();
    let after = metrics(&d).await;
    assert_eq!(perf.lost, 0, "{perf:?}");
    assert!(perf.completed > 4 * RATE, "{perf:?}");
    assert_eq!(
        counter(&after, "gtm_dns_rrl_dropped_total"),
        counter(&before, "gtm_dns_rrl_dropped_total"),
        "a valid server cookie exempts from the limit"
    );
    let valid = |t: &str| counter(t, "gtm_dns_cookies_total{server_cookie=\"valid\"}");
    assert!(valid(&after) - valid(&before) >= perf.completed as f64);
    let flood = dnsperf(
        server,
        "127.0.161.9",
        10 * RATE,
        2,
        &["-E", &format!("10:{client}")],
    );
    let perf = tokio::task::spawn_blocking(move || finish(flood))
        .await
        .unwrap();
    assert!(
        perf.lost > 0,
        "a client cookie alone does not exempt: {perf:?}"
    );

    // A malformed cookie (9 bytes) is FORMERR.
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
    q.extend_from_slice(b"\x03www\x03rrl\x04test\x00\x00\x01\x00\x01");
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 13, 0, 10, 0, 9]);
    q.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let r = udp_raw(server, &q).await;
    assert_eq!(r[3] & 0x0F, 1, "FORMERR: {r:?}");
    assert!(
        counter(
            &metrics(&d).await,
            "gtm_dns_malformed_total{reason=\"cookie\"}"
        ) >= 1.0
    );

    // Keepalive: over TCP the listener's idle timeout (10 s); over UDP the
    // option is ignored and never answered (RFC 7828 §3.3).
    let out = dig(server, &["+tcp", "+keepalive", "www.rrl.test", "A"]);
    assert!(out.contains("; TCP KEEPALIVE: 10.0 secs"), "{out}");
    let out = dig(server, &["+notcp", "+keepalive", "www.rrl.test", "A"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(!out.contains("KEEPALIVE"), "{out}");
    let out = dig(server, &["+tcp", "www.rrl.test", "A"]);
    assert!(!out.contains("KEEPALIVE"), "only when asked: {out}");
}

/// A pair's `/metrics` counter.
async fn proc_counter(p: &Proc, name: &str) -> f64 {
    let text = gtm_node::tls::http_client(None, Duration::from_secs(10))
        .unwrap()
        .get(format!("{}/metrics", p.api()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    counter(&text, name)
}

const VALID: &str = "gtm_dns_cookies_total{server_cookie=\"valid\"}";
const INVALID: &str = "gtm_dns_cookies_total{server_cookie=\"invalid\"}";
const CREATED: &str = "gtm_dns_cookie_secret_created_seconds";

/// Shows `cookie` to `p` from 127.0.162.3; whether `p` counted it valid
/// (else invalid).
async fn shown_valid(p: &Proc, client: &str, cookie: &str) -> bool {
    let (valid, invalid) = (proc_counter(p, VALID).await, proc_counter(p, INVALID).await);
    let out = dig(
        p.dns(),
        &[
            "-b",
            "127.0.162.3",
            &format!("+cookie={client}{cookie}"),
            "www.rrl.test",
            "A",
        ],
    );
    assert!(out.contains("status: NOERROR"), "{out}");
    let (v, i) = (proc_counter(p, VALID).await, proc_counter(p, INVALID).await);
    assert_eq!((v - valid) + (i - invalid), 1.0, "one cookie counted");
    v > valid
}

/// Waits (bounded) until both devices hold a secret made after `after`
/// (seconds) and the same one; returns its time.
async fn same_secret_after(a: &Proc, b: &Proc, after: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (x, y) = (
            proc_counter(a, CREATED).await,
            proc_counter(b, CREATED).await,
        );
        if x > after && x == y {
            return x;
        }
        assert!(
            Instant::now() < deadline,
            "no common new secret: {x} {y} after {after}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_devices_server_cookie_is_valid_on_the_other_also_after_a_rotation() {
    if tool("dig", "bind9-dnsutils").is_none() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.164.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.164.2");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    a.apply_ok(&format!(
        "[[datacenter]]\nname = \"dc1\"\n\n[cookies]\nrotate = \"10s\"\n{ZONE}"
    ));
    let first = same_secret_after(&a, &b, 0.0).await;

    let client = "fedcba9876543210";
    let get = |p: &Proc| {
        let out = dig(
            p.dns(),
            &[
                "-b",
                "127.0.162.3",
                &format!("+cookie={client}"),
                "www.rrl.test",
                "A",
            ],
        );
        server_cookie(&out).unwrap_or_else(|| panic!("no server cookie from {}:\n{out}", p.name))
    };
    let from_a = get(&a);
    assert!(
        shown_valid(&b, client, &from_a).await,
        "A's cookie valid on B"
    );
    assert!(
        shown_valid(&a, client, &get(&b)).await,
        "B's cookie valid on A"
    );
    // Someone else's (a flipped byte): invalid.
    let mut forged = from_a.clone().into_bytes();
    forged[31] = if forged[31] == b'0' { b'1' } else { b'0' };
    assert!(!shown_valid(&b, client, std::str::from_utf8(&forged).unwrap()).await);

    // After a rotation: the old cookie is still valid (previous secret), a
    // new one from A too; after the next, the old one is not.
    let second = same_secret_after(&a, &b, first).await;
    assert!(
        shown_valid(&b, client, &from_a).await,
        "previous secret still valid"
    );
    let new_from_a = get(&a);
    assert_ne!(new_from_a[16..], from_a[16..], "made with the new secret");
    assert!(
        shown_valid(&b, client, &new_from_a).await,
        "new cookie valid on B"
    );
    same_secret_after(&a, &b, second).await;
    assert!(
        !shown_valid(&b, client, &from_a).await,
        "two rotations later it is not"
    );
}
