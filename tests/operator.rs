//! The operator's commands against a running device: Test now, preview,
//! logs with filters and --follow, drains, manual checks, failback resume.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use hickory_server::proto::rr::RecordType;

use crate::{backends::*, support::*};

fn config(port: u16) -> String {
    format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "web"
type = "http"
port = {port}
interval = "1h"

[[check]]
name = "maint"
type = "manual"

[[scenario]]
name = "dc1-maint"
condition = "maint"

[[domain]]
name = "example.test"
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "127.0.0.2" }}, {{ ip = "127.0.0.3" }}]

[[domain.record]]
name = "dr"
type = "A"
mode = "disaster-recovery"
dr_condition = "scenario:dc1-maint"
dr_on_no_healthy = false
failback = "manual"
addresses = [
  {{ ip = "192.0.2.20", dc = "dc1" }},
  {{ ip = "198.51.100.20", dc = "dc2" }},
]
"#
    )
}

async fn www(d: &TestDevice, name: &str) -> Vec<String> {
    let mut a = answers(&udp(d.v4(), &query(name, RecordType::A)).await);
    a.sort();
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_now_runs_one_probe_and_saves_nothing() {
    let mut web = HttpBackend::start_at("127.0.0.2:0".parse().unwrap()).await;
    let d = TestDevice::start(&config(web.addr.port())).await;
    let before = d.device.engine.events().len();

    let ok = tokio::task::block_in_place(|| {
        run_gtm(&d, &["check", "test", "web", "--address", "127.0.0.2"])
    });
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    assert!(
        ok.stdout.starts_with("web@127.0.0.2: OK (status 200) in "),
        "{}",
        ok.stdout
    );
    let device = d.device.engine.device().to_string();
    assert!(
        ok.stdout
            .trim_end()
            .ends_with(&format!(" ms; probed 127.0.0.2 from {device} (dc1)")),
        "{}",
        ok.stdout
    );

    web.stop().await;
    let down = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["check", "test", "web", "--address", "127.0.0.2", "--json"],
        )
    });
    assert_eq!(down.code, Some(1));
    let r: serde_json::Value = serde_json::from_str(&down.stdout).unwrap();
    assert_eq!(r["reason"], "connect refused");
    assert_eq!(r["ok"], false);

    let no_address = tokio::task::block_in_place(|| run_gtm(&d, &["check", "test", "web"]));
    assert_eq!(no_address.code, Some(2));
    assert!(
        no_address
            .stderr
            .contains("is a template: give the address"),
        "{}",
        no_address.stderr
    );
    let manual = tokio::task::block_in_place(|| run_gtm(&d, &["check", "test", "maint"]));
    assert_eq!(manual.code, Some(2));

    let after: Vec<String> = d
        .device
        .engine
        .events()
        .into_iter()
        .skip(before)
        .map(|e| e.text)
        .collect();
    assert!(
        after.is_empty(),
        "Test now logs and changes nothing: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drains_take_addresses_and_datacenters_out_and_back() {
    let d = TestDevice::start(&config(9)).await;
    assert_eq!(
        www(&d, "www.example.test.").await,
        ["127.0.0.2", "127.0.0.3"]
    );

    let r = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &[
                "record",
                "drain",
                "127.0.0.2",
                "--record",
                "www.example.test/A",
            ],
        )
    });
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(www(&d, "www.example.test.").await, ["127.0.0.3"]);
    let preview = tokio::task::block_in_place(|| {
        run_gtm(&d, &["record", "preview", "www.example.test", "A"])
    });
    assert!(preview.stdout.contains("drained"), "{}", preview.stdout);
    let preview = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["record", "preview", "www.example.test", "A", "--json"],
        )
    });
    let p: serde_json::Value = serde_json::from_str(&preview.stdout).unwrap();
    assert_eq!(p["status"], "ok", "a drained address is not a record down");
    tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &[
                "record",
                "undrain",
                "127.0.0.2",
                "--record",
                "www.example.test/A",
            ],
        )
    });
    assert_eq!(
        www(&d, "www.example.test.").await,
        ["127.0.0.2", "127.0.0.3"]
    );

    let unknown = tokio::task::block_in_place(|| run_gtm(&d, &["record", "drain", "10.9.9.9"]));
    assert_eq!(
        unknown.code,
        Some(5),
        "an address in no record is not found"
    );

    // Draining the Main datacenter empties the Main group; with
    // dr_on_no_healthy off and the scenario passive, nothing healthy is left.
    tokio::task::block_in_place(|| run_gtm(&d, &["dc", "drain", "dc1", "--force"]));
    assert!(www(&d, "dr.example.test.").await.is_empty());
    tokio::task::block_in_place(|| run_gtm(&d, &["dc", "undrain", "dc1"]));
    assert_eq!(www(&d, "dr.example.test.").await, ["192.0.2.20"]);
    let ops: Vec<String> = d
        .device
        .engine
        .events()
        .into_iter()
        .filter(|e| serde_json::to_value(e.kind).unwrap() == "operator")
        .map(|e| e.text)
        .collect();
    // One event per change, naming who made it.
    assert!(ops.iter().all(|t| t.contains(" (admin on ")), "{ops:?}");
    let ops: Vec<&str> = ops
        .iter()
        .filter_map(|t| t.rsplit_once(" (admin on ").map(|(what, _)| what))
        .collect();
    assert_eq!(
        ops,
        [
            "drained 127.0.0.2 of www.example.test/A",
            "undrained 127.0.0.2 of www.example.test/A",
            "drained datacenter dc1",
            "undrained datacenter dc1"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_failback_holds_dr_until_an_operator_resumes() {
    let d = TestDevice::start(&config(9)).await;
    assert_eq!(www(&d, "dr.example.test.").await, ["192.0.2.20"]);
    // Nothing is held yet: a resume is refused and logs nothing.
    let early =
        tokio::task::block_in_place(|| run_gtm(&d, &["record", "resume", "dr.example.test", "A"]));
    assert_eq!(early.code, Some(2), "{}", early.stderr);
    assert!(
        early
            .stderr
            .contains("not held by manual failback on any device"),
        "{}",
        early.stderr
    );
    let logs = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--kind", "operator"]));
    assert!(!logs.stdout.contains("failback resumed"), "{}", logs.stdout);
    let set = tokio::task::block_in_place(|| run_gtm(&d, &["check", "set", "maint", "ok"]));
    assert_eq!(set.code, Some(0), "{}", set.stderr);
    assert_eq!(
        www(&d, "dr.example.test.").await,
        ["198.51.100.20"],
        "DR on"
    );
    tokio::task::block_in_place(|| run_gtm(&d, &["check", "set", "maint", "error"]));
    assert_eq!(
        www(&d, "dr.example.test.").await,
        ["198.51.100.20"],
        "held by manual failback"
    );
    let preview = tokio::task::block_in_place(|| {
        run_gtm(&d, &["record", "preview", "dr.example.test", "A", "--json"])
    });
    let p: serde_json::Value = serde_json::from_str(&preview.stdout).unwrap();
    assert_eq!(p["status"], "dr");
    assert_eq!(p["label"], "DR");
    assert!(
        p["decision"]
            .as_str()
            .unwrap()
            .contains("held by manual failback")
    );
    assert_eq!(p["switchovers"][0]["text"], "dr.example.test/A: DR is on");
    let status: serde_json::Value = serde_json::from_str(
        &tokio::task::block_in_place(|| run_gtm(&d, &["status", "--json"])).stdout,
    )
    .unwrap();
    let held = status["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["record"] == "dr.example.test/A")
        .unwrap();
    assert_eq!(held["held"], true, "{held}");

    let resume =
        tokio::task::block_in_place(|| run_gtm(&d, &["record", "resume", "dr.example.test", "A"]));
    assert_eq!(resume.code, Some(0), "{}", resume.stderr);
    assert_eq!(
        www(&d, "dr.example.test.").await,
        ["192.0.2.20"],
        "back to Main"
    );

    let not_manual = tokio::task::block_in_place(|| run_gtm(&d, &["check", "set", "web", "ok"]));
    assert_eq!(not_manual.code, Some(2));
    assert!(
        not_manual
            .stderr
            .contains("only manual checks are set by an operator"),
        "{}",
        not_manual.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_filter_and_follow() {
    let d = TestDevice::start(&config(9)).await;
    tokio::task::block_in_place(|| run_gtm(&d, &["check", "set", "maint", "ok"]));

    let records = tokio::task::block_in_place(|| {
        run_gtm(&d, &["logs", "--record", "dr.example.test/A", "--json"])
    });
    let lines: Vec<serde_json::Value> = records
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    assert!(
        lines.iter().all(|e| e["object"] == "dr.example.test/A"),
        "{lines:?}"
    );
    let checks = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--kind", "check"]));
    assert!(
        checks
            .stdout
            .contains("check maint: Preparing → OK (set by admin on "),
        "{}",
        checks.stdout
    );
    assert!(!checks.stdout.contains("DR is on"));
    let recent = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--since", "1h"]));
    assert!(
        recent.stdout.contains("test1"),
        "every line names the device"
    );

    // --follow prints the backlog, then new events as they happen.
    let mut follow = Command::new(env!("CARGO_BIN_EXE_gtm"))
        .arg("--data-dir")
        .arg(d.dir.path())
        .args(["logs", "--follow", "--kind", "scenario"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(follow.stdout.take().unwrap()).lines();
    let first = tokio::task::block_in_place(|| out.next().unwrap().unwrap());
    assert!(
        first.ends_with("scenario dc1-maint: passive → active"),
        "{first}"
    );
    d.device.engine.set_check(
        &gtm_model::condition::CheckRef {
            name: "maint".into(),
            address: None,
        },
        gtm_resolve::CheckState::Error,
        "test",
    );
    let next = tokio::task::block_in_place(|| out.next().unwrap().unwrap());
    assert!(
        next.ends_with("scenario dc1-maint: active → passive"),
        "{next}"
    );
    follow.kill().unwrap();
    follow.wait().unwrap();
}

/// The preview says why each address is healthy or not: its check's state
/// and last result with the time of the change, or `static`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_says_why_each_address_is_healthy_or_not() {
    let d = TestDevice::start(
        r#"
[[datacenter]]
name = "dc1"

[[check]]
name = "closed"
type = "tcp"
port = 9
interval = "500ms"

[[domain]]
name = "why.test"
nameservers = ["ns1.why.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "127.0.0.2", hc = "check:closed" }, { ip = "127.0.0.3" }]
"#,
    )
    .await;
    let preview = || {
        let out = tokio::task::block_in_place(|| {
            run_gtm(&d, &["record", "preview", "www.why.test", "A", "--json"])
        });
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let p = loop {
        let p = preview();
        if p["addresses"][0]["reason"]
            .as_str()
            .is_some_and(|w| w.contains(": Error ("))
        {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "never Error: {p}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let why = p["addresses"][0]["reason"].as_str().unwrap();
    assert_eq!(p["addresses"][0]["health"], "unhealthy", "{p}");
    assert!(why.starts_with("check closed"), "{why}");
    assert!(why.contains(" since 20"), "{why}");
    assert_eq!(
        p["addresses"][1]["reason"], "static: always a candidate",
        "{p}"
    );
    // The table says it too.
    let text =
        tokio::task::block_in_place(|| run_gtm(&d, &["record", "preview", "www.why.test", "A"]));
    assert!(text.stdout.contains("WHY"), "{}", text.stdout);
    assert!(text.stdout.contains(why), "{}", text.stdout);
}

/// Every event has a severity: DR is a warning, a check that recovers is
/// information. The CLI and the API filter by it (that severity or
/// higher), the CLI prints it, and the API exports a page as CSV.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_carry_a_severity_and_export_as_csv() {
    let d = TestDevice::start(&config(9)).await;
    // The maintenance scenario turns DR on for dr.example.test.
    tokio::task::block_in_place(|| run_gtm(&d, &["check", "set", "maint", "ok"]));

    let all = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--json"]));
    let events: Vec<serde_json::Value> = all
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let severity_of = |suffix: &str| {
        events
            .iter()
            .find(|e| e["text"].as_str().unwrap().ends_with(suffix))
            .unwrap_or_else(|| panic!("no event ending {suffix:?}: {events:?}"))["severity"]
            .clone()
    };
    assert_eq!(severity_of("dr.example.test/A: DR is on"), "warning");
    assert_eq!(severity_of("dr.example.test/A: status OK → DR"), "warning");
    assert_eq!(severity_of("scenario dc1-maint: passive → active"), "info");

    let warnings = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--severity", "warning"]));
    assert_eq!(warnings.code, Some(0), "{}", warnings.stderr);
    assert!(
        warnings
            .stdout
            .contains("  warning  dr.example.test/A: DR is on"),
        "{}",
        warnings.stdout
    );
    assert!(
        !warnings.stdout.contains("check maint"),
        "{}",
        warnings.stdout
    );
    let wrong = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--severity", "notice"]));
    assert_eq!(wrong.code, Some(2));
    assert!(
        wrong
            .stderr
            .contains("severity \"notice\" is not one of info, warning, error"),
        "{}",
        wrong.stderr
    );

    let errors = api_get(&d, "/api/v1/events?severity=error").await;
    assert!(
        errors
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["severity"] == "error"),
        "{errors}"
    );

    let http = gtm_node::tls::http_client(None, None).unwrap();
    let get = |path: &str| {
        http.get(format!("http://{}{path}", d.device.api_addr))
            .bearer_auth(&d.device.token)
            .send()
    };
    let csv = get("/api/v1/events?format=csv&kind=record").await.unwrap();
    assert_eq!(csv.status(), 200);
    assert_eq!(
        csv.headers()["content-type"].to_str().unwrap(),
        "text/csv; charset=utf-8"
    );
    let text = csv.text().await.unwrap();
    let mut lines = text.split("\r\n");
    assert_eq!(lines.next(), Some("time,device,severity,kind,object,text"));
    let dr = lines
        .clone()
        .find(|l| l.ends_with(",dr.example.test/A: DR is on"))
        .unwrap_or_else(|| panic!("{text}"));
    let fields: Vec<&str> = dr.split(',').collect();
    assert_eq!(
        fields[1..5],
        ["test1", "warning", "record", "dr.example.test/A"],
        "{dr}"
    );
    // Milliseconds: `2026-11-30 21:04:05.123Z`.
    assert_eq!(fields[0].len(), "2026-11-30 21:04:05.123Z".len(), "{dr}");
    assert!(
        lines.all(|l| l.is_empty() || l.contains(",record,")),
        "{text}"
    );

    let stream = get("/api/v1/events?format=csv&follow=true").await.unwrap();
    assert_eq!(stream.status(), 400);
    let bad = get("/api/v1/events?severity=notice").await.unwrap();
    assert_eq!(bad.status(), 400);
}

/// `cluster init` carries the device's drains, manual checks' states and
/// accounts into the new cluster, and the GTM Logs go on logging operator
/// actions after it (the cluster numbers its notes from 1 again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_init_keeps_drains_checks_and_accounts() {
    let d = TestDevice::start(&config(9)).await;
    let ok = |args: &[&str]| {
        let r = tokio::task::block_in_place(|| run_gtm(&d, args));
        assert_eq!(r.code, Some(0), "gtm {args:?}: {}", r.stderr);
        r.stdout
    };
    ok(&[
        "record",
        "drain",
        "127.0.0.2",
        "--record",
        "www.example.test/A",
    ]);
    ok(&["check", "set", "maint", "ok"]);
    ok(&["token", "create", "ci", "--role", "operator"]);
    for i in 0..4 {
        // More notes than the new cluster will have when the next comes.
        ok(&[
            "dc",
            if i % 2 == 0 { "drain" } else { "undrain" },
            "dc2",
            "--force",
        ]);
    }
    ok(&["cluster", "init"]);
    assert_eq!(www(&d, "www.example.test.").await, ["127.0.0.3"]);
    let drains = ok(&["record", "drains", "--json"]);
    assert!(drains.contains("127.0.0.2"), "{drains}");
    let checks = ok(&["check", "list", "--json"]);
    let maint = serde_json::from_str::<serde_json::Value>(&checks).unwrap();
    let state = maint
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "maint")
        .map(|c| c["state"].to_string())
        .unwrap_or_default();
    assert!(state.contains("OK"), "maint after init: {state}");
    assert!(ok(&["token", "list"]).contains("ci"));
    // An action after init is logged.
    ok(&[
        "record",
        "undrain",
        "127.0.0.2",
        "--record",
        "www.example.test/A",
    ]);
    let logs = ok(&["logs", "--kind", "operator", "-n", "5"]);
    assert!(
        logs.contains("undrained 127.0.0.2 of www.example.test/A (admin on test1)"),
        "{logs}"
    );
    assert_eq!(
        www(&d, "www.example.test.").await,
        ["127.0.0.2", "127.0.0.3"]
    );
}
