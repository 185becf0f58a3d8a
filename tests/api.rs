//! The management plane: who may call what, the object routes through the
//! CLI, /metrics, and the OpenAPI document.

use std::time::Duration;

use gtm_api::routes::{Access, openapi, operations};
use hickory_server::proto::rr::RecordType;
use reqwest::Method;

use crate::{backends::*, support::*};

const ZONE: &str = r#"
[[datacenter]]
name = "dc1"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.10", dc = "dc1" }]
"#;

fn base(d: &TestDevice) -> String {
    format!("http://{}", d.device.api_addr)
}

/// Every route of the table, and the Raft RPC routes, refuse a caller
/// without the token (or the cluster secret); only /health and /metrics
/// answer anyone.
/// A client that asks for gzip gets the API's answers gzipped, the same
/// bytes once inflated; one that does not gets them plain; and a followed
/// event log stays a stream, never compressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_gzipped_for_a_client_that_asks_and_streams_never_are() {
    use std::io::Read;
    let d = TestDevice::start(ZONE).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let get = |path: &str, gzip: bool| {
        let mut r = http
            .get(format!("{}{path}", base(&d)))
            .bearer_auth(&d.device.token);
        if gzip {
            r = r.header("accept-encoding", "gzip");
        }
        r.send()
    };
    let plain = get("/api/v1/openapi.json", false).await.unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.bytes().await.unwrap();
    let zipped = get("/api/v1/openapi.json", true).await.unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    let zipped = zipped.bytes().await.unwrap();
    assert!(
        zipped.len() * 4 < plain.len(),
        "{} of {}",
        zipped.len(),
        plain.len()
    );
    let mut inflated = Vec::new();
    flate2::read::GzDecoder::new(&zipped[..])
        .read_to_end(&mut inflated)
        .unwrap();
    assert_eq!(inflated, plain);

    let stream = get("/api/v1/events?follow=true", true).await.unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers().get("content-encoding").is_none(),
        "{:?}",
        stream.headers()
    );
    assert_eq!(stream.headers()["content-type"], "application/x-ndjson");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_but_health_and_metrics_needs_a_credential() {
    let d = TestDevice::start(ZONE).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let mut routes: Vec<(Method, String, Access)> = operations()
        .into_iter()
        .map(|op| {
            // Every path parameter filled in; the guard acts before routing
            // to the handler reads any of them.
            let path = op
                .path
                .split('/')
                .map(|seg| if seg.starts_with('{') { "x" } else { seg })
                .collect::<Vec<_>>()
                .join("/");
            (op.method, path, op.access)
        })
        .collect();
    routes.extend(
        gtm_cluster::RPC_PATHS
            .iter()
            .map(|p| (Method::POST, p.to_string(), Access::ClusterSecret)),
    );
    assert!(routes.len() > 50, "the table lists every route");
    let mut public = Vec::new();
    for (method, path, access) in &routes {
        let url = format!("{}{path}", base(&d));
        let anonymous = http.request(method.clone(), &url).send().await.unwrap();
        let wrong_token = http
            .request(method.clone(), &url)
            .bearer_auth("not-the-token")
            .send()
            .await
            .unwrap();
        match access {
            Access::Public => {
                assert_eq!(anonymous.status(), 200, "{method} {path}");
                public.push(path.clone());
            }
            Access::Token | Access::ClusterSecret => {
                assert_eq!(
                    anonymous.status(),
                    401,
                    "{method} {path} without a credential"
                );
                assert_eq!(
                    wrong_token.status(),
                    401,
                    "{method} {path} with a wrong token"
                );
                let body: serde_json::Value = anonymous.json().await.unwrap_or_default();
                if path.starts_with("/api/") {
                    assert_eq!(body["error"], "unauthorized", "{method} {path}");
                }
            }
        }
    }
    public.sort();
    assert_eq!(public, ["/health", "/metrics"]);

    // The token opens the API routes but not the device-to-device ones.
    let status = http
        .get(format!(
            "{}/cluster/v1/preview/www.example.test/A",
            base(&d)
        ))
        .bearer_auth(&d.device.token)
        .send()
        .await
        .unwrap();
    assert_eq!(
        status.status(),
        401,
        "the API token is not the cluster secret"
    );

    // Errors are JSON with a stable label, including axum's own.
    let authed = |m: Method, p: &str| {
        http.request(m, format!("{}{p}", base(&d)))
            .bearer_auth(&d.device.token)
    };
    let unknown = authed(Method::GET, "/api/v1/nope").send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    let body: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(body["error"], "not-found");
    let bad_json = authed(Method::PUT, "/api/v1/checks/web")
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 400);
    let body: serde_json::Value = bad_json.json().await.unwrap();
    assert_eq!(body["error"], "bad-request");
    // Bodies over the limit are refused before they are read whole.
    let huge = authed(Method::POST, "/api/v1/config/validate")
        .body(vec![b'#'; 161 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), 413);
}

/// Every object command of the CLI, against a running device: the answers
/// follow, a bad write changes nothing, and retries are harmless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_managed_one_by_one_through_the_cli() {
    let d = TestDevice::start(ZONE).await;
    let dir = d.dir.path().to_path_buf();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let ok = |args: &[&str]| {
        let r = tokio::task::block_in_place(|| run_gtm(&d, args));
        assert_eq!(r.code, Some(0), "gtm {args:?}: {}{}", r.stdout, r.stderr);
        r.stdout
    };
    let fails = |args: &[&str], code: i32| {
        let r = tokio::task::block_in_place(|| run_gtm(&d, args));
        assert_eq!(r.code, Some(code), "gtm {args:?}: {}{}", r.stdout, r.stderr);
        r.stderr
    };
    let www = || async { answers(&udp(d.v4(), &query("www.example.test.", RecordType::A)).await) };

    // Datacenters.
    let dc2 = file("dc2.toml", "country = \"US\"\ncontinent = \"NA\"\n");
    assert!(ok(&["dc", "put", "dc2", "--file", &dc2, "--dry-run"]).contains("+ datacenter dc2"));
    fails(&["dc", "show", "dc2"], 5);
    assert!(ok(&["dc", "put", "dc2", "--file", &dc2]).contains("applied as version"));
    assert_eq!(
        ok(&["dc", "put", "dc2", "--file", &dc2]),
        "no changes\n",
        "a retried put"
    );
    assert!(ok(&["dc", "show", "dc2"]).contains("country = \"US\""));
    let list: serde_json::Value = serde_json::from_str(&ok(&["dc", "list", "--json"])).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2);

    // Records and addresses: the answers follow.
    ok(&[
        "record",
        "address",
        "put",
        "www.example.test",
        "A",
        "192.0.2.11",
        "--dc",
        "dc2",
    ]);
    let mut a = www().await;
    a.sort();
    assert_eq!(a, ["192.0.2.10", "192.0.2.11"]);
    ok(&[
        "record",
        "address",
        "delete",
        "www.example.test",
        "A",
        "192.0.2.10",
    ]);
    assert_eq!(www().await, ["192.0.2.11"]);
    fails(
        &[
            "record",
            "address",
            "delete",
            "www.example.test",
            "A",
            "192.0.2.10",
        ],
        5,
    );
    let api = file(
        "api.toml",
        "addresses = [{ ip = \"192.0.2.30\" }]\nttl = 60\n",
    );
    ok(&["record", "put", "api.example.test", "A", "--file", &api]);
    let r = udp(d.v4(), &query("api.example.test.", RecordType::A)).await;
    assert_eq!(answers(&r), ["192.0.2.30"]);
    assert_eq!(r.answers[0].ttl, 60);
    assert!(ok(&["record", "show", "api.example.test", "A"]).contains("ttl = 60"));
    // A body without addresses changes the rest and keeps them.
    let ttl = file("ttl.toml", "ttl = 45\n");
    ok(&["record", "put", "api.example.test", "A", "--file", &ttl]);
    let r = udp(d.v4(), &query("api.example.test.", RecordType::A)).await;
    assert_eq!(answers(&r), ["192.0.2.30"]);
    assert_eq!(r.answers[0].ttl, 45);
    assert!(ok(&["record", "list", "example.test"]).contains("api"));
    ok(&["record", "delete", "api.example.test", "A"]);
    let r = udp(d.v4(), &query("api.example.test.", RecordType::A)).await;
    assert!(answers(&r).is_empty());
    fails(&["record", "show", "www.elsewhere.test", "A"], 5);

    // Checks and scenarios; a record's address then follows a check.
    let mut web = HttpBackend::start_at("127.0.0.2:0".parse().unwrap()).await;
    let check = file(
        "web.toml",
        &format!(
            "type = \"http\"\ntarget = \"127.0.0.2\"\nport = {}\ninterval = \"1s\"\ntimeout = \"500ms\"\n",
            web.addr.port()
        ),
    );
    ok(&["check", "put", "web", "--file", &check]);
    assert!(ok(&["check", "show", "web", "--json"]).contains("\"type\": \"http\""));
    let scenario = file("up.toml", "condition = \"web\"\n");
    ok(&["scenario", "put", "spare", "--file", &scenario]);
    assert!(ok(&["scenario", "show", "spare", "--json"]).contains("\"condition\": \"web\""));
    ok(&["scenario", "delete", "spare"]);
    fails(&["scenario", "show", "spare"], 5);
    ok(&["scenario", "put", "web-up", "--file", &scenario]);
    assert!(ok(&["scenario", "list"]).contains("web-up"));
    ok(&[
        "record",
        "address",
        "put",
        "www.example.test",
        "A",
        "192.0.2.11",
        "--dc",
        "dc2",
        "--hc",
        "scenario:web-up",
    ]);
    ok(&[
        "record",
        "address",
        "put",
        "www.example.test",
        "A",
        "192.0.2.12",
        "--dc",
        "dc1",
    ]);
    wait_for(|| async { www().await.contains(&"192.0.2.11".to_string()) }).await;
    web.stop().await;
    wait_for(|| async { www().await == ["192.0.2.12"] }).await;

    // A write that would leave the configuration invalid changes nothing.
    let before = ok(&["config", "export"]);
    let err = fails(&["check", "delete", "web"], 2);
    assert!(err.contains("unknown check \"web\""), "{err}");
    let err = fails(&["dc", "delete", "dc2"], 2);
    assert!(err.contains("unknown datacenter \"dc2\""), "{err}");
    let bad = file("bad.toml", "country = \"USA\"\n");
    fails(&["dc", "put", "dc3", "--file", &bad], 2);
    assert_eq!(ok(&["config", "export"]), before, "nothing half-applied");
    // Once nothing refers to them they go (the whole address replaced: its
    // hc back to the default).
    ok(&[
        "record",
        "address",
        "put",
        "www.example.test",
        "A",
        "192.0.2.11",
        "--dc",
        "dc1",
        "--replace",
    ]);
    ok(&["scenario", "delete", "web-up"]);
    ok(&["check", "delete", "web"]);
    fails(&["check", "show", "web"], 5);
    ok(&[
        "record",
        "address",
        "delete",
        "www.example.test",
        "A",
        "192.0.2.11",
    ]);
    ok(&["dc", "delete", "dc2"]);
    assert!(!ok(&["dc", "list"]).contains("dc2"));

    // Changing a domain's settings keeps its records unless the body
    // lists them.
    let settings = file(
        "example.toml",
        "nameservers = [\"ns1.example.test\"]\nttl = 90\n",
    );
    let out = ok(&["domain", "put", "example.test", "--file", &settings]);
    assert!(!out.contains("record"), "{out}");
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(r.answers[0].ttl, 90);
    assert!(ok(&["domain", "show", "example.test"]).contains("[[record]]"));

    // Services and domains.
    let svc = file("svc.toml", "domains = [\"example.test\"]\n");
    ok(&["service", "put", "shop", "--file", &svc]);
    assert!(ok(&["service", "show", "shop"]).contains("example.test"));
    assert!(ok(&["service", "list", "--json"]).contains("\"shop\""));
    ok(&["service", "delete", "shop"]);
    assert_eq!(ok(&["service", "list", "--json"]).trim(), "[]");
    let zone = file(
        "zone.toml",
        "nameservers = [\"ns1.other.test\"]\nttl = 120\n",
    );
    ok(&["domain", "put", "other.test", "--file", &zone]);
    let r = udp(d.v4(), &query("other.test.", RecordType::SOA)).await;
    assert_eq!(r.answers.len(), 1, "the new zone answers at its apex");
    // The names alone, for finding a record's domain without its records.
    let names = api_get(&d, "/api/v1/names").await;
    assert_eq!(
        names["domains"],
        serde_json::json!(["example.test", "other.test"])
    );
    let config = d.device.engine.config();
    let datacenters: Vec<&str> = config.datacenters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names["datacenters"], serde_json::json!(datacenters));
    assert!(
        names["checks"].is_array() && names["services"].is_array(),
        "{names}"
    );
    assert!(ok(&["domain", "list"]).contains("other.test"));
    assert!(ok(&["domain", "show", "other.test"]).contains("ttl = 120"));
    ok(&["domain", "delete", "other.test"]);
    let r = udp(d.v4(), &query("other.test.", RecordType::SOA)).await;
    assert_eq!(
        r.metadata.response_code,
        hickory_server::proto::op::ResponseCode::Refused
    );
    let completions = ok(&["completions", "bash"]);
    assert!(completions.contains("gtm record address put") || completions.contains("_gtm"));

    // A write against a stale version is refused (read, edit, write).
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let version = d.device.engine.version();
    let stale = http
        .put(format!(
            "{}/api/v1/datacenters/dc9?version={}",
            base(&d),
            version - 1
        ))
        .bearer_auth(&d.device.token)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 409);
    let body: serde_json::Value = stale.json().await.unwrap();
    assert_eq!(body["error"], "conflict");
}

async fn wait_for<F, Fut>(mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the condition did not come true within 10 s");
}

/// What /metrics says follows real queries and a real probe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_queries_and_show_checks_and_records() {
    let web = HttpBackend::start_at("127.0.0.2:0".parse().unwrap()).await;
    let config = format!(
        "{ZONE}\n[[check]]\nname = \"web\"\ntype = \"http\"\ntarget = \"127.0.0.2\"\nport = {}\ninterval = \"1s\"\n",
        web.addr.port()
    );
    let d = TestDevice::start(&config).await;
    for _ in 0..3 {
        udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    }
    udp(d.v4(), &query("nope.example.test.", RecordType::A)).await;
    tcp(d.v4(), &query("www.example.test.", RecordType::AAAA)).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let scrape = || async {
        http.get(format!("{}/metrics", base(&d)))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    wait_for(|| async { scrape().await.contains("check=\"web\",state=\"OK\"") }).await;
    let text = scrape().await;
    for line in [
        "gtm_dns_responses_total{type=\"A\",rcode=\"NOERROR\"} 3",
        "gtm_dns_responses_total{type=\"A\",rcode=\"NXDOMAIN\"} 1",
        "gtm_dns_responses_total{type=\"AAAA\",rcode=\"NOERROR\"} 1",
        "gtm_dns_response_seconds_count 5",
        "gtm_record_answers_total{record=\"www.example.test/A\"} 3",
        "gtm_record_status{device=\"test1\",record=\"www.example.test/A\",status=\"OK\"} 1",
        "gtm_check_state{device=\"test1\",check=\"web\",state=\"OK\"} 1",
        "gtm_raft_role{role=\"none\"} 1",
        "# TYPE gtm_probe_duration_seconds histogram",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("gtm_probe_duration_seconds_count{check=\"web\"}")),
        "{text}"
    );

    // Answer counts survive a configuration change that keeps the record.
    let changed = config.replace("interval = \"1s\"", "interval = \"2s\"");
    crate::support::apply_text(&d.device, changed.as_str())
        .await
        .unwrap();
    udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    let text = scrape().await;
    assert!(
        text.contains("gtm_record_answers_total{record=\"www.example.test/A\"} 4"),
        "{text}"
    );
}

/// docs/openapi.json is the document the device serves.
/// (`GTM_WRITE_OPENAPI=1 cargo test openapi` rewrites it.)
#[test]
fn the_openapi_document_in_docs_is_current() {
    let generated = serde_json::to_string_pretty(&openapi()).unwrap() + "\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    if std::env::var_os("GTM_WRITE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == generated,
        "docs/openapi.json is out of date: run GTM_WRITE_OPENAPI=1 cargo test openapi"
    );
    let doc: serde_json::Value = serde_json::from_str(&generated).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.contains_key("/api/v1/domains/{domain}/records/{name}/{rtype}"));
    assert!(
        !paths.keys().any(|p| p.starts_with("/cluster/v1")),
        "device-to-device routes stay out"
    );
    // Every write names the client's command id header, no read does.
    let mut writes = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let header =
                op["parameters"].as_array().unwrap().iter().find(|p| {
                    p["in"] == "header" && p["name"] == gtm_node::command::COMMAND_HEADER
                });
            if method == "get" {
                assert!(header.is_none(), "{method} {path}");
                continue;
            }
            writes += 1;
            let header = header.unwrap_or_else(|| panic!("{method} {path}: no x-gtm-command"));
            assert_eq!(header["required"], false, "{method} {path}");
            assert_eq!(header["schema"]["pattern"], "^[0-9a-fA-F]{32}$");
        }
    }
    assert!(writes > 30, "{writes} writes");
}

/// Schema-driven fuzzing: requests made from the OpenAPI document (random
/// path parameters, query values and bodies, mostly shaped like the schemas,
/// some not) never get a 5xx, and the device keeps answering DNS. The seed
/// is printed; `GTM_FUZZ_SEED=N` replays a run. Cluster membership routes
/// are left out (they would make this device join or leave a cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_made_from_the_openapi_document_never_get_a_server_error() {
    let d = TestDevice::start(ZONE).await;
    let seed = std::env::var("GTM_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("fuzz seed {seed} (GTM_FUZZ_SEED={seed} replays it)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let doc = openapi();
    let schemas = doc["components"]["schemas"].as_object().unwrap().clone();
    let mut ops: Vec<(String, String, serde_json::Value)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if path.starts_with("/api/v1/cluster/") && method != "get" {
                continue;
            }
            ops.push((method.to_uppercase(), path.clone(), op.clone()));
        }
    }
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..3000 {
        let (method, path, op) = &ops[rng.usize(..ops.len())];
        let mut url = base(&d);
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            url.push('/');
            if seg.starts_with('{') {
                url.push_str(&encode(&pick(&mut rng, NAMES)));
            } else {
                url.push_str(seg);
            }
        }
        let mut query = Vec::new();
        for p in op["parameters"].as_array().unwrap() {
            // follow=true streams events for as long as the client reads.
            if p["in"] == "query" && p["name"] != "follow" && rng.bool() {
                let value = match p["schema"]["type"].as_str() {
                    Some("boolean") => pick(&mut rng, &["true", "false", "1", "yes", ""]),
                    Some("integer") => {
                        pick(&mut rng, &["0", "1", "-1", "18446744073709551616", "x"])
                    }
                    _ => pick(&mut rng, NAMES),
                };
                query.push((p["name"].as_str().unwrap().to_string(), value));
            }
        }
        let mut request = http
            .request(method.parse().unwrap(), &url)
            .query(&query)
            .bearer_auth(&d.device.token);
        if let Some(content) = op["requestBody"]["content"].as_object() {
            let (kind, media) = content.iter().next().unwrap();
            request = match kind.as_str() {
                "application/json" => {
                    let body = if rng.u8(..10) == 0 {
                        any_value(&mut rng, 0)
                    } else {
                        value_for(&media["schema"], &schemas, &mut rng, 0)
                    };
                    request.json(&body)
                }
                "application/toml" => request.body(pick(&mut rng, TOMLS)),
                _ => request.body(
                    (0..rng.usize(..64))
                        .map(|_| rng.u8(..))
                        .collect::<Vec<u8>>(),
                ),
            };
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        assert!(
            status < 500,
            "request {i}: {method} {url} {query:?} answered {status}: {body} (seed {seed})"
        );
        *statuses.entry(status).or_insert(0) += 1;
    }
    eprintln!("statuses: {statuses:?}");
    assert!(statuses.get(&200).is_some_and(|n| *n > 100), "{statuses:?}");
    let health = http
        .get(format!("{}/health", base(&d)))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // DNS answers from whatever configuration the requests left.
    use hickory_server::proto::op::ResponseCode;
    let config = d.device.engine.config();
    for domain in &config.domains {
        let r = udp(
            d.v4(),
            &query(&format!("{}.", domain.name), RecordType::SOA),
        )
        .await;
        assert_eq!(
            r.metadata.response_code,
            ResponseCode::NoError,
            "{}",
            domain.name
        );
    }
    if !config.domains.iter().any(|x| x.name == "example.test") {
        let r = udp(d.v4(), &query("example.test.", RecordType::SOA)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    }
}

/// Path and string values: real names, and the awkward ones.
const NAMES: &[&str] = &[
    "web",
    "dc1",
    "dc2",
    "example.test",
    "www",
    "www.example.test",
    "@",
    "*",
    "A",
    "AAAA",
    "CNAME",
    "TXT",
    "MX",
    "192.0.2.10",
    "127.0.0.1",
    "::1",
    "check:web",
    "scenario:up",
    "static",
    "disabled",
    "10s",
    "0s",
    "1ms",
    "ok",
    "error",
    "x",
    "",
    " ",
    "..",
    "%",
    "a/b",
    "ünï",
    "\u{0}",
    "-1",
    "99999999999999999999",
    "http://127.0.0.1:1",
    "manual",
    "http",
    "tcp",
    "dc1 OR NOT dc2",
    "(",
    "www.example.test/A",
    "US",
    "EU",
    "ZZ",
];

const TOMLS: &[&str] = &[
    ZONE,
    "",
    "[[domain]]\nname = \"example.test\"\n",
    "[[domain]\n",
    "x = 1\n",
    "[[check]]\nname = \"c\"\ntype = \"tcp\"\ntarget = \"127.0.0.1\"\nport = 1\ninterval = \"1s\"\n",
    "[[datacenter]]\nname = \"dc1\"\n[[datacenter]]\nname = \"dc1\"\n",
];

fn pick(rng: &mut fastrand::Rng, from: &[&str]) -> String {
    from[rng.usize(..from.len())].to_string()
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn any_value(rng: &mut fastrand::Rng, depth: usize) -> serde_json::Value {
    use serde_json::Value;
    match rng.u8(..if depth > 2 { 4 } else { 6 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.bool()),
        2 => serde_json::json!(rng.i64(..)),
        3 => Value::String(pick(rng, NAMES)),
        4 => Value::Array(
            (0..rng.usize(..3))
                .map(|_| any_value(rng, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.usize(..3))
                .map(|_| (pick(rng, NAMES), any_value(rng, depth + 1)))
                .collect(),
        ),
    }
}

/// A value shaped like `schema`, now and then with one thing wrong.
fn value_for(
    schema: &serde_json::Value,
    defs: &serde_json::Map<String, serde_json::Value>,
    rng: &mut fastrand::Rng,
    depth: usize,
) -> serde_json::Value {
    use serde_json::{Value, json};
    if depth > 5 || rng.u8(..50) == 0 {
        return any_value(rng, depth);
    }
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap();
        return value_for(&defs[name], defs, rng, depth + 1);
    }
    if let Some(e) = schema["enum"].as_array() {
        return e[rng.usize(..e.len())].clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema[key].as_array() {
            return value_for(&branches[rng.usize(..branches.len())], defs, rng, depth + 1);
        }
    }
    let kind = match &schema["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts[rng.usize(..ts.len())]
            .as_str()
            .unwrap_or("null")
            .to_string(),
        _ => return any_value(rng, depth),
    };
    match kind.as_str() {
        "object" => {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = serde_json::Map::new();
            if let Some(props) = schema["properties"].as_object() {
                for (name, sub) in props {
                    if required.contains(&name.as_str()) || rng.bool() {
                        out.insert(name.clone(), value_for(sub, defs, rng, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        "array" => Value::Array(
            (0..rng.usize(..3))
                .map(|_| value_for(&schema["items"], defs, rng, depth + 1))
                .collect(),
        ),
        "string" => Value::String(pick(rng, NAMES)),
        "integer" => json!([0i64, 1, 2, 30, 65535, 65536, -1, 4_294_967_296][rng.usize(..8)]),
        "number" => json!(rng.f64() * 100.0),
        "boolean" => Value::Bool(rng.bool()),
        _ => Value::Null,
    }
}

/// The event log pages backwards by time, and a retried apply of the
/// configuration already applied makes no new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_page_backwards_and_a_retried_apply_makes_no_version() {
    let d = TestDevice::start(ZONE).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let put = |text: String| {
        http.put(format!("{}/api/v1/config", base(&d)))
            .bearer_auth(&d.device.token)
            .body(text)
            .send()
    };
    let mut versions = Vec::new();
    for ip in ["192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.23"] {
        let r: serde_json::Value = put(ZONE.replace("192.0.2.10", ip))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        versions.push((
            r["applied"].as_bool().unwrap(),
            r["version"].as_u64().unwrap(),
        ));
    }
    let first = versions[0].1;
    assert_eq!(
        versions,
        [
            (true, first),
            (true, first + 1),
            (true, first + 2),
            (false, first + 2)
        ],
        "the repeated apply changes nothing"
    );

    let page = |query: String| {
        let http = http.clone();
        let url = format!("{}/api/v1/events?kind=config&{query}", base(&d));
        let token = d.device.token.clone();
        async move {
            let events: Vec<gtm_engine::Event> = http
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            events
        }
    };
    let all = page(String::new()).await;
    assert!(all.len() >= 3, "{all:?}");
    let newest = page("limit=2".into()).await;
    assert_eq!(newest.len(), 2);
    assert_eq!(
        newest[1].seq,
        all.last().unwrap().seq,
        "the newest come last"
    );
    let before = page(format!("limit=2&before={}", newest[0].time_ms)).await;
    assert!(
        before.iter().all(|e| e.time_ms < newest[0].time_ms),
        "{before:?}"
    );
    let cli = tokio::task::block_in_place(|| run_gtm(&d, &["logs", "-n", "1", "--kind", "config"]));
    assert_eq!(cli.code, Some(0), "{}", cli.stderr);
    assert_eq!(cli.stdout.lines().count(), 1, "{}", cli.stdout);
}

/// A configuration whose command is over 128 MiB is refused with 413
/// `too-large` before anything is proposed: the served one stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_over_the_command_limit_is_refused_before_it_is_proposed() {
    let d = TestDevice::start(ZONE).await;
    let before = d.device.replication.status().applied_index;
    let text = format!("{ZONE}\n# {}\n", "x".repeat(129 << 20));
    let err = crate::support::apply_text(&d.device, &text)
        .await
        .expect_err("over the limit");
    match err {
        gtm_node::replication::ApplyError::Rejected(e) => {
            assert_eq!(e.error, gtm_model::error::ErrorKind::TooLarge, "{e:?}");
            assert!(
                e.message.contains("MiB; the limit is 128 MiB"),
                "{}",
                e.message
            );
        }
        other => panic!("want too-large, got {other:?}"),
    }
    assert_eq!(d.device.replication.status().applied_index, before);
}

/// Object writes change what they are given and keep the rest; replacing a
/// whole object is explicit; a configuration with no domain needs its flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_keep_what_they_are_not_told_to_change() {
    let d = TestDevice::start(ZONE).await;
    let dir = d.dir.path().to_path_buf();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let ok = |args: &[&str]| {
        let r = tokio::task::block_in_place(|| run_gtm(&d, args));
        assert_eq!(r.code, Some(0), "gtm {args:?}: {}{}", r.stdout, r.stderr);
        r.stdout
    };
    let address = |ip: &str| -> serde_json::Value {
        let record: serde_json::Value =
            serde_json::from_str(&ok(&["record", "show", "www.example.test", "A", "--json"]))
                .unwrap();
        record["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["ip"] == ip)
            .cloned()
            .unwrap_or_else(|| panic!("no address {ip}: {record}"))
    };
    let www = "www.example.test";

    // A record put from a partial file keeps its other keys and addresses.
    let weighted = file("weighted.toml", "balance = \"weighted\"\n");
    ok(&["record", "put", www, "A", "--file", &weighted]);
    assert_eq!(address("192.0.2.10")["dc"], "dc1");

    // An address with a DC and a health source: a new weight keeps both.
    ok(&[
        "record",
        "address",
        "put",
        www,
        "A",
        "192.0.2.11",
        "--dc",
        "dc1",
        "--hc",
        "disabled",
    ]);
    let dry = ok(&[
        "record",
        "address",
        "put",
        www,
        "A",
        "192.0.2.11",
        "--weight",
        "2",
        "--dry-run",
    ]);
    assert!(
        dry.contains("~ address 192.0.2.11 of record www.example.test/A: weight"),
        "a field-level dry run: {dry}"
    );
    assert!(!dry.contains("hc") && !dry.contains("dc"), "{dry}");
    ok(&[
        "record",
        "address",
        "put",
        www,
        "A",
        "192.0.2.11",
        "--weight",
        "2",
    ]);
    let a = address("192.0.2.11");
    assert_eq!(
        (a["dc"].as_str(), a["hc"].as_str(), a["weight"].as_u64()),
        (Some("dc1"), Some("disabled"), Some(2)),
        "{a}"
    );
    // Replacing it is explicit, and drops what is not given.
    ok(&[
        "record",
        "address",
        "put",
        www,
        "A",
        "192.0.2.11",
        "--weight",
        "3",
        "--replace",
    ]);
    let a = address("192.0.2.11");
    assert!(a.get("dc").is_none() && a.get("hc").is_none(), "{a}");
    assert_eq!(a["weight"].as_u64(), Some(3), "{a}");

    // A check put from a partial file keeps the keys it leaves out.
    let full = file(
        "web.toml",
        "type = \"tcp\"\ntarget = \"127.0.0.1\"\nport = 1\ninterval = \"5s\"\ntimeout = \"1s\"\n",
    );
    ok(&["check", "put", "web", "--file", &full]);
    let partial = file("interval.toml", "interval = \"10s\"\n");
    ok(&["check", "put", "web", "--file", &partial]);
    let check: serde_json::Value =
        serde_json::from_str(&ok(&["check", "show", "web", "--json"])).unwrap();
    assert_eq!(check["interval"], "10s", "{check}");
    assert_eq!(check["timeout"], "1s", "{check}");
    assert_eq!(check["port"], 1, "{check}");
    // --replace: what the file leaves out takes its default, and a file
    // that is not a whole check is refused, nothing changed.
    let r = tokio::task::block_in_place(|| {
        run_gtm(
            &d,
            &["check", "put", "web", "--file", &partial, "--replace"],
        )
    });
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&ok(&["check", "show", "web", "--json"]))
            .unwrap(),
        check
    );
    ok(&["check", "delete", "web"]);

    let ttl = file("ttl.toml", "ttl = 45\n");
    ok(&["record", "put", www, "A", "--file", &ttl]);
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(r.answers[0].ttl, 45);
    let record: serde_json::Value =
        serde_json::from_str(&ok(&["record", "show", www, "A", "--json"])).unwrap();
    assert_eq!(record["balance"], "weighted", "{record}");

    // An empty configuration does not remove everything by accident.
    let empty = file("empty.toml", "# nothing\n");
    let r = tokio::task::block_in_place(|| run_gtm(&d, &["config", "apply", &empty]));
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("no domain")
            && r.stderr.contains("example.test")
            && r.stderr.contains("--allow-empty"),
        "{}",
        r.stderr
    );
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert!(!answers(&r).is_empty(), "nothing was applied");
    assert!(ok(&["config", "apply", &empty, "--allow-empty"]).contains("- domain example.test"));
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(
        r.metadata.response_code,
        hickory_server::proto::op::ResponseCode::Refused
    );

    // `config apply -` reads standard input.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gtm"))
        .arg("--data-dir")
        .arg(d.dir.path())
        .args(["config", "apply", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(ZONE.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let r = udp(d.v4(), &query("www.example.test.", RecordType::A)).await;
    assert_eq!(answers(&r), ["192.0.2.10"]);
}

/// A query string that does not fit its route is our JSON `bad-request`
/// naming the parameter, the value and what it takes, on every route; never
/// axum's plain "Failed to deserialize query string".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_string_that_does_not_fit_is_a_json_error_naming_it() {
    let d = TestDevice::start(ZONE).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let cases = [
        (
            Method::GET,
            "/api/v1/events?kind=wrong",
            "query parameter kind=\"wrong\": unknown variant `wrong`, expected one of `record`, `check`, `scenario`, `operator`, `config`, `datacenter`, `geoip`, `device`",
        ),
        (
            Method::GET,
            "/api/v1/events?follow=yes",
            "query parameter follow=\"yes\": ",
        ),
        (
            Method::GET,
            "/api/v1/config?version=latest",
            "query parameter version=\"latest\": ",
        ),
        (
            Method::GET,
            "/api/v1/config/diff?from=one&to=2",
            "query parameter from=\"one\": ",
        ),
        (
            Method::DELETE,
            "/api/v1/domains/example.test/records/www/A?dry_run=maybe",
            "query parameter dry_run=\"maybe\": ",
        ),
        (
            Method::PUT,
            "/api/v1/drain/datacenter?force=please",
            "query parameter force=\"please\": ",
        ),
    ];
    for (method, path, want) in cases {
        let response = http
            .request(method.clone(), format!("{}{path}", base(&d)))
            .bearer_auth(&d.device.token)
            .header("content-type", "application/json")
            .body(r#"{"datacenter": "dc1", "drained": true}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 400, "{method} {path}");
        let e: gtm_model::error::ApiError = response.json().await.unwrap();
        assert_eq!(
            e.error,
            gtm_model::error::ErrorKind::BadRequest,
            "{method} {path}"
        );
        assert!(
            e.message.starts_with(want),
            "{method} {path}: {}",
            e.message
        );
        assert!(
            !e.message.contains("Failed to deserialize"),
            "{}",
            e.message
        );
    }
    // Nothing was changed by the refused writes.
    assert!(
        d.device
            .engine
            .status()
            .iter()
            .any(|r| r.record == "www.example.test/A"),
        "the record is still served"
    );
    let drains = api_get(&d, "/api/v1/drains").await;
    assert_eq!(drains, serde_json::json!([]));
}
