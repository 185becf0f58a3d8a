//! Health checks drive the answers: real backends on loopback go down and
//! up, and the DNS answers, statuses and events follow (seeds 000, 001).

use std::{net::SocketAddr, time::Duration};

use hickory_server::proto::rr::RecordType;

use crate::{backends::*, support::*};

async fn sorted_answers(d: &TestDevice, name: &str) -> Vec<String> {
    let mut a = answers(&udp(d.v4(), &query(name, RecordType::A)).await);
    a.sort();
    a
}

fn texts(d: &TestDevice) -> Vec<String> {
    d.device
        .engine
        .events()
        .into_iter()
        .map(|e| e.text)
        .collect()
}

fn status_of(d: &TestDevice, record: &str) -> String {
    d.device
        .engine
        .status()
        .into_iter()
        .find(|r| r.record == record)
        .and_then(|r| r.status)
        .map(|s| s.to_string())
        .unwrap_or_default()
}

fn config(port: u16, interval: &str, extra: &str) -> String {
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
path = "/health"
expect_body = "ok"
interval = "{interval}"
timeout = "80ms"
failures = 2
successes = 2

[[scenario]]
name = "dc1-down"
condition = "NOT (web@127.0.0.2 OR web@127.0.0.3)"

{extra}

[[domain]]
name = "example.test"
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
fail_safe = ["192.0.2.250"]
addresses = [
  {{ ip = "127.0.0.2", hc = "check:web" }},
  {{ ip = "127.0.0.3", hc = "check:web" }},
]

[[domain.record]]
name = "plain"
type = "A"
addresses = [{{ ip = "127.0.0.2", hc = "check:web" }}]

[[domain.record]]
name = "dr"
type = "A"
mode = "disaster-recovery"
dr_condition = "scenario:dc1-down"
addresses = [
  {{ ip = "127.0.0.2", dc = "dc1", hc = "check:web" }},
  {{ ip = "127.0.0.3", dc = "dc1", hc = "check:web" }},
  {{ ip = "198.51.100.10", dc = "dc2" }},
]
"#
    )
}

/// Two HTTP backends on 127.0.0.2 and 127.0.0.3, on the same port.
async fn two_backends() -> (HttpBackend, HttpBackend) {
    let a = HttpBackend::start_at("127.0.0.2:0".parse().unwrap()).await;
    let b =
        HttpBackend::start_at(SocketAddr::new("127.0.0.3".parse().unwrap(), a.addr.port())).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_statuses_and_events_follow_real_backends() {
    let (mut a, mut b) = two_backends().await;
    let d = TestDevice::start(&config(a.addr.port(), "100ms", "")).await;

    // Both addresses answer from the start (unknown is not unhealthy); wait
    // for their checks to decide.
    until("both checks OK", || async {
        check_is(&d, "web@127.0.0.2", "OK") && check_is(&d, "web@127.0.0.3", "OK")
    })
    .await;
    assert_eq!(
        sorted_answers(&d, "www.example.test.").await,
        ["127.0.0.2", "127.0.0.3"]
    );
    assert_eq!(status_of(&d, "www.example.test/A"), "OK");
    assert_eq!(
        sorted_answers(&d, "dr.example.test.").await,
        ["127.0.0.2", "127.0.0.3"],
        "Main answers"
    );

    // One backend down: the record is answered by the other, Partially OK; no DR.
    a.stop().await;
    until("127.0.0.2 leaves", || async {
        sorted_answers(&d, "www.example.test.").await == ["127.0.0.3"]
    })
    .await;
    assert_eq!(
        status_of(&d, "www.example.test/A"),
        "Partially OK (a record is down)"
    );
    assert!(texts(&d).contains(&"www.example.test/A: 127.0.0.2 is disabled".to_string()));
    assert_eq!(
        sorted_answers(&d, "dr.example.test.").await,
        ["127.0.0.3"],
        "a partial Main failure never switches"
    );
    let reason = d
        .device
        .engine
        .checks()
        .into_iter()
        .find(|c| c.check == "web@127.0.0.2")
        .unwrap()
        .reason;
    assert_eq!(reason, "connect refused");

    // Both down: fail-safe, no healthy records, DR on.
    b.stop().await;
    until("fail-safe", || async {
        sorted_answers(&d, "www.example.test.").await == ["192.0.2.250"]
    })
    .await;
    assert_eq!(status_of(&d, "www.example.test/A"), "Fail-safe");
    until("DR on", || async {
        sorted_answers(&d, "dr.example.test.").await == ["198.51.100.10"]
    })
    .await;
    assert_eq!(status_of(&d, "dr.example.test/A"), "DR");
    until("plain empty", || async {
        sorted_answers(&d, "plain.example.test.").await.is_empty()
    })
    .await;
    assert_eq!(status_of(&d, "plain.example.test/A"), "No healthy records");
    let t = texts(&d);
    for expected in [
        "www.example.test/A: Fail-safe records are on",
        "plain.example.test/A: No healthy records left",
        "dr.example.test/A: DR is on",
        "scenario dc1-down: passive → active",
    ] {
        assert!(
            t.contains(&expected.to_string()),
            "missing {expected:?} in {t:#?}"
        );
    }
    assert!(
        t.iter()
            .any(|e| e.starts_with("check web@127.0.0.3: OK → Error (")),
        "{t:#?}"
    );

    // A wrong body is a failure with its reason.
    b.restart().await;
    b.set_body("maintenance");
    until("body reason", || async {
        d.device
            .engine
            .checks()
            .into_iter()
            .any(|c| c.check == "web@127.0.0.3" && c.reason == "body did not contain \"ok\"")
    })
    .await;

    // Back up: DR ends at the first evaluation where the condition clears.
    a.restart().await;
    until("127.0.0.2 back", || async {
        sorted_answers(&d, "www.example.test.").await == ["127.0.0.2"]
    })
    .await;
    until("Main again", || async {
        sorted_answers(&d, "dr.example.test.").await == ["127.0.0.2"]
    })
    .await;
    // The answers change a moment before their events are logged.
    until("DR ended and 127.0.0.2 enabled, logged", || async {
        let t = texts(&d);
        t.contains(&"dr.example.test/A: DR ended".to_string())
            && t.contains(&"www.example.test/A: 127.0.0.2 is enabled".to_string())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_keeps_its_decision_while_a_check_is_unknown() {
    let (mut a, _b) = two_backends().await;
    // `remote` runs only in dc2: on this dc1 device it is No Data.
    let extra = r#"
[[check]]
name = "remote"
type = "tcp"
target = "127.0.0.9"
run_on = "dc2"

[[scenario]]
name = "web-or-remote"
condition = "web@127.0.0.2 OR remote"

[[domain]]
name = "keep.test"
nameservers = ["ns1.keep.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1", hc = "scenario:web-or-remote" }]
"#;
    let d = TestDevice::start(&config(a.addr.port(), "100ms", extra)).await;
    // The address answers from the start (its scenario has not decided: unknown
    // is not unhealthy); wait for the scenario to decide.
    until("scenario active", || async {
        d.device
            .engine
            .scenarios()
            .iter()
            .any(|s| s.scenario == "web-or-remote" && s.active)
    })
    .await;
    assert_eq!(sorted_answers(&d, "www.keep.test.").await, ["192.0.2.1"]);
    let remote = d
        .device
        .engine
        .checks()
        .into_iter()
        .find(|c| c.check == "remote")
        .unwrap();
    assert_eq!(serde_json::to_value(remote.state).unwrap(), "No Data");

    a.stop().await;
    until("web Error", || async {
        d.device.engine.checks().into_iter().any(|c| {
            c.check == "web@127.0.0.2" && serde_json::to_value(c.state).unwrap() == "Error"
        })
    })
    .await;
    // web is Error, remote unknown: the condition is unknown, so the scenario stays active.
    assert_eq!(sorted_answers(&d, "www.keep.test.").await, ["192.0.2.1"]);
    assert!(
        d.device
            .engine
            .scenarios()
            .iter()
            .any(|s| s.scenario == "web-or-remote" && s.active)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_starts_from_the_last_decisions() {
    let (mut a, mut b) = two_backends().await;
    let dir = tempfile::tempdir().unwrap();
    // A long timeout: see the silent listeners below.
    let cfg = config(a.addr.port(), "5s", "").replace("timeout = \"80ms\"", "timeout = \"4s\"");
    let d = TestDevice::start_in(&cfg, dir.path()).await;
    until("both checks OK", || async {
        check_is(&d, "web@127.0.0.2", "OK") && check_is(&d, "web@127.0.0.3", "OK")
    })
    .await;
    d.device.stop().await;

    // The backends are gone, but the restarted device answers from its last
    // decisions until probes cross the thresholds: no flap on restart.
    a.stop().await;
    b.stop().await;
    // In their place, listeners that accept and never answer: the first
    // probes after the restart take their whole timeout (4 s) to fail, so
    // the restored decisions are read before any probe has replaced them.
    let _silent = (
        tokio::net::TcpListener::bind(a.addr).await.unwrap(),
        tokio::net::TcpListener::bind(b.addr).await.unwrap(),
    );
    let again = TestDevice::start_in(&cfg, dir.path()).await;
    assert_eq!(
        sorted_answers(&again, "www.example.test.").await,
        ["127.0.0.2", "127.0.0.3"]
    );
    let restored = again.device.engine.checks();
    assert!(
        restored
            .iter()
            .all(|c| c.restored && serde_json::to_value(c.state).unwrap() == "OK"),
        "{restored:?}"
    );
    again.device.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_checks_stop_probing_and_new_ones_start() {
    let a = HttpBackend::start_at("127.0.0.2:0".parse().unwrap()).await;
    let d = TestDevice::start(&config(a.addr.port(), "100ms", "")).await;
    a.state.requests.wait_len(3).await;

    let without = r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }]
"#;
    d.device
        .engine
        .apply(2, gtm_model::parse(without).unwrap())
        .unwrap();
    assert!(d.device.engine.instances().borrow().is_empty());
    // A probe already under way may finish; none starts after it.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let settled = a.state.requests.len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        a.state.requests.len(),
        settled,
        "no probe for a deleted check"
    );

    // Putting the check back starts it again.
    d.device
        .engine
        .apply(
            3,
            gtm_model::parse(&config(a.addr.port(), "100ms", "")).unwrap(),
        )
        .unwrap();
    a.state.requests.wait_len(settled + 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_check_that_reuses_its_connection_keeps_one_open() {
    let mut a = HttpBackend::start_at("127.0.0.4:0".parse().unwrap()).await;
    let text = format!(
        r#"
[[datacenter]]
name = "dc1"

[[check]]
name = "web"
type = "http"
port = {}
interval = "500ms"
timeout = "500ms"
reuse_connection = true

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "127.0.0.4", hc = "check:web" }}]
"#,
        a.addr.port()
    );
    let d = TestDevice::start(&text).await;
    a.state.requests.wait_len(5).await;
    let connections = |b: &HttpBackend| {
        b.state
            .connections
            .load(std::sync::atomic::Ordering::SeqCst)
    };
    assert_eq!(connections(&a), 1);

    // The backend restarts, dropping the connection: the next probe opens
    // another and the check stays OK.
    a.restart().await;
    let seen = a.state.requests.len();
    a.state.requests.wait_len(seen + 5).await;
    assert_eq!(connections(&a), 2);
    assert!(check_is(&d, "web@127.0.0.4", "OK"));
    d.device.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_probe_type_drives_answers() {
    let mut https = HttpBackend::start_tls("www.example.test").await;
    let tcp = TcpBackend::start_tcp(Some("PONG")).await;
    let mut tls = TcpBackend::start_tls_line("www.example.test", None).await;
    let dns = DnsBackend::start_dns("192.0.2.53".parse().unwrap(), 0).await;
    let grpc = GrpcBackend::start_grpc().await;
    let check = |name: &str, kind: &str, port: u16, extra: &str| {
        format!(
            "[[check]]\nname = \"{name}\"\ntype = \"{kind}\"\ntarget = \"127.0.0.1\"\nport = {port}\ninterval = \"1s\"\ntimeout = \"1s\"\nfailures = 1\nsuccesses = 1\n{extra}\n\n[[scenario]]\nname = \"{name}-up\"\ncondition = \"{name}\"\n\n"
        )
    };
    let mut cfg = String::new();
    cfg += &check(
        "https1",
        "https",
        https.addr.port(),
        "tls_verify = false\nhost = \"www.example.test\"",
    );
    cfg += &check(
        "tcp1",
        "tcp",
        tcp.addr.port(),
        "send = \"PING\\r\\n\"\nexpect = \"PONG\"",
    );
    cfg += &check("tls1", "tls", tls.addr.port(), "tls_verify = false");
    cfg += &check(
        "dns1",
        "dns",
        dns.addr.port(),
        "query_name = \"www.example.test\"\nexpect_answer = \"192.0.2.53\"",
    );
    cfg += &check("grpc1", "grpc", grpc.addr.port(), "");
    cfg += r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "multi"
type = "A"
addresses = [
  { ip = "192.0.2.1", hc = "scenario:https1-up" },
  { ip = "192.0.2.2", hc = "scenario:tcp1-up" },
  { ip = "192.0.2.3", hc = "scenario:tls1-up" },
  { ip = "192.0.2.4", hc = "scenario:dns1-up" },
  { ip = "192.0.2.5", hc = "scenario:grpc1-up" },
]
"#;
    let d = TestDevice::start(&cfg).await;
    let all = [
        "192.0.2.1",
        "192.0.2.2",
        "192.0.2.3",
        "192.0.2.4",
        "192.0.2.5",
    ];
    until("every check OK", || async {
        sorted_answers(&d, "multi.example.test.").await == all
    })
    .await;

    let reason = |name: &str| {
        d.device
            .engine
            .checks()
            .into_iter()
            .find(|c| c.check == name)
            .map(|c| c.reason)
            .unwrap_or_default()
    };
    // One down at a time: exactly its address leaves.
    https.stop().await;
    until("https down", || async {
        sorted_answers(&d, "multi.example.test.").await == all[1..]
    })
    .await;
    assert_eq!(reason("https1"), "connect refused");
    https.restart().await;
    tcp.set_response(Some("NOPE"));
    until("tcp mismatch", || async {
        sorted_answers(&d, "multi.example.test.").await
            == ["192.0.2.1", "192.0.2.3", "192.0.2.4", "192.0.2.5"]
    })
    .await;
    assert!(
        reason("tcp1").starts_with("response did not match"),
        "{}",
        reason("tcp1")
    );
    tcp.set_response(Some("PONG"));
    tls.stop().await;
    until("tls down", || async {
        !sorted_answers(&d, "multi.example.test.")
            .await
            .contains(&"192.0.2.3".to_string())
    })
    .await;
    tls.restart().await;
    dns.set_rcode(2);
    until("dns servfail", || async {
        !sorted_answers(&d, "multi.example.test.")
            .await
            .contains(&"192.0.2.4".to_string())
    })
    .await;
    assert_eq!(reason("dns1"), "rcode SERVFAIL, expected NOERROR");
    dns.set_rcode(0);
    grpc.set_serving(false);
    until("grpc not serving", || async {
        !sorted_answers(&d, "multi.example.test.")
            .await
            .contains(&"192.0.2.5".to_string())
    })
    .await;
    assert_eq!(reason("grpc1"), "NOT_SERVING");
    grpc.set_serving(true);
    until("all back", || async {
        sorted_answers(&d, "multi.example.test.").await == all
    })
    .await;
}

/// A configuration with the `web` check and, with `dr_record`, a new
/// Disaster Recovery record (automatic condition) whose Main addresses are
/// checked by it.
fn dr_config(port: u16, dr_record: Option<&str>) -> String {
    let record = dr_record.map_or(String::new(), |failback| {
        format!(
            r#"
[[domain.record]]
name = "fresh"
type = "A"
mode = "disaster-recovery"
failback = "{failback}"
addresses = [
  {{ ip = "127.0.0.2", dc = "dc1", hc = "check:web" }},
  {{ ip = "127.0.0.3", dc = "dc1", hc = "check:web" }},
  {{ ip = "198.51.100.10", dc = "dc2" }},
]
"#
        )
    });
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
path = "/health"
expect_body = "ok"
interval = "1s"
# Generous: a probe that times out on a loaded machine (the browser tests
# run beside these) is a real Error and would fail the test.
timeout = "800ms"
failures = 2
successes = 2

[[domain]]
name = "example.test"
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "static"
type = "A"
addresses = [{{ ip = "192.0.2.1" }}]
{record}"#
    )
}

fn record_texts(d: &TestDevice, record: &str) -> Vec<String> {
    d.device
        .engine
        .events()
        .into_iter()
        .filter(|e| e.object == record)
        .map(|e| e.text)
        .collect()
}

fn check_is(d: &TestDevice, check: &str, state: &str) -> bool {
    d.device
        .engine
        .checks()
        .into_iter()
        .any(|c| c.check == check && serde_json::to_value(c.state).unwrap() == state)
}

/// Seed 000 "keep the last decision", for a record that has none yet: a new
/// DR record answers from its Main DC from the first query, before its
/// checks have a result, never from DR, and logs no switchover it did not
/// make; a real Main failure still switches and logs `DR is on`.
async fn a_new_dr_record_answers_main_from_the_first_query(failback: &str) {
    const MAIN: [&str; 2] = ["127.0.0.2", "127.0.0.3"];
    const LABEL: &str = "fresh.example.test/A";
    let (mut a, mut b) = two_backends().await;
    let port = a.addr.port();
    let d = TestDevice::start(&dr_config(port, None)).await;

    let text = dr_config(port, Some(failback));
    crate::support::apply_text(&d.device, text.as_str())
        .await
        .unwrap();
    // From the first query after the apply until both checks have decided,
    // every answer is Main's.
    let mut queries = 0;
    loop {
        let decided = check_is(&d, "web@127.0.0.2", "OK") && check_is(&d, "web@127.0.0.3", "OK");
        assert_eq!(
            sorted_answers(&d, "fresh.example.test.").await,
            MAIN,
            "query {queries} after the apply ({failback} failback)"
        );
        queries += 1;
        if decided {
            break;
        }
        assert!(queries < 1500, "the checks never decided");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status_of(&d, LABEL), "OK");
    assert_eq!(
        record_texts(&d, LABEL),
        Vec::<String>::new(),
        "no transition was made"
    );

    // A real failure of Main: DR, with its opening event.
    a.stop().await;
    b.stop().await;
    until("DR on", || async {
        sorted_answers(&d, "fresh.example.test.").await == ["198.51.100.10"]
    })
    .await;
    assert_eq!(status_of(&d, LABEL), "DR");
    let t = record_texts(&d, LABEL);
    assert!(t.contains(&format!("{LABEL}: DR is on")), "{t:#?}");
    assert!(!t.contains(&format!("{LABEL}: DR ended")), "{t:#?}");

    // Main comes back: automatic failback returns, manual holds until resumed.
    a.restart().await;
    until("127.0.0.2 OK again", || async {
        check_is(&d, "web@127.0.0.2", "OK")
    })
    .await;
    let d = if failback == "manual" {
        assert_eq!(
            sorted_answers(&d, "fresh.example.test.").await,
            ["198.51.100.10"],
            "held by manual failback"
        );
        // The hold is per-device health state: it survives a restart,
        // although Main is healthy and a fresh decision would pick it.
        let dr_enabled = |d: &TestDevice| {
            record_texts(d, LABEL)
                .iter()
                .filter(|e| e.ends_with("198.51.100.10 is enabled"))
                .count()
        };
        let enabled_before = dr_enabled(&d);
        let TestDevice { device, dir } = d;
        device.stop().await;
        let d = TestDevice::start_in(&text, dir.path()).await;
        assert_eq!(
            sorted_answers(&d, "fresh.example.test.").await,
            ["198.51.100.10"],
            "still held by manual failback after a restart"
        );
        until("127.0.0.2 decided again", || async {
            check_is(&d, "web@127.0.0.2", "OK")
        })
        .await;
        assert_eq!(
            sorted_answers(&d, "fresh.example.test.").await,
            ["198.51.100.10"],
            "held with Main healthy"
        );
        // The DR address never left the answer: no event says it came in.
        assert_eq!(
            dr_enabled(&d),
            enabled_before,
            "{:#?}",
            record_texts(&d, LABEL)
        );
        let resume = gtm_node::command::Action::Resume {
            record: LABEL.to_string(),
        };
        let actor = gtm_model::actor::Actor {
            user: "test".into(),
            device: "test1".into(),
        };
        d.device
            .replication
            .propose(actor, None, resume)
            .await
            .expect("resume applies");
        d
    } else {
        d
    };
    until("Main again", || async {
        sorted_answers(&d, "fresh.example.test.").await == ["127.0.0.2"]
    })
    .await;
    let t = record_texts(&d, LABEL);
    let on = t.iter().position(|e| e.ends_with(": DR is on"));
    let ended = t.iter().position(|e| e.ends_with(": DR ended"));
    assert!(
        matches!((on, ended), (Some(on), Some(ended)) if on < ended),
        "{t:#?}"
    );
    if failback == "manual" {
        // Resumed, the hold is gone from the store too: restarted, the
        // record answers Main from the first query again.
        let TestDevice { device, dir } = d;
        device.stop().await;
        let d = TestDevice::start_in(&text, dir.path()).await;
        assert_eq!(
            sorted_answers(&d, "fresh.example.test.").await,
            MAIN,
            "not held after the resume and a restart"
        );
        d.device.stop().await;
    } else {
        d.device.stop().await;
    }
}

/// A record's DR state is stored only when it is on, or goes off after
/// being on: a record that never was in DR writes nothing (a million new
/// records wrote a million keys on every apply and every start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_never_in_dr_stores_no_dr_state() {
    let (a, _b) = two_backends().await;
    let text = dr_config(a.addr.port(), Some("manual"));
    let d = TestDevice::start(&text).await;
    until("checks decided", || async {
        check_is(&d, "web@127.0.0.2", "OK") && check_is(&d, "web@127.0.0.3", "OK")
    })
    .await;
    assert_eq!(status_of(&d, "fresh.example.test/A"), "OK");
    let TestDevice { device, dir } = d;
    device.stop().await;
    let store = gtm_cluster::Store::open(dir.path()).unwrap();
    let dr: Vec<String> = store
        .health_decisions()
        .unwrap()
        .into_iter()
        .map(|(key, _)| key)
        .filter(|key| key.starts_with("dr-on/"))
        .collect();
    assert!(dr.is_empty(), "{dr:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_dr_record_with_automatic_failback_answers_main_from_the_first_query() {
    a_new_dr_record_answers_main_from_the_first_query("auto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_dr_record_with_manual_failback_answers_main_from_the_first_query() {
    a_new_dr_record_answers_main_from_the_first_query("manual").await;
}

/// An address on a scenario that has not decided answers; the scenario's
/// first decision, even passive, takes it out (and says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenarios_first_passive_decision_takes_its_address_out() {
    let mut a = HttpBackend::start_at("127.0.0.2:0".parse().unwrap()).await;
    let port = a.addr.port();
    a.stop().await;
    let d = TestDevice::start(&format!(
        r#"
[[check]]
name = "web"
type = "http"
port = {port}
interval = "100ms"
timeout = "80ms"

[[scenario]]
name = "web-up"
condition = "web@127.0.0.2"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "192.0.2.1", hc = "scenario:web-up" }}, {{ ip = "192.0.2.2" }}]
"#
    ))
    .await;
    until("the scenario decides passive", || async {
        sorted_answers(&d, "www.example.test.").await == ["192.0.2.2"]
    })
    .await;
    assert!(check_is(&d, "web@127.0.0.2", "Error"));
    assert!(
        texts(&d).contains(&"www.example.test/A: 192.0.2.1 is disabled".to_string()),
        "{:#?}",
        texts(&d)
    );
}
