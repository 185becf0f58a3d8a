//! Writes under faults, with real processes on loopback (127.0.41–44.x):
//! a device that is behind cannot revert what the cluster committed,
//! `?version=N` is a cluster-wide compare-and-set, a write refused for no
//! quorum never applies, and a write through a follower follows a new
//! leader.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::{Proc, zone};

/// Three voters: gtm1 (leader after init) and gtm2 in dc1, gtm3 in dc2.
fn trio(net: u8) -> (tempfile::TempDir, Vec<Proc>) {
    let root = tempfile::tempdir().unwrap();
    let procs: Vec<Proc> = [("gtm1", "dc1"), ("gtm2", "dc1"), ("gtm3", "dc2")]
        .iter()
        .enumerate()
        .map(|(i, (name, dc))| {
            Proc::start(root.path(), name, dc, &format!("127.0.{net}.{}", i + 1))
        })
        .collect();
    procs[0].ok(&["cluster", "init"]);
    let token = procs[0].ok(&["cluster", "token"]);
    for p in &procs[1..] {
        p.ok(&["cluster", "join", &procs[0].api(), "--token", token.trim()]);
    }
    assert!(procs[0].apply(&zone("192.0.2.1")).status.success());
    (root, procs)
}

/// `PUT /api/v1/datacenters/<name>` through `p`: the status and the body.
async fn put_dc(p: &Proc, name: &str, query: &str) -> (u16, Value) {
    let token = std::fs::read_to_string(p.dir.join("api-token")).unwrap();
    let http = gtm_node::tls::http_client(None, Duration::from_secs(30)).unwrap();
    let response = http
        .put(format!("{}/api/v1/datacenters/{name}{query}", p.api()))
        .bearer_auth(token.trim())
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The datacenter names `p` serves now.
fn datacenters(p: &Proc) -> Vec<String> {
    let out: Value = serde_json::from_str(&p.ok(&["dc", "list", "--json"])).unwrap();
    out.as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str().map(String::from))
        .collect()
}

/// Waits (bounded) until every device has all of `names`.
fn until_everywhere(procs: &[&Proc], names: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for p in procs {
        loop {
            let have = datacenters(p);
            if names.iter().all(|n| have.iter().any(|h| h == n)) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} has {have:?}, not all of {names:?}",
                p.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn version(p: &Proc) -> u64 {
    let status: Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    status["version"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_is_behind_cannot_revert_committed_writes() {
    let (_root, mut procs) = trio(41);
    // A follower misses a write while it is down...
    procs[2].kill();
    let (status, body) = put_dc(&procs[1], "w1", "").await;
    assert_eq!(status, 200, "{body}");
    procs[2].restart();
    // ...and the first write through it, at once, keeps it.
    let (status, body) = put_dc(&procs[2], "w2", "").await;
    assert_eq!(status, 200, "{body}");
    let all: Vec<&Proc> = procs.iter().collect();
    until_everywhere(&all, &["w1", "w2"]);
    let exports: Vec<String> = procs.iter().map(|p| p.ok(&["config", "export"])).collect();
    assert!(exports.iter().all(|e| *e == exports[0]), "{exports:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_compare_and_set_is_checked_cluster_wide() {
    let (_root, procs) = trio(42);
    let v = version(&procs[0]);
    // Both devices are at version v: only the first write made against it
    // applies, whichever device takes the second.
    let (status, body) = put_dc(&procs[0], "w1", &format!("?version={v}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], v + 1);
    let (status, body) = put_dc(&procs[1], "w2", &format!("?version={v}")).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "conflict");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("at version {}, not {v}", v + 1)),
        "{message}"
    );
    let all: Vec<&Proc> = procs.iter().collect();
    until_everywhere(&all, &["w1"]);
    assert!(procs.iter().all(|p| !datacenters(p).contains(&"w2".into())));
    // Operator reads and elections do not move the version.
    assert_eq!(version(&procs[2]), v + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_refused_for_no_quorum_never_applies_later() {
    let (_root, mut procs) = trio(43);
    procs[1].kill();
    procs[2].kill();
    let (status, body) = put_dc(&procs[0], "lost", "").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "no-quorum");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing was applied")),
        "{body}"
    );
    procs[1].restart();
    procs[2].restart();
    // The next write commits; the refused one is nowhere, ever.
    let (status, body) = put_dc(&procs[1], "after", "").await;
    assert_eq!(status, 200, "{body}");
    let all: Vec<&Proc> = procs.iter().collect();
    until_everywhere(&all, &["after"]);
    for p in &procs {
        assert!(!datacenters(p).contains(&"lost".into()), "{}", p.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_a_follower_follows_a_new_leader() {
    let (_root, procs) = trio(44);
    let leader = procs[0].pid();
    // SIGSTOP the leader: the follower's write must reach the leader the
    // other two elect, within its deadline.
    nix_signal(leader, "STOP");
    let (status, body) = put_dc(&procs[1], "w1", "").await;
    nix_signal(leader, "CONT");
    assert_eq!(status, 200, "{body}");
    let all: Vec<&Proc> = procs.iter().collect();
    until_everywhere(&all, &["w1"]);
}

/// Sends a signal to a process we started, by its PID.
fn nix_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// A new user's first write on the demo device edits the demo
/// configuration: the demo's zones stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_write_on_the_demo_edits_the_demo_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let settings = gtm_model::node::NodeSettings {
        dns_listen: vec!["127.0.45.1:0".parse().unwrap()],
        api_listen: "127.0.45.1:0".parse().unwrap(),
        udp_workers: Some(1),
        ..gtm_model::node::NodeSettings::demo(dir.path().to_path_buf())
    };
    let device = gtm::device::Device::start(settings, true).await.unwrap();
    let demo = device.engine.config();
    assert!(!demo.domains.is_empty());
    let put = gtm_node::command::Action::Edit(gtm_node::command::Edit::Put {
        kind: gtm_node::command::Kind::Datacenter,
        name: "dc9".into(),
        json: r#"{"name":"dc9"}"#.into(),
        keep_children: false,
    });
    let actor = gtm_model::actor::Actor {
        user: "test".into(),
        device: "test1".into(),
    };
    let applied = device.replication.propose(actor, None, put).await.unwrap();
    assert_eq!(applied.changes, ["+ datacenter dc9"]);
    let after = device.engine.config();
    assert_eq!(after.domains, demo.domains);
    assert_eq!(after.datacenters.len(), demo.datacenters.len() + 1);
    device.stop().await;
}
