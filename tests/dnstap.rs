//! dnstap: a device's answered queries reach a Frame Streams reader
//! (fstrm_capture, over a Unix socket or TCP) or a file, and read back
//! with BIND's dnstap-read as AUTH_QUERY and AUTH_RESPONSE messages, with
//! the steering decision of a steered answer in `extra`. A reader that
//! stops reading never holds DNS back: its messages are dropped and
//! counted, and a reader started again is connected to.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use gtm_dns::dnstap::{
    frames::{self, CONTENT_TYPE, Control},
    message,
};
use gtm_model::node::DnstapSettings;
use hickory_server::proto::rr::RecordType;
use tokio::io::AsyncWriteExt;

use crate::support::*;

const CONFIG: &str = r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[domain]]
name = "tap.test"
nameservers = ["ns1.tap.test"]
mode = "datacenter"
dc_order = ["dc1", "dc2"]
dcs_to_select = 1

[[domain.record]]
name = "www"
type = "A"
max_answers = 2
addresses = [
  { ip = "192.0.2.10", dc = "dc1" },
  { ip = "192.0.2.11", dc = "dc1" },
  { ip = "192.0.2.20", dc = "dc2" },
]

[[domain.record]]
name = "static"
type = "TXT"
values = ["plain"]

[[domain.record]]
name = "after"
type = "TXT"
values = ["after"]
"#;

/// `[dnstap]` with one output and the rest by default.
fn dnstap(set: impl FnOnce(&mut DnstapSettings)) -> DnstapSettings {
    let mut d = DnstapSettings {
        unix: None,
        tcp: None,
        file: None,
        messages: vec![
            gtm_model::node::DnstapMessage::AuthQuery,
            gtm_model::node::DnstapMessage::AuthResponse,
        ],
        sample: None,
        buffer: None,
        identity: None,
    };
    set(&mut d);
    d
}

/// A sample of `/metrics`, 0 when absent.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn sent(d: &TestDevice) -> f64 {
    sample(
        &metrics(d).await,
        "gtm_dnstap_messages_total{result=\"sent\"}",
    )
}

async fn dropped(d: &TestDevice) -> f64 {
    sample(
        &metrics(d).await,
        "gtm_dnstap_messages_total{result=\"dropped\"}",
    )
}

/// `fstrm_capture` writing what it reads to a file, stopped by its PID.
struct Capture {
    child: Child,
    file: PathBuf,
}

impl Capture {
    fn start(binary: &Path, listen: &[&str], file: &Path) -> Self {
        let child = Command::new(binary)
            .args(["-t", "protobuf:dnstap.Dnstap"])
            .args(listen)
            .arg("-w")
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("fstrm_capture starts");
        Self {
            child,
            file: file.to_path_buf(),
        }
    }

    /// Stops it (SIGTERM: it closes its file) and waits for it, bounded.
    async fn stop(mut self) -> PathBuf {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signals a child this test started and has not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        until("fstrm_capture to exit", async || {
            self.child.try_wait().ok().flatten().is_some()
        })
        .await;
        self.file.clone()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dnstap-read -y FILE`: every message as YAML.
fn dnstap_read(binary: &Path, file: &Path) -> String {
    let out = Command::new(binary)
        .arg("-y")
        .arg(file)
        .output()
        .expect("dnstap-read runs");
    assert!(
        out.status.success(),
        "dnstap-read failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `extra` texts of a Frame Streams file's messages, decoded here.
fn extras(file: &Path) -> Vec<String> {
    let bytes = std::fs::read(file).expect("dnstap file");
    frames::data_frames(&bytes)
        .expect("a Frame Streams file")
        .into_iter()
        .map(|f| message::decode(f).expect("a dnstap message"))
        .filter_map(|m| m.extra)
        .map(|e| String::from_utf8(e.to_vec()).expect("text"))
        .collect()
}

/// Asks the steered name over UDP (plain, and with a client subnet) and
/// the static one over TCP.
async fn ask(d: &TestDevice) {
    let www = udp(d.v4(), &query("www.tap.test.", RecordType::A)).await;
    assert_eq!(answers(&www).len(), 2, "{www:?}");
    udp(
        d.v4(),
        &with_ecs(query("www.tap.test.", RecordType::A), "198.51.100.0/24"),
    )
    .await;
    tcp(d.v4(), &query("static.tap.test.", RecordType::TXT)).await;
}

/// What every capture of [`ask`] shows: both message types, both names,
/// and the decision of the steered answer.
fn check_capture(read: Option<&Path>, file: &Path) {
    if let Some(read) = read {
        let yaml = dnstap_read(read, file);
        assert!(yaml.contains("type: AUTH_QUERY"), "{yaml}");
        assert!(yaml.contains("type: AUTH_RESPONSE"), "{yaml}");
        assert!(yaml.contains("www.tap.test"), "{yaml}");
        assert!(yaml.contains("static.tap.test"), "{yaml}");
        assert!(yaml.contains("socket_protocol: UDP"), "{yaml}");
        assert!(yaml.contains("socket_protocol: TCP"), "{yaml}");
        assert!(yaml.contains("identity: test1"), "{yaml}");
    }
    let extras = extras(file);
    // The two steered answers, and nothing for the static one.
    assert_eq!(extras.len(), 2, "{extras:?}");
    let plain = &extras[0];
    assert!(
        plain.starts_with("gtm record=www.tap.test/A mode=datacenter client=127.0.0.1 "),
        "{plain}"
    );
    assert!(plain.contains(" dc=dc1 "), "{plain}");
    assert!(
        plain.contains(" answer=192.0.2.10,192.0.2.11 ")
            || plain.contains(" answer=192.0.2.11,192.0.2.10 "),
        "{plain}"
    );
    assert!(plain.ends_with(" kind=addresses reason=default"), "{plain}");
    let ecs = &extras[1];
    assert!(ecs.contains(" client=198.51.100.0/24 "), "{ecs}");
    assert!(ecs.ends_with(" reason=default scope=0"), "{ecs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_reader_gets_every_message_and_the_decision() {
    let (Some(capture), read) = (
        tool("fstrm_capture", "fstrm-bin"),
        tool("dnstap-read", "bind9-dnsutils"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("dnstap.sock");
    let file = tmp.path().join("capture.fstrm");
    let reader = Capture::start(&capture, &["-u", sock.to_str().unwrap()], &file);
    until("fstrm_capture's socket", async || sock.exists()).await;
    let d = TestDevice::start_set(CONFIG, |s| {
        s.dnstap = Some(dnstap(|t| t.unix = Some(sock.clone())));
    })
    .await;
    ask(&d).await;
    until("6 messages sent", async || sent(&d).await >= 6.0).await;
    let m = metrics(&d).await;
    assert_eq!(sample(&m, "gtm_dnstap_connected"), 1.0, "{m}");
    let status = api_get(&d, "/api/v1/status").await;
    let worker = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "dnstap")
        .cloned()
        .unwrap_or_else(|| panic!("no dnstap worker: {status}"));
    assert_eq!(worker["state"], "running", "{worker}");
    // The device's stop sends STOP and waits for FINISH.
    d.device.stop().await;
    let file = reader.stop().await;
    check_capture(read.as_deref(), &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_holds_every_message() {
    let read = tool("dnstap-read", "bind9-dnsutils");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("dnstap.fstrm");
    let d = TestDevice::start_set(CONFIG, |s| {
        s.dnstap = Some(dnstap(|t| t.file = Some(file.clone())));
    })
    .await;
    ask(&d).await;
    until("6 messages sent", async || sent(&d).await >= 6.0).await;
    d.device.stop().await;
    check_capture(read.as_deref(), &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_reader_gets_every_message() {
    let (Some(capture), read) = (
        tool("fstrm_capture", "fstrm-bin"),
        tool("dnstap-read", "bind9-dnsutils"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("capture.fstrm");
    // A port free now, for fstrm_capture to listen on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let reader = Capture::start(
        &capture,
        &["-a", "127.0.0.1", "-p", &port.to_string()],
        &file,
    );
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    until("fstrm_capture's port", async || {
        std::net::TcpStream::connect(addr).is_ok()
    })
    .await;
    let d = TestDevice::start_set(CONFIG, |s| {
        s.dnstap = Some(dnstap(|t| t.tcp = Some(addr)));
    })
    .await;
    ask(&d).await;
    until("6 messages sent", async || sent(&d).await >= 6.0).await;
    d.device.stop().await;
    let file = reader.stop().await;
    check_capture(read.as_deref(), &file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_reading_never_holds_dns_back_and_a_new_one_is_connected_to() {
    let (Some(capture), read) = (
        tool("fstrm_capture", "fstrm-bin"),
        tool("dnstap-read", "bind9-dnsutils"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("dnstap.sock");
    // A reader that makes the handshake, then never reads again.
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    let (hold, held) = tokio::sync::oneshot::channel::<()>();
    let stuck = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let ready = frames::read_control(&mut conn).await.unwrap();
        assert_eq!(ready.kind, Control::Ready);
        conn.write_all(&frames::control(Control::Accept, Some(CONTENT_TYPE)))
            .await
            .unwrap();
        let start = frames::read_control(&mut conn).await.unwrap();
        assert_eq!(start.kind, Control::Start);
        let _ = held.await;
        drop(conn);
    });
    let d = TestDevice::start_set(CONFIG, |s| {
        s.dnstap = Some(dnstap(|t| {
            t.unix = Some(sock.clone());
            t.buffer = Some(16);
        }));
    })
    .await;
    until("the handshake", async || {
        sample(&metrics(&d).await, "gtm_dnstap_connected") == 1.0
    })
    .await;
    let mut answered = 0;
    for _ in 0..2000 {
        let m = udp(d.v4(), &query("www.tap.test.", RecordType::A)).await;
        if answers(&m).len() == 2 {
            answered += 1;
        }
    }
    assert_eq!(answered, 2000);
    until("messages dropped", async || dropped(&d).await > 0.0).await;

    // The reader goes; a real one takes its socket and is connected to.
    let _ = hold.send(());
    stuck.await.unwrap();
    std::fs::remove_file(&sock).unwrap();
    let file = tmp.path().join("capture.fstrm");
    let reader = Capture::start(&capture, &["-u", sock.to_str().unwrap()], &file);
    until("a second connection", async || {
        sample(&metrics(&d).await, "gtm_dnstap_connects_total") >= 2.0
            && sample(&metrics(&d).await, "gtm_dnstap_connected") == 1.0
    })
    .await;
    let before = sent(&d).await;
    tcp(d.v4(), &query("after.tap.test.", RecordType::TXT)).await;
    until("the new reader's messages", async || {
        sent(&d).await >= before + 2.0
    })
    .await;
    d.device.stop().await;
    let file = reader.stop().await;
    if let Some(read) = read {
        let yaml = dnstap_read(&read, &file);
        assert!(yaml.contains("after.tap.test"), "{yaml}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_moves_dnstap_to_its_new_output_and_the_old_one_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = (
        tmp.path().join("first.fstrm"),
        tmp.path().join("second.fstrm"),
    );
    let d = TestDevice::start_set(CONFIG, |s| {
        s.dnstap = Some(dnstap(|t| t.file = Some(first.clone())));
    })
    .await;
    tcp(d.v4(), &query("static.tap.test.", RecordType::TXT)).await;
    until("2 messages sent", async || sent(&d).await >= 2.0).await;
    let mut settings = TestDevice::settings(d.dir.path(), None);
    settings.dnstap = Some(dnstap(|t| {
        t.file = Some(second.clone());
        t.messages = vec![gtm_model::node::DnstapMessage::AuthResponse];
    }));
    d.device.reload(&settings).unwrap();
    until("the second file", async || {
        second.exists() && sample(&metrics(&d).await, "gtm_dnstap_connects_total") >= 2.0
    })
    .await;
    tcp(d.v4(), &query("after.tap.test.", RecordType::TXT)).await;
    until("3 messages sent", async || sent(&d).await >= 3.0).await;
    // Off: the worker idles, the output is closed.
    settings.dnstap = None;
    d.device.reload(&settings).unwrap();
    let status = api_get(&d, "/api/v1/status").await;
    let worker = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "dnstap")
        .cloned()
        .unwrap();
    assert_eq!(worker["state"], "idle", "{worker}");
    // Each file is whole (START ... STOP) with its own messages.
    let names = |file: &Path| -> Vec<String> {
        let bytes = std::fs::read(file).unwrap();
        assert!(
            bytes.ends_with(&frames::control(Control::Stop, None)),
            "{file:?}"
        );
        frames::data_frames(&bytes)
            .unwrap()
            .into_iter()
            .map(|f| {
                let m = message::decode(f).unwrap().message.unwrap();
                let wire = m.query_message.or(m.response_message).unwrap();
                let q = hickory_server::proto::op::Message::from_vec(&wire).unwrap();
                format!("{} {}", m.r#type, q.queries[0].name())
            })
            .collect()
    };
    until("the second file closed", async || {
        std::fs::read(&second)
            .unwrap()
            .ends_with(&frames::control(Control::Stop, None))
    })
    .await;
    assert_eq!(names(&first), ["1 static.tap.test.", "2 static.tap.test."]);
    assert_eq!(names(&second), ["2 after.tap.test."]);
    d.device.stop().await;
}
