//! Reading the state: what `gtm status`, the record preview and the answer
//! counters say is what the DNS path really answers.

use std::collections::BTreeMap;

use hickory_server::proto::{op::Message, rr::RecordType};

use crate::support::*;

const RECORDS: &str = r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "prio"
type = "A"
balance = "priority"
addresses = [{ ip = "192.0.2.1", hc = "disabled" }, { ip = "192.0.2.2" }, { ip = "192.0.2.3" }]

[[domain.record]]
name = "wt"
type = "A"
balance = "weighted"
addresses = [{ ip = "192.0.2.11", weight = 3 }, { ip = "192.0.2.12", weight = 1 }]

[[domain.record]]
name = "safe"
type = "A"
fail_safe = ["198.51.100.9"]
addresses = [{ ip = "192.0.2.21", hc = "disabled" }]

[[domain.record]]
name = "rr"
type = "A"
max_answers = 2
addresses = [{ ip = "192.0.2.31" }, { ip = "192.0.2.32" }, { ip = "192.0.2.33" }]
"#;

/// `gtm record preview NAME A --json` on `d`.
fn preview(d: &TestDevice, name: &str) -> serde_json::Value {
    let run = run_gtm(d, &["record", "preview", name, "A", "--json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    serde_json::from_str(&run.stdout).expect("preview JSON")
}

/// The `ip` of each typed address of a list.
fn ips(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|a| a["ip"].as_str().expect("an ip").to_string())
        .collect()
}

/// Priority shows its first healthy address, as DNS answers it; weighted
/// shows each address with its weight; fail-safe shows the fail-safe
/// value DNS answers; and `gtm status` says the same as the preview.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_preview_show_what_is_answered() {
    let d = TestDevice::start(RECORDS).await;

    let prio = udp(d.v4(), &query("prio.example.test.", RecordType::A)).await;
    assert_eq!(answers(&prio), ["192.0.2.2"]);
    let p = preview(&d, "prio.example.test");
    assert_eq!(ips(&p["active"]), ["192.0.2.2"], "{p}");
    assert_eq!(p["balance"], "priority", "{p}");
    assert_eq!(p["active"][0]["health"], "healthy", "{p}");
    assert_eq!(p["active"][0]["share"], serde_json::Value::Null, "{p}");
    assert_eq!(p["addresses"][0]["health"], "unhealthy", "{p}");
    assert_eq!(p["addresses"][0]["reason"], "disabled in the configuration");

    let p = preview(&d, "wt.example.test");
    assert_eq!(ips(&p["active"]), ["192.0.2.11", "192.0.2.12"], "{p}");
    assert_eq!(p["active"][0]["weight"], 3, "{p}");
    assert_eq!(p["active"][0]["share"], 0.75, "{p}");
    assert_eq!(p["active"][1]["share"], 0.25, "{p}");
    assert_eq!(p["status"], "ok", "{p}");
    assert_eq!(p["label"], "OK", "{p}");
    let run = run_gtm(&d, &["record", "preview", "wt.example.test", "A"]);
    assert!(
        run.stdout
            .contains("192.0.2.11 (weight 3, 75%), 192.0.2.12 (weight 1, 25%)"),
        "{run:?}"
    );

    let safe = udp(d.v4(), &query("safe.example.test.", RecordType::A)).await;
    assert_eq!(answers(&safe), ["198.51.100.9"]);
    let p = preview(&d, "safe.example.test");
    assert_eq!(ips(&p["active"]), ["198.51.100.9"], "{p}");
    assert_eq!(p["active"][0]["health"], "fail_safe", "{p}");
    assert_eq!(p["status"], "fail_safe", "{p}");
    assert_eq!(p["label"], "Fail-safe", "{p}");

    let run = run_gtm(&d, &["status", "--json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let records = status["records"].as_array().expect("records");
    let active = |label: &str| {
        records
            .iter()
            .find(|r| r["record"] == label)
            .map(|r| ips(&r["active"]))
            .unwrap_or_else(|| panic!("{label} in {status}"))
    };
    assert_eq!(active("prio.example.test/A"), ["192.0.2.2"]);
    assert_eq!(active("safe.example.test/A"), ["198.51.100.9"]);
    let run = run_gtm(&d, &["status"]);
    assert!(run.stdout.contains("198.51.100.9 (fail-safe)"), "{run:?}");
}

/// The per-address answer counts are the addresses the responses carried,
/// over UDP (the fast path) and TCP (the general path); they keep counting
/// across a configuration change, also one that removes an address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_counts_per_address_are_what_was_sent() {
    let d = TestDevice::start(RECORDS).await;
    let mut got = Vec::new();
    for _ in 0..20 {
        got.push(udp(d.v4(), &query("rr.example.test.", RecordType::A)).await);
    }
    for _ in 0..4 {
        got.push(tcp(d.v4(), &query("rr.example.test.", RecordType::A)).await);
    }
    let mut sent = tally(&got);
    // Two of three per response, in turn: every address was sent.
    assert_eq!(sent.len(), 3, "{sent:?}");

    let counts = stats(&d, "rr.example.test").await;
    assert_eq!(counts["answers"], got.len(), "{counts}");
    assert_eq!(counted(&counts), sent, "{counts}");

    let metrics = metrics(&d).await;
    for (address, n) in &sent {
        let line = format!(
            "gtm_address_answers_total{{record=\"rr.example.test/A\",address=\"{address}\"}} {n}"
        );
        assert!(metrics.contains(&line), "missing {line:?} in:\n{metrics}");
    }

    // `gtm record stats` prints the same counts.
    let run = run_gtm(&d, &["record", "stats", "rr.example.test", "A"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.starts_with(&format!(
            "rr.example.test/A: {} responses on test1",
            got.len()
        )),
        "{run:?}"
    );
    for (address, n) in &sent {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.split_whitespace().eq([address.as_str(), &n.to_string()])),
            "{address} {n} in {run:?}"
        );
    }

    // A change elsewhere keeps the counters; one that removes an address
    // keeps the counts of the others.
    let fewer = RECORDS.replace(
        r#"{ ip = "192.0.2.31" }, { ip = "192.0.2.32" }, { ip = "192.0.2.33" }"#,
        r#"{ ip = "192.0.2.31" }, { ip = "192.0.2.32" }"#,
    );
    apply_text(&d.device, &fewer).await.unwrap();
    got.push(udp(d.v4(), &query("rr.example.test.", RecordType::A)).await);
    sent = tally(&got);
    sent.remove("192.0.2.33");
    let counts = stats(&d, "rr.example.test").await;
    assert_eq!(counts["answers"], got.len(), "{counts}");
    assert_eq!(counted(&counts), sent, "{counts}");
}

/// Each address the responses carried, with how many carried it.
fn tally(responses: &[Message]) -> BTreeMap<String, u64> {
    let mut sent = BTreeMap::new();
    for a in responses.iter().flat_map(answers) {
        *sent.entry(a).or_default() += 1;
    }
    sent
}

/// `GET /api/v1/records/NAME/A/stats` on `d`.
async fn stats(d: &TestDevice, name: &str) -> serde_json::Value {
    api_get(d, &format!("/api/v1/records/{name}/A/stats")).await
}

fn counted(stats: &serde_json::Value) -> BTreeMap<String, u64> {
    stats["addresses"]
        .as_array()
        .expect("addresses")
        .iter()
        .map(|a| {
            (
                a["address"].as_str().unwrap().to_string(),
                a["answers"].as_u64().unwrap(),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// A CNAME's status follows its targets: one whose in-zone target answers
/// nothing (no such name, or a steered record with nothing healthy) is
/// not OK, in `gtm status`, the API and the preview; one whose target
/// answers, or lies outside the device's zones, is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cname_whose_in_zone_target_answers_nothing_is_not_ok() {
    let d = TestDevice::start(
        r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "app"
type = "A"
addresses = [{ ip = "192.0.2.1" }]

[[domain.record]]
name = "dead"
type = "A"
addresses = [{ ip = "192.0.2.2", hc = "disabled" }]

[[domain.record]]
name = "good"
type = "CNAME"
addresses = [{ target = "app.example.test" }]

[[domain.record]]
name = "away"
type = "CNAME"
addresses = [{ target = "www.example.net" }]

[[domain.record]]
name = "missing"
type = "CNAME"
addresses = [{ target = "nothing.example.test" }]

[[domain.record]]
name = "down"
type = "CNAME"
addresses = [{ target = "dead.example.test" }]
"#,
    )
    .await;
    let run = run_gtm(&d, &["status", "--json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let of = |label: &str| -> serde_json::Value {
        status["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["record"] == label)
            .unwrap_or_else(|| panic!("{label} in {status}"))
            .clone()
    };
    assert_eq!(of("good.example.test/CNAME")["status"], "ok");
    assert_eq!(of("away.example.test/CNAME")["status"], "ok");
    for label in ["missing.example.test/CNAME", "down.example.test/CNAME"] {
        let r = of(label);
        assert_eq!(r["status"], "no_healthy", "{r}");
        assert_eq!(r["label"], "No healthy records", "{r}");
        assert!(
            r["decision"].as_str().unwrap().contains("answers nothing"),
            "{r}"
        );
    }
    let run = run_gtm(
        &d,
        &["record", "preview", "down.example.test", "CNAME", "--json"],
    );
    let p: serde_json::Value = serde_json::from_str(&run.stdout).expect("preview JSON");
    assert_eq!(p["status"], "no_healthy", "{p}");
    let run = run_gtm(&d, &["status"]);
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("missing.example.test/CNAME"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(line.contains("No healthy records"), "{line}");
}
