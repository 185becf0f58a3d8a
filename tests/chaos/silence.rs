//! A device judges another datacenter down only by silence it was awake to
//! hear: the harness's three devices (a pair in dc1, a remote one in dc2)
//! through a pause of the remote device (SIGSTOP, SIGCONT by its PID), a
//! restart, a leave and a join again, with no `datacenter … is down` in
//! any device's events; and a datacenter whose devices are really killed
//! is still reported down.

use std::time::{Duration, Instant};

use super::{
    cannot_run,
    client::{Target, WRITE_TIMEOUT, get_json, until_up},
    devices::{self, Device, Firewall},
    start_cluster,
};

/// The silence after which a datacenter is down
/// (`gtm_node::peers::DEVICE_SILENT_AFTER`), and two report periods
/// beside it: a verdict after a fault is taken within this.
const JUDGED_WITHIN: Duration = Duration::from_secs(6 + 2 + 2);

/// The datacenter events on `d`: its own and every peer's it holds.
fn datacenter_logs(d: &Device) -> String {
    d.ok(&["logs", "--kind", "datacenter"])
}

/// The datacenter events `d` logged itself.
fn own_datacenter_logs(d: &Device) -> String {
    d.ok(&["logs", "--kind", "datacenter", "--device", &d.name])
}

/// How many peers `t` heard from lately (its status's `reachable`).
async fn heard_by(http: &reqwest::Client, t: &Target) -> usize {
    get_json(http, t, "/api/v1/status", Duration::from_secs(2))
        .await
        .and_then(|s| {
            s["peers"]
                .as_array()
                .map(|ps| ps.iter().filter(|p| p["reachable"] == true).count())
        })
        .unwrap_or(0)
}

/// Waits (bounded) until every device heard lately from both others.
async fn until_all_hear(http: &reqwest::Client, targets: &[Target]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for t in targets {
        while heard_by(http, t).await < 2 {
            assert!(
                Instant::now() < deadline,
                "{} did not hear from both peers",
                t.name
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Watches the datacenter events of `devices` (read with `logs`) for
/// [`JUDGED_WITHIN`] after `what`: an `is down` fails the test at once.
async fn no_datacenter_down(devices: &[&Device], logs: fn(&Device) -> String, what: &str) {
    let until = Instant::now() + JUDGED_WITHIN;
    loop {
        for d in devices {
            let logs = logs(d);
            assert!(
                !logs.contains(" is down"),
                "after {what}, {} logged a datacenter down:\n{logs}",
                d.name
            );
        }
        if Instant::now() >= until {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits (bounded) until `d`'s log (`serve.log`) says `text` `count` times.
async fn until_logged(d: &Device, text: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(d.dir.join("serve.log")).unwrap_or_default();
        if log.matches(text).count() >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never logged {count} × {text:?}:\n{log}",
            d.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Paused, restarted, out and back in: no device logs a datacenter down,
/// since none ever was. A remote device stopped for longer than the
/// silence limit, and that finds no report of dc1 waiting when it resumes
/// (the reports sent while it was stopped are dropped: otherwise they
/// reach it as it resumes, and hide the case), does not call dc1 down
/// either: dc1 did report, the remote device was not listening. Then
/// dc1's devices are killed, and the remote device says dc1 is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_was_paused_restarted_or_rejoined_logs_no_datacenter_down() {
    if cannot_run("silence") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mut fw = Firewall::new("silence");
    let http = gtm_node::tls::http_client(None, WRITE_TIMEOUT).unwrap();
    let (mut devices, targets) =
        start_cluster(root.path(), &http, devices::NET_SILENCE, false).await;
    until_all_hear(&http, &targets).await;
    {
        let (a, b, c) = (&devices[0], &devices[1], &devices[2]);
        no_datacenter_down(&[a, b, c], datacenter_logs, "the cluster formed").await;

        // The remote device stopped for 3 s.
        c.signal(libc::SIGSTOP);
        tokio::time::sleep(Duration::from_secs(3)).await;
        c.signal(libc::SIGCONT);
        until_all_hear(&http, &targets).await;
        no_datacenter_down(&[a, b, c], datacenter_logs, "a 3 s pause of gtm3").await;
    }

    // A device of dc1 restarted.
    devices[1].kill();
    devices[1].spawn();
    assert!(
        until_up(&http, &targets[1], Duration::from_secs(30)).await,
        "gtm2 did not start again"
    );
    until_all_hear(&http, &targets).await;
    {
        let (a, b, c) = (&devices[0], &devices[1], &devices[2]);
        no_datacenter_down(&[a, b, c], datacenter_logs, "a restart of gtm2").await;

        // The remote device leaves the cluster and joins it again. It
        // stays out past the silence limit: every report it holds is
        // older than that when it is back.
        c.ok(&["cluster", "leave"]);
        tokio::time::sleep(Duration::from_secs(8)).await;
        let token = a.ok(&["cluster", "token"]);
        c.ok(&["cluster", "join", &a.api(), "--token", token.trim()]);
        until_all_hear(&http, &targets).await;
        no_datacenter_down(&[a, b, c], datacenter_logs, "gtm3 left and joined again").await;

        // Stopped for longer than the silence limit, with what dc1 sends it
        // meanwhile dropped: dc1 may say dc2 was silent (it was), but the
        // remote device was not listening, so it does not say dc1 was.
        c.signal(libc::SIGSTOP);
        fw.drop_traffic(a, c);
        fw.drop_traffic(b, c);
        tokio::time::sleep(Duration::from_secs(9)).await;
        c.signal(libc::SIGCONT);
        // It saw its own stall, and judged (after its round of reports,
        // which dc1 takes) before dc1's reports reach it again.
        until_logged(c, "this device did not run for", 1).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while heard_by(&http, &targets[0]).await < 2 {
            assert!(
                Instant::now() < deadline,
                "gtm1 never heard from gtm3 again"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(fw.dropped() > 0, "the rules dropped nothing");
        fw.heal();
        until_all_hear(&http, &targets).await;
        no_datacenter_down(&[c], own_datacenter_logs, "a 9 s pause of gtm3").await;
    }

    // dc1 really goes: both its devices killed (kill -9).
    devices[0].kill();
    devices[1].kill();
    let c = &devices[2];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logs = own_datacenter_logs(c);
        if logs.contains("datacenter dc1 is down (no report from ") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gtm3 never said dc1 is down:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
