//! A device's own settings: the node file given to `gtm serve --config`.
//! Never replicated.

use std::{net::SocketAddr, path::PathBuf};

use serde::{Deserialize, Serialize};

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
    /// UDP worker threads per listener (default: one per CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_workers: Option<usize>,
    /// The EDNS buffer size advertised and used for UDP (default 1232).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edns_payload: Option<u16>,
    /// Events the log keeps on disk (default 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_retention: Option<u64>,
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
            api_listen: default_api_listen(),
            advertise_api: None,
            geoip_file: None,
            udp_workers: None,
            edns_payload: None,
            event_retention: None,
            allow_exec: false,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            max_concurrent_probes: None,
        }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}
