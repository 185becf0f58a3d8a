//! TSIG, zone transfers and NOTIFY (docs/transfer.md), judged by real
//! tools: dig and kdig verify our TSIG records, and a real NSD secondary
//! transfers the zone and follows our NOTIFYs. Devices and NSD listen on
//! 127.0.171.x only.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use gtm::device::Device;
use gtm_dns::tsig::Secret;
use gtm_model::{actor::Actor, drain::DrainTarget, node::NodeSettings};
use gtm_node::command::{Action, TsigChange};
use hickory_server::proto::{
    op::{Message, MessageType, OpCode, Query, ResponseCode},
    rr::{
        Name, RData, RecordType, TSigner,
        rdata::tsig::{TsigAlgorithm, TsigError},
    },
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

/// The device's address; NSD's; a client that is no secondary.
pub(crate) const DEVICE_IP: &str = "127.0.171.1";
pub(crate) const NSD_IP: &str = "127.0.171.2";
pub(crate) const OTHER_IP: &str = "127.0.171.3";

const SECRET: [u8; 32] = *b"0123456789abcdef0123456789abcdef";

pub(crate) fn secret64() -> String {
    BASE64.encode(SECRET)
}

/// The zone, with `extra` more records and secondaries at `secondaries`.
pub(crate) fn zone(secondaries: &str, extra: &str) -> String {
    format!(
        r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
{secondaries}

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "192.0.2.1" }}, {{ ip = "192.0.2.2" }}]
max_answers = 1
balance = "priority"

[[domain.record]]
name = "txt"
type = "TXT"
values = ["hello"]
{extra}
"#
    )
}

pub(crate) fn secondary_at(addr: &str) -> String {
    format!(r#"secondaries = [{{ address = "{addr}", key = "xfr" }}]"#)
}

/// `n` more A records (a zone that needs several transfer messages).
pub(crate) fn many(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "\n[[domain.record]]\nname = \"host{i}\"\ntype = \"TXT\"\nvalues = [\"record number {i} of a zone that takes several messages\"]\n"
            )
        })
        .collect()
}

/// A device answering DNS on 127.0.171.1, with the key `xfr` (secret
/// [`SECRET`]) and `config`.
pub(crate) async fn device(config: &str) -> TestDevice {
    device_set(config, |_| {}).await
}

/// [`device`], with node settings `set` changes.
async fn device_set(config: &str, set: impl FnOnce(&mut NodeSettings)) -> TestDevice {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = NodeSettings {
        name: "test1".into(),
        dns_listen: vec![format!("{DEVICE_IP}:0").parse().unwrap()],
        api_listen: "127.0.0.1:0".parse().unwrap(),
        udp_workers: Some(1),
        ..NodeSettings::demo(dir.path().to_path_buf())
    };
    set(&mut settings);
    let device = Device::start(settings, false).await.expect("device starts");
    propose(
        &device,
        Action::Tsig(TsigChange::Add {
            name: "xfr".into(),
            algorithm: "hmac-sha256".into(),
            secret: Secret::new(SECRET.to_vec()),
        }),
    )
    .await;
    apply_text(&device, config).await.expect("valid config");
    TestDevice { device, dir }
}

/// Drains 192.0.2.1 (www's first address): its default answer moves to
/// 192.0.2.2, with no new configuration version.
async fn drain_first(d: &TestDevice) {
    let target = DrainTarget::Address {
        record: None,
        address: "192.0.2.1".into(),
    };
    propose(
        &d.device,
        Action::Drain {
            target,
            drained: true,
        },
    )
    .await;
}

async fn propose(device: &Device, action: Action) {
    let actor = Actor {
        user: "test".into(),
        device: device.engine.device().to_string(),
    };
    device
        .replication
        .propose(actor, None, action)
        .await
        .expect("applied");
}

fn run(binary: &PathBuf, args: &[&str]) -> String {
    let out = Command::new(binary).args(args).output().expect("tool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("$ {} {}\n{text}", binary.display(), args.join(" "));
    text
}

pub(crate) fn dig(d: &TestDevice, args: &[&str]) -> Option<String> {
    let dig = tool("dig", "bind9-dnsutils")?;
    let port = d.v4().port().to_string();
    let mut all = vec!["-p", &port, "@127.0.171.1", "+norec", "+time=5", "+tries=1"];
    all.extend_from_slice(args);
    Some(run(&dig, &all))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_made_by_the_device_shown_once_and_listed_without_secrets() {
    let d = device(&zone("", "")).await;
    let added = tokio::task::block_in_place(|| run_gtm(&d, &["tsig", "add", "ns2-key"]));
    assert_eq!(added.code, Some(0), "{}", added.stderr);
    let secret = added.stdout.trim().to_string();
    assert_eq!(
        BASE64.decode(&secret).map(|s| s.len()).ok(),
        Some(32),
        "{secret}"
    );
    let list = tokio::task::block_in_place(|| run_gtm(&d, &["tsig", "list", "--json"]));
    assert_eq!(list.code, Some(0), "{}", list.stderr);
    assert!(list.stdout.contains("ns2-key") && list.stdout.contains("hmac-sha256"));
    assert!(!list.stdout.contains(&secret), "{}", list.stdout);
    assert!(!list.stdout.contains(&secret64()));
    // The new key signs: dig verifies our answer with it.
    let port = d.v4().port().to_string();
    if let Some(dig_bin) = tool("dig", "bind9-dnsutils") {
        let key = format!("hmac-sha256:ns2-key:{secret}");
        let out = run(
            &dig_bin,
            &[
                "-p",
                &port,
                "@127.0.171.1",
                "-y",
                &key,
                "txt.example.test",
                "TXT",
            ],
        );
        assert!(out.contains("status: NOERROR"), "{out}");
        assert!(out.contains("TSIG PSEUDOSECTION"), "{out}");
        assert!(verified(&out), "{out}");
    }
    // Neither the export nor the history nor the logs show a secret.
    for args in [
        &["config", "export"][..],
        &["config", "history"][..],
        &["logs", "-n", "50"][..],
    ] {
        let out = tokio::task::block_in_place(|| run_gtm(&d, args));
        assert!(!out.stdout.contains(&secret), "{args:?}: {}", out.stdout);
        assert!(!out.stdout.contains(&secret64()), "{args:?}");
    }
    let delete = tokio::task::block_in_place(|| run_gtm(&d, &["tsig", "delete", "ns2-key"]));
    assert_eq!(delete.code, Some(0), "{}", delete.stderr);
    let list = tokio::task::block_in_place(|| run_gtm(&d, &["tsig", "list"]));
    assert!(!list.stdout.contains("ns2-key"), "{}", list.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_use_cannot_be_deleted_and_an_unknown_key_is_refused() {
    let d = device(&zone(&secondary_at("127.0.171.2:5300"), "")).await;
    let delete = tokio::task::block_in_place(|| run_gtm(&d, &["tsig", "delete", "xfr"]));
    assert_ne!(delete.code, Some(0));
    assert!(delete.stderr.contains("example.test"), "{}", delete.stderr);
    let bad = zone(
        r#"secondaries = [{ address = "127.0.171.2", key = "nope" }]"#,
        "",
    );
    let err = apply_text(&d.device, &bad).await.expect_err("refused");
    let text = format!("{err:?}");
    assert!(
        text.contains("domain example.test / secondaries[0]"),
        "{text}"
    );
    assert!(text.contains("unknown TSIG key"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_queries_are_answered_signed_and_bad_ones_get_tsig_errors() {
    let d = device(&zone("", "")).await;
    let good = format!("hmac-sha256:xfr:{}", secret64());
    let Some(out) = dig(&d, &["-y", &good, "www.example.test", "A"]) else {
        return;
    };
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("192.0.2.1"), "{out}");
    assert!(out.contains("TSIG PSEUDOSECTION"), "{out}");
    assert!(verified(&out), "{out}");
    // Without EDNS (the fast path would take such a query were it not
    // signed) and over TCP too.
    let out = dig(&d, &["+noedns", "-y", &good, "www.example.test", "A"]).unwrap();
    assert!(
        out.contains("status: NOERROR") && out.contains("TSIG PSEUDOSECTION"),
        "{out}"
    );
    assert!(verified(&out), "{out}");
    let out = dig(&d, &["+tcp", "-y", &good, "www.example.test", "A"]).unwrap();
    assert!(
        out.contains("status: NOERROR") && out.contains("TSIG PSEUDOSECTION"),
        "{out}"
    );

    let wrong = format!("hmac-sha256:xfr:{}", BASE64.encode([9u8; 32]));
    let out = dig(&d, &["-y", &wrong, "www.example.test", "A"]).unwrap();
    assert!(out.contains("status: NOTAUTH"), "{out}");
    assert!(out.contains("BADSIG"), "{out}");
    assert!(!out.contains("192.0.2.1"), "{out}");

    let unknown = format!("hmac-sha256:other:{}", secret64());
    let out = dig(&d, &["-y", &unknown, "www.example.test", "A"]).unwrap();
    assert!(out.contains("status: NOTAUTH"), "{out}");
    assert!(out.contains("BADKEY"), "{out}");

    // A signature 20 minutes old: BADTIME, signed, with our time.
    let signer = signer();
    let mut q = Message::query();
    q.add_query(Query::query(
        Name::from_ascii("www.example.test.").unwrap(),
        RecordType::A,
    ));
    let skewed = now_secs() - 1200;
    q.finalize(&signer, skewed).unwrap();
    let request_mac = q.signature().unwrap().data.mac.clone();
    let raw = udp_raw(d.v4(), &q.to_vec().unwrap()).await;
    let m = Message::from_vec(&raw).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::NotAuth);
    assert!(m.answers.is_empty());
    let tsig = m.signature().expect("a TSIG record");
    assert_eq!(tsig.data.error, Some(TsigError::BadTime));
    assert_eq!(tsig.data.time, skewed);
    let ours = tsig
        .data
        .other
        .iter()
        .fold(0u64, |t, b| t << 8 | u64::from(*b));
    assert!(
        ours.abs_diff(now_secs()) < 60,
        "other data {:?}",
        tsig.data.other
    );
    signer
        .verify_message_byte(&raw, Some(&request_mac), true)
        .expect("the BADTIME answer is signed with the key");
}

/// dig found every TSIG of the answer good (it says so when one is not).
fn verified(dig_output: &str) -> bool {
    !dig_output.contains("Couldn't verify")
        && !dig_output.contains("could not be validated")
        && !dig_output.to_lowercase().contains("failure")
}

fn signer() -> TSigner {
    TSigner::new(
        SECRET.to_vec(),
        TsigAlgorithm::HmacSha256,
        Name::from_ascii("xfr.").unwrap(),
        300,
    )
    .unwrap()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The `;; XFR size: N records (messages M, …)` of a dig AXFR.
fn xfr_size(out: &str) -> Option<(usize, usize)> {
    let line = out.lines().find(|l| l.contains("XFR size:"))?;
    let num = |after: &str| -> Option<usize> {
        let rest = line.split(after).nth(1)?.trim_start();
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some((num("XFR size:")?, num("messages")?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axfr_needs_the_key_of_a_listed_secondary_from_its_address() {
    // The secondary is 127.0.171.2 (any port: transfers come from any).
    let d = device(&zone(&secondary_at("127.0.171.2:5300"), &many(1500))).await;
    until_looked(&d).await;
    let good = format!("hmac-sha256:xfr:{}", secret64());
    let Some(out) = dig(&d, &["-b", NSD_IP, "AXFR", "example.test"]) else {
        return;
    };
    assert!(out.contains("Transfer failed"), "no key: {out}");
    let out = dig(&d, &["-b", OTHER_IP, "-y", &good, "AXFR", "example.test"]).unwrap();
    assert!(out.contains("Transfer failed"), "not a secondary: {out}");
    let out = dig(&d, &["-b", NSD_IP, "-y", &good, "AXFR", "www.example.test"]).unwrap();
    assert!(out.contains("Transfer failed"), "not a zone: {out}");
    // Each refusal says why (Extended DNS Error 18) when asked with EDNS:
    // unsigned, and signed by a host that is not the secondary (its TSIG
    // still verifies after the OPT); no OPT without EDNS.
    let axfr = |edns: bool| {
        let mut q = Message::new(9, MessageType::Query, OpCode::Query);
        q.add_query(Query::query(
            Name::from_ascii("example.test.").unwrap(),
            RecordType::AXFR,
        ));
        if edns {
            q.set_edns(hickory_server::proto::op::Edns::new());
        }
        q
    };
    let m = Message::from_vec(&tcp_from(OTHER_IP, d.v4(), &axfr(true).to_vec().unwrap()).await)
        .unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert_eq!(ede(&m), Some((18, String::new())), "{m:?}");
    let m = Message::from_vec(&tcp_from(OTHER_IP, d.v4(), &axfr(false).to_vec().unwrap()).await)
        .unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(m.edns.is_none(), "{m:?}");
    let mut q = axfr(true);
    q.finalize(&signer(), now_secs()).unwrap();
    let request_mac = q.signature().unwrap().data.mac.clone();
    let raw = tcp_from(OTHER_IP, d.v4(), &q.to_vec().unwrap()).await;
    let m = Message::from_vec(&raw).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert_eq!(ede(&m), Some((18, String::new())), "{m:?}");
    signer()
        .verify_message_byte(&raw, Some(&request_mac), true)
        .expect("the refusal is signed with the key");

    let out = dig(&d, &["-b", NSD_IP, "-y", &good, "AXFR", "example.test"]).unwrap();
    assert!(!out.contains("Transfer failed"), "{out}");
    assert!(verified(&out), "{out}");
    // SOA, NS, www (one address: the default answer), txt, 1500 hosts, SOA.
    let (records, messages) = xfr_size(&out).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(records, 1505, "{out}");
    assert!(messages > 2, "one message: {out}");
    assert!(
        out.contains("192.0.2.1") && !out.contains("192.0.2.2"),
        "{out}"
    );

    // IXFR: the whole zone to a secondary behind, the SOA alone to one at
    // our serial.
    let out = dig(&d, &["-b", NSD_IP, "-y", &good, "IXFR=1", "example.test"]).unwrap();
    assert_eq!(xfr_size(&out).map(|s| s.0), Some(1505), "{out}");
    assert!(verified(&out), "{out}");
    let serial = serial_at(d.v4()).await.expect("a serial");
    let at = format!("IXFR={serial}");
    let out = dig(&d, &["-b", NSD_IP, "-y", &good, &at, "example.test"]).unwrap();
    assert_eq!(xfr_size(&out).map(|s| s.0), Some(1), "{out}");
    assert!(verified(&out), "{out}");

    // kdig checks every message's TSIG too.
    if let Some(kdig) = tool("kdig", "knot-dnsutils") {
        let port = d.v4().port().to_string();
        let out = run(
            &kdig,
            &[
                "-p",
                &port,
                "@127.0.171.1",
                "-b",
                NSD_IP,
                "-y",
                &good,
                "AXFR",
                "example.test",
            ],
        );
        assert!(!out.contains("failed") && !out.contains("error"), "{out}");
        assert!(out.contains("1505 records"), "{out}");
    }

    // And hickory's verifier of chained messages (RFC 8945 §5.3.1).
    let mut verified = verify_axfr(d.v4()).await;
    assert!(verified.len() > 2);
    assert_eq!(verified.remove(0).answers[0].record_type(), RecordType::SOA);
}

/// Waits (bounded) until the notify worker looked at the zone (it has a
/// NOTIFY to send): its first look gives the zone a serial of its own.
pub(crate) async fn until_looked(d: &TestDevice) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.device.engine.dns().transfers.notify_status().is_empty() {
        assert!(Instant::now() < deadline, "the notify worker never looked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One message over TCP from `from` to `server`, and its one response.
async fn tcp_from(from: &str, server: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(server).await.unwrap();
    stream
        .write_all(&(bytes.len() as u16).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(bytes).await.unwrap();
    let len = stream.read_u16().await.unwrap();
    let mut buf = vec![0; usize::from(len)];
    stream.read_exact(&mut buf).await.unwrap();
    buf
}

/// Asks for the zone over TCP from 127.0.171.2, signed, and verifies every
/// message's TSIG in order; returns the messages.
async fn verify_axfr(server: SocketAddr) -> Vec<Message> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{NSD_IP}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(server).await.unwrap();
    let mut q = Message::new(7, MessageType::Query, OpCode::Query);
    q.add_query(Query::query(
        Name::from_ascii("example.test.").unwrap(),
        RecordType::AXFR,
    ));
    let mut verifier = q.finalize(&signer(), now_secs()).unwrap().unwrap();
    let bytes = q.to_vec().unwrap();
    stream
        .write_all(&(bytes.len() as u16).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(&bytes).await.unwrap();
    let mut out = Vec::new();
    let mut soas = 0;
    while soas < 2 {
        let len = stream.read_u16().await.unwrap();
        let mut buf = vec![0; usize::from(len)];
        stream.read_exact(&mut buf).await.unwrap();
        let m = verifier
            .verify(&buf)
            .unwrap_or_else(|e| panic!("message {} does not verify: {e}", out.len()));
        let m = Message::from_vec(&m.to_vec().unwrap()).unwrap();
        soas += m
            .answers
            .iter()
            .filter(|r| r.record_type() == RecordType::SOA)
            .count();
        out.push(m);
    }
    out
}

/// The serial `server` answers for example.test, if it answers.
async fn serial_at(server: SocketAddr) -> Option<u32> {
    let sock = tokio::net::UdpSocket::bind(format!("{OTHER_IP}:0"))
        .await
        .ok()?;
    let q = query("example.test.", RecordType::SOA);
    sock.send_to(&q.to_vec().ok()?, server).await.ok()?;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_millis(500), sock.recv(&mut buf))
        .await
        .ok()?
        .ok()?;
    let m = Message::from_vec(&buf[..n]).ok()?;
    m.answers.iter().find_map(|r| match &r.data {
        RData::SOA(soa) => Some(soa.serial),
        _ => None,
    })
}

/// Waits (bounded) until `server` serves a serial `wanted` accepts.
async fn wait_serial(server: SocketAddr, what: &str, wanted: impl Fn(u32) -> bool) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = None;
    while Instant::now() < deadline {
        last = serial_at(server).await;
        if let Some(s) = last.filter(|s| wanted(*s)) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: the serial stayed {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serial_moves_with_a_default_answer_and_with_a_new_version() {
    let d = device(&zone(&secondary_at("127.0.171.2:5300"), "")).await;
    until_looked(&d).await;
    let first = wait_serial(d.v4(), "device", |_| true).await;
    // A drain moves www's default answer: no new version, a new serial.
    drain_first(&d).await;
    let m = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(answers(&m), vec!["192.0.2.2".to_string()]);
    let second = wait_serial(d.v4(), "after a drain", |s| s > first).await;
    // A new configuration version: another.
    apply_text(
        &d.device,
        &zone(&secondary_at("127.0.171.2:5300"), &many(1)),
    )
    .await
    .unwrap();
    wait_serial(d.v4(), "after a version", |s| s > second).await;
}

/// A real NSD on 127.0.171.2, stopped (by its PID) when dropped.
pub(crate) struct Nsd {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for Nsd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nsd {
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nsd.log")).unwrap_or_default()
    }

    /// NSD as a secondary of example.test, transferring from `primary`
    /// with the key `xfr` (IXFR first, AXFR when it has no zone yet).
    pub(crate) fn start(binary: &PathBuf, port: u16, primary: SocketAddr) -> Self {
        Self::start_tls(binary, port, primary, None)
    }

    /// [`Nsd::start`], transferring over TLS (XoT) when `tls` gives the
    /// primary's certificate and a DNS name of it: verified against it.
    pub(crate) fn start_tls(
        binary: &PathBuf,
        port: u16,
        primary: SocketAddr,
        tls: Option<(&std::path::Path, &str)>,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let (bundle, auth, auth_name) = match tls {
            Some((cert, name)) => (
                format!("  tls-cert-bundle: \"{}\"\n", cert.display()),
                format!("tls-auth:\n  name: \"primary\"\n  auth-domain-name: \"{name}\"\n"),
                " primary",
            ),
            None => (String::new(), String::new(), ""),
        };
        let conf = format!(
            r#"server:
  ip-address: {NSD_IP}@{port}
  port: {port}
  do-ip6: no
  username: ""
  chroot: ""
  zonesdir: "{d}"
  database: ""
  pidfile: "{d}/nsd.pid"
  xfrdfile: "{d}/xfrd.state"
  xfrdir: "{d}"
  zonelistfile: "{d}/zone.list"
  logfile: "{d}/nsd.log"
  verbosity: 2
  server-count: 1
{bundle}remote-control:
  control-enable: no
{auth}key:
  name: "xfr"
  algorithm: hmac-sha256
  secret: "{secret}"
zone:
  name: "example.test"
  zonefile: "example.test.zone"
  request-xfr: {ip}@{pport} xfr{auth_name}
  allow-notify: {ip} xfr
  outgoing-interface: {NSD_IP}
"#,
            secret = secret64(),
            ip = primary.ip(),
            pport = primary.port(),
        );
        let conf_path = dir.path().join("nsd.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(binary)
            .arg("-d")
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nsd starts");
        Self {
            child,
            addr: format!("{NSD_IP}:{port}").parse().unwrap(),
            dir,
        }
    }
}

/// Waits (bounded) until NSD serves the device's serial, above `after`;
/// returns it.
pub(crate) async fn until_in_step(d: &TestDevice, nsd: &Nsd, after: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ours = serial_at(d.v4()).await;
        let theirs = serial_at(nsd.addr).await;
        if let Some(s) = ours.filter(|s| *s > after && theirs == ours) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "NSD serves {theirs:?}, the device {ours:?} (after {after}):\n{}",
            nsd.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nsd_secondary_transfers_the_zone_and_follows_notify() {
    let Some(nsd_bin) = tool("nsd", "nsd") else {
        return;
    };
    let port = free_port_on(NSD_IP);
    let secondary = format!("{NSD_IP}:{port}");
    let d = device(&zone(&secondary_at(&secondary), &many(300))).await;
    let nsd = Nsd::start(&nsd_bin, port, d.v4());
    let ours = until_in_step(&d, &nsd, 0).await;
    let m = udp(nsd.addr, &query("host299.example.test.", RecordType::TXT)).await;
    assert_eq!(
        m.metadata.response_code,
        ResponseCode::NoError,
        "{}",
        nsd.log()
    );
    let m = udp(nsd.addr, &query("www.example.test.", RecordType::A)).await;
    assert_eq!(answers(&m), vec!["192.0.2.1".to_string()]);

    // An API write: a new serial, a NOTIFY, and NSD transfers it (its
    // refresh timer is an hour: only the NOTIFY brings it this soon).
    let changed = zone(
        &secondary_at(&secondary),
        &format!(
            "{}{}",
            many(300),
            "\n[[domain.record]]\nname = \"new\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.9\" }]\n"
        ),
    );
    apply_text(&d.device, &changed).await.unwrap();
    let newer = until_in_step(&d, &nsd, ours).await;
    let m = udp(nsd.addr, &query("new.example.test.", RecordType::A)).await;
    assert_eq!(answers(&m), vec!["192.0.2.9".to_string()]);
    assert!(nsd.log().contains("notify"), "{}", nsd.log());
    // It asked for the difference, and got it.
    let transfers = &d.device.engine.dns().transfers;
    assert!(transfers.served("incremental") >= 1, "{}", nsd.log());

    // The worker's state says the secondary answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = d.device.engine.dns().transfers.notify_status();
        if status
            .iter()
            .any(|s| s.serial == newer && s.state == "answered" && s.secondary == secondary)
        {
            break;
        }
        assert!(Instant::now() < deadline, "{status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let shown = tokio::task::block_in_place(|| run_gtm(&d, &["status"]));
    assert!(
        shown.stdout.contains(&secondary) && shown.stdout.contains("answered"),
        "{}",
        shown.stdout
    );
}

/// Asks `server` a signed question with the key `xfr` and `secret`
/// (base64): whether dig got a NOERROR answer whose TSIG it verified.
fn signed_ok(server: SocketAddr, secret: &str) -> Option<bool> {
    let dig = tool("dig", "bind9-dnsutils")?;
    let key = format!("hmac-sha256:xfr:{secret}");
    let port = server.port().to_string();
    let at = format!("@{}", server.ip());
    let out = run(
        &dig,
        &[
            "-p",
            &port,
            &at,
            "+norec",
            "+time=2",
            "+tries=1",
            "-y",
            &key,
            "pair.test",
            "SOA",
        ],
    );
    Some(out.contains("status: NOERROR") && out.contains("TSIG PSEUDOSECTION") && verified(&out))
}

/// Waits (bounded) until `server` answers signed with the key.
async fn until_signed(server: SocketAddr, secret: &str) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while signed_ok(server, secret) == Some(false) {
        assert!(Instant::now() < deadline, "{server} never answered signed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_reach_every_device_of_a_cluster_and_survive_restarts() {
    if tool("dig", "bind9-dnsutils").is_none() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut a = crate::cluster::Proc::start(root.path(), "gtm1", "dc1", "127.0.171.11");
    let mut b = crate::cluster::Proc::start(root.path(), "gtm2", "dc1", "127.0.171.12");
    // A key and secondaries naming it before the cluster exists: `cluster
    // init` carries the key before the configuration that names it.
    let xfr = tokio::task::block_in_place(|| a.ok(&["tsig", "add", "xfr"]));
    let xfr = xfr.trim().to_string();
    let config = format!(
        "{}secondaries = [{{ address = \"127.0.171.13\", key = \"xfr\" }}]\n",
        "[[domain]]\nname = \"pair.test\"\nnameservers = [\"ns1.pair.test\"]\n"
    );
    a.apply_ok(&config);
    tokio::task::block_in_place(|| {
        a.ok(&["cluster", "init"]);
        b.join(&a);
    });
    until_signed(b.dns(), &xfr).await;
    until_signed(a.dns(), &xfr).await;

    // A key added through B is A's too; both keep them after restarts.
    let other = tokio::task::block_in_place(|| b.ok(&["tsig", "add", "other"]));
    let listed = tokio::task::block_in_place(|| a.ok(&["tsig", "list"]));
    assert!(
        listed.contains("other") && listed.contains("xfr"),
        "{listed}"
    );
    assert!(!listed.contains(other.trim()));
    tokio::task::block_in_place(|| {
        a.kill();
        b.kill();
        a.restart();
        b.restart();
    });
    until_signed(a.dns(), &xfr).await;
    until_signed(b.dns(), &xfr).await;
}

/// Waits (bounded) until the notify worker gave the zone a serial other
/// than `before` (it records the zone's view with it); returns it.
async fn until_new_serial(d: &TestDevice, before: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = d.device.engine.dns().transfers.notify_status();
        if let Some(s) = status.first().map(|s| s.serial).filter(|s| *s != before) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "no new serial after {before}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The records of a dig transfer's output, in order, as (name, type,
/// data), without TSIG records.
fn transferred_records(out: &str) -> Vec<(String, String, String)> {
    out.lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let data = f.get(4..)?.join(" ");
            Some((f.first()?.to_string(), f.get(3)?.to_string(), data))
        })
        .filter(|(_, t, _)| t != "TSIG")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ixfr_sends_what_changed_since_the_secondarys_serial() {
    let d = device(&zone(&secondary_at("127.0.171.2:5300"), &many(50))).await;
    until_looked(&d).await;
    let good = format!("hmac-sha256:xfr:{}", secret64());
    let first = until_new_serial(&d, 0).await;
    let ixfr_from = |serial: u32| {
        let at = format!("IXFR={serial}");
        dig(&d, &["-b", NSD_IP, "-y", &good, &at, "example.test"])
    };
    let Some(out) = ixfr_from(first) else {
        return;
    };
    assert_eq!(
        transferred_records(&out).len(),
        1,
        "up to date: the SOA alone\n{out}"
    );

    // A new version: txt changes, a record is added.
    let changed = zone(
        &secondary_at("127.0.171.2:5300"),
        &format!(
            "{}\n[[domain.record]]\nname = \"new\"\ntype = \"TXT\"\nvalues = [\"added\"]\n",
            many(50)
        ),
    )
    .replace(r#"values = ["hello"]"#, r#"values = ["bye"]"#);
    apply_text(&d.device, &changed).await.unwrap();
    let second = until_new_serial(&d, first).await;
    let out = ixfr_from(first).unwrap();
    assert!(verified(&out), "{out}");
    let records = transferred_records(&out);
    let types: Vec<&str> = records.iter().map(|r| r.1.as_str()).collect();
    // RFC 1995: the new SOA; the old SOA, what went; the new SOA, what
    // came; the new SOA.
    assert_eq!(
        types,
        vec!["SOA", "SOA", "TXT", "SOA", "TXT", "TXT", "SOA"],
        "{out}"
    );
    assert!(records[1].2.contains(&first.to_string()), "{out}");
    assert!(records[2].2.contains("hello"), "{out}");
    assert!(records[3].2.contains(&second.to_string()), "{out}");
    let added: Vec<&str> = records[4..6].iter().map(|r| r.2.as_str()).collect();
    assert!(
        added.iter().any(|t| t.contains("bye")) && added.iter().any(|t| t.contains("added")),
        "{out}"
    );

    // A drain moves www's default answer: one more step, and a client at
    // the first serial gets both, chained.
    drain_first(&d).await;
    let third = until_new_serial(&d, second).await;
    let records = transferred_records(&ixfr_from(first).unwrap());
    let soas: Vec<&str> = records
        .iter()
        .filter(|r| r.1 == "SOA")
        .map(|r| r.2.as_str())
        .collect();
    assert_eq!(soas.len(), 6, "{records:?}");
    let www: Vec<&(String, String, String)> = records.iter().filter(|r| r.1 == "A").collect();
    assert_eq!(www.len(), 2, "{records:?}");
    assert!(
        www[0].2.contains("192.0.2.1") && www[1].2.contains("192.0.2.2"),
        "{records:?}"
    );
    assert!(soas[0].contains(&third.to_string()), "{records:?}");
    // From the second serial: the drain alone.
    let records = transferred_records(&ixfr_from(second).unwrap());
    assert_eq!(records.len(), 6, "{records:?}");
    // From a serial never given: the whole zone.
    let whole = transferred_records(&ixfr_from(1).unwrap());
    assert_eq!(whole.len(), 1 + 1 + 1 + 1 + 1 + 50 + 1, "{whole:?}");
    let transfers = &d.device.engine.dns().transfers;
    assert!(transfers.served("incremental") >= 3);
    assert!(transfers.served("up_to_date") >= 1);
    assert!(transfers.served("whole") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_zone_transfers_with_its_signatures_and_validates_at_an_nsd_secondary() {
    let (Some(nsd_bin), Some(verify), Some(_)) = (
        tool("nsd", "nsd"),
        tool("ldns-verify-zone", "ldnsutils"),
        crate::dnssec::delv(),
    ) else {
        return;
    };
    let port = free_port_on(NSD_IP);
    let secondary = format!("{NSD_IP}:{port}");
    let signed = zone(&secondary_at(&secondary), &many(40)).replace(
        "nameservers = [\"ns1.example.test\"]",
        "nameservers = [\"ns1.example.test\"]\ndnssec = true",
    );
    let d = device(&signed).await;
    let ds = crate::dnssec::ds_of(&d).await;
    let good = format!("hmac-sha256:xfr:{}", secret64());

    // The recorded view is signed once the key is there.
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        let out = dig(
            &d,
            &["-b", NSD_IP, "-y", &good, "+onesoa", "AXFR", "example.test"],
        )
        .unwrap();
        if out.contains("NSEC") {
            break out;
        }
        assert!(Instant::now() < deadline, "no signed view:\n{out}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(verified(&out), "{out}");
    let lines: Vec<String> = out
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter(|l| l.split_whitespace().nth(3) != Some("TSIG"))
        .map(str::to_string)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let judge = |name: &str, lines: &[String]| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let out = Command::new(&verify).arg(&path).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, said) = judge("zone", &lines);
    assert!(ok, "ldns-verify-zone: {said}\n{}", lines.join("\n"));
    // The judge can say no: a chain with a link missing.
    let broken: Vec<String> = lines
        .iter()
        .filter(|l| !(l.starts_with("host7.example.test.") && l.contains("\tNSEC\t")))
        .cloned()
        .collect();
    assert!(broken.len() < lines.len());
    assert!(!judge("broken", &broken).0, "a missing NSEC went unnoticed");

    // NSD transfers the signed zone and delv validates what it serves:
    // the steered record's default answer, a name and a type that do not
    // exist (denied by the NSEC chain).
    let nsd = Nsd::start(&nsd_bin, port, d.v4());
    let ours = until_in_step(&d, &nsd, 0).await;
    let anchors = crate::dnssec::anchor_file(dir.path(), &ds);
    for (name, rtype, expect) in [
        ("www.example.test", "A", "; fully validated"),
        (
            "nope.example.test",
            "A",
            "; negative response, fully validated",
        ),
        (
            "txt.example.test",
            "A",
            "; negative response, fully validated",
        ),
    ] {
        let said =
            crate::dnssec::ask_delv_in(nsd.addr, &anchors, "example.test", name, rtype).await;
        assert!(
            said.contains(expect),
            "{name} {rtype} at NSD:\n{said}\n{}",
            nsd.log()
        );
    }

    // Health moves www: NSD follows by IXFR, and the new answer validates.
    drain_first(&d).await;
    until_in_step(&d, &nsd, ours).await;
    let said =
        crate::dnssec::ask_delv_in(nsd.addr, &anchors, "example.test", "www.example.test", "A")
            .await;
    assert!(
        said.contains("; fully validated") && said.contains("192.0.2.2"),
        "{said}"
    );
    assert!(
        d.device.engine.dns().transfers.served("incremental") >= 1,
        "{}",
        nsd.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_that_names_a_view_transfers_that_views_zone() {
    let config = r#"
[[view]]
name = "internal"
clients = ["10.0.0.0/8"]

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
secondaries = [
  { address = "127.0.171.2", key = "xfr" },
  { address = "127.0.171.3", key = "xfr", view = "internal" },
]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }]

[[domain.record]]
name = "www"
type = "A"
view = "internal"
addresses = [{ ip = "10.0.0.1" }]

[[domain.record]]
name = "intranet"
type = "A"
view = "internal"
addresses = [{ ip = "10.0.0.2" }]

[[domain.record]]
name = "txt"
type = "TXT"
values = ["hello"]
"#;
    let d = device(config).await;
    let good = format!("hmac-sha256:xfr:{}", secret64());
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.device.engine.dns().transfers.notify_status().len() < 2 {
        assert!(Instant::now() < deadline, "the notify worker never looked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(outside) = dig(&d, &["-b", NSD_IP, "-y", &good, "AXFR", "example.test"]) else {
        return;
    };
    let inside = dig(&d, &["-b", OTHER_IP, "-y", &good, "AXFR", "example.test"]).unwrap();
    for out in [&outside, &inside] {
        assert!(!out.contains("Transfer failed"), "{out}");
        assert!(verified(out), "{out}");
    }
    let records = |out: &str| -> Vec<String> {
        let mut r: Vec<String> = transferred_records(out)
            .into_iter()
            .filter(|(_, t, _)| t != "SOA")
            .map(|(name, t, data)| format!("{name} {t} {data}"))
            .collect();
        r.sort();
        r.dedup();
        r
    };
    assert_eq!(
        records(&outside),
        [
            "example.test. NS ns1.example.test.",
            "txt.example.test. TXT \"hello\"",
            "www.example.test. A 192.0.2.1",
        ]
    );
    assert_eq!(
        records(&inside),
        [
            "example.test. NS ns1.example.test.",
            "intranet.example.test. A 10.0.0.2",
            "txt.example.test. TXT \"hello\"",
            "www.example.test. A 10.0.0.1",
        ]
    );
    // Each secondary's NOTIFY state names the zone it is sent.
    let mut zones: Vec<String> = d
        .device
        .engine
        .dns()
        .transfers
        .notify_status()
        .into_iter()
        .map(|s| format!("{} {}", s.domain, s.secondary))
        .collect();
    zones.sort();
    assert_eq!(
        zones,
        [
            "example.test 127.0.171.2:53",
            "example.test@internal 127.0.171.3:53",
        ]
    );
}

/// Zone transfers over TLS (RFC 9103), judged by kdig and openssl: the
/// secondary transfers the whole zone over TLS 1.3 with ALPN `dot`, kdig
/// verifying every message's TSIG; TLS changes no permission (another
/// host with the key is REFUSED); a plain query is answered on the same
/// listener; TLS 1.2 and another ALPN protocol are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_transfers_the_zone_over_tls_and_nobody_else_does() {
    let Some(kdig) = tool("kdig", "knot-dnsutils") else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let names = vec![DEVICE_IP.to_string(), "primary.example.test".to_string()];
    let ck = rcgen::generate_simple_self_signed(names).unwrap();
    let (cert, key) = (certs.path().join("xot.pem"), certs.path().join("xot.key"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let nsd_port = free_port_on(NSD_IP);
    let config = zone(&secondary_at(&format!("{NSD_IP}:{nsd_port}")), &many(1500));
    let d = device_set(&config, |s| {
        s.tls_cert = Some(cert.clone());
        s.tls_key = Some(key.clone());
        s.xot_listen = vec![format!("{DEVICE_IP}:0").parse().unwrap()];
    })
    .await;
    until_looked(&d).await;
    let xot = d.device.xot_addrs[0];
    let port = xot.port().to_string();
    let good = format!("hmac-sha256:xfr:{}", secret64());
    let kdig_tls = |from: &str, rest: &[&str]| {
        let mut args = vec!["-p", &port, "@127.0.171.1", "-b", from, "+tls"];
        args.extend_from_slice(rest);
        run(&kdig, &args)
    };
    // SOA, NS, www, txt, 1500 hosts, SOA.
    let out = kdig_tls(NSD_IP, &["-y", &good, "AXFR", "example.test"]);
    assert!(out.contains("1505 records"), "{out}");
    assert!(
        !out.contains(";; ERROR") && !out.contains(";; WARNING"),
        "every TSIG verified: {out}"
    );
    let out = kdig_tls(OTHER_IP, &["-y", &good, "AXFR", "example.test"]);
    assert!(out.contains("REFUSED"), "{out}");
    let out = kdig_tls(OTHER_IP, &["+norec", "txt.example.test", "TXT"]);
    assert!(out.contains("\"hello\""), "{out}");
    assert!(out.contains("TLS1.3"), "{out}");
    if let Some(openssl) = tool("openssl", "openssl") {
        let connect = format!("{xot}");
        let handshake = |extra: &[&str]| {
            let mut args = vec!["s_client", "-connect", &connect];
            args.extend_from_slice(extra);
            let out = Command::new(&openssl)
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .expect("openssl runs");
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            eprintln!("$ openssl {}\n{text}", args.join(" "));
            text
        };
        let out = handshake(&["-tls1_3", "-alpn", "dot"]);
        assert!(out.contains("ALPN protocol: dot"), "{out}");
        let out = handshake(&["-tls1_2", "-alpn", "dot"]);
        assert!(!out.contains("ALPN protocol: dot"), "TLS 1.2: {out}");
        let out = handshake(&["-tls1_3", "-alpn", "h2"]);
        assert!(!out.contains("ALPN protocol"), "another ALPN: {out}");
    }
    // A real secondary, NSD, asking the TLS listener alone (it speaks no
    // plain DNS) and checking the device's certificate by its name.
    if let Some(nsd_bin) = tool("nsd", "nsd") {
        let nsd = Nsd::start_tls(
            &nsd_bin,
            nsd_port,
            xot,
            Some((&cert, "primary.example.test")),
        );
        until_in_step(&d, &nsd, 0).await;
        let m = udp(nsd.addr, &query("host1499.example.test.", RecordType::TXT)).await;
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::NoError,
            "{}",
            nsd.log()
        );
    }
}
