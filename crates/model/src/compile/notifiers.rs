//! `[[notifier]]`: where alerts go (docs/operations.md, "Alerts"). The
//! same reading serves validation and the devices' alert workers
//! ([`notifier_spec`]).

use std::{path::PathBuf, time::Duration};

use super::{Cx, unique};
use crate::{
    config::{Config, Notifier, NotifierType},
    severity::Severity,
};

/// The event kinds an alert can be about (the GTM Logs' kinds).
pub const EVENT_KINDS: [&str; 8] = [
    "record",
    "check",
    "scenario",
    "operator",
    "config",
    "datacenter",
    "geoip",
    "device",
];

/// A notifier as the alert workers use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifierSpec {
    pub name: String,
    pub delivery: Delivery,
    /// Extra trusted CAs (PEM), read when a connection is made.
    pub ca_file: Option<PathBuf>,
    pub filter: Filter,
    pub delay: Duration,
    pub repeat: Option<Duration>,
    pub resolved: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Webhook {
        url: String,
        secret_file: Option<PathBuf>,
    },
    Email {
        host: String,
        port: u16,
        tls: SmtpTls,
        from: String,
        to: Vec<String>,
        username: Option<String>,
        password_file: Option<PathBuf>,
    },
    Syslog {
        host: String,
        port: u16,
        transport: SyslogTransport,
        /// RFC 5424 facility number.
        facility: u8,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    StartTls,
    Tls,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyslogTransport {
    Udp,
    Tcp,
    Tls,
}

/// Which events a notifier takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Empty: every kind.
    pub kinds: Vec<String>,
    /// The least severity that opens an alert.
    pub severity: Severity,
    pub records: Vec<String>,
    pub domains: Vec<String>,
    pub datacenters: Vec<String>,
    pub devices: Vec<String>,
}

/// The RFC 5424 facilities by name.
const FACILITIES: [(&str, u8); 20] = [
    ("kern", 0),
    ("user", 1),
    ("mail", 2),
    ("daemon", 3),
    ("auth", 4),
    ("syslog", 5),
    ("lpr", 6),
    ("news", 7),
    ("uucp", 8),
    ("cron", 9),
    ("authpriv", 10),
    ("ftp", 11),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

/// `host:port` (`[v6]:port`), the port defaulting to `default`.
fn host_port(text: &str, default: u16) -> Result<(String, u16), String> {
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.ends_with(']') => {
            let port = p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("\"{text}\": \"{p}\" is not a port"))?;
            (h, port)
        }
        _ => (text, default),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(format!("\"{text}\" is not host:port"));
    }
    Ok((host.to_string(), port))
}

/// A notifier read for the alert workers; `Err` lists what is wrong, each
/// naming its key.
pub fn notifier_spec(n: &Notifier) -> Result<NotifierSpec, Vec<String>> {
    let mut errors = Vec::new();
    let mut err = |e: String| errors.push(e);
    use NotifierType::*;
    let keys: [(bool, &str, NotifierType); 11] = [
        (n.url.is_some(), "url", Webhook),
        (n.secret_file.is_some(), "secret_file", Webhook),
        (n.smtp.is_some(), "smtp", Email),
        (n.smtp_tls.is_some(), "smtp_tls", Email),
        (n.from.is_some(), "from", Email),
        (!n.to.is_empty(), "to", Email),
        (n.username.is_some(), "username", Email),
        (n.password_file.is_some(), "password_file", Email),
        (n.address.is_some(), "address", Syslog),
        (n.transport.is_some(), "transport", Syslog),
        (n.facility.is_some(), "facility", Syslog),
    ];
    for (set, key, kind) in keys {
        if set && kind != n.kind {
            let name = match kind {
                Webhook => "webhook",
                Email => "email",
                Syslog => "syslog",
            };
            err(format!("{key} applies to {name} notifiers only"));
        }
    }
    let file = |f: &Option<String>, key: &str, err: &mut dyn FnMut(String)| {
        f.as_ref().map(|f| {
            if !f.starts_with('/') {
                err(format!("{key}: \"{f}\" is not an absolute path"));
            }
            PathBuf::from(f)
        })
    };
    let delivery = match n.kind {
        Webhook => {
            let url = n.url.clone().unwrap_or_default();
            if n.url.is_none() {
                err("a webhook notifier needs url = \"https://...\"".into());
            } else if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                err(format!("url: \"{url}\" is not an http:// or https:// URL"));
            }
            Delivery::Webhook {
                url,
                secret_file: file(&n.secret_file, "secret_file", &mut err),
            }
        }
        Email => {
            let (host, port) = match n.smtp.as_deref().map(|s| host_port(s, 587)) {
                None => {
                    err("an email notifier needs smtp = \"host:port\"".into());
                    (String::new(), 0)
                }
                Some(Err(e)) => {
                    err(format!("smtp: {e}"));
                    (String::new(), 0)
                }
                Some(Ok(hp)) => hp,
            };
            let tls = match n.smtp_tls.as_deref() {
                None | Some("starttls") => SmtpTls::StartTls,
                Some("tls") => SmtpTls::Tls,
                Some("none") => SmtpTls::None,
                Some(other) => {
                    err(format!(
                        "smtp_tls: \"{other}\" is not starttls, tls or none"
                    ));
                    SmtpTls::StartTls
                }
            };
            let address = |a: &str| a.contains('@') && !a.chars().any(char::is_whitespace);
            let from = n.from.clone().unwrap_or_default();
            if n.from.is_none() {
                err("an email notifier needs from = \"gtm@example.net\"".into());
            } else if !address(&from) {
                err(format!("from: \"{from}\" is not an e-mail address"));
            }
            if n.to.is_empty() {
                err("an email notifier needs to = [\"ops@example.net\"]".into());
            }
            for (i, to) in n.to.iter().enumerate() {
                if !address(to) {
                    err(format!("to[{i}]: \"{to}\" is not an e-mail address"));
                }
            }
            if n.username.is_some() != n.password_file.is_some() {
                err("username and password_file go together".into());
            }
            Delivery::Email {
                host,
                port,
                tls,
                from,
                to: n.to.clone(),
                username: n.username.clone(),
                password_file: file(&n.password_file, "password_file", &mut err),
            }
        }
        Syslog => {
            let (host, port) = match n.address.as_deref().map(|s| host_port(s, 514)) {
                None => {
                    err("a syslog notifier needs address = \"host:port\"".into());
                    (String::new(), 0)
                }
                Some(Err(e)) => {
                    err(format!("address: {e}"));
                    (String::new(), 0)
                }
                Some(Ok(hp)) => hp,
            };
            let transport = match n.transport.as_deref() {
                None | Some("udp") => SyslogTransport::Udp,
                Some("tcp") => SyslogTransport::Tcp,
                Some("tls") => SyslogTransport::Tls,
                Some(other) => {
                    err(format!("transport: \"{other}\" is not udp, tcp or tls"));
                    SyslogTransport::Udp
                }
            };
            let facility = match n.facility.as_deref() {
                None => 3,
                Some(f) => match FACILITIES.iter().find(|(name, _)| *name == f) {
                    Some((_, code)) => *code,
                    None => {
                        err(format!(
                            "facility: \"{f}\" is not a syslog facility (daemon, local0 … local7, ...)"
                        ));
                        3
                    }
                },
            };
            Delivery::Syslog {
                host,
                port,
                transport,
                facility,
            }
        }
    };
    for (i, k) in n.kinds.iter().enumerate() {
        if !EVENT_KINDS.contains(&k.as_str()) {
            err(format!(
                "kinds[{i}]: \"{k}\" is not an event kind ({})",
                EVENT_KINDS.join(", ")
            ));
        }
    }
    for (i, r) in n.records.iter().enumerate() {
        if !r.contains('/') {
            err(format!(
                "records[{i}]: \"{r}\" is not a record (NAME/TYPE, e.g. www.example.test/A)"
            ));
        }
    }
    let ca_file = file(&n.ca_file, "ca_file", &mut err);
    if n.repeat.is_some_and(|r| r.0 < Duration::from_secs(1)) {
        err("repeat must be 1s or more".into());
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(NotifierSpec {
        name: n.name.clone(),
        delivery,
        ca_file,
        filter: Filter {
            kinds: n.kinds.clone(),
            severity: n.severity.unwrap_or(Severity::Warning),
            records: n
                .records
                .iter()
                .map(|r| r.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            domains: n
                .domains
                .iter()
                .map(|d| d.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            datacenters: n.datacenters.clone(),
            devices: n.devices.clone(),
        },
        delay: n.delay.map_or(Duration::ZERO, |d| d.0),
        repeat: n.repeat.map(|r| r.0),
        resolved: n.resolved.unwrap_or(true),
    })
}

impl Cx {
    /// Every notifier reads, and names only datacenters that exist.
    pub(super) fn notifiers(&mut self, config: &Config) {
        unique(
            self,
            "notifier",
            config.notifiers.iter().map(|n| n.name.as_str()),
        );
        for n in &config.notifiers {
            let path = format!("notifier {}", n.name);
            if let Err(errors) = notifier_spec(n) {
                for e in errors {
                    self.err(&path, e);
                }
            }
            for (i, dc) in n.datacenters.iter().enumerate() {
                if !config.datacenters.iter().any(|d| &d.name == dc) {
                    self.err(
                        &path,
                        format!("datacenters[{i}]: unknown datacenter \"{dc}\""),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        let config: Config = crate::parse(text).unwrap();
        match super::super::compile(&config) {
            Ok(_) => Vec::new(),
            Err(e) => e.lines().into_iter().collect(),
        }
    }

    #[test]
    fn each_type_reads_and_errors_name_their_key() {
        assert!(errors("[[notifier]]\nname = \"w\"\ntype = \"webhook\"\nurl = \"https://h.test/x\"\nsecret_file = \"/etc/gtm/s\"\nkinds = [\"record\"]\ndelay = \"30s\"\nrepeat = \"1h\"\n").is_empty());
        assert!(errors("[[notifier]]\nname = \"m\"\ntype = \"email\"\nsmtp = \"mail.test\"\nfrom = \"gtm@a.test\"\nto = [\"ops@a.test\"]\n").is_empty());
        assert!(errors("[[notifier]]\nname = \"s\"\ntype = \"syslog\"\naddress = \"[::1]:514\"\ntransport = \"tcp\"\nfacility = \"local3\"\n").is_empty());
        assert_eq!(
            errors(
                "[[notifier]]\nname = \"w\"\ntype = \"webhook\"\nsmtp = \"x\"\nkinds = [\"dns\"]\ndatacenters = [\"dc9\"]\n"
            ),
            [
                "notifier w: smtp applies to email notifiers only",
                "notifier w: a webhook notifier needs url = \"https://...\"",
                "notifier w: kinds[0]: \"dns\" is not an event kind (record, check, scenario, operator, config, datacenter, geoip, device)",
                "notifier w: datacenters[0]: unknown datacenter \"dc9\"",
            ]
        );
        assert_eq!(
            errors(
                "[[notifier]]\nname = \"m\"\ntype = \"email\"\nsmtp = \"h:0\"\nfrom = \"nobody\"\nto = [\"x y\"]\nusername = \"u\"\n"
            ),
            [
                "notifier m: smtp: \"h:0\": \"0\" is not a port",
                "notifier m: from: \"nobody\" is not an e-mail address",
                "notifier m: to[0]: \"x y\" is not an e-mail address",
                "notifier m: username and password_file go together",
            ]
        );
        assert_eq!(
            errors(
                "[[notifier]]\nname = \"s\"\ntype = \"syslog\"\naddress = \"h:514\"\ntransport = \"quic\"\nfacility = \"mars\"\nca_file = \"ca.pem\"\n"
            ),
            [
                "notifier s: transport: \"quic\" is not udp, tcp or tls",
                "notifier s: facility: \"mars\" is not a syslog facility (daemon, local0 … local7, ...)",
                "notifier s: ca_file: \"ca.pem\" is not an absolute path",
            ]
        );
    }

    #[test]
    fn host_and_port_read_with_defaults() {
        assert_eq!(host_port("mail.test", 587), Ok(("mail.test".into(), 587)));
        assert_eq!(
            host_port("127.0.0.1:2525", 587),
            Ok(("127.0.0.1".into(), 2525))
        );
        assert_eq!(host_port("[::1]:514", 514), Ok(("::1".into(), 514)));
        assert_eq!(host_port("::1", 514), Ok(("::1".into(), 514)));
        assert!(host_port("", 1).is_err());
    }
}
