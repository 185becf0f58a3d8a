//! `explain`: a record's resolution for one client ends in the answer DNS
//! gives that client. Each test asks a real device over loopback the same
//! question both ways (the API's explain and a DNS query with the same
//! client subnet) and compares: the DNS answer is one of the answers
//! explain says are possible, in that order, with that TTL and ECS scope.

use std::time::{Duration, Instant};

use hickory_server::proto::{
    op::{Message, ResponseCode},
    rr::RecordType,
};
use serde_json::Value;

use crate::{backends::*, support::*};

/// A config of one zone, `explain.test`, with a check `web` on `port`
/// probing every 100 ms, deciding on one result, and `records`.
fn config(port: u16, domain: &str, records: &str) -> String {
    format!(
        r#"
[[datacenter]]
name = "dc1"
country = "DE"
continent = "EU"

[[datacenter]]
name = "dc2"
country = "US"
continent = "NA"

[[datacenter]]
name = "dc3"

[[check]]
name = "web"
type = "http"
port = {port}
interval = "100ms"
timeout = "80ms"
failures = 1
successes = 1

[[domain]]
name = "explain.test"
nameservers = ["ns1.explain.test"]
{domain}
{records}
"#
    )
}

async fn explain(d: &TestDevice, name: &str, query: &str) -> Value {
    api_get(d, &format!("/api/v1/records/{name}/A/explain{query}")).await
}

/// The DNS answer to `name`/A, with the ECS `subnet` when given.
async fn ask(d: &TestDevice, name: &str, subnet: Option<&str>) -> Message {
    let q = query(&format!("{name}."), RecordType::A);
    let q = match subnet {
        Some(s) => with_ecs(q, s),
        None => q,
    };
    udp(d.v4(), &q).await
}

/// The possible answers explain lists, as record lists.
fn possible(x: &Value) -> Vec<Vec<String>> {
    x["answer"]["possible"]
        .as_array()
        .unwrap_or_else(|| panic!("no possible answers: {x}"))
        .iter()
        .map(|p| {
            p["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

/// The DNS answer is exactly one of explain's, with its TTL (and scope,
/// with ECS); an empty answer is NOERROR with no record.
fn assert_same(x: &Value, m: &Message) {
    assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{x}");
    let got = answers(m);
    let possible = possible(x);
    if x["answer"]["kind"] == "empty" {
        assert!(got.is_empty(), "explain says empty, DNS says {got:?}: {x}");
        assert!(possible.is_empty(), "{x}");
        return;
    }
    assert!(
        possible.contains(&got),
        "DNS answered {got:?}, explain says one of {possible:?}: {x}"
    );
    let ttl = x["answer"]["ttl"].as_u64().expect("a TTL");
    for r in &m.answers {
        assert_eq!(u64::from(r.ttl), ttl, "{x}");
    }
    if let Some(s) = x["answer"]["ecs_scope"].as_u64() {
        assert_eq!(ecs_scope(m).map(u64::from), Some(s), "ECS scope: {x}");
    }
}

fn step<'a>(x: &'a Value, name: &str) -> &'a Value {
    x["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {x}"))
}

fn address<'a>(x: &'a Value, ip: &str) -> &'a Value {
    x["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "address" && s["subject"] == ip)
        .unwrap_or_else(|| panic!("no address step for {ip}: {x}"))
}

/// Asks until DNS answers `want` (sorted), within 30 s.
async fn until_dns(d: &TestDevice, name: &str, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut got = answers(&ask(d, name, None).await);
        got.sort();
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: never {want:?}, still {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Explains until `ready` holds, within 30 s.
async fn until_explained(
    d: &TestDevice,
    name: &str,
    query: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let x = explain(d, name, query).await;
        if ready(&x) {
            return x;
        }
        assert!(Instant::now() < deadline, "{name}: never ready: {x}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dr_record_is_explained_as_dns_answers_it_before_and_after_dr() {
    let web = HttpBackend::start_at("127.0.0.21:0".parse().unwrap()).await;
    let d = TestDevice::start(&config(
        web.addr.port(),
        "main_dc = \"dc1\"\ndr_dc = \"dc2\"",
        r#"
[[domain.record]]
name = "dr"
type = "A"
ttl = 45
mode = "disaster-recovery"
addresses = [
  { ip = "127.0.0.21", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.21", dc = "dc2" },
]
"#,
    ))
    .await;
    let name = "dr.explain.test";
    let x = until_explained(&d, name, "", |x| {
        address(x, "127.0.0.21")["reason"]
            .as_str()
            .is_some_and(|r| r.contains(": OK ("))
    })
    .await;
    assert_eq!(step(&x, "mode")["outcome"], "Disaster Recovery", "{x}");
    assert_eq!(step(&x, "dr-condition")["outcome"], "DR off", "{x}");
    assert_eq!(address(&x, "127.0.0.21")["outcome"], "healthy", "{x}");
    assert_eq!(address(&x, "198.51.100.21")["outcome"], "healthy", "{x}");
    assert_eq!(possible(&x), [["127.0.0.21"]], "{x}");
    assert_eq!(step(&x, "fail-safe")["outcome"], "not used", "{x}");
    assert_same(&x, &ask(&d, name, None).await);

    // The backend fails: its check goes to Error, the Main DC has no
    // healthy address, DR is on.
    web.set_status(503);
    until_dns(&d, name, &["198.51.100.21"]).await;
    let x = explain(&d, name, "").await;
    assert_eq!(step(&x, "dr-condition")["outcome"], "DR on", "{x}");
    let why = step(&x, "dr-condition")["reason"].as_str().unwrap();
    assert!(why.contains("has no healthy address"), "{why}");
    let main = address(&x, "127.0.0.21");
    assert_eq!(main["outcome"], "unhealthy", "{x}");
    assert!(
        main["reason"].as_str().unwrap().contains(": Error ("),
        "{x}"
    );
    assert_eq!(step(&x, "status")["outcome"], "DR", "{x}");
    assert_eq!(x["answer"]["ttl"], 45, "{x}");
    assert_same(&x, &ask(&d, name, None).await);
    d.device.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datacenter_record_is_explained_as_dns_answers_it() {
    let web = HttpBackend::start_at("127.0.0.22:0".parse().unwrap()).await;
    let d = TestDevice::start(&config(
        web.addr.port(),
        "mode = \"datacenter\"\ndc_order = [\"dc1\", \"dc2\", \"dc3\"]\ndcs_to_select = 2",
        r#"
[[domain.record]]
name = "dcs"
type = "A"
addresses = [
  { ip = "127.0.0.22", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.31", dc = "dc2" },
  { ip = "192.0.2.32", dc = "dc2" },
  { ip = "192.0.2.41", dc = "dc3" },
]
"#,
    ))
    .await;
    let name = "dcs.explain.test";
    let x = until_explained(&d, name, "", |x| {
        address(x, "127.0.0.22")["reason"]
            .as_str()
            .is_some_and(|r| r.contains(": OK ("))
    })
    .await;
    assert_eq!(step(&x, "mode")["outcome"], "Datacenter", "{x}");
    assert_eq!(step(&x, "datacenters")["outcome"], "dc1, dc2", "{x}");
    // Round-robin: each order of the three is possible, every query one.
    assert_eq!(possible(&x).len(), 3, "{x}");
    for _ in 0..4 {
        assert_same(&x, &ask(&d, name, None).await);
    }

    web.set_status(503);
    until_dns(&d, name, &["192.0.2.31", "192.0.2.32", "192.0.2.41"]).await;
    let x = explain(&d, name, "").await;
    assert_eq!(step(&x, "datacenters")["outcome"], "dc2, dc3", "{x}");
    assert_eq!(address(&x, "127.0.0.22")["outcome"], "unhealthy", "{x}");
    assert_eq!(step(&x, "status")["outcome"], "Partially OK", "{x}");
    for p in possible(&x) {
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, ["192.0.2.31", "192.0.2.32", "192.0.2.41"], "{x}");
    }
    for _ in 0..4 {
        assert_same(&x, &ask(&d, name, None).await);
    }
    d.device.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_geodns_record_is_explained_for_each_client_subnet_as_dns_answers_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.mmdb");
    std::fs::write(&db, gtm_geo::DEMO_DATABASE).unwrap();
    let d = TestDevice::start_with(
        &config(
            9,
            "",
            r#"
[[domain.record]]
name = "geo"
type = "A"
topology = true
addresses = [
  { ip = "192.0.2.50", countries = ["DE"] },
  { ip = "192.0.2.51", continents = ["EU"] },
  { ip = "192.0.2.52" },
]
"#,
        ),
        Some(db),
    )
    .await;
    let name = "geo.explain.test";
    for (ecs, place, want) in [
        (Some("81.2.69.0/24"), "answer for country DE", "192.0.2.50"),
        (Some("2.2.2.0/24"), "answer for continent EU", "192.0.2.51"),
        (Some("3.3.3.0/24"), "default answer", "192.0.2.52"),
        (Some("10.1.2.0/24"), "default answer", "192.0.2.52"),
        (None, "default answer", "192.0.2.52"),
    ] {
        let q = ecs.map_or(String::new(), |e| format!("?ecs={e}"));
        let x = explain(&d, name, &q).await;
        assert_eq!(step(&x, "place")["outcome"], place, "{ecs:?}: {x}");
        assert_eq!(step(&x, "place-match")["outcome"], want, "{ecs:?}: {x}");
        assert_eq!(possible(&x), [[want]], "{ecs:?}: {x}");
        assert_same(&x, &ask(&d, name, ecs).await);
    }
    // Placed by GeoIP as the client subnet says, not by the source.
    let x = explain(&d, name, "?client=3.3.3.3&ecs=81.2.69.0/24").await;
    let why = step(&x, "place")["reason"].as_str().unwrap();
    assert!(why.contains("ECS network 81.2.69.0/24"), "{why}");
    assert!(why.contains("country DE, continent EU"), "{why}");
    assert_eq!(x["answer"]["ecs_scope"], 24, "{x}");
    // The source address alone places the client when there is no ECS.
    let x = explain(&d, name, "?client=2.2.2.7").await;
    assert_eq!(
        step(&x, "place")["outcome"],
        "answer for continent EU",
        "{x}"
    );
    d.device.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_safe_and_empty_answers_are_explained_as_dns_answers_them() {
    let web = HttpBackend::start_at("127.0.0.24:0".parse().unwrap()).await;
    web.set_status(503);
    let d = TestDevice::start(&config(
        web.addr.port(),
        "",
        r#"
[[domain.record]]
name = "safe"
type = "A"
ttl = 40
fail_safe = ["192.0.2.250", "192.0.2.251"]
addresses = [{ ip = "127.0.0.24", hc = "check:web" }]

[[domain.record]]
name = "none"
type = "A"
addresses = [{ ip = "127.0.0.24", hc = "check:web" }]
"#,
    ))
    .await;
    until_dns(&d, "safe.explain.test", &["192.0.2.250", "192.0.2.251"]).await;
    let x = explain(&d, "safe.explain.test", "").await;
    assert_eq!(step(&x, "fail-safe")["outcome"], "used", "{x}");
    assert_eq!(step(&x, "candidates")["outcome"], "none", "{x}");
    assert_eq!(x["answer"]["kind"], "fail-safe", "{x}");
    assert_eq!(step(&x, "status")["outcome"], "Fail-safe", "{x}");
    for _ in 0..3 {
        assert_same(&x, &ask(&d, "safe.explain.test", None).await);
    }

    until_dns(&d, "none.explain.test", &[]).await;
    let x = explain(&d, "none.explain.test", "").await;
    assert_eq!(x["answer"]["kind"], "empty", "{x}");
    assert_eq!(step(&x, "fail-safe")["outcome"], "none", "{x}");
    assert_eq!(step(&x, "status")["outcome"], "No healthy records", "{x}");
    assert_same(&x, &ask(&d, "none.explain.test", None).await);
    d.device.stop().await;
}

/// A DR record of two static addresses: DR off, the Main address.
const STATIC_DR: &str = r#"
[[domain.record]]
name = "cli"
type = "A"
ttl = 30
mode = "disaster-recovery"
addresses = [
  { ip = "192.0.2.20", dc = "dc1" },
  { ip = "198.51.100.20", dc = "dc2" },
]
"#;

/// Bad input is a 400 naming the value; an unknown record or device a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_clients_networks_and_devices_are_refused_by_name() {
    let d = TestDevice::start(&config(9, "main_dc = \"dc1\"\ndr_dc = \"dc2\"", STATIC_DR)).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    for (path, query, status, named) in [
        (
            "cli.explain.test",
            "?client=not-an-ip",
            400,
            "\"not-an-ip\"",
        ),
        (
            "cli.explain.test",
            "?ecs=81.2.69.0/33",
            400,
            "\"81.2.69.0/33\"",
        ),
        ("cli.explain.test", "?ecs=x/y", 400, "\"x/y\""),
        ("cli.explain.test", "?device=nowhere", 404, "\"nowhere\""),
        ("nothing.explain.test", "", 404, "nothing.explain.test/A"),
    ] {
        let r = http
            .get(format!(
                "http://{}/api/v1/records/{path}/A/explain{query}",
                d.device.api_addr
            ))
            .bearer_auth(&d.device.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}{query}");
        let body: Value = r.json().await.unwrap();
        assert!(
            body["message"].as_str().unwrap().contains(named),
            "{path}{query}: {body}"
        );
    }
    d.device.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_the_steps_and_the_answer() {
    let d = TestDevice::start(&config(9, "main_dc = \"dc1\"\ndr_dc = \"dc2\"", STATIC_DR)).await;
    let out = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &[
                "record",
                "explain",
                "cli.explain.test",
                "A",
                "--client",
                "192.0.2.1",
            ],
        )
    });
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let text = &out.stdout;
    assert!(
        text.starts_with("cli.explain.test/A on test1, for a query from 192.0.2.1\n"),
        "{text}"
    );
    for line in [
        ". address 192.0.2.20: healthy",
        ". address 198.51.100.20: healthy",
        ". mode: Disaster Recovery",
        ". dr-condition: DR off",
        ". candidates: 192.0.2.20",
        ". place: not used",
        ". balance: round-robin",
        ". fail-safe: not used",
        ". status: OK",
        "answer  addresses (NOERROR, TTL 30)",
        "  192.0.2.20\n",
        "rotation  every query gets this answer",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    let json = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["record", "explain", "cli.explain.test", "A", "--json"],
        )
    });
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let x: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_same(&x, &ask(&d, "cli.explain.test", None).await);
    let bad = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &[
                "record",
                "explain",
                "cli.explain.test",
                "A",
                "--ecs",
                "nope",
            ],
        )
    });
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("\"nope\""), "{}", bad.stderr);
    d.device.stop().await;
}

/// The console's explain page, linked from the preview: the same steps
/// and answer for the client of its form, and a bad network refused by
/// name with the form to correct it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_page_explains_for_the_client_of_its_form() {
    let d = TestDevice::start(&config(9, "main_dc = \"dc1\"\ndr_dc = \"dc2\"", STATIC_DR)).await;
    let base = format!("http://{}", d.device.api_addr);
    // Plain HTTP on loopback, redirects not followed (the login's cookie
    // comes with one); reqwest still wants a TLS provider named.
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let web = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = web
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("secret={}", d.device.token))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let page = |path: String| {
        let (web, cookie, base) = (web.clone(), cookie.clone(), base.clone());
        async move {
            let r = web
                .get(format!("{base}{path}"))
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, preview) = page("/ui/records/cli.explain.test/A".into()).await;
    assert_eq!(status, 200);
    assert!(
        preview.contains("href=\"/ui/records/cli.explain.test/A/explain?device=test1\""),
        "{preview}"
    );
    let (status, html) =
        page("/ui/records/cli.explain.test/A/explain?device=test1&client=192.0.2.1".into()).await;
    assert_eq!(status, 200, "{html}");
    for part in [
        "for a query from 192.0.2.1",
        "dr-condition",
        "DR off",
        "<ol id=\"answer\"><li>192.0.2.20</li></ol>",
        "value=\"192.0.2.1\"",
    ] {
        assert!(html.contains(part), "{part:?} in {html}");
    }
    let (status, html) = page("/ui/records/cli.explain.test/A/explain?ecs=nope".into()).await;
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("Refused: ecs &quot;nope&quot;"), "{html}");
    assert!(html.contains("value=\"nope\""), "{html}");
    d.device.stop().await;
}

/// `--device` asks another device of the cluster, which explains for the
/// same client as it answers; a bad network is refused before any device
/// is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_device_explains_as_it_answers() {
    use crate::cluster::{pair, until_answer, zone};
    let (_root, a, b) = pair(149);
    a.apply_ok(&zone("192.0.2.9"));
    until_answer(&a, "192.0.2.9").await;
    until_answer(&b, "192.0.2.9").await;
    let out = a.ok(&[
        "record",
        "explain",
        "www.pair.test",
        "A",
        "--device",
        &b.name,
        "--client",
        "192.0.2.1",
        "--json",
    ]);
    let x: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(x["device"], b.name.as_str(), "{x}");
    assert_eq!(x["client"], "192.0.2.1", "{x}");
    assert_same(
        &x,
        &udp(b.dns(), &query("www.pair.test.", RecordType::A)).await,
    );
    let bad = a.gtm(&[
        "record",
        "explain",
        "www.pair.test",
        "A",
        "--device",
        &b.name,
        "--ecs",
        "10.0.0.0/40",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("\"10.0.0.0/40\""), "{stderr}");
}
