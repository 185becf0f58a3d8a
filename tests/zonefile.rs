//! Zone files in and out: a BIND-style zone imported with `gtm zone
//! import` and served the same as a real NSD serving the file itself; the
//! served zone exported with `gtm zone export`, checked by named-checkzone
//! and ldns-read-zone, and loaded by NSD to answer the same again.

use std::{
    net::SocketAddr,
    process::Command,
    time::{Duration, Instant},
};

use crate::{
    records::{Nsd, ask_dnspython},
    support::*,
};

const DIGEST: &str = "8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1";

/// A zone as BIND would load it: multi-line SOA, blank owners, relative
/// names, a second $ORIGIN, a delegation with glue, and most types.
fn bind_zone() -> String {
    format!(
        r#"; example.com, written for BIND
$ORIGIN example.com.
$TTL 1h
@       IN  SOA ns1 hostmaster (
                2024060101 ; serial
                7200       ; refresh
                900        ; retry
                1209600    ; expire
                300 )      ; minimum
        IN  NS  ns1
        IN  NS  ns2.example.net.
        IN  MX  10 mail
        IN  MX  20 mail2.example.net.
        IN  TXT "v=spf1 mx -all"
        IN  CAA 0 issue "letsencrypt.org"
        IN  HTTPS 1 . alpn=h2,h3
ns1     IN  A   192.0.2.53
mail    IN  A   192.0.2.25
        IN  AAAA 2001:db8::25
www 300 IN  A   192.0.2.80
www 300 IN  A   192.0.2.81
api     IN  CNAME www
_sip._udp IN SRV 10 60 5060 sip
sip     IN  A   192.0.2.60
        IN  NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp
_443._tcp.www IN TLSA 3 1 1 {DIGEST}
host    IN  SSHFP 4 2 {DIGEST}
office  IN  LOC 52 22 23.000 N 4 53 32.000 E -2.00m 1m 10000m 10m
*.apps  IN  A   192.0.2.90
x       IN  TYPE65280 \# 4 0A000001
_svc    IN  SVCB 1 svc alpn=h2 port=8443
svc     IN  A   192.0.2.91
dept    IN  NS  ns1.dept
        IN  NS  ns2.dept
ns1.dept IN A   192.0.2.101
ns2.dept IN A   192.0.2.102
$ORIGIN lab.example.com.
printer IN  A   192.0.2.120
        IN  TXT "second floor"
"#
    )
}

/// Every name and type the zone has, and names and types it has not.
const QUESTIONS: &[(&str, &str)] = &[
    ("example.com.", "SOA"),
    ("example.com.", "NS"),
    ("example.com.", "MX"),
    ("example.com.", "TXT"),
    ("example.com.", "CAA"),
    ("example.com.", "HTTPS"),
    ("example.com.", "A"),
    ("ns1.example.com.", "A"),
    ("mail.example.com.", "A"),
    ("mail.example.com.", "AAAA"),
    ("www.example.com.", "A"),
    ("www.example.com.", "AAAA"),
    ("api.example.com.", "CNAME"),
    ("_sip._udp.example.com.", "SRV"),
    ("sip.example.com.", "NAPTR"),
    ("_443._tcp.www.example.com.", "TLSA"),
    ("host.example.com.", "SSHFP"),
    ("office.example.com.", "LOC"),
    ("anything.apps.example.com.", "A"),
    ("x.example.com.", "TYPE65280"),
    ("_svc.example.com.", "SVCB"),
    ("printer.lab.example.com.", "A"),
    ("printer.lab.example.com.", "TXT"),
    ("lab.example.com.", "A"),
    ("missing.example.com.", "A"),
    ("dept.example.com.", "NS"),
    ("host.dept.example.com.", "A"),
    ("dept.example.com.", "DS"),
];

/// What dnspython read, comparable across servers: the SOA serial (gtm
/// numbers its own) left out, and of answers that are not referrals what
/// a server may add or not (RFC 1034 §4.3.2: the zone's NS set in
/// authority of a positive answer, and the addresses of MX, NS and SRV
/// targets in additional, which NSD adds and gtm, answering minimally,
/// does not).
fn comparable(line: &str) -> String {
    let mut parts: Vec<String> = line.split(" || ").map(str::to_string).collect();
    for part in &mut parts {
        *part = part
            .split(" | ")
            .map(|rr| {
                let f: Vec<&str> = rr.split_whitespace().collect();
                match f.get(3) {
                    Some(&"SOA") if f.len() >= 7 => {
                        let mut f = f.clone();
                        f[6] = "SERIAL";
                        f.join(" ")
                    }
                    _ => rr.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(" | ");
    }
    let referral = parts.get(1).is_some_and(|flags| !flags.contains("AA"));
    if !referral && parts.len() > 4 {
        if !parts[2].is_empty() {
            parts[3].clear();
        }
        parts[4].clear();
    }
    parts.join(" || ")
}

/// Asks every question of `QUESTIONS` at both servers and requires the
/// same answers.
async fn same_answers(python: &std::path::Path, gtm: SocketAddr, nsd: SocketAddr, what: &str) {
    let ours = ask_dnspython(python, gtm, QUESTIONS, false).await;
    // NSD is up when it answers the SOA.
    let deadline = Instant::now() + Duration::from_secs(20);
    let theirs = loop {
        let theirs = ask_dnspython(python, nsd, QUESTIONS, false).await;
        if theirs.first().is_some_and(|l| l.starts_with("NOERROR")) || Instant::now() > deadline {
            break theirs;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(ours.len(), QUESTIONS.len());
    for ((q, ours), theirs) in QUESTIONS.iter().zip(&ours).zip(&theirs) {
        assert_eq!(comparable(ours), comparable(theirs), "{what}: {q:?}");
    }
}

fn gtm(d: &TestDevice, args: &[&str]) -> Run {
    tokio::task::block_in_place(|| run_gtm(d, args))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_zone_is_served_as_nsd_serves_its_file_and_its_export_loads_everywhere() {
    let Some(python) = venv_python("dns.message") else {
        return;
    };
    let Some(checkzone) = tool("named-checkzone", "bind9-utils") else {
        return;
    };
    let Some(read_zone) = tool("ldns-read-zone", "ldnsutils") else {
        return;
    };
    let Some(_) = tool("nsd", "nsd") else { return };
    let d = TestDevice::start("").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("example.com.zone");
    std::fs::write(&file, bind_zone()).unwrap();
    let file_arg = file.to_str().unwrap();

    // A dry run shows the domain's fields and applies nothing.
    let dry = gtm(&d, &["zone", "import", file_arg, "--dry-run"]);
    assert_eq!(dry.code, Some(0), "{dry:?}");
    assert!(dry.stdout.contains("dry run: nothing applied"), "{dry:?}");
    assert!(dry.stdout.contains("example.com"), "{dry:?}");
    assert!(
        dry.stderr.contains("the SOA serial 2024060101 is not kept"),
        "{dry:?}"
    );
    assert!(
        d.device.engine.config().domains.is_empty(),
        "nothing applied"
    );

    let applied = gtm(&d, &["zone", "import", file_arg]);
    assert_eq!(applied.code, Some(0), "{applied:?}");
    assert!(applied.stdout.contains("applied as version"), "{applied:?}");

    let nsd_ip = "127.0.172.2";
    let original = Nsd::start(
        "example.com",
        &bind_zone(),
        format!("{nsd_ip}:{}", free_port_on(nsd_ip))
            .parse()
            .unwrap(),
    );
    same_answers(
        &python,
        d.v4(),
        original.addr(),
        "imported, against NSD on the file",
    )
    .await;
    drop(original);

    // Exported, the zone is a file BIND's and ldns's readers accept, and
    // NSD serving it answers the same as gtm.
    let export = gtm(&d, &["zone", "export", "example.com"]);
    assert_eq!(export.code, Some(0), "{export:?}");
    let exported = dir.path().join("exported.zone");
    std::fs::write(&exported, &export.stdout).unwrap();
    let check = Command::new(&checkzone)
        .args(["-k", "fail", "-i", "local", "example.com"])
        .arg(&exported)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "named-checkzone: {}{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr),
        export.stdout
    );
    let read = Command::new(&read_zone).arg(&exported).output().unwrap();
    assert!(read.status.success(), "ldns-read-zone: {read:?}");
    // A steered record is marked, and with --steered comment left out.
    assert!(
        export
            .stdout
            .contains("; www A is steered: its default answer on this device now"),
        "{}",
        export.stdout
    );
    let commented = gtm(
        &d,
        &["zone", "export", "example.com", "--steered", "comment"],
    );
    assert!(
        commented.stdout.contains("; www\t300\tIN\tA\t192.0.2.80"),
        "{commented:?}"
    );
    assert!(
        !commented.stdout.lines().any(|l| l.starts_with("www\t")),
        "{commented:?}"
    );
    assert!(
        commented
            .stdout
            .lines()
            .any(|l| l.starts_with("mail\t3600\tIN\tMX") || l.starts_with("@\t3600\tIN\tMX")),
        "{commented:?}"
    );
    let missing = gtm(&d, &["zone", "export", "nothing.example"]);
    assert_ne!(missing.code, Some(0), "{missing:?}");
    assert!(
        missing.stderr.contains("no zone nothing.example"),
        "{missing:?}"
    );
    let again = Nsd::start(
        "example.com",
        &export.stdout,
        format!("{nsd_ip}:{}", free_port_on(nsd_ip))
            .parse()
            .unwrap(),
    );
    same_answers(
        &python,
        d.v4(),
        again.addr(),
        "exported, against NSD on the export",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_error_names_the_files_line_and_applies_nothing() {
    let d = TestDevice::start("").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.zone");
    // Line 6: a TXT below a delegation; line 7: a TLSA digest too short.
    std::fs::write(
        &file,
        "$ORIGIN bad.test.\n$TTL 60\n@ SOA ns1 hostmaster 1 2 3 4 5\n@ NS ns1\nsub NS ns.elsewhere.test.\nwww.sub TXT \"occluded\"\n_443._tcp TLSA 3 1 1 abcd\n",
    )
    .unwrap();
    let out = gtm(&d, &["zone", "import", file.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("bad.zone: line 7: \"3 1 1 abcd\" is not valid TLSA data"),
        "{out:?}"
    );
    std::fs::write(
        &file,
        "$ORIGIN bad.test.\n$TTL 60\n@ SOA ns1 hostmaster 1 2 3 4 5\n@ NS ns1\nsub NS ns.elsewhere.test.\nwww.sub TXT \"occluded\"\n",
    )
    .unwrap();
    let out = gtm(&d, &["zone", "import", file.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("bad.zone: line 6: domain bad.test / record www.sub TXT: is below the delegation sub.bad.test."),
        "{out:?}"
    );
    assert!(
        d.device.engine.config().domains.is_empty(),
        "nothing applied"
    );
}
