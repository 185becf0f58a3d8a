//! Fault injection: three real `gtm serve` processes on
//! 127.0.77.x, each under its own group id; a writer loop of unique object
//! writes through every device in turn; a nemesis that kills -9 and
//! restarts devices, pauses the leader (SIGSTOP/SIGCONT) and cuts one
//! device off with nftables rules matching the sender's group id; then a
//! checker of what the cluster acknowledged. `scripts/chaos.sh --cycles N`
//! runs it long; docs/cluster.md ("Fault injection") says how to read it.
//! The same harness shows that no device logs a datacenter down because it
//! was itself paused, restarted or rejoined (`silence`).

mod checker;
mod client;
mod devices;
mod nemesis;
mod silence;

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use checker::check;
use client::{Target, WRITE_TIMEOUT, until_leader, until_up, writer};
use devices::{Device, Firewall, tools_missing};
use nemesis::{Nemesis, pause};

/// Fault cycles of the bounded run (`GTM_CHAOS_CYCLES` overrides it).
const CYCLES: usize = 3;

/// The bounded run: a few cycles of each fault, then the checker, which
/// fails on any acknowledged write missing from a device, exports that
/// differ, any rejected write present, or versions that do not rise.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_acknowledged_writes_survive_kills_pauses_and_partitions() {
    if cannot_run("chaos") {
        return;
    }
    let cycles = env_number("GTM_CHAOS_CYCLES", CYCLES as u64) as usize;
    let seed = env_number("GTM_CHAOS_SEED", fastrand::u64(..));
    eprintln!("chaos: {cycles} cycles, seed {seed}");

    let root = tempfile::tempdir().unwrap();
    let mut fw = Firewall::new("chaos");
    let http = gtm_node::tls::http_client(None, WRITE_TIMEOUT).unwrap();
    let (mut devices, targets) = start_cluster(root.path(), &http, devices::NET, false).await;

    let targets = Arc::new(targets);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..env_number("GTM_CHAOS_WRITERS", targets.len() as u64) as usize)
        .map(|w| tokio::spawn(writer(w, http.clone(), targets.clone(), stop.clone())))
        .collect();

    // Writes before the first fault: what is lost here is lost without any.
    tokio::time::sleep(Duration::from_secs(env_number("GTM_CHAOS_CALM_SECS", 2))).await;
    let mut nemesis = Nemesis::new(seed);
    for cycle in 0..cycles {
        let mut faults = [0, 1, 2];
        nemesis.rng.shuffle(&mut faults);
        for fault in faults {
            match fault {
                0 => nemesis.kill(&http, &mut devices, &targets).await,
                1 => nemesis.stop_leader(&http, &devices, &targets).await,
                _ => nemesis.partition(&http, &devices, &targets, &mut fw).await,
            }
            // Let the cluster settle before the next fault.
            tokio::time::sleep(pause(&mut nemesis.rng, 1000, 2000)).await;
            until_leader(&http, &targets).await;
        }
        eprintln!("chaos: cycle {} of {cycles} done", cycle + 1);
    }

    stop.store(true, Ordering::Relaxed);
    let mut writes = Vec::new();
    for w in writers {
        writes.extend(w.await.unwrap());
    }
    // Everything healed, running and not paused before the checker.
    fw.heal();
    for (d, t) in devices.iter_mut().zip(targets.iter()) {
        d.signal(libc::SIGCONT);
        if !d.alive() {
            d.spawn();
            until_up(&http, t, Duration::from_secs(30)).await;
        }
    }
    until_leader(&http, &targets).await;
    let verdict = check(&http, &targets, &writes).await;

    for line in &nemesis.log {
        eprintln!("chaos: {line}");
    }
    let summary = verdict.summary(&nemesis.failovers);
    eprintln!("chaos: {summary}");
    eprintln!(
        "chaos: {} leader kills measured, {} without a new leader within 20 s",
        nemesis.failovers.len(),
        nemesis.failovers_missed,
    );
    eprintln!("chaos: {}", verdict.details());
    if std::env::var_os("GTM_CHAOS_KEEP").is_some() {
        eprintln!("chaos: data kept in {}", root.keep().display());
    }
    assert!(
        verdict.acknowledged > 0,
        "no write was acknowledged: {summary}"
    );
    let failures = verdict.failures();
    assert!(failures.is_empty(), "{summary}\n{}", failures.join("\n"));
}

/// A write sent to a device that the cluster commits but that device cannot
/// install (every voter's traffic to it dropped, so no log entry reaches
/// it) is answered `applied` with `installed: false`, and the device says
/// why in its events; once the cut heals, it installs the write and its
/// next write is answered `installed: true`. The device is a learner, so
/// being cut off starts no election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_write_a_device_cannot_install_is_answered_not_installed() {
    if cannot_run("installed") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut fw = Firewall::new("installed");
    let http = gtm_node::tls::http_client(None, WRITE_TIMEOUT).unwrap();
    let (devices, targets) = start_cluster(root.path(), &http, devices::NET_INSTALLED, true).await;
    let (cut, through) = (&devices[2], &targets[2]);
    let put = |name: String| {
        let http = http.clone();
        let t = through.clone();
        async move {
            let r = http
                .put(format!("{}/api/v1/datacenters/{name}", t.api))
                .bearer_auth(&t.token)
                .json(&serde_json::json!({ "name": name }))
                .timeout(WRITE_TIMEOUT)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().await.unwrap())
        }
    };
    let serves = |name: String| {
        let http = http.clone();
        let t = through.clone();
        async move {
            client::get_json(
                &http,
                &t,
                &format!("/api/v1/datacenters/{name}"),
                Duration::from_secs(2),
            )
            .await
            .is_some()
        }
    };

    // Cut off by every voter, the learner still reaches the leader, whose
    // answers go back to 127.0.0.1. It forwards only to a leader it heard
    // from within an election timeout: a write that found none was refused
    // before it was proposed (no-quorum), and is tried again after the cut
    // heals and the learner hears from the leader again.
    let mut answer = None;
    for attempt in 0..5 {
        fw.drop_traffic(&devices[0], cut);
        fw.drop_traffic(&devices[1], cut);
        let name = format!("cut{attempt}");
        let (status, body) = put(name.clone()).await;
        if status == 200 {
            answer = Some((name, body));
            break;
        }
        assert_eq!(body["error"], "no-quorum", "{status}: {body}");
        fw.heal();
        let deadline = Instant::now() + Duration::from_secs(20);
        while client::leader_seen_by(&http, through).await.is_none() {
            assert!(
                Instant::now() < deadline,
                "the learner found no leader again"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let (name, body) = answer.expect("no write reached the leader through the cut-off learner");
    assert_eq!(body["applied"], true, "{body}");
    assert_eq!(body["installed"], false, "{body}");
    assert!(
        !serves(name.clone()).await,
        "the cut-off device serves {name}"
    );
    let events = client::get_text(&http, through, "/api/v1/events")
        .await
        .unwrap();
    assert!(
        events.contains("was committed") && events.contains("has not installed it"),
        "{events}"
    );
    assert!(fw.dropped() > 0, "the rules dropped nothing");

    // Healed: the leader sends it what it missed.
    fw.heal();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !serves(name.clone()).await {
        assert!(
            Instant::now() < deadline,
            "{name} never installed after the cut healed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, body) = put("after".into()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["installed"], true, "{body}");
}

/// Whether this machine lacks what the harness needs (nft, setpriv, root):
/// the test `what` then skips, except under CI, where it fails.
fn cannot_run(what: &str) -> bool {
    let Some(missing) = tools_missing() else {
        return false;
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "{what}: the test needs nft, setpriv and root: {missing}"
    );
    eprintln!("{what}: skipped, {missing}");
    true
}

/// A number from the environment, or `default`.
fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Starts the three devices (a pair in dc1, one in dc2) on the loopback
/// block `net` and makes them a cluster as an operator does: `cluster
/// init`, `token`, `join` (the third `--learner` when `learner`).
async fn start_cluster(
    root: &Path,
    http: &reqwest::Client,
    net: &str,
    learner: bool,
) -> (Vec<Device>, Vec<Target>) {
    let mut devices: Vec<Device> = ["dc1", "dc1", "dc2"]
        .iter()
        .enumerate()
        .map(|(i, dc)| Device::new(net, root, i, dc))
        .collect();
    for d in &mut devices {
        d.spawn();
    }
    let mut targets = Vec::new();
    for d in &devices {
        // The API token is written at the first start.
        let token_file = d.dir.join("api-token");
        let deadline = Instant::now() + Duration::from_secs(30);
        let token = loop {
            if let Ok(t) = std::fs::read_to_string(&token_file)
                && !t.trim().is_empty()
            {
                break t.trim().to_string();
            }
            assert!(Instant::now() < deadline, "{} wrote no api-token", d.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let t = Target {
            name: d.name.clone(),
            api: d.api(),
            token,
        };
        assert!(
            until_up(http, &t, Duration::from_secs(30)).await,
            "{} did not start",
            d.name
        );
        targets.push(t);
    }
    devices[0].ok(&["cluster", "init"]);
    let token = devices[0].ok(&["cluster", "token"]);
    let first = devices[0].api();
    for (i, d) in devices.iter().enumerate().skip(1) {
        let mut args = vec!["cluster", "join", &first, "--token", token.trim()];
        if learner && i == 2 {
            args.push("--learner");
        }
        d.ok(&args);
    }
    assert!(
        until_leader(http, &targets).await.is_some(),
        "the cluster elected no leader"
    );
    (devices, targets)
}
