//! The replicated configuration as operators write it (spec §1, §6).
//!
//! These types mirror the TOML file one to one: what `gtm config apply`
//! takes and `gtm config export` prints back. Defaults are left as `None` so
//! that an export shows what the operator wrote, not what we filled in;
//! [`super::compile`] resolves the defaults in one place.

use std::{net::IpAddr, sync::Arc};

use serde::{Deserialize, Serialize};

use super::duration::Interval;

/// Where the GeoIP database is downloaded from by default: DB-IP's IP to
/// Country Lite (CC BY 4.0), published monthly.
pub const DEFAULT_GEOIP_SOURCE: &str =
    "https://download.db-ip.com/free/dbip-country-lite-{year}-{month}.mmdb.gz";

/// A list as decoded, its spare capacity given back. A decoder grows a list
/// one item at a time (four places for one address), and what it decodes
/// lives as long as its version of the configuration: at a million
/// records the spare places were hundreds of megabytes.
fn exact<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut list = Vec::deserialize(d)?;
    list.shrink_to_fit();
    Ok(list)
}

/// The whole replicated configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where every device downloads its GeoIP database from, and whether it
    /// refreshes it monthly by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geoip: Option<Geoip>,
    #[serde(default, rename = "datacenter", skip_serializing_if = "Vec::is_empty")]
    pub datacenters: Vec<Arc<Datacenter>>,
    /// Named sets of client places that topology rules name
    /// (docs/topology.md).
    #[serde(default, rename = "region", skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<Arc<Region>>,
    /// Classes of clients that get zones of their own (split horizon,
    /// docs/views.md), tried in the order written.
    #[serde(default, rename = "view", skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<Arc<View>>,
    #[serde(default, rename = "check", skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Arc<Check>>,
    #[serde(default, rename = "scenario", skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<Arc<Scenario>>,
    #[serde(default, rename = "service", skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Arc<Service>>,
    #[serde(default, rename = "domain", skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<Arc<Domain>>,
    /// Where each device sends alerts on its events (docs/operations.md,
    /// "Alerts").
    #[serde(default, rename = "notifier", skip_serializing_if = "Vec::is_empty")]
    pub notifiers: Vec<Arc<Notifier>>,
    /// Response rate limiting of UDP answers per client network
    /// (docs/configuration.md, "Rate limiting"); on by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// DNS cookies (RFC 7873): how often the cluster's server secret is
    /// replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookies: Option<Cookies>,
    /// A catalog zone (RFC 9432) listing every domain with secondaries,
    /// for secondaries that provision their zones from it
    /// (docs/transfer.md, "Catalog zone").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<Catalog>,
}

/// The `[catalog]` table: the catalog zone's name and its own secondaries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The catalog zone's name, e.g. `catalog.example.test`.
    pub name: String,
    /// Who transfers the catalog and gets its NOTIFYs (as a domain's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secondaries: Vec<Secondary>,
}

/// The `[rate_limit]` table: response rate limiting (RRL) of UDP answers.
/// Every field has a default ([`super::compile`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// `false` answers every UDP query, however many. Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// UDP responses per second to one client network. Default 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responses_per_second: Option<u32>,
    /// The prefix length grouping IPv4 clients into one network. Default 24.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_prefix: Option<u8>,
    /// The prefix length grouping IPv6 clients into one network. Default 56.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_prefix: Option<u8>,
    /// Every `slip`-th response over the limit is sent truncated (TC=1) so
    /// real clients retry over TCP; the others are dropped. 0 drops them
    /// all, 1 truncates them all. Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slip: Option<u32>,
    /// Networks never limited (`ADDRESS/PREFIX`). Default: loopback
    /// (`127.0.0.0/8`, `::1/128`); a list given replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exempt: Option<Vec<String>>,
}

/// The `[cookies]` table: DNS cookies (RFC 7873, RFC 9018).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cookies {
    /// How often the leader replaces the cluster's server secret (the
    /// previous one stays valid until the next). Default `720h` (30 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate: Option<Interval>,
}

/// The `[geoip]` table: the database source every device downloads from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Geoip {
    /// An http(s) URL of a country `.mmdb` (gzipped or not); `{year}` and
    /// `{month}` are filled with the current UTC month. Default: DB-IP's IP
    /// to Country Lite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// An http(s) URL of an ASN `.mmdb` (DB-IP ASN Lite, GeoLite2 ASN),
    /// for `asn:` topology rules; filled like `source`. Unset: no device
    /// downloads one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn_source: Option<String>,
    /// `monthly` (default) or `off`, for both databases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<GeoipUpdate>,
}

/// Whether devices refresh their GeoIP database by themselves.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum GeoipUpdate {
    #[default]
    Monthly,
    Off,
}

impl Config {
    /// The place in `domains` of the domain named `name` that is in no
    /// view (the one served to every client).
    pub fn domain_index(&self, name: &str) -> Option<usize> {
        self.domains
            .iter()
            .position(|d| d.view.is_none() && same_name(&d.name, name))
    }

    /// A copy of everything but the domains (which can be most of it).
    pub fn clone_globals(&self) -> Config {
        let Config {
            geoip,
            datacenters,
            regions,
            views,
            checks,
            scenarios,
            services,
            domains: _,
            notifiers,
            rate_limit,
            cookies,
            catalog,
        } = self;
        Config {
            geoip: geoip.clone(),
            datacenters: datacenters.clone(),
            regions: regions.clone(),
            views: views.clone(),
            checks: checks.clone(),
            scenarios: scenarios.clone(),
            services: services.clone(),
            domains: Vec::new(),
            notifiers: notifiers.clone(),
            rate_limit: rate_limit.clone(),
            cookies: cookies.clone(),
            catalog: catalog.clone(),
        }
    }

    /// Whether `other` is the same but for its domains.
    pub fn same_globals(&self, other: &Config) -> bool {
        // Each field named, so that a new one is not left out.
        let Config {
            geoip,
            datacenters: _,
            regions: _,
            views: _,
            checks: _,
            scenarios: _,
            services: _,
            domains: _,
            notifiers,
            rate_limit,
            cookies,
            catalog,
        } = self;
        *geoip == other.geoip
            && *catalog == other.catalog
            && *notifiers == other.notifiers
            && self.steers_alike(other)
            && *rate_limit == other.rate_limit
            && *cookies == other.cookies
    }

    /// Whether `other` has the same datacenters, checks, scenarios and
    /// services: everything a domain's steered records read besides the
    /// domain itself.
    pub fn steers_alike(&self, other: &Config) -> bool {
        self.datacenters == other.datacenters
            && self.regions == other.regions
            && self.views == other.views
            && self.checks == other.checks
            && self.scenarios == other.scenarios
            && self.services == other.services
    }

    /// The GeoIP source template in effect (the default when unset).
    pub fn geoip_source(&self) -> &str {
        self.geoip
            .as_ref()
            .and_then(|g| g.source.as_deref())
            .unwrap_or(DEFAULT_GEOIP_SOURCE)
    }

    /// The ASN database's source template, when one is configured.
    pub fn asn_source(&self) -> Option<&str> {
        self.geoip.as_ref().and_then(|g| g.asn_source.as_deref())
    }

    /// Whether devices refresh their GeoIP database monthly: only with a
    /// `[geoip]` table (a device makes no download nobody asked for), and
    /// then unless `update = "off"`.
    pub fn geoip_monthly(&self) -> bool {
        self.geoip
            .as_ref()
            .is_some_and(|g| g.update.unwrap_or_default() == GeoipUpdate::Monthly)
    }
}

/// Names compare as DNS names do: without case, and a final dot is optional.
pub fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// A site. Every device and every address belongs to one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Datacenter {
    pub name: String,
    /// ISO 3166 two-letter code, used by topological selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// AF, AN, AS, EU, NA, OC or SA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continent: Option<String>,
    /// Where it is, in decimal degrees north (−90 to 90): with
    /// `longitude`, for records answered by the nearest datacenter
    /// (`nearest = true`, docs/topology.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latitude: Option<crate::place::Degrees>,
    /// Decimal degrees east (−180 to 180).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longitude: Option<crate::place::Degrees>,
    /// −99 to 99: a client's distance to it counts as `1 − bias/100`
    /// times the real one, so a positive bias draws clients from further
    /// away and a negative one sends them elsewhere (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<i32>,
}

/// A named set of client places (docs/topology.md): a client is in it
/// when one of its members holds the client and none of its exclusions
/// does. Members of a nested region count with that region's own
/// exclusions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Region {
    pub name: String,
    /// Client networks, `10.20.0.0/16` or `2001:db8::/32`, host bits zero.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<String>,
    /// ISO 3166 two-letter country codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    /// AF, AN, AS, EU, NA, OC or SA.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continents: Vec<String>,
    /// ISO 3166-2 subdivisions, `US-CA` (with a City database).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subdivisions: Vec<String>,
    /// Autonomous systems (with an ASN database): `64500` or `"AS64500"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asns: Vec<crate::place::Asn>,
    /// Other regions whose clients are in this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<String>,
    /// Networks whose clients are not in the region.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_networks: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_countries: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_continents: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_subdivisions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_asns: Vec<crate::place::Asn>,
}

/// How a notifier delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NotifierType {
    /// An HTTP(S) POST of a JSON body, signed with HMAC-SHA256.
    Webhook,
    /// An e-mail over SMTP.
    Email,
    /// An RFC 5424 syslog message over UDP, TCP or TLS.
    Syslog,
}

/// A notifier (docs/operations.md, "Alerts"): where each device sends the
/// events of its own (and, from the leader, the cluster's) that pass its
/// filters, with a delay, repeats and resolution messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Notifier {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: NotifierType,
    /// Webhook: the `http://` or `https://` URL posted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Webhook: a file on each device holding the HMAC-SHA256 key the body
    /// is signed with (never in the configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<String>,
    /// Email: the SMTP server, `host:port` (port 587 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp: Option<String>,
    /// Email: `starttls` (default), `tls` (implicit, port 465) or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtp_tls: Option<String>,
    /// Email: the sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Email: the recipients.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// Email: the SMTP user, with `password_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Email: a file on each device holding the SMTP password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    /// Syslog: the receiver, `host:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Syslog: `udp` (default), `tcp` or `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Syslog: the facility (`daemon` by default, `local0`…`local7`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facility: Option<String>,
    /// A PEM file on each device of the CAs trusted for HTTPS and TLS
    /// (default: the web's public roots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Event kinds sent (`record`, `check`, `scenario`, `datacenter`,
    /// `device`, `operator`, `config`, `geoip`); empty: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// The least severity that opens an alert: `info`, `warning`
    /// (default) or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<crate::severity::Severity>,
    /// Only the events of these records (`www.example.test/A`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<String>,
    /// Only the events of records in these domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
    /// Only the events of devices in, and about, these datacenters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub datacenters: Vec<String>,
    /// Only the events of these devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// Send only if the alert is still open this long after it opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Interval>,
    /// Send again this often while the alert is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Interval>,
    /// Send a message when an alert that was sent is resolved (default
    /// true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<bool>,
}

/// A view (docs/views.md): the clients one of `clients` holds get the
/// view's records, and its domains, instead of the ones every client gets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct View {
    pub name: String,
    /// Client places, written as a topology rule's `client`:
    /// `10.0.0.0/8`, `region:NAME`, `asn:64500`, `subdivision:US-CA`,
    /// `country:US` or `continent:EU`.
    pub clients: Vec<String>,
}

/// A topology rule (docs/topology.md): clients at `client` are answered
/// from `datacenter`'s addresses, or `address`, when some of those are
/// among the healthy candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TopologyRule {
    /// `10.20.0.0/16`, `region:NAME`, `asn:64500`, `subdivision:US-CA`,
    /// `country:US` or `continent:EU`.
    pub client: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<String>,
    /// A group of the record's addresses (their `group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// One of the record's addresses (a CNAME record's target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Among rules that match a client equally closely, the higher weight
    /// wins (then the rule written first). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

/// How a check probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckType {
    Http,
    Https,
    Http2,
    Tcp,
    Tls,
    Dns,
    Icmp,
    Grpc,
    Exec,
    Manual,
    /// A PromQL query against a Prometheus HTTP API.
    Prometheus,
    /// The state a backend or a monitoring system posts (docs/health.md,
    /// "Inputs").
    Push,
    /// Alerts an Alertmanager posts to the device's receiver.
    Alertmanager,
}

/// How the reports of several devices combine into one state for a check
/// that runs in another datacenter.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    #[default]
    Any,
    All,
    Majority,
}

/// A probe definition. Without `target` it is a template, probed against
/// every address whose HC field names it (`check:NAME`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: CheckType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Host header and TLS server name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_body: Option<String>,
    /// TCP/TLS request string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// TCP/TLS exact expected response; Prometheus checks: the comparison
    /// every value of the query's result must meet (`< 0.05`, `>= 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_verify: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<bool>,
    /// HTTP checks: keep the connection open between probes (default
    /// false: a new connection per probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse_connection: Option<bool>,
    /// DNS checks: the name and type asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_rcode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_answer: Option<String>,
    /// gRPC checks: the grpc.health.v1 service name; `tls` for gRPC over TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    /// Exec checks: program and arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Prometheus checks: the Prometheus HTTP API's base URL
    /// (`http://127.0.0.1:9090`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Prometheus checks: the PromQL query; `$address` stands for the
    /// address (or target) checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Alertmanager checks: the labels an alert must carry, each exactly
    /// (`$address` stands for the address or target checked).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Push checks: how long a report stands; after that without a new
    /// one, each evaluation is a failure (default three intervals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after: Option<Interval>,
    /// Every probed type: a probe that succeeds but takes longer than
    /// this is a failure ("slow is down").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_latency: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Interval>,
    /// Required failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<u32>,
    /// Required successes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successes: Option<u32>,
    /// `all` devices (default) or the name of one datacenter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_on: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
}

/// A condition over checks; active or passive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub condition: String,
    /// "With Trigger": a change of decision applies only once this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<String>,
}

/// A named group of domains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Service {
    pub name: String,
    #[serde(default)]
    pub domains: Vec<String>,
}

/// How the candidates of a record are chosen (spec §2 step 2).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    #[default]
    Standalone,
    DisasterRecovery,
    Datacenter,
}

/// A zone served authoritatively.
// `Eq`: comparing two `Arc<Domain>` compares pointers first (a domain an
// edit did not touch is the one the version before holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    pub name: String,
    /// Default TTL of the records (30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
    /// Default mode of the records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_dc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dr_dc: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dc_order: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcs_to_select: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soa: Option<Soa>,
    /// The topology rules of the domain's records that have none of their
    /// own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_rules: Vec<TopologyRule>,
    #[serde(
        default,
        rename = "record",
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact"
    )]
    pub records: Vec<Arc<Record>>,
    /// Sign the zone online (docs/dnssec.md): its key is made once, kept in
    /// the replicated state, and every device signs with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dnssec: Option<bool>,
    /// The algorithm of the zone's key when it is made:
    /// `ecdsap256sha256` (13, default) or `ed25519` (15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dnssec_algorithm: Option<KeyAlgorithm>,
    /// Secondary servers that may transfer this zone (AXFR with TSIG) and
    /// get a NOTIFY on every new serial (docs/transfer.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secondaries: Vec<Secondary>,
    /// The view whose clients alone are answered from this domain
    /// (docs/views.md); unset: every client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// The catalog zone's `group` property of this domain (RFC 9432 §4.4.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_group: Option<String>,
    /// The catalog zone's `coo` property: the catalog this domain moves to
    /// (RFC 9432 §4.4.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_coo: Option<String>,
    /// Who may change the zone's records by RFC 2136 dynamic update, and
    /// which (docs/transfer.md, "Dynamic update").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updates: Vec<UpdateGrant>,
    /// The primary this domain is transferred in from during a migration
    /// (docs/transfer.md, "Transfer in"): its records marked `transferred`
    /// are that primary's, gtm's own layered on top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<Primary>,
}

impl Domain {
    /// The domain without its records (what a diff of its fields compares,
    /// what a text of some of its records is written with). Built field by
    /// field so that a new field cannot be forgotten here.
    pub fn without_records(&self) -> Domain {
        let Domain {
            name,
            ttl,
            mode,
            main_dc,
            dr_dc,
            dc_order,
            dcs_to_select,
            nameservers,
            soa,
            topology_rules,
            records: _,
            dnssec,
            dnssec_algorithm,
            secondaries,
            view,
            catalog_group,
            catalog_coo,
            updates,
            primary,
        } = self;
        Domain {
            name: name.clone(),
            ttl: *ttl,
            mode: *mode,
            main_dc: main_dc.clone(),
            dr_dc: dr_dc.clone(),
            dc_order: dc_order.clone(),
            dcs_to_select: *dcs_to_select,
            nameservers: nameservers.clone(),
            soa: soa.clone(),
            topology_rules: topology_rules.clone(),
            records: Vec::new(),
            dnssec: *dnssec,
            dnssec_algorithm: *dnssec_algorithm,
            secondaries: secondaries.clone(),
            view: view.clone(),
            catalog_group: catalog_group.clone(),
            catalog_coo: catalog_coo.clone(),
            updates: updates.clone(),
            primary: primary.clone(),
        }
    }

    /// Whether the domain, or a record of it, is in a view
    /// (docs/views.md).
    pub fn has_views(&self) -> bool {
        self.view.is_some() || self.records.iter().any(|r| r.view().is_some())
    }

    /// Whether the two are the same but for their records (their fields
    /// as [`Domain::without_records`] lists them).
    pub fn same_but_records(&self, other: &Domain) -> bool {
        self.without_records() == other.without_records()
    }
}

/// A DNSSEC key algorithm gtm signs with.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum KeyAlgorithm {
    /// ECDSA P-256 with SHA-256, algorithm 13.
    #[default]
    Ecdsap256sha256,
    /// Ed25519, algorithm 15.
    Ed25519,
}

impl KeyAlgorithm {
    /// The IANA algorithm number.
    pub fn number(self) -> u8 {
        match self {
            Self::Ecdsap256sha256 => 13,
            Self::Ed25519 => 15,
        }
    }
}

/// A TSIG key's permission to change some records of a domain by dynamic
/// update (RFC 2136), like BIND's `update-policy` grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateGrant {
    /// The TSIG key (`gtm tsig add`) an update must be signed with.
    pub key: String,
    /// The name granted, relative to the domain (`@`: the apex).
    pub name: String,
    /// Also the names below `name`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subdomains: bool,
    /// The record types granted (mnemonics or `TYPEnnn`).
    pub types: Vec<RecordType>,
}

/// The primary server a domain is transferred in from (docs/transfer.md,
/// "Transfer in").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Primary {
    /// Where it answers, `IP` or `IP:port` (port 53 by default): SOA
    /// queries and transfers go there, and NOTIFYs from this IP start one.
    pub address: String,
    /// The TSIG key (`gtm tsig add`) the queries and transfers are signed
    /// with, and its answers must be; unset: unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The primary's SOA serial of the records transferred last; written
    /// by the transfer (unset: none yet, so one starts at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u32>,
}

/// A secondary server of a domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Secondary {
    /// Where it listens, `IP` or `IP:port` (port 53 by default): NOTIFYs
    /// go there, and transfers are answered only from this IP.
    pub address: String,
    /// The TSIG key (`gtm tsig add`) its transfers and NOTIFYs are signed
    /// with.
    pub key: String,
    /// The view whose zone it transfers (docs/views.md); unset: the zone
    /// every client outside a view gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
}

/// The SOA fields; every one has a default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Soa {
    /// Primary name server (default: the first of `nameservers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mname: Option<String>,
    /// Responsible mailbox as a name (default: `hostmaster.<domain>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rname: Option<String>,
    /// Default: derived from the configuration version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire: Option<u32>,
    /// Negative-caching TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<u32>,
}

pub use crate::rtype::RecordType;

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    #[default]
    RoundRobin,
    Weighted,
    Random,
    Priority,
    Persist,
}

impl Balance {
    /// The name the configuration gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RoundRobin => "round-robin",
            Self::Weighted => "weighted",
            Self::Random => "random",
            Self::Priority => "priority",
            Self::Persist => "persist",
        }
    }
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Failback {
    #[default]
    Auto,
    Manual,
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum OnNoHealthy {
    #[default]
    Empty,
    All,
}

/// A name and type inside a domain, as an operator writes it: the shape of
/// the file and of the API. A device holds it as a [`Record`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Record")]
pub struct RecordFields {
    /// `@` for the apex, a relative name, or a name starting with `*.`.
    pub name: Box<str>,
    #[serde(rename = "type")]
    pub kind: RecordType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<Balance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_answers: Option<usize>,
    /// `automatic` or `scenario:NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dr_condition: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dr_on_no_healthy: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failback: Option<Failback>,
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    pub fail_safe: Box<[String]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_no_healthy: Option<OnNoHealthy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<bool>,
    /// Clients no topology rule answers are answered from the nearest
    /// datacenter with a candidate, by the client's location
    /// (docs/topology.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nearest: Option<bool>,
    /// Where clients are answered from (docs/topology.md); unset: the
    /// domain's.
    #[serde(default, skip_serializing_if = "<[TopologyRule]>::is_empty")]
    pub topology_rules: Box<[TopologyRule]>,
    #[serde(default, skip_serializing_if = "<[Address]>::is_empty")]
    pub addresses: Box<[Address]>,
    /// Static record data in zone-file syntax, e.g. `10 mail.example.test.`.
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    pub values: Box<[String]>,
    /// The view whose clients alone get this record (docs/views.md): there
    /// the view's records at its name replace every other record there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<Box<str>>,
    /// An A or AAAA record answered with the answer of another record of
    /// the domain, of the same type (its name, relative like `name`): an
    /// apex alias (docs/configuration.md, "Aliases").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<Box<str>>,
    /// Transferred in from the domain's `primary` (written by the
    /// transfer, docs/transfer.md): served unless a record of gtm's own
    /// is at its name and type; replaced by the next transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transferred: Option<bool>,
}

/// A record as a device holds it, one per record of every configuration
/// version (shared between versions): what every record has inline, the
/// steering options a steered record sets and a static record's values
/// behind one box, absent when there are none (most records of a large
/// configuration). Reads and writes as [`RecordFields`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(from = "RecordFields", into = "RecordFields")]
#[schemars(description = "A name and type inside a domain.")]
pub struct Record {
    pub name: Box<str>,
    pub kind: RecordType,
    pub ttl: Option<u32>,
    pub addresses: Box<[Address]>,
    options: Option<Box<RecordOptions>>,
}

/// The steering options of a record, each as written, and a static
/// record's values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordOptions {
    pub mode: Option<Mode>,
    pub balance: Option<Balance>,
    pub max_answers: Option<usize>,
    pub dr_condition: Option<Box<str>>,
    pub dr_on_no_healthy: Option<bool>,
    pub failback: Option<Failback>,
    pub fail_safe: Box<[String]>,
    pub on_no_healthy: Option<OnNoHealthy>,
    pub topology: Option<bool>,
    pub nearest: Option<bool>,
    pub topology_rules: Box<[TopologyRule]>,
    pub values: Box<[String]>,
    pub view: Option<Box<str>>,
    pub alias: Option<Box<str>>,
    pub transferred: Option<bool>,
}

impl From<RecordFields> for Record {
    fn from(f: RecordFields) -> Self {
        let RecordFields {
            name,
            kind,
            ttl,
            mode,
            balance,
            max_answers,
            dr_condition,
            dr_on_no_healthy,
            failback,
            fail_safe,
            on_no_healthy,
            topology,
            nearest,
            topology_rules,
            addresses,
            values,
            view,
            alias,
            transferred,
        } = f;
        let options = RecordOptions {
            mode,
            balance,
            max_answers,
            dr_condition,
            dr_on_no_healthy,
            failback,
            fail_safe,
            on_no_healthy,
            topology,
            nearest,
            topology_rules,
            values,
            view,
            alias,
            transferred,
        };
        Record {
            name,
            kind,
            ttl,
            addresses,
            options: (options != RecordOptions::default()).then(|| Box::new(options)),
        }
    }
}

impl From<Record> for RecordFields {
    fn from(r: Record) -> Self {
        let Record {
            name,
            kind,
            ttl,
            addresses,
            options,
        } = r;
        let RecordOptions {
            mode,
            balance,
            max_answers,
            dr_condition,
            dr_on_no_healthy,
            failback,
            fail_safe,
            on_no_healthy,
            topology,
            nearest,
            topology_rules,
            values,
            view,
            alias,
            transferred,
        } = options.map(|o| *o).unwrap_or_default();
        RecordFields {
            name,
            kind,
            ttl,
            mode,
            balance,
            max_answers,
            dr_condition,
            dr_on_no_healthy,
            failback,
            fail_safe,
            on_no_healthy,
            topology,
            nearest,
            topology_rules,
            addresses,
            values,
            view,
            alias,
            transferred,
        }
    }
}

impl Record {
    /// The record's steering options (all unset when it sets none).
    pub fn options(&self) -> &RecordOptions {
        static NONE: std::sync::LazyLock<RecordOptions> =
            std::sync::LazyLock::new(RecordOptions::default);
        self.options.as_deref().unwrap_or(&NONE)
    }

    /// A static record's values, in zone-file syntax.
    pub fn values(&self) -> &[String] {
        &self.options().values
    }

    /// The view whose clients alone get the record, if it is in one.
    pub fn view(&self) -> Option<&str> {
        self.options().view.as_deref()
    }

    /// Whether it was transferred in from the domain's primary.
    pub fn is_transferred(&self) -> bool {
        self.options().transferred == Some(true)
    }

    /// The record with no addresses.
    pub fn without_addresses(&self) -> Record {
        Record {
            name: self.name.clone(),
            kind: self.kind,
            ttl: self.ttl,
            addresses: Box::default(),
            options: self.options.clone(),
        }
    }

    /// The record as written, to change and make a record of again.
    pub fn fields(&self) -> RecordFields {
        self.clone().into()
    }
}

/// One answer candidate of a steerable record, as written: the shape of
/// the file and of the API. A device holds it as an [`Address`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Address")]
pub struct AddressFields {
    /// For A and AAAA records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpAddr>,
    /// For CNAME records: the target name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Box<str>>,
    /// For MX and SRV records: the record's data in zone-file syntax
    /// (`"10 mx1"`, `"0 5 5060 sip1"`); `ip` is then the address its
    /// check probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dc: Option<Box<str>>,
    /// `static` (default), `disabled`, `scenario:NAME` or `check:NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hc: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    pub countries: Box<[String]>,
    #[serde(default, skip_serializing_if = "<[String]>::is_empty")]
    pub continents: Box<[String]>,
    /// A name for a set of the record's addresses that a topology rule
    /// can answer from (`group = "edge"`, docs/topology.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Box<str>>,
}

/// An address as a device holds it: its IP inline, anything else it sets
/// behind one box, absent for an IP alone (most addresses of a large
/// configuration). Reads and writes as [`AddressFields`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(from = "AddressFields", into = "AddressFields")]
#[schemars(description = "One answer candidate of a steerable record.")]
pub struct Address {
    pub ip: Option<IpAddr>,
    /// The other fields, `ip` unset.
    rest: Option<Box<AddressFields>>,
}

impl From<AddressFields> for Address {
    fn from(mut f: AddressFields) -> Self {
        let ip = f.ip.take();
        Address {
            ip,
            rest: (f != AddressFields::default()).then(|| Box::new(f)),
        }
    }
}

impl From<Address> for AddressFields {
    fn from(a: Address) -> Self {
        let mut f = a.rest.map(|r| *r).unwrap_or_default();
        f.ip = a.ip;
        f
    }
}

impl Address {
    /// A CNAME's target.
    pub fn target(&self) -> Option<&str> {
        self.rest.as_ref()?.target.as_deref()
    }

    /// An MX or SRV address's data, in zone-file syntax.
    pub fn value(&self) -> Option<&str> {
        self.rest.as_ref()?.value.as_deref()
    }

    pub fn dc(&self) -> Option<&str> {
        self.rest.as_ref()?.dc.as_deref()
    }

    pub fn hc(&self) -> Option<&str> {
        self.rest.as_ref()?.hc.as_deref()
    }

    pub fn weight(&self) -> Option<u32> {
        self.rest.as_ref()?.weight
    }

    pub fn countries(&self) -> &[String] {
        self.rest.as_ref().map_or(&[], |r| &r.countries)
    }

    pub fn continents(&self) -> &[String] {
        self.rest.as_ref().map_or(&[], |r| &r.continents)
    }

    /// The group of the record's addresses it is in, if any.
    pub fn group(&self) -> Option<&str> {
        self.rest.as_ref()?.group.as_deref()
    }

    /// The address as written, to change and make an address of again.
    pub fn fields(&self) -> AddressFields {
        self.clone().into()
    }
}

#[cfg(test)]
mod tests {
    /// A configured record and address, one per record of a large
    /// configuration as every version shares it: their lists and texts
    /// boxed at their length, what most leave unset behind one box (a
    /// record took 160 bytes, then 112, then 72; an address 152, then 112).
    #[test]
    fn a_record_fits_56_bytes_and_an_address_32() {
        assert!(std::mem::size_of::<super::Record>() <= 56);
        assert!(std::mem::size_of::<super::Address>() <= 32);
    }
}
