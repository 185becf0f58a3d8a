//! RFC 2136 dynamic update (docs/transfer.md, "Dynamic update") through a
//! real pair of devices, sent by real clients: BIND's nsupdate and Knot's
//! knsupdate, signed with TSIG keys made by `gtm tsig add`. The pair
//! listens on 127.0.196.1 and .2.

use std::time::{Duration, Instant};

use hickory_server::proto::rr::RecordType;

use crate::cluster::{Proc, pair};
use crate::support::{answers, query, tool, udp};

const ZONE: &str = r#"
[[domain]]
name = "upd.test"
nameservers = ["ns1.upd.test"]
updates = [
  { key = "acme", name = "_acme-challenge", subdomains = true, types = ["TXT"] },
  { key = "acme", name = "k8s", subdomains = true, types = ["A", "AAAA", "TXT", "CNAME"] },
]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }]
"#;

/// A key made on `p`: its secret (base64), printed once.
fn tsig_add(p: &Proc, name: &str) -> String {
    let out = p.ok(&["tsig", "add", name]);
    out.lines().next().unwrap_or_default().trim().to_string()
}

/// Runs `program` (nsupdate or knsupdate) with `args` and `script` on its
/// standard input: whether it succeeded, and what it printed.
async fn run(program: &std::path::Path, args: &[&str], script: &str) -> (bool, String) {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the update client starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(script.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the update client ends")
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// An nsupdate session against `p` (over TCP with `tcp`), signed with
/// `key` when given: `lines` between the server/zone lines and `send`.
async fn nsupdate(p: &Proc, key: Option<(&str, &str)>, tcp: bool, lines: &str) -> (bool, String) {
    let nsupdate = tool("nsupdate", "bind9-dnsutils").expect("nsupdate");
    let dns = p.dns();
    let script = format!(
        "server {} {}\nzone upd.test\n{lines}\nsend\n",
        dns.ip(),
        dns.port()
    );
    let y = key.map(|(name, secret)| format!("hmac-sha256:{name}:{secret}"));
    let mut args: Vec<&str> = Vec::new();
    if let Some(y) = &y {
        args.extend(["-y", y]);
    }
    if tcp {
        args.push("-v");
    }
    run(&nsupdate, &args, &script).await
}

/// Waits (bounded) until `p` answers `name` of `rtype` with `want`.
async fn until(p: &Proc, name: &str, rtype: RecordType, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = answers(&udp(p.dns(), &query(name, rtype)).await);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} answered {name} {rtype} with {got:?}, not {want:?}",
            p.name
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_through_either_device_are_granted_judged_and_replicated() {
    let (Some(_), Some(knsupdate)) = (
        tool("nsupdate", "bind9-dnsutils"),
        tool("knsupdate", "knot-dnsutils"),
    ) else {
        return;
    };
    let (_root, a, mut b) = pair(196);
    let acme = tsig_add(&a, "acme");
    let other = tsig_add(&a, "other");
    a.apply_ok(ZONE);
    until(&b, "www.upd.test.", RecordType::A, &["192.0.2.1"]).await;
    let key = Some(("acme", acme.as_str()));
    let challenge = "_acme-challenge.upd.test.";

    // A TXT add through the follower, over UDP: proposed through the
    // leader, answered once applied; both devices serve it.
    let (ok, out) = nsupdate(
        &b,
        key,
        false,
        &format!("update add {challenge} 60 TXT \"token-1\""),
    )
    .await;
    assert!(ok, "{out}");
    until(&b, challenge, RecordType::TXT, &["token-1"]).await;
    until(&a, challenge, RecordType::TXT, &["token-1"]).await;

    // An A add through the leader with knsupdate (TCP).
    let script = format!(
        "server {} {}\nzone upd.test.\nupdate add host.k8s.upd.test. 60 A 192.0.2.10\nsend\nquit\n",
        a.dns().ip(),
        a.dns().port()
    );
    let y = format!("hmac-sha256:acme:{acme}");
    let (ok, out) = run(&knsupdate, &["-v", "-y", &y], &script).await;
    assert!(ok, "{out}");
    until(&a, "host.k8s.upd.test.", RecordType::A, &["192.0.2.10"]).await;
    until(&b, "host.k8s.upd.test.", RecordType::A, &["192.0.2.10"]).await;

    // Prerequisites are judged with the change: the name is in use, an
    // RRset that does not exist, one whose values differ.
    let cases = [
        (format!("prereq nxdomain {challenge}"), "YXDOMAIN"),
        (format!("prereq yxrrset {challenge} A"), "NXRRSET"),
        (
            format!("prereq yxrrset {challenge} TXT \"other\""),
            "NXRRSET",
        ),
        (format!("prereq nxrrset {challenge} TXT"), "YXRRSET"),
        ("prereq yxdomain gone.k8s.upd.test.".to_string(), "NXDOMAIN"),
    ];
    for (prereq, code) in cases {
        let lines = format!("{prereq}\nupdate add {challenge} 60 TXT \"token-2\"");
        let (ok, out) = nsupdate(&b, key, true, &lines).await;
        assert!(
            !ok && out.contains(&format!("update failed: {code}")),
            "{prereq}: {out}"
        );
    }
    // One that holds: the change is made.
    let lines = format!(
        "prereq yxrrset {challenge} TXT \"token-1\"\nupdate add {challenge} 60 TXT \"token-2\""
    );
    let (ok, out) = nsupdate(&a, key, false, &lines).await;
    assert!(ok, "{out}");
    until(&b, challenge, RecordType::TXT, &["token-1", "token-2"]).await;

    // A key without a grant for that name or type, and an unsigned update,
    // are refused and change nothing.
    let refused = [
        (
            Some(("other", other.as_str())),
            format!("update add {challenge} 60 TXT \"x\""),
        ),
        (key, "update add www.upd.test. 60 A 192.0.2.99".to_string()),
        (
            key,
            "update add host.k8s.upd.test. 60 MX 10 mx.upd.test.".to_string(),
        ),
        (None, format!("update add {challenge} 60 TXT \"x\"")),
    ];
    for (k, lines) in refused {
        let (ok, out) = nsupdate(&b, k, false, &lines).await;
        assert!(
            !ok && out.contains("update failed: REFUSED"),
            "{lines}: {out}"
        );
    }
    until(&a, "www.upd.test.", RecordType::A, &["192.0.2.1"]).await;
    until(&a, challenge, RecordType::TXT, &["token-1", "token-2"]).await;

    // Deletes: one value, then the RRset; the record goes when empty.
    let (ok, out) = nsupdate(
        &a,
        key,
        false,
        &format!("update delete {challenge} TXT \"token-1\""),
    )
    .await;
    assert!(ok, "{out}");
    until(&b, challenge, RecordType::TXT, &["token-2"]).await;
    let (ok, out) = nsupdate(&b, key, true, &format!("update delete {challenge} TXT")).await;
    assert!(ok, "{out}");
    until(&a, challenge, RecordType::TXT, &[]).await;
    until(&b, challenge, RecordType::TXT, &[]).await;
    let export = a.ok(&["config", "export"]);
    assert!(!export.contains("token-"), "{export}");

    // History names the key as the actor of each update's version.
    let history = a.ok(&["config", "history"]);
    assert!(history.contains("key:acme"), "{history}");
    let json: serde_json::Value =
        serde_json::from_str(&b.ok(&["config", "history", "--json"])).unwrap();
    let text = json.to_string();
    assert!(
        text.contains("dynamic update of upd.test (key acme)"),
        "{text}"
    );

    // A key a grant names cannot be deleted.
    let out = a.gtm(&["tsig", "delete", "acme"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("update grants"));

    // A crash and a restart: the change is still served.
    b.kill();
    b.restart();
    until(&b, "host.k8s.upd.test.", RecordType::A, &["192.0.2.10"]).await;
}

/// An update is judged on every device before it is proposed, as an API
/// write is: gtm2 may not probe .11 (its `probe_networks` fence), so it
/// answers `edge.k8s` from .22 alone. A delete of .22 sent to gtm1 would
/// leave gtm2 with no answer: REFUSED, nothing changed. A delete of .11
/// leaves both an answer: applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_that_would_empty_a_record_on_another_device_is_refused() {
    if tool("nsupdate", "bind9-dnsutils").is_none() {
        return;
    }
    const NET: &str = "127.0.188";
    let backend = async |ip: &str| {
        crate::backends::HttpBackend::start_at(format!("{ip}:18080").parse().unwrap()).await
    };
    let _b1 = backend(&format!("{NET}.11")).await;
    let _b2 = backend(&format!("{NET}.22")).await;
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", &format!("{NET}.1"));
    let fence = format!("probe_networks = [\"{NET}.22/32\"]");
    let b = Proc::start_with(root.path(), "gtm2", "dc1", &format!("{NET}.2"), &fence);
    a.ok(&["cluster", "init"]);
    b.join(&a);
    let acme = tsig_add(&a, "acme");
    a.apply_ok(&format!(
        r#"{ZONE}
[[check]]
name = "port"
type = "tcp"
port = 18080
interval = "500ms"
timeout = "400ms"
failures = 1
successes = 1

[[domain.record]]
name = "edge.k8s"
type = "A"
addresses = [{{ ip = "{NET}.11", hc = "check:port" }}, {{ ip = "{NET}.22", hc = "check:port" }}]
"#
    ));
    let (eleven, twenty_two) = (format!("{NET}.11"), format!("{NET}.22"));
    let edge = "edge.k8s.upd.test.";
    until(&a, edge, RecordType::A, &[&eleven, &twenty_two]).await;
    until(&b, edge, RecordType::A, &[&twenty_two]).await;
    let key = Some(("acme", acme.as_str()));

    let (ok, out) = nsupdate(
        &a,
        key,
        false,
        &format!("update delete {edge} A {twenty_two}"),
    )
    .await;
    assert!(!ok, "the update went through: {out}");
    assert!(out.contains("REFUSED"), "{out}");
    let history = a.ok(&["config", "history"]);
    assert!(
        !history.contains("key:acme"),
        "refused, yet a version: {history}"
    );
    until(&b, edge, RecordType::A, &[&twenty_two]).await;

    let (ok, out) = nsupdate(&b, key, false, &format!("update delete {edge} A {eleven}")).await;
    assert!(ok, "{out}");
    until(&a, edge, RecordType::A, &[&twenty_two]).await;
    until(&b, edge, RecordType::A, &[&twenty_two]).await;
}
