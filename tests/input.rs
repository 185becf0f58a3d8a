//! What a device does with input it must bound: a configuration with an
//! error on every line is answered with its first errors and a count, the
//! check of one whose client goes away stops, and a request body with a
//! field its route does not take is refused with the field's name.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use gtm_api::routes::{Access, Payload, operations};
use tokio::{io::AsyncWriteExt, net::TcpStream};

use crate::support::{TestDevice, ZONE};

/// A domain, then `n` lines that are each a syntax error.
fn bad_lines(n: usize) -> String {
    let mut text = String::from("[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n");
    for i in 0..n {
        text.push_str(&format!("k{i} = = {i}\n"));
    }
    text
}

/// Every route that takes a JSON body refuses one with a field it does not
/// have, naming the field, with the stable label of a bad request: a
/// mistyped optional field is not silently left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_body_with_an_unknown_field_is_refused_by_name() {
    let d = TestDevice::start(ZONE).await;
    let http = gtm_node::tls::http_client(None, Duration::from_secs(60)).unwrap();
    let mut tried = Vec::new();
    for op in operations() {
        if op.access != Access::Token || !matches!(op.body, Payload::Json(_)) {
            continue;
        }
        // Alertmanager's notifications are in Alertmanager's format, whose
        // fields the receiver reads past (docs/api.md, "Access").
        if op.path == "/api/v1/inputs/alertmanager" {
            continue;
        }
        // Path parameters naming objects of the configuration.
        let mut path = Vec::new();
        for seg in op.path.split('/') {
            let filled = match (path.last().copied().unwrap_or_default(), seg) {
                ("domains", _) | (_, "{domain}") => "example.test",
                ("records", _) => "www",
                (_, "{rtype}") => "A",
                ("addresses", _) | (_, "{address}") | (_, "{ip}") => "192.0.2.10",
                ("checks", _) => "web",
                ("datacenters", _) => "dc1",
                ("scenarios", _) => "dc1-down",
                (_, s) if s.starts_with('{') => "x",
                (_, s) => s,
            };
            path.push(filled);
        }
        let path = path.join("/");
        let answer = http
            .request(
                op.method.clone(),
                format!("http://{}{path}", d.device.api_addr),
            )
            .bearer_auth(&d.device.token)
            .header("content-type", "application/json")
            .body(r#"{"zzz_unknown": 1}"#)
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(status, 400, "{} {path}: {body}", op.method);
        assert_eq!(body["error"], "bad-request", "{} {path}: {body}", op.method);
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("unknown field `zzz_unknown`"),
            "{} {path}: {message}",
            op.method
        );
        tried.push(format!("{} {path}", op.method));
    }
    assert!(tried.len() > 20, "the table has the body routes: {tried:?}");

    // A field inside a nested object is named with where it is.
    let answer = http
        .post(format!("http://{}/api/v1/schedules", d.device.api_addr))
        .bearer_auth(&d.device.token)
        .json(&serde_json::json!({
            "at": "+1h",
            "action": {"kind": "drain-datacenter", "datacenter": "dc1", "drained": true, "dranied": false}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let body: serde_json::Value = answer.json().await.unwrap();
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("action") && message.contains("unknown field `dranied`"),
        "{message}"
    );
}

/// A configuration with an error on each of its 200,000 lines is answered
/// with the first errors of the file and how many there are in all, well
/// within the deadline (lines counted again from the start of the section
/// for each error made this size take minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_on_every_line_is_answered_with_the_first_errors_and_a_count() {
    let d = TestDevice::start(ZONE).await;
    let lines = 200_000;
    let listed = gtm_model::ERRORS_LISTED;
    let http = gtm_node::tls::http_client(None, Duration::from_secs(120)).unwrap();
    let answer = http
        .post(format!(
            "http://{}/api/v1/config/validate",
            d.device.api_addr
        ))
        .bearer_auth(&d.device.token)
        .body(bad_lines(lines))
        .send()
        .await
        .expect("an answer within 120 s");
    assert_eq!(answer.status(), 422);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["error"], "invalid-config");
    assert_eq!(
        body["message"],
        format!("the configuration has {lines} error(s); nothing was applied")
    );
    let errors: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), listed + 1);
    assert_eq!(
        errors[0],
        "line 4: domain a.test: extra `=`, expected nothing"
    );
    assert_eq!(
        errors[listed - 1],
        format!(
            "line {}: domain a.test: extra `=`, expected nothing",
            3 + listed
        )
    );
    assert_eq!(
        errors[listed],
        format!("… and {} more errors ({lines} in all)", lines - listed)
    );
}

/// A `gtm serve` process with its data in a directory of the test's,
/// killed by its PID when dropped.
struct Serve {
    child: Child,
    data: PathBuf,
}

impl Serve {
    fn start(dir: &Path) -> Self {
        let data = dir.join("data");
        let node = dir.join("node.toml");
        std::fs::write(
            &node,
            format!(
                "name = \"input\"\ndatacenter = \"dc1\"\ndata_dir = \"{}\"\ndns_listen = [\"127.0.0.1:0\"]\napi_listen = \"127.0.0.1:0\"\nudp_workers = 1\n",
                data.display()
            ),
        )
        .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gtm"))
            .args(["serve", "--config"])
            .arg(&node)
            .env_remove("GTM_LOG")
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
            .spawn()
            .unwrap();
        Serve { child, data }
    }

    /// The API's address and token, once the device has written them
    /// (bounded).
    fn api(&mut self) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let address =
                std::fs::read_to_string(self.data.join("api-address")).unwrap_or_default();
            let token = std::fs::read_to_string(self.data.join("api-token")).unwrap_or_default();
            if address.ends_with('\n') && !token.trim().is_empty() {
                let address = address.trim().trim_start_matches("http://").to_string();
                return (address, token.trim().to_string());
            }
            assert!(self.child.try_wait().unwrap().is_none(), "gtm serve exited");
            assert!(Instant::now() < deadline, "gtm serve wrote no API address");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// CPU time the process used so far, in clock ticks (utime + stime,
    /// fields 14 and 15 of /proc/PID/stat).
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The command name, in parentheses, may hold spaces: count after it.
        let fields: Vec<&str> = stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest.split(' ').collect())
            .unwrap_or_default();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of a metric without labels, if the device has it.
async fn metric(http: &reqwest::Client, api: &str, name: &str) -> Option<f64> {
    let text = http
        .get(format!("http://{api}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Waits (bounded) until the metric `name` is `value`.
async fn until_metric(http: &reqwest::Client, api: &str, name: &str, value: f64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = metric(http, api, name).await;
        if now == Some(value) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} is {now:?}, never {value}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client sends a 40 MB configuration with an error on every line and
/// goes away while the device checks it: the check stops (the device
/// counts it cancelled) and the process's CPU time stops growing, instead
/// of a core staying busy for an answer nobody reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_of_a_configuration_stops_when_its_client_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path());
    let (api, token) = serve.api();
    let http = gtm_node::tls::http_client(None, Duration::from_secs(30)).unwrap();
    let text = bad_lines(2_000_000);
    assert!(text.len() > 35 << 20, "{} bytes", text.len());

    let mut client = TcpStream::connect(&api).await.unwrap();
    let head = format!(
        "POST /api/v1/config/validate HTTP/1.1\r\nHost: {api}\r\nAuthorization: Bearer {token}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(text.as_bytes()).await.unwrap();
    client.flush().await.unwrap();
    drop(text);
    until_metric(&http, &api, "gtm_config_validations_running", 1.0).await;
    // The client goes away before the answer.
    drop(client);
    until_metric(&http, &api, "gtm_config_validations_cancelled_total", 1.0).await;
    until_metric(&http, &api, "gtm_config_validations_running", 0.0).await;

    // And the device is idle again: its CPU time grows by less than a
    // tenth of a core over a second (bounded wait).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = serve.cpu_ticks();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let used = serve.cpu_ticks() - before;
        if used < 10 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the device still uses {used} ticks a second"
        );
    }
    assert!(serve.child.try_wait().unwrap().is_none(), "gtm serve is up");
}
