//! The cluster with real processes of the gtm binary on loopback: each test
//! uses its own 127.0.N.x addresses, so the well-known ports never clash.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use hickory_server::proto::rr::RecordType;

use crate::support::{answers, query, udp};

/// A `gtm serve` process, killed by its PID when dropped.
pub(crate) struct Proc {
    child: Option<Child>,
    pub(crate) name: String,
    ip: String,
    pub(crate) dir: PathBuf,
    node: PathBuf,
}

impl Proc {
    pub(crate) fn start(root: &std::path::Path, name: &str, dc: &str, ip: &str) -> Self {
        Self::start_with(root, name, dc, ip, "")
    }

    /// With extra node settings (e.g. TLS files).
    pub(crate) fn start_with(
        root: &std::path::Path,
        name: &str,
        dc: &str,
        ip: &str,
        extra: &str,
    ) -> Self {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let node = dir.join("node.toml");
        std::fs::write(
            &node,
            format!(
                "name = \"{name}\"\ndatacenter = \"{dc}\"\ndata_dir = \"{}\"\ndns_listen = [\"{ip}:1053\"]\napi_listen = \"{ip}:8053\"\nudp_workers = 1\n{extra}\n",
                dir.display()
            ),
        )
        .unwrap();
        let mut p = Proc {
            child: None,
            name: name.into(),
            ip: ip.into(),
            dir,
            node,
        };
        p.restart();
        p
    }

    pub(crate) fn restart(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_gtm"))
            .arg("serve")
            .arg("--config")
            .arg(&self.node)
            .env("GTM_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        // Generous: a loaded CI machine runs many devices at once.
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.gtm(&["cluster", "status", "--json"]).status.code() != Some(0) {
            assert!(Instant::now() < deadline, "{} did not start", self.name);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The PID of the running process.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM, and waits for the process to end (a graceful stop).
    pub(crate) fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: a signal to the PID of a child this test started and
            // has not reaped yet.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
            }
            let _ = c.wait();
        }
    }

    /// kill -9, as a crash.
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn gtm(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_gtm"))
            .arg("--data-dir")
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap()
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.gtm(args);
        assert!(
            out.status.success(),
            "gtm {args:?} on {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into()
    }

    pub(crate) fn api(&self) -> String {
        let tls = std::fs::read_to_string(self.dir.join("api-address"))
            .is_ok_and(|a| a.starts_with("https"));
        format!("{}://{}:8053", if tls { "https" } else { "http" }, self.ip)
    }

    pub(crate) fn dns(&self) -> SocketAddr {
        format!("{}:1053", self.ip).parse().unwrap()
    }

    pub(crate) fn join(&self, leader: &Proc) {
        let token = leader.ok(&["cluster", "token"]);
        self.ok(&["cluster", "join", &leader.api(), "--token", token.trim()]);
    }

    pub(crate) fn apply(&self, text: &str) -> Output {
        let file = self.dir.join("apply.toml");
        std::fs::write(&file, text).unwrap();
        self.gtm(&["config", "apply", file.to_str().unwrap()])
    }

    /// Applies `text`, which must succeed.
    pub(crate) fn apply_ok(&self, text: &str) {
        let out = self.apply(text);
        assert!(
            out.status.success(),
            "gtm config apply on {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A pair with mutual TLS between its devices (one certificate for both
/// addresses, `cluster.pem` in `root`, returned), on 127.0.{net}.1 and .2,
/// the first the leader.
pub(crate) fn tls_pair(root: &std::path::Path, net: u8) -> (Proc, Proc, PathBuf) {
    let ips = [format!("127.0.{net}.1"), format!("127.0.{net}.2")];
    let ck = rcgen::generate_simple_self_signed(ips.to_vec()).unwrap();
    let cert = root.join("cluster.pem");
    let key = root.join("cluster.key");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let extra = format!(
        "tls_cert = \"{}\"\ntls_key = \"{}\"",
        cert.display(),
        key.display()
    );
    let a = Proc::start_with(root, "gtm1", "dc1", &ips[0], &extra);
    let b = Proc::start_with(root, "gtm2", "dc1", &ips[1], &extra);
    a.ok(&["cluster", "init"]);
    b.join(&a);
    (a, b, cert)
}

pub(crate) fn zone(record_ip: &str) -> String {
    format!(
        "[[domain]]\nname = \"pair.test\"\nnameservers = [\"ns1.pair.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"{record_ip}\" }}]\n"
    )
}

/// Waits (bounded) until the device answers `www.pair.test` with `ip`.
pub(crate) async fn until_answer(p: &Proc, ip: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = udp(p.dns(), &query("www.pair.test.", RecordType::A)).await;
        if answers(&r) == [ip] {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never answered {ip}: {:?}",
            p.name,
            answers(&r)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn pair(net: u8) -> (tempfile::TempDir, Proc, Proc) {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", &format!("127.0.{net}.1"));
    let b = Proc::start(root.path(), "gtm2", "dc1", &format!("127.0.{net}.2"));
    let init = a.ok(&["cluster", "init"]);
    assert!(
        init.contains("Two voters cannot survive the loss of one"),
        "{init}"
    );
    b.join(&a);
    (root, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_replicates_and_a_follower_forwards_writes() {
    let (_root, a, b) = pair(31);
    a.apply_ok(&zone("192.0.2.1"));
    until_answer(&a, "192.0.2.1").await;
    until_answer(&b, "192.0.2.1").await;

    // A write on the follower goes to the leader, then to both.
    b.apply_ok(&zone("192.0.2.2"));
    until_answer(&a, "192.0.2.2").await;
    until_answer(&b, "192.0.2.2").await;
    assert!(a.ok(&["config", "export"]).contains("192.0.2.2"));

    let status: serde_json::Value =
        serde_json::from_str(&b.ok(&["cluster", "status", "--json"])).unwrap();
    let members = status["members"].as_array().unwrap();
    assert_eq!(members.len(), 2);
    assert!(
        members
            .iter()
            .all(|m| m["voter"] == true && m["info"]["datacenter"] == "dc1")
    );
    assert_eq!(status["leader"][1]["name"], "gtm1");
    let devices = a.ok(&["device", "list"]);
    assert!(
        devices.contains("gtm1") && devices.contains("gtm2"),
        "{devices}"
    );

    // /metrics shows the Raft roles and the peer's reports.
    let http = gtm_node::tls::http_client(None, Duration::from_secs(5)).unwrap();
    let scrape = |p: &Proc| {
        let (http, url) = (http.clone(), format!("{}/metrics", p.api()));
        async move { http.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ma, mb) = (scrape(&a).await, scrape(&b).await);
        let seen = ma.contains("gtm_raft_role{role=\"leader\"} 1")
            && mb.contains("gtm_raft_role{role=\"follower\"} 1")
            && ma.contains("gtm_peer_report_age_seconds{device=\"gtm2\",datacenter=\"dc1\"}")
            && ma.contains("gtm_peer_reachable{device=\"gtm2\",datacenter=\"dc1\"} 1")
            && ma.contains("gtm_record_status{device=\"gtm2\",record=\"www.pair.test/A\"");
        if seen {
            let applied = |m: &str| {
                m.lines()
                    .find_map(|l| l.strip_prefix("gtm_raft_applied_index "))
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            assert!(applied(&ma) >= 2.0, "{ma}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never showed the pair:\n{ma}\n{mb}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_a_device_stops_writes_but_never_dns() {
    let (_root, mut a, b) = pair(32);
    assert!(a.apply(&zone("192.0.2.1")).status.success());
    until_answer(&b, "192.0.2.1").await;

    // kill -9 the leader while queries run against the survivor.
    let server = b.dns();
    let queries = tokio::spawn(async move {
        let mut answered = 0;
        for _ in 0..400 {
            let r = udp(server, &query("www.pair.test.", RecordType::A)).await;
            assert_eq!(answers(&r), ["192.0.2.1"]);
            answered += 1;
        }
        answered
    });
    a.kill();
    assert_eq!(
        queries.await.unwrap(),
        400,
        "the survivor answered every query"
    );

    // Without quorum the survivor refuses writes, naming the lost peer.
    let out = b.apply(&zone("192.0.2.9"));
    assert_eq!(out.status.code(), Some(4), "no quorum exits 4");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no quorum") && stderr.contains("gtm1"),
        "{stderr}"
    );
    until_answer(&b, "192.0.2.1").await;

    // After the permanent loss of the peer, recovery continues alone.
    assert_eq!(
        b.gtm(&["cluster", "recover"]).status.code(),
        Some(2),
        "recovery needs --force-single"
    );
    b.ok(&["cluster", "recover", "--force-single"]);
    b.apply_ok(&zone("192.0.2.9"));
    until_answer(&b, "192.0.2.9").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_device_keeps_its_state_and_catches_up() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.33.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.33.2");
    let mut c = Proc::start(root.path(), "gtm3", "dc2", "127.0.33.3");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    c.join(&a);
    assert!(a.apply(&zone("192.0.2.1")).status.success());
    until_answer(&c, "192.0.2.1").await;

    // While the remote device is down, the pair still has a quorum of three.
    c.kill();
    assert!(b.apply(&zone("192.0.2.2")).status.success());
    until_answer(&a, "192.0.2.2").await;
    c.restart();
    until_answer(&c, "192.0.2.2").await;
    let status: serde_json::Value =
        serde_json::from_str(&c.ok(&["cluster", "status", "--json"])).unwrap();
    assert_eq!(
        status["members"].as_array().unwrap().len(),
        3,
        "membership survives the restart"
    );

    // A device that leaves, loses its data and joins again catches up.
    c.ok(&["cluster", "leave"]);
    c.kill();
    std::fs::remove_dir_all(c.dir.join("store")).unwrap();
    for file in ["node-id", "cluster-secret"] {
        let _ = std::fs::remove_file(c.dir.join(file));
    }
    c.restart();
    assert!(a.apply(&zone("192.0.2.3")).status.success());
    c.join(&b);
    until_answer(&c, "192.0.2.3").await;
}

/// A record write is the same replicated text on both devices whether a
/// device knows where the parts of the text before lie (it wrote or
/// applied it) or, just restarted, reads that from the text; the
/// operator's text (a comment, records as inline tables) is kept; and
/// the text is the one a restart of the other device reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_write_is_the_same_text_on_both_devices_across_restarts() {
    let root = tempfile::tempdir().unwrap();
    let mut a = Proc::start(root.path(), "gtm1", "dc1", "127.0.104.1");
    let mut b = Proc::start(root.path(), "gtm2", "dc1", "127.0.104.2");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    // www among other records, so that a write changes the middle.
    let record = |name: &str, ip: &str| {
        format!("  {{ name = \"{name}\", type = \"A\", addresses = [{{ ip = \"{ip}\" }}] }},\n")
    };
    let mut text = "# the operator's zone\n[[domain]]\nname = \"pair.test\"\n\
                    nameservers = [\"ns1.pair.test\"]\nrecord = [\n"
        .to_string();
    for i in 0..5 {
        text.push_str(&record(&format!("r{i}"), "198.51.100.1"));
    }
    text.push_str(&record("www", "192.0.2.1"));
    for i in 5..10 {
        text.push_str(&record(&format!("r{i}"), "198.51.100.1"));
    }
    text.push_str("]\n");
    a.apply_ok(&text);
    until_answer(&b, "192.0.2.1").await;
    let put = |p: &Proc, ip: &str| {
        let file = root.path().join(format!("www-{ip}.toml"));
        std::fs::write(&file, format!("addresses = [{{ ip = \"{ip}\" }}]\n")).unwrap();
        p.ok(&[
            "record",
            "put",
            "www.pair.test",
            "A",
            "--file",
            file.to_str().unwrap(),
        ]);
    };
    // The committed text as each device's replicated state holds it (the
    // newest version's, from history; `config export` writes the parsed
    // configuration instead).
    let committed = |p: &Proc| {
        let history: serde_json::Value =
            serde_json::from_str(&p.ok(&["config", "history", "--json"])).unwrap();
        let newest = history[0]["version"].as_u64().unwrap().to_string();
        p.ok(&["config", "show", "--version", &newest])
    };
    let same_text = |a: &Proc, b: &Proc, step: &str| {
        let (ta, tb) = (committed(a), committed(b));
        assert_eq!(ta, tb, "{step}");
        ta
    };
    // Each device wrote the first edit's text: both take from it next.
    put(&a, "192.0.2.2");
    until_answer(&b, "192.0.2.2").await;
    same_text(&a, &b, "an edit");
    // Restarted, b writes the next edit whole; a takes from its text.
    b.kill();
    b.restart();
    until_answer(&b, "192.0.2.2").await;
    put(&a, "192.0.2.3");
    until_answer(&b, "192.0.2.3").await;
    until_answer(&a, "192.0.2.3").await;
    let text = same_text(&a, &b, "an edit after b's restart");
    assert!(text.contains("192.0.2.3") && text.contains("r9"), "{text}");
    assert!(
        text.starts_with("# the operator's zone\n") && text.contains("{ name = \"r9\""),
        "the operator's text is kept: {text}"
    );
    // And the other way round, through b.
    a.kill();
    a.restart();
    put(&b, "192.0.2.4");
    until_answer(&a, "192.0.2.4").await;
    until_answer(&b, "192.0.2.4").await;
    same_text(&a, &b, "an edit after a's restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_devices_report_drives_dr_and_its_silence_keeps_the_decision() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.34.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.34.2");
    let mut c = Proc::start(root.path(), "gtm3", "dc2", "127.0.34.3");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    c.join(&a);
    // What dc2 probes: a listener this test opens and closes.
    let target = std::net::TcpListener::bind("127.0.34.9:0").unwrap();
    let port = target.local_addr().unwrap().port();
    let config = format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "seen-from-dc2"
type = "tcp"
target = "127.0.34.9"
port = {port}
interval = "500ms"
timeout = "300ms"
failures = 1
successes = 1
run_on = "dc2"

[[scenario]]
name = "main-unreachable"
condition = "NOT seen-from-dc2"

[[domain]]
name = "pair.test"
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.pair.test"]

[[domain.record]]
name = "www"
type = "A"
mode = "disaster-recovery"
dr_condition = "scenario:main-unreachable"
addresses = [
  {{ ip = "192.0.2.1", dc = "dc1" }},
  {{ ip = "198.51.100.1", dc = "dc2" }},
]
"#
    );
    a.apply_ok(&config);
    until_answer(&a, "192.0.2.1").await;

    // dc2 loses the target: its report switches the pair to DR.
    drop(target);
    until_answer(&a, "198.51.100.1").await;
    until_answer(&b, "198.51.100.1").await;
    let checks: serde_json::Value =
        serde_json::from_str(&a.ok(&["check", "list", "--json"])).unwrap();
    let reason = checks[0]["reason"].as_str().unwrap().to_string();
    assert!(reason.starts_with("from dc2: gtm3 Error"), "{reason}");

    // The remote device is cut off: its check goes No Data on the pair, the
    // scenario keeps its decision, and dc2 is reported down.
    c.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let checks: serde_json::Value =
            serde_json::from_str(&a.ok(&["check", "list", "--json"])).unwrap();
        if checks[0]["state"] == "No Data" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the check never went No Data: {checks}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_answer(&a, "198.51.100.1").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !a
        .ok(&["logs", "--kind", "datacenter"])
        .contains("datacenter dc2 is down")
    {
        assert!(Instant::now() < deadline, "dc2 was never reported down");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status = a.ok(&["status"]);
    // Its column is marked stale, with its age, not shown as current.
    assert!(status.contains("gtm3 (silent "), "{status}");
    assert!(status.contains("gtm3 has not reported for "), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_and_cluster_traffic_over_tls() {
    let root = tempfile::tempdir().unwrap();
    let (a, b, cert) = tls_pair(root.path(), 35);
    assert!(a.api().starts_with("https://"));
    b.apply_ok(&zone("192.0.2.7"));
    until_answer(&a, "192.0.2.7").await;
    until_answer(&b, "192.0.2.7").await;
    let status: serde_json::Value =
        serde_json::from_str(&a.ok(&["cluster", "status", "--json"])).unwrap();
    assert!(status["members"].as_array().unwrap().iter().all(|m| {
        m["info"]["api_addr"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    }));

    // Plain HTTP to the TLS listener gets no answer.
    let plain = a.gtm(&["--api", "http://127.0.35.1:8053", "status"]);
    assert!(!plain.status.success());
    // A client that does not trust the certificate is refused.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.35.1".into()]).unwrap();
    let wrong = root.path().join("wrong.pem");
    std::fs::write(&wrong, other.cert.pem()).unwrap();
    let refused = a.gtm(&["--ca-file", wrong.to_str().unwrap(), "status"]);
    assert_eq!(
        refused.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // Mutual TLS: the cluster secret alone does not open the
    // device-to-device routes; the devices' own certificate does (the pair
    // above replicated through it), another CA's certificate does not.
    let secret = std::fs::read_to_string(a.dir.join("cluster-secret")).unwrap();
    let trust = std::fs::read(&cert).unwrap();
    let no_cert = gtm_node::tls::http_client(Some(&trust), Duration::from_secs(5)).unwrap();
    for path in [
        "/cluster/v1/report",
        "/cluster/v1/vote",
        "/cluster/v1/write",
    ] {
        let r = no_cert
            .post(format!("https://127.0.35.1:8053{path}"))
            .header(gtm_cluster::SECRET_HEADER, secret.trim())
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let body = r.text().await.unwrap();
        assert!(body.contains("client certificate"), "{path}: {body}");
    }
    let other_key = root.path().join("wrong.key");
    std::fs::write(&other_key, other.signing_key.serialize_pem()).unwrap();
    let stranger = gtm_node::tls::Tls::load(&wrong, &other_key, Some(&cert))
        .unwrap()
        .peer_client(Duration::from_secs(5))
        .unwrap();
    let r = stranger
        .post("https://127.0.35.1:8053/cluster/v1/report")
        .header(gtm_cluster::SECRET_HEADER, secret.trim())
        .body("{}")
        .send()
        .await;
    assert!(
        r.is_err(),
        "a certificate of another CA fails the handshake: {r:?}"
    );
}

/// `gtm record preview NAME TYPE --device OTHER` on `asked`, about `other`:
/// the asked device fetches the preview from the other one, which names
/// itself in it; the asked device keeps serving afterwards.
async fn preview_from_the_other_device(asked: &Proc, other: &Proc) {
    asked.apply_ok(&zone("192.0.2.9"));
    until_answer(asked, "192.0.2.9").await;
    until_answer(other, "192.0.2.9").await;
    let preview: serde_json::Value = serde_json::from_str(&asked.ok(&[
        "record",
        "preview",
        "www.pair.test",
        "A",
        "--device",
        &other.name,
        "--json",
    ]))
    .unwrap();
    assert_eq!(preview["device"], other.name.as_str(), "{preview}");
    assert_eq!(preview["record"], "www.pair.test/A", "{preview}");
    assert_eq!(preview["active"][0]["ip"], "192.0.2.9", "{preview}");
    // An unknown record on the other device is a clear not-found.
    let missing = asked.gtm(&[
        "record",
        "preview",
        "nope.pair.test",
        "A",
        "--device",
        &other.name,
    ]);
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("no steered record"), "{stderr}");
    // Both devices are still up and answering.
    until_answer(asked, "192.0.2.9").await;
    until_answer(other, "192.0.2.9").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_of_another_device_over_plain_http() {
    let (_root, a, b) = pair(91);
    preview_from_the_other_device(&a, &b).await;
    preview_from_the_other_device(&b, &a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_of_another_device_over_mutual_tls() {
    let root = tempfile::tempdir().unwrap();
    let (a, b, _) = tls_pair(root.path(), 92);
    preview_from_the_other_device(&a, &b).await;
    preview_from_the_other_device(&b, &a).await;
}

fn status_json(p: &Proc) -> serde_json::Value {
    serde_json::from_str(&p.ok(&["cluster", "status", "--json"])).unwrap()
}

/// Waits (bounded) until `p` leads its cluster.
fn until_leader(p: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = status_json(p);
        if status["state"] == "Leader" {
            return;
        }
        assert!(Instant::now() < deadline, "{} never led: {status}", p.name);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Applies `zone(ip)` through `via` and waits until every device answers it.
async fn write_seen_everywhere(via: &Proc, all: &[&Proc], ip: &str) {
    let out = via.apply(&zone(ip));
    assert!(
        out.status.success(),
        "write through {}: {}",
        via.name,
        String::from_utf8_lossy(&out.stderr)
    );
    for p in all {
        until_answer(p, ip).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_join_changes_nothing_on_disk() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.141.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.141.2");
    a.ok(&["cluster", "init"]);
    let secret_file = b.dir.join("cluster-secret");
    let before = std::fs::read(&secret_file).unwrap();

    // A token of another cluster: the leader refuses it, clearly.
    let wrong = format!("gtm1.{}", "ab".repeat(32));
    let out = b.gtm(&["cluster", "join", &a.api(), "--token", &wrong]);
    assert!(!out.status.success(), "a wrong token was accepted");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refused the join")
            && stderr.contains("wrong token")
            && stderr.contains("nothing changed"),
        "{stderr}"
    );
    // Not a token at all: refused before anything is sent.
    let out = b.gtm(&["cluster", "join", &a.api(), "--token", "nonsense"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a gtm join token"), "{stderr}");

    assert_eq!(
        std::fs::read(&secret_file).unwrap(),
        before,
        "the refused join changed the cluster secret on disk"
    );
    let status = status_json(&b);
    assert_eq!(status["members"].as_array().unwrap().len(), 0, "{status}");
    let leader = status_json(&a);
    assert_eq!(leader["members"].as_array().unwrap().len(), 1, "{leader}");

    // The device starts its own cluster, guarded by its own secret.
    b.ok(&["cluster", "init"]);
    let token = b.ok(&["cluster", "token"]);
    let original = String::from_utf8(before).unwrap();
    assert_eq!(token.trim(), format!("gtm1.{}", original.trim()));
    assert_ne!(token.trim(), a.ok(&["cluster", "token"]).trim());
    write_seen_everywhere(&b, &[&b], "192.0.2.41").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_left_can_join_again() {
    let (_root, a, mut b) = pair(142);
    write_seen_everywhere(&a, &[&a, &b], "192.0.2.1").await;
    let old_id = status_json(&b)["id"].as_u64().unwrap();
    let old_secret = std::fs::read_to_string(b.dir.join("cluster-secret")).unwrap();

    b.ok(&["cluster", "leave"]);
    // In no cluster, under a new node id, with a secret of its own; still
    // serving the configuration it had.
    let status = status_json(&b);
    assert_eq!(status["members"].as_array().unwrap().len(), 0, "{status}");
    let new_id = status["id"].as_u64().unwrap();
    assert_ne!(new_id, old_id);
    let kept_id = std::fs::read_to_string(b.dir.join("node-id")).unwrap();
    assert_eq!(kept_id.trim(), new_id.to_string());
    let new_secret = std::fs::read_to_string(b.dir.join("cluster-secret")).unwrap();
    assert_ne!(new_secret.trim(), old_secret.trim());
    // All of it is durable: a restart keeps it.
    b.kill();
    b.restart();
    let status = status_json(&b);
    assert_eq!(status["members"].as_array().unwrap().len(), 0, "{status}");
    assert_eq!(status["id"].as_u64(), Some(new_id), "{status}");
    until_answer(&b, "192.0.2.1").await;
    assert!(b.ok(&["config", "export"]).contains("192.0.2.1"));

    // A second leave says why it cannot.
    let out = b.gtm(&["cluster", "leave"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("this device belongs to no cluster"),
        "{stderr}"
    );

    // The other device continues alone: a pair minus one voter is one voter.
    let status = status_json(&a);
    assert_eq!(status["members"].as_array().unwrap().len(), 1, "{status}");
    write_seen_everywhere(&a, &[&a], "192.0.2.2").await;
    until_answer(&b, "192.0.2.1").await;
    // In no cluster, a write goes to its own store.
    write_seen_everywhere(&b, &[&b], "192.0.2.9").await;
    until_answer(&a, "192.0.2.2").await;

    // It joins again with a token (the cluster's configuration replaces its
    // own), and writes through either device reach both.
    b.join(&a);
    until_answer(&b, "192.0.2.2").await;
    write_seen_everywhere(&b, &[&a, &b], "192.0.2.3").await;
    write_seen_everywhere(&a, &[&a, &b], "192.0.2.4").await;
    let status = status_json(&a);
    let members = status["members"].as_array().unwrap();
    assert_eq!(members.len(), 2, "{status}");
    assert!(members.iter().all(|m| m["voter"] == true), "{status}");
    assert!(members.iter().any(|m| m["id"] == new_id), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_left_can_join_again() {
    let (_root, a, b) = pair(143);
    write_seen_everywhere(&a, &[&a, &b], "192.0.2.1").await;
    assert_eq!(status_json(&a)["state"], "Leader");

    a.ok(&["cluster", "leave"]);
    let status = status_json(&a);
    assert_eq!(status["members"].as_array().unwrap().len(), 0, "{status}");
    // The follower, now the only voter, elects itself and takes writes.
    until_leader(&b);
    let status = status_json(&b);
    assert_eq!(status["members"].as_array().unwrap().len(), 1, "{status}");
    write_seen_everywhere(&b, &[&b], "192.0.2.2").await;
    until_answer(&a, "192.0.2.1").await;

    a.join(&b);
    until_answer(&a, "192.0.2.2").await;
    write_seen_everywhere(&a, &[&a, &b], "192.0.2.3").await;
    write_seen_everywhere(&b, &[&a, &b], "192.0.2.4").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_member_that_leaves_is_in_no_cluster() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.144.1");
    a.ok(&["cluster", "init"]);
    write_seen_everywhere(&a, &[&a], "192.0.2.1").await;
    a.ok(&["cluster", "leave"]);
    let status = status_json(&a);
    assert_eq!(status["members"].as_array().unwrap().len(), 0, "{status}");
    until_answer(&a, "192.0.2.1").await;
    // In no cluster, it writes its own store, and can start a cluster again.
    write_seen_everywhere(&a, &[&a], "192.0.2.2").await;
    a.ok(&["cluster", "init"]);
    write_seen_everywhere(&a, &[&a], "192.0.2.3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_device_takes_the_clusters_configuration_whatever_its_version() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.145.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.145.2");
    a.ok(&["cluster", "init"]);
    write_seen_everywhere(&a, &[&a], "192.0.2.50").await;
    // Alone, the device counts its own versions past the cluster's index.
    for last in 51..=58 {
        write_seen_everywhere(&b, &[&b], &format!("192.0.2.{last}")).await;
    }
    b.join(&a);
    until_answer(&b, "192.0.2.50").await;
    // What this test is about: the cluster's index is below the 8 versions
    // the device counted alone.
    let status = status_json(&b);
    assert!(status["applied_index"].as_u64().unwrap() < 8, "{status}");
    write_seen_everywhere(&b, &[&a, &b], "192.0.2.60").await;
    write_seen_everywhere(&a, &[&a, &b], "192.0.2.61").await;
}

/// Starts and stops are GTM Logs events; a start after a run that ended
/// without stopping says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_and_stops_are_events_and_an_unclean_stop_is_named() {
    let root = tempfile::tempdir().unwrap();
    let mut d = Proc::start(root.path(), "gtm1", "dc1", "127.0.146.1");
    let device_events = |d: &Proc| d.ok(&["logs", "--kind", "device"]);
    let wait_for = |d: &Proc, text: &str, count: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let logs = device_events(d);
            if logs.matches(text).count() >= count {
                return logs;
            }
            assert!(
                Instant::now() < deadline,
                "no {count} × {text:?} in:\n{logs}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let logs = wait_for(&d, "device gtm1 started (gtm ", 1);
    assert!(!logs.contains("unclean"), "{logs}");
    // An apply flushes the store: the start event is on disk.
    d.apply_ok(&zone("192.0.2.70"));
    until_answer(&d, "192.0.2.70").await;

    d.kill();
    d.restart();
    wait_for(&d, "device gtm1 started after an unclean stop", 1);

    d.terminate();
    d.restart();
    let logs = wait_for(&d, "device gtm1 started (gtm ", 2);
    assert!(logs.contains("device gtm1 stopping"), "{logs}");
    assert_eq!(logs.matches("unclean").count(), 1, "{logs}");
    // Read back from the store after a restart, the unclean start keeps
    // its severity: the one warning among the device's events.
    let warnings = d.ok(&["logs", "--kind", "device", "--severity", "warning"]);
    assert_eq!(warnings.lines().count(), 1, "{warnings}");
    assert!(
        warnings.contains("  warning  device gtm1 started after an unclean stop"),
        "{warnings}"
    );
    d.kill();
}

/// A device's warning, made after its restart, reaches the other device of
/// a pair with its severity (in its reports): `--severity warning` there
/// finds it, and no info event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peers_warning_keeps_its_severity_on_the_other_device_over_its_restart() {
    let (_root, mut a, mut b) = pair(148);
    // An apply flushes the store: gtm1's start event is on disk.
    a.apply_ok(&zone("192.0.2.90"));
    until_answer(&b, "192.0.2.90").await;
    a.kill();
    a.restart();
    let unclean = "device gtm1 started after an unclean stop";
    let warnings_on = |d: &Proc| d.ok(&["logs", "--kind", "device", "--severity", "warning"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let logs = warnings_on(&b);
        if logs.contains(unclean) {
            break logs;
        }
        assert!(
            Instant::now() < deadline,
            "gtm2 never saw gtm1's warning:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(seen.contains("  gtm1  warning  "), "{seen}");
    assert!(
        !seen.contains("gtm2 started"),
        "an info event passed: {seen}"
    );
    // gtm2 restarts holding no event of gtm1's: its answer says so, and
    // gtm1 sends its events again.
    b.kill();
    b.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logs = warnings_on(&b);
        if logs.contains(unclean) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gtm2 lost gtm1's warning over its restart:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // One device's events alone: gtm1's, read on gtm2.
    let only = b.ok(&["logs", "--device", "gtm1", "--kind", "device"]);
    assert!(only.contains(unclean), "{only}");
    assert!(
        only.lines().all(|l| l.contains("  gtm1  ")),
        "another device's event: {only}"
    );
    a.kill();
    b.kill();
}

/// A put through each device of a pair, of different keys of one record:
/// the state machine merges both into the committed record, and both
/// devices keep both after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_of_different_keys_through_two_devices_both_stay() {
    let (_root, mut a, b) = pair(147);
    a.apply_ok(&zone("192.0.2.80"));
    until_answer(&b, "192.0.2.80").await;
    let ttl = a.dir.join("ttl.toml");
    std::fs::write(&ttl, "ttl = 45\nbalance = \"weighted\"\n").unwrap();
    a.ok(&[
        "record",
        "put",
        "www.pair.test",
        "A",
        "--file",
        ttl.to_str().unwrap(),
    ]);
    b.ok(&[
        "record",
        "address",
        "put",
        "www.pair.test",
        "A",
        "192.0.2.80",
        "--weight",
        "3",
    ]);
    a.kill();
    a.restart();
    for d in [&a, &b] {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let record: serde_json::Value =
                serde_json::from_str(&d.ok(&["record", "show", "www.pair.test", "A", "--json"]))
                    .unwrap();
            if record["ttl"] == 45 && record["addresses"][0]["weight"] == 3 {
                break;
            }
            assert!(Instant::now() < deadline, "{}: {record}", d.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A certificate authority of a test: its certificate (PEM) and its issuer.
pub(crate) fn test_ca(name: &str) -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), rcgen::Issuer::new(params, key))
}

/// Issues a certificate for `ip` from `ca` into `dir`'s `tls.pem` and
/// `tls.key`, written aside and renamed as a renewal does; returns the
/// certificate and key (PEM).
pub(crate) fn issue(
    dir: &std::path::Path,
    ip: &str,
    ca: &rcgen::Issuer<'static, rcgen::KeyPair>,
) -> (String, String) {
    let mut params = rcgen::CertificateParams::new(vec![ip.to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ip);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    let (cert, key) = (cert.pem(), key.serialize_pem());
    std::fs::write(dir.join("tls.key.new"), &key).unwrap();
    std::fs::write(dir.join("tls.pem.new"), &cert).unwrap();
    std::fs::rename(dir.join("tls.key.new"), dir.join("tls.key")).unwrap();
    std::fs::rename(dir.join("tls.pem.new"), dir.join("tls.pem")).unwrap();
    (cert, key)
}

/// Sends SIGHUP to `p` (a reload of its node file) and waits (bounded)
/// until `reloaded` says it took effect.
async fn reload_until(p: &Proc, what: &str, mut reloaded: impl AsyncFnMut() -> bool) {
    let pid = libc::pid_t::try_from(p.pid()).unwrap();
    // SAFETY: a signal to the PID of a child this test started and has
    // not reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reloaded().await {
        assert!(
            Instant::now() < deadline,
            "{}: {what} never took effect",
            p.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether a new TLS connection to `p`'s API, trusting only `ca`, gets an
/// HTTP answer (any status: the handshake is what is tested).
async fn serves_certificate_of(p: &Proc, ca: &str) -> bool {
    gtm_node::tls::http_client(Some(ca.as_bytes()), Duration::from_secs(10))
        .unwrap()
        .get(format!("{}/api/v1/status", p.api()))
        .send()
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_rotation_by_sighup_keeps_mutual_tls_between_devices_without_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let (ca1, issuer1) = test_ca("gtm test CA1");
    let (ca2, issuer2) = test_ca("gtm test CA2");
    let devices = [("gtm1", "127.0.154.1"), ("gtm2", "127.0.154.2")];
    // Each device's TLS files, where a renewal would write them.
    let tls_dir = |name: &str| root.path().join(format!("{name}-tls"));
    let mut first_a = None;
    let mut procs = Vec::new();
    for (name, ip) in devices {
        let dir = tls_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        let issued = issue(&dir, ip, &issuer1);
        first_a.get_or_insert(issued);
        std::fs::write(dir.join("ca.pem"), &ca1).unwrap();
        let extra = format!(
            "tls_cert = \"{0}/tls.pem\"\ntls_key = \"{0}/tls.key\"\ntls_ca = \"{0}/ca.pem\"",
            dir.display()
        );
        procs.push(Proc::start_with(root.path(), name, "dc1", ip, &extra));
    }
    let [a, b] = <[Proc; 2]>::try_from(procs).ok().unwrap();
    a.ok(&["cluster", "init"]);
    b.join(&a);
    write_seen_everywhere(&a, &[&a, &b], "192.0.2.10").await;

    // The rotation from CA1 to CA2, each step a reload of each device in
    // turn, none a restart: 1. trust both CAs; 2. renew each certificate
    // from CA2; 3. trust CA2 only.
    let both = format!("{ca1}{ca2}");
    for (p, (name, _)) in [&a, &b].into_iter().zip(devices) {
        std::fs::write(tls_dir(name).join("ca.pem"), &both).unwrap();
        // A reload writes the trusted certificates for the CLI last.
        reload_until(p, "trusting CA1 and CA2", async || {
            std::fs::read_to_string(p.dir.join("api-ca.pem")).is_ok_and(|t| t == both)
        })
        .await;
    }
    for (p, (name, ip)) in [&a, &b].into_iter().zip(devices) {
        issue(&tls_dir(name), ip, &issuer2);
        reload_until(p, "the certificate from CA2", async || {
            serves_certificate_of(p, &ca2).await
        })
        .await;
    }
    for (p, (name, _)) in [&a, &b].into_iter().zip(devices) {
        std::fs::write(tls_dir(name).join("ca.pem"), &ca2).unwrap();
        reload_until(p, "trusting CA2 only", async || {
            std::fs::read_to_string(p.dir.join("api-ca.pem")).is_ok_and(|t| t == ca2)
        })
        .await;
    }

    // CA1 is out on both sides now: gtm2 refuses gtm1's first certificate
    // as a client, and a client trusting CA1 only refuses gtm2.
    let (old_cert, old_key) = first_a.unwrap();
    let old = root.path().join("old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("tls.pem"), &old_cert).unwrap();
    std::fs::write(old.join("tls.key"), &old_key).unwrap();
    std::fs::write(old.join("ca.pem"), &both).unwrap();
    let secret = std::fs::read_to_string(a.dir.join("cluster-secret")).unwrap();
    let r = gtm_node::tls::Tls::load(
        &old.join("tls.pem"),
        &old.join("tls.key"),
        Some(&old.join("ca.pem")),
    )
    .unwrap()
    .peer_client(Duration::from_secs(5))
    .unwrap()
    .post(format!("{}/cluster/v1/report", b.api()))
    .header(gtm_cluster::SECRET_HEADER, secret.trim())
    .body("{}")
    .send()
    .await;
    assert!(r.is_err(), "gtm2 still accepts a CA1 client: {r:?}");
    assert!(!serves_certificate_of(&b, &ca1).await);

    // Remote previews are each device's first call through its client for
    // them, so a new connection: gtm2 lets gtm1 in only if gtm1 shows its
    // CA2 certificate, and gtm1 accepts gtm2 only if it trusts CA2, which
    // it did not at start; and the other way round. The write through the
    // follower is forwarded to the leader.
    preview_from_the_other_device(&a, &b).await;
    preview_from_the_other_device(&b, &a).await;
}

/// The names of the peers `p` shows, in its order, once every one has
/// reported.
fn peer_order(p: &Proc, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
        let peers = status["peers"].as_array().cloned().unwrap_or_default();
        if peers.len() == count && peers.iter().all(|p| p["reachable"] == true) {
            return peers
                .iter()
                .map(|p| p["device"].as_str().unwrap().to_string())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "peers never all reported: {status:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Devices are shown in the order of their names (the status of every
/// device, its table's columns), whatever their node ids and the order they
/// joined in, and keep their places when one leaves and joins again under
/// a new node id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_keep_their_order_across_a_rejoin() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.123.1");
    let c = Proc::start(root.path(), "gtm3", "dc1", "127.0.123.3");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.123.2");
    tokio::task::block_in_place(|| {
        a.ok(&["cluster", "init"]);
        c.join(&a);
        b.join(&a);
        a.apply_ok(&zone("192.0.2.1"));
    });
    until_answer(&b, "192.0.2.1").await;
    let header = |p: &Proc| {
        let text = p.ok(&["status"]);
        text.lines()
            .find(|l| l.starts_with("RECORD") && l.contains("gtm2"))
            .unwrap_or_else(|| panic!("{text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    tokio::task::block_in_place(|| {
        assert_eq!(peer_order(&a, 2), ["gtm2", "gtm3"]);
        assert_eq!(header(&a), ["RECORD", "gtm1", "gtm2", "gtm3"]);
        assert_eq!(peer_order(&c, 2), ["gtm1", "gtm2"]);
        let id = |p: &Proc| std::fs::read_to_string(p.dir.join("node-id")).unwrap();
        let before = id(&b);
        b.ok(&["cluster", "leave"]);
        b.join(&c);
        assert_ne!(id(&b), before, "a new node id");
        assert_eq!(peer_order(&a, 2), ["gtm2", "gtm3"]);
        assert_eq!(header(&a), ["RECORD", "gtm1", "gtm2", "gtm3"]);
        assert_eq!(peer_order(&c, 2), ["gtm1", "gtm2"]);
    });
}

/// `gtm cluster join` while the cluster elects its leader (here: none can
/// be elected until the stopped device is back) waits for the leader and
/// joins, instead of failing at once with "retry shortly".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_during_an_election_waits_for_the_leader() {
    let root = tempfile::tempdir().unwrap();
    let mut a = Proc::start(root.path(), "gtm1", "dc1", "127.0.122.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.122.2");
    let c = Proc::start(root.path(), "gtm3", "dc1", "127.0.122.3");
    tokio::task::block_in_place(|| {
        a.ok(&["cluster", "init"]);
        b.join(&a);
        a.apply_ok(&zone("192.0.2.1"));
    });
    until_answer(&b, "192.0.2.1").await;
    let token = a.ok(&["cluster", "token"]);
    // Two voters, one stopped: the other cannot be elected.
    a.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status: serde_json::Value =
            serde_json::from_str(&b.ok(&["cluster", "status", "--json"])).unwrap();
        if status["leader"].is_null() {
            break;
        }
        assert!(Instant::now() < deadline, "gtm2 still follows: {status:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let join = std::process::Command::new(env!("CARGO_BIN_EXE_gtm"))
        .arg("--data-dir")
        .arg(&c.dir)
        .args(["cluster", "join", &b.api(), "--token", token.trim()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::task::block_in_place(|| a.restart());
    let out = tokio::task::block_in_place(|| join.wait_with_output().unwrap());
    assert!(
        out.status.success(),
        "the join failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    until_answer(&c, "192.0.2.1").await;
}
