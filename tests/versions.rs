//! What a configuration version means outside the API: the SOA serial of
//! a zone is the version that last changed it, and a configuration change
//! leaves the zones and checks it does not touch alone, on every device.

use std::time::{Duration, Instant};

use hickory_server::proto::{
    op::{Message, ResponseCode},
    rr::{RData, RecordType},
};

use crate::{
    cluster::Proc,
    support::{TestDevice, apply_text, query, udp},
};

fn zone(txt: &str, soa: &str) -> String {
    format!(
        r#"
[[domain]]
name = "serial.test"
nameservers = ["ns1.serial.test"]
{soa}

[[domain.record]]
name = "www"
type = "TXT"
values = ["{txt}"]
"#
    )
}

/// The serial of the SOA in the answer section or, for a negative answer,
/// in the authority section.
fn serial(m: &Message) -> u32 {
    let soa = m
        .answers
        .iter()
        .chain(m.authorities.iter())
        .find_map(|r| match &r.data {
            RData::SOA(soa) => Some(soa.serial),
            _ => None,
        });
    soa.unwrap_or_else(|| panic!("no SOA in {m:?}"))
}

/// The serials a device gives in an SOA answer, an NXDOMAIN and a NODATA.
async fn serials(server: std::net::SocketAddr) -> [u32; 3] {
    let soa = udp(server, &query("serial.test.", RecordType::SOA)).await;
    let nx = udp(server, &query("missing.serial.test.", RecordType::A)).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    let nodata = udp(server, &query("www.serial.test.", RecordType::A)).await;
    assert_eq!(nodata.metadata.response_code, ResponseCode::NoError);
    assert!(nodata.answers.is_empty());
    [serial(&soa), serial(&nx), serial(&nodata)]
}

#[tokio::test]
async fn the_soa_serial_is_the_configuration_version_unless_set() {
    let d = TestDevice::start(&zone("one", "")).await;
    let first = d.device.engine.version();
    assert_eq!(serials(d.v4()).await, [first as u32; 3]);

    let applied = apply_text(&d.device, &zone("two", "")).await.unwrap();
    assert_eq!(applied.version, first + 1, "a change is one version");
    assert_eq!(serials(d.v4()).await, [applied.version as u32; 3]);

    // A serial the configuration sets stays, whatever the version.
    let soa = "soa = { serial = 2026113001 }";
    apply_text(&d.device, &zone("three", soa)).await.unwrap();
    assert_eq!(serials(d.v4()).await, [2_026_113_001; 3]);
    let applied = apply_text(&d.device, &zone("four", soa)).await.unwrap();
    assert!(applied.version > first + 2);
    assert_eq!(serials(d.v4()).await, [2_026_113_001; 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soa_serial_survives_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let mut p = Proc::start(root.path(), "gtm1", "dc1", "127.0.36.1");
    for txt in ["one", "two", "three"] {
        p.apply_ok(&zone(txt, ""));
    }
    let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    let version = status["version"].as_u64().unwrap();
    assert!(version >= 3, "{status}");
    assert_eq!(serials(p.dns()).await, [version as u32; 3]);
    p.kill();
    p.restart();
    assert_eq!(serials(p.dns()).await, [version as u32; 3]);
}

/// The SOA serial a device gives for `zone`.
async fn soa_serial(server: std::net::SocketAddr, zone: &str) -> u32 {
    serial(&udp(server, &query(&format!("{zone}."), RecordType::SOA)).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_keeps_its_serial_while_others_change_on_every_device_and_after_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.38.1");
    let mut b = Proc::start(root.path(), "gtm2", "dc1", "127.0.38.2");
    a.ok(&["cluster", "init"]);
    let token = a.ok(&["cluster", "token"]);
    b.ok(&["cluster", "join", &a.api(), "--token", token.trim()]);
    let other = |txt: &str| {
        format!(
            "[[domain]]\nname = \"other.test\"\nnameservers = [\"ns1.other.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n"
        )
    };
    let config = |serial_txt: &str, other_txt: &str, check: &str| {
        format!("{check}{}{}", zone(serial_txt, ""), other(other_txt))
    };
    a.apply_ok(&config("one", "one", ""));
    let first = version(&a);
    // Two changes of other.test only, through either device.
    b.apply_ok(&config("one", "two", ""));
    a.apply_ok(&config("one", "three", ""));
    let third = version(&a);
    assert_eq!(third, first + 2);
    let deadline = Instant::now() + Duration::from_secs(20);
    while version(&b) != third {
        assert!(Instant::now() < deadline, "gtm2 never reached {third}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for p in [&a, &b] {
        assert_eq!(
            serials(p.dns()).await,
            [first as u32; 3],
            "serial.test on {}",
            p.name
        );
        assert_eq!(soa_serial(p.dns(), "other.test").await, third as u32);
    }
    b.kill();
    b.restart();
    assert_eq!(serials(b.dns()).await, [first as u32; 3], "after a restart");
    assert_eq!(soa_serial(b.dns(), "other.test").await, third as u32);

    // What steered records read (here a check) changes every zone.
    let check = "[[check]]\nname = \"c\"\ntype = \"tcp\"\ntarget = \"127.0.38.9\"\nport = 9\n";
    a.apply_ok(&config("one", "three", check));
    let fourth = version(&a);
    let deadline = Instant::now() + Duration::from_secs(20);
    while version(&b) != fourth {
        assert!(Instant::now() < deadline, "gtm2 never reached {fourth}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for p in [&a, &b] {
        assert_eq!(serials(p.dns()).await, [fourth as u32; 3], "on {}", p.name);
        assert_eq!(soa_serial(p.dns(), "other.test").await, fourth as u32);
    }
}

/// A device whose store kept its configuration without zone versions (as
/// a gtm before them did) serves the replicated ones after a restart, not
/// the configuration version for every zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_kept_without_zone_versions_is_installed_again_with_them() {
    let root = tempfile::tempdir().unwrap();
    let mut p = Proc::start(root.path(), "gtm1", "dc1", "127.0.39.1");
    let other = |txt: &str| {
        format!(
            "[[domain]]\nname = \"other.test\"\nnameservers = [\"ns1.other.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n"
        )
    };
    p.apply_ok(&format!("{}{}", zone("one", ""), other("one")));
    let first = version(&p);
    p.apply_ok(&format!("{}{}", zone("one", ""), other("two")));
    let second = version(&p);
    p.kill();
    {
        let store = gtm_cluster::Store::open(&p.dir).unwrap();
        let mut kept = store.load_config().unwrap().unwrap();
        assert_eq!(kept.version, second);
        assert!(!kept.zone_versions.is_empty(), "{:?}", kept.zone_versions);
        kept.zone_versions.clear();
        store.save_config(&kept.kept()).unwrap();
    }
    p.restart();
    // It starts serving what it kept, then installs the replicated state.
    let deadline = Instant::now() + Duration::from_secs(20);
    while serials(p.dns()).await != [first as u32; 3] {
        assert!(
            Instant::now() < deadline,
            "serial.test still gives {:?}",
            serials(p.dns()).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(soa_serial(p.dns(), "other.test").await, second as u32);
}

/// The check events a device logged itself, as JSON lines.
fn own_check_events(p: &Proc) -> Vec<serde_json::Value> {
    p.ok(&["logs", "--kind", "check", "--json"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["device"] == p.name.as_str())
        .collect()
}

fn check_states(p: &Proc) -> Vec<(String, String)> {
    let checks: serde_json::Value =
        serde_json::from_str(&p.ok(&["check", "list", "--json"])).unwrap();
    let mut states: Vec<(String, String)> = checks
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["check"].as_str().unwrap().to_string(),
                c["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    states.sort();
    states
}

fn version(p: &Proc) -> u64 {
    let status: serde_json::Value = serde_json::from_str(&p.ok(&["status", "--json"])).unwrap();
    status["version"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrelated_change_leaves_local_and_remote_checks_alone_on_every_device() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.37.1");
    let b = Proc::start(root.path(), "gtm2", "dc2", "127.0.37.2");
    a.ok(&["cluster", "init"]);
    let token = a.ok(&["cluster", "token"]);
    b.ok(&["cluster", "join", &a.api(), "--token", token.trim()]);
    // One target per datacenter: each device runs one check and judges the
    // other from its peer's reports.
    let t1 = std::net::TcpListener::bind("127.0.37.9:0").unwrap();
    let t2 = std::net::TcpListener::bind("127.0.37.9:0").unwrap();
    // `front`: a datacenter no device is in, listed first.
    let config = |txt: &str, front: &str| {
        format!(
            r#"
{front}
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "from-dc1"
type = "tcp"
target = "127.0.37.9"
port = {}
interval = "500ms"
timeout = "300ms"
run_on = "dc1"

[[check]]
name = "from-dc2"
type = "tcp"
target = "127.0.37.9"
port = {}
interval = "500ms"
timeout = "300ms"
run_on = "dc2"
{}"#,
            t1.local_addr().unwrap().port(),
            t2.local_addr().unwrap().port(),
            zone(txt, "")
        )
    };
    a.apply_ok(&config("v0", ""));
    let up = vec![
        ("from-dc1".to_string(), "OK".to_string()),
        ("from-dc2".to_string(), "OK".to_string()),
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    while check_states(&a) != up || check_states(&b) != up {
        assert!(
            Instant::now() < deadline,
            "the checks never came up: {:?} {:?}",
            check_states(&a),
            check_states(&b)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let before = (own_check_events(&a).len(), own_check_events(&b).len());

    // Unrelated changes, through either device; the last one also adds a
    // datacenter before those the checks run in.
    for (i, p) in [&a, &b, &a, &b].into_iter().enumerate() {
        let front = if i == 3 {
            "[[datacenter]]\nname = \"dc0\"\n"
        } else {
            ""
        };
        p.apply_ok(&config(&format!("v{}", i + 1), front));
    }
    let last = version(&a);
    let deadline = Instant::now() + Duration::from_secs(20);
    while version(&b) != last {
        assert!(Instant::now() < deadline, "gtm2 never reached {last}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Long enough for a reset to show: several report periods, so a remote
    // check set No Data and judged again would have logged both changes.
    tokio::time::sleep(gtm_node::peers::REPORT_EVERY * 3).await;
    assert_eq!(check_states(&a), up);
    assert_eq!(check_states(&b), up);
    let after_a = own_check_events(&a);
    let after_b = own_check_events(&b);
    assert_eq!(
        (after_a.len(), after_b.len()),
        before,
        "check events after unrelated changes: {:?} {:?}",
        &after_a[before.0.min(after_a.len())..],
        &after_b[before.1.min(after_b.len())..]
    );
}
