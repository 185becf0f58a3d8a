//! A domain transferred in from a primary during a migration
//! (docs/transfer.md, "Transfer in"): from a real NSD, a real pair serves
//! the primary's zone with its own records on top, follows its changes by
//! its SOA timers, and answers the same after `gtm domain promote`; from a
//! real Knot, the pair follows NOTIFY and IXFR; from a dnspython primary,
//! a transfer with unsigned messages between signed ones verifies.

use std::{
    net::SocketAddr,
    process::{Command, Stdio},
};

use hickory_server::proto::rr::RecordType;

use crate::{cluster::Proc, support::*};

/// The primary's zone at `serial`, with `extra` lines; refreshed every
/// second by its secondaries.
fn legacy_zone(serial: u32, extra: &str) -> String {
    format!(
        "$ORIGIN legacy.test.\n$TTL 300\n\
         @ SOA ns1 hostmaster {serial} 1 1 86400 60\n\
         @ NS ns1\n\
         @ MX 10 mail\n\
         @ TXT \"v=spf1 mx -all\"\n\
         ns1 A 192.0.2.53\n\
         mail A 198.51.100.25\n\
         www A 198.51.100.1\n\
         www TXT \"served by the old primary\"\n\
         _sip._udp SRV 0 5 5060 mail\n\
         {extra}"
    )
}

/// The key `legacy`, made on `p`: its secret (base64), for the primary.
fn legacy_key(p: &Proc) -> String {
    p.ok(&["tsig", "add", "legacy"])
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `legacy.test` transferred in from `addr` with the key `legacy`, and
/// gtm's own www A on top of the primary's.
fn legacy_domain(addr: SocketAddr) -> String {
    format!(
        r#"
[[domain]]
name = "legacy.test"
nameservers = ["ns1.legacy.test"]
primary = {{ address = "{addr}", key = "legacy" }}

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "192.0.2.80" }}]
"#
    )
}

/// The records of each (name, type) the judge asks both devices for.
const ASKED: [(&str, RecordType); 8] = [
    ("legacy.test.", RecordType::MX),
    ("legacy.test.", RecordType::TXT),
    ("legacy.test.", RecordType::NS),
    ("mail.legacy.test.", RecordType::A),
    ("www.legacy.test.", RecordType::A),
    ("www.legacy.test.", RecordType::TXT),
    ("_sip._udp.legacy.test.", RecordType::SRV),
    ("new.legacy.test.", RecordType::A),
];

/// What a device answers to each of [`ASKED`], sorted.
async fn answered(p: &Proc) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (name, rtype) in ASKED {
        let m = udp(p.dns(), &query(name, rtype)).await;
        let mut got = answers(&m);
        got.sort();
        out.push((format!("{name} {rtype} {}", m.metadata.response_code), got));
    }
    out
}

fn has(said: &[(String, Vec<String>)], what: &str, value: &str) -> bool {
    said.iter()
        .any(|(w, v)| w.starts_with(what) && v.iter().any(|x| x == value))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_serves_a_zone_transferred_in_follows_its_primary_and_promotes_it() {
    if !std::path::Path::new("/usr/sbin/nsd").exists() {
        assert!(std::env::var_os("CI").is_none(), "nsd is not installed");
        return;
    }
    let (_dir, a, mut b) = crate::cluster::pair(197);
    let secret = legacy_key(&a);
    let addr: SocketAddr = format!("127.0.197.53:{}", free_port_on("127.0.197.53"))
        .parse()
        .unwrap();
    let mut primary = crate::records::Nsd::start_with_key(
        "legacy.test",
        &legacy_zone(1, ""),
        addr,
        ("legacy", &secret),
    );
    a.apply_ok(&legacy_domain(addr));
    // Both devices serve the transferred zone, the own record on top.
    for p in [&a, &b] {
        until("the transferred zone", async || {
            let said = answered(p).await;
            has(&said, "mail.legacy.test. A", "198.51.100.25")
                && has(&said, "www.legacy.test. A", "192.0.2.80")
                && !has(&said, "www.legacy.test. A", "198.51.100.1")
                && has(&said, "www.legacy.test. TXT", "served by the old primary")
                && has(&said, "legacy.test. MX", "10 mail.legacy.test.")
                && has(
                    &said,
                    "_sip._udp.legacy.test. SRV",
                    "0 5 5060 mail.legacy.test.",
                )
        })
        .await;
    }
    let exported = a.ok(&["config", "export"]);
    assert!(exported.contains("transferred = true"), "{exported}");
    assert!(exported.contains("serial = 1"), "{exported}");
    let history = a.ok(&["config", "history"]);
    assert!(history.contains("transfer of legacy.test"), "{history}");

    // A device killed and started again serves the committed transfer.
    b.kill();
    b.restart();
    until("the transferred zone after a restart", async || {
        has(&answered(&b).await, "mail.legacy.test. A", "198.51.100.25")
    })
    .await;

    // The primary changes: the pair follows at the SOA refresh.
    primary.serve(&legacy_zone(2, "new A 198.51.100.7\n"));
    for p in [&a, &b] {
        until("the primary's change", async || {
            has(&answered(p).await, "new.legacy.test. A", "198.51.100.7")
        })
        .await;
    }

    // Promoted: the same answers, now the domain's own, on both devices,
    // and with the primary gone.
    let before = answered(&a).await;
    assert_eq!(before, answered(&b).await);
    let promoted = b.ok(&["domain", "promote", "legacy.test"]);
    assert!(promoted.contains("version"), "{promoted}");
    drop(primary);
    let exported = a.ok(&["config", "export"]);
    assert!(!exported.contains("transferred"), "{exported}");
    assert!(!exported.contains("primary ="), "{exported}");
    for p in [&a, &b] {
        assert_eq!(answered(p).await, before);
    }
    // A second promotion is refused, naming why.
    let again = a.gtm(&["domain", "promote", "legacy.test"]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("has no primary"),
        "{again:?}"
    );
}

/// A real Knot primary of `legacy.test` that sends NOTIFY (from its own
/// address) to `notify` and keeps the differences between the versions of
/// its zone file (IXFR), transfers signed with the key `legacy`.
struct KnotPrimary {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl KnotPrimary {
    fn start(
        binary: &std::path::Path,
        text: &str,
        secret: &str,
        addr: SocketAddr,
        notify: &[SocketAddr],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let remotes: String = notify
            .iter()
            .enumerate()
            .map(|(i, to)| {
                format!(
                    "  - id: gtm{i}\n    address: {}@{}\n    key: legacy\n    via: {}\n",
                    to.ip(),
                    to.port(),
                    addr.ip()
                )
            })
            .collect();
        let ids: Vec<String> = (0..notify.len()).map(|i| format!("gtm{i}")).collect();
        let conf = format!(
            "server:\n    rundir: \"{d}\"\n    listen: {ip}@{port}\n    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n\
             database:\n    storage: \"{d}/db\"\n\
             control:\n    listen: \"{d}/knot.sock\"\n\
             log:\n  - target: \"{d}/knot.log\"\n    any: info\n\
             key:\n  - id: legacy\n    algorithm: hmac-sha256\n    secret: {secret}\n\
             remote:\n{remotes}\
             acl:\n  - id: xfr\n    address: 127.0.0.0/8\n    key: legacy\n    action: transfer\n\
             template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-load: difference\n    journal-content: changes\n    semantic-checks: off\n\
             zone:\n  - domain: legacy.test\n    file: \"{d}/legacy.test.zone\"\n    notify: [{ids}]\n    acl: xfr\n",
            ip = addr.ip(),
            port = addr.port(),
            ids = ids.join(", "),
        );
        std::fs::create_dir(dir.path().join("db")).unwrap();
        std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
        std::fs::write(dir.path().join("legacy.test.zone"), text).unwrap();
        let child = Command::new(binary)
            .arg("-c")
            .arg(dir.path().join("knot.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("knotd starts");
        Self { child, dir }
    }

    /// Serves `text` from now on: Knot reloads the file, keeps the
    /// difference and sends NOTIFY.
    fn serve(&self, text: &str) {
        std::fs::write(self.dir.path().join("legacy.test.zone"), text).unwrap();
        let out = Command::new("knotc")
            .arg("-s")
            .arg(self.dir.path().join("knot.sock"))
            .args(["zone-reload", "legacy.test"])
            .output()
            .expect("knotc runs");
        assert!(
            out.status.success(),
            "knotc zone-reload: {out:?}\n{}",
            self.log()
        );
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("knot.log")).unwrap_or_default()
    }
}

impl Drop for KnotPrimary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A zone whose SOA asks for a refresh once an hour: within a test, only
/// a NOTIFY brings a change.
fn hourly_zone(serial: u32, extra: &str) -> String {
    legacy_zone(serial, extra).replace(
        &format!("{serial} 1 1 86400 60"),
        &format!("{serial} 3600 600 86400 60"),
    )
}

/// What dnspython reads of the answer to a NOTIFY for `zone` sent to
/// `server` from `source`, signed with `secret` when given: the rcode,
/// the extended error codes, and AA.
async fn notify(
    python: &std::path::Path,
    server: SocketAddr,
    zone: &str,
    source: &str,
    secret: Option<&str>,
) -> String {
    const SCRIPT: &str = r#"
import sys, dns.message, dns.query, dns.opcode, dns.flags, dns.rcode, dns.edns, dns.tsigkeyring
server, port, zone, source, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
q = dns.message.make_query(zone, "SOA", use_edns=0)
q.flags = dns.flags.AA
q.set_opcode(dns.opcode.NOTIFY)
if secret:
    q.use_tsig(dns.tsigkeyring.from_text({"legacy.": secret}), keyname="legacy.", algorithm="hmac-sha256")
r = dns.query.udp(q, server, port=port, source=source, timeout=5)
ede = [int(o.code) for o in r.options if o.otype == dns.edns.OptionType.EDE]
print(dns.rcode.to_text(r.rcode()), ede, "AA" if r.flags & dns.flags.AA else "-", dns.opcode.to_text(r.opcode()))
"#;
    let out = tokio::process::Command::new(python)
        .args([
            "-c",
            SCRIPT,
            &server.ip().to_string(),
            &server.port().to_string(),
            zone,
            source,
            secret.unwrap_or(""),
        ])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "dnspython NOTIFY: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knot_primary_notifies_either_device_and_its_differences_are_applied() {
    let Some(knotd) = tool("knotd", "knot") else {
        return;
    };
    let Some(python) = venv_python("dns.message") else {
        return;
    };
    let (_dir, a, b) = crate::cluster::pair(195);
    let secret = legacy_key(&a);
    let ip = "127.0.195.53";
    let addr: SocketAddr = format!("{ip}:{}", free_port_on(ip)).parse().unwrap();
    // Knot tells the follower alone: what it is told, it acts on.
    let primary = KnotPrimary::start(&knotd, &hourly_zone(1, ""), &secret, addr, &[b.dns()]);
    a.apply_ok(&legacy_domain(addr));
    for p in [&a, &b] {
        until("the transferred zone", async || {
            has(&answered(p).await, "mail.legacy.test. A", "198.51.100.25")
        })
        .await;
    }

    // The primary changes: its NOTIFY to the follower brings the change to
    // both devices long before the hourly refresh.
    primary.serve(&hourly_zone(2, "new A 198.51.100.7\n"));
    for p in [&a, &b] {
        until("the change the NOTIFY announced", async || {
            has(&answered(p).await, "new.legacy.test. A", "198.51.100.7")
        })
        .await;
    }
    // Again, with a record changed and one gone: asked by IXFR from the
    // zone the device transferred last.
    primary.serve(
        &hourly_zone(3, "new A 198.51.100.8\n")
            .replace("www TXT \"served by the old primary\"\n", ""),
    );
    for p in [&a, &b] {
        until("the differences applied", async || {
            let said = answered(p).await;
            has(&said, "new.legacy.test. A", "198.51.100.8")
                && !has(&said, "new.legacy.test. A", "198.51.100.7")
                && !has(&said, "www.legacy.test. TXT", "served by the old primary")
                && has(&said, "mail.legacy.test. A", "198.51.100.25")
        })
        .await;
    }
    assert_eq!(answered(&a).await, answered(&b).await);
    let log = primary.log();
    assert!(
        log.lines().any(|l| l.contains("IXFR, outgoing")
            && l.contains("started, serial")
            && l.contains(" -> ")),
        "no IXFR was served:\n{log}"
    );
    // The follower says what it did: the serial, and the IXFR.
    let status: serde_json::Value = serde_json::from_str(&b.ok(&["status", "--json"])).unwrap();
    let here = &status["transfers_in"][0];
    assert_eq!(here["domain"], "legacy.test", "{status}");
    assert_eq!(here["serial"], 3, "{status}");
    assert_eq!(here["how"], "IXFR", "{status}");
    assert!(here.get("error").is_none(), "{status}");
    let shown = b.ok(&["status"]);
    assert!(
        shown.contains("PRIMARY (transfer in)") && shown.contains("IXFR, "),
        "{shown}"
    );
    let exported = a.ok(&["config", "export"]);
    assert!(exported.contains("serial = 3"), "{exported}");

    // A configuration applied without the transferred records drops them:
    // the leader transfers the zone again at once, not at the hourly
    // refresh.
    a.apply_ok(&legacy_domain(addr));
    for p in [&a, &b] {
        until("the zone transferred again", async || {
            let said = answered(p).await;
            has(&said, "new.legacy.test. A", "198.51.100.8")
                && has(&said, "mail.legacy.test. A", "198.51.100.25")
        })
        .await;
    }
    let history = a.ok(&["config", "history"]);
    assert_eq!(history.matches("(serial 3)").count(), 2, "{history}");

    // NOTIFY is taken only from the primary's address, signed with its
    // key, for a domain that has a primary (dnspython as the judge).
    let signed = Some(secret.as_str());
    for p in [&a, &b] {
        assert_eq!(
            notify(&python, p.dns(), "legacy.test.", ip, signed).await,
            "NOERROR [] AA NOTIFY"
        );
        assert_eq!(
            notify(&python, p.dns(), "legacy.test.", "127.0.0.1", signed).await,
            "REFUSED [18] - NOTIFY"
        );
        assert_eq!(
            notify(&python, p.dns(), "legacy.test.", ip, None).await,
            "REFUSED [18] - NOTIFY"
        );
        assert_eq!(
            notify(&python, p.dns(), "elsewhere.test.", ip, signed).await,
            "REFUSED [20] - NOTIFY"
        );
    }
}

/// A primary written with dnspython that signs only the first, every
/// fifth and the last message of an AXFR (RFC 8945 §5.3.1 allows up to 99
/// unsigned in a row); with `tamper`, a record of an unsigned message is
/// changed after it was covered by the digest.
const UNSIGNED_PRIMARY: &str = r#"
import socket, sys, threading, dns.message, dns.rrset, dns.tsigkeyring, dns.rdatatype
ip, port, secret, tamper = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "tamper"
keyring = dns.tsigkeyring.from_text({"legacy.": secret})
soa = dns.rrset.from_text("legacy.test.", 300, "IN", "SOA", "ns1.legacy.test. hostmaster.legacy.test. 7 3600 600 86400 60")
ns = dns.rrset.from_text("legacy.test.", 300, "IN", "NS", "ns1.legacy.test.")
hosts = [dns.rrset.from_text(f"h{i}.legacy.test.", 300, "IN", "A", f"10.0.{i // 250}.{i % 250}") for i in range(200)]
chunks = [[soa, ns]] + [hosts[i:i + 20] for i in range(0, 200, 20)] + [[soa]]

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, port))
    while True:
        wire, peer = s.recvfrom(65535)
        q = dns.message.from_wire(wire, keyring=keyring)
        r = dns.message.make_response(q)
        r.answer = [soa]
        s.sendto(r.to_wire(), peer)

def axfr(conn):
    n = int.from_bytes(conn.recv(2), "big")
    wire = b""
    while len(wire) < n:
        wire += conn.recv(n - len(wire))
    q = dns.message.from_wire(wire, keyring=keyring)
    ctx = None
    for i, chunk in enumerate(chunks):
        r = dns.message.make_response(q)
        r.answer = chunk
        if i == 0 or i == len(chunks) - 1 or i % 5 == 0:
            out = r.to_wire(multi=True, tsig_ctx=ctx)
            ctx = r.tsig_ctx
        else:
            r.tsig = None
            out = r.to_wire()
            ctx.update(out)
            if tamper and i == 3:
                out = out[:-1] + bytes([out[-1] ^ 1])
        conn.sendall(len(out).to_bytes(2, "big") + out)
    conn.close()

threading.Thread(target=udp, daemon=True).start()
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((ip, port))
t.listen(8)
print("ready", flush=True)
while True:
    conn, _ = t.accept()
    threading.Thread(target=axfr, args=(conn,), daemon=True).start()
"#;

/// The dnspython primary, stopped by its PID.
struct PythonPrimary(std::process::Child);

impl PythonPrimary {
    fn start(python: &std::path::Path, addr: SocketAddr, secret: &str, tamper: bool) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(python)
            .args([
                "-c",
                UNSIGNED_PRIMARY,
                &addr.ip().to_string(),
                &addr.port().to_string(),
                secret,
                if tamper { "tamper" } else { "honest" },
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python starts");
        let mut ready = String::new();
        let stdout = child.stdout.take().unwrap();
        std::io::BufReader::new(stdout)
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        Self(child)
    }
}

impl Drop for PythonPrimary {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_with_unsigned_messages_between_signed_ones_verifies_and_a_changed_one_does_not()
{
    let Some(python) = venv_python("dns.message") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let p = crate::cluster::Proc::start(root.path(), "gtm1", "dc1", "127.0.189.1");
    let secret = legacy_key(&p);
    let ip = "127.0.189.53";
    let addr: SocketAddr = format!("{ip}:{}", free_port_on(ip)).parse().unwrap();
    let config = format!(
        "[[domain]]\nname = \"legacy.test\"\nnameservers = [\"ns1.legacy.test\"]\nprimary = {{ address = \"{addr}\", key = \"legacy\" }}\nsoa = {{ retry = 1 }}\n"
    );
    // A record changed in an unsigned message: nothing is taken, and the
    // device says why.
    let tampering = PythonPrimary::start(&python, addr, &secret, true);
    p.apply_ok(&config);
    until("the refused transfer in the device's health", async || {
        let status = p.ok(&["status"]);
        status.contains("DEGRADED worker zones-in") && status.contains("its TSIG does not verify")
    })
    .await;
    let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    let error = status["transfers_in"][0]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("its TSIG does not verify"), "{status}");
    let m = udp(p.dns(), &query("h199.legacy.test.", RecordType::A)).await;
    assert!(answers(&m).is_empty(), "{m:?}");
    drop(tampering);

    // The same stream unchanged: every record, the unsigned messages'
    // included, is served.
    let _honest = PythonPrimary::start(&python, addr, &secret, false);
    until("the transferred zone", async || {
        let first = answers(&udp(p.dns(), &query("h0.legacy.test.", RecordType::A)).await);
        let last = answers(&udp(p.dns(), &query("h199.legacy.test.", RecordType::A)).await);
        let middle = answers(&udp(p.dns(), &query("h77.legacy.test.", RecordType::A)).await);
        first == ["10.0.0.0"] && middle == ["10.0.0.77"] && last == ["10.0.0.199"]
    })
    .await;
    until("the device's health", async || {
        !p.ok(&["status"]).contains("DEGRADED worker zones-in")
    })
    .await;
}
