//! Health from outside the device's own probes (docs/health.md, "Inputs"):
//! a real Prometheus scraping a real exporter drives a Prometheus check; a
//! real Alertmanager posts to the receiver of a real pair; backends post
//! to a push check through either device, and its silence is an error; a
//! slow backend is down with `max_latency`.

use std::{
    net::SocketAddr,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use hickory_server::proto::rr::RecordType;

use crate::{
    backends::*,
    cluster::{Proc, pair},
    support::*,
};

fn start_daemon(binary: &Path, args: &[String], log: &Path) -> Daemon {
    let log = std::fs::File::create(log).unwrap();
    Daemon(
        Command::new(binary)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// Waits until `url` answers 200 (a daemon is ready).
async fn until_ready(http: &reqwest::Client, url: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = http.get(url).send().await
            && r.status() == 200
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{url} never became ready: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sorted_answers(dns: SocketAddr, name: &str) -> Vec<String> {
    let mut a = answers(&udp(dns, &query(name, RecordType::A)).await);
    a.sort();
    a
}

/// The state and reason of check instance `check` on device `d`.
fn check_of(d: &TestDevice, check: &str) -> (String, String) {
    d.device
        .engine
        .checks()
        .into_iter()
        .find(|c| c.check == check)
        .map(|c| (c.state.to_string(), c.reason.clone()))
        .unwrap_or_default()
}

/// The state and reason of check instance `check` on process `p`.
fn check_on(p: &Proc, check: &str) -> (String, String) {
    let listed: serde_json::Value =
        serde_json::from_str(&p.ok(&["check", "list", "--json"])).unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == check)
        .map(|c| {
            (
                c["state"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_backend_is_down_with_max_latency_and_back_when_fast() {
    let a = HttpBackend::start_at("127.0.190.2:0".parse().unwrap()).await;
    let _b = HttpBackend::start_at(SocketAddr::new(
        "127.0.190.3".parse().unwrap(),
        a.addr.port(),
    ))
    .await;
    let config = format!(
        r#"
[[check]]
name = "web"
type = "http"
port = {}
interval = "200ms"
timeout = "190ms"
max_latency = "60ms"
failures = 2
successes = 2

[[domain]]
name = "slow.test"
nameservers = ["ns1.slow.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  {{ ip = "127.0.190.2", hc = "check:web" }},
  {{ ip = "127.0.190.3", hc = "check:web" }},
]
"#,
        a.addr.port()
    );
    let d = TestDevice::start(&config).await;
    until("both answered", || async {
        sorted_answers(d.v4(), "www.slow.test.").await == ["127.0.190.2", "127.0.190.3"]
            && check_of(&d, "web@127.0.190.2").0 == "OK"
    })
    .await;
    // Slower than max_latency, well within the timeout: the answer came,
    // too late to count.
    a.set_delay(Duration::from_millis(120));
    until("the slow address left the answer", || async {
        sorted_answers(d.v4(), "www.slow.test.").await == ["127.0.190.3"]
    })
    .await;
    let (state, reason) = check_of(&d, "web@127.0.190.2");
    assert_eq!(state, "Error");
    assert!(
        reason.starts_with("slow: status 200 in ")
            && reason.ends_with("ms, over max_latency 60 ms"),
        "{reason}"
    );
    a.set_delay(Duration::ZERO);
    until("fast again, answered again", || async {
        sorted_answers(d.v4(), "www.slow.test.").await == ["127.0.190.2", "127.0.190.3"]
    })
    .await;
    // Validation: max_latency within the timeout, on probed types only.
    let bad = config.replace("max_latency = \"60ms\"", "max_latency = \"190ms\"");
    let file = d.dir.path().join("bad.toml");
    std::fs::write(&file, bad).unwrap();
    let out = run_gtm(&d, &["config", "check", file.to_str().unwrap()]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains(
            "check web: max_latency 190ms is not shorter than timeout 190ms: a probe that slow times out first"
        ),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_check_drives_a_scenario_to_dr_and_back() {
    let Some(prometheus) = tool("prometheus", "prometheus") else {
        return;
    };
    let http = gtm_node::tls::http_client(None, None).unwrap();
    // The exporter: a real HTTP server whose metric the test changes.
    let exporter = HttpBackend::start_at("127.0.190.10:0".parse().unwrap()).await;
    exporter.set_header("content-type", "text/plain; version=0.0.4");
    let metric = |v: u32| {
        format!("# TYPE backend_errors gauge\nbackend_errors{{backend=\"127.0.190.20\"}} {v}\n")
    };
    exporter.set_body(&metric(0));
    // A real Prometheus scraping it every second.
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.190.9:{}", free_port_on("127.0.190.9"));
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: app\n    static_configs:\n      - targets: ['{}']\n",
            exporter.addr
        ),
    )
    .unwrap();
    let log = dir.path().join("prometheus.log");
    let _prometheus = start_daemon(
        &prometheus,
        &[
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.path().join("data").display()),
            format!("--web.listen-address={listen}"),
        ],
        &log,
    );
    until_ready(&http, &format!("http://{listen}/-/ready"), &log).await;

    let zone = format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "errors"
type = "prometheus"
url = "http://{listen}"
query = 'backend_errors{{backend="$address"}}'
expect = "< 1"
interval = "500ms"
timeout = "400ms"
failures = 2
successes = 2

[[scenario]]
name = "dc1-down"
condition = "NOT errors@127.0.190.20"

[[domain]]
name = "prom.test"
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.prom.test"]

[[domain.record]]
name = "www"
type = "A"
mode = "disaster-recovery"
dr_condition = "scenario:dc1-down"
addresses = [
  {{ ip = "127.0.190.20", dc = "dc1" }},
  {{ ip = "198.51.100.10", dc = "dc2" }},
]
"#
    );
    let d = TestDevice::start(&zone).await;
    until("the check is OK from Prometheus's answer", || async {
        check_of(&d, "errors@127.0.190.20").0 == "OK"
    })
    .await;
    let (_, reason) = check_of(&d, "errors@127.0.190.20");
    assert!(
        reason.contains("backend=\"127.0.190.20\"") && reason.contains(" = 0, < 1"),
        "{reason}"
    );
    assert_eq!(
        sorted_answers(d.v4(), "www.prom.test.").await,
        ["127.0.190.20"]
    );

    // The backend's errors rise: Prometheus scrapes them, the check fails,
    // the scenario turns active and the record goes to DR.
    exporter.set_body(&metric(5));
    until("DR on", || async {
        sorted_answers(d.v4(), "www.prom.test.").await == ["198.51.100.10"]
    })
    .await;
    let (state, reason) = check_of(&d, "errors@127.0.190.20");
    assert_eq!(state, "Error");
    assert!(reason.contains(" = 5, not < 1"), "{reason}");
    let events: Vec<String> = d
        .device
        .engine
        .events()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert!(
        events.contains(&"www.prom.test/A: DR is on".to_string()),
        "{events:?}"
    );

    // And fall: back to Main.
    exporter.set_body(&metric(0));
    until("DR ended", || async {
        sorted_answers(d.v4(), "www.prom.test.").await == ["127.0.190.20"]
    })
    .await;

    // A query Prometheus refuses is a failure naming why.
    let bad = zone
        .replace(
            "expect = \"< 1\"",
            "expect = \"< 1\"\nmax_latency = \"300ms\"",
        )
        .replace(
            "backend_errors{backend=\"$address\"}",
            "rate(backend_errors[1m]",
        );
    let file = d.dir.path().join("bad.toml");
    std::fs::write(&file, bad).unwrap();
    let applied = run_gtm(&d, &["config", "apply", file.to_str().unwrap()]);
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);
    until("the parse error is the reason", || async {
        check_of(&d, "errors@127.0.190.20")
            .1
            .starts_with("query failed: ")
    })
    .await;
}

/// An Alertmanager configuration that posts every alert to `receiver` with
/// `token`, at once and again on resolution.
fn alertmanager_config(receiver: &str, token: &str) -> String {
    format!(
        r#"route:
  receiver: gtm
  group_by: ['alertname', 'instance']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: gtm
    webhook_configs:
      - url: '{receiver}/api/v1/inputs/alertmanager'
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials: '{token}'
"#
    )
}

const ALERTED: &str = r#"
[[check]]
name = "am"
type = "alertmanager"
labels = { alertname = "BackendDown", instance = "$address:9100" }
interval = "500ms"
failures = 1
successes = 1

[[domain]]
name = "am.test"
nameservers = ["ns1.am.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "127.0.191.20", hc = "check:am" },
  { ip = "127.0.191.21" },
]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alertmanager_alert_takes_an_address_out_on_both_devices_and_its_resolution_back() {
    let Some(alertmanager) = tool("prometheus-alertmanager", "prometheus-alertmanager") else {
        return;
    };
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let (_root, a, b) = pair(191);
    a.apply_ok(ALERTED);
    for p in [&a, &b] {
        until("both answered", || async {
            sorted_answers(p.dns(), "www.am.test.").await == ["127.0.191.20", "127.0.191.21"]
        })
        .await;
    }
    // A reporter token: it may post notifications and read nothing.
    let token = a.ok(&["token", "create", "am", "--role", "reporter"]);
    let token = token.trim();
    let read = http
        .get(format!("{}/api/v1/status", a.api()))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 403);

    // A real Alertmanager, posting to the follower.
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.191.9:{}", free_port_on("127.0.191.9"));
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(&config, alertmanager_config(&b.api(), token)).unwrap();
    let log = dir.path().join("alertmanager.log");
    let _am = start_daemon(
        &alertmanager,
        &[
            format!("--config.file={}", config.display()),
            format!("--storage.path={}", dir.path().join("data").display()),
            format!("--web.listen-address={listen}"),
            "--cluster.listen-address=".to_string(),
        ],
        &log,
    );
    until_ready(&http, &format!("http://{listen}/-/ready"), &log).await;

    // An alert of another instance changes nothing; the backend's takes
    // its address out of the answers of both devices.
    let alert = |instance: &str, ends: Option<&str>| {
        let mut a = serde_json::json!({
            "labels": {"alertname": "BackendDown", "instance": instance, "job": "node"},
            "annotations": {"summary": format!("{instance} is down")},
        });
        if let Some(ends) = ends {
            a["endsAt"] = ends.into();
        }
        a
    };
    let post = |alerts: serde_json::Value| {
        let http = http.clone();
        let url = format!("http://{listen}/api/v2/alerts");
        async move {
            let r = http.post(url).json(&alerts).send().await.unwrap();
            assert_eq!(r.status(), 200, "{:?}", r.text().await);
        }
    };
    post(serde_json::json!([
        alert("127.0.191.20:9100", None),
        alert("10.9.9.9:9100", None)
    ]))
    .await;
    for p in [&a, &b] {
        until("the alerted address left", || async {
            sorted_answers(p.dns(), "www.am.test.").await == ["127.0.191.21"]
        })
        .await;
        let (state, reason) = check_on(p, "am@127.0.191.20");
        assert_eq!(
            (state.as_str(), reason.as_str()),
            ("Error", "alert firing: 127.0.191.20:9100 is down")
        );
    }
    let logs = a.ok(&["logs", "--kind", "check"]);
    assert!(
        logs.contains(
            "check am@127.0.191.20: OK → Error (alert firing: 127.0.191.20:9100 is down)"
        ),
        "{logs}"
    );

    // Resolved (it ended a moment ago): Alertmanager says so, and the
    // address is back on both devices.
    post(serde_json::json!([alert(
        "127.0.191.20:9100",
        Some("2000-01-01T00:00:00Z")
    )]))
    .await;
    for p in [&a, &b] {
        until("the address came back", || async {
            sorted_answers(p.dns(), "www.am.test.").await == ["127.0.191.20", "127.0.191.21"]
        })
        .await;
    }
}

const PUSHED: &str = r#"
[[check]]
name = "beat"
type = "push"
interval = "300ms"
stale_after = "3s"
failures = 1
successes = 1

[[domain]]
name = "push.test"
nameservers = ["ns1.push.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "127.0.192.20", hc = "check:beat" },
  { ip = "127.0.192.21" },
]
"#;

/// Posts a report of `beat@127.0.192.20` to `p` with `token`.
async fn report(http: &reqwest::Client, p: &Proc, token: &str, state: &str) -> reqwest::Response {
    http.post(format!("{}/api/v1/checks/beat/push", p.api()))
        .bearer_auth(token)
        .json(&serde_json::json!({"state": state, "address": "127.0.192.20", "reason": format!("{state} from the backend")}))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_check_follows_its_reports_through_either_device_and_errs_when_they_stop() {
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let (_root, mut a, b) = pair(192);
    a.apply_ok(PUSHED);
    let token = a.ok(&["token", "create", "web1", "--role", "reporter"]);
    let token = token.trim().to_string();
    // Before any report the check waits (no result) for stale_after: the
    // address is answered.
    for p in [&a, &b] {
        until("answered before any report", || async {
            sorted_answers(p.dns(), "www.push.test.").await == ["127.0.192.20", "127.0.192.21"]
        })
        .await;
    }
    // An error reported through the follower: out on both devices.
    assert_eq!(report(&http, &b, &token, "error").await.status(), 200);
    for p in [&a, &b] {
        until("out after the error report", || async {
            sorted_answers(p.dns(), "www.push.test.").await == ["127.0.192.21"]
        })
        .await;
        assert_eq!(
            check_on(p, "beat@127.0.192.20"),
            (
                "Error".to_string(),
                "reported: error from the backend".to_string()
            )
        );
    }
    // ok through the leader, with the CLI: back on both.
    let cli = a.gtm(&[
        "--api-token",
        &token,
        "check",
        "push",
        "beat",
        "ok",
        "--address",
        "127.0.192.20",
    ]);
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    for p in [&a, &b] {
        until("back after the ok report", || async {
            sorted_answers(p.dns(), "www.push.test.").await == ["127.0.192.20", "127.0.192.21"]
        })
        .await;
    }
    // A report the state machine refuses says why; an address no record
    // checks with the check is refused before it is proposed.
    let wrong = http
        .post(format!("{}/api/v1/checks/beat/push", a.api()))
        .bearer_auth(&token)
        .json(&serde_json::json!({"state": "ok"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 400);
    let body: serde_json::Value = wrong.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("is a template: name the address"),
        "{body}"
    );
    let elsewhere = http
        .post(format!("{}/api/v1/checks/beat/push", a.api()))
        .bearer_auth(&token)
        .json(&serde_json::json!({"state": "ok", "address": "127.0.192.99"}))
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 404);

    // The last report survives a kill -9: after the restart the device
    // reads it from the committed state (still fresh: ok).
    assert_eq!(report(&http, &b, &token, "ok").await.status(), 200);
    a.kill();
    a.restart();
    until("answered after the restart", || async {
        sorted_answers(a.dns(), "www.push.test.").await == ["127.0.192.20", "127.0.192.21"]
    })
    .await;
    // The backend stops reporting: after stale_after the check fails on
    // every device, naming the silence.
    for p in [&a, &b] {
        until("out when the reports stopped", || async {
            sorted_answers(p.dns(), "www.push.test.").await == ["127.0.192.21"]
        })
        .await;
        let (state, reason) = check_on(p, "beat@127.0.192.20");
        assert_eq!(state, "Error");
        assert!(reason.starts_with("no report for "), "{reason}");
        assert!(reason.ends_with("(stale_after 3 s)"), "{reason}");
    }
}
