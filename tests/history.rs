//! Configuration history, rollback and audit on a pair of real gtm
//! processes: history is replicated state, the same on both devices, and
//! names the device that received each write.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Proc, until_answer};

/// `pair.test` with `www` at `ip` and the domain's TTL.
fn zone(ip: &str, ttl: u32) -> String {
    format!(
        "[[domain]]\nname = \"pair.test\"\nnameservers = [\"ns1.pair.test\"]\nttl = {ttl}\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"{ip}\" }}]\n"
    )
}

/// Applies through `p`; the version it was applied as.
fn apply(p: &Proc, text: &str) -> u64 {
    let out = p.apply(text);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "apply on {}: {}",
        p.name,
        String::from_utf8_lossy(&out.stderr)
    );
    version_in(&stdout)
}

fn version_in(stdout: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("applied as version "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no version in {stdout:?}"))
}

fn history(p: &Proc) -> Vec<Value> {
    serde_json::from_str(&p.ok(&["config", "history", "--json"])).unwrap()
}

fn versions(history: &[Value]) -> Vec<u64> {
    history
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect()
}

/// Waits (bounded) until `p`'s newest history entry is `version`.
fn until_history(p: &Proc, version: u64) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let h = history(p);
        if h.first().and_then(|e| e["version"].as_u64()) == Some(version) {
            return h;
        }
        assert!(
            Instant::now() < deadline,
            "{} never had version {version} in history: {h:?}",
            p.name
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (bounded) until `p` logged, as its own event, a Config event
/// containing `text`.
fn until_config_event(p: &Proc, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = p.ok(&["logs", "--kind", "config", "--json"]);
        let found = out
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|e| {
                e["device"] == p.name.as_str() && e["text"].as_str().unwrap_or("").contains(text)
            });
        if found {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never logged a config event with {text:?}: {out}",
            p.name
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_rollback_and_audit_are_the_same_on_both_devices_of_a_pair() {
    let root = tempfile::tempdir().unwrap();
    let keep = "history_keep = 4";
    let a = Proc::start_with(root.path(), "gtm1", "dc1", "127.0.71.1", keep);
    let mut b = Proc::start_with(root.path(), "gtm2", "dc1", "127.0.71.2", keep);
    a.ok(&["cluster", "init"]);
    b.join(&a);

    // Three versions through alternating devices.
    let v1 = apply(&a, &zone("192.0.2.1", 30));
    let v2 = apply(&b, &zone("192.0.2.1", 3600));
    let v3 = apply(&a, &zone("192.0.2.3", 3600));
    assert!(v1 < v2 && v2 < v3, "{v1} {v2} {v3}");
    let (ha, hb) = (until_history(&a, v3), until_history(&b, v3));
    assert_eq!(ha, hb, "history differs between the devices");
    let entry = |v: u64| ha.iter().find(|e| e["version"] == v).unwrap().clone();
    for (v, device) in [(v1, "gtm1"), (v2, "gtm2"), (v3, "gtm1")] {
        let e = entry(v);
        assert_eq!(e["actor"]["device"], device, "{e}");
        assert_eq!(e["actor"]["user"], "admin", "{e}");
        assert_eq!(e["what"], "apply", "{e}");
        assert_eq!(e["text_kept"], true, "{e}");
        assert!(e.get("text").is_none(), "history lists no texts: {e}");
    }
    let e2 = entry(v2);
    let changes: Vec<&str> = e2["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        changes
            .iter()
            .any(|c| c.contains("domain pair.test") && c.contains("ttl 30 → 3600")),
        "{changes:?}"
    );
    let table = b.ok(&["config", "history"]);
    assert!(
        table.contains("VERSION") && table.contains("admin on gtm2"),
        "{table}"
    );

    // show --version and diff, on the device that did not write them.
    assert_eq!(
        b.ok(&["config", "show", "--version", &v1.to_string()]),
        zone("192.0.2.1", 30)
    );
    assert!(b.ok(&["config", "show"]).contains("192.0.2.3"));
    let diff = b.ok(&["config", "diff", &v1.to_string(), &v2.to_string()]);
    assert!(diff.contains("ttl 30 → 3600"), "{diff}");
    let dry = b.ok(&["config", "rollback", &v1.to_string(), "--dry-run"]);
    assert!(
        dry.contains("ttl 3600 → 30") && dry.contains("dry run"),
        "{dry}"
    );
    assert_eq!(
        until_history(&b, v3).len(),
        ha.len(),
        "a dry run made a version"
    );

    // A rollback is a new version whose text is the old one, on both.
    let v4 = version_in(&b.ok(&["config", "rollback", &v1.to_string()]));
    assert_eq!(v4, v3 + 1);
    until_answer(&a, "192.0.2.1").await;
    until_answer(&b, "192.0.2.1").await;
    for p in [&a, &b] {
        let h = until_history(p, v4);
        assert_eq!(h[0]["what"], format!("rollback to {v1}"));
        assert_eq!(h[0]["actor"]["device"], "gtm2");
        assert_eq!(
            p.ok(&["config", "show", "--version", &v4.to_string()]),
            zone("192.0.2.1", 30)
        );
    }

    // Unknown versions: 404 not-found with what is kept.
    let out = a.gtm(&["config", "rollback", "999"]);
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("version 999 is not in the configuration history"),
        "{err}"
    );
    let token = std::fs::read_to_string(a.dir.join("api-token")).unwrap();
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let r = http
        .post(format!("{}/api/v1/config/rollback", a.api()))
        .bearer_auth(token.trim())
        .json(&serde_json::json!({"version": 999}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "not-found", "{body}");
    let out = b.gtm(&["config", "show", "--version", "999"]);
    assert_eq!(out.status.code(), Some(5));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("it keeps versions"), "{err}");

    // history_keep = 4: the fifth version drops the oldest.
    let v5 = apply(&a, &zone("192.0.2.5", 30));
    for p in [&a, &b] {
        let h = until_history(p, v5);
        assert_eq!(versions(&h), [v5, v4, v3, v2], "on {}", p.name);
        let out = p.gtm(&["config", "show", "--version", &v1.to_string()]);
        assert_eq!(out.status.code(), Some(5), "on {}", p.name);
    }

    // The fate of a command, by its id.
    let id = entry(v2)["command"].as_str().unwrap().to_string();
    let status = a.ok(&["command", "status", &id]);
    assert!(
        status.contains(&format!("applied as version {v2}")),
        "{status}"
    );
    let unknown = a.ok(&["command", "status", &"0".repeat(32)]);
    assert!(unknown.contains("unknown"), "{unknown}");
    let out = a.gtm(&["command", "status", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));

    // Audit: each device logs every version as its own event, naming the
    // device that received the write.
    for p in [&a, &b] {
        until_config_event(
            p,
            &format!("configuration version {v2} applied: apply by admin on gtm2"),
        );
        until_config_event(
            p,
            &format!("configuration version {v4} applied: rollback to {v1} by admin on gtm2"),
        );
        until_config_event(
            p,
            &format!("configuration version {v5} applied: apply by admin on gtm1"),
        );
    }

    // Kept versions are kept in parts, in the device's store: after a
    // crash and a restart they read back whole, the same as the peer's.
    b.kill();
    b.restart();
    for (v, text) in [(v2, zone("192.0.2.1", 3600)), (v4, zone("192.0.2.1", 30))] {
        assert_eq!(b.ok(&["config", "show", "--version", &v.to_string()]), text);
        assert_eq!(a.ok(&["config", "show", "--version", &v.to_string()]), text);
    }

    // A version a device answered for is in its event log by then: killed
    // at once, it still has the Config event it logged before the crash
    // (not one logged again after the restart).
    let v6 = apply(&b, &zone("192.0.2.6", 30));
    let killed_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    b.kill();
    b.restart();
    let text = format!("configuration version {v6} applied: apply by admin on gtm2");
    until_config_event(&b, &text);
    let out = b.ok(&["logs", "--kind", "config", "--json"]);
    let times: Vec<u64> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["device"] == "gtm2" && e["text"].as_str().unwrap_or("").contains(&text))
        .filter_map(|e| e["time_ms"].as_u64())
        .collect();
    assert!(
        times.len() == 1 && times[0] <= killed_ms,
        "one event, logged before the kill at {killed_ms}: {times:?}\n{out}"
    );

    // An apply of more changes than an entry keeps lines for (a record
    // added is two lines: its own and its address's): both devices
    // list its first 1,000 lines and one that counts the rest, the same
    // after a restart. Over 1 MiB (a comment pads it), so the follower
    // parses it as the entry reaches its log, before it commits, and
    // applies that parse (docs/cluster.md, "Bounded entries").
    let records: String = (0..1002)
        .map(|i| {
            format!(
                "\n[[domain.record]]\nname = \"r{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.7\" }}]\n"
            )
        })
        .collect();
    let padding = format!("# {}\n", "padding ".repeat(140_000));
    let v7 = apply(&a, &format!("{padding}{}{records}", zone("192.0.2.6", 30)));
    let changes = |p: &Proc| -> Vec<Value> {
        let h = until_history(p, v7);
        h[0]["changes"].as_array().unwrap().clone()
    };
    let on_a = changes(&a);
    assert_eq!(on_a.len(), 1001);
    assert_eq!(
        on_a[1000],
        format!(
            "… and 1004 more changes (2004 in all; `gtm config diff {v6} {v7}` lists them while history keeps both texts)"
        )
    );
    assert_eq!(changes(&b), on_a);
    // Both count them all: history's list, and each device's config event.
    for p in [&a, &b] {
        assert_eq!(until_history(p, v7)[0]["change_count"], 2004);
        until_config_event(
            p,
            &format!("configuration version {v7} applied: apply by admin on gtm1 (2004 changes)"),
        );
    }
    // The command's outcome, as each device keeps it, holds the same lines.
    let id = until_history(&a, v7)[0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let kept = |p: &Proc| -> Value {
        let out: Value =
            serde_json::from_str(&p.ok(&["command", "status", &id, "--json"])).unwrap();
        out["changes"].clone()
    };
    assert_eq!(kept(&a), Value::Array(on_a.clone()));
    assert_eq!(kept(&b), Value::Array(on_a.clone()));
    b.kill();
    b.restart();
    assert_eq!(changes(&b), on_a);
    assert_eq!(until_history(&b, v7)[0]["change_count"], 2004);
    assert_eq!(kept(&b), Value::Array(on_a.clone()));
}

/// A device in no cluster keeps the same history in its local map; a
/// rejected command's fate is `rejected` with the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_device_keeps_history_and_tells_the_fate_of_a_rejected_command() {
    use crate::support::{TestDevice, apply_text, run_gtm};
    let d = TestDevice::start(&zone("192.0.2.1", 30)).await;
    let v1 = apply_text(&d.device, &zone("192.0.2.1", 60))
        .await
        .unwrap()
        .version;
    let v2 = apply_text(&d.device, &zone("192.0.2.1", 3600))
        .await
        .unwrap()
        .version;
    let run = run_gtm(&d, &["config", "history", "--changes"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!("version {v2}"))
            && run.stdout.contains("  ~ domain pair.test: ttl 60 → 3600"),
        "{}",
        run.stdout
    );
    let run = run_gtm(&d, &["config", "diff", &v2.to_string(), &v1.to_string()]);
    assert!(run.stdout.contains("ttl 3600 → 60"), "{run:?}");

    // A rejected rollback: its outcome is kept under its command id.
    let run = run_gtm(&d, &["config", "rollback", "12345"]);
    assert_eq!(run.code, Some(5), "{run:?}");
    let kv = d.device.replication.state().await;
    let rejected: Vec<String> = kv
        .iter()
        .filter_map(|(k, v)| {
            let id = k.strip_prefix("outcome/")?;
            matches!(
                gtm_node::command::Outcome::decode(v),
                Ok(gtm_node::command::Outcome::Rejected(_))
            )
            .then(|| id.to_string())
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    let run = run_gtm(&d, &["command", "status", &rejected[0]]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("rejected")
            && run
                .stdout
                .contains("version 12345 is not in the configuration history"),
        "{}",
        run.stdout
    );
    let run = run_gtm(&d, &["command", "status", &rejected[0], "--json"]);
    let status: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(status["status"], "rejected");
    assert_eq!(status["error"]["error"], "not-found");
}

/// Version 0, the configuration a device started with (here the demo), is
/// kept in history once the first write makes version 1: it is listed,
/// shown, diffed against and rolled back to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configuration_a_device_started_with_is_version_0_of_its_history() {
    use crate::support::{TestDevice, apply_text, run_gtm};
    let d = TestDevice::start_demo().await;
    let started = d.device.engine.config();
    assert_eq!(d.device.engine.version(), 0);
    let v1 = apply_text(&d.device, &zone("192.0.2.1", 60))
        .await
        .unwrap()
        .version;
    assert_eq!(v1, 1);

    let run = run_gtm(&d, &["config", "history", "--json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let h: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(versions(&h), [1, 0], "{h:?}");
    assert_eq!(h[1]["what"], "the configuration the device started with");
    assert_eq!(h[1]["text_kept"], true);

    let run = run_gtm(&d, &["config", "show", "--version", "0"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(gtm_model::parse(&run.stdout).unwrap(), *started);

    let run = run_gtm(&d, &["config", "diff", "0", "1"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("pair.test"), "{}", run.stdout);
    assert!(run.stdout.contains("example.test"), "{}", run.stdout);

    let run = run_gtm(&d, &["config", "rollback", "0"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("applied as version 2"),
        "{}",
        run.stdout
    );
    assert_eq!(*d.device.engine.config(), *started);

    // Kept once: the next write adds no second version 0.
    apply_text(&d.device, &zone("192.0.2.1", 30)).await.unwrap();
    let run = run_gtm(&d, &["config", "history", "--json"]);
    let h: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(versions(&h), [3, 2, 1, 0], "{h:?}");
}
