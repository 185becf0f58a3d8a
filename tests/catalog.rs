//! The catalog zone (RFC 9432): served and transferred as any zone, read by
//! dnspython, and a real Knot secondary (catalog-role interpret) that
//! provisions every member domain from it, transfers each and serves it,
//! and picks up a domain added later by itself.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use hickory_server::proto::rr::RecordType;

use crate::{
    records::ask_dnspython,
    support::*,
    xfr::{device, secret64},
};

const KNOT_IP: &str = "127.0.171.4";

fn config(knot: &str, domains: &[(&str, Option<&str>)]) -> String {
    let mut text = String::new();
    for (name, group) in domains {
        let group = group.map_or(String::new(), |g| format!("catalog_group = \"{g}\"\n"));
        text += &format!(
            "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\nsecondaries = [{{ address = \"{knot}\", key = \"xfr\" }}]\n{group}\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n\n"
        );
    }
    text += &format!(
        "[catalog]\nname = \"catalog.test\"\nsecondaries = [{{ address = \"{knot}\", key = \"xfr\" }}]\n"
    );
    text
}

/// A real Knot, secondary of the catalog zone with the interpret role,
/// stopped by its PID.
struct Knot {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Knot {
    fn start(binary: &PathBuf, primary: SocketAddr, port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let conf = format!(
            r#"server:
    rundir: "{d}"
    listen: {KNOT_IP}@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{d}"
log:
  - target: "{d}/knot.log"
    any: debug
key:
  - id: xfr
    algorithm: hmac-sha256
    secret: {secret}
remote:
  - id: gtm
    address: {ip}@{pport}
    key: xfr
    via: {KNOT_IP}
acl:
  - id: from_gtm
    address: {ip}
    key: xfr
    action: notify
template:
  - id: default
    storage: "{d}"
  - id: members
    storage: "{d}"
    master: gtm
    acl: from_gtm
zone:
  - domain: catalog.test.
    master: gtm
    acl: from_gtm
    catalog-role: interpret
    catalog-template: members
"#,
            secret = secret64(),
            ip = primary.ip(),
            pport = primary.port(),
        );
        let conf_path = dir.path().join("knot.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(binary)
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("knotd starts");
        Self {
            child,
            addr: format!("{KNOT_IP}:{port}").parse().unwrap(),
            dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("knot.log")).unwrap_or_default()
    }

    /// Waits (bounded) until Knot answers `name`'s SOA with authority.
    async fn until_serves(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let q = query(name, RecordType::SOA);
            sock.send_to(&q.to_vec().unwrap(), self.addr).await.unwrap();
            let mut buf = [0u8; 4096];
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(500), sock.recv(&mut buf)).await
                && let Ok(m) = hickory_server::proto::op::Message::from_vec(&buf[..n])
                && m.metadata.authoritative
                && !m.answers.is_empty()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Knot does not serve {name}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knot_secondary_provisions_every_domain_from_the_catalog() {
    let Some(knotd) = tool("knotd", "knot") else {
        return;
    };
    let Some(python) = venv_python("dns.message") else {
        return;
    };
    let knot_port = free_port_on(KNOT_IP);
    let knot_addr = format!("{KNOT_IP}:{knot_port}");
    let d = device(&config(
        &knot_addr,
        &[("one.test", Some("edge")), ("two.test", None)],
    ))
    .await;

    // The catalog as any client reads it: version 2, a PTR per member, the
    // group property.
    let said = ask_dnspython(&python, d.v4(), &[("version.catalog.test.", "TXT")], false).await;
    assert!(said[0].contains("IN TXT \"2\""), "{said:?}");
    let id = gtm_model::compile::member_id("one.test");
    let said = ask_dnspython(
        &python,
        d.v4(),
        &[
            (&format!("{id}.zones.catalog.test."), "PTR"),
            (&format!("group.{id}.zones.catalog.test."), "TXT"),
        ],
        false,
    )
    .await;
    assert!(said[0].contains("IN PTR one.test."), "{said:?}");
    assert!(said[1].contains("IN TXT \"edge\""), "{said:?}");

    let knot = Knot::start(&knotd, d.v4(), knot_port);
    knot.until_serves("one.test.").await;
    knot.until_serves("two.test.").await;

    // A domain added later: the catalog's NOTIFY brings it to Knot, which
    // provisions it, transfers it and serves it.
    apply_text(
        &d.device,
        &config(
            &knot_addr,
            &[
                ("one.test", Some("edge")),
                ("two.test", None),
                ("three.test", None),
            ],
        ),
    )
    .await
    .unwrap();
    knot.until_serves("three.test.").await;
}
