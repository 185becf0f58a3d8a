//! A domain transferred in from a real NSD primary during a migration
//! (docs/transfer.md, "Transfer in"): a real pair serves the primary's
//! zone with its own records on top, follows the primary's changes by its
//! SOA timers, and answers the same after `gtm domain promote`.

use std::{
    net::SocketAddr,
    process::{Command, Stdio},
};

use hickory_server::proto::rr::RecordType;

use crate::{cluster::Proc, support::*};

/// A real NSD serving `zone` from a file and providing transfers signed
/// with the key `legacy` (`secret`, base64) to loopback.
struct Primary {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Primary {
    fn start(text: &str, secret: &str, addr: SocketAddr) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let conf = format!(
            "server:\n  ip-address: {ip}@{port}\n  port: {port}\n  do-ip6: no\n  zonesdir: \"{d}\"\n  database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  pidfile: \"{d}/nsd.pid\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  username: \"\"\n  chroot: \"\"\n  verbosity: 1\n  server-count: 1\nremote-control:\n  control-enable: no\nkey:\n  name: \"legacy\"\n  algorithm: hmac-sha256\n  secret: \"{secret}\"\nzone:\n  name: \"legacy.test\"\n  zonefile: \"{d}/zone\"\n  provide-xfr: 127.0.0.0/8 legacy\n",
            ip = addr.ip(),
            port = addr.port(),
            d = d.display(),
        );
        std::fs::write(d.join("nsd.conf"), conf).unwrap();
        std::fs::write(d.join("zone"), text).unwrap();
        let child = Self::spawn(&d.join("nsd.conf"));
        Self { child, dir }
    }

    fn spawn(conf: &std::path::Path) -> std::process::Child {
        Command::new("/usr/sbin/nsd")
            .args(["-d", "-c"])
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nsd starts")
    }

    /// Serves `text` from now on (NSD started again on the new file).
    fn serve(&mut self, text: &str) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::write(self.dir.path().join("zone"), text).unwrap();
        self.child = Self::spawn(&self.dir.path().join("nsd.conf"));
    }
}

impl Drop for Primary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
    let secret = a
        .ok(&["tsig", "add", "legacy"])
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let addr: SocketAddr = format!("127.0.197.53:{}", free_port_on("127.0.197.53"))
        .parse()
        .unwrap();
    let mut primary = Primary::start(&legacy_zone(1, ""), &secret, addr);
    // gtm's own www A on top of the primary's; the rest is transferred.
    a.apply_ok(&format!(
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
    ));
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
