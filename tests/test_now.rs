//! Test now from where the check runs: two real devices in different
//! datacenters and a real HTTP backend on loopback. A check that runs in
//! dc2 is probed by dc2's device when dc1's is asked, and says so; an
//! address outside the asked device's `probe_networks` is probed by a
//! device that may probe it; when no device can, the error says which and
//! why.

use std::{
    process::Output,
    time::{Duration, Instant},
};

use crate::{backends::HttpBackend, cluster::Proc};

const BACKEND: &str = "127.0.125.9";

fn config(port: u16) -> String {
    format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "web-dc2"
type = "http"
port = {port}
interval = "1h"
timeout = "1s"
run_on = "dc2"

[[check]]
name = "web"
type = "http"
port = {port}
interval = "1h"
timeout = "1s"

[[domain]]
name = "pair.test"
nameservers = ["ns1.pair.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "192.0.2.1" }}]
"#
    )
}

/// `gtm check test NAME --address BACKEND --json` on `p`.
fn test_json(p: &Proc, check: &str) -> (Output, serde_json::Value) {
    let out = p.gtm(&["check", "test", check, "--address", BACKEND, "--json"]);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, json)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_now_probes_from_a_device_where_the_check_runs_and_names_it() {
    let web = HttpBackend::start_at(format!("{BACKEND}:0").parse().unwrap()).await;
    let port = web.addr.port();
    let root = tempfile::tempdir().unwrap();
    // gtm1 may probe only its own /30: the backend is outside its fence.
    let a = Proc::start_with(
        root.path(),
        "gtm1",
        "dc1",
        "127.0.125.1",
        "probe_networks = [\"127.0.125.0/30\"]",
    );
    let mut b = Proc::start(root.path(), "gtm2", "dc2", "127.0.125.2");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    a.apply_ok(&config(port));

    // A check that runs in dc2, asked of dc1's device: dc2's device probes.
    let (out, r) = test_json(&a, "web-dc2");
    assert!(out.status.success(), "{}: {}", stderr(&out), r);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["device"], "gtm2", "{r}");
    assert_eq!(r["datacenter"], "dc2", "{r}");
    assert_eq!(r["address"], BACKEND, "{r}");
    assert_eq!(r["forwarded"], "check web-dc2 runs in dc2", "{r}");
    assert_eq!(r["check"], format!("web-dc2@{BACKEND}"), "{r}");
    // The text says it too.
    let text = a.ok(&["check", "test", "web-dc2", "--address", BACKEND]);
    assert!(
        text.contains(&format!(
            "; probed {BACKEND} from gtm2 (dc2): check web-dc2 runs in dc2"
        )),
        "{text}"
    );
    // Asked of dc2's own device, it probes there, and says so.
    let (out, r) = test_json(&b, "web-dc2");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(r["device"], "gtm2", "{r}");
    assert!(r.get("forwarded").is_none(), "{r}");

    // A check not saved, that runs in dc2, goes there as well.
    let file = root.path().join("check.toml");
    std::fs::write(
        &file,
        format!("type = \"http\"\nport = {port}\nrun_on = \"dc2\"\n"),
    )
    .unwrap();
    let out = a.gtm(&[
        "check",
        "test",
        "--file",
        file.to_str().unwrap(),
        "--address",
        BACKEND,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["device"], "gtm2", "{r}");
    assert_eq!(r["check"], format!("unsaved@{BACKEND}"), "{r}");

    // A check that may run anywhere, against an address gtm1's fence keeps
    // out: gtm2 probes it.
    let (out, r) = test_json(&a, "web");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(r["device"], "gtm2", "{r}");
    let why = r["forwarded"].as_str().unwrap_or_default();
    assert!(
        why.starts_with(&format!(
            "on gtm1, {BACKEND} is outside the node setting probe_networks"
        )),
        "{r}"
    );
    // Inside gtm1's fence it is probed on gtm1 itself (nothing listens
    // there: an Error, from gtm1).
    let out = a.gtm(&["check", "test", "web", "--address", "127.0.125.3", "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["device"], "gtm1", "{r}");
    assert_eq!(r["address"], "127.0.125.3", "{r}");
    assert!(r.get("forwarded").is_none(), "{r}");

    // gtm2's fence keeps the backend out too: nowhere may probe it.
    let node = b.dir.join("node.toml");
    let settings = std::fs::read_to_string(&node).unwrap();
    std::fs::write(
        &node,
        format!("{settings}\nprobe_networks = [\"127.0.125.0/30\"]\n"),
    )
    .unwrap();
    // SAFETY: a signal to the PID of a child this test started.
    unsafe {
        libc::kill(libc::pid_t::try_from(b.pid()).unwrap(), libc::SIGHUP);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let refused = loop {
        let (out, r) = test_json(&a, "web");
        if !out.status.success() {
            break stderr(&out);
        }
        assert!(
            Instant::now() < deadline,
            "gtm2 never reloaded its fence: {r}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        refused.contains(&format!("{BACKEND} cannot be probed from anywhere: gtm1: ")),
        "{refused}"
    );
    assert!(
        refused.contains("; gtm2: ") && refused.matches("probe_networks").count() == 2,
        "{refused}"
    );
    // The check that runs in dc2 cannot be probed there either, and the
    // error says so (it is not probed from dc1 instead).
    let (out, _) = test_json(&a, "web-dc2");
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("check web-dc2 runs in dc2, and no device of dc2 could probe it: gtm2: ")
            && said.contains("probe_networks"),
        "{said}"
    );

    // dc2's only device gone: the error names the datacenter and why.
    b.kill();
    let (out, r) = test_json(&a, "web-dc2");
    assert!(!out.status.success(), "{r}");
    let said = stderr(&out);
    assert!(
        said.contains(
            "check web-dc2 runs in dc2, and no device of dc2 could probe it: gtm2: cannot reach it"
        ),
        "{said}"
    );
    drop(web);
}
