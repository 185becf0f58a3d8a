//! Operator actions as replicated state, with two real `gtm serve`
//! processes: drains, manual check states and failback resume made through
//! one device are applied by the other, and survive restarts and kill -9.

use std::time::{Duration, Instant};

use hickory_server::proto::rr::RecordType;

use crate::{
    cluster::Proc,
    support::{answers, query, udp},
};

const CONFIG: &str = r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "maint"
type = "manual"

[[scenario]]
name = "dc1-maint"
condition = "maint"

[[domain]]
name = "pair.test"
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.pair.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }, { ip = "192.0.2.2" }]

[[domain.record]]
name = "dr"
type = "A"
mode = "disaster-recovery"
dr_condition = "scenario:dc1-maint"
dr_on_no_healthy = false
failback = "manual"
addresses = [
  { ip = "192.0.2.20", dc = "dc1" },
  { ip = "198.51.100.20", dc = "dc2" },
]
"#;

/// A domain of more records than a report's page
/// (`gtm_engine::record_changes::PAGE`), before the pair's own: each
/// device's list goes to the other in pages, and the records the test
/// watches are on the last.
fn config() -> String {
    let mut text =
        String::from("[[domain]]\nname = \"bulk.test\"\nnameservers = [\"ns1.bulk.test\"]\n");
    for i in 0..gtm_engine::record_changes::PAGE + 50 {
        text.push_str(&format!(
            "[[domain.record]]\nname = \"r{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.50\" }}]\n"
        ));
    }
    text + CONFIG
}

const MAIN: &[&str] = &["192.0.2.20"];
const DR: &[&str] = &["198.51.100.20"];

/// The sorted answers of `name` on `p`.
async fn answer(p: &Proc, name: &str) -> Vec<String> {
    let mut a = answers(&udp(p.dns(), &query(name, RecordType::A)).await);
    a.sort();
    a
}

/// Waits (bounded) until `p` answers `name` with `want`.
async fn until(p: &Proc, name: &str, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = answer(p, name).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never answered {name} with {want:?}: {got:?}",
            p.name
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `gtm args` until it succeeds (bounded): after a restart the pair
/// may still be electing a leader.
fn ok_eventually(p: &Proc, args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let out = p.gtm(args);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into();
        }
        assert!(
            Instant::now() < deadline,
            "gtm {args:?} on {}: {}",
            p.name,
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The state of check `name` as `p` lists it (lower case).
fn check_state(p: &Proc, name: &str) -> String {
    let list: serde_json::Value =
        serde_json::from_str(&p.ok(&["check", "list", "--json"])).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .map(|c| c["state"].to_string().to_lowercase())
        .unwrap_or_default()
}

/// `record`'s status as `viewer` shows it: its own (`from` none) or as
/// device `from` last reported it.
fn record_status(viewer: &Proc, from: Option<&str>, record: &str) -> String {
    let status: serde_json::Value =
        serde_json::from_str(&viewer.ok(&["status", "--json"])).unwrap();
    let records = match from {
        None => &status["records"],
        Some(device) => status["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["device"] == device)
            .map_or(&serde_json::Value::Null, |p| &p["records"]),
    };
    records
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["record"] == record)
        .map(|r| format!("{} {}", r["status"], without_reasons(&r["active"])))
        .unwrap_or_default()
}

/// Record states or addresses without each address's `reason`: a peer's
/// addresses are explained by the device showing them (`answered by gtm2
/// at its last report`), the device's own by their checks.
fn without_reasons(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Array(list) => list.iter().map(without_reasons).collect(),
        serde_json::Value::Object(o) => o
            .iter()
            .filter(|(k, _)| *k != "reason")
            .map(|(k, v)| (k.clone(), without_reasons(v)))
            .collect(),
        other => other.clone(),
    }
}

/// Waits (bounded) until `viewer` shows every record's state of `peer` as
/// `peer` itself shows them, and returns how many there are.
async fn until_peer_list(viewer: &Proc, peer: &Proc) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (own, seen) = tokio::task::block_in_place(|| {
            let own: serde_json::Value =
                serde_json::from_str(&peer.ok(&["status", "--json"])).unwrap();
            let theirs: serde_json::Value =
                serde_json::from_str(&viewer.ok(&["status", "--json"])).unwrap();
            let seen = theirs["peers"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["device"] == peer.name.as_str())
                .map(|p| p["records"].clone())
                .unwrap_or_default();
            (without_reasons(&own["records"]), without_reasons(&seen))
        });
        let count = own.as_array().map_or(0, Vec::len);
        if count > 0 && own == seen {
            return count;
        }
        assert!(
            Instant::now() < deadline,
            "{} shows {} of {}'s {count} records",
            viewer.name,
            seen.as_array().map_or(0, Vec::len),
            peer.name
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits (bounded) until `viewer` shows `peer`'s state of `record` as
/// `peer` itself shows it, and returns it.
async fn until_peer_view(viewer: &Proc, peer: &Proc, record: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (own, seen) = tokio::task::block_in_place(|| {
            (
                record_status(peer, None, record),
                record_status(viewer, Some(&peer.name), record),
            )
        });
        if !own.is_empty() && own == seen {
            return own;
        }
        assert!(
            Instant::now() < deadline,
            "{} shows {}'s {record} as {seen:?}, not {own:?}",
            viewer.name,
            peer.name
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_are_replicated_and_survive_restarts() {
    let root = tempfile::tempdir().unwrap();
    let mut a = Proc::start(root.path(), "gtm1", "dc1", "127.0.72.1");
    let mut b = Proc::start(root.path(), "gtm2", "dc1", "127.0.72.2");
    a.ok(&["cluster", "init"]);
    let token = a.ok(&["cluster", "token"]);
    b.ok(&["cluster", "join", &a.api(), "--token", token.trim()]);
    a.apply_ok(&config());
    let both = ["192.0.2.1", "192.0.2.2"];
    until(&a, "www.pair.test.", &both).await;
    until(&b, "www.pair.test.", &both).await;
    // Each holds the other's whole list, taken in pages.
    for (viewer, peer) in [(&b, &a), (&a, &b)] {
        let count = until_peer_list(viewer, peer).await;
        assert!(count > gtm_engine::record_changes::PAGE, "{count}");
    }
    let version = a.ok(&["config", "export"]);

    // A drain through A: B stops answering the address too.
    tokio::task::block_in_place(|| a.ok(&["record", "drain", "192.0.2.1"]));
    until(&b, "www.pair.test.", &["192.0.2.2"]).await;
    until(&a, "www.pair.test.", &["192.0.2.2"]).await;
    assert_eq!(
        a.ok(&["config", "export"]),
        version,
        "an operator action is not a configuration change"
    );

    // An undrain of another scope is refused and names the active drain.
    let wrong = tokio::task::block_in_place(|| {
        b.gtm(&[
            "record",
            "undrain",
            "192.0.2.1",
            "--record",
            "www.pair.test/A",
        ])
    });
    assert!(!wrong.status.success());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("the active drains are: 192.0.2.1 (every record)"),
        "{stderr}"
    );
    assert_eq!(answer(&a, "www.pair.test.").await, ["192.0.2.2"]);
    assert_eq!(answer(&b, "www.pair.test.").await, ["192.0.2.2"]);

    // Both list it, with who made it.
    let listed: serde_json::Value = serde_json::from_str(&tokio::task::block_in_place(|| {
        b.ok(&["record", "drains", "--json"])
    }))
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["address"], "192.0.2.1");
    assert_eq!(listed[0]["actor"]["device"], "gtm1");
    let table = tokio::task::block_in_place(|| a.ok(&["record", "drains"]));
    assert!(
        table.contains("192.0.2.1") && table.contains("every record"),
        "{table}"
    );

    // B restarted: still drained.
    tokio::task::block_in_place(|| {
        b.kill();
        b.restart();
    });
    until(&b, "www.pair.test.", &["192.0.2.2"]).await;

    // A manual check set through B: A's answers follow.
    until(&a, "dr.pair.test.", MAIN).await;
    until_peer_view(&b, &a, "dr.pair.test/A").await;
    tokio::task::block_in_place(|| ok_eventually(&b, &["check", "set", "maint", "ok"]));
    until(&a, "dr.pair.test.", DR).await;
    until(&b, "dr.pair.test.", DR).await;
    // Each shows the other's record states as they change: reported as
    // changes since the whole list each already holds.
    for (viewer, peer) in [(&b, &a), (&a, &b)] {
        let seen = until_peer_view(viewer, peer, "dr.pair.test/A").await;
        assert!(
            seen.starts_with("\"dr\" ") && seen.contains("\"ip\":\"198.51.100.20\""),
            "{seen}"
        );
    }

    // A check set, then kill -9 at once: the state is kept after restart.
    tokio::task::block_in_place(|| {
        ok_eventually(&a, &["check", "set", "maint", "error"]);
        a.kill();
        a.restart();
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check_state(&a, "maint").contains("error") {
        assert!(
            Instant::now() < deadline,
            "maint came back {}",
            check_state(&a, "maint")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // B holds DR (manual failback) until a resume, made through A.
    assert_eq!(answer(&b, "dr.pair.test.").await, DR);
    // The hold is per-device health state, and survives a kill -9: the
    // restarted B still answers DR although its condition has cleared.
    tokio::task::block_in_place(|| {
        b.kill();
        b.restart();
    });
    assert_eq!(answer(&b, "dr.pair.test.").await, DR);
    let preview = tokio::task::block_in_place(|| b.ok(&["record", "preview", "dr.pair.test", "A"]));
    assert!(preview.contains("held by manual failback"), "{preview}");
    tokio::task::block_in_place(|| ok_eventually(&a, &["record", "resume", "dr.pair.test", "A"]));
    until(&b, "dr.pair.test.", MAIN).await;
    until(&a, "dr.pair.test.", MAIN).await;
    // Both restarted since (new processes, so their lists go in pages
    // again, the watched record on the last), and the views still follow
    // each change.
    for (viewer, peer) in [(&b, &a), (&a, &b)] {
        let seen = until_peer_view(viewer, peer, "dr.pair.test/A").await;
        assert!(seen.contains("192.0.2.20"), "{seen}");
    }

    // The undrain that names the drain exactly puts the address back.
    tokio::task::block_in_place(|| ok_eventually(&b, &["record", "undrain", "192.0.2.1"]));
    until(&a, "www.pair.test.", &both).await;
    until(&b, "www.pair.test.", &both).await;
    let listed = tokio::task::block_in_place(|| a.ok(&["record", "drains", "--json"]));
    assert_eq!(listed.trim(), "[]");
}
