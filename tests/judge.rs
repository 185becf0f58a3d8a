//! Operator actions judged on every device, with three real `gtm serve`
//! processes whose health views differ: gtm2's `probe_networks` fence keeps
//! it from probing dc1's address, so it answers `edge.judge.test` from dc2
//! only while gtm1 and gtm3 answer both. A drain of dc2 sent to gtm1 is
//! refused naming gtm2; a schedule of it likewise; a schedule judged fine
//! when added is skipped when its firing would empty a record on gtm2;
//! with gtm2 paused, it is judged from its last report.

use std::time::{Duration, Instant};

use hickory_server::proto::rr::RecordType;

use crate::{
    cluster::Proc,
    support::{answers, query, udp},
};

const NET: &str = "127.0.91";

fn config() -> String {
    format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "port"
type = "tcp"
port = 18080
interval = "500ms"
timeout = "400ms"
failures = 1
successes = 1

[[check]]
name = "gate"
type = "manual"

[[domain]]
name = "judge.test"
nameservers = ["ns1.judge.test"]

[[domain.record]]
name = "edge"
type = "A"
addresses = [
  {{ ip = "{NET}.11", dc = "dc1", hc = "check:port" }},
  {{ ip = "{NET}.22", dc = "dc2", hc = "check:port" }},
  {{ ip = "{NET}.33", dc = "dc2", hc = "check:gate" }},
]
"#
    )
}

/// A TCP backend on `ip`:18080 that accepts every connection, until the
/// test ends.
async fn backend(ip: &str) -> tokio::task::JoinHandle<()> {
    let listener = tokio::net::TcpListener::bind(format!("{ip}:18080"))
        .await
        .unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            drop(stream);
        }
    })
}

async fn answer(p: &Proc) -> Vec<String> {
    let mut got = answers(&udp(p.dns(), &query("edge.judge.test.", RecordType::A)).await);
    got.sort();
    got
}

async fn until(p: &Proc, want: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = answer(p).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never answered edge with {want:?}: {got:?}",
            p.name
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn run(p: &Proc, args: &[&str]) -> (bool, String, String) {
    let out = tokio::task::block_in_place(|| p.gtm(args));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Waits (bounded) until `gtm schedule list --json` shows schedule `id`
/// done (not pending), and returns it.
async fn until_done(p: &Proc, id: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out, err) = run(p, &["schedule", "list", "--json"]);
        assert!(ok, "{err}");
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        if let Some(s) = list
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id && s["state"] != "pending")
        {
            return s.clone();
        }
        assert!(
            Instant::now() < deadline,
            "schedule {id} never fired: {list}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_that_empties_a_record_on_another_device_is_refused_naming_it() {
    let _b1 = backend(&format!("{NET}.11")).await;
    let _b2 = backend(&format!("{NET}.22")).await;
    let root = tempfile::tempdir().unwrap();
    let mut a = Proc::start(root.path(), "gtm1", "dc1", &format!("{NET}.1"));
    let fence = format!("probe_networks = [\"{NET}.22/32\", \"{NET}.33/32\"]");
    let mut b = Proc::start_with(root.path(), "gtm2", "dc1", &format!("{NET}.2"), &fence);
    let c = Proc::start(root.path(), "gtm3", "dc2", &format!("{NET}.3"));
    a.ok(&["cluster", "init"]);
    b.join(&a);
    c.join(&a);
    a.apply_ok(&config());
    let all = |ips: &[&str]| -> Vec<String> { ips.iter().map(|i| format!("{NET}.{i}")).collect() };
    until(&a, &all(&["11", "22", "33"])).await;
    until(&c, &all(&["11", "22", "33"])).await;
    // gtm2 may not probe dc1's address: it answers from dc2 only.
    until(&b, &all(&["22", "33"])).await;
    let dc2 = format!("{NET}.22");

    // The dry run through gtm1 shows gtm2 would answer nothing. gtm3 is
    // asked too.
    let (ok, out, err) = run(&a, &["dc", "drain", "dc2", "--dry-run"]);
    assert!(ok, "{err}");
    assert!(out.contains("gtm2:\n  edge.judge.test/A:"), "{out}");
    assert!(out.contains("→ (no answer)"), "{out}");
    assert!(out.contains("gtm3:\n  edge.judge.test/A:"), "{out}");
    assert!(
        out.contains(
            "would leave with no answer: edge.judge.test/A on gtm2 (a drain needs --force)"
        ),
        "{out}"
    );
    // The drain itself is refused, naming the device and the record.
    let (ok, _, err) = run(&a, &["dc", "drain", "dc2"]);
    assert!(!ok, "the drain went through");
    assert!(
        err.contains("drain datacenter dc2 would leave 1 record(s) with no answer: edge.judge.test/A on gtm2; nothing was changed"),
        "{err}"
    );
    assert_eq!(answer(&b).await, all(&["22", "33"]), "refused, yet changed");

    // So is a schedule of it, with the same words.
    let (ok, _, err) = run(
        &a,
        &["schedule", "add", "--at", "+1h", "dc", "drain", "dc2"],
    );
    assert!(!ok, "the schedule was added");
    assert!(
        err.contains("edge.judge.test/A on gtm2; nothing was changed"),
        "{err}"
    );

    // A schedule judged fine when added (gtm2 keeps the gated address) is
    // skipped when it fires, once the gate closed: it would empty the
    // record on gtm2 then.
    let (ok, out, err) = run(
        &a,
        &[
            "schedule",
            "add",
            "--at",
            "+4s",
            "record",
            "drain",
            &dc2,
            "--record",
            "edge.judge.test/A",
        ],
    );
    assert!(ok, "{err}");
    let id: u64 = out
        .strip_prefix("schedule ")
        .and_then(|o| o.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    a.ok(&["check", "set", "gate", "error"]);
    until(&b, &all(&["22"])).await;
    let s = until_done(&a, id).await;
    assert_eq!(s["state"], "failed", "{s}");
    assert_eq!(s["fired"]["skipped"], true, "{s}");
    let why = s["fired"]["result"].as_str().unwrap();
    assert!(why.contains("edge.judge.test/A on gtm2"), "{why}");
    let listed = run(&a, &["schedule", "list"]).1;
    assert!(listed.contains("skipped"), "{listed}");
    assert_eq!(
        answer(&b).await,
        all(&["22"]),
        "a skipped firing changed answers"
    );
    // Every device logs it as a warning.
    for p in [&a, &b, &c] {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (ok, out, _) = run(p, &["logs", "--json"]);
            let logged = ok
                && out
                    .lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .any(|e| {
                        e["severity"] == "warning"
                            && e["text"].as_str().is_some_and(|t| {
                                t.contains(&format!("schedule {id}")) && t.contains("skipped")
                            })
                    });
            if logged {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} logged no skip: {out}",
                p.name
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // An object edit that would empty the record on gtm2 (it answers
    // dc2's checked address only now) is refused naming it, through gtm3.
    let (ok, _, err) = run(
        &c,
        &["record", "address", "delete", "edge.judge.test", "A", &dc2],
    );
    assert!(!ok, "the edit went through");
    assert!(
        err.contains(&format!(
            "delete address {dc2} of edge.judge.test/A would leave 1 record(s) with no answer: edge.judge.test/A on gtm2;"
        )),
        "{err}"
    );
    let (ok, out, err) = run(
        &c,
        &[
            "record",
            "address",
            "delete",
            "edge.judge.test",
            "A",
            &dc2,
            "--dry-run",
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("answers on every device:"), "{out}");
    assert!(
        out.contains("would leave with no answer: edge.judge.test/A on gtm2"),
        "{out}"
    );
    a.ok(&["check", "set", "gate", "ok"]);
    until(&b, &all(&["22", "33"])).await;

    // A configuration that keeps only dc1's address: gtm2 would answer
    // nothing. Refused through gtm3 naming gtm2; forced, applied.
    let dc1_only = config().replace(
        &format!(
            "  {{ ip = \"{NET}.22\", dc = \"dc2\", hc = \"check:port\" }},\n  {{ ip = \"{NET}.33\", dc = \"dc2\", hc = \"check:gate\" }},\n"
        ),
        "",
    );
    assert_ne!(dc1_only, config());
    let file = root.path().join("dc1-only.toml");
    std::fs::write(&file, &dc1_only).unwrap();
    let file = file.to_str().unwrap();
    let (ok, out, err) = run(&c, &["config", "apply", file, "--dry-run"]);
    assert!(ok, "{err}");
    assert!(out.contains("gtm2:\n  edge.judge.test/A:"), "{out}");
    let (ok, _, err) = run(&c, &["config", "apply", file]);
    assert!(!ok, "the apply went through");
    assert!(
        err.contains(
            "apply configuration would leave 1 record(s) with no answer: edge.judge.test/A on gtm2;"
        ),
        "{err}"
    );
    let (ok, out, err) = run(&c, &["config", "apply", file, "--force"]);
    assert!(ok, "{err}");
    let forced = out
        .lines()
        .find_map(|l| l.strip_prefix("applied as version "))
        .unwrap_or_else(|| panic!("{out}"))
        .trim()
        .to_string();
    until(&b, &[]).await;
    until(&a, &all(&["11"])).await;
    a.apply_ok(&config());
    until(&b, &all(&["22", "33"])).await;

    // A rollback to that version is judged as an apply is.
    let (ok, out, err) = run(&a, &["config", "rollback", &forced, "--dry-run"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("would leave with no answer: edge.judge.test/A on gtm2"),
        "{out}"
    );
    let (ok, _, err) = run(&a, &["config", "rollback", &forced]);
    assert!(!ok, "the rollback went through");
    assert!(
        err.contains(&format!(
            "roll back to version {forced} would leave 1 record(s) with no answer: edge.judge.test/A on gtm2;"
        )),
        "{err}"
    );
    assert_eq!(answer(&b).await, all(&["22", "33"]), "refused, yet changed");

    // With gtm2 paused, it is judged from its last report, which says how
    // old it is; the drain is still refused naming it.
    // SAFETY: a signal to the PID of a child this test started.
    unsafe {
        libc::kill(b.pid() as libc::pid_t, libc::SIGSTOP);
    }
    let (ok, out, err) = run(&a, &["dc", "drain", "dc2", "--dry-run"]);
    let (refused, _, why) = run(&a, &["dc", "drain", "dc2"]);
    // SAFETY: as above.
    unsafe {
        libc::kill(b.pid() as libc::pid_t, libc::SIGCONT);
    }
    assert!(ok, "{err}");
    assert!(
        out.contains("gtm2 (did not answer; judged from its report"),
        "{out}"
    );
    assert!(!refused, "the drain went through");
    assert!(
        why.contains("edge.judge.test/A on gtm2 (judged from its report"),
        "{why}"
    );

    // Forced, the drain is made: gtm2 answers nothing, gtm1 dc1's address.
    a.ok(&["dc", "drain", "dc2", "--force"]);
    until(&a, &all(&["11"])).await;
    until(&b, &[]).await;
    a.ok(&["dc", "undrain", "dc2"]);
    until(&b, &all(&["22", "33"])).await;

    // A forced schedule keeps its force across a restart of the device it
    // was added through (the leader), and fires though it empties the
    // record on gtm2.
    let (ok, out, err) = run(
        &a,
        &[
            "schedule", "add", "--at", "+6s", "--force", "dc", "drain", "dc2",
        ],
    );
    assert!(ok, "{err}");
    let id: u64 = out
        .strip_prefix("schedule ")
        .and_then(|o| o.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    tokio::task::block_in_place(|| {
        a.terminate();
        a.restart();
    });
    let s = until_done(&c, id).await;
    assert_eq!(s["state"], "fired", "{s}");
    assert_eq!(s["force"], true, "{s}");
    until(&b, &[]).await;
    c.ok(&["dc", "undrain", "dc2"]);
    until(&b, &all(&["22", "33"])).await;
    b.terminate();
}
