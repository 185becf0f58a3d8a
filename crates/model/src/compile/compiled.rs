//! The compiled configuration: what [`compile`](super::compile) gives,
//! the only form the resolver and the DNS path read.

use std::{sync::Arc, time::Duration};

use hickory_server::proto::rr::{Name, RData, rdata::SOA};

use super::owners::OwnerHashes;
use crate::{
    condition::{CheckRef, Expr},
    config::{Balance, Check, CheckType, Failback, OnNoHealthy, Policy, RecordType},
    names::key_name,
    place::{Continent, Country},
    value::Value,
};

/// Index of a datacenter in [`Compiled::datacenters`].
pub type DcId = usize;

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
    /// The regions and the places topology rules name, and the
    /// classification of client addresses by them.
    pub topology: Arc<crate::topology::Topology>,
    /// The views, in the order they are tried (docs/views.md); a zone's
    /// [`ZoneView::index`] counts from 1 in this list.
    pub views: Vec<ViewSpec>,
    /// The rule set of the views' client places in `topology`.
    pub view_set: u32,
}

/// A view: the clients its matchers hold are answered from its zones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSpec {
    pub name: String,
    /// Its client places: matchers of [`Compiled::topology`].
    pub matchers: Box<[u32]>,
}

/// What makes a zone a view's (docs/views.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneView {
    /// The view's place in [`Compiled::views`], counted from 1 (0 is the
    /// zone every other client gets).
    pub index: u16,
    pub name: Box<str>,
    /// The records of the domain's zone for every client that this view
    /// answers too (those at names the view has no record at), the same
    /// allocations: one record, one answer, in both. Empty for a domain
    /// that is the view's alone.
    pub inherited: Vec<Arc<RecordSpec>>,
}

#[derive(Debug, Clone)]
pub struct DcSpec {
    pub name: String,
    pub country: Option<Country>,
    pub continent: Option<Continent>,
    /// Where it is, for nearest by distance.
    pub location: Option<crate::place::Coordinates>,
    /// −99 to 99: a client's distance to it counts `1 − bias/100` times.
    pub bias: i32,
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
    pub(super) owners: OwnerHashes,
    /// The view whose clients alone get this zone; `None`: every client
    /// outside the views that have a zone of this name.
    pub view: Option<Box<ZoneView>>,
    /// Its delegation points: the names its NS records hand to child
    /// zones (`delegation::cut_of` finds the one above a name).
    pub cuts: super::delegation::Cuts,
    /// Its alias records by name (lower-case wire form) and type: their
    /// answers are their targets' under another name, so signed anew.
    pub aliased: std::collections::BTreeSet<(Box<[u8]>, crate::config::RecordType)>,
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
            view,
            cuts,
            aliased,
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
            view: view.clone(),
            cuts: cuts.clone(),
            aliased: aliased.clone(),
        }
    }

    /// The delegation point at or above the name `key` (lower-case wire
    /// form), if the name is delegated.
    pub fn cut_of<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        super::delegation::cut_of(&self.cuts, key)
    }

    /// Whether the record of type `kind` at the name `key` (lower-case
    /// wire form) is an alias.
    pub fn is_alias(&self, key: &[u8], kind: crate::config::RecordType) -> bool {
        !self.aliased.is_empty() && self.aliased.contains(&(Box::from(key), kind))
    }

    /// A hash of each record's owner, in record order ([`owners`](super::owners)).
    pub fn owner_hashes(&self) -> &[u32] {
        self.owners.of(&self.records)
    }

    /// The zone's name as keys and messages spell it: lower case, no final
    /// dot (`example.test`), and a view's zone with its view's name after
    /// `@` (`example.test@internal`).
    pub fn key(&self) -> String {
        match &self.view {
            None => zone_key(&self.apex),
            Some(v) => format!("{}@{}", zone_key(&self.apex), v.name),
        }
    }

    /// The view whose zone this is: its index (0: none) and name.
    pub fn view_index(&self) -> u16 {
        self.view.as_ref().map_or(0, |v| v.index)
    }

    /// The records a query finds in the zone: its own and, in a view's
    /// zone, those it takes from the zone every client gets.
    pub fn all_records(&self) -> impl Iterator<Item = &Arc<RecordSpec>> + '_ {
        self.records
            .iter()
            .chain(self.view.iter().flat_map(|v| v.inherited.iter()))
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
        self.kind == RecordType::CNAME
            && matches!(&self.content, Content::Steered(s) if !s.addresses.is_empty())
    }

    /// The owner as a name (lower case, fully qualified).
    pub fn owner_name(&self) -> Name {
        key_name(&self.owner)
    }

    /// `www.example.test/A`, the subject of the record's events; a view's
    /// record with its view after `@` (`www.example.test/A@internal`).
    pub fn label(&self) -> String {
        let owner = self.owner_name().to_string();
        let owner = owner.trim_end_matches('.');
        match self.view() {
            None => format!("{owner}/{}", self.kind.as_str()),
            Some(view) => format!("{owner}/{}@{view}", self.kind.as_str()),
        }
    }

    /// The view of a steered record in a view's zone.
    pub fn view(&self) -> Option<&str> {
        match &self.content {
            Content::Steered(s) => s.extra.as_deref()?.view.as_deref(),
            Content::Static(_) | Content::Alias(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// MX, TXT, SRV, CAA: answered as configured.
    /// (Boxed twice: with three variants, a thin pointer each keeps the
    /// record at 40 bytes.)
    Static(Box<Box<[RData]>>),
    /// A, AAAA, CNAME: answered by the record resolution logic (the
    /// engine's record holds the whole compiled record).
    Steered(Box<Steering>),
    /// An A or AAAA record answered with the answer of the record of the
    /// same type at another name of the same zone.
    Alias(Box<AliasTarget>),
}

/// The name (lower-case wire form) whose record an alias answers with;
/// behind a box so that a record keeps its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasTarget(pub Box<[u8]>);

/// Everything the record resolution logic needs about one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steering {
    pub mode: ModeSpec,
    pub balance: Balance,
    pub max_answers: u32,
    pub on_no_healthy: OnNoHealthy,
    pub topology: bool,
    /// Clients no rule answers go to the nearest datacenter with a
    /// candidate (docs/topology.md).
    pub nearest: bool,
    pub addresses: Box<[AddressSpec]>,
    /// Its fail-safe values and topology rules, absent when it has
    /// neither (most records): 8 bytes for both.
    pub extra: Option<Box<Extra>>,
}

impl Steering {
    /// The records answered when no address is a candidate.
    pub fn fail_safe(&self) -> &[RData] {
        self.extra.as_deref().map_or(&[], |e| &e.fail_safe)
    }

    /// The record's topology rules (or its domain's), in the order
    /// written.
    pub fn rules(&self) -> &[RuleSpec] {
        self.extra.as_deref().map_or(&[], |e| &e.rules)
    }

    /// The rule set of its rules.
    pub fn rule_set(&self) -> u32 {
        self.extra.as_deref().map_or(0, |e| e.rule_set)
    }
}

/// What a steered record sets beyond its addresses and mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extra {
    pub fail_safe: Box<[RData]>,
    pub rules: Box<[RuleSpec]>,
    /// The rule set its rules are of (their places' classification of
    /// client addresses in [`Compiled::topology`]).
    pub rule_set: u32,
    /// The view of a record in a view's zone (its label names it).
    pub view: Option<Box<str>>,
}

impl Extra {
    /// `fail_safe`, `rules` and `view` boxed, or `None` when all are empty.
    pub fn of(
        fail_safe: Box<[RData]>,
        rules: Box<[RuleSpec]>,
        rule_set: u32,
        view: Option<Box<str>>,
    ) -> Option<Box<Self>> {
        (!fail_safe.is_empty() || !rules.is_empty() || view.is_some()).then(|| {
            Box::new(Self {
                fail_safe,
                rules,
                rule_set,
                view,
            })
        })
    }
}

/// A topology rule (docs/topology.md): clients the matcher holds are
/// answered from the target's addresses when some are candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// Its client place: a matcher of [`Compiled::topology`].
    pub matcher: u32,
    pub target: RuleTarget,
    pub weight: u32,
}

/// What a topology rule answers from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleTarget {
    /// The addresses of a datacenter.
    Datacenter(DcId),
    /// The addresses of a group: those whose group is that of the
    /// address at this index (the group's first).
    Group(u32),
    /// One address of the record (an index into its addresses).
    Address(u32),
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
    group: Option<Box<str>>,
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
            group: None,
        };
        Self {
            value,
            dc: dc.and_then(|d| u32::try_from(d).ok()),
            hc,
            weight,
            more: (more != AddressMore::default()).then(|| Box::new(more)),
        }
    }

    /// The address in the group `group` of the record's addresses.
    pub fn in_group(mut self, group: Option<Box<str>>) -> Self {
        if group.is_some() {
            self.more.get_or_insert_with(Box::default).group = group;
        }
        self
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

    /// The group of the record's addresses it is in (topology rules).
    pub fn group(&self) -> Option<&str> {
        self.more.as_ref()?.group.as_deref()
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
