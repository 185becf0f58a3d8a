//! Prometheus checks: an instant query against a Prometheus HTTP API
//! (`GET /api/v1/query`), healthy while every value of the result meets
//! the check's comparison. The server's address goes through the probe
//! fence like any target; the response is read up to [`MAX_BODY`].

use bytes::Bytes;
use gtm_model::compare::Comparison;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::Request;
use hyper::header::{ACCEPT, HOST, USER_AGENT};
use serde::Deserialize;

use super::http::{Sender, authority};
use super::tcp::{connect_proxied, tls_handshake};
use super::{Alpn, Down, Host, HttpVersion, ProbeResult, Prober, Target};

/// The largest response read: a query meant for a health decision answers
/// a few series, not megabytes.
const MAX_BODY: usize = 1 << 20;
/// The series named in a failure's reason, at most.
const NAMED: usize = 3;

/// Where a Prometheus server is: its base URL, read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Server {
    tls: bool,
    host: String,
    port: u16,
    /// Without a trailing slash (`""` at the root).
    base: String,
}

fn server(url: &str) -> Result<Server, Down> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| format!("url \"{url}\" does not read as a URL: {e}"))?;
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(format!("url \"{url}\" is not http:// or https://")),
    };
    let host = uri
        .host()
        .ok_or_else(|| format!("url \"{url}\" has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Ok(Server {
        tls,
        port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        host,
        base: uri.path().trim_end_matches('/').to_string(),
    })
}

#[derive(Debug, Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Vector(Vec<Sample>),
    Scalar((f64, String)),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

#[derive(Debug, Deserialize)]
struct Sample {
    #[serde(default)]
    metric: std::collections::BTreeMap<String, String>,
    value: (f64, String),
}

/// One query: `query` with `$address` standing for `address`.
pub(crate) async fn probe(
    prober: &Prober,
    url: &str,
    query: &str,
    expect: &Comparison,
    address: &str,
) -> ProbeResult {
    let server = server(url)?;
    let target = Target {
        host: match server.host.parse() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(server.host.clone()),
        },
        port: server.port,
        server_name: server.host.clone(),
    };
    let target = prober.resolve_fenced(&target).await?;
    let query = query.replace("$address", address);
    let path = format!(
        "{}/api/v1/query?{}",
        server.base,
        form_urlencoded::Serializer::new(String::new())
            .append_pair("query", &query)
            .finish()
    );
    let req = Request::get(path.as_str())
        .header(HOST, authority(&server.host))
        .header(USER_AGENT, "gtm-health")
        .header(ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("invalid request: {e}"))?;
    let stream = connect_proxied(&target, false).await?;
    let (mut sender, _conn) = if server.tls {
        let tls = tls_handshake(prober, &target, stream, true, Alpn::Http1).await?;
        Sender::open(tls, HttpVersion::Http1).await?
    } else {
        Sender::open(stream, HttpVersion::Http1).await?
    };
    let resp = sender.send(req).await?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading the answer failed: {e}"))?
        .to_bytes();
    judge(status.as_u16(), &body, expect)
}

/// The verdict on an answer of `/api/v1/query`.
fn judge(status: u16, body: &[u8], expect: &Comparison) -> ProbeResult {
    let answer: Answer = match serde_json::from_slice(body) {
        Ok(a) => a,
        Err(_) if status != 200 => return Err(format!("Prometheus answered status {status}")),
        Err(e) => return Err(format!("Prometheus's answer does not read: {e}")),
    };
    if answer.status != "success" {
        return Err(format!(
            "query failed: {}",
            answer.error.as_deref().unwrap_or(&answer.status)
        ));
    }
    let values: Vec<(String, f64)> = match answer.data {
        Some(Data::Vector(samples)) => samples
            .into_iter()
            .map(|s| (series(&s.metric), value(&s.value.1)))
            .collect(),
        Some(Data::Scalar((_, v))) => vec![("scalar".to_string(), value(&v))],
        Some(Data::Matrix(_)) | Some(Data::String(_)) | None => {
            return Err("the query gives no instant vector or scalar".to_string());
        }
    };
    if values.is_empty() {
        return Err("the query gives no series".to_string());
    }
    let failing: Vec<String> = values
        .iter()
        .filter(|(_, v)| !expect.holds(*v))
        .map(|(name, v)| format!("{name} = {v}"))
        .collect();
    if failing.is_empty() {
        let (name, v) = &values[0];
        let more = match values.len() {
            1 => String::new(),
            n => format!(" (and {} more series)", n - 1),
        };
        return Ok(format!("{name} = {v}, {expect}{more}"));
    }
    let more = match failing.len() {
        n if n > NAMED => format!(" (and {} more)", n - NAMED),
        _ => String::new(),
    };
    Err(format!(
        "{}, not {expect}{more}",
        failing[..failing.len().min(NAMED)].join(", ")
    ))
}

/// A sample's value as Prometheus writes it (`"0.5"`, `"NaN"`, `"+Inf"`).
fn value(text: &str) -> f64 {
    match text {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => text.parse().unwrap_or(f64::NAN),
    }
}

/// A series as PromQL writes it: `up{instance="a:9100",job="node"}`.
fn series(labels: &std::collections::BTreeMap<String, String>) -> String {
    let name = labels.get("__name__").cloned().unwrap_or_default();
    let rest: Vec<String> = labels
        .iter()
        .filter(|(k, _)| *k != "__name__")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    if rest.is_empty() && !name.is_empty() {
        name
    } else {
        format!("{name}{{{}}}", rest.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_read() {
        let s = server("http://127.0.0.1:9090").unwrap();
        assert_eq!((s.tls, s.port, s.base.as_str()), (false, 9090, ""));
        let s = server("https://[::1]/prom/").unwrap();
        assert_eq!(
            (s.tls, s.host.as_str(), s.port, s.base.as_str()),
            (true, "::1", 443, "/prom")
        );
        assert!(server("ftp://x").is_err());
    }

    #[test]
    fn answers_are_judged_series_by_series() {
        let lt: Comparison = "< 0.5".parse().unwrap();
        let ok = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a"},"value":[1,"0.1"]}]}}"#;
        assert_eq!(
            judge(200, ok, &lt),
            Ok(r#"{instance="a"} = 0.1, < 0.5"#.into())
        );
        let bad = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"err"},"value":[1,"0.1"]},{"metric":{"__name__":"err","i":"b"},"value":[1,"NaN"]}]}}"#;
        assert_eq!(
            judge(200, bad, &lt),
            Err(r#"err{i="b"} = NaN, not < 0.5"#.into())
        );
        let empty = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(
            judge(200, empty, &lt),
            Err("the query gives no series".into())
        );
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}"#;
        assert!(judge(200, scalar, &lt).is_err());
        let failed = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            judge(400, failed, &lt),
            Err("query failed: parse error".into())
        );
        assert_eq!(
            judge(502, b"<html>", &lt),
            Err("Prometheus answered status 502".into())
        );
    }
}
