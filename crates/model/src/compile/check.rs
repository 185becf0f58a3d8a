//! `[[check]]`: the keys each check type takes, timing and defaults.

use std::{collections::HashMap, str::FromStr, time::Duration};

use super::{BUILTIN_SCENARIOS, CheckSpec, Cx, DcId, parse_status_set, unique};
use crate::{
    config::{Check, CheckType, Config},
    duration::Interval,
};

/// The longest check interval (and so timeout). A result a day old says
/// nothing about health, and the bound keeps schedule arithmetic (start +
/// interval) far from what a clock can hold.
pub const MAX_CHECK_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// The response codes a dns check may expect.
const RCODES: [&str; 6] = [
    "NOERROR", "NXDOMAIN", "SERVFAIL", "REFUSED", "NOTIMP", "FORMERR",
];

impl Cx {
    pub(super) fn checks(&mut self, config: &Config, dcs: &HashMap<&str, DcId>) -> Vec<CheckSpec> {
        unique(self, "check", config.checks.iter().map(|c| c.name.as_str()));
        config.checks.iter().map(|c| self.check(c, dcs)).collect()
    }

    fn check(&mut self, c: &Check, dcs: &HashMap<&str, DcId>) -> CheckSpec {
        let path = format!("check {}", c.name);
        if BUILTIN_SCENARIOS.contains(&c.name.as_str()) || c.name.contains('@') {
            self.err(&path, "this name is reserved; choose another");
        }
        self.keys_of_other_types(&path, c);
        self.manual_keys(&path, c);
        self.input_keys(&path, c);
        self.required_keys(&path, c);
        self.values(&path, c);
        let (interval, timeout) = self.timing(&path, c);
        let (failures, successes) = self.thresholds(&path, c);
        let run_on = self.run_on(&path, c, dcs);
        CheckSpec {
            name: c.name.clone(),
            kind: c.kind,
            target: c.target.clone(),
            port: c.port.unwrap_or(default_port(c.kind)),
            interval,
            timeout,
            failures,
            successes,
            run_on,
            policy: c.policy.unwrap_or_default(),
            raw: c.clone(),
        }
    }

    /// Refuses each key set that the check's type does not read.
    fn keys_of_other_types(&mut self, path: &str, c: &Check) {
        use CheckType::*;
        const HTTP: &[CheckType] = &[Http, Https, Http2];
        const HTTP_NAMES: &str = "http, https and http2";
        const PROBED: &[CheckType] = &[
            Http, Https, Http2, Tcp, Tls, Dns, Icmp, Grpc, Exec, Prometheus,
        ];
        let keys: [(bool, &str, &[CheckType], &str); 22] = [
            (c.path.is_some(), "path", HTTP, HTTP_NAMES),
            (c.expect_status.is_some(), "expect_status", HTTP, HTTP_NAMES),
            (c.expect_body.is_some(), "expect_body", HTTP, HTTP_NAMES),
            (
                c.host.is_some(),
                "host",
                &[Http, Https, Http2, Tls, Grpc],
                "http, https, http2, tls and grpc",
            ),
            (c.send.is_some(), "send", &[Tcp, Tls], "tcp and tls"),
            (
                c.expect.is_some(),
                "expect",
                &[Tcp, Tls, Prometheus],
                "tcp, tls and prometheus",
            ),
            (c.url.is_some(), "url", &[Prometheus], "prometheus"),
            (c.query.is_some(), "query", &[Prometheus], "prometheus"),
            (
                !c.labels.is_empty(),
                "labels",
                &[Alertmanager],
                "alertmanager",
            ),
            (c.stale_after.is_some(), "stale_after", &[Push], "push"),
            (
                c.max_latency.is_some(),
                "max_latency",
                PROBED,
                "probed (all but manual, push and alertmanager)",
            ),
            (
                c.tls_verify.is_some(),
                "tls_verify",
                &[Https, Http2, Tls, Grpc],
                "https, http2, tls and grpc",
            ),
            (
                c.proxy_protocol.is_some(),
                "proxy_protocol",
                &[Http, Https, Http2, Tcp, Tls],
                "http, https, http2, tcp and tls",
            ),
            (
                c.reuse_connection.is_some(),
                "reuse_connection",
                HTTP,
                HTTP_NAMES,
            ),
            (c.query_name.is_some(), "query_name", &[Dns], "dns"),
            (c.query_type.is_some(), "query_type", &[Dns], "dns"),
            (c.expect_rcode.is_some(), "expect_rcode", &[Dns], "dns"),
            (c.expect_answer.is_some(), "expect_answer", &[Dns], "dns"),
            (c.service.is_some(), "service", &[Grpc], "grpc"),
            (c.tls.is_some(), "tls", &[Grpc], "grpc"),
            (!c.command.is_empty(), "command", &[Exec], "exec"),
            (
                c.port.is_some(),
                "port",
                &[Http, Https, Http2, Tcp, Tls, Dns, Grpc],
                "http, https, http2, tcp, tls, dns and grpc",
            ),
        ];
        for (set, key, types, names) in keys {
            if set && !types.contains(&c.kind) {
                self.err(path, format!("{key} applies to {names} checks only"));
            }
        }
    }

    /// A manual check is probed by no one: the keys of probing are refused.
    fn manual_keys(&mut self, path: &str, c: &Check) {
        if c.kind != CheckType::Manual {
            return;
        }
        for (set, key) in [
            (c.target.is_some(), "target"),
            (c.interval.is_some(), "interval"),
            (c.timeout.is_some(), "timeout"),
            (c.failures.is_some(), "failures"),
            (c.successes.is_some(), "successes"),
        ] {
            if set {
                self.err(
                    path,
                    format!(
                        "{key} does not apply to a manual check: its state is set by an operator"
                    ),
                );
            }
        }
    }

    /// Push and Alertmanager checks are reported to, never probed: a
    /// probe's timeout means nothing to them.
    fn input_keys(&mut self, path: &str, c: &Check) {
        if matches!(c.kind, CheckType::Push | CheckType::Alertmanager) && c.timeout.is_some() {
            self.err(
                path,
                format!(
                    "timeout does not apply to a {} check: it is reported to, never probed",
                    type_name(c.kind)
                ),
            );
        }
    }

    /// The keys an exec, a dns, a prometheus and an alertmanager check
    /// cannot do without.
    fn required_keys(&mut self, path: &str, c: &Check) {
        if c.kind == CheckType::Prometheus {
            for (set, key, example) in [
                (c.url.is_some(), "url", "url = \"http://127.0.0.1:9090\""),
                (
                    c.query.is_some(),
                    "query",
                    "query = 'up{instance=\"$address:9100\"}'",
                ),
                (c.expect.is_some(), "expect", "expect = \"== 1\""),
            ] {
                if !set {
                    self.err(path, format!("a prometheus check needs {key} ({example})"));
                }
            }
        }
        if c.kind == CheckType::Alertmanager && c.labels.is_empty() {
            self.err(
                path,
                "an alertmanager check needs labels = { alertname = \"...\" } (the labels an alert must carry)",
            );
        }
        if c.kind == CheckType::Exec && c.command.is_empty() {
            self.err(
                path,
                "an exec check needs command = [\"program\", \"arg\", ...]",
            );
        }
        if c.kind == CheckType::Dns && c.query_name.is_none() {
            self.err(path, "a dns check needs query_name");
        }
    }

    /// The values of the keys set: a record type, a response code, status
    /// codes, a path and a port that read as such.
    fn values(&mut self, path: &str, c: &Check) {
        if let Some(t) = &c.query_type
            && hickory_server::proto::rr::RecordType::from_str(&t.to_ascii_uppercase()).is_err()
        {
            self.err(path, format!("query_type \"{t}\" is not a DNS record type"));
        }
        if let Some(r) = &c.expect_rcode
            && !RCODES.contains(&r.to_ascii_uppercase().as_str())
        {
            self.err(
                path,
                format!(
                    "expect_rcode \"{r}\" is not one of NOERROR, NXDOMAIN, SERVFAIL, REFUSED, NOTIMP, FORMERR"
                ),
            );
        }
        if let Some(s) = &c.expect_status
            && let Err(e) = parse_status_set(s)
        {
            self.err(path, format!("expect_status: {e}"));
        }
        if let Some(p) = &c.path
            && !p.starts_with('/')
        {
            self.err(path, format!("path \"{p}\" must start with /"));
        }
        if c.port == Some(0) {
            self.err(path, "port 0 is not a port");
        }
        if c.kind == CheckType::Prometheus {
            if let Some(e) = &c.expect
                && let Err(e) = e.parse::<crate::compare::Comparison>()
            {
                self.err(path, format!("expect: {e}"));
            }
            if let Some(url) = &c.url {
                self.prometheus_url(path, url);
            }
            if c.query.as_deref().is_some_and(|q| q.trim().is_empty()) {
                self.err(path, "query is empty");
            }
        }
        for (k, v) in &c.labels {
            if k.is_empty() || !k.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
                self.err(
                    path,
                    format!("labels: \"{k}\" is not a label name (letters, digits and _)"),
                );
            }
            if v.matches("$address").count() > 1 {
                self.err(
                    path,
                    format!("labels.{k}: \"{v}\" names $address more than once"),
                );
            }
        }
    }

    /// A Prometheus server's base URL: http or https, a host, no query.
    fn prometheus_url(&mut self, path: &str, url: &str) {
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"));
        let Some(rest) = rest else {
            self.err(
                path,
                format!("url: \"{url}\" is not an http:// or https:// URL"),
            );
            return;
        };
        if rest
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default()
            .is_empty()
        {
            self.err(path, format!("url: \"{url}\" has no host"));
        }
        if url.contains(['?', '#']) || url.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            self.err(
                path,
                format!(
                    "url: \"{url}\" must be the server's base URL, without a query, a fragment or spaces (/api/v1/query is added)"
                ),
            );
        }
    }

    /// The interval and the timeout, with their defaults: each more than
    /// 0s, the interval at most [`MAX_CHECK_INTERVAL`], the timeout within
    /// the interval.
    fn timing(&mut self, path: &str, c: &Check) -> (Duration, Duration) {
        let default = match c.kind {
            CheckType::Push | CheckType::Alertmanager => Duration::from_secs(5),
            _ => Duration::from_secs(30),
        };
        let interval = c.interval.map_or(default, |i| i.0);
        let timeout = c
            .timeout
            .map_or(Duration::from_secs(3).min(interval), |i| i.0);
        if interval.is_zero() {
            self.err(path, "interval must be more than 0s");
        }
        if interval > MAX_CHECK_INTERVAL {
            self.err(
                path,
                format!(
                    "interval {} is longer than {}, the longest a check may wait between probes",
                    Interval(interval),
                    Interval(MAX_CHECK_INTERVAL)
                ),
            );
        }
        if timeout.is_zero() {
            self.err(path, "timeout must be more than 0s");
        }
        if timeout > interval {
            self.err(
                path,
                format!(
                    "timeout {} is longer than interval {}: a probe must end before the next starts",
                    Interval(timeout),
                    Interval(interval)
                ),
            );
        }
        if let Some(max) = c.max_latency {
            if max.0.is_zero() {
                self.err(path, "max_latency must be more than 0s");
            } else if max.0 >= timeout {
                self.err(
                    path,
                    format!(
                        "max_latency {max} is not shorter than timeout {}: a probe that slow times out first",
                        Interval(timeout)
                    ),
                );
            }
        }
        if let Some(stale) = c.stale_after
            && stale.0.is_zero()
        {
            self.err(path, "stale_after must be more than 0s");
        }
        (interval, timeout)
    }

    /// The failures and successes that change the state, with their
    /// defaults: 1 or more each.
    fn thresholds(&mut self, path: &str, c: &Check) -> (u32, u32) {
        let failures = c.failures.unwrap_or(3);
        let successes = c.successes.unwrap_or(2);
        if failures == 0 {
            self.err(path, "failures must be 1 or more");
        }
        if successes == 0 {
            self.err(path, "successes must be 1 or more");
        }
        (failures, successes)
    }

    /// The datacenter whose devices probe the check; `None` for all.
    fn run_on(&mut self, path: &str, c: &Check, dcs: &HashMap<&str, DcId>) -> Option<DcId> {
        let dc = c.run_on.as_deref().filter(|dc| *dc != "all")?;
        let id = dcs.get(dc).copied();
        if id.is_none() {
            self.err(
                path,
                format!(
                    "run_on names unknown datacenter \"{dc}\" (use \"all\" or a datacenter name)"
                ),
            );
        }
        id
    }
}

/// A check type as the configuration writes it.
fn type_name(kind: CheckType) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The port a check probes when it names none.
fn default_port(kind: CheckType) -> u16 {
    match kind {
        CheckType::Https | CheckType::Tls => 443,
        CheckType::Dns => 53,
        _ => 80,
    }
}
