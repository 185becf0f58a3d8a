//! A device's own settings: the node file given to `gtm serve --config`.
//! Never replicated.

use std::{
    fmt,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
};

use serde::{Deserialize, Serialize};

/// Configuration versions kept in history by default (the `history_keep`
/// node setting; each command carries its proposer's).
pub const HISTORY_KEPT: usize = 100;

/// The node file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSettings {
    /// Device name, shown in events and status.
    pub name: String,
    pub datacenter: String,
    /// Where the device keeps its store, API token and GeoIP database.
    pub data_dir: PathBuf,
    /// DNS listeners, UDP and TCP on each.
    #[serde(default = "default_dns_listen")]
    pub dns_listen: Vec<SocketAddr>,
    /// Zone transfers over TLS (XoT, RFC 9103): DNS over TCP inside TLS
    /// 1.3 with the device's certificate on each (needs `tls_cert` and
    /// `tls_key`). Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xot_listen: Vec<SocketAddr>,
    #[serde(default = "default_api_listen")]
    pub api_listen: SocketAddr,
    /// The API base URL other devices use to reach this one (default:
    /// `http://<api_listen>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise_api: Option<String>,
    /// A country `.mmdb`; default: `geoip.mmdb` in the data directory if
    /// one was imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geoip_file: Option<PathBuf>,
    /// UDP worker threads per listener (default: one per CPU, or one per
    /// CPU of `dns_cpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_workers: Option<usize>,
    /// CPUs kept for the UDP DNS workers; every other thread of the device
    /// runs on the CPUs left (default: none, nothing pinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_cpus: Vec<usize>,
    /// The EDNS buffer size advertised and used for UDP (default 1232).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edns_payload: Option<u16>,
    /// Events the log keeps on disk (default 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_retention: Option<u64>,
    /// Configuration versions the replicated history keeps (default 100,
    /// at least 1). Each write carries the setting of the device that
    /// received it, so every device prunes alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_keep: Option<u32>,
    /// Allow `exec` checks to run commands on this device (default false).
    #[serde(default)]
    pub allow_exec: bool,
    /// TLS for the API and cluster traffic: this device's certificate chain
    /// and key (PEM). Both or neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// Certificates (PEM) trusted for the other devices' APIs (default: this
    /// device's own certificate, for a cluster sharing one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// Most probes running at once (default 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_probes: Option<usize>,
    /// Let probes reach link-local addresses (169.254.0.0/16, fe80::/10),
    /// where cloud metadata services answer (default false).
    #[serde(default)]
    pub allow_link_local_probes: bool,
    /// When given, probes reach only addresses in these networks, e.g.
    /// `["10.0.0.0/8", "2001:db8::/32"]` (default: anywhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe_networks: Vec<Network>,
    /// What this device answers to an NSID query (RFC 5001) and to CH TXT
    /// `id.server.` / `hostname.bind.` (default: the device name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nsid: Option<String>,
    /// Which log lines are written, as `GTM_LOG` takes them, e.g. `"info"`
    /// or `"info,gtm::health=debug"` (default: info, with the libraries'
    /// chatter at warn). `GTM_LOG` or `RUST_LOG`, when set, win. Re-read on
    /// SIGHUP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// `"text"` (default) or `"json"`: one JSON object per line.
    #[serde(default)]
    pub log_format: LogFormat,
    /// dnstap output of the queries answered (docs/operations.md,
    /// "dnstap"); absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dnstap: Option<DnstapSettings>,
}

/// `[dnstap]`: where and what this device writes as dnstap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnstapSettings {
    /// A Frame Streams reader's Unix socket (e.g. fstrm_capture -u).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix: Option<PathBuf>,
    /// A Frame Streams reader's TCP address (e.g. fstrm_capture -a -p).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<SocketAddr>,
    /// A file, made anew when dnstap starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// The messages of each query tapped (default both).
    #[serde(default = "default_dnstap_messages")]
    pub messages: Vec<DnstapMessage>,
    /// 1 in `sample` answered queries is tapped (default 1: every one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<u32>,
    /// Queries queued for the output at most (default 10,000); past it
    /// they are dropped and counted, never waited for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<usize>,
    /// `Dnstap.identity` (default: the device name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

/// A dnstap message type an authoritative server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DnstapMessage {
    AuthQuery,
    AuthResponse,
}

/// Where dnstap goes, of the three outputs `[dnstap]` may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnstapOutput {
    Unix(PathBuf),
    Tcp(SocketAddr),
    File(PathBuf),
}

fn default_dnstap_messages() -> Vec<DnstapMessage> {
    vec![DnstapMessage::AuthQuery, DnstapMessage::AuthResponse]
}

/// `[dnstap] buffer` by default.
pub const DNSTAP_BUFFER: usize = 10_000;
/// `[dnstap] buffer` at most: a queued query holds its two messages
/// (about 1 KiB with a large answer).
pub const DNSTAP_MAX_BUFFER: usize = 1_000_000;

impl DnstapSettings {
    /// Its one output; an error names the settings at fault.
    pub fn output(&self) -> Result<DnstapOutput, NodeSettingError> {
        match (&self.unix, &self.tcp, &self.file) {
            (Some(p), None, None) => Ok(DnstapOutput::Unix(p.clone())),
            (None, Some(a), None) => Ok(DnstapOutput::Tcp(*a)),
            (None, None, Some(p)) => Ok(DnstapOutput::File(p.clone())),
            (None, None, None) => Err(NodeSettingError::Dnstap {
                key: "unix",
                reason: "give one output: unix, tcp or file".into(),
            }),
            _ => Err(NodeSettingError::Dnstap {
                key: if self.file.is_some() { "file" } else { "tcp" },
                reason: "give one output only: unix, tcp or file".into(),
            }),
        }
    }

    /// 1 in this many queries is tapped.
    pub fn sample(&self) -> u32 {
        self.sample.unwrap_or(1)
    }

    /// Queries queued at most.
    pub fn buffer(&self) -> usize {
        self.buffer.unwrap_or(DNSTAP_BUFFER)
    }

    fn validate(&self) -> Result<(), NodeSettingError> {
        self.output()?;
        let bad = |key: &'static str, reason: String| NodeSettingError::Dnstap { key, reason };
        if let Some(p) = self.unix.as_ref().or(self.file.as_ref())
            && p.as_os_str().is_empty()
        {
            let key = if self.unix.is_some() { "unix" } else { "file" };
            return Err(bad(key, "an empty path".into()));
        }
        if self.messages.is_empty() {
            return Err(bad(
                "messages",
                "no message type: give \"auth-query\", \"auth-response\" or both".into(),
            ));
        }
        if self.sample == Some(0) {
            return Err(bad("sample", "0; give 1 (every query) or more".into()));
        }
        if let Some(b) = self.buffer
            && !(1..=DNSTAP_MAX_BUFFER).contains(&b)
        {
            return Err(bad(
                "buffer",
                format!("{b}; give 1 to {DNSTAP_MAX_BUFFER} queries"),
            ));
        }
        if let Some(id) = &self.identity
            && id.len() > 255
        {
            return Err(bad("identity", format!("{} bytes; at most 255", id.len())));
        }
        Ok(())
    }
}

/// How log lines are written on standard error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// An IP network, written `ADDRESS/PREFIX` (a lone address is /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Network {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Network {
    /// The network of `prefix` bits that holds `ip`: its host bits
    /// cleared (`81.2.69.160` and 24 give `81.2.69.0/24`). A prefix longer
    /// than the address is cut to it.
    pub fn of(ip: IpAddr, prefix: u8) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => {
                let prefix = prefix.min(32);
                let mask = u32::MAX.checked_shl(u32::from(32 - prefix)).unwrap_or(0);
                Self {
                    addr: IpAddr::V4((u32::from(v4) & mask).into()),
                    prefix,
                }
            }
            IpAddr::V6(v6) => {
                let prefix = prefix.min(128);
                let mask = u128::MAX.checked_shl(u32::from(128 - prefix)).unwrap_or(0);
                Self {
                    addr: IpAddr::V6((u128::from(v6) & mask).into()),
                    prefix,
                }
            }
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |ip: IpAddr| -> (u128, u8) {
            match ip.to_canonical() {
                IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
                IpAddr::V6(v6) => (u128::from(v6), 128),
            }
        };
        let ((net, width), (ip, ip_width)) = (bits(self.addr), bits(ip));
        if width != ip_width {
            return false;
        }
        let shift = u32::from(width - self.prefix);
        shift >= 128 || (net >> shift) == (ip >> shift)
    }
}

/// A network as written that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    /// What comes before the `/` is not an IP address.
    #[error("\"{0}\" is not a network: write ADDRESS/PREFIX, e.g. 10.0.0.0/8")]
    NotAnAddress(String),
    /// The prefix is not a number of bits the address has.
    #[error("\"{text}\": the prefix must be 0 to {max}")]
    Prefix { text: String, max: u8 },
}

impl TryFrom<String> for Network {
    type Error = NetworkError;
    fn try_from(text: String) -> Result<Self, NetworkError> {
        let (addr, prefix) = text.split_once('/').unwrap_or((&text, ""));
        let Ok(addr) = addr.parse::<IpAddr>() else {
            return Err(NetworkError::NotAnAddress(text));
        };
        let max = if addr.to_canonical().is_ipv4() {
            32
        } else {
            128
        };
        let prefix = match prefix {
            "" => max,
            p => match p.parse::<u8>().ok().filter(|p| *p <= max) {
                Some(p) => p,
                None => return Err(NetworkError::Prefix { text, max }),
            },
        };
        Ok(Self { addr, prefix })
    }
}

impl From<Network> for String {
    fn from(n: Network) -> Self {
        n.to_string()
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

pub fn default_dns_listen() -> Vec<SocketAddr> {
    vec![
        "127.0.0.1:1053".parse().expect("literal"),
        "[::1]:1053".parse().expect("literal"),
    ]
}

pub fn default_api_listen() -> SocketAddr {
    "127.0.0.1:8053".parse().expect("literal")
}

/// The data directory used when none is given: `$GTM_DATA_DIR`, else
/// `~/.local/share/gtm`, else `./gtm-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GTM_DATA_DIR") {
        return dir.into();
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/gtm"),
        None => PathBuf::from("gtm-data"),
    }
}

impl NodeSettings {
    /// The settings of `gtm serve` with no arguments: the demo on loopback.
    pub fn demo(data_dir: PathBuf) -> Self {
        Self {
            name: "demo".into(),
            datacenter: "dc1".into(),
            data_dir,
            dns_listen: default_dns_listen(),
            xot_listen: Vec::new(),
            api_listen: default_api_listen(),
            advertise_api: None,
            geoip_file: None,
            udp_workers: None,
            dns_cpus: Vec::new(),
            edns_payload: None,
            event_retention: None,
            history_keep: None,
            allow_exec: false,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            max_concurrent_probes: None,
            allow_link_local_probes: false,
            probe_networks: Vec::new(),
            nsid: None,
            log_level: None,
            log_format: LogFormat::Text,
            dnstap: None,
        }
    }

    pub fn parse(text: &str) -> Result<Self, NodeSettingError> {
        let settings: Self = toml::from_str(text).map_err(|e| NodeSettingError::toml(text, &e))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Rules serde cannot say: the NSID value must fit a TXT
    /// character-string (255 bytes), as it is answered to CH TXT queries.
    pub fn validate(&self) -> Result<(), NodeSettingError> {
        let nsid = self.nsid();
        if nsid.len() > 255 {
            return Err(match &self.nsid {
                Some(nsid) => NodeSettingError::NsidTooLong { nsid: nsid.clone() },
                None => NodeSettingError::NameTooLongForNsid {
                    name: self.name.clone(),
                },
            });
        }
        if let Some(level) = &self.log_level
            && let Err(error) = parse_log_filter(level)
        {
            return Err(NodeSettingError::LogLevel {
                level: level.clone(),
                error,
            });
        }
        if self.history_keep == Some(0) {
            return Err(NodeSettingError::NoHistoryKept);
        }
        if let Some(dnstap) = &self.dnstap {
            dnstap.validate()?;
        }
        if !self.xot_listen.is_empty() && (self.tls_cert.is_none() || self.tls_key.is_none()) {
            return Err(NodeSettingError::XotWithoutTls);
        }
        Ok(())
    }

    /// Configuration versions history keeps: `history_keep`, default 100.
    pub fn history_keep(&self) -> u32 {
        self.history_keep.unwrap_or(HISTORY_KEPT as u32)
    }

    /// The NSID value answered: `nsid`, else the device name.
    pub fn nsid(&self) -> &str {
        self.nsid.as_deref().unwrap_or(&self.name)
    }
}

/// What is wrong with a node file.
#[derive(Debug, thiserror::Error)]
pub enum NodeSettingError {
    /// Not TOML, or not the node file's keys and types: where (the line,
    /// from 1, and the key whose value it is, when the parser says) and
    /// the parser's reason.
    #[error("{}{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default(), key.as_ref().map(|k| format!("node setting {k}: ")).unwrap_or_default())]
    Toml {
        line: Option<usize>,
        key: Option<String>,
        message: String,
    },
    /// `nsid` does not fit a TXT character-string.
    #[error(
        "node setting nsid: \"{nsid}\" is {len} bytes; at most 255 fit in a CH TXT answer (set `nsid` to a shorter value)",
        len = .nsid.len()
    )]
    NsidTooLong { nsid: String },
    /// Without `nsid`, the device name is answered, and does not fit a TXT
    /// character-string.
    #[error(
        "node setting name (the default nsid): \"{name}\" is {len} bytes; at most 255 fit in a CH TXT answer (set `nsid` to a shorter value)",
        len = .name.len()
    )]
    NameTooLongForNsid { name: String },
    /// `log_level` is not a log filter (its message says why).
    #[error("node setting log_level: \"{level}\": {error}")]
    LogLevel {
        level: String,
        error: LogFilterError,
    },
    /// `history_keep = 0`.
    #[error(
        "node setting history_keep: 0; history keeps at least the current version (give 1 or more)"
    )]
    NoHistoryKept,
    /// A `[dnstap]` setting that cannot be used.
    #[error("node setting dnstap.{key}: {reason}")]
    Dnstap { key: &'static str, reason: String },
    /// `xot_listen` without the certificate it serves TLS with.
    #[error(
        "node setting xot_listen: zone transfers over TLS need the device's certificate (set tls_cert and tls_key)"
    )]
    XotWithoutTls,
}

impl NodeSettingError {
    /// A parser error of `text`, placed: its line, and the top-level key
    /// whose key or value holds the place it points at (every node setting
    /// is a top-level key).
    fn toml(text: &str, e: &toml::de::Error) -> Self {
        let span = e.span();
        let line = span
            .as_ref()
            .map(|s| text.get(..s.start).unwrap_or(text).matches('\n').count() + 1);
        let key = span.and_then(|span| {
            let table = toml::de::DeTable::parse(text).ok()?;
            let holds = |from: usize, to: usize| from <= span.start && span.end <= to;
            table.get_ref().iter().find_map(|(k, v)| {
                // A key of a table (`[dnstap]`) is named with its table's.
                if let toml::de::DeValue::Table(inner) = v.get_ref()
                    && let Some(ik) = inner
                        .iter()
                        .find(|(ik, iv)| holds(ik.span().start, iv.span().end))
                        .map(|(ik, _)| ik)
                {
                    return Some(format!("{}.{}", k.get_ref(), ik.get_ref()));
                }
                holds(k.span().start, v.span().end).then(|| k.get_ref().to_string())
            })
        });
        Self::Toml {
            line,
            key,
            message: e.message().trim_end().to_string(),
        }
    }
}

/// A log filter that does not parse: `tracing_subscriber`'s reason, whose
/// text says what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LogFilterError(tracing_subscriber::filter::ParseError);

/// Checks and parses a log filter (`log_level`, `GTM_LOG`, `RUST_LOG`): the
/// directives of `tracing_subscriber`'s `EnvFilter`, without regular
/// expressions.
pub fn parse_log_filter(directives: &str) -> Result<tracing_subscriber::EnvFilter, LogFilterError> {
    tracing_subscriber::EnvFilter::builder()
        .with_regex(false)
        .parse(directives)
        .map_err(LogFilterError)
}

#[cfg(test)]
mod tests {
    use super::Network;

    #[test]
    fn the_network_of_an_address_clears_its_host_bits() {
        let of = |ip: &str, p: u8| Network::of(ip.parse().unwrap(), p).to_string();
        assert_eq!(of("81.2.69.160", 24), "81.2.69.0/24");
        assert_eq!(of("81.2.69.160", 0), "0.0.0.0/0");
        assert_eq!(of("81.2.69.160", 32), "81.2.69.160/32");
        assert_eq!(of("81.2.69.160", 40), "81.2.69.160/32");
        assert_eq!(of("2001:db8:1:2::1", 32), "2001:db8::/32");
        assert_eq!(of("::ffff:192.0.2.9", 24), "192.0.2.0/24");
    }

    #[test]
    fn networks_parse_and_contain() {
        let n = |s: &str| Network::try_from(s.to_string());
        let lo = n("127.0.0.0/8").expect("valid");
        assert!(lo.contains("127.9.9.9".parse().expect("ip")));
        assert!(lo.contains("::ffff:127.0.0.1".parse().expect("ip")));
        assert!(!lo.contains("128.0.0.1".parse().expect("ip")));
        assert!(!lo.contains("::1".parse().expect("ip")));
        let one = n("::1").expect("valid");
        assert_eq!(one.to_string(), "::1/128");
        assert!(one.contains("::1".parse().expect("ip")));
        assert!(
            n("0.0.0.0/0")
                .expect("valid")
                .contains("192.0.2.1".parse().expect("ip"))
        );
        assert!(n("10.0.0.0/33").is_err());
        assert!(n("nonsense/8").is_err());
    }

    #[test]
    fn nsid_defaults_to_the_name_and_must_fit_a_txt_string() {
        let base = "name = \"dev-1\"\ndatacenter = \"dc1\"\ndata_dir = \"/tmp/x\"\n";
        let s = super::NodeSettings::parse(base).expect("valid");
        assert_eq!(s.nsid(), "dev-1");
        let s = super::NodeSettings::parse(&format!("{base}nsid = \"edge-7\"\n")).expect("valid");
        assert_eq!(s.nsid(), "edge-7");
        let long = "x".repeat(256);
        let e = super::NodeSettings::parse(&format!("{base}nsid = \"{long}\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node setting nsid") && e.contains("256 bytes"),
            "{e}"
        );
    }

    #[test]
    fn log_settings_parse_and_a_bad_filter_is_named() {
        let base = "name = \"dev-1\"\ndatacenter = \"dc1\"\ndata_dir = \"/tmp/x\"\n";
        let s = super::NodeSettings::parse(&format!(
            "{base}log_level = \"debug,gtm::health=trace\"\nlog_format = \"json\"\n"
        ))
        .expect("valid");
        assert_eq!(s.log_format, super::LogFormat::Json);
        let e = super::NodeSettings::parse(&format!("{base}log_level = \"gtm=loud\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("node setting log_level"), "{e}");
        assert!(super::NodeSettings::parse(&format!("{base}log_format = \"xml\"\n")).is_err());
    }

    #[test]
    fn the_packaged_node_file_parses_and_serves_port_53_from_var_lib_gtm() {
        let s = super::NodeSettings::parse(include_str!("../../../packaging/node.toml"))
            .expect("packaging/node.toml parses");
        assert!(s.dns_listen.iter().all(|a| a.port() == 53), "{s:?}");
        assert_eq!(s.data_dir, std::path::Path::new("/var/lib/gtm"));
    }

    #[test]
    fn zone_transfers_over_tls_need_the_devices_certificate() {
        let base = "name = \"dev-1\"\ndatacenter = \"dc1\"\ndata_dir = \"/tmp/x\"\n\
                    xot_listen = [\"127.0.0.1:853\"]\n";
        let e = super::NodeSettings::parse(base).unwrap_err().to_string();
        assert!(e.starts_with("node setting xot_listen: "), "{e}");
        let s = super::NodeSettings::parse(&format!(
            "{base}tls_cert = \"/etc/gtm/tls.pem\"\ntls_key = \"/etc/gtm/tls.key\"\n"
        ))
        .expect("with a certificate");
        assert_eq!(s.xot_listen, ["127.0.0.1:853".parse().unwrap()]);
    }

    #[test]
    fn a_toml_error_names_its_line_and_key() {
        let base = "name = \"dev-1\"\ndatacenter = \"dc1\"\ndata_dir = \"/tmp/x\"\n";
        let e = super::NodeSettings::parse(&format!("{base}dns_listen = [\"127.0.0.1\"]\n"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 4: node setting dns_listen: "), "{e}");
        let e = super::NodeSettings::parse(&format!("{base}\nbogus = 1\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("line 5: node setting bogus: unknown field"),
            "{e}"
        );
        let e = super::NodeSettings::parse("name = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("datacenter"), "{e}");
        let e = super::NodeSettings::parse("name = = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 1: "), "{e}");
    }

    #[test]
    fn dnstap_settings_take_one_output_and_name_what_is_wrong() {
        use super::{DnstapMessage, DnstapOutput, NodeSettings};
        let base = "name = \"dev-1\"\ndatacenter = \"dc1\"\ndata_dir = \"/tmp/x\"\n";
        let s = NodeSettings::parse(&format!(
            "{base}[dnstap]\nunix = \"/run/gtm/dnstap.sock\"\nsample = 10\n"
        ))
        .expect("valid");
        let d = s.dnstap.expect("dnstap");
        assert_eq!(
            d.output().unwrap(),
            DnstapOutput::Unix("/run/gtm/dnstap.sock".into())
        );
        assert_eq!((d.sample(), d.buffer()), (10, 10_000));
        assert_eq!(
            d.messages,
            [DnstapMessage::AuthQuery, DnstapMessage::AuthResponse]
        );
        let s = NodeSettings::parse(&format!(
            "{base}[dnstap]\ntcp = \"127.0.0.1:6000\"\nmessages = [\"auth-response\"]\n"
        ))
        .expect("valid");
        assert_eq!(s.dnstap.unwrap().messages, [DnstapMessage::AuthResponse]);
        for (table, named) in [
            ("", "node setting dnstap.unix: give one output"),
            (
                "unix = \"/a\"\nfile = \"/b\"\n",
                "node setting dnstap.file: give one output only",
            ),
            ("file = \"/b\"\nsample = 0\n", "node setting dnstap.sample"),
            ("file = \"/b\"\nbuffer = 0\n", "node setting dnstap.buffer"),
            (
                "file = \"/b\"\nbuffer = 1000001\n",
                "node setting dnstap.buffer",
            ),
            (
                "file = \"/b\"\nmessages = []\n",
                "node setting dnstap.messages",
            ),
            ("file = \"\"\n", "node setting dnstap.file"),
        ] {
            let e = NodeSettings::parse(&format!("{base}[dnstap]\n{table}"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(named), "{table}: {e}");
        }
        let e = NodeSettings::parse(&format!(
            "{base}[dnstap]\nfile = \"/b\"\nmessages = [\"client-query\"]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("line 6: node setting dnstap.messages: unknown variant"),
            "{e}"
        );
        let e = NodeSettings::parse(&format!("{base}[dnstap]\nfile = \"/b\"\nbogus = 1\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("dnstap") && e.contains("bogus"), "{e}");
    }

    #[test]
    fn history_keep_defaults_to_100_and_must_be_positive() {
        let base = "name = \"dev-1\"\ndatacenter = \"dc1\"\ndata_dir = \"/tmp/x\"\n";
        assert_eq!(
            super::NodeSettings::parse(base)
                .expect("valid")
                .history_keep(),
            100
        );
        let s = super::NodeSettings::parse(&format!("{base}history_keep = 3\n")).expect("valid");
        assert_eq!(s.history_keep(), 3);
        let e = super::NodeSettings::parse(&format!("{base}history_keep = 0\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("node setting history_keep"), "{e}");
    }
}
