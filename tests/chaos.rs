//! Fault injection: three real `gtm serve` processes on
//! 127.0.77.x, each under its own group id; a writer loop of unique object
//! writes through every device in turn; a nemesis that kills -9 and
//! restarts devices, pauses the leader (SIGSTOP/SIGCONT) and cuts one
//! device off with nftables rules matching the sender's group id; then a
//! checker of what the cluster acknowledged. `scripts/chaos.sh --cycles N`
//! runs it long; docs/cluster.md ("Fault injection") says how to read it.

mod checker;
mod client;
mod devices;
mod nemesis;

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
    if let Some(missing) = tools_missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the chaos test needs nft, setpriv and root: {missing}"
        );
        eprintln!("chaos: skipped, {missing}");
        return;
    }
    let cycles = env_number("GTM_CHAOS_CYCLES", CYCLES as u64) as usize;
    let seed = env_number("GTM_CHAOS_SEED", fastrand::u64(..));
    eprintln!("chaos: {cycles} cycles, seed {seed}");

    let root = tempfile::tempdir().unwrap();
    let mut fw = Firewall::new();
    let http = gtm_node::tls::http_client(None, WRITE_TIMEOUT).unwrap();
    let (mut devices, targets) = start_cluster(root.path(), &http).await;

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

/// A number from the environment, or `default`.
fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Starts the three devices (a pair in dc1, one in dc2) and makes them a
/// cluster as an operator does: `cluster init`, `token`, `join`.
async fn start_cluster(root: &Path, http: &reqwest::Client) -> (Vec<Device>, Vec<Target>) {
    let mut devices: Vec<Device> = ["dc1", "dc1", "dc2"]
        .iter()
        .enumerate()
        .map(|(i, dc)| Device::new(root, i, dc))
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
    for d in &devices[1..] {
        d.ok(&[
            "cluster",
            "join",
            &devices[0].api(),
            "--token",
            token.trim(),
        ]);
    }
    assert!(
        until_leader(http, &targets).await.is_some(),
        "the cluster elected no leader"
    );
    (devices, targets)
}
