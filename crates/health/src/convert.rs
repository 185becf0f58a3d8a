//! From configuration to probes: a check instance's probe parameters and
//! target.

use super::{
    Instance,
    probe::{Host, HttpVersion, ProbeKind, ProbeSpec, Target},
};
use gtm_model::{
    compare::{Comparison, Op},
    compile::{CheckSpec, parse_status_set},
    config::CheckType,
};

/// The probe a check instance makes, with the seeds' defaults.
pub fn probe_spec(instance: &Instance) -> ProbeSpec {
    let check: &CheckSpec = &instance.spec;
    let raw = &check.raw;
    let verify = raw.tls_verify.unwrap_or(true);
    let proxy = raw.proxy_protocol.unwrap_or(false);
    let http = |tls: bool, version: HttpVersion| ProbeKind::Http {
        tls,
        version,
        path: raw.path.clone().unwrap_or_else(|| "/".into()),
        expect_status: raw
            .expect_status
            .as_deref()
            .and_then(|s| parse_status_set(s).ok())
            .map_or(vec![(200, 399)], |s| s.0),
        expect_body: raw.expect_body.clone(),
        tls_verify: verify,
        proxy_protocol: proxy,
        reuse_connection: raw.reuse_connection.unwrap_or(false),
    };
    let kind = match check.kind {
        CheckType::Http => http(false, HttpVersion::Http1),
        CheckType::Https => http(true, HttpVersion::Http1),
        CheckType::Http2 => http(true, HttpVersion::Http2),
        CheckType::Tcp => ProbeKind::Tcp {
            send: raw.send.clone(),
            expect: raw.expect.clone(),
            proxy_protocol: proxy,
        },
        CheckType::Tls => ProbeKind::Tls {
            send: raw.send.clone(),
            expect: raw.expect.clone(),
            tls_verify: verify,
            proxy_protocol: proxy,
        },
        CheckType::Dns => ProbeKind::Dns {
            query_name: raw.query_name.clone().unwrap_or_default(),
            query_type: raw
                .query_type
                .as_deref()
                .and_then(|t| {
                    t.to_ascii_uppercase()
                        .parse::<hickory_server::proto::rr::RecordType>()
                        .ok()
                })
                .map_or(1, u16::from),
            expect_rcode: match raw
                .expect_rcode
                .as_deref()
                .map(str::to_ascii_uppercase)
                .as_deref()
            {
                Some("FORMERR") => 1,
                Some("SERVFAIL") => 2,
                Some("NXDOMAIN") => 3,
                Some("NOTIMP") => 4,
                Some("REFUSED") => 5,
                _ => 0,
            },
            expect_answer: raw.expect_answer.clone(),
        },
        CheckType::Icmp => ProbeKind::Icmp,
        CheckType::Grpc => ProbeKind::Grpc {
            service: raw.service.clone().unwrap_or_default(),
            tls: raw.tls.unwrap_or(false),
            tls_verify: verify,
        },
        CheckType::Exec => ProbeKind::Exec {
            command: raw.command.clone(),
        },
        // Manual checks are never probed; a probe of one reports why.
        CheckType::Manual => ProbeKind::Exec {
            command: Vec::new(),
        },
        CheckType::Prometheus => ProbeKind::Prometheus {
            url: raw.url.clone().unwrap_or_default(),
            query: raw.query.clone().unwrap_or_default(),
            // Validation refuses a check without a comparison that reads.
            expect: raw
                .expect
                .as_deref()
                .and_then(|e| e.parse().ok())
                .unwrap_or(Comparison {
                    op: Op::Gt,
                    bound: 0.0,
                }),
        },
        CheckType::Push => ProbeKind::Push {
            key: instance.check.to_string(),
            stale_after: raw
                .stale_after
                .map_or(check.interval.saturating_mul(3), |s| s.0),
        },
        CheckType::Alertmanager => ProbeKind::Alertmanager {
            labels: raw.labels.clone(),
        },
    };
    ProbeSpec {
        kind,
        timeout: check.timeout,
        max_latency: raw.max_latency.map(|m| m.0),
    }
}

/// Where an instance probes: its address, or the check's fixed target.
pub fn target_of(instance: &Instance) -> Target {
    let host = match (&instance.check.address, &instance.spec.target) {
        (Some(ip), _) => Host::Ip(*ip),
        (None, Some(t)) => match t.parse() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(t.clone()),
        },
        (None, None) => Host::Name(String::new()),
    };
    let server_name = instance
        .spec
        .raw
        .host
        .clone()
        .unwrap_or_else(|| instance.server_name.clone());
    Target {
        host,
        port: instance.spec.port,
        server_name,
    }
}
