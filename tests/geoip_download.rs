//! The GeoIP lifecycle: devices download their database from the
//! configured source (a real HTTP server on loopback serving generated
//! databases, gzipped or not), refuse broken ones, report what they use,
//! and the demo answers by country out of the box. Addresses 127.0.102.x.

use std::{
    collections::HashMap,
    io::Write,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hickory_server::proto::rr::RecordType;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use crate::{cluster::Proc, geo::mmdb_bytes, support::*};

/// 2026-11-01 and 2026-11-15 (UTC), seconds.
pub(crate) const NOV_1: u64 = 1_793_491_200;
const NOV_15: u64 = 1_794_700_800;

pub(crate) fn de_db(epoch: u64) -> Vec<u8> {
    mmdb_bytes(
        "DBIP-Country-Lite",
        epoch,
        &[("81.2.69.0/24", "DE", "EU"), ("2.2.2.0/24", "FR", "EU")],
    )
}

pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// A database that opens, whose metadata and search tree are sound, but
/// whose DE record holds invalid UTF-8: its data section is broken.
fn broken_data_section() -> Vec<u8> {
    let mut bytes = de_db(NOV_1);
    let at = bytes
        .windows(3)
        .position(|w| w == [0x42, b'D', b'E'])
        .expect("the DE string of the data section");
    bytes[at + 1] = 0xFF;
    bytes[at + 2] = 0xFE;
    assert!(
        maxminddb::Reader::from_source(bytes.clone()).is_ok(),
        "it opens"
    );
    bytes
}

/// A plain HTTP/1.1 file server on loopback: serves what `put` gave it,
/// 404 otherwise, and remembers the paths asked for.
pub(crate) struct FileServer {
    addr: SocketAddr,
    files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FileServer {
    pub(crate) async fn start(ip: &str) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let files: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let (f, s) = (files.clone(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (f, s) = (f.clone(), s.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
                            .await
                        {
                            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                            _ => return,
                        }
                    }
                    let text = String::from_utf8_lossy(&head).to_string();
                    let path = text.split(' ').nth(1).unwrap_or("").to_string();
                    s.lock().unwrap().push(path.clone());
                    let body = f.lock().unwrap().get(&path).cloned();
                    let reply = match body {
                        Some(b) => {
                            let mut r = format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            )
                            .into_bytes();
                            r.extend_from_slice(&b);
                            r
                        }
                        None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                    };
                    let _ = stream.write_all(&reply).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self {
            addr,
            files,
            seen,
            task,
        }
    }

    pub(crate) fn put(&self, path: &str, body: Vec<u8>) {
        self.files.lock().unwrap().insert(path.to_string(), body);
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn source(&self) -> String {
        format!("http://{}/country-{{year}}-{{month}}.mmdb.gz", self.addr)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The current UTC month's and the month before's file paths.
pub(crate) fn month_paths() -> (String, String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let current = gtm_geo::download::month_of(now);
    let before = gtm_geo::download::previous(current);
    let path = |(y, m): (i64, u32)| format!("/country-{y:04}-{m:02}.mmdb.gz");
    (path(current), path(before))
}

fn with_geoip(config: &str, source: &str) -> String {
    format!("{config}\n[geoip]\nsource = \"{source}\"\nupdate = \"off\"\n")
}

async fn geo_answer(dns: SocketAddr, subnet: &str) -> Vec<String> {
    answers(
        &udp(
            dns,
            &with_ecs(query("geo.example.test.", RecordType::A), subnet),
        )
        .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_downloads_the_months_file_falling_back_to_the_month_before_on_404() {
    let server = FileServer::start("127.0.102.3").await;
    let (current, before) = month_paths();
    server.put(&before, gzip(&de_db(NOV_1)));
    let d = TestDevice::start(&with_geoip(ZONE, &server.source())).await;
    assert_eq!(
        geo_answer(d.v4(), "81.2.69.0/24").await,
        ["192.0.2.52"],
        "no database yet"
    );

    let out = tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "download"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        server.seen(),
        [current.clone(), before.clone()],
        "this month, then the one before"
    );
    assert!(out.stdout.contains("built 2026-11-01"), "{}", out.stdout);
    assert_eq!(geo_answer(d.v4(), "81.2.69.0/24").await, ["192.0.2.50"]);
    assert_eq!(geo_answer(d.v4(), "2.2.2.0/24").await, ["192.0.2.51"]);

    // This month's file appears, not gzipped: it is taken at once.
    server.put(&current, de_db(NOV_15));
    let out = tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "download"]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(server.seen().last(), Some(&current));
    assert_eq!(server.seen().len(), 3);

    // Reported with its build date as a date, its source and age.
    let status = tokio::task::block_in_place(|| run_gtm(&d, &["status", "--json"]));
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["geoip"]["database"]["built"], "2026-11-15");
    assert_eq!(status["geoip"]["database"]["name"], "DBIP-Country-Lite");
    let from = format!("http://{}{current}", server.addr);
    assert_eq!(status["geoip"]["database"]["source"], from.as_str());
    assert!(status["geoip"]["age_days"].as_u64().is_some());
    let text = tokio::task::block_in_place(|| run_gtm(&d, &["status"]));
    assert!(text.stdout.contains("built 2026-11-15"), "{}", text.stdout);
    let show = tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "show"]));
    assert!(show.stdout.contains(&from), "{}", show.stdout);
    let metrics = metrics(&d).await;
    assert!(
        metrics.contains(&format!(
            "gtm_geoip_build_timestamp_seconds{{device=\"test1\",database=\"DBIP-Country-Lite\"}} {NOV_15}"
        )),
        "{metrics}"
    );

    // The downloads are GTM Logs events of their own kind.
    let logs = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--kind", "geoip"]));
    assert_eq!(logs.code, Some(0), "{}", logs.stderr);
    assert!(logs.stdout.contains("not published yet"), "{}", logs.stdout);
    assert_eq!(
        logs.stdout.matches("downloaded http://").count(),
        2,
        "{}",
        logs.stdout
    );

    // It survives a restart: the file in the data directory is used.
    let dir = d.dir.path().to_path_buf();
    let TestDevice { device, dir: keep } = d;
    device.stop().await;
    let again = TestDevice::start_in(&with_geoip(ZONE, &server.source()), &dir).await;
    assert_eq!(geo_answer(again.v4(), "81.2.69.0/24").await, ["192.0.2.50"]);
    again.device.stop().await;
    drop(keep);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_databases_are_refused_and_the_old_one_kept() {
    let server = FileServer::start("127.0.102.3").await;
    let (current, _) = month_paths();
    let d = TestDevice::start(&with_geoip(ZONE, &server.source())).await;
    let good = d.dir.path().join("good.mmdb");
    std::fs::write(&good, de_db(NOV_1)).unwrap();
    let out =
        tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "import", good.to_str().unwrap()]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let installed = std::fs::read(d.dir.path().join("geoip.mmdb")).unwrap();

    let whole = gzip(&de_db(NOV_15));
    for (what, body) in [
        ("garbage", b"this is not a database".to_vec()),
        ("a truncated database", de_db(NOV_15)[..200].to_vec()),
        ("a truncated gzip stream", whole[..whole.len() / 2].to_vec()),
        ("a broken data section", broken_data_section()),
        (
            "a gzipped broken data section",
            gzip(&broken_data_section()),
        ),
    ] {
        server.put(&current, body);
        let out = tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "download"]));
        assert_ne!(out.code, Some(0), "{what} was accepted");
        assert!(
            out.stderr.contains("the current database stays"),
            "{what}: {}",
            out.stderr
        );
        assert_eq!(
            std::fs::read(d.dir.path().join("geoip.mmdb")).unwrap(),
            installed,
            "{what}: the file on disk is unchanged"
        );
        assert_eq!(
            geo_answer(d.v4(), "81.2.69.0/24").await,
            ["192.0.2.50"],
            "{what}"
        );
        assert_eq!(
            geo_answer(d.v4(), "2.2.2.0/24").await,
            ["192.0.2.51"],
            "{what}"
        );
    }
    // Import checks the same way (it used to take this file).
    let broken = d.dir.path().join("broken.mmdb");
    std::fs::write(&broken, broken_data_section()).unwrap();
    let out =
        tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "import", broken.to_str().unwrap()]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("damaged"), "{}", out.stderr);
    assert_eq!(geo_answer(d.v4(), "81.2.69.0/24").await, ["192.0.2.50"]);

    let logs = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "--kind", "geoip"]));
    assert!(
        logs.stdout.matches("refused").count() >= 4,
        "{}",
        logs.stdout
    );
    d.device.stop().await;
}

/// The demo serves `geo.example.test` by country with its embedded
/// database, as config/demo.toml promises (`dig ... +subnet=81.2.69.0/24`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_answers_geodns_by_country_out_of_the_box() {
    let dir = tempfile::tempdir().unwrap();
    let settings = gtm_model::node::NodeSettings {
        name: "demo".into(),
        dns_listen: vec!["127.0.102.5:0".parse().unwrap()],
        api_listen: "127.0.102.5:0".parse().unwrap(),
        udp_workers: Some(1),
        ..gtm_model::node::NodeSettings::demo(dir.path().to_path_buf())
    };
    let device = gtm::device::Device::start(settings, true).await.unwrap();
    let dns = device.dns_addrs[0];
    assert_eq!(
        geo_answer(dns, "81.2.69.0/24").await,
        ["192.0.2.50"],
        "Germany"
    );
    assert_eq!(
        geo_answer(dns, "2.2.2.0/24").await,
        ["192.0.2.51"],
        "France: Europe"
    );
    assert_eq!(
        geo_answer(dns, "3.3.3.0/24").await,
        ["192.0.2.52"],
        "US: the default"
    );
    let info = device.engine.geoip().info().cloned().unwrap();
    assert_eq!(info.source, "embedded demo database");
    device.stop().await;
}

/// Waits (bounded) until `check` holds for `gtm status` on `p`.
fn until_status(p: &Proc, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = p.ok(&["status"]);
        if check(&out) {
            return out;
        }
        assert!(Instant::now() < deadline, "{}: never {what}: {out}", p.name);
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_downloads_on_each_device_and_warns_when_the_databases_differ() {
    let server = FileServer::start("127.0.102.3").await;
    let (current, _) = month_paths();
    server.put(&current, gzip(&de_db(NOV_1)));
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.102.1");
    let b = Proc::start(root.path(), "gtm2", "dc1", "127.0.102.2");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    a.apply_ok(&with_geoip(ZONE, &server.source()));
    // The source is replicated: b knows it without being told.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !b.ok(&["geoip", "show"]).contains(&server.addr.to_string()) {
        assert!(Instant::now() < deadline, "the source never reached gtm2");
        std::thread::sleep(Duration::from_millis(100));
    }
    for p in [&a, &b] {
        let out = p.ok(&["geoip", "download"]);
        assert!(out.contains("built 2026-11-01"), "{out}");
        assert_eq!(
            geo_answer(p.dns(), "81.2.69.0/24").await,
            ["192.0.2.50"],
            "{}",
            p.name
        );
        assert_eq!(
            geo_answer(p.dns(), "2.2.2.0/24").await,
            ["192.0.2.51"],
            "{}",
            p.name
        );
    }
    assert_eq!(
        server.seen(),
        [current.clone(), current.clone()],
        "each device downloaded"
    );
    // Same database: no warning, once a's view of b is fresh.
    until_status(&a, "saw the same database", |s| {
        s.contains("built 2026-11-01") && !s.contains("different GeoIP databases")
    });
    // gtm2 gets another database: gtm1's status warns.
    let other = root.path().join("other.mmdb");
    std::fs::write(&other, de_db(NOV_15)).unwrap();
    b.ok(&["geoip", "import", other.to_str().unwrap()]);
    let warned = until_status(&a, "warned", |s| s.contains("different GeoIP databases"));
    assert!(warned.contains("gtm2"), "{warned}");
    let json: serde_json::Value = serde_json::from_str(&a.ok(&["status", "--json"])).unwrap();
    assert!(json["geoip_warning"].as_str().unwrap().contains("gtm2"));
}

/// `[geoip]` is configuration like the rest: validated with its path,
/// exported as written; without it no device downloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_geoip_table_is_validated_exported_and_required_for_downloads() {
    let d = TestDevice::start(ZONE).await;
    let out = tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "download"]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("no [geoip] table"), "{}", out.stderr);
    // Without the table the status names no source: none is used.
    let status = tokio::task::block_in_place(|| run_gtm(&d, &["status", "--json"]));
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(
        status["geoip"]["source"],
        serde_json::Value::Null,
        "{status}"
    );
    assert_eq!(status["geoip"]["monthly"], false, "{status}");
    for args in [&["status"][..], &["geoip", "show"]] {
        let out = tokio::task::block_in_place(|| run_gtm(&d, args));
        assert!(
            out.stdout.contains("  source   none: no [geoip] table")
                && !out.stdout.contains(gtm_model::config::DEFAULT_GEOIP_SOURCE),
            "{args:?}: {}",
            out.stdout
        );
    }

    let bad = d.dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!("{ZONE}\n[geoip]\nsource = \"ftp://h.test/{{day}}.mmdb\"\n"),
    )
    .unwrap();
    let out =
        tokio::task::block_in_place(|| run_gtm(&d, &["config", "apply", bad.to_str().unwrap()]));
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains(
            "geoip / source: \"ftp://h.test/{day}.mmdb\" is not an http:// or https:// URL"
        ),
        "{}",
        out.stderr
    );

    let good = d.dir.path().join("good.toml");
    std::fs::write(
        &good,
        with_geoip(ZONE, "https://geo.test/c-{year}-{month}.mmdb"),
    )
    .unwrap();
    let out =
        tokio::task::block_in_place(|| run_gtm(&d, &["config", "apply", good.to_str().unwrap()]));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let show = tokio::task::block_in_place(|| run_gtm(&d, &["geoip", "show", "--json"]));
    let show: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(
        show["source"], "https://geo.test/c-{year}-{month}.mmdb",
        "{show}"
    );
    let export = tokio::task::block_in_place(|| run_gtm(&d, &["config", "export"]));
    assert!(
        export.stdout.contains(
            "[geoip]\nsource = \"https://geo.test/c-{year}-{month}.mmdb\"\nupdate = \"off\""
        ),
        "{}",
        export.stdout
    );
    d.device.stop().await;
}

/// A DB-IP ASN Lite shaped database built at `epoch`: 81.2.64.0/20 in
/// AS64500, 2.2.0.0/16 in AS64501.
pub(crate) fn asn_db(epoch: u64) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct AsnEntry {
        autonomous_system_number: u32,
        autonomous_system_organization: &'static str,
    }
    let built = std::time::UNIX_EPOCH + Duration::from_secs(epoch);
    let mut w = mmdb_writer::Writer::builder("DBIP-ASN-Lite (compat=GeoLite2-ASN)")
        .build_epoch(built)
        .build();
    for (net, number, org) in [
        ("81.2.64.0/20", 64500, "Example Carrier"),
        ("2.2.0.0/16", 64501, "Other Carrier"),
    ] {
        let net: mmdb_writer::ipnet::IpNet = net.parse().unwrap();
        w.insert(
            net,
            &AsnEntry {
                autonomous_system_number: number,
                autonomous_system_organization: org,
            },
        )
        .unwrap();
    }
    w.to_bytes().unwrap()
}

const ASN_ZONE: &str = r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[region]]
name = "carriers"
asns = ["AS64501"]

[[domain]]
name = "asn.test"
nameservers = ["ns1.asn.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.61", dc = "dc1" },
  { ip = "192.0.2.62", dc = "dc2" },
  { ip = "192.0.2.63", dc = "dc1" },
]
topology_rules = [
  { client = "asn:64500", address = "192.0.2.61" },
  { client = "region:carriers", datacenter = "dc2" },
]
"#;

/// The ASN database beside the country one: downloaded from its own
/// source by each device of a pair (on request, and by the refresh
/// worker of a device that starts with `asn_source` configured), checked
/// as an ASN database, answering `asn:` rules and regions over UDP with
/// the ASN network as ECS scope, shown by lookup and status, and a device
/// with another ASN database warned about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asn_database_is_downloaded_on_every_device_and_steers_asn_rules() {
    let server = FileServer::start("127.0.102.13").await;
    let (current, _) = month_paths();
    let asn_current = current.replace("/country-", "/asn-");
    server.put(&current, gzip(&de_db(NOV_1)));
    server.put(&asn_current, gzip(&asn_db(NOV_1)));
    let asn_source = server.source().replace("/country-", "/asn-");
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.102.11");
    let mut b = Proc::start(root.path(), "gtm2", "dc1", "127.0.102.12");
    a.ok(&["cluster", "init"]);
    b.join(&a);
    let config = format!(
        "{ASN_ZONE}\n[geoip]\nsource = \"{}\"\nasn_source = \"{asn_source}\"\nupdate = \"off\"\n",
        server.source()
    );
    a.apply_ok(&config);

    // A country database is not an ASN one.
    let country = root.path().join("country.mmdb");
    std::fs::write(&country, de_db(NOV_1)).unwrap();
    let refused = a.gtm(&["geoip", "import", "--asn", country.to_str().unwrap()]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("is not an ASN database: its type is \"DBIP-Country-Lite\""),
        "{said}"
    );

    // On request: gtm1 downloads it from asn_source.
    let out = a.ok(&["geoip", "download", "--asn"]);
    assert!(
        out.contains("asn        DBIP-ASN-Lite") && out.contains(&asn_source),
        "{out}"
    );
    // By itself: gtm2 restarted with monthly updates configured fetches
    // both databases at start.
    a.apply_ok(&config.replace("update = \"off\"", "update = \"monthly\""));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !b.ok(&["geoip", "show"]).contains("update monthly") {
        assert!(Instant::now() < deadline, "the update never reached gtm2");
        std::thread::sleep(Duration::from_millis(100));
    }
    b.terminate();
    b.restart();
    let shown = until_geoip(&b, |s| s.contains("asn        DBIP-ASN-Lite"));
    assert!(shown.contains("built 2026-11-01"), "{shown}");

    for p in [&a, &b] {
        let ask = |subnet: &'static str| async move {
            let r = udp(
                p.dns(),
                &with_ecs(query("www.asn.test.", RecordType::A), subnet),
            )
            .await;
            (answers(&r), ecs_scope(&r))
        };
        // AS64500's rule, scoped to the ASN database's /20.
        assert_eq!(
            ask("81.2.69.0/24").await,
            (vec!["192.0.2.61".to_string()], Some(20)),
            "{}",
            p.name
        );
        // The region of AS64501: dc2, scoped /16.
        assert_eq!(
            ask("2.2.7.0/24").await,
            (vec!["192.0.2.62".to_string()], Some(16)),
            "{}",
            p.name
        );
        // In no AS of a rule: every candidate.
        let (mut all, _) = ask("198.51.100.0/24").await;
        all.sort();
        assert_eq!(
            all,
            ["192.0.2.61", "192.0.2.62", "192.0.2.63"],
            "{}",
            p.name
        );
        let found = p.ok(&["geoip", "lookup", "81.2.69.7"]);
        assert!(
            found.contains("asn        AS64500 (81.2.64.0/20)"),
            "{found}"
        );
    }
    let seen = server.seen();
    assert_eq!(
        seen.iter().filter(|p| **p == asn_current).count(),
        2,
        "each device downloaded the ASN database once: {seen:?}"
    );

    // gtm2 imports another ASN database: gtm1's status warns.
    let other = root.path().join("asn-other.mmdb");
    std::fs::write(&other, asn_db(NOV_15)).unwrap();
    b.ok(&["geoip", "import", "--asn", other.to_str().unwrap()]);
    let warned = until_status(&a, "warned", |s| s.contains("different GeoIP databases"));
    assert!(warned.contains("gtm2"), "{warned}");
}

/// `gtm geoip show` of `p` once `check` holds (at most 30 s).
fn until_geoip(p: &Proc, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = p.ok(&["geoip", "show"]);
        if check(&out) {
            return out;
        }
        assert!(Instant::now() < deadline, "{}: {out}", p.name);
        std::thread::sleep(Duration::from_millis(200));
    }
}
