//! Validation and compilation of a [`Config`] into the form the resolver and
//! the DNS path use.
//!
//! One pass walks the whole configuration, collects *every* error with the
//! path of the object it concerns (`domain example.test / record www A /
//! address 3: unknown scenario "dc2-up"`), and only when there is none
//! returns a [`Compiled`] configuration. Nothing half-valid ever leaves this
//! module, so an apply is all or nothing.

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
    str::FromStr,
    sync::Arc,
    time::Duration,
};

use hickory_server::proto::rr::{
    Name, RData,
    rdata::{A, AAAA, CNAME, SOA, TXT},
};

use super::{
    cancel::{Cancel, CheckError},
    condition::{self, CheckRef, Expr},
    config::*,
    config_errors::{ConfigError, ConfigErrors, Listing},
    names::{key_name, wire_key},
    place::{Continent, Country},
    value::Value,
};

/// Index of a datacenter in [`Compiled::datacenters`].
pub type DcId = usize;

/// The default TTL of records (spec §6, seed 002's advice of 30–60 s).
pub const DEFAULT_TTL: u32 = 30;
/// The most bytes the records of one name may take in a response (the
/// records a question for ANY answers). A response is at most 65,535 bytes
/// over TCP; the rest is kept for the header, a question of the longest
/// name (259), a chain of nine CNAMEs of the longest names (4,680) and the
/// OPT record with its options (512).
pub const MAX_NAME_BYTES: usize = 60_000;
/// The longest character-string of a TXT record; longer values are split
/// into consecutive strings of this length.
pub const MAX_CHARACTER_STRING: usize = 255;

/// The longest SOA expire of a signed domain with secondaries: the least
/// validity a transferred signature has left (docs/transfer.md).
pub const SIGNED_EXPIRE_MAX: u32 = 604_800;

/// Built-in scenarios: not offered as an HC, usable as a DR condition.
pub const BUILTIN_SCENARIOS: [&str; 2] = ["always", "never"];

/// A validated configuration with every default resolved.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub datacenters: Vec<DcSpec>,
    pub checks: Vec<CheckSpec>,
    pub scenarios: Vec<ScenarioSpec>,
    /// Shared with the answers built from them (`Snapshot`), and with the
    /// next configuration's when a zone did not change.
    pub zones: Vec<Arc<ZoneSpec>>,
    /// `[rate_limit]` with its defaults.
    pub rate_limit: crate::abuse::Limits,
    /// `[cookies] rotate` with its default.
    pub cookie_rotation: Duration,
}

#[derive(Debug, Clone)]
pub struct DcSpec {
    pub name: String,
    pub country: Option<Country>,
    pub continent: Option<Continent>,
}

/// A check with its defaults applied (seed 002 and 003 defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    pub name: String,
    pub kind: CheckType,
    /// `None` for a template, probed against each address naming it.
    pub target: Option<String>,
    pub port: u16,
    pub interval: Duration,
    pub timeout: Duration,
    pub failures: u32,
    pub successes: u32,
    /// `None` = all devices.
    pub run_on: Option<DcId>,
    pub policy: Policy,
    /// The check as written, for the parameters the probers read.
    pub raw: Check,
}

impl CheckSpec {
    /// Whether `other` is the same check for its state: every field the
    /// same but the datacenter index, which shifts when a datacenter is
    /// added or removed before it (`raw.run_on` names the datacenter).
    pub fn same_check(&self, other: &CheckSpec) -> bool {
        let Self {
            name,
            kind,
            target,
            port,
            interval,
            timeout,
            failures,
            successes,
            run_on: _,
            policy,
            raw,
        } = self;
        *name == other.name
            && *kind == other.kind
            && *target == other.target
            && *port == other.port
            && *interval == other.interval
            && *timeout == other.timeout
            && *failures == other.failures
            && *successes == other.successes
            && *policy == other.policy
            && *raw == other.raw
    }
}

#[derive(Debug, Clone)]
pub struct ScenarioSpec {
    pub name: String,
    pub condition: Expr,
    pub verify: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ZoneSpec {
    /// Lower-case, fully qualified.
    pub apex: Name,
    /// Its serial is the configuration's `soa.serial`, or 1 until
    /// [`ZoneSpec::serial_at`] gives the configuration version.
    pub soa: SOA,
    /// The configuration sets `soa.serial`: the version does not replace it.
    pub serial_set: bool,
    pub soa_ttl: u32,
    pub nameservers: Vec<Name>,
    pub ns_ttl: u32,
    /// Shared between compiles: a record a change did not touch is the
    /// same allocation in the zone before and after it, so the two compare
    /// by pointer ([`same_record`]).
    pub records: Vec<Arc<RecordSpec>>,
    /// How many of `records` are CNAMEs with targets: without one in any
    /// zone there is no chain to follow (`Cx::cname_loops`), and a count
    /// kept per zone says so without reading every record.
    pub cnames: usize,
    /// Signed online, and with which algorithm a new key is made.
    pub dnssec: Option<crate::config::KeyAlgorithm>,
    /// Who may transfer the zone and gets its NOTIFYs (docs/transfer.md).
    pub secondaries: Vec<SecondarySpec>,
    /// A hash of each record's owner ([`ZoneSpec::owner_hashes`]).
    owners: OwnerHashes,
}

/// A secondary server of a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondarySpec {
    pub address: std::net::SocketAddr,
    /// The TSIG key's name (lower case, no final dot).
    pub key: String,
}

impl ZoneSpec {
    /// The zone with `records` instead of its own.
    pub fn with_records(&self, records: Vec<Arc<RecordSpec>>) -> ZoneSpec {
        let ZoneSpec {
            apex,
            soa,
            serial_set,
            soa_ttl,
            nameservers,
            ns_ttl,
            records: _,
            cnames: _,
            dnssec,
            secondaries,
            owners: _,
        } = self;
        ZoneSpec {
            apex: apex.clone(),
            soa: soa.clone(),
            serial_set: *serial_set,
            soa_ttl: *soa_ttl,
            nameservers: nameservers.clone(),
            ns_ttl: *ns_ttl,
            cnames: records.iter().filter(|r| r.is_cname()).count(),
            records,
            dnssec: *dnssec,
            secondaries: secondaries.clone(),
            owners: OwnerHashes::default(),
        }
    }

    /// A hash of each record's owner, in record order ([`owners`]).
    pub fn owner_hashes(&self) -> &[u32] {
        self.owners.of(&self.records)
    }

    /// The zone's name as keys and messages spell it: lower case, no final
    /// dot (`example.test`).
    pub fn key(&self) -> String {
        zone_key(&self.apex)
    }

    /// The SOA serial at configuration `version`: the version, unless the
    /// configuration sets `soa.serial`. A version above `u32::MAX` wraps
    /// (RFC 1982 serial arithmetic: secondaries compare serials modulo
    /// 2^32, so a serial that wraps still reads as newer as long as fewer
    /// than 2^31 versions pass between two of their refreshes).
    pub fn serial_at(&self, version: u64) -> u32 {
        if self.serial_set {
            return self.soa.serial;
        }
        soa_serial(version)
    }
}

/// Whether two compiled records are alike: the same allocation (a record
/// kept from the compile before), or equal.
pub fn same_record(a: &Arc<RecordSpec>, b: &Arc<RecordSpec>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// A zone's name as keys and messages spell it: lower case, no final dot.
pub fn zone_key(apex: &Name) -> String {
    let name = apex.to_lowercase().to_string();
    name.trim_end_matches('.').to_string()
}

/// The SOA serial of configuration `version`: the version modulo 2^32.
pub fn soa_serial(version: u64) -> u32 {
    (version & u64::from(u32::MAX)) as u32
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpec {
    /// Its name in lower-case wire form, `*` first for a wildcard
    /// ([`RecordSpec::owner_name`]): a hickory `Name` is 80 bytes inline.
    pub owner: Box<[u8]>,
    pub kind: RecordType,
    pub ttl: u32,
    pub content: Content,
}

impl RecordSpec {
    /// A CNAME with a target: a link of a chain `Cx::cname_loops` follows.
    pub fn is_cname(&self) -> bool {
        self.kind == RecordType::Cname
            && matches!(&self.content, Content::Steered(s) if !s.addresses.is_empty())
    }

    /// The owner as a name (lower case, fully qualified).
    pub fn owner_name(&self) -> Name {
        key_name(&self.owner)
    }

    /// `www.example.test/A`, the subject of the record's events.
    pub fn label(&self) -> String {
        let owner = self.owner_name().to_string();
        format!("{}/{}", owner.trim_end_matches('.'), self.kind.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// MX, TXT, SRV, CAA: answered as configured.
    Static(Box<[RData]>),
    /// A, AAAA, CNAME: answered by the record resolution logic (the
    /// engine's record holds the whole compiled record).
    Steered(Box<Steering>),
}

/// Everything the record resolution logic needs about one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steering {
    pub mode: ModeSpec,
    pub balance: Balance,
    pub max_answers: u32,
    pub fail_safe: Box<[RData]>,
    pub on_no_healthy: OnNoHealthy,
    pub topology: bool,
    pub addresses: Box<[AddressSpec]>,
}

/// A record's mode. Its disaster recovery is boxed and its datacenter
/// count 32 bits: a record's steering, one per record in its box, fits
/// 64 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeSpec {
    Standalone,
    DisasterRecovery(Box<DrSpec>),
    Datacenter { order: Box<[DcId]>, count: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrSpec {
    pub main: DcId,
    pub dr: DcId,
    pub condition: DrCondition,
    pub on_no_healthy: bool,
    pub failback: Failback,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrCondition {
    Automatic,
    Scenario(Box<str>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressSpec {
    pub value: Value,
    /// Its datacenter ([`AddressSpec::dc`]), as 32 bits.
    dc: Option<u32>,
    pub hc: Hc,
    pub weight: u32,
    /// What most addresses do not have (a CNAME's target, countries,
    /// continents), behind one box: an address of a large configuration
    /// fits 72 bytes.
    more: Option<Box<AddressMore>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct AddressMore {
    target: Option<Box<str>>,
    countries: Box<[Country]>,
    continents: Box<[Continent]>,
}

impl AddressSpec {
    /// An address answering `value`. `target`: a CNAME's target as
    /// written (lower case, no final dot); `None` for an IP, which reads as
    /// itself (see [`AddressSpec::display`]).
    pub fn new(
        value: Value,
        target: Option<Box<str>>,
        dc: Option<DcId>,
        hc: Hc,
        weight: u32,
        countries: Box<[Country]>,
        continents: Box<[Continent]>,
    ) -> Self {
        let more = AddressMore {
            target,
            countries,
            continents,
        };
        Self {
            value,
            dc: dc.and_then(|d| u32::try_from(d).ok()),
            hc,
            weight,
            more: (more != AddressMore::default()).then(|| Box::new(more)),
        }
    }

    /// Its datacenter, if it names one.
    pub fn dc(&self) -> Option<DcId> {
        self.dc.map(|d| d as DcId)
    }

    /// A CNAME's target as written (lower case, no final dot).
    pub fn target(&self) -> Option<&str> {
        self.more.as_ref()?.target.as_deref()
    }

    /// The countries whose clients get this address (topology).
    pub fn countries(&self) -> &[Country] {
        self.more.as_ref().map_or(&[], |m| &m.countries)
    }

    /// The continents whose clients get this address (topology).
    pub fn continents(&self) -> &[Continent] {
        self.more.as_ref().map_or(&[], |m| &m.continents)
    }

    /// The value as operators read it: an IP or a target name.
    pub fn display(&self) -> String {
        match (self.target(), &self.value) {
            (Some(target), _) => target.to_string(),
            (None, Value::A(ip)) => ip.to_string(),
            (None, Value::Aaaa(ip)) => ip.to_string(),
            (None, Value::Other(data)) => data.to_string(),
        }
    }
}

/// The HC field of an address. Each variant holds one thin pointer at
/// most, so that an address fits 64 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hc {
    Static,
    Disabled,
    Scenario(Box<String>),
    /// A template check probed against this address.
    Check(Box<CheckRef>),
}

/// The longest check interval (and so timeout). A result a day old says
/// nothing about health, and the bound keeps schedule arithmetic (start +
/// interval) far from what a clock can hold.
pub const MAX_CHECK_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// Validates a configuration and resolves its defaults.
pub fn compile(config: &Config) -> Result<Compiled, ConfigErrors> {
    compile_from(config, None)
}

/// [`compile`], stopped when `cancel` is set.
pub fn compile_until(config: &Config, cancel: &Cancel) -> Result<Compiled, CheckError> {
    compile_with(config, None, cancel)
}

/// A configuration compiled before, to take unchanged zones from: the
/// configuration and its compiled zones, one per domain in order.
pub type Before<'a> = (&'a Config, &'a [Arc<ZoneSpec>]);

/// [`compile`], taking a domain's zone from `before` as it is when the
/// domain and everything its records read (datacenters, checks,
/// scenarios, services) are the same there.
pub fn compile_from(config: &Config, before: Option<Before>) -> Result<Compiled, ConfigErrors> {
    compile_with(config, before, &Cancel::default()).map_err(CheckError::uncancelled)
}

fn compile_with(
    config: &Config,
    before: Option<Before>,
    cancel: &Cancel,
) -> Result<Compiled, CheckError> {
    let kept: HashMap<&str, (&Arc<Domain>, &Arc<ZoneSpec>)> = match before {
        Some((old, zones)) if old.steers_alike(config) && zones.len() == old.domains.len() => old
            .domains
            .iter()
            .zip(zones)
            .map(|(d, z)| (d.name.as_str(), (d, z)))
            .collect(),
        _ => HashMap::new(),
    };
    let mut cx = Cx {
        errors: Listing::default(),
        cancel: cancel.clone(),
    };
    cx.geoip(config);
    let datacenters = cx.datacenters(config);
    let dc_index: HashMap<&str, DcId> = datacenters
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.as_str(), i))
        .collect();
    let checks = cx.checks(config, &dc_index);
    let check_index: HashMap<&str, &CheckSpec> =
        checks.iter().map(|c| (c.name.as_str(), c)).collect();
    let scenarios = cx.scenarios(config, &check_index);
    let scenario_names: HashSet<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
    cx.services(config);
    let refs = Refs {
        dcs: &dc_index,
        checks: &check_index,
        scenarios: &scenario_names,
    };
    let zones = config
        .domains
        .iter()
        .filter_map(|d| match kept.get(d.name.as_str()) {
            _ if cx.cancel.is_cancelled() => None,
            Some((old, zone)) if *old == d => Some(Arc::clone(zone)),
            before => cx
                .domain(d, &refs, before.map(|(old, zone)| (&***old, &***zone)))
                .map(Arc::new),
        })
        .collect::<Vec<_>>();
    let mut apexes = HashSet::new();
    for z in &zones {
        if !apexes.insert(z.apex.clone()) {
            cx.err(format!("domain {}", z.apex), "is defined twice");
        }
    }
    cancel.check()?;
    cx.cname_loops(&zones);
    let rate_limit = super::abuse::rate_limit(&mut cx.errors, config.rate_limit.as_ref());
    let cookie_rotation = super::abuse::cookie_rotation(&mut cx.errors, config.cookies.as_ref());
    cancel.check()?;
    if cx.errors.is_empty() {
        Ok(Compiled {
            datacenters,
            checks,
            scenarios,
            zones,
            rate_limit,
            cookie_rotation,
        })
    } else {
        Err(cx.errors.finish().into())
    }
}

mod owners;
mod reuse;

use owners::{OwnerHashes, owner_hash};

struct Refs<'a> {
    dcs: &'a HashMap<&'a str, DcId>,
    checks: &'a HashMap<&'a str, &'a CheckSpec>,
    scenarios: &'a HashSet<&'a str>,
}

struct Cx {
    errors: Listing,
    /// Looked at before each domain and record.
    cancel: Cancel,
}

fn unique<'a>(cx: &mut Cx, kind: &str, names: impl Iterator<Item = &'a str>) {
    let mut seen = HashSet::new();
    for name in names {
        if name.trim().is_empty() {
            cx.err(kind.to_string(), "a name is required");
        } else if !seen.insert(name) {
            cx.err(format!("{kind} {name}"), "is defined twice");
        }
    }
}

impl Cx {
    fn err(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError {
            path: path.into(),
            message: message.into(),
        });
    }

    /// `[geoip] source` must be an http(s) URL whose only placeholders are
    /// `{year}` and `{month}`.
    fn geoip(&mut self, config: &Config) {
        let Some(source) = config.geoip.as_ref().and_then(|g| g.source.as_deref()) else {
            return;
        };
        let path = "geoip / source";
        let rest = source
            .strip_prefix("https://")
            .or_else(|| source.strip_prefix("http://"));
        let Some(rest) = rest else {
            self.err(
                path,
                format!("\"{source}\" is not an http:// or https:// URL"),
            );
            return;
        };
        let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if host.is_empty() {
            self.err(path, format!("\"{source}\" has no host"));
        }
        if source.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.err(
                path,
                format!("\"{source}\" contains a space or a control character"),
            );
        }
        let unfilled = source.replace("{year}", "").replace("{month}", "");
        if unfilled.contains('{') || unfilled.contains('}') {
            self.err(
                path,
                format!("\"{source}\": only {{year}} and {{month}} are filled in"),
            );
        }
    }

    /// Refuses CNAMEs that can lead back to themselves through the served
    /// zones (any of their targets, wildcards included): a resolver would
    /// chase such a chain until its limit.
    fn cname_loops(&mut self, zones: &[Arc<ZoneSpec>]) {
        // No chain without a CNAME: skip gathering every name.
        if zones.iter().all(|z| z.cnames == 0) {
            return;
        }
        // Every name that exists, and the CNAME records by owner.
        // Names by their wire forms (an owner's ancestors are its suffixes).
        let apexes: Vec<Box<[u8]>> = zones.iter().map(|z| wire_key(&z.apex)).collect();
        let mut names: HashSet<&[u8]> = apexes.iter().map(|a| &**a).collect();
        let mut cnames: HashMap<&[u8], (usize, &RecordSpec)> = HashMap::new();
        for (zi, z) in zones.iter().enumerate() {
            let apex_len = apexes.get(zi).map_or(0, |a| a.len());
            for r in &z.records {
                // The owner and each ancestor below the apex.
                let mut at = 0;
                while let Some(suffix) = r.owner.get(at..)
                    && suffix.len() > apex_len
                {
                    names.insert(suffix);
                    at += 1 + usize::from(suffix[0]);
                }
                if r.is_cname() {
                    cnames.insert(&r.owner, (zi, r));
                }
            }
        }
        let exists = |n: &Name| names.contains(&*wire_key(n));
        // The CNAME a target leads to, as the query path finds it.
        let next = |target: &Name| -> Option<&[u8]> {
            let zone = zones
                .iter()
                .filter(|z| z.apex.zone_of(target))
                .max_by_key(|z| z.apex.num_labels())?;
            if exists(target) {
                return cnames.get_key_value(&*wire_key(target)).map(|(k, _)| *k);
            }
            let labels = target.iter().count();
            for n in (zone.apex.iter().count()..labels).rev() {
                let ancestor = target.trim_to(n);
                if exists(&ancestor) {
                    let wildcard = wire_key(&ancestor.prepend_label("*").ok()?);
                    return cnames.get_key_value(&*wildcard).map(|(k, _)| *k);
                }
            }
            None
        };
        let targets = |owner: &[u8]| -> Vec<&[u8]> {
            let Some((_, r)) = cnames.get(owner) else {
                return Vec::new();
            };
            let Content::Steered(s) = &r.content else {
                return Vec::new();
            };
            s.addresses
                .iter()
                .filter_map(|a| match &a.value {
                    Value::Other(v) => Some(&**v),
                    _ => None,
                })
                .chain(&s.fail_safe)
                .filter_map(|v| match v {
                    RData::CNAME(c) => next(&c.0),
                    _ => None,
                })
                .collect()
        };
        // Depth-first, iteratively (a chain may be long): a target on the
        // current path closes a loop.
        let mut order: Vec<&[u8]> = cnames.keys().copied().collect();
        order.sort_by_cached_key(|k| key_name(k));
        let mut done: HashSet<&[u8]> = HashSet::new();
        let mut reported: HashSet<&[u8]> = HashSet::new();
        for start in order {
            if done.contains(start) {
                continue;
            }
            let mut path: Vec<(&[u8], Vec<&[u8]>)> = vec![(start, targets(start))];
            let mut on_path: HashSet<&[u8]> = HashSet::from([start]);
            while let Some((node, pending)) = path.last_mut() {
                let node = *node;
                match pending.pop() {
                    Some(t) if on_path.contains(t) => {
                        if reported.insert(t) {
                            let from = path.iter().position(|(n, _)| *n == t).unwrap_or(0);
                            let chain: Vec<String> = path[from..]
                                .iter()
                                .map(|(n, _)| key_name(n).to_string())
                                .chain(std::iter::once(key_name(t).to_string()))
                                .collect();
                            if let Some((zi, r)) = cnames.get(t) {
                                let z = &zones[*zi];
                                let dpath =
                                    format!("domain {}", z.apex.to_string().trim_end_matches('.'));
                                self.err(
                                    record_path(&dpath, &z.apex, r),
                                    format!("CNAME loop: {}", chain.join(" → ")),
                                );
                            }
                        }
                    }
                    Some(t) if !done.contains(t) => {
                        on_path.insert(t);
                        path.push((t, targets(t)));
                    }
                    Some(_) => {}
                    None => {
                        on_path.remove(node);
                        done.insert(node);
                        path.pop();
                    }
                }
            }
        }
    }

    fn datacenters(&mut self, config: &Config) -> Vec<DcSpec> {
        unique(
            self,
            "datacenter",
            config.datacenters.iter().map(|d| d.name.as_str()),
        );
        config
            .datacenters
            .iter()
            .map(|d| {
                let path = format!("datacenter {}", d.name);
                let country = d.country.as_deref().and_then(|c| {
                    let parsed = Country::parse(c);
                    if parsed.is_none() {
                        self.err(
                            &path,
                            format!("country \"{c}\" is not an ISO 3166 two-letter code"),
                        );
                    }
                    parsed
                });
                let continent = d
                    .continent
                    .as_deref()
                    .and_then(|c| self.continent(&path, c));
                DcSpec {
                    name: d.name.clone(),
                    country,
                    continent,
                }
            })
            .collect()
    }

    fn continent(&mut self, path: &str, text: &str) -> Option<Continent> {
        let parsed = Continent::parse(text);
        if parsed.is_none() {
            self.err(
                path,
                format!("continent \"{text}\" is not one of AF, AN, AS, EU, NA, OC, SA"),
            );
        }
        parsed
    }

    fn checks(&mut self, config: &Config, dcs: &HashMap<&str, DcId>) -> Vec<CheckSpec> {
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
                    super::duration::Interval(interval),
                    super::duration::Interval(MAX_CHECK_INTERVAL)
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
                    super::duration::Interval(timeout),
                    super::duration::Interval(interval)
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

    fn scenarios(
        &mut self,
        config: &Config,
        checks: &HashMap<&str, &CheckSpec>,
    ) -> Vec<ScenarioSpec> {
        unique(
            self,
            "scenario",
            config.scenarios.iter().map(|s| s.name.as_str()),
        );
        let mut out = Vec::new();
        for s in &config.scenarios {
            let path = format!("scenario {}", s.name);
            if BUILTIN_SCENARIOS.contains(&s.name.as_str()) {
                self.err(
                    &path,
                    format!("\"{}\" is a built-in scenario; choose another name", s.name),
                );
            }
            let condition = self.condition(&path, "condition", &s.condition, checks);
            let verify = s
                .verify
                .as_deref()
                .map(|v| self.condition(&path, "verify", v, checks));
            if let (Some(condition), Some(verify)) =
                (condition, verify.unwrap_or(Some(Expr::And(vec![]))))
            {
                out.push(ScenarioSpec {
                    name: s.name.clone(),
                    condition,
                    verify: s.verify.as_ref().map(|_| verify),
                });
            }
        }
        out
    }

    fn condition(
        &mut self,
        path: &str,
        key: &str,
        text: &str,
        checks: &HashMap<&str, &CheckSpec>,
    ) -> Option<Expr> {
        let expr = match condition::parse(text) {
            Ok(e) => e,
            Err(e) => {
                self.err(path, format!("{key}: {e}"));
                return None;
            }
        };
        let before = self.errors.len();
        for r in expr.refs() {
            match checks.get(r.name.as_str()) {
                None => self.err(path, format!("{key}: unknown check \"{}\"", r.name)),
                Some(c) => match (&r.address, c.target.is_some() || c.kind == CheckType::Manual) {
                    (Some(_), true) => self.err(
                        path,
                        format!("{key}: check \"{}\" is not a template, so it takes no @address", r.name),
                    ),
                    (None, false) => self.err(
                        path,
                        format!("{key}: check \"{}\" is a template; name the address it probes, e.g. {}@192.0.2.10", r.name, r.name),
                    ),
                    _ => {}
                },
            }
        }
        (self.errors.len() == before).then_some(expr)
    }

    fn services(&mut self, config: &Config) {
        unique(
            self,
            "service",
            config.services.iter().map(|s| s.name.as_str()),
        );
        let domains: HashSet<String> = config.domains.iter().map(|d| normal(&d.name)).collect();
        let mut owner: HashMap<String, &str> = HashMap::new();
        for s in &config.services {
            for d in &s.domains {
                let path = format!("service {}", s.name);
                if !domains.contains(&normal(d)) {
                    self.err(&path, format!("unknown domain \"{d}\""));
                } else if let Some(other) = owner.insert(normal(d), &s.name) {
                    self.err(
                        &path,
                        format!("domain \"{d}\" already belongs to service \"{other}\""),
                    );
                }
            }
        }
    }

    /// A domain's zone. `compiled`: the same domain compiled before (in a
    /// configuration whose datacenters, checks, scenarios and services are
    /// these), whose records' compiled forms are taken where they did not
    /// change.
    fn domain(
        &mut self,
        d: &Domain,
        refs: &Refs,
        compiled: Option<(&Domain, &ZoneSpec)>,
    ) -> Option<ZoneSpec> {
        let path = format!("domain {}", d.name);
        let before = self.errors.len();
        let apex = match fqdn(&d.name, &Name::root()) {
            Ok(n) if !n.is_root() => n,
            Ok(_) => {
                self.err(&path, "the root zone cannot be served");
                return None;
            }
            Err(e) => {
                self.err(&path, e);
                return None;
            }
        };
        let ttl = d.ttl.unwrap_or(DEFAULT_TTL);
        let dc = |cx: &mut Cx, key: &str, name: &Option<String>| -> Option<DcId> {
            let name = name.as_deref()?;
            let id = refs.dcs.get(name).copied();
            if id.is_none() {
                cx.err(&path, format!("{key}: unknown datacenter \"{name}\""));
            }
            id
        };
        let main_dc = dc(self, "main_dc", &d.main_dc);
        let dr_dc = dc(self, "dr_dc", &d.dr_dc);
        if main_dc.is_some() && main_dc == dr_dc {
            self.err(&path, "main_dc and dr_dc must be different datacenters");
        }
        let mut dc_order = Vec::new();
        for name in &d.dc_order {
            match refs.dcs.get(name.as_str()) {
                Some(id) if dc_order.contains(id) => {
                    self.err(&path, format!("dc_order names \"{name}\" twice"))
                }
                Some(id) => dc_order.push(*id),
                None => self.err(&path, format!("dc_order: unknown datacenter \"{name}\"")),
            }
        }
        if d.dcs_to_select == Some(0) {
            self.err(&path, "dcs_to_select must be 1 or more");
        }
        if d.nameservers.is_empty() {
            self.err(
                &path,
                "a domain needs at least one name server: nameservers = [\"ns1.example.test\"]",
            );
        }
        let nameservers: Vec<Name> = d
            .nameservers
            .iter()
            .filter_map(|n| match fqdn(n, &Name::root()) {
                Ok(n) => Some(n),
                Err(e) => {
                    self.err(&path, format!("nameservers: {e}"));
                    None
                }
            })
            .collect();
        let soa_in = d.soa.clone().unwrap_or_default();
        let mname = match &soa_in.mname {
            Some(m) => fqdn(m, &Name::root())
                .map_err(|e| self.err(&path, format!("soa.mname: {e}")))
                .ok(),
            None => nameservers.first().cloned(),
        };
        let rname = match &soa_in.rname {
            Some(r) => fqdn(r, &Name::root())
                .map_err(|e| self.err(&path, format!("soa.rname: {e}")))
                .ok(),
            None => Name::from_ascii("hostmaster")
                .ok()
                .and_then(|h| h.append_domain(&apex).ok()),
        };
        let minimum = soa_in.minimum.unwrap_or(ttl);
        let soa = SOA::new(
            mname.unwrap_or_else(Name::root),
            rname.unwrap_or_else(Name::root),
            soa_in.serial.unwrap_or(1),
            soa_in.refresh.unwrap_or(3600) as i32,
            soa_in.retry.unwrap_or(600) as i32,
            soa_in.expire.unwrap_or(604_800) as i32,
            minimum,
        );
        let secondaries = self.secondaries(&path, d);
        let domain_mode = d.mode.unwrap_or_default();
        let mode_cx = ModeCx {
            main_dc,
            dr_dc,
            dc_order: if dc_order.is_empty() {
                (0..refs.dcs.len()).collect()
            } else {
                dc_order
            },
            dcs_to_select: d.dcs_to_select,
        };
        // The records before and after the changed ones keep their
        // compiled forms.
        let kept = compiled.and_then(|(old, zone)| {
            let (start, end) = reuse::unchanged(d, (old, zone))?;
            Some((zone, start, end))
        });
        let (start, end) = kept.map_or((0, 0), |(_, start, end)| (start, end));
        let changed = d
            .records
            .get(start..d.records.len() - end)
            .unwrap_or_default();
        if let Some((old, zone)) = compiled
            && kept.is_some()
            && reuse::shares_a_kept_name(changed, (old, zone), (start, end), &apex)
        {
            // A changed record with the name and type of a kept one: the
            // whole domain is compiled, so that the error is said as ever.
            self.errors.truncate(before);
            return self.domain(d, refs, None);
        }
        let mut records = Vec::with_capacity(d.records.len());
        // A hash of each record's owner, in record order: the kept
        // records' taken from before, the others' made as they compile.
        let mut hashes = Vec::with_capacity(d.records.len());
        if let Some((zone, start, _)) = kept {
            records.extend(zone.records.iter().take(start).cloned());
            hashes.extend_from_slice(zone.owner_hashes().get(..start).unwrap_or_default());
        }
        let mut keys = HashSet::new();
        for r in changed {
            if self.cancel.is_cancelled() {
                return None;
            }
            let rpath = format!("{path} / record {} {}", r.name, r.kind.as_str());
            if !keys.insert((normal(&r.name), r.kind)) {
                self.err(&rpath, "is defined twice (one record per name and type; list several addresses or values in it)");
                continue;
            }
            if let Some(rec) = self.record(&rpath, r, &apex, ttl, domain_mode, &mode_cx, refs) {
                hashes.push(owner_hash(&rec.owner));
                records.push(Arc::new(rec));
            }
        }
        // The names the changed records are at: only theirs are checked
        // again below (a kept name's records are as they were), found by
        // their owners' hashes.
        let mut touched: Option<Vec<Box<[u8]>>> = None;
        if let Some((zone, start, end)) = kept {
            let changed = records.get(start..).unwrap_or_default();
            touched = Some(changed.iter().map(|c| c.owner.clone()).collect());
            let before = zone.owner_hashes();
            hashes.extend_from_slice(
                before
                    .get(before.len().saturating_sub(end)..)
                    .unwrap_or_default(),
            );
            let after = zone
                .records
                .get(zone.records.len() - end..)
                .unwrap_or_default();
            records.extend(after.iter().cloned());
        }
        let count = |l: &[Arc<RecordSpec>]| l.iter().filter(|r| r.is_cname()).count();
        // Counted over what changed when the rest is kept.
        let cnames = match kept {
            Some((zone, start, end)) => {
                let replaced = zone.records.get(start..zone.records.len() - end);
                let new = records.get(start..records.len() - end);
                (zone.cnames + count(new.unwrap_or_default()))
                    .saturating_sub(count(replaced.unwrap_or_default()))
            }
            None => count(&records),
        };
        let checked: Vec<&RecordSpec> = match &touched {
            None => records.iter().map(|r| &**r).collect(),
            Some(names) => {
                let wanted: Vec<u32> = names.iter().map(|n| owner_hash(n)).collect();
                hashes
                    .iter()
                    .zip(&records)
                    .filter(|(h, r)| wanted.contains(h) && names.contains(&r.owner))
                    .map(|(_, r)| &**r)
                    .collect()
            }
        };
        // Made lazily from the records should they ever disagree (never
        // in a zone this returns: both grow together above).
        let owners = if hashes.len() == records.len() {
            OwnerHashes::given(hashes)
        } else {
            OwnerHashes::default()
        };
        // A CNAME owns its name alone (RFC 1034 §3.6.2).
        let apex_wire = wire_key(&apex);
        let mut by_owner: HashMap<&[u8], Vec<&RecordSpec>> = HashMap::new();
        for &r in &checked {
            by_owner.entry(&r.owner).or_default().push(r);
        }
        // In file order (of each name's first record), for stable errors.
        for owner in checked.iter().map(|r| &*r.owner) {
            let Some(at) = by_owner.remove(owner) else {
                continue;
            };
            if let Some(cname) = at.iter().find(|r| r.kind == RecordType::Cname) {
                let cpath = record_path(&path, &apex, cname);
                if *owner == *apex_wire {
                    self.err(&cpath, "the apex cannot be a CNAME (it holds SOA and NS)");
                } else if at.len() > 1 {
                    let others: Vec<&str> = at
                        .iter()
                        .filter(|r| r.kind != RecordType::Cname)
                        .map(|r| r.kind.as_str())
                        .collect();
                    self.err(
                        &cpath,
                        format!(
                            "{} shares its name; a CNAME must be alone at its name (RFC 1034 §3.6.2)",
                            others.join(", ")
                        ),
                    );
                }
            }
            // Everything at one name must fit one response (an ANY answer).
            let mut total = if *owner == *apex_wire {
                apex_size(&soa, &nameservers)
            } else {
                0
            };
            for r in &at {
                match answer_size(r) {
                    Ok(n) => total += n,
                    Err(e) => self.err(record_path(&path, &apex, r), e),
                }
            }
            if total > MAX_NAME_BYTES {
                let kinds: Vec<&str> = at.iter().map(|r| r.kind.as_str()).collect();
                let what = if at.len() == 1 {
                    record_path(&path, &apex, at[0])
                } else {
                    format!(
                        "{path} / records {} {}",
                        relative(&key_name(owner), &apex),
                        kinds.join(" ")
                    )
                };
                self.err(
                    what,
                    format!(
                        "the records of {} take {total} bytes in an answer; at most {MAX_NAME_BYTES} fit a DNS message (65,535 bytes with the question and overhead)",
                        key_name(owner)
                    ),
                );
            }
        }
        (self.errors.len() == before).then_some(ZoneSpec {
            apex,
            soa,
            serial_set: soa_in.serial.is_some(),
            soa_ttl: ttl,
            nameservers,
            ns_ttl: ttl,
            cnames,
            records,
            dnssec: (d.dnssec == Some(true)).then(|| d.dnssec_algorithm.unwrap_or_default()),
            secondaries,
            owners,
        })
    }

    /// A domain's secondaries: addresses read, key names checked (whether
    /// the keys exist is the cluster's to say: the state machine checks it
    /// against its keys). A pinned `soa.serial` cannot go with them.
    fn secondaries(&mut self, path: &str, d: &Domain) -> Vec<SecondarySpec> {
        let mut out = Vec::with_capacity(d.secondaries.len());
        for (i, s) in d.secondaries.iter().enumerate() {
            let spath = format!("{path} / secondaries[{i}]");
            let address = s.address.parse::<std::net::SocketAddr>().or_else(|_| {
                s.address
                    .parse::<std::net::IpAddr>()
                    .map(|ip| std::net::SocketAddr::new(ip, 53))
            });
            let address = match address {
                Ok(a) => a,
                Err(_) => {
                    self.err(
                        &spath,
                        format!(
                            "address {:?} is not an IP address or IP:port (e.g. \"192.0.2.53\" or \"[2001:db8::53]:5300\")",
                            s.address
                        ),
                    );
                    continue;
                }
            };
            if let Err(e) = crate::names::check_tsig_key_name(&s.key) {
                self.err(&spath, format!("key: {e}"));
                continue;
            }
            if out.iter().any(|o: &SecondarySpec| o.address == address) {
                self.err(&spath, format!("address {address} is listed twice"));
                continue;
            }
            out.push(SecondarySpec {
                address,
                key: s.key.clone(),
            });
        }
        // A transfer's signatures have a week left at least (docs/dnssec.md):
        // a secondary must stop answering before they expire.
        if let Some(expire) = d.soa.as_ref().and_then(|soa| soa.expire)
            && !out.is_empty()
            && d.dnssec == Some(true)
            && expire > SIGNED_EXPIRE_MAX
        {
            self.err(
                format!("{path} / soa.expire"),
                format!("{expire} is over {SIGNED_EXPIRE_MAX} (one week): a secondary of a signed domain would go on serving signatures after they expire (docs/transfer.md)"),
            );
        }
        if !out.is_empty() && d.soa.as_ref().is_some_and(|soa| soa.serial.is_some()) {
            self.err(
                path,
                "soa.serial cannot be set on a domain with secondaries: its serial must move whenever the transferred zone changes (docs/transfer.md)",
            );
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        path: &str,
        r: &Record,
        apex: &Name,
        domain_ttl: u32,
        domain_mode: Mode,
        m: &ModeCx,
        refs: &Refs,
    ) -> Option<RecordSpec> {
        let before = self.errors.len();
        let owner = if &*r.name == "@" {
            apex.clone()
        } else if r.name.ends_with('.') {
            self.err(path, "write the name relative to the domain (\"www\", \"@\" or \"*\"), not as a full name");
            return None;
        } else {
            match fqdn(&r.name, apex) {
                Ok(n) => n,
                Err(e) => {
                    self.err(path, e);
                    return None;
                }
            }
        };
        if r.name.contains('*')
            && !(&*r.name == "*" || (r.name.starts_with("*.") && !r.name[2..].contains('*')))
        {
            self.err(
                path,
                "a wildcard is \"*\" or starts with \"*.\" and has no other \"*\"",
            );
        }
        let ttl = r.ttl.unwrap_or(domain_ttl);
        let content = if r.kind == RecordType::Ns {
            self.err(path, "NS records are not served from records: the apex NS set is the domain's nameservers, and delegation is not supported");
            return None;
        } else if r.kind.is_steerable() {
            if !r.values().is_empty() {
                self.err(
                    path,
                    format!(
                        "{} records take addresses = [...], not values",
                        r.kind.as_str()
                    ),
                );
            }
            Content::Steered(Box::new(self.steering(
                path,
                r,
                apex,
                domain_mode,
                m,
                refs,
            )?))
        } else {
            for (set, key) in [
                (r.options().mode.is_some(), "mode"),
                (r.options().balance.is_some(), "balance"),
                (r.options().max_answers.is_some(), "max_answers"),
                (r.options().dr_condition.is_some(), "dr_condition"),
                (r.options().dr_on_no_healthy.is_some(), "dr_on_no_healthy"),
                (r.options().failback.is_some(), "failback"),
                (!r.options().fail_safe.is_empty(), "fail_safe"),
                (r.options().on_no_healthy.is_some(), "on_no_healthy"),
                (r.options().topology.is_some(), "topology"),
                (!r.addresses.is_empty(), "addresses"),
            ] {
                if set {
                    self.err(path, format!("{key} applies to A, AAAA and CNAME records only; {} records are static and take values = [...]", r.kind.as_str()));
                }
            }
            if r.values().is_empty() {
                self.err(
                    path,
                    "a static record needs values = [...] in zone-file syntax",
                );
            }
            let mut data = Vec::new();
            for (i, v) in r.values().iter().enumerate() {
                match static_rdata(r.kind, v, apex) {
                    Ok(d) => data.push(d),
                    Err(e) => self.err(format!("{path} / value {}", i + 1), e),
                }
            }
            Content::Static(data.into())
        };
        (self.errors.len() == before).then_some(RecordSpec {
            owner: wire_key(&owner),
            kind: r.kind,
            ttl,
            content,
        })
    }

    fn steering(
        &mut self,
        path: &str,
        r: &Record,
        apex: &Name,
        domain_mode: Mode,
        m: &ModeCx,
        refs: &Refs,
    ) -> Option<Steering> {
        let mode = r.options().mode.unwrap_or(domain_mode);
        let balance = r.options().balance.unwrap_or_default();
        if r.addresses.is_empty() {
            self.err(path, "needs at least one address");
        }
        if mode != Mode::DisasterRecovery {
            for (set, key) in [
                (r.options().dr_condition.is_some(), "dr_condition"),
                (r.options().dr_on_no_healthy.is_some(), "dr_on_no_healthy"),
                (r.options().failback.is_some(), "failback"),
            ] {
                if set {
                    self.err(
                        path,
                        format!("{key} applies to disaster-recovery mode only"),
                    );
                }
            }
        }
        let mode_spec = match mode {
            Mode::Standalone => ModeSpec::Standalone,
            Mode::DisasterRecovery => {
                let condition = match r.options().dr_condition.as_deref() {
                    None | Some("automatic") => DrCondition::Automatic,
                    Some(s) => {
                        match s.strip_prefix("scenario:") {
                            Some(name)
                                if refs.scenarios.contains(name)
                                    || BUILTIN_SCENARIOS.contains(&name) =>
                            {
                                DrCondition::Scenario(name.into())
                            }
                            Some(name) => {
                                self.err(
                                    path,
                                    format!("dr_condition: unknown scenario \"{name}\""),
                                );
                                DrCondition::Automatic
                            }
                            None => {
                                self.err(path, format!("dr_condition \"{s}\" is not \"automatic\" or \"scenario:NAME\""));
                                DrCondition::Automatic
                            }
                        }
                    }
                };
                match (m.main_dc, m.dr_dc) {
                    (Some(main), Some(dr)) => ModeSpec::DisasterRecovery(Box::new(DrSpec {
                        main,
                        dr,
                        condition,
                        on_no_healthy: r.options().dr_on_no_healthy.unwrap_or(true),
                        failback: r.options().failback.unwrap_or_default(),
                    })),
                    _ => {
                        self.err(
                            path,
                            "disaster-recovery mode needs main_dc and dr_dc on the domain",
                        );
                        return None;
                    }
                }
            }
            Mode::Datacenter => ModeSpec::Datacenter {
                order: m.dc_order.clone().into(),
                count: u32::try_from(m.dcs_to_select.unwrap_or(1)).unwrap_or(u32::MAX),
            },
        };
        let max_answers = r.options().max_answers.unwrap_or(match balance {
            // A name has one CNAME (RFC 2181 §10.1): several targets are
            // candidates, one is answered.
            _ if r.kind == RecordType::Cname => 1,
            Balance::RoundRobin | Balance::Random => usize::MAX,
            Balance::Weighted | Balance::Priority | Balance::Persist => 1,
        });
        if max_answers == 0 {
            self.err(path, "max_answers must be 1 or more");
        }
        if r.kind == RecordType::Cname && max_answers > 1 {
            self.err(
                path,
                format!("max_answers = {max_answers}: a CNAME answers one target (RFC 2181 §10.1); its several targets are candidates, one of them is answered"),
            );
        }
        let topology = r.options().topology.unwrap_or(false);
        let mut addresses = Vec::with_capacity(r.addresses.len());
        let mut seen = HashSet::new();
        for (i, a) in r.addresses.iter().enumerate() {
            let apath = format!("{path} / address {}", i + 1);
            if let Some(addr) =
                self.address(&apath, r.kind, a, apex, balance, topology, &mode_spec, refs)
            {
                let display = addr.display();
                if seen.contains(&display) {
                    self.err(&apath, format!("{display} is listed twice"));
                } else {
                    seen.insert(display);
                }
                addresses.push(addr);
            }
        }
        let mut fail_safe = Vec::with_capacity(r.options().fail_safe.len());
        for v in &r.options().fail_safe {
            match answer_rdata(r.kind, v) {
                Ok(d) => fail_safe.push(d),
                Err(e) => self.err(path, format!("fail_safe: {e}")),
            }
        }
        Some(Steering {
            mode: mode_spec,
            balance,
            // Beyond 2^32 - 1 candidates, as many as all.
            max_answers: u32::try_from(max_answers).unwrap_or(u32::MAX),
            fail_safe: fail_safe.into(),
            on_no_healthy: r.options().on_no_healthy.unwrap_or_default(),
            topology,
            addresses: addresses.into(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn address(
        &mut self,
        path: &str,
        kind: RecordType,
        a: &Address,
        _apex: &Name,
        balance: Balance,
        topology: bool,
        mode: &ModeSpec,
        refs: &Refs,
    ) -> Option<AddressSpec> {
        let before = self.errors.len();
        let value = match (kind, a.ip, a.target()) {
            (RecordType::Cname, None, Some(t)) => answer_rdata(kind, t),
            (RecordType::Cname, _, _) => {
                Err("a CNAME address needs target = \"name\" (and no ip)".to_string())
            }
            (_, Some(ip), None) => answer_rdata(kind, &ip.to_string()),
            (_, _, Some(_)) => Err(format!("{} addresses take ip, not target", kind.as_str())),
            (_, None, None) => Err("needs ip = \"...\"".to_string()),
        };
        let value = value.map_err(|e| self.err(path, e)).ok();
        let dc = match a.dc() {
            Some(name) => match refs.dcs.get(name) {
                Some(id) => Some(*id),
                None => {
                    self.err(path, format!("unknown datacenter \"{name}\""));
                    None
                }
            },
            None => None,
        };
        match mode {
            ModeSpec::DisasterRecovery(spec) => match dc {
                Some(d) if d == spec.main || d == spec.dr => {}
                Some(_) => self.err(
                    path,
                    "in disaster-recovery mode an address must be in the domain's main_dc or dr_dc",
                ),
                None if a.dc().is_none() => self.err(
                    path,
                    "in disaster-recovery mode every address needs dc = main_dc or dr_dc",
                ),
                None => {}
            },
            ModeSpec::Datacenter { .. } if a.dc().is_none() => {
                self.err(path, "in datacenter mode every address needs dc = \"...\"")
            }
            _ => {}
        }
        let hc = match a.hc() {
            None | Some("static") => Hc::Static,
            Some("disabled") => Hc::Disabled,
            Some(text) => {
                if let Some(name) = text.strip_prefix("scenario:") {
                    if BUILTIN_SCENARIOS.contains(&name) {
                        self.err(path, format!("the built-in scenario \"{name}\" is not offered as an HC; use hc = \"static\" or \"disabled\""));
                    } else if !refs.scenarios.contains(name) {
                        self.err(path, format!("unknown scenario \"{name}\""));
                    }
                    Hc::Scenario(Box::new(name.into()))
                } else if let Some(name) = text.strip_prefix("check:") {
                    match refs.checks.get(name) {
                        None => self.err(path, format!("unknown check \"{name}\"")),
                        Some(c) if c.target.is_some() => self.err(path, format!("check \"{name}\" has a fixed target; use a template check (no target) or name it in a scenario")),
                        Some(_) => {}
                    }
                    let address = match (a.ip, refs.checks.get(name)) {
                        (_, Some(c)) if c.kind == CheckType::Manual => None,
                        (Some(ip), _) => Some(ip),
                        (None, _) => None,
                    };
                    Hc::Check(Box::new(CheckRef {
                        name: name.to_string(),
                        address,
                    }))
                } else {
                    self.err(
                        path,
                        format!(
                            "hc \"{text}\" is not static, disabled, scenario:NAME or check:NAME"
                        ),
                    );
                    Hc::Static
                }
            }
        };
        if a.weight().is_some() && balance != Balance::Weighted {
            self.err(path, "weight applies only with balance = \"weighted\"");
        }
        if (!a.countries().is_empty() || !a.continents().is_empty()) && !topology {
            self.err(
                path,
                "countries and continents apply only with topology = true on the record",
            );
        }
        let countries = a
            .countries()
            .iter()
            .filter_map(|c| {
                let parsed = Country::parse(c);
                if parsed.is_none() {
                    self.err(
                        path,
                        format!("country \"{c}\" is not an ISO 3166 two-letter code"),
                    );
                }
                parsed
            })
            .collect();
        let continents = a
            .continents()
            .iter()
            .filter_map(|c| self.continent(path, c))
            .collect();
        let value = value?;
        (self.errors.len() == before).then(|| {
            let target = match (&a.ip, a.target()) {
                (None, Some(t)) => Some(t.trim_end_matches('.').to_ascii_lowercase().into()),
                _ => None,
            };
            let weight = a.weight().unwrap_or(1);
            AddressSpec::new(
                Value::from(value),
                target,
                dc,
                hc,
                weight,
                countries,
                continents,
            )
        })
    }
}

struct ModeCx {
    main_dc: Option<DcId>,
    dr_dc: Option<DcId>,
    dc_order: Vec<DcId>,
    dcs_to_select: Option<usize>,
}

fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A lower-case absolute name: `name` as is when it ends in a dot, else
/// relative to `origin`.
fn fqdn(name: &str, origin: &Name) -> Result<Name, String> {
    let parsed =
        Name::from_ascii(name).map_err(|e| format!("\"{name}\" is not a valid DNS name: {e}"))?;
    let full = if parsed.is_fqdn() || origin.is_root() {
        let mut p = parsed;
        p.set_fqdn(true);
        p
    } else {
        parsed
            .append_domain(origin)
            .map_err(|e| format!("\"{name}\" is too long: {e}"))?
    };
    Ok(full.to_lowercase())
}

/// The data of an A, AAAA or CNAME answer.
fn answer_rdata(kind: RecordType, value: &str) -> Result<RData, String> {
    match kind {
        RecordType::A => match IpAddr::from_str(value) {
            Ok(IpAddr::V4(v4)) => Ok(RData::A(A(v4))),
            _ => Err(format!(
                "\"{value}\" is not an IPv4 address, as an A record needs"
            )),
        },
        RecordType::Aaaa => match IpAddr::from_str(value) {
            Ok(IpAddr::V6(v6)) => Ok(RData::AAAA(AAAA(v6))),
            _ => Err(format!(
                "\"{value}\" is not an IPv6 address, as an AAAA record needs"
            )),
        },
        // Targets are full names, with or without the final dot.
        RecordType::Cname => Ok(RData::CNAME(CNAME(fqdn(value, &Name::root())?))),
        other => Err(format!("{} is not an answer type", other.as_str())),
    }
}

/// Parses one static value in zone-file syntax with hickory's zone parser.
fn static_rdata(kind: RecordType, value: &str, apex: &Name) -> Result<RData, String> {
    use hickory_server::proto::serialize::txt::Parser;
    let line = format!("@ 60 IN {} {}\n", kind.as_str(), value);
    let (_, sets) = Parser::new(line, None, Some(apex.clone()))
        .parse()
        .map_err(|e| format!("\"{value}\" is not valid {} data: {e}", kind.as_str()))?;
    let data = sets
        .into_values()
        .flat_map(|set| {
            set.records_without_rrsigs()
                .map(|r| r.data.clone())
                .collect::<Vec<_>>()
        })
        .next()
        .ok_or_else(|| format!("\"{value}\" holds no {} data", kind.as_str()))?;
    Ok(match data {
        // RFC 1035 §3.3.14: one or more strings; an empty RDATA does not
        // decode at the other end.
        RData::TXT(txt) if txt.txt_data.is_empty() => {
            return Err(format!(
                "\"{value}\" holds no TXT string; write '\"\"' for one empty string"
            ));
        }
        RData::TXT(txt) if txt.txt_data.iter().any(|s| s.len() > MAX_CHARACTER_STRING) => {
            RData::TXT(split_txt(&txt))
        }
        other => other,
    })
}

/// A TXT value with each string longer than 255 bytes split into
/// consecutive 255-byte character-strings, as a DKIM key is published:
/// readers concatenate them (RFC 7208 §3.3, RFC 6376 §3.6.2.2).
fn split_txt(txt: &TXT) -> TXT {
    let parts: Vec<&[u8]> = txt
        .txt_data
        .iter()
        .flat_map(|s| {
            let chunks: Vec<&[u8]> = if s.is_empty() {
                vec![&s[..]]
            } else {
                s.chunks(MAX_CHARACTER_STRING).collect()
            };
            chunks
        })
        .collect();
    TXT::from_bytes(parts)
}

/// `domain example.test / record www CNAME`, the path of a compiled record.
fn record_path(domain_path: &str, apex: &Name, r: &RecordSpec) -> String {
    format!(
        "{domain_path} / record {} {}",
        relative(&r.owner_name(), apex),
        r.kind.as_str()
    )
}

/// A name as written in a record: relative to the apex, `@` for the apex.
fn relative(owner: &Name, apex: &Name) -> String {
    let labels = owner.iter().count().saturating_sub(apex.iter().count());
    if labels == 0 {
        return "@".to_string();
    }
    let full = owner.to_string();
    let apex = apex.to_string();
    full.strip_suffix(&apex)
        .map(|s| s.trim_end_matches('.').to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or(full)
}

/// Bytes one record takes in an answer: its owner compressed to a pointer
/// (the question, or the CNAME that led to it), type, class, TTL, length
/// and its data uncompressed. Fails when the data does not encode.
fn record_size(data: &RData) -> Result<usize, String> {
    use hickory_server::proto::serialize::binary::{BinDecoder, BinEncodable, Restrict};
    let bytes = data
        .to_bytes()
        .map_err(|e| format!("{} data does not encode: {e}", data.record_type()))?;
    let Ok(length) = u16::try_from(bytes.len()) else {
        return Err(format!(
            "{} data of {} bytes is longer than a record can hold (65,535)",
            data.record_type(),
            bytes.len()
        ));
    };
    // What is sent must read back as it was meant: hickory writes some data
    // its own reader refuses (a CAA tag with a quote in it).
    let mut decoder = BinDecoder::new(&bytes);
    match RData::read(&mut decoder, data.record_type(), Restrict::new(length)) {
        Ok(read) if read == *data => {}
        Ok(_) => {
            return Err(format!(
                "{} data does not read back as written",
                data.record_type()
            ));
        }
        Err(e) => {
            return Err(format!(
                "{} data does not read back: {e}",
                data.record_type()
            ));
        }
    }
    Ok(2 + 10 + bytes.len())
}

/// The most bytes a record's answer can take: all its values, or for a
/// steered record the `max_answers` largest of its addresses (or of its
/// fail-safe values), whichever health leads to.
fn answer_size(r: &RecordSpec) -> Result<usize, String> {
    match &r.content {
        Content::Static(data) => data.iter().map(record_size).sum(),
        Content::Steered(s) => {
            let largest = |values: &mut dyn Iterator<Item = RData>| -> Result<usize, String> {
                let mut sizes = values
                    .map(|v| record_size(&v))
                    .collect::<Result<Vec<_>, _>>()?;
                sizes.sort_unstable_by(|a, b| b.cmp(a));
                Ok(sizes.iter().take(s.max_answers as usize).sum())
            };
            let addresses = largest(&mut s.addresses.iter().map(|a| a.value.rdata()))?;
            let fail_safe = largest(&mut s.fail_safe.iter().cloned())?;
            Ok(addresses.max(fail_safe))
        }
    }
}

/// The SOA and NS records at an apex.
fn apex_size(soa: &SOA, nameservers: &[Name]) -> usize {
    let soa = record_size(&RData::SOA(soa.clone())).unwrap_or(0);
    let ns: usize = nameservers.iter().map(|n| 2 + 10 + n.len() + 1).sum();
    soa + ns
}

/// A set of HTTP status codes: `200-399`, `200,204`, `200-299,304`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSet(pub Vec<(u16, u16)>);

impl StatusSet {
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|(lo, hi)| (*lo..=*hi).contains(&status))
    }
}

pub fn parse_status_set(text: &str) -> Result<StatusSet, String> {
    let mut ranges = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let code = |s: &str| -> Result<u16, String> {
            match s.trim().parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => Ok(c),
                _ => Err(format!(
                    "\"{s}\" in \"{text}\" is not an HTTP status (100-599)"
                )),
            }
        };
        let (lo, hi) = (code(lo)?, code(hi)?);
        if lo > hi {
            return Err(format!("range \"{part}\" runs backwards"));
        }
        ranges.push((lo, hi));
    }
    Ok(StatusSet(ranges))
}

#[cfg(test)]
mod tests;
