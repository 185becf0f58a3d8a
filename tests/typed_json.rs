//! What scripts read: `--json` is the API's body, typed (addresses as
//! objects, statuses as stable codes with their labels), and that body
//! has the shape the OpenAPI document gives it. On a pair of real gtm
//! processes, so that a peer's records are typed too.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::cluster::Proc;

/// Six addresses of weight 1, three per datacenter: shares of 1/6, which
/// whole percentages round to 17 % four times and 16 % twice.
const CONFIG: &str = r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[domain]]
name = "pair.test"
nameservers = ["ns1.pair.test"]

[[domain.record]]
name = "www"
type = "A"
balance = "weighted"
addresses = [
  { ip = "192.0.2.1", dc = "dc1" }, { ip = "192.0.2.2", dc = "dc1" }, { ip = "192.0.2.3", dc = "dc1" },
  { ip = "192.0.2.4", dc = "dc2" }, { ip = "192.0.2.5", dc = "dc2" }, { ip = "192.0.2.6", dc = "dc2" },
]
"#;

/// `GET path` of `p`'s API with its own token, as JSON.
async fn api(p: &Proc, path: &str) -> Value {
    let token = std::fs::read_to_string(p.dir.join(gtm_node::identity::TOKEN_FILE)).unwrap();
    gtm_node::tls::http_client(None, None)
        .unwrap()
        .get(format!("{}{path}", p.api()))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: not JSON: {e}"))
}

fn cli(p: &Proc, args: &[&str]) -> Value {
    let out = tokio::task::block_in_place(|| p.ok(args));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("gtm {args:?}: not JSON: {e}: {out}"))
}

/// The body without what changes from one read to the next: how long ago
/// each peer reported.
fn steady(mut v: Value) -> Value {
    if let Some(peers) = v.get_mut("peers").and_then(Value::as_array_mut) {
        for p in peers {
            if let Some(o) = p.as_object_mut() {
                o.remove("age_ms");
            }
        }
    }
    v
}

/// Waits (bounded) until `gtm ARGS --json` on `p` gives the body of
/// `GET path` (read before and after it), and returns it.
async fn same_as_api(p: &Proc, path: &str, args: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let before = steady(api(p, path).await);
        let printed = steady(cli(p, args));
        let after = steady(api(p, path).await);
        if printed == before && printed == after {
            return printed;
        }
        assert!(
            Instant::now() < deadline,
            "gtm {args:?} never printed the body of GET {path}:\n{printed:#}\nvs\n{after:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (bounded) until `p`'s status shows `www.pair.test/A` of its peer
/// with every address answered.
async fn until_peer_answers(p: &Proc) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = cli(p, &["status", "--json"]);
        let seen = status["peers"][0]["records"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["record"] == "www.pair.test/A"))
            .is_some_and(|r| r["active"].as_array().is_some_and(|a| a.len() == 6));
        if seen {
            return status;
        }
        assert!(Instant::now() < deadline, "no peer record: {status:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_is_the_typed_api_body_and_has_its_documented_shape() {
    let root = tempfile::tempdir().unwrap();
    let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.121.1");
    let b = Proc::start(root.path(), "gtm2", "dc2", "127.0.121.2");
    tokio::task::block_in_place(|| {
        a.ok(&["cluster", "init"]);
        b.join(&a);
        a.apply_ok(CONFIG);
    });
    until_peer_answers(&a).await;

    // The CLI prints the API's body, for the status and for a record.
    let status = same_as_api(&a, "/api/v1/status", &["status", "--json"]).await;
    let preview = same_as_api(
        &a,
        "/api/v1/records/www.pair.test/A/preview",
        &["record", "preview", "www.pair.test", "A", "--json"],
    )
    .await;

    // Typed: a stable code and its label; each address an object.
    let www = status["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["record"] == "www.pair.test/A")
        .unwrap_or_else(|| panic!("{status:#}"));
    assert_eq!(www["status"], "ok", "{www:#}");
    assert_eq!(www["label"], "OK", "{www:#}");
    let active = www["active"].as_array().unwrap();
    assert_eq!(active.len(), 6, "{www:#}");
    for (i, address) in active.iter().enumerate() {
        assert_eq!(address["ip"], format!("192.0.2.{}", i + 1), "{address}");
        assert_eq!(address["weight"], 1, "{address}");
        let share = address["share"].as_f64().unwrap();
        assert!((share - 1.0 / 6.0).abs() < 1e-9, "{address}");
        let dc = if i < 3 { "dc1" } else { "dc2" };
        assert_eq!(address["datacenter"], dc, "{address}");
        assert_eq!(address["health"], "healthy", "{address}");
        assert_eq!(address["reason"], "static: always a candidate", "{address}");
    }
    // The peer's record, typed by this device from its report.
    let peer = &status["peers"][0];
    assert_eq!(peer["device"], "gtm2");
    let theirs = &peer["records"][0];
    assert_eq!(theirs["status"], "ok", "{theirs:#}");
    assert_eq!(theirs["label"], "OK", "{theirs:#}");
    assert_eq!(theirs["active"][5]["ip"], "192.0.2.6", "{theirs:#}");
    assert_eq!(theirs["active"][5]["datacenter"], "dc2", "{theirs:#}");
    assert_eq!(theirs["active"][5]["weight"], 1, "{theirs:#}");
    assert_eq!(theirs["active"][5]["share"], active[5]["share"]);
    assert_eq!(
        theirs["active"][5]["reason"],
        "answered by gtm2 at its last report"
    );
    assert_eq!(preview["status"], "ok", "{preview:#}");
    assert_eq!(preview["active"], www["active"], "{preview:#}");
    assert_eq!(preview["addresses"][3]["datacenter"], "dc2", "{preview:#}");
    assert_eq!(preview["addresses"][3]["health"], "healthy", "{preview:#}");
    assert_eq!(preview["addresses"][3]["drained"], false, "{preview:#}");

    // People read whole percentages that add up to 100.
    let text = tokio::task::block_in_place(|| a.ok(&["status"]));
    let line = text
        .lines()
        .find(|l| l.starts_with("www.pair.test/A"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(
            "192.0.2.1 (weight 1, 17%), 192.0.2.2 (weight 1, 17%), 192.0.2.3 (weight 1, 17%), \
             192.0.2.4 (weight 1, 17%), 192.0.2.5 (weight 1, 16%), 192.0.2.6 (weight 1, 16%)"
        ),
        "{line}"
    );

    // Each body has the shape the OpenAPI document gives it.
    let doc = gtm_api::routes::openapi();
    let response = |path: &str| {
        doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            .clone()
    };
    let defs = doc["components"]["schemas"].as_object().unwrap();
    for (path, body) in [
        ("/api/v1/status", &status),
        ("/api/v1/records/{name}/{rtype}/preview", &preview),
    ] {
        let problems = shape(body, &response(path), defs, "$");
        assert!(problems.is_empty(), "{path}: {problems:#?}");
    }
    // The checker finds a body of another shape.
    let mut wrong = preview.clone();
    wrong["active"][0]["share"] = Value::from("17%");
    wrong["status"] = Value::from("OK");
    wrong["undocumented"] = Value::from(1);
    let problems = shape(
        &wrong,
        &response("/api/v1/records/{name}/{rtype}/preview"),
        defs,
        "$",
    );
    assert_eq!(problems.len(), 3, "{problems:#?}");
}

/// Where `value` departs from `schema` (JSON Schema as schemars writes
/// it: `$ref`, `type` (one or a list), `properties` and `required`,
/// `items`, `enum`, `const`, `anyOf`/`oneOf`, `additionalProperties`), each
/// with its path. A property the schema does not declare is a departure
/// too: every field a body carries is documented.
fn shape(value: &Value, schema: &Value, defs: &Map<String, Value>, at: &str) -> Vec<String> {
    let Some(schema) = schema.as_object() else {
        // `true`: anything.
        return Vec::new();
    };
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        return match defs.get(name) {
            Some(def) => shape(value, def, defs, at),
            None => vec![format!("{at}: no schema {r}")],
        };
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alternatives) = schema.get(key).and_then(Value::as_array)
            && !alternatives
                .iter()
                .any(|s| shape(value, s, defs, at).is_empty())
        {
            return vec![format!("{at}: {value} is none of {key} {alternatives:?}")];
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(value)
    {
        return vec![format!("{at}: {value} is not one of {values:?}")];
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        return vec![format!("{at}: {value} is not {c}")];
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let is = |t: &str| match t {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            "string" => value.is_string(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            _ => false,
        };
        if !types.iter().any(|t| is(t)) {
            return vec![format!("{at}: {value} is not of type {types:?}")];
        }
    }
    let mut problems = Vec::new();
    if let (Some(list), Some(items)) = (value.as_array(), schema.get("items")) {
        for (i, item) in list.iter().enumerate() {
            problems.extend(shape(item, items, defs, &format!("{at}[{i}]")));
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(name) {
                problems.push(format!("{at}: no required {name}"));
            }
        }
        let more = schema.get("additionalProperties");
        for (name, v) in object {
            let path = format!("{at}.{name}");
            match (properties.and_then(|p| p.get(name)), more) {
                (Some(s), _) => problems.extend(shape(v, s, defs, &path)),
                (None, Some(s)) if s.is_object() => problems.extend(shape(v, s, defs, &path)),
                (None, _) if properties.is_none() && more.is_none() => {}
                (None, _) => problems.push(format!("{path}: not in the schema")),
            }
        }
    }
    problems
}
