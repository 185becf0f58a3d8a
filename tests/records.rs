//! Every record type gtm serves, and delegations, judged by independent
//! readers: dnspython's parser and kdig read each type's answer, delv
//! validates them signed, and a real NSD serves a delegated child zone that
//! a validating unbound resolves through gtm's referral.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use hickory_server::proto::{
    op::ResponseCode,
    rr::{RData, RecordType},
};

use crate::{
    dnssec::{anchor_file, ask_delv_in, delv, signed_ds},
    support::*,
};

const DIGEST: &str = "8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1";

/// A zone with a record of every type, and a reverse zone.
fn types_zone(signed: bool) -> String {
    format!(
        r#"
[[domain]]
name = "types.test"
nameservers = ["ns1.types.test"]
ttl = 300
dnssec = {signed}

[[domain.record]]
name = "host"
type = "SSHFP"
values = ["4 2 {DIGEST}"]

[[domain.record]]
name = "_443._tcp.www"
type = "TLSA"
values = ["3 1 1 {DIGEST}"]

[[domain.record]]
name = "@"
type = "HTTPS"
values = ["1 . port=8443 alpn=h2,h3 ipv4hint=192.0.2.1"]

[[domain.record]]
name = "_dns"
type = "SVCB"
values = ["1 dns alpn=dot port=853"]

[[domain.record]]
name = "sip"
type = "NAPTR"
values = ['100 10 "S" "SIP+D2U" "" _sip._udp.types.test.']

[[domain.record]]
name = "geo"
type = "LOC"
values = ["42 21 54 N 71 06 18 W -24m 30m"]

[[domain.record]]
name = "web"
type = "A"
addresses = [{{ ip = "192.0.2.80" }}]

[[domain.record]]
name = "@"
type = "A"
alias = "web"

[[domain.record]]
name = "x"
type = "TYPE65280"
values = ['\# 4 0A000001']

[[domain.record]]
name = "sub"
type = "NS"
values = ["ns1.sub"]

[[domain.record]]
name = "sub"
type = "DS"
values = ["12345 13 2 {DIGEST}"]

[[domain.record]]
name = "ns1.sub"
type = "A"
addresses = [{{ ip = "192.0.2.53" }}]

[[domain]]
name = "2.0.192.in-addr.arpa"
nameservers = ["ns1.types.test"]
ttl = 300

[[domain.record]]
name = "10"
type = "PTR"
values = ["host.types.test."]
"#
    )
}

/// The questions, and each answer as dnspython writes it.
const EXPECTED: &[(&str, &str, &str)] = &[
    (
        "host.types.test.",
        "SSHFP",
        "4 2 8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1",
    ),
    (
        "_443._tcp.www.types.test.",
        "TLSA",
        "3 1 1 8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1",
    ),
    (
        "types.test.",
        "HTTPS",
        "1 . alpn=\"h2,h3\" port=\"8443\" ipv4hint=\"192.0.2.1\"",
    ),
    (
        "_dns.types.test.",
        "SVCB",
        "1 dns.types.test. alpn=\"dot\" port=\"853\"",
    ),
    (
        "sip.types.test.",
        "NAPTR",
        "100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.types.test.",
    ),
    (
        "geo.types.test.",
        "LOC",
        "42 21 54.000 N 71 6 18.000 W -24.00m 30.00m 10000.00m 10.00m",
    ),
    ("x.types.test.", "TYPE65280", "\\# 4 0a000001"),
    ("types.test.", "A", "192.0.2.80"),
    (
        "sub.types.test.",
        "DS",
        "12345 13 2 8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1",
    ),
    ("10.2.0.192.in-addr.arpa.", "PTR", "host.types.test."),
];

/// Asks `server` each `(name, type)` over UDP and TCP with dnspython, which
/// parses every response whole (a record that does not read fails it);
/// per question: the rcode, the flags, and each section's records as
/// dnspython writes them, one per line.
///
/// Awaited, not blocking: the device answers TCP on the test's runtime.
pub(crate) async fn ask_dnspython(
    python: &Path,
    server: SocketAddr,
    questions: &[(&str, &str)],
    dnssec: bool,
) -> Vec<String> {
    const SCRIPT: &str = r#"
import sys, dns.message, dns.query, dns.rcode, dns.flags
server, port, want_dnssec = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
for line in sys.stdin:
    name, rtype = line.split()
    q = dns.message.make_query(name, rtype, want_dnssec=want_dnssec)
    for ask in (dns.query.udp, dns.query.tcp):
        r = ask(q, server, port=port, timeout=5)
        out = [dns.rcode.to_text(r.rcode()), dns.flags.to_text(r.flags)]
        for section in (r.answer, r.authority, r.additional):
            out.append(" | ".join(sorted(l for rrset in section for l in rrset.to_text().splitlines())))
        if ask is dns.query.udp:
            first = out
        elif out != first:
            out = ["UDP and TCP differ"] + first + out
    print(" || ".join(out), flush=True)
"#;
    let mut child = tokio::process::Command::new(python)
        .args([
            "-c",
            SCRIPT,
            &server.ip().to_string(),
            &server.port().to_string(),
            if dnssec { "1" } else { "0" },
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        for (name, rtype) in questions {
            stdin
                .write_all(format!("{name} {rtype}\n").as_bytes())
                .await
                .unwrap();
        }
    }
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "dnspython could not read the answers: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// kdig's answer section for `name type` at `server`, with `args`.
async fn kdig(server: SocketAddr, name: &str, rtype: &str, args: &[&str]) -> String {
    let out = tokio::process::Command::new("kdig")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string(), "+timeout=5", "+retry=1"])
        .args(args)
        .args([name, rtype])
        .output()
        .await
        .expect("kdig runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "kdig {name} {rtype}: {text}");
    text
}

#[tokio::test]
async fn every_type_is_served_and_read_by_dnspython_and_kdig() {
    let Some(python) = venv_python("dns.message") else {
        return;
    };
    let Some(_) = tool("kdig", "knot-dnsutils") else {
        return;
    };
    let d = TestDevice::start(&types_zone(false)).await;
    let questions: Vec<(&str, &str)> = EXPECTED.iter().map(|(n, t, _)| (*n, *t)).collect();
    let said = ask_dnspython(&python, d.v4(), &questions, false).await;
    assert_eq!(said.len(), EXPECTED.len(), "{said:#?}");
    for ((name, rtype, data), line) in EXPECTED.iter().zip(&said) {
        assert_eq!(
            line,
            &format!("NOERROR || QR AA RD || {name} 300 IN {rtype} {data} ||  || "),
            "{name} {rtype}"
        );
        // kdig reads the same record (it warns and fails on what it
        // cannot parse), with its own presentation.
        let k = kdig(d.v4(), name, rtype, &["+noall", "+answer"]).await;
        assert!(
            k.contains(name) && k.contains(rtype),
            "kdig {name} {rtype}: {k}"
        );
    }
    // A PTR question by address, as dig -x asks it.
    let x = tokio::process::Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &d.v4().port().to_string(),
            "+short",
            "-x",
            "192.0.2.10",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&x.stdout).trim(),
        "host.types.test."
    );
}

#[tokio::test]
async fn a_delegation_is_a_referral_with_glue_and_its_ds_is_the_parents() {
    let Some(python) = venv_python("dns.message") else {
        return;
    };
    let d = TestDevice::start(&types_zone(false)).await;
    let said = ask_dnspython(
        &python,
        d.v4(),
        &[
            ("www.sub.types.test.", "A"),
            ("sub.types.test.", "NS"),
            ("ns1.sub.types.test.", "A"),
            ("sub.types.test.", "ANY"),
            ("sub.types.test.", "DS"),
            ("deeper.www.sub.types.test.", "DS"),
        ],
        false,
    )
    .await;
    let referral = "NOERROR || QR RD ||  || sub.types.test. 300 IN NS ns1.sub.types.test. || ns1.sub.types.test. 300 IN A 192.0.2.53";
    for line in &said[..3] {
        assert_eq!(
            line, referral,
            "a referral: AA clear, NS in authority, glue"
        );
    }
    assert_eq!(said[3], referral, "ANY at a delegation is referred too");
    assert_eq!(
        said[4],
        format!("NOERROR || QR AA RD || sub.types.test. 300 IN DS 12345 13 2 {DIGEST} ||  || "),
        "the DS is the parent's, answered with authority"
    );
    assert_eq!(
        said[5], referral,
        "a DS below the delegation is the child's"
    );
}

/// The signed zone's key, as delv trusts it.
async fn anchors(d: &TestDevice, dir: &Path, zone: &str) -> PathBuf {
    anchor_file(dir, &signed_ds(d, zone).await)
}

#[tokio::test]
async fn every_type_validates_signed_and_a_referral_proves_its_ds_or_its_absence() {
    let Some(_) = delv() else { return };
    let Some(python) = venv_python("dns.message") else {
        return;
    };
    let d = TestDevice::start(&types_zone(true)).await;
    let dir = tempfile::tempdir().unwrap();
    let anchors = anchors(&d, dir.path(), "types.test").await;
    for (name, rtype, _) in EXPECTED
        .iter()
        .filter(|(n, _, _)| n.ends_with("types.test."))
    {
        let said = ask_delv_in(d.v4(), &anchors, "types.test", name, rtype).await;
        assert!(
            said.contains("; fully validated"),
            "delv {name} {rtype}: {said}"
        );
    }
    // The referral of a delegation with a DS carries the DS and its RRSIG;
    // NS and glue are unsigned (the child's).
    let said = ask_dnspython(&python, d.v4(), &[("www.sub.types.test.", "A")], true).await;
    let sections: Vec<&str> = said[0].split(" || ").collect();
    assert_eq!(sections[1], "QR RD", "{said:?}");
    assert!(
        sections[3].contains("IN DS 12345 13 2") && sections[3].contains("RRSIG DS 13"),
        "{said:?}"
    );
    assert!(!sections[3].contains("RRSIG NS"), "{said:?}");
    assert!(!sections[4].contains("RRSIG"), "glue is unsigned: {said:?}");
}

/// A real NSD serving `zone` from `file` on `addr`, stopped by its PID.
pub(crate) struct Nsd {
    child: std::process::Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for Nsd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nsd {
    pub(crate) fn start(zone: &str, text: &str, addr: SocketAddr) -> Self {
        Self::launch(zone, text, addr, None)
    }

    /// [`Nsd::start`], providing transfers to loopback signed with the
    /// TSIG key `(name, secret)` (secret in base64).
    pub(crate) fn start_with_key(
        zone: &str,
        text: &str,
        addr: SocketAddr,
        key: (&str, &str),
    ) -> Self {
        Self::launch(zone, text, addr, Some(key))
    }

    fn launch(zone: &str, text: &str, addr: SocketAddr, key: Option<(&str, &str)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("zone"), text).unwrap();
        let (key, provide) = match key {
            Some((name, secret)) => (
                format!(
                    "key:\n  name: \"{name}\"\n  algorithm: hmac-sha256\n  secret: \"{secret}\"\n"
                ),
                format!("  provide-xfr: 127.0.0.0/8 {name}\n"),
            ),
            None => (String::new(), String::new()),
        };
        let conf = format!(
            "server:\n  ip-address: {ip}@{port}\n  port: {port}\n  do-ip6: no\n  zonesdir: \"{d}\"\n  database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  pidfile: \"{d}/nsd.pid\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  username: \"\"\n  chroot: \"\"\n  verbosity: 1\n  server-count: 1\nremote-control:\n  control-enable: no\n{key}zone:\n  name: \"{zone}\"\n  zonefile: \"{d}/zone\"\n{provide}",
            ip = addr.ip(),
            port = addr.port(),
            d = d.display(),
        );
        std::fs::write(d.join("nsd.conf"), conf).unwrap();
        let child = Self::spawn(&d.join("nsd.conf"));
        Self { child, addr, dir }
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
    pub(crate) fn serve(&mut self, text: &str) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::write(self.dir.path().join("zone"), text).unwrap();
        self.child = Self::spawn(&self.dir.path().join("nsd.conf"));
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Signs `text` (zone `zone`) with a new ECDSA key using ldns: the signed
/// text and the key's DS in zone-file form.
fn ldns_signed(zone: &str, text: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("zone"), text).unwrap();
    let key = Command::new("ldns-keygen")
        .current_dir(d)
        .args(["-a", "ECDSAP256SHA256", "-k", zone])
        .output()
        .unwrap();
    assert!(key.status.success(), "{key:?}");
    let base = String::from_utf8_lossy(&key.stdout).trim().to_string();
    let signed = Command::new("ldns-signzone")
        .current_dir(d)
        .args(["-o", zone, "zone", &base])
        .output()
        .unwrap();
    assert!(signed.status.success(), "{signed:?}");
    let ds = std::fs::read_to_string(d.join(format!("{base}.ds"))).unwrap();
    let signed = std::fs::read_to_string(d.join("zone.signed")).unwrap();
    (signed, ds.lines().next().unwrap_or_default().to_string())
}

/// The NSD child zone on 127.0.48.53 port 53, where a referral's glue
/// sends a resolver.
const CHILD_IP: &str = "127.0.48.53";

fn child_zone() -> String {
    format!(
        "$ORIGIN sub.parent.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 604800 60\n@ NS ns1\nns1 A {CHILD_IP}\nwww A 192.0.2.80\n"
    )
}

fn parent_zone(ds: Option<&str>) -> String {
    let ds = ds.map_or(String::new(), |ds| {
        let f: Vec<&str> = ds.split_whitespace().collect();
        // owner ttl class DS tag algorithm digest-type digest
        let at = f.iter().position(|w| *w == "DS").unwrap();
        format!(
            "[[domain.record]]\nname = \"sub\"\ntype = \"DS\"\nvalues = [\"{}\"]\n",
            f[at + 1..].join(" ")
        )
    });
    format!(
        r#"
[[domain]]
name = "parent.test"
nameservers = ["ns1.parent.test"]
dnssec = true

[[domain.record]]
name = "sub"
type = "NS"
values = ["ns1.sub"]

[[domain.record]]
name = "ns1.sub"
type = "A"
addresses = [{{ ip = "{CHILD_IP}" }}]

{ds}
"#
    )
}

/// Asks `server` (a resolver) for `name A` with DO until it answers:
/// the rcode, whether AD is set, and the addresses.
async fn resolve(server: SocketAddr, name: &str) -> (ResponseCode, bool, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut q = query(name, RecordType::A);
        q.metadata.recursion_desired = true;
        if let Some(e) = q.edns.as_mut() {
            e.set_dnssec_ok(true);
        }
        let r = udp(server, &q).await;
        let addrs: Vec<String> = r
            .answers
            .iter()
            .filter_map(|a| match &a.data {
                RData::A(ip) => Some(ip.to_string()),
                _ => None,
            })
            .collect();
        // Until it has an answer or refuses one (a resolver starting up
        // can answer empty first).
        if !addrs.is_empty()
            || r.metadata.response_code != ResponseCode::NoError
            || Instant::now() > deadline
        {
            return (r.metadata.response_code, r.metadata.authentic_data, addrs);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn unbound_resolves_a_child_zone_through_the_referral_and_validates_its_chain() {
    let Some(binary) = unbound_binary() else {
        return;
    };
    let Some(nsd) = tool("nsd", "nsd") else {
        return;
    };
    let Some(_) = tool("ldns-signzone", "ldnsutils") else {
        return;
    };
    drop(nsd);
    let child_addr: SocketAddr = format!("{CHILD_IP}:53").parse().unwrap();
    // A signed child with its DS in gtm: unbound validates the chain
    // from the parent's key (its trust anchor) through the DS to the
    // child's answer.
    let (signed, child_ds) = ldns_signed("sub.parent.test", &child_zone());
    let _nsd = Nsd::start("sub.parent.test", &signed, child_addr);
    let d = TestDevice::start(&parent_zone(Some(&child_ds))).await;
    let dir = tempfile::tempdir().unwrap();
    anchors(&d, dir.path(), "parent.test").await;
    let ds = d.device.engine.domain_dnssec("parent.test").unwrap().keys[0]
        .ds
        .clone();
    let u = Unbound::start(&binary, "parent.test", d.v4(), &validating(&ds)).await;
    let (rcode, ad, addrs) = resolve(u.addr, "www.sub.parent.test.").await;
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(
        addrs,
        ["192.0.2.80"],
        "resolved through the referral to NSD"
    );
    assert!(ad, "validated from the parent's key through its DS");
    drop(u);

    // Without a DS the child is proved insecure: answered, not validated,
    // and not SERVFAIL.
    apply_text(&d.device, &parent_zone(None)).await.unwrap();
    let u = Unbound::start(&binary, "parent.test", d.v4(), &validating(&ds)).await;
    let (rcode, ad, addrs) = resolve(u.addr, "www.sub.parent.test.").await;
    assert_eq!(rcode, ResponseCode::NoError);
    assert_eq!(addrs, ["192.0.2.80"]);
    assert!(!ad, "an insecure delegation, proved by the NSEC without DS");

    // A DS that matches no key of the child: the chain breaks, and a
    // validating resolver refuses the answer.
    let wrong = parent_zone(Some(&format!("sub.parent.test. 300 IN DS 1 13 2 {DIGEST}")));
    apply_text(&d.device, &wrong).await.unwrap();
    drop(u);
    let u = Unbound::start(&binary, "parent.test", d.v4(), &validating(&ds)).await;
    let (rcode, _, addrs) = resolve(u.addr, "www.sub.parent.test.").await;
    assert_eq!(rcode, ResponseCode::ServFail, "{addrs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_transfer_with_a_delegation_verifies_with_ldns() {
    use crate::xfr::{NSD_IP, device, dig, secondary_at, secret64, until_looked};
    let Some(verify) = tool("ldns-verify-zone", "ldnsutils") else {
        return;
    };
    let config = types_zone(true).replacen(
        "dnssec = true",
        &format!("dnssec = true\n{}", secondary_at(NSD_IP)),
        1,
    );
    let d = device(&config).await;
    let dir = tempfile::tempdir().unwrap();
    anchors(&d, dir.path(), "types.test").await;
    until_looked(&d).await;
    let key = format!("hmac-sha256:xfr:{}", secret64());
    let Some(out) = tokio::task::block_in_place(|| {
        dig(
            &d,
            &[
                "-b",
                NSD_IP,
                "-y",
                &key,
                "+nocmd",
                "+nostats",
                "AXFR",
                "types.test",
            ],
        )
    }) else {
        return;
    };
    let zone: String = out
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty() && !l.contains("TSIG"))
        .map(|l| format!("{l}\n"))
        .collect();
    let has = |owner: &str, rtype: &str| {
        zone.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.first() == Some(&owner) && f.get(3) == Some(&rtype)
        })
    };
    let covers = |owner: &str, rtype: &str| {
        zone.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.first() == Some(&owner) && f.get(3) == Some(&"RRSIG") && f.get(4) == Some(&rtype)
        })
    };
    // The delegation's NS, DS and glue are sent; only the DS is signed,
    // and the glue is out of the NSEC chain.
    assert!(
        has("sub.types.test.", "NS") && has("sub.types.test.", "DS"),
        "{zone}"
    );
    assert!(has("ns1.sub.types.test.", "A"), "{zone}");
    assert!(
        covers("sub.types.test.", "DS") && covers("sub.types.test.", "NSEC"),
        "{zone}"
    );
    assert!(!covers("sub.types.test.", "NS"), "{zone}");
    assert!(
        !covers("ns1.sub.types.test.", "A") && !has("ns1.sub.types.test.", "NSEC"),
        "{zone}"
    );
    for (name, rtype, _) in EXPECTED
        .iter()
        .filter(|(n, _, _)| n.ends_with("types.test."))
    {
        assert!(has(name, rtype), "{name} {rtype} transferred: {zone}");
    }
    // ldns checks every signature and the NSEC chain (its order, its
    // bitmaps, that it skips what is below a delegation).
    let file = dir.path().join("types.test.zone");
    std::fs::write(&file, &zone).unwrap();
    let checked = Command::new(verify).arg(&file).output().unwrap();
    assert!(
        checked.status.success(),
        "{}{}\n{zone}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// A signed zone whose apex is an alias of `www`: www answers the backend
/// while its check passes, else a standby address; the apex's mail
/// exchanger and the SRV target on the backend leave their answers while
/// it is down, and the others stay, priorities kept.
fn alias_zone(port: u16) -> String {
    format!(
        r#"
[[check]]
name = "web"
type = "http"
port = {port}
interval = "100ms"
timeout = "90ms"
failures = 1
successes = 1

[[domain]]
name = "alias.test"
nameservers = ["ns1.alias.test"]
dnssec = true

[[domain.record]]
name = "www"
type = "A"
balance = "priority"
addresses = [{{ ip = "127.0.198.2", hc = "check:web" }}, {{ ip = "192.0.2.99" }}]

[[domain.record]]
name = "@"
type = "A"
alias = "www"

[[domain.record]]
name = "@"
type = "MX"
addresses = [
  {{ value = "10 mail", ip = "127.0.198.2", hc = "check:web" }},
  {{ value = "20 backup-mail" }},
]

[[domain.record]]
name = "_https._tcp"
type = "SRV"
addresses = [
  {{ value = "0 5 {port} www", ip = "127.0.198.2", hc = "check:web" }},
  {{ value = "10 5 443 standby" }},
]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apex_alias_and_mx_and_srv_targets_follow_health_and_validate_signed() {
    use crate::backends::HttpBackend;
    let Some(_) = delv() else { return };
    let mut web = HttpBackend::start_at("127.0.198.2:0".parse().unwrap()).await;
    let port = web.addr.port();
    let d = TestDevice::start(&alias_zone(port)).await;
    let dir = tempfile::tempdir().unwrap();
    let anchors = anchors(&d, dir.path(), "alias.test").await;
    let validated = |said: &str, ip: &str| said.contains("; fully validated") && said.contains(ip);
    let srv = format!("0 5 {port} www.alias.test.");
    let mx = |d: &TestDevice, up: bool| {
        let (server, srv) = (d.v4(), srv.clone());
        let anchors = anchors.clone();
        async move {
            let said = ask_delv_in(server, &anchors, "alias.test", "alias.test", "MX").await;
            let mx_ok = said.contains("; fully validated")
                && said.contains("MX\t20 backup-mail.alias.test.")
                && said.contains("MX\t10 mail.alias.test.") == up;
            let said = ask_delv_in(
                server,
                &anchors,
                "alias.test",
                "_https._tcp.alias.test",
                "SRV",
            )
            .await;
            let srv_ok = said.contains("; fully validated")
                && said.contains("SRV\t10 5 443 standby.alias.test.")
                && said.contains(&format!("SRV\t{srv}")) == up;
            mx_ok && srv_ok
        }
    };

    // Up: the apex answers what www answers, under its own name, signed.
    until_a(d.v4(), "www.alias.test.", "127.0.198.2").await;
    until_a(d.v4(), "alias.test.", "127.0.198.2").await;
    let said = ask_delv_in(d.v4(), &anchors, "alias.test", "alias.test", "A").await;
    assert!(validated(&said, "127.0.198.2"), "{said}");
    until("both mail exchangers and SRV targets, signed", async || {
        mx(&d, true).await
    })
    .await;

    // Down: both move to the standby, and the apex still validates.
    web.stop().await;
    until_a(d.v4(), "alias.test.", "192.0.2.99").await;
    let said = ask_delv_in(d.v4(), &anchors, "alias.test", "alias.test", "A").await;
    assert!(validated(&said, "192.0.2.99"), "{said}");
    // The exchanger and the SRV target on the backend leave; the others
    // stay with their priorities, signed.
    until(
        "the backup exchanger and the standby target alone",
        async || mx(&d, false).await,
    )
    .await;

    // Up again: back to the backend.
    let _web = HttpBackend::start_at(format!("127.0.198.2:{port}").parse().unwrap()).await;
    until_a(d.v4(), "alias.test.", "127.0.198.2").await;
    let said = ask_delv_in(d.v4(), &anchors, "alias.test", "alias.test", "A").await;
    assert!(validated(&said, "127.0.198.2"), "{said}");
    until("both exchangers and targets again", async || {
        mx(&d, true).await
    })
    .await;
}

/// Waits (bounded) until `check` holds for the answer of `name type` at
/// `server`.
async fn until_dns(
    server: SocketAddr,
    name: &str,
    rtype: RecordType,
    what: &str,
    check: impl Fn(&hickory_server::proto::op::Message) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = udp(server, &query(name, rtype)).await;
        if check(&r) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} {rtype}: not {what}: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_serves_imports_delegations_aliases_and_the_catalog_alike_after_a_restart() {
    let (dir, a, mut b) = crate::cluster::pair(199);
    a.ok(&["tsig", "add", "xfr"]);
    a.apply_ok(
        r#"
[[domain]]
name = "alias.pair"
nameservers = ["ns1.alias.pair"]
secondaries = [{ address = "127.0.199.50", key = "xfr" }]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.7" }]

[[domain.record]]
name = "@"
type = "A"
alias = "www"

[catalog]
name = "catalog.pair"
"#,
    );
    // A zone file with a delegation, imported through the first device.
    let file = dir.path().join("imp.zone");
    std::fs::write(
        &file,
        "$ORIGIN imp.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 604800 60\n@ NS ns1\nns1 A 192.0.2.53\nsub NS ns1.sub\nns1.sub A 192.0.2.54\n",
    )
    .unwrap();
    a.ok(&["zone", "import", file.to_str().unwrap()]);

    let member = format!(
        "{}.zones.catalog.pair.",
        gtm_model::compile::member_id("alias.pair")
    );
    let judge = async |p: &crate::cluster::Proc| {
        until_dns(
            p.dns(),
            "alias.pair.",
            RecordType::A,
            "the alias's answer",
            |m| answers(m) == ["192.0.2.7"] && m.metadata.authoritative,
        )
        .await;
        until_dns(
            p.dns(),
            "www.sub.imp.test.",
            RecordType::A,
            "a referral with glue",
            |m| {
                !m.metadata.authoritative
                    && m.answers.is_empty()
                    && m.authorities
                        .iter()
                        .any(|r| r.record_type() == RecordType::NS)
                    && m.additionals
                        .iter()
                        .any(|r| matches!(&r.data, RData::A(a) if a.to_string() == "192.0.2.54"))
            },
        )
        .await;
        until_dns(
            p.dns(),
            &member,
            RecordType::PTR,
            "the catalog's member",
            |m| answers(m) == ["alias.pair."],
        )
        .await;
    };
    judge(&a).await;
    judge(&b).await;
    // A crash and a restart of the other device: the same answers.
    b.kill();
    b.restart();
    judge(&b).await;
}
