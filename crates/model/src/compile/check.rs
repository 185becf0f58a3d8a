//! `[[check]]`: the keys each check type takes, timing and defaults.

use std::{collections::HashMap, str::FromStr, time::Duration};

use super::{BUILTIN_SCENARIOS, CheckSpec, Cx, DcId, parse_status_set, unique};
use crate::config::{Check, CheckType, Config};

/// The longest check interval (and so timeout). A result a day old says
/// nothing about health, and the bound keeps schedule arithmetic (start +
/// interval) far from what a clock can hold.
pub const MAX_CHECK_INTERVAL: Duration = Duration::from_secs(24 * 3600);

impl Cx {
    pub(super) fn checks(&mut self, config: &Config, dcs: &HashMap<&str, DcId>) -> Vec<CheckSpec> {
        unique(self, "check", config.checks.iter().map(|c| c.name.as_str()));
        config.checks.iter().map(|c| self.check(c, dcs)).collect()
    }

    fn check(&mut self, c: &Check, dcs: &HashMap<&str, DcId>) -> CheckSpec {
        use CheckType::*;
        let path = format!("check {}", c.name);
        if BUILTIN_SCENARIOS.contains(&c.name.as_str()) || c.name.contains('@') {
            self.err(&path, "this name is reserved; choose another");
        }
        let kind = c.kind;
        let applies = |ok: &[CheckType]| ok.contains(&kind);
        let only = |cx: &mut Cx, set: bool, key: &str, ok: &[CheckType], what: &str| {
            if set && !applies(ok) {
                cx.err(&path, format!("{key} applies to {what} checks only"));
            }
        };
        const HTTP: &[CheckType] = &[Http, Https, Http2];
        only(
            self,
            c.path.is_some(),
            "path",
            HTTP,
            "http, https and http2",
        );
        only(
            self,
            c.expect_status.is_some(),
            "expect_status",
            HTTP,
            "http, https and http2",
        );
        only(
            self,
            c.expect_body.is_some(),
            "expect_body",
            HTTP,
            "http, https and http2",
        );
        only(
            self,
            c.host.is_some(),
            "host",
            &[Http, Https, Http2, Tls, Grpc],
            "http, https, http2, tls and grpc",
        );
        only(self, c.send.is_some(), "send", &[Tcp, Tls], "tcp and tls");
        only(
            self,
            c.expect.is_some(),
            "expect",
            &[Tcp, Tls],
            "tcp and tls",
        );
        only(
            self,
            c.tls_verify.is_some(),
            "tls_verify",
            &[Https, Http2, Tls, Grpc],
            "https, http2, tls and grpc",
        );
        only(
            self,
            c.proxy_protocol.is_some(),
            "proxy_protocol",
            &[Http, Https, Http2, Tcp, Tls],
            "http, https, http2, tcp and tls",
        );
        only(
            self,
            c.reuse_connection.is_some(),
            "reuse_connection",
            HTTP,
            "http, https and http2",
        );
        only(self, c.query_name.is_some(), "query_name", &[Dns], "dns");
        only(self, c.query_type.is_some(), "query_type", &[Dns], "dns");
        only(
            self,
            c.expect_rcode.is_some(),
            "expect_rcode",
            &[Dns],
            "dns",
        );
        only(
            self,
            c.expect_answer.is_some(),
            "expect_answer",
            &[Dns],
            "dns",
        );
        only(self, c.service.is_some(), "service", &[Grpc], "grpc");
        only(self, c.tls.is_some(), "tls", &[Grpc], "grpc");
        only(self, !c.command.is_empty(), "command", &[Exec], "exec");
        only(
            self,
            c.port.is_some(),
            "port",
            &[Http, Https, Http2, Tcp, Tls, Dns, Grpc],
            "http, https, http2, tcp, tls, dns and grpc",
        );
        if kind == Manual {
            for (set, key) in [
                (c.target.is_some(), "target"),
                (c.interval.is_some(), "interval"),
                (c.timeout.is_some(), "timeout"),
                (c.failures.is_some(), "failures"),
                (c.successes.is_some(), "successes"),
            ] {
                if set {
                    self.err(&path, format!("{key} does not apply to a manual check: its state is set by an operator"));
                }
            }
        }
        if kind == Exec && c.command.is_empty() {
            self.err(
                &path,
                "an exec check needs command = [\"program\", \"arg\", ...]",
            );
        }
        if kind == Dns && c.query_name.is_none() {
            self.err(&path, "a dns check needs query_name");
        }
        if let Some(t) = &c.query_type
            && hickory_server::proto::rr::RecordType::from_str(&t.to_ascii_uppercase()).is_err()
        {
            self.err(
                &path,
                format!("query_type \"{t}\" is not a DNS record type"),
            );
        }
        if let Some(r) = &c.expect_rcode
            && ![
                "NOERROR", "NXDOMAIN", "SERVFAIL", "REFUSED", "NOTIMP", "FORMERR",
            ]
            .contains(&r.to_ascii_uppercase().as_str())
        {
            self.err(&path, format!("expect_rcode \"{r}\" is not one of NOERROR, NXDOMAIN, SERVFAIL, REFUSED, NOTIMP, FORMERR"));
        }
        if let Some(s) = &c.expect_status
            && let Err(e) = parse_status_set(s)
        {
            self.err(&path, format!("expect_status: {e}"));
        }
        if let Some(p) = &c.path
            && !p.starts_with('/')
        {
            self.err(&path, format!("path \"{p}\" must start with /"));
        }
        if c.port == Some(0) {
            self.err(&path, "port 0 is not a port");
        }
        let interval = c.interval.map_or(Duration::from_secs(30), |i| i.0);
        let timeout = c
            .timeout
            .map_or(Duration::from_secs(3).min(interval), |i| i.0);
        if interval.is_zero() {
            self.err(&path, "interval must be more than 0s");
        }
        if interval > MAX_CHECK_INTERVAL {
            self.err(
                &path,
                format!(
                    "interval {} is longer than {}, the longest a check may wait between probes",
                    crate::duration::Interval(interval),
                    crate::duration::Interval(MAX_CHECK_INTERVAL)
                ),
            );
        }
        if timeout.is_zero() {
            self.err(&path, "timeout must be more than 0s");
        }
        if timeout > interval {
            self.err(
                &path,
                format!(
                    "timeout {} is longer than interval {}: a probe must end before the next starts",
                    crate::duration::Interval(timeout),
                    crate::duration::Interval(interval)
                ),
            );
        }
        let failures = c.failures.unwrap_or(3);
        let successes = c.successes.unwrap_or(2);
        if failures == 0 {
            self.err(&path, "failures must be 1 or more");
        }
        if successes == 0 {
            self.err(&path, "successes must be 1 or more");
        }
        let run_on = match c.run_on.as_deref() {
            None | Some("all") => None,
            Some(dc) => match dcs.get(dc) {
                Some(id) => Some(*id),
                None => {
                    self.err(&path, format!("run_on names unknown datacenter \"{dc}\" (use \"all\" or a datacenter name)"));
                    None
                }
            },
        };
        let port = c.port.unwrap_or(match kind {
            Https | Tls => 443,
            Dns => 53,
            _ => 80,
        });
        CheckSpec {
            name: c.name.clone(),
            kind,
            target: c.target.clone(),
            port,
            interval,
            timeout,
            failures,
            successes,
            run_on,
            policy: c.policy.unwrap_or_default(),
            raw: c.clone(),
        }
    }
}
