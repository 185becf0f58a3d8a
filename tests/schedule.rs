//! Scheduled operator actions with real `gtm serve` processes: a schedule
//! fires once on every device, its reverse at `until`, after leader
//! changes, restarts and a lost quorum (then late, and says so); a
//! cancelled one never fires.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hickory_server::proto::rr::RecordType;

use crate::{
    cluster::Proc,
    support::{answers, query, udp},
};

const CONFIG: &str = r#"
[[datacenter]]
name = "dc1"

[[check]]
name = "maint"
type = "manual"

[[domain]]
name = "pair.test"
nameservers = ["ns1.pair.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }, { ip = "192.0.2.2" }]
"#;

const BOTH: &[&str] = &["192.0.2.1", "192.0.2.2"];
const SECOND: &[&str] = &["192.0.2.2"];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

async fn answer(p: &Proc) -> Vec<String> {
    let mut a = answers(&udp(p.dns(), &query("www.pair.test.", RecordType::A)).await);
    a.sort();
    a
}

/// Waits (bounded) until `p` answers www with `want`.
async fn until_answers(p: &Proc, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = answer(p).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never answered {want:?}: {got:?}",
            p.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `gtm args` until it succeeds (bounded): a device may still be
/// electing a leader.
fn ok_eventually(p: &Proc, args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
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

/// The schedule `id` as `p` lists it, if it does.
fn listed(p: &Proc, id: u64) -> Option<serde_json::Value> {
    let list: serde_json::Value =
        serde_json::from_str(&ok_eventually(p, &["schedule", "list", "--json"])).unwrap();
    list.as_array()?.iter().find(|s| s["id"] == id).cloned()
}

/// The schedule `id` as `p` lists it.
fn schedule(p: &Proc, id: u64) -> serde_json::Value {
    listed(p, id).unwrap_or_else(|| panic!("no schedule {id} on {}", p.name))
}

/// Waits (bounded) until `p` lists schedule `id` with `check` true.
fn until_schedule(
    p: &Proc,
    id: u64,
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // A device that just started may not have caught up yet.
        let s = listed(p, id);
        if let Some(s) = s.as_ref().filter(|s| check(s)) {
            return s.clone();
        }
        assert!(
            Instant::now() < deadline,
            "schedule {id} on {}: {s:?}",
            p.name
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `gtm schedule add` through `p`; the new schedule's id.
fn add(p: &Proc, args: &[&str]) -> u64 {
    let mut all = vec!["schedule", "add"];
    all.extend_from_slice(args);
    let out = ok_eventually(p, &all);
    out.strip_prefix("schedule ")
        .and_then(|o| o.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"))
}

/// The events `p` logged itself that open with `words[0]` and contain
/// every one of `words`.
fn events(p: &Proc, words: &[&str]) -> Vec<String> {
    // One JSON event a line.
    let out = ok_eventually(p, &["logs", "--kind", "operator", "--json"]);
    out.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect::<Vec<_>>()
        .iter()
        .filter(|e| e["device"] == p.name.as_str())
        .filter_map(|e| e["text"].as_str())
        // The first words open the text; the others are anywhere in it.
        .filter(|t| words.first().is_none_or(|w| t.starts_with(w)))
        .filter(|t| words.iter().all(|w| t.contains(w)))
        .map(str::to_string)
        .collect()
}

fn fired(s: &serde_json::Value) -> bool {
    s["state"] == "fired"
}

fn start(root: &std::path::Path, names: &[(&str, &str)]) -> Vec<Proc> {
    let procs: Vec<Proc> = names
        .iter()
        .map(|(name, ip)| Proc::start(root, name, "dc1", ip))
        .collect();
    procs[0].ok(&["cluster", "init"]);
    for p in &procs[1..] {
        p.join(&procs[0]);
    }
    let out = procs[0].apply(CONFIG);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    procs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_once_on_a_pair_reverses_and_a_cancelled_one_never_fires() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = start(
        root.path(),
        &[("gtm1", "127.0.103.1"), ("gtm2", "127.0.103.2")],
    );
    for p in &procs {
        until_answers(p, BOTH).await;
    }
    let (a, b) = (&procs[0], &procs[1]);

    // Cancelled before its time (far off): never fires.
    let cancelled =
        tokio::task::block_in_place(|| add(b, &["--at", "+20s", "record", "drain", "192.0.2.2"]));
    tokio::task::block_in_place(|| {
        a.ok(&["schedule", "cancel", &cancelled.to_string()]);
    });

    // A drain at now + 2 s, back at now + 6 s, made through the follower.
    let id = tokio::task::block_in_place(|| {
        add(
            b,
            &[
                "--at",
                "+2s",
                "--until",
                "+6s",
                "record",
                "drain",
                "192.0.2.1",
                "--record",
                "www.pair.test/A",
            ],
        )
    });
    for p in [a, b] {
        until_answers(p, SECOND).await;
    }
    let s = tokio::task::block_in_place(|| until_schedule(a, id, |s| s["reversed"].is_object()));
    assert_eq!(s["state"], "fired", "{s}");
    assert_eq!(s["actor"]["user"], "admin", "{s}");
    assert_eq!(s["fired"]["device"], "gtm1", "the leader fires: {s}");
    for p in [a, b] {
        until_answers(p, BOTH).await;
    }
    tokio::task::block_in_place(|| {
        for p in [a, b] {
            let fired = events(
                p,
                &[&format!(
                    "schedule {id} (created by admin on gtm2) fired on gtm1"
                )],
            );
            assert_eq!(fired.len(), 1, "one firing event on {}: {fired:?}", p.name);
            let reversed = events(
                p,
                &[&format!(
                    "reverse of schedule {id} (created by admin on gtm2) fired"
                )],
            );
            assert_eq!(reversed.len(), 1, "{reversed:?}");
        }
        let table = a.ok(&["schedule", "list"]);
        assert!(
            table.contains("drain 192.0.2.1 of www.pair.test/A"),
            "{table}"
        );
        assert!(table.contains("cancelled"), "{table}");
    });

    // The cancelled one, past its time, never fired.
    let at = schedule(a, cancelled)["at_ms"].as_u64().unwrap();
    while now_ms() < at + 3_000 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = tokio::task::block_in_place(|| schedule(b, cancelled));
    assert_eq!(s["state"], "cancelled", "{s}");
    assert!(s["fired"].is_null(), "{s}");
    assert_eq!(answer(a).await, BOTH);
    // Cancelling it again changes nothing; an unknown id is refused.
    let out = a.gtm(&["schedule", "cancel", "999"]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");

    // Survives a restart of every device: pending through it, fires after.
    let id =
        tokio::task::block_in_place(|| add(a, &["--at", "+10s", "check", "set", "maint", "error"]));
    for p in procs.iter_mut() {
        p.kill();
    }
    for p in procs.iter_mut() {
        p.restart();
    }
    for p in &procs {
        tokio::task::block_in_place(|| until_schedule(p, id, fired));
    }
    tokio::task::block_in_place(|| {
        for p in &procs {
            let fired = events(
                p,
                &[&format!("schedule {id} (created by admin on gtm1) fired")],
            );
            assert_eq!(fired.len(), 1, "{}: {fired:?}", p.name);
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_fires_once_and_a_schedule_due_without_quorum_fires_late() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = start(
        root.path(),
        &[
            ("gtm1", "127.0.103.11"),
            ("gtm2", "127.0.103.12"),
            ("gtm3", "127.0.103.13"),
        ],
    );
    for p in &procs {
        until_answers(p, BOTH).await;
    }

    // The leader is killed before the time: the new leader fires it, once.
    let first = tokio::task::block_in_place(|| {
        add(&procs[1], &["--at", "+15s", "record", "drain", "192.0.2.1"])
    });
    procs[0].kill();
    let s = tokio::task::block_in_place(|| until_schedule(&procs[1], first, fired));
    assert_ne!(s["fired"]["device"], "gtm1", "{s}");
    for p in &procs[1..] {
        until_answers(p, SECOND).await;
        let fired = tokio::task::block_in_place(|| {
            events(
                p,
                &[&format!(
                    "schedule {first} (created by admin on gtm2) fired"
                )],
            )
        });
        assert_eq!(fired.len(), 1, "{}: {fired:?}", p.name);
    }

    // Due while only one of three runs: fires when quorum returns, late.
    let second = tokio::task::block_in_place(|| {
        add(
            &procs[1],
            &["--at", "+20s", "record", "undrain", "192.0.2.1"],
        )
    });
    procs[2].kill();
    let at = tokio::task::block_in_place(|| schedule(&procs[1], second))["at_ms"]
        .as_u64()
        .unwrap();
    while now_ms() < at + 5_000 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = tokio::task::block_in_place(|| schedule(&procs[1], second));
    let status = procs[1].ok(&["cluster", "status", "--json"]);
    assert_eq!(s["state"], "pending", "no quorum, no firing: {s}\n{status}");
    assert_eq!(answer(&procs[1]).await, SECOND);
    procs[2].restart();
    let s = tokio::task::block_in_place(|| until_schedule(&procs[1], second, fired));
    assert!(s["fired"]["late_ms"].as_u64().unwrap() >= 5_000, "{s}");
    for p in &procs[1..] {
        until_answers(p, BOTH).await;
        let fired = tokio::task::block_in_place(|| {
            events(
                p,
                &[
                    &format!("schedule {second} (created by admin on gtm2) fired"),
                    " late (no quorum",
                ],
            )
        });
        assert_eq!(fired.len(), 1, "{}: {fired:?}", p.name);
    }
    procs[0].restart();
    tokio::task::block_in_place(|| {
        let s = until_schedule(&procs[0], second, fired);
        assert_eq!(s["fired"], schedule(&procs[1], second)["fired"]);
    });
}

const TWO_DCS: &str = r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[domain]]
name = "dry.test"
nameservers = ["ns1.dry.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1", dc = "dc1" }, { ip = "198.51.100.1", dc = "dc2" }]

[[domain.record]]
name = "only1"
type = "A"
addresses = [{ ip = "192.0.2.5", dc = "dc1" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_dry_run_names_the_emptied_records_and_a_drain_that_empties_one_needs_force() {
    use crate::support::{TestDevice, run_gtm};
    let d = TestDevice::start(TWO_DCS).await;
    let drains = |d: &TestDevice| {
        let out = run_gtm(d, &["record", "drains", "--json"]);
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap()
    };
    let (dry, refused, address_dry) = tokio::task::block_in_place(|| {
        (
            run_gtm(&d, &["dc", "drain", "dc1", "--dry-run"]),
            run_gtm(&d, &["dc", "drain", "dc1"]),
            run_gtm(&d, &["record", "drain", "198.51.100.1", "--dry-run"]),
        )
    });
    assert_eq!(dry.code, Some(0), "{dry:?}");
    assert!(
        dry.stdout.contains("dry.test/A") || dry.stdout.contains("only1.dry.test/A"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains("www.dry.test/A: 192.0.2.1 198.51.100.1 → 198.51.100.1"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains("would leave with no answer: only1.dry.test/A"),
        "{}",
        dry.stdout
    );
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(
        refused.stderr.contains("only1.dry.test/A") && refused.stderr.contains("--force"),
        "{}",
        refused.stderr
    );
    assert!(
        address_dry
            .stdout
            .contains("www.dry.test/A: 192.0.2.1 198.51.100.1 → 192.0.2.1")
            && !address_dry.stdout.contains("no answer:"),
        "{}",
        address_dry.stdout
    );
    let unknown = tokio::task::block_in_place(|| run_gtm(&d, &["dc", "drain", "dc9", "--dry-run"]));
    assert_eq!(unknown.code, Some(5), "{unknown:?}");
    assert!(
        unknown.stderr.contains("no datacenter named \"dc9\""),
        "{}",
        unknown.stderr
    );
    assert_eq!(
        drains(&d),
        serde_json::json!([]),
        "dry runs and refusals change nothing"
    );
    let www = |d: &TestDevice| {
        let d = d.v4();
        async move {
            let mut a = answers(&udp(d, &query("www.dry.test.", RecordType::A)).await);
            a.sort();
            a
        }
    };
    assert_eq!(www(&d).await, ["192.0.2.1", "198.51.100.1"]);

    // The API's flag, and --force.
    let http = gtm_node::tls::http_client(None, Duration::from_secs(10)).unwrap();
    let api = std::fs::read_to_string(d.dir.path().join("api-address")).unwrap();
    let token = std::fs::read_to_string(d.dir.path().join("api-token")).unwrap();
    let preview: serde_json::Value = http
        .put(format!(
            "{}/api/v1/drain/datacenter?dry_run=true",
            api.trim()
        ))
        .bearer_auth(token.trim())
        .json(&serde_json::json!({"datacenter": "dc1", "drained": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // One device, judged now: the judgement per device.
    assert_eq!(preview["devices"][0]["device"], "test1", "{preview}");
    assert_eq!(preview["devices"][0]["basis"], "now", "{preview}");
    assert_eq!(
        preview["devices"][0]["emptied"],
        serde_json::json!(["only1.dry.test/A"]),
        "{preview}"
    );
    let forced = tokio::task::block_in_place(|| run_gtm(&d, &["dc", "drain", "dc1", "--force"]));
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert_eq!(drains(&d).as_array().unwrap().len(), 1);
    assert_eq!(www(&d).await, ["198.51.100.1"]);

    // A device in no cluster fires its schedules itself.
    let added = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["schedule", "add", "--at", "+1s", "dc", "undrain", "dc1"],
        )
    });
    assert_eq!(added.code, Some(0), "{added:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while www(&d).await != ["192.0.2.1", "198.51.100.1"] {
        assert!(Instant::now() < deadline, "the schedule never fired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let list = tokio::task::block_in_place(|| run_gtm(&d, &["schedule", "list", "--json"]));
    let list: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(list[0]["state"], "fired", "{list}");
    assert_eq!(list[0]["fired"]["device"], "test1", "{list}");

    // Bad times are refused, naming the value.
    let bad = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["schedule", "add", "--at", "tomorrow", "dc", "drain", "dc1"],
        )
    });
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(
        bad.stderr.contains("\"tomorrow\" is not a time"),
        "{}",
        bad.stderr
    );
}

const DRY_RUN: &str = r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "maint"
type = "manual"

[[domain]]
name = "dry.test"
nameservers = ["ns1.dry.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1", dc = "dc1" }, { ip = "198.51.100.1", dc = "dc2" }]

[[domain.record]]
name = "only1"
type = "A"
addresses = [{ ip = "192.0.2.5", dc = "dc1" }]

[[domain.record]]
name = "gated"
type = "A"
addresses = [{ ip = "198.51.100.7", dc = "dc2", hc = "check:maint" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_dry_run_says_what_it_would_change_now_refuses_as_an_add_and_adds_nothing() {
    use crate::support::{TestDevice, run_gtm};
    use serde_json::json;
    let d = TestDevice::start(DRY_RUN).await;
    let http = gtm_node::tls::http_client(None, Duration::from_secs(10)).unwrap();
    let api = std::fs::read_to_string(d.dir.path().join("api-address")).unwrap();
    let token = std::fs::read_to_string(d.dir.path().join("api-token")).unwrap();
    let (api, token) = (api.trim().to_string(), token.trim().to_string());
    let post = |query: &'static str, body: serde_json::Value| {
        let request = http
            .post(format!("{api}/api/v1/schedules{query}"))
            .bearer_auth(&token)
            .json(&body);
        async move {
            let answer = request.send().await.unwrap();
            let status = answer.status().as_u16();
            (status, answer.json::<serde_json::Value>().await.unwrap())
        }
    };
    let list = || {
        let request = http
            .get(format!("{api}/api/v1/schedules"))
            .bearer_auth(&token);
        async move {
            request
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    let before = list().await;

    // A drain: what it would be, what it would change now, the record it
    // would leave with no answer (a warning: a schedule fires even so).
    let drain = json!({"at": "+1h", "until": "+2h",
        "action": {"kind": "drain-datacenter", "datacenter": "dc1", "drained": true}});
    let (status, dry) = post("?dry_run=true", drain.clone()).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["what"], "drain datacenter dc1", "{dry}");
    assert_eq!(dry["reverse"], "undrain datacenter dc1", "{dry}");
    assert!(dry["at"].as_str().unwrap().ends_with('Z'), "{dry}");
    assert!(dry["until_ms"].as_u64() > dry["at_ms"].as_u64(), "{dry}");
    let changed: Vec<&str> = dry["now"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["record"].as_str())
        .collect();
    assert!(
        changed.contains(&"www.dry.test/A") && changed.contains(&"only1.dry.test/A"),
        "{dry}"
    );
    assert_eq!(dry["now"]["emptied"], json!(["only1.dry.test/A"]), "{dry}");
    assert!(
        dry["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("only1.dry.test/A")),
        "{dry}"
    );

    // A check set, with the body's flag: the check's state now and then,
    // and the record that reads it.
    let (status, dry) = post(
        "",
        json!({"at": "+1h", "dry_run": true,
            "action": {"kind": "check-set", "check": "maint", "state": "error"}}),
    )
    .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["now"]["check"]["check"], "maint", "{dry}");
    assert_eq!(dry["now"]["check"]["after"], "Error", "{dry}");
    assert!(dry.get("reverse").is_none(), "{dry}");

    // A resume: the record's hold now.
    let (status, dry) = post(
        "?dry_run=true",
        json!({"at": "+5m", "action": {"kind": "resume", "record": "www.dry.test/A"}}),
    )
    .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["now"]["hold"]["record"], "www.dry.test/A", "{dry}");
    assert_eq!(dry["now"]["hold"]["held"], false, "{dry}");

    // Refused as an add is, naming what is wrong, with the add's status.
    for (body, words) in [
        (
            json!({"at": "+1h", "action": {"kind": "drain-datacenter", "datacenter": "dc9", "drained": true}}),
            "no datacenter named \"dc9\"",
        ),
        (
            json!({"at": "+1h", "action": {"kind": "check-set", "check": "nope", "state": "ok"}}),
            "no check named \"nope\"",
        ),
        (
            json!({"at": "+1h", "action": {"kind": "resume", "record": "nope.dry.test/A"}}),
            "nope.dry.test/A",
        ),
        (
            json!({"at": "+2h", "until": "+1h", "action": {"kind": "drain-datacenter", "datacenter": "dc1", "drained": true}}),
            "--until must be after --at",
        ),
        (
            json!({"at": "2020-01-01T00:00:00Z", "action": {"kind": "drain-datacenter", "datacenter": "dc1", "drained": true}}),
            "at: 2020-01-01 00:00:00 UTC is in the past",
        ),
    ] {
        let (dry_status, dry) = post("?dry_run=true", body.clone()).await;
        let (add_status, add) = post("", body.clone()).await;
        assert!((400..500).contains(&dry_status), "{body}: {dry}");
        assert_eq!(dry_status, add_status, "{body}: {dry} / {add}");
        // The same words, but for the clock's reading.
        let words_of = |v: &serde_json::Value| {
            let m = v["message"].as_str().unwrap_or_default().to_string();
            m.split(" (now is").next().map(str::to_string)
        };
        assert_eq!(words_of(&dry), words_of(&add), "{body}");
        assert!(
            dry["message"].as_str().is_some_and(|m| m.contains(words)),
            "{body}: {dry}"
        );
    }
    assert_eq!(list().await, before, "dry runs and refusals add nothing");

    // The CLI prints the dry run as a drain's.
    let out = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &[
                "schedule",
                "add",
                "--at",
                "+1h",
                "--until",
                "+2h",
                "--dry-run",
                "dc",
                "drain",
                "dc1",
            ],
        )
    });
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.starts_with("dry run: drain datacenter dc1 at ")
            && out.stdout.contains("then undrain datacenter dc1 at ")
            && out
                .stdout
                .contains("www.dry.test/A: 192.0.2.1 198.51.100.1 → 198.51.100.1")
            && out
                .stdout
                .contains("would leave with no answer: only1.dry.test/A"),
        "{}",
        out.stdout
    );
    assert_eq!(list().await, before, "a dry run adds nothing");
}
