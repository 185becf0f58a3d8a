//! The `gtm` binary as an operator runs it.

use std::process::Command;

use crate::support::*;

fn gtm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gtm"))
}

#[test]
fn config_check_lists_every_error_with_its_path_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.1\" }, { ip = \"192.0.2.2\" }, { ip = \"192.0.2.3\", hc = \"scenario:dc2-up\" }]\n",
    )
    .unwrap();
    let out = gtm().args(["config", "check"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "bad input exits 2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "domain example.test / record www A / address 3: unknown scenario \"dc2-up\""
        ),
        "{stderr}"
    );

    let good = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.toml");
    let out = gtm().args(["config", "check"]).arg(&good).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two syntax errors in two domains and two invalid IPs in two others: one
/// run lists all four, each with its line, value and object path.
#[test]
fn config_check_lists_every_syntax_and_type_error_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    let domain = |name: &str, ip: &str| {
        format!(
            "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\n\n\
             [[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [\n  {{ ip = \"192.0.2.1\" }},\n  {{ ip = \"{ip}\" }},\n]\n\n"
        )
    };
    let text = [
        // Line 4: `= =`.
        domain("a.test", "192.0.2.2")
            .replace("\n\n[[domain.record]]", "\nttl = = 5\n[[domain.record]]"),
        // Line 14: an unclosed string.
        domain("b.test", "192.0.2.2").replace("name = \"b.test\"", "name = \"b.test"),
        // Line 34.
        domain("c.test", "192.0.2.300"),
        // Line 46.
        domain("d.test", "2001:db8::zz"),
    ]
    .concat();
    std::fs::write(&file, &text).unwrap();
    let out = gtm().args(["config", "check"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "bad input exits 2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("bad.toml: line "))
        .collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    assert!(
        lines[0].contains("bad.toml: line 4: domain a.test: "),
        "{stderr}"
    );
    assert!(
        lines[1].contains("bad.toml: line 14: domain b.test: "),
        "{stderr}"
    );
    assert!(
        lines[2].ends_with(
            "bad.toml: line 34: domain c.test / record www A / address 2: ip: \"192.0.2.300\" is not an IP address"
        ),
        "{stderr}"
    );
    assert!(
        lines[3].ends_with(
            "bad.toml: line 46: domain d.test / record www A / address 2: ip: \"2001:db8::zz\" is not an IP address"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn config_apply_shows_the_diff_and_export_prints_it_back() {
    let d = TestDevice::start(ZONE).await;
    let data = d.dir.path().to_path_buf();
    let file = data.join("new.toml");
    let changed = ZONE
        .replace("{ ip = \"192.0.2.70\" }", "{ ip = \"192.0.2.71\" }")
        .replace("ttl = 30\nmain_dc", "ttl = 3600\nmain_dc");
    std::fs::write(&file, &changed).unwrap();

    let run = |args: &[&str]| {
        let out = gtm()
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let file_s = file.to_str().unwrap();
    let (code, stdout, stderr) =
        tokio::task::block_in_place(|| run(&["config", "apply", "--dry-run", file_s]));
    assert_eq!(code, Some(0), "{stderr}");
    // Field by field: the domain's key, an address replaced in a record.
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "~ domain example.test: ttl 30 → 3600",
            "+ address 192.0.2.71 of record *.wild.example.test/A",
            "- address 192.0.2.70 of record *.wild.example.test/A",
            "dry run: nothing applied",
            // And what each device would answer.
            "answers on every device:",
            "test1:",
            "  *.wild.example.test/A: 192.0.2.70 → 192.0.2.71",
        ],
        "{stdout}"
    );
    let r = udp(
        d.v4(),
        &query(
            "x.wild.example.test.",
            hickory_server::proto::rr::RecordType::A,
        ),
    )
    .await;
    assert_eq!(answers(&r), ["192.0.2.70"], "a dry run changes nothing");

    let (code, stdout, stderr) = tokio::task::block_in_place(|| run(&["config", "apply", file_s]));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("applied as version 2"), "{stdout}");
    let r = udp(
        d.v4(),
        &query(
            "x.wild.example.test.",
            hickory_server::proto::rr::RecordType::A,
        ),
    )
    .await;
    assert_eq!(answers(&r), ["192.0.2.71"]);

    let (code, exported, _) = tokio::task::block_in_place(|| run(&["config", "export"]));
    assert_eq!(code, Some(0));
    assert_eq!(
        gtm_model::parse(&exported).unwrap(),
        gtm_model::parse(&changed).unwrap(),
        "export prints the applied configuration back"
    );

    // An invalid file is refused whole.
    std::fs::write(
        &file,
        ZONE.replace(
            "hc = \"check:web\" },\n  { ip = \"198.51",
            "hc = \"check:nope\" },\n  { ip = \"198.51",
        ),
    )
    .unwrap();
    let (code, _, stderr) = tokio::task::block_in_place(|| run(&["config", "apply", file_s]));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("unknown check \"nope\""), "{stderr}");
    let r = udp(
        d.v4(),
        &query(
            "x.wild.example.test.",
            hickory_server::proto::rr::RecordType::A,
        ),
    )
    .await;
    assert_eq!(answers(&r), ["192.0.2.71"], "nothing half-applied");

    let (code, stdout, _) = tokio::task::block_in_place(|| run(&["status"]));
    assert_eq!(code, Some(0));
    assert!(stdout.contains("dr.example.test/A"), "{stdout}");
}

#[test]
fn geoip_import_refuses_a_corrupt_file_and_keeps_the_old_one() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = rt.block_on(TestDevice::start(ZONE));
    let data = d.dir.path().to_path_buf();
    let bad = data.join("bad.mmdb");
    std::fs::write(&bad, b"garbage").unwrap();
    let good = data.join("good.mmdb");
    crate::geo::write_mmdb(&good);
    let run = |args: &[&str]| {
        gtm()
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .output()
            .unwrap()
    };

    let out = run(&["geoip", "import", good.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["geoip", "import", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the current database stays"));
    let out = run(&["geoip", "lookup", "81.2.69.1"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("DE") && stdout.contains("EU"), "{stdout}");
    // The network that placed it, written whole.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("network    81.2.") && l.contains('/')),
        "{stdout}"
    );
    rt.block_on(d.device.stop());
}

/// A device whose DNS address another program holds refuses to start, and
/// says which address.
#[test]
fn serve_refuses_to_start_without_its_dns_listener() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node.toml");
    std::fs::write(
        &node,
        format!(
            "name = \"n1\"\ndatacenter = \"dc1\"\ndata_dir = \"{}\"\ndns_listen = [\"{addr}\"]\napi_listen = \"127.0.0.1:0\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = gtm()
        .args(["serve", "--config"])
        .arg(&node)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen for DNS over UDP on {addr}")),
        "{stderr}"
    );
}

/// Test now of a check that is not saved (`--file`, `-` for stdin): probed
/// once against a real loopback backend, and saved nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_test_probes_a_check_from_a_file_and_saves_nothing() {
    use crate::backends::*;
    let web = HttpBackend::start_at("127.0.0.2:0".parse().unwrap()).await;
    let port = web.addr.port();
    let d = TestDevice::start(ZONE).await;
    let version = d.device.engine.config();
    let before = d.device.engine.events().len();
    let file = d.dir.path().join("check.toml");
    std::fs::write(
        &file,
        format!("type = \"http\"\nport = {port}\ninterval = \"1h\"\n"),
    )
    .unwrap();
    let file_s = file.to_str().unwrap();

    let ok = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["check", "test", "--file", file_s, "--address", "127.0.0.2"],
        )
    });
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    assert!(
        ok.stdout
            .starts_with("unsaved@127.0.0.2: OK (status 200) in "),
        "{}",
        ok.stdout
    );

    // From standard input, a TCP check of the same port, named.
    let stdin = tokio::task::block_in_place(|| {
        let mut child = gtm()
            .arg("--data-dir")
            .arg(d.dir.path())
            .args([
                "check",
                "test",
                "--file",
                "-",
                "--address",
                "127.0.0.2",
                "--json",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("name = \"tcp-new\"\ntype = \"tcp\"\nport = {port}\n").as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    });
    let stdout = String::from_utf8_lossy(&stdin.stdout);
    assert_eq!(
        stdin.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stdin.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["check"], "tcp-new@127.0.0.2");
    assert_eq!(r["ok"], true);

    // A wrong key is refused by the device with its name; nothing probed.
    std::fs::write(&file, "type = \"http\"\nprot = 80\n").unwrap();
    let bad = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["check", "test", "--file", file_s, "--address", "127.0.0.2"],
        )
    });
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("prot"), "{}", bad.stderr);
    // A NAME and --file together are refused before anything is sent.
    let both =
        tokio::task::block_in_place(|| run_gtm(&d, &["check", "test", "web", "--file", file_s]));
    assert_eq!(both.code, Some(2), "{}", both.stderr);

    assert_eq!(d.device.engine.config(), version, "Test now saves nothing");
    // ZONE's own check logs as it starts; nothing names the tested checks.
    let tested: Vec<String> = d
        .device
        .engine
        .events()
        .into_iter()
        .skip(before)
        .map(|e| e.text)
        .filter(|t| t.contains("unsaved") || t.contains("tcp-new"))
        .collect();
    assert!(tested.is_empty(), "Test now logs nothing: {tested:?}");
    assert!(
        d.device
            .engine
            .checks()
            .iter()
            .all(|c| !c.check.starts_with("unsaved") && !c.check.starts_with("tcp-new")),
        "no instance of a tested check"
    );
}

/// `--record` of a drain is NAME/TYPE: a name alone is refused before the
/// device is asked (it would answer "not found").
#[test]
fn record_drain_without_a_type_is_refused_as_bad_input() {
    let out = gtm()
        .args([
            "--api",
            "http://127.0.0.1:9",
            "--api-token",
            "x",
            "record",
            "drain",
            "192.0.2.10",
            "--record",
            "api.example.test",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("expected NAME/TYPE, e.g. www.example.test/A, not \"api.example.test\""),
        "{stderr}"
    );
}

/// Continues a process stopped with SIGSTOP when dropped, so a failed
/// assertion never leaves it stopped.
struct Stopped(u32);

impl Stopped {
    fn stop(pid: u32) -> Self {
        assert_ne!(pid, 0, "no process to stop");
        // SAFETY: a signal to the PID of a child this test started and has
        // not reaped (its `Proc` owns it until the end of the test).
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGSTOP);
        }
        Self(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `stop`: the same child, not reaped yet.
        unsafe {
            libc::kill(self.0 as libc::pid_t, libc::SIGCONT);
        }
    }
}

/// The 32 hex digits that follow `command id is ` in `text`.
fn command_id(text: &str) -> Option<String> {
    let (_, rest) = text.split_once("command id is ")?;
    let id: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    (id.len() == 32).then_some(id)
}

#[test]
fn a_stopped_device_fails_a_read_as_unreachable_and_a_write_as_outcome_unknown() {
    let root = tempfile::tempdir().unwrap();
    let p = crate::cluster::Proc::start(root.path(), "gtm1", "dc1", "127.0.213.1");
    let file = root.path().join("dc3.toml");
    std::fs::write(&file, "country = \"FR\"\ncontinent = \"EU\"\n").unwrap();
    let file = file.to_str().unwrap();

    let stopped = Stopped::stop(p.pid());
    let read = p.gtm(&["--timeout", "1s", "dc", "list"]);
    let stderr = String::from_utf8_lossy(&read.stderr);
    assert_eq!(read.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("http://127.0.213.1:8053 did not answer GET /api/v1/datacenters within 1s"),
        "the device, the route and the deadline: {stderr}"
    );
    assert!(
        command_id(&stderr).is_none(),
        "a read has no command: {stderr}"
    );

    let write = p.gtm(&["--timeout", "1s", "dc", "put", "dc3", "--file", file]);
    let stderr = String::from_utf8_lossy(&write.stderr);
    assert_eq!(write.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains("did not answer PATCH /api/v1/datacenters/dc3 within 1s"),
        "{stderr}"
    );
    let id = command_id(&stderr).unwrap_or_else(|| panic!("no command id: {stderr}"));
    assert!(
        stderr.contains(&format!("gtm command status {id}")),
        "how to learn its fate: {stderr}"
    );
    drop(stopped);

    // Continued, the device answers again; what became of the write is
    // what the device's state says: applied, with dc3 there, or not.
    let shown = p.gtm(&["dc", "show", "dc3"]);
    let fate = p.ok(&["command", "status", &id]);
    match shown.status.code() {
        Some(0) => assert!(
            fate.contains(&format!("command {id}: applied as version")),
            "dc3 is there: {fate}"
        ),
        Some(5) => assert!(
            fate.contains(&format!("command {id}: applied"))
                || fate.contains(&format!("command {id}: unknown on this device")),
            "{fate}"
        ),
        code => panic!(
            "dc show: {code:?} {}",
            String::from_utf8_lossy(&shown.stderr)
        ),
    }
    // Sent again (a command of its own), the write applies, or changes
    // nothing when the first did.
    let again = p.gtm(&["dc", "put", "dc3", "--file", file]);
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    p.ok(&["dc", "show", "dc3"]);
}

#[test]
fn nothing_listening_is_unreachable_for_a_read_and_a_write() {
    // A port just freed: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let api = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dc3.toml");
    std::fs::write(&file, "country = \"FR\"\n").unwrap();
    for args in [
        &["dc", "list"][..],
        &["dc", "put", "dc3", "--file", file.to_str().unwrap()][..],
    ] {
        let out = gtm()
            .args(["--api", &api, "--api-token", "t", "--timeout", "5s"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot reach the device at {api}")),
            "{stderr}"
        );
        assert!(command_id(&stderr).is_none(), "nothing was sent: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_made_under_a_client_id_is_applied_once_and_found_by_it() {
    let d = TestDevice::start(ZONE).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let url = |path: &str| format!("http://{}{path}", d.device.api_addr);
    let id = "0123456789abcdef0123456789abcdef";
    let patch = |country: &str, id: &str| {
        http.patch(url("/api/v1/datacenters/dc3"))
            .bearer_auth(&d.device.token)
            .header("x-gtm-command", id)
            .json(&serde_json::json!({ "country": country }))
            .send()
    };
    let first: serde_json::Value = patch("FR", id).await.unwrap().json().await.unwrap();
    assert_eq!(first["applied"], true, "{first}");
    // The same id again is the same command, delivered twice: the first
    // outcome, and nothing applied a second time.
    let again: serde_json::Value = patch("DE", id).await.unwrap().json().await.unwrap();
    assert_eq!(again, first);
    let dc = api_get(&d, "/api/v1/datacenters/dc3").await;
    assert_eq!(dc["country"], "FR", "{dc}");
    let fate = api_get(&d, &format!("/api/v1/commands/{id}")).await;
    assert_eq!(fate["status"], "applied", "{fate}");
    assert_eq!(fate["version"], first["version"], "{fate}");

    let refused = patch("DE", "not-an-id").await.unwrap();
    assert_eq!(refused.status(), 400);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "bad-request", "{body}");
    let dc = api_get(&d, "/api/v1/datacenters/dc3").await;
    assert_eq!(dc["country"], "FR", "nothing done: {dc}");
}
