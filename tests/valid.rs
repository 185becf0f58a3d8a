//! Valid means servable: what validation accepts is answered correctly over
//! real DNS, what it cannot answer is refused with its path, and a committed
//! configuration a device cannot install leaves it serving its last good
//! one, degraded, instead of down.

use std::{path::Path, time::Duration};

use gtm::device::Device;
use gtm_model::node::NodeSettings;
use gtm_node::command::Action;
use hickory_server::proto::{
    op::Message,
    rr::{RData, RecordType},
};

use crate::support::*;

const HEAD: &str = "[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n\n";

fn txt(name: &str, values: &[String]) -> String {
    let list: Vec<String> = values.iter().map(|v| format!("'\"{v}\"'")).collect();
    format!(
        "[[domain.record]]\nname = \"{name}\"\ntype = \"TXT\"\nvalues = [{}]\n\n",
        list.join(", ")
    )
}

/// The strings of each TXT record of an answer, each record's joined.
fn txt_values(m: &Message) -> Vec<Vec<u8>> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::TXT(t) => Some(t.txt_data.iter().flat_map(|s| s.iter().copied()).collect()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn long_txt_strings_and_large_rrsets_are_served_over_udp_and_tcp() {
    let key = format!("v=DKIM1; k=rsa; p={}", "A".repeat(290));
    // 200 values of 240 bytes: about 49 KB, under the 60,000-byte limit.
    let many: Vec<String> = (0..200)
        .map(|i| format!("{i:03}{}", "v".repeat(237)))
        .collect();
    let config = format!(
        "{HEAD}{}{}",
        txt("dkim", std::slice::from_ref(&key)),
        txt("many", &many)
    );
    let d = TestDevice::start(&config).await;

    // The 300-byte value is split into 255-byte strings, over UDP and TCP.
    for r in [
        udp(d.v4(), &query("dkim.example.test.", RecordType::TXT)).await,
        tcp(d.v4(), &query("dkim.example.test.", RecordType::TXT)).await,
    ] {
        assert_eq!(txt_values(&r), [key.as_bytes().to_vec()]);
        let RData::TXT(t) = &r.answers[0].data else {
            panic!("a TXT answer");
        };
        let lens: Vec<usize> = t.txt_data.iter().map(|s| s.len()).collect();
        assert_eq!(lens, [255, key.len() - 255]);
    }

    // The large set: truncated over UDP, whole over TCP.
    let raw = udp_raw(
        d.v4(),
        &query("many.example.test.", RecordType::TXT)
            .to_vec()
            .unwrap(),
    )
    .await;
    assert!(
        raw.len() <= 1232,
        "within the advertised payload: {}",
        raw.len()
    );
    assert_eq!(raw[2] & 0x02, 0x02, "TC is set");
    let r = tcp(d.v4(), &query("many.example.test.", RecordType::TXT)).await;
    let mut got = txt_values(&r);
    got.sort();
    let want: Vec<Vec<u8>> = many.iter().map(|v| v.as_bytes().to_vec()).collect();
    assert_eq!(got, want, "every value over TCP");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_cannot_be_answered_is_refused_with_its_path_and_nothing_changes() {
    let d = TestDevice::start(ZONE).await;
    let version = d.device.engine.version();
    // 70 KB of TXT at one name.
    let huge: Vec<String> = (0..300)
        .map(|i| format!("{i:03}{}", "v".repeat(237)))
        .collect();
    let cases = [
        (
            txt("huge", &huge),
            "domain example.test / record huge TXT: the records of huge.example.test. take 7",
        ),
        (
            "[[domain.record]]\nname = \"two\"\ntype = \"CNAME\"\nmax_answers = 2\naddresses = [{ target = \"a.example.net\" }, { target = \"b.example.net\" }]\n".to_string(),
            "domain example.test / record two CNAME: max_answers = 2: a CNAME answers one target",
        ),
        (
            "[[domain.record]]\nname = \"both\"\ntype = \"CNAME\"\naddresses = [{ target = \"a.example.net\" }]\n\n[[domain.record]]\nname = \"both\"\ntype = \"MX\"\nvalues = ['10 mx.example.net.']\n".to_string(),
            "domain example.test / record both CNAME: MX shares its name; a CNAME must be alone at its name",
        ),
        (
            "[[domain.record]]\nname = \"a\"\ntype = \"CNAME\"\naddresses = [{ target = \"b.example.test\" }]\n\n[[domain.record]]\nname = \"b\"\ntype = \"CNAME\"\naddresses = [{ target = \"a.example.test\" }]\n".to_string(),
            "domain example.test / record a CNAME: CNAME loop: a.example.test. → b.example.test. → a.example.test.",
        ),
        (
            txt(&vec!["l".repeat(60); 5].join("."), &["x".to_string()]),
            "is not a valid DNS name",
        ),
    ];
    for (records, want) in cases {
        let text = format!("{HEAD}{records}");
        let err = crate::support::apply_text(&d.device, &text)
            .await
            .expect_err(want)
            .to_string();
        assert!(err.contains(want), "{err}\nwanted: {want}");
        // The CLI says the same before anything is sent.
        let file = d.dir.path().join("bad.toml");
        std::fs::write(&file, &text).unwrap();
        let out = run_gtm(&d, &["config", "check", file.to_str().unwrap()]);
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(out.stderr.contains(want), "{}", out.stderr);
    }
    assert_eq!(d.device.engine.version(), version, "nothing was applied");
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(
        r.metadata.response_code,
        hickory_server::proto::op::ResponseCode::NoError
    );

    // A CNAME with several candidate targets answers one of them.
    let text = format!(
        "{HEAD}[[domain.record]]\nname = \"media\"\ntype = \"CNAME\"\naddresses = [{{ target = \"a.example.net\" }}, {{ target = \"b.example.net\" }}]\n"
    );
    crate::support::apply_text(&d.device, text.as_str())
        .await
        .unwrap();
    for _ in 0..4 {
        let r = udp(d.v4(), &query("media.example.test.", RecordType::CNAME)).await;
        assert_eq!(r.answers.len(), 1, "{:?}", answers(&r));
    }
}

#[test]
fn a_100000_deep_unless_chain_is_refused_by_config_check() {
    let chain: Vec<String> = (0..100_000).map(|i| format!("c{i}")).collect();
    let text = format!(
        "[[check]]\nname = \"c0\"\ntype = \"manual\"\n\n[[scenario]]\nname = \"deep\"\ncondition = \"{}\"\n",
        chain.join(" UNLESS ")
    );
    assert!(text.len() > 1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.toml");
    std::fs::write(&file, &text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gtm"))
        .args(["config", "check"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "scenario deep: condition: condition is nested more than 100 levels deep at position"
        ),
        "{stderr}"
    );
    assert!(
        stderr.len() < 2_000,
        "a short message: {} bytes",
        stderr.len()
    );
}

/// Node settings of an in-process device on fixed loopback addresses, so a
/// restart keeps the API address its cluster knows.
fn settings(name: &str, ip: &str, dir: &Path) -> NodeSettings {
    NodeSettings {
        name: name.into(),
        dns_listen: vec![format!("{ip}:0").parse().unwrap()],
        api_listen: format!("{ip}:8053").parse().unwrap(),
        udp_workers: Some(1),
        probe_networks: vec!["127.0.0.0/8".to_string().try_into().unwrap()],
        ..NodeSettings::demo(dir.to_path_buf())
    }
}

fn zone(ip: &str) -> String {
    format!(
        "[[domain]]\nname = \"pair.test\"\nnameservers = [\"ns1.pair.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"{ip}\" }}]\n"
    )
}

fn gtm_cli(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gtm"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into()
}

async fn get(url: String) -> String {
    let http = gtm_node::tls::http_client(None, Duration::from_secs(10)).unwrap();
    http.get(url).send().await.unwrap().text().await.unwrap()
}

/// A configuration that cannot be served (a CNAME loop, as an older
/// binary accepted) is refused by the state machine on the committed state:
/// the proposer gets the validation error, and no device changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_the_state_machine_refuses_changes_nothing_on_any_device() {
    let root = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (root.path().join("a"), root.path().join("b"));
    let a = Device::start(settings("gtm1", "127.0.94.1", &dir_a), false)
        .await
        .unwrap();
    let b = Device::start(settings("gtm2", "127.0.94.2", &dir_b), false)
        .await
        .unwrap();
    a.replication.init(actor()).await.unwrap();
    let token = a.replication.token();
    b.replication
        .join("http://127.0.94.1:8053", &token, true)
        .await
        .unwrap();
    let good = zone("192.0.2.1");
    let v1 = a
        .replication
        .propose(actor(), None, Action::ApplyConfig { text: good })
        .await
        .unwrap()
        .version;
    until_a(b.dns_addrs[0], "www.pair.test.", "192.0.2.1").await;

    let looping = format!(
        "{}\n[[domain.record]]\nname = \"a\"\ntype = \"CNAME\"\naddresses = [{{ target = \"b.pair.test\" }}]\n\n[[domain.record]]\nname = \"b\"\ntype = \"CNAME\"\naddresses = [{{ target = \"a.pair.test\" }}]\n",
        zone("192.0.2.9")
    );
    // Proposed through the follower: the leader's state machine refuses it.
    let refused = b
        .replication
        .propose(actor(), None, Action::ApplyConfig { text: looping })
        .await
        .expect_err("a loop is refused");
    assert!(refused.to_string().contains("CNAME loop"), "{refused}");
    for device in [&a, &b] {
        assert_eq!(device.engine.version(), v1);
        assert!(device.engine.install_failure().is_none());
        until_a(device.dns_addrs[0], "www.pair.test.", "192.0.2.1").await;
    }
    b.stop().await;
    a.stop().await;
}

fn actor() -> gtm_model::actor::Actor {
    gtm_model::actor::Actor {
        user: "test".into(),
        device: "test".into(),
    }
}

/// A device whose stored configuration does not install (stored by another
/// binary version: here, written into its store with the library while it
/// was stopped) starts anyway, serving its last good configuration.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_configuration_that_cannot_be_installed_does_not_stop_a_start() {
    let dir = tempfile::tempdir().unwrap();
    let good = zone("192.0.2.1");
    let d = TestDevice::start_in(&good, dir.path()).await;
    let v1 = d.device.engine.version();
    d.device.stop().await;
    {
        let store = gtm_cluster::Store::open(dir.path()).unwrap();
        store
            .save_uninstalled(
                &gtm_cluster::StoredConfig {
                    version: v1 + 1,
                    text: "[[domain]\nthis is not TOML".into(),
                    zone_versions: Vec::new(),
                }
                .kept(),
            )
            .unwrap();
    }
    let device = Device::start(settings("test1", "127.0.95.1", dir.path()), false).await;
    let device = device.expect("starts");
    until_a(device.dns_addrs[0], "www.pair.test.", "192.0.2.1").await;
    let failure = device.engine.install_failure().expect("degraded");
    assert_eq!((failure.version, failure.serving), (v1 + 1, v1));
    assert!(
        failure.reason.starts_with("it does not parse: "),
        "{}",
        failure.reason
    );
    // Every surface says why.
    let reason = "it does not parse: ";
    let status = gtm_cli(dir.path(), &["status"]);
    assert!(
        status.contains(&format!(
            "DEGRADED: configuration version {} cannot be installed on this device: {reason}",
            v1 + 1
        )),
        "{status}"
    );
    let health = get("http://127.0.95.1:8053/health".into()).await;
    assert!(
        health.starts_with(&format!("degraded\nconfiguration: version {} cannot be installed on this device (serving version {v1}): {reason}", v1 + 1)),
        "{health}"
    );
    let metrics = get("http://127.0.95.1:8053/metrics".into()).await;
    assert!(metrics.contains("\ngtm_degraded 1\n"), "{metrics}");
    assert!(
        metrics.contains(&format!(
            "gtm_config_install_failed{{version=\"{}\"}} 1",
            v1 + 1
        )),
        "{metrics}"
    );
    // The next configuration that installs clears it.
    let fixed = zone("192.0.2.2");
    device
        .replication
        .propose(actor(), None, Action::ApplyConfig { text: fixed })
        .await
        .unwrap();
    assert!(device.engine.install_failure().is_none());
    let health = get("http://127.0.95.1:8053/health".into()).await;
    assert_eq!(health, "ok\n");
    until_a(device.dns_addrs[0], "www.pair.test.", "192.0.2.2").await;
    device.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_100000_deep_unless_chain_is_refused_by_the_api_and_the_device_stays_up() {
    let d = TestDevice::start(ZONE).await;
    let version = d.device.engine.version();
    let chain: Vec<String> = (0..100_000).map(|i| format!("c{i}")).collect();
    let text = format!(
        "{ZONE}\n[[check]]\nname = \"c0\"\ntype = \"manual\"\n\n[[scenario]]\nname = \"deep\"\ncondition = \"{}\"\n",
        chain.join(" UNLESS ")
    );
    let file = d.dir.path().join("deep.toml");
    std::fs::write(&file, &text).unwrap();
    let out = run_gtm(&d, &["config", "apply", file.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("scenario deep: condition: condition is nested more than 100 levels deep"),
        "{}",
        out.stderr
    );
    assert_eq!(d.device.engine.version(), version);
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(
        r.metadata.response_code,
        hickory_server::proto::op::ResponseCode::NoError
    );
}
