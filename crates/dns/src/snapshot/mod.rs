//! The answers a device gives, ready for the query path.
//!
//! A [`Snapshot`] is built once per configuration: every name of every zone,
//! with a slot per record type. The slot of a steered record holds its
//! current [`RrsetAnswer`] behind an `ArcSwap`, so a health change replaces
//! one record's answer without touching anything else, and a query reads it
//! without a lock. Each answer is kept twice: as hickory records for the
//! general path, and as encoded wire bytes per balance variant for the fast
//! path (see `fast`).

use std::{
    collections::{HashMap, HashSet},
    fmt,
    net::IpAddr,
    sync::Arc,
};

use arc_swap::ArcSwap;
use hickory_server::proto::{
    ProtoError,
    op::Query,
    rr::{Name, RData, Record, RecordType as Rt, rdata::SOA},
    serialize::binary::{BinEncodable, BinEncoder},
};

use super::{counters::Counters, wire::Ecs};
use gtm_model::names::{key_name, wire_key};
use gtm_model::topology::Topology;

use crate::{
    chunked::Chunked,
    dnssec::signer::{SignError, ZoneSigner},
};
use gtm_geo::{Geo, Located, is_private};
use gtm_model::{
    compile::{Compiled, Content, RecordSpec, Steering, ZoneSpec},
    config::Balance,
    value::Value,
};
use gtm_resolve::{
    Answer, NearAnswer, NearChoice, PlaceAnswers, PlaceKey, RuleAnswer, RuleChoice, Steer,
    nearest_for, place_entry, place_group, rule_for,
};

mod adopt;
mod build;
mod choose;
mod derive;
mod encode;
mod nodes;
mod variants;

pub use variants::Variants;

use nodes::Nodes;
// The files of this module see each other's items through `super::*`.
pub use {build::*, choose::*, encode::*};

#[cfg(test)]
mod tests;

/// Everything the DNS path serves, for one configuration.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub zones: Vec<ZoneData>,
    /// Each zone by its apex's lower-case wire form, and the label counts
    /// of the apexes, most first: a name's zone is found by its suffixes.
    apexes: HashMap<Box<[u8]>, usize>,
    apex_depths: Vec<usize>,
    /// The index after each zone's last steered slot, counting the slots
    /// of all zones in zone order ([`Snapshot::steered_slot`]).
    steered_ends: Vec<usize>,
    /// The configuration's regions and rule places: what the topology
    /// rules of its answers name.
    pub topology: Arc<gtm_model::topology::Topology>,
    /// The datacenters' names, by their index in the configuration: what
    /// a steered answer's words name (dnstap).
    pub datacenters: Arc<[String]>,
    /// The views, in the order tried, and their rule set in `topology`
    /// (docs/views.md).
    pub views: Arc<[gtm_model::compile::ViewSpec]>,
    view_set: u32,
    /// Per view (the first is view 1): its zones by apex, found before
    /// the zones of `apexes` at each depth.
    view_apexes: Box<[HashMap<Box<[u8]>, usize>]>,
    /// The apexes some view has a zone of: only a name under one of them
    /// needs its client's view decided.
    viewed_apexes: HashSet<Box<[u8]>>,
}

#[derive(Debug)]
pub struct ZoneData {
    /// What the zone was built from, and the SOA serial it was built with.
    pub spec: Arc<ZoneSpec>,
    pub serial: u32,
    /// Its steered records' slots, in record order: shared, chunk by
    /// chunk, with the zone it was kept or derived from.
    pub steered: Chunked<Arc<RrsetSlot>>,
    /// The names and types of its steered records, in order, as a hash
    /// ([`Snapshot::steered_order`]).
    steered_order: u64,
    /// The index of the zone in the snapshot this one was built from,
    /// when it was taken from there whole (nodes and slots shared).
    pub kept_from: Option<usize>,
    /// The same, when it was built from there changed: the slots of the
    /// records before and after the change are shared.
    pub derived_from: Option<usize>,
    pub apex: Name,
    /// Labels of the apex, to find the zone of a name by its suffix.
    pub apex_labels: usize,
    /// Its answers depend on the client's view: it is a view's zone, or a
    /// view has a zone of the same name (the answer's ECS scope covers
    /// the view's decision).
    pub viewed: bool,
    /// The SOA record with the negative-caching TTL, for authority sections.
    pub negative_soa: Record,
    /// The last bytes of its encoding (serial to minimum): every NODATA
    /// body of the zone ends with them (a node holds the rest), so a new
    /// serial leaves the nodes as they are.
    pub nodata_tail: [u8; NODATA_TAIL],
    /// A signed zone's signer, and the RRSIG of `negative_soa`.
    pub signer: Option<Arc<ZoneSigner>>,
    pub negative_soa_sig: Option<Record>,
    /// Every name of the zone that exists (including empty non-terminals),
    /// keyed by its lower-case wire form, in shards. Shared: a zone kept
    /// from the snapshot before takes them as they are, one derived from
    /// it copies the shards it changes, and dropping that snapshot frees
    /// only what it did not share.
    nodes: Nodes,
}

impl ZoneData {
    /// The node of a name of this zone.
    pub fn node(&self, wire_name: &[u8]) -> Option<&Node> {
        self.nodes.get(wire_name)
    }
}

/// A name of a zone. Its name is its key in the zone's map (a name is kept
/// once: [`key_name`] gives it back).
#[derive(Debug, Clone)]
pub struct Node {
    pub rrsets: Vec<Arc<RrsetSlot>>,
    /// Wire body of a NODATA answer for this name, but for its last bytes,
    /// which are its zone's ([`ZoneData::nodata_tail`]). Shared between the
    /// names whose bodies are the same bytes (most of a zone's: the SOA's
    /// names point into the question's).
    pub nodata_wire: Arc<[u8]>,
    /// In a signed zone: the NODATA answer's proof, the NSEC of the name's
    /// types and its RRSIG as records (the zone's SOA and RRSIG go before
    /// them), and the whole authority section (SOA, RRSIG, NSEC, RRSIG) as
    /// wire bytes. Boxed: most zones are not signed.
    pub signed_nodata: Option<Box<Signed>>,
}

/// Signed records ready for both answer paths: hickory records for the
/// general path, and their encoding after a question for the fast path
/// (the owner a pointer to the question).
#[derive(Debug, Clone)]
pub struct Signed {
    pub records: Vec<Record>,
    pub wire: Box<[u8]>,
}

impl Signed {
    fn new(owner: &Name, records: Vec<Record>) -> Result<Self, ProtoError> {
        let (wire, _, _) = encode_body(owner, &records, &[])?;
        Ok(Self { records, wire })
    }
}

/// One record (name and type) and its current answer.
#[derive(Debug)]
pub struct RrsetSlot {
    pub rtype: Rt,
    pub answer: ArcSwap<RrsetAnswer>,
    /// The responses whose answer section held this record, and a steered
    /// record's addresses (candidates, then fail-safe values) with the
    /// responses that carried each (none for a static record); carried
    /// from one configuration to the next while the record stays.
    pub counters: Counters,
    /// The signer of its zone, when signed: a new steered answer is signed
    /// with it.
    pub signer: Option<Arc<ZoneSigner>>,
}

impl RrsetSlot {
    /// A steered record's slot (a static record's counts no address).
    #[inline]
    pub fn is_steered(&self) -> bool {
        self.counters.address_count() > 0
    }

    /// Counts one response whose answer topology rule `rule` decided
    /// (`NO_RULE`: none did).
    #[inline]
    pub fn count_rule(&self, rule: u32) {
        if let Some(c) = self.counters.rules().get(rule as usize) {
            c.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Counts one response carrying variant `v` of `group`, an answer of
    /// this slot: the record, and each address sent.
    #[inline]
    pub fn count(&self, group: &Group, v: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.counters.answers().fetch_add(1, Relaxed);
        let addresses = self.counters.addresses();
        for i in group.sources(v) {
            if let Some(c) = addresses.get(i) {
                c.count.fetch_add(1, Relaxed);
            }
        }
    }
}

/// The answer of one record for every place and balance variant.
#[derive(Debug)]
pub struct RrsetAnswer {
    pub balance: Balance,
    /// The index of the default group ([`RrsetAnswer::default_group`]), in
    /// 32 bits: with its `Arc`, an answer fits 48 bytes.
    default: u32,
    /// Its place table and topology rules, absent when it has neither
    /// (most records).
    steer: Option<Box<Steer>>,
    pub groups: Box<[Group]>,
}

impl RrsetAnswer {
    /// The index in `groups` of the group a client of no particular place
    /// is answered from.
    pub fn default_group(&self) -> usize {
        self.default as usize
    }

    /// The places with an answer of their own, and their groups.
    pub fn places(&self) -> &[(PlaceKey, usize)] {
        self.steer.as_deref().map_or(&[], |s| &s.places)
    }

    /// The topology rules, with their groups.
    pub fn rules(&self) -> &[RuleAnswer] {
        self.steer.as_deref().map_or(&[], |s| &s.rules)
    }

    /// The rule set of its rules.
    pub fn rule_set(&self) -> u32 {
        self.steer.as_deref().map_or(0, |s| s.rule_set)
    }

    /// The datacenters it answers from by distance, with their groups.
    pub fn nearest(&self) -> &[NearAnswer] {
        self.steer.as_deref().map_or(&[], |s| &s.nearest)
    }
}

/// The answer for the clients of one place. Its lists are boxed slices,
/// each at its length, and what most groups lack is behind one box: a
/// large zone holds a group per record, in 48 bytes.
#[derive(Debug)]
pub struct Group {
    /// Candidates in order, the data of records of the slot's name with
    /// `ttl`; variant `i` answers them rotated to start at `i`.
    pub values: Box<[Value]>,
    pub ttl: u32,
    pub max_answers: u32,
    /// Per variant: the encoded answer section and its record count.
    pub wire: Variants,
    /// None for a group of one candidate, counted at its own index, in an
    /// unsigned zone (most groups).
    more: Option<Box<GroupMore>>,
}

/// What a group of more than one candidate, or one counted elsewhere, or
/// one in a signed zone holds besides.
#[derive(Debug, Default)]
struct GroupMore {
    /// With more than one candidate: per candidate its cumulative weight
    /// (weighted balance), then per candidate a key for rendezvous
    /// hashing (persist balance); empty otherwise ([`Group::cumulative`],
    /// [`Group::keys`]).
    spread: Box<[u64]>,
    /// Per candidate: the index of its counter in the slot's `addresses`,
    /// when that is not its own index ([`Group::sources`]); empty when
    /// each candidate's counter is at its own index, and for a static
    /// record, whose slot has no counters.
    sources: Box<[u32]>,
    /// In a signed zone, per variant: the RRSIG over exactly its records
    /// ([`Group::sigs`]); empty when unsigned.
    signatures: Box<[Signed]>,
    /// Its values are the record's fail-safe values ([`Group::is_fail_safe`]).
    fail_safe: bool,
}

impl Group {
    fn spread(&self) -> &[u64] {
        self.more.as_ref().map_or(&[], |m| &m.spread)
    }

    /// The cumulative weights of the candidates (empty for one).
    pub fn cumulative(&self) -> &[u64] {
        let spread = self.spread();
        spread.get(..spread.len() / 2).unwrap_or_default()
    }

    /// The rendezvous keys of the candidates (empty for one).
    pub fn keys(&self) -> &[u64] {
        let spread = self.spread();
        spread.get(spread.len() / 2..).unwrap_or_default()
    }

    /// The records of variant `v`, with `owner` as their name.
    pub fn variant<'a>(&'a self, owner: &'a Name, v: usize) -> impl Iterator<Item = Record> + 'a {
        picked(self.values.len(), self.max_answers as usize, v)
            .map(move |i| self.values[i].record(owner, self.ttl))
    }

    /// The values of variant `v`, in answer order.
    pub fn variant_values(&self, v: usize) -> impl Iterator<Item = &Value> + '_ {
        picked(self.values.len(), self.max_answers as usize, v).filter_map(|i| self.values.get(i))
    }

    /// In a signed zone, per variant: the RRSIG over exactly its records.
    /// Empty when unsigned.
    pub fn sigs(&self) -> &[Signed] {
        self.more.as_ref().map_or(&[], |m| &m.signatures)
    }

    /// Answers nothing (a steered record with nothing to answer).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Answers a steered record's fail-safe values: none of its addresses
    /// is healthy (the response says so, `ede`).
    #[inline]
    pub fn is_fail_safe(&self) -> bool {
        self.more.as_ref().is_some_and(|m| m.fail_safe)
    }

    /// The first candidate as a record of `owner` (an SOA slot's SOA).
    pub fn first(&self, owner: &Name) -> Option<Record> {
        Some(self.values.first()?.record(owner, self.ttl))
    }

    /// The counter indexes of the records of variant `v`: the index of
    /// each among the record's addresses, then its fail-safe values.
    pub(crate) fn sources(&self, v: usize) -> impl Iterator<Item = usize> {
        let sources: &[u32] = self.more.as_ref().map_or(&[], |m| &m.sources);
        picked(self.values.len(), self.max_answers as usize, v).filter_map(move |i| {
            match sources.is_empty() {
                true => Some(i),
                false => sources.get(i).map(|&s| s as usize),
            }
        })
    }
}

impl Snapshot {
    /// How many steered records the zones have, all together.
    pub fn steered_len(&self) -> usize {
        self.steered_ends.last().copied().unwrap_or(0)
    }

    /// The slot of steered record `i`, counting the steered records of
    /// every zone in zone and record order (the engine's order).
    pub fn steered_slot(&self, i: usize) -> Option<&Arc<RrsetSlot>> {
        let zi = self.steered_ends.partition_point(|&end| end <= i);
        let start = self.steered_range(zi)?.start;
        self.zones.get(zi)?.steered.get(i - start)
    }

    /// The indices of zone `zi`'s steered records among all of them.
    pub fn steered_range(&self, zi: usize) -> Option<std::ops::Range<usize>> {
        let end = *self.steered_ends.get(zi)?;
        let start = zi
            .checked_sub(1)
            .map_or(Some(0), |z| self.steered_ends.get(z).copied())?;
        Some(start..end)
    }

    /// Every steered record's slot, in zone and record order.
    pub fn steered_slots(&self) -> impl Iterator<Item = &Arc<RrsetSlot>> + '_ {
        self.zones.iter().flat_map(|z| z.steered.iter())
    }

    /// The names and types of the steered records in order (those of
    /// [`Snapshot::steered_slots`]), as a hash: equal for two snapshots
    /// whose steered records are the same list.
    pub fn steered_order(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.steered_len().hash(&mut h);
        for zone in &self.zones {
            zone.steered_order.hash(&mut h);
        }
        h.finish()
    }

    /// The SOA serial of each zone, in order.
    pub fn serials(&self) -> Vec<u32> {
        self.zones.iter().map(|z| z.serial).collect()
    }

    /// The innermost zone holding a name given as its lower-case wire
    /// form: its index in `zones` (the zone every client outside the views
    /// gets).
    pub fn zone_at(&self, wire_name: &[u8]) -> Option<usize> {
        self.zone_in(wire_name, 0)
    }

    /// [`Snapshot::zone_at`] for the clients of view `view` (0: of none):
    /// at each depth, the view's zone of that name, else the zone every
    /// client gets.
    pub fn zone_in(&self, wire_name: &[u8], view: u16) -> Option<usize> {
        self.zone_with(wire_name, || view)
    }

    /// [`Snapshot::zone_in`] for a client whose view `decide` gives
    /// ([`Snapshot::view_of`]): called only when the name is under an
    /// apex some view has a zone of, and then once, `decided` keeping the
    /// view and its ECS scope for the rest of the query (a CNAME chain
    /// asks again).
    #[inline]
    pub fn zone_for(
        &self,
        wire_name: &[u8],
        decided: &mut Option<(u16, u8)>,
        decide: impl FnOnce() -> (u16, u8),
    ) -> Option<usize> {
        let mut decide = Some(decide);
        self.zone_with(wire_name, || {
            decided
                .get_or_insert_with(|| decide.take().map_or((0, 0), |d| d()))
                .0
        })
    }

    /// The innermost zone holding a name: at each depth, when a view has
    /// a zone of that name, the zone of the view `view` gives, else the
    /// zone every client gets.
    fn zone_with(&self, wire_name: &[u8], mut view: impl FnMut() -> u16) -> Option<usize> {
        // Where each suffix starts, by its label count.
        let mut starts = [0u8; 128];
        let mut labels = 0;
        let mut at = 0;
        while let Some(&len) = wire_name.get(at) {
            *starts.get_mut(labels)? = u8::try_from(at).ok()?;
            if len == 0 {
                break;
            }
            labels += 1;
            at += 1 + usize::from(len);
        }
        self.apex_depths
            .iter()
            .filter(|&&depth| depth <= labels)
            .find_map(|&depth| {
                let start = usize::from(*starts.get(labels - depth)?);
                let suffix = wire_name.get(start..)?;
                let own = if self.viewed_apexes.contains(suffix) {
                    usize::from(view())
                        .checked_sub(1)
                        .and_then(|v| self.view_apexes.get(v)?.get(suffix))
                } else {
                    None
                };
                own.or_else(|| self.apexes.get(suffix)).copied()
            })
    }

    /// The view of `client` (0: none holds it) and the ECS scope that
    /// decision carries: views are tried in order, and the first one a
    /// place of which holds the client's address (the ECS subnet's, else
    /// the source's, private or not) answers it.
    #[inline]
    pub fn view_of(&self, geo: &Geo, client: &Client) -> (u16, u8) {
        if self.views.is_empty() {
            return (0, 0);
        }
        let placement = client.placement();
        let Some(ip) = placement.addr else {
            return (0, 0);
        };
        let topology = &self.topology;
        let set = self.view_set;
        let class = topology.class(set, ip);
        let located = topology.uses_place(set).then(|| geo.locate(ip));
        let (asn, asn_prefix) = if topology.uses_asn(set) {
            geo.asn(ip)
        } else {
            (None, 0)
        };
        let place = client_place(located, asn);
        let mut consulted = gtm_model::topology::Consulted::default();
        let view = self
            .views
            .iter()
            .position(|v| {
                v.matchers.iter().any(|&m| {
                    topology
                        .closeness(m, set, class.id, &place, &mut consulted)
                        .is_some()
                })
            })
            .map_or(0, |i| u16::try_from(i + 1).unwrap_or(0));
        let geo_used = consulted.by_place || consulted.by_exclusion;
        let width = decided_width(class.block, geo_used, located, asn_prefix);
        let scope = placement
            .source
            .map_or(0, |src| cover(placement.private, width, src));
        (view, scope)
    }

    /// The name of view `view` (0: `default`).
    pub fn view_name(&self, view: u16) -> &str {
        usize::from(view)
            .checked_sub(1)
            .and_then(|v| self.views.get(v))
            .map_or(gtm_model::compile::DEFAULT_VIEW, |v| v.name.as_str())
    }

    /// The index of the view named `name` (`default`: 0).
    pub fn view_index(&self, name: &str) -> Option<u16> {
        if name.eq_ignore_ascii_case(gtm_model::compile::DEFAULT_VIEW) {
            return Some(0);
        }
        let i = self
            .views
            .iter()
            .position(|v| v.name.eq_ignore_ascii_case(name))?;
        u16::try_from(i + 1).ok()
    }

    /// The node of an existing name given as its lower-case wire form,
    /// with the index of its zone (the innermost holding it).
    pub fn find(&self, wire_name: &[u8]) -> Option<(usize, &Node)> {
        self.find_in(wire_name, 0)
    }

    /// [`Snapshot::find`] for the clients of view `view`.
    pub fn find_in(&self, wire_name: &[u8], view: u16) -> Option<(usize, &Node)> {
        let zone = self.zone_in(wire_name, view)?;
        Some((zone, self.zones.get(zone)?.node(wire_name)?))
    }

    /// [`Snapshot::find`] for `client` ([`Snapshot::zone_for`]).
    #[inline]
    pub fn find_for(
        &self,
        wire_name: &[u8],
        decided: &mut Option<(u16, u8)>,
        decide: impl FnOnce() -> (u16, u8),
    ) -> Option<(usize, &Node)> {
        let zone = self.zone_for(wire_name, decided, decide)?;
        Some((zone, self.zones.get(zone)?.node(wire_name)?))
    }

    /// The node of an existing name.
    pub fn node(&self, wire_name: &[u8]) -> Option<&Node> {
        self.find(wire_name).map(|(_, node)| node)
    }

    /// Every record with the responses it was answered in (nonzero only),
    /// as `www.example.test/A` (a view's own `www.example.test/A@internal`;
    /// a record a view's zone takes from another is counted once).
    pub fn answer_counts(&self) -> Vec<(String, u64)> {
        let mut seen: HashSet<*const RrsetSlot> = HashSet::new();
        let mut out: Vec<(String, u64)> = Vec::new();
        for zone in &self.zones {
            let view = zone.spec.view.as_ref().map(|v| &*v.name);
            for (key, node) in zone.nodes.iter() {
                for slot in &node.rrsets {
                    let n = slot
                        .counters
                        .answers()
                        .load(std::sync::atomic::Ordering::Relaxed);
                    if n == 0 || (zone.viewed && !seen.insert(Arc::as_ptr(slot))) {
                        continue;
                    }
                    let name = label(&key_name(key), slot.rtype);
                    out.push((
                        match view {
                            Some(v) => format!("{name}@{v}"),
                            None => name,
                        },
                        n,
                    ));
                }
            }
        }
        out.sort();
        out
    }

    /// The slot of a record, `None` when no record has that name and type.
    pub fn slot(&self, name: &Name, rtype: Rt) -> Option<&Arc<RrsetSlot>> {
        self.slot_at(&wire_key(name), rtype)
    }

    /// The slot of the record at `wire_name` of type `rtype` in its own
    /// zone: the zone of view `view` (by name) when given, else the zone
    /// every client gets. `None` when that zone has no such record.
    pub fn own_slot(
        &self,
        wire_name: &[u8],
        rtype: Rt,
        view: Option<&str>,
    ) -> Option<&Arc<RrsetSlot>> {
        let index = match view {
            None => 0,
            Some(v) => self.view_index(v)?,
        };
        let (zone, node) = self.find_in(wire_name, index)?;
        if self.zones.get(zone)?.spec.view_index() != index {
            return None;
        }
        node.rrsets.iter().find(|s| s.rtype == rtype)
    }

    /// The slot of a record as the clients of view `view` find it.
    pub fn slot_in(&self, name: &Name, rtype: Rt, view: u16) -> Option<&Arc<RrsetSlot>> {
        self.find_in(&wire_key(name), view)?
            .1
            .rrsets
            .iter()
            .find(|s| s.rtype == rtype)
    }

    /// [`Snapshot::slot`] of a name in its lower-case wire form.
    pub fn slot_at(&self, wire_name: &[u8], rtype: Rt) -> Option<&Arc<RrsetSlot>> {
        self.node(wire_name)?
            .rrsets
            .iter()
            .find(|s| s.rtype == rtype)
    }

    /// The innermost zone holding a name.
    pub fn zone_of(&self, name: &Name) -> Option<usize> {
        self.zone_at(&wire_key(name))
    }

    /// The slot of zone `zone`'s own record of type `rtype` at its apex
    /// (a view's zone has its own SOA).
    pub fn apex_slot(&self, zone: usize, rtype: Rt) -> Option<&Arc<RrsetSlot>> {
        let z = self.zones.get(zone)?;
        z.node(&wire_key(&z.apex))?
            .rrsets
            .iter()
            .find(|s| s.rtype == rtype)
    }

    /// The slots whose answers a transfer of zone `zone` carries and that
    /// can change while the snapshot is served: its steered records', and
    /// in a view's zone those it takes from the zone every client gets.
    pub fn watched_slots(&self, zone: usize) -> Vec<Arc<RrsetSlot>> {
        let Some(z) = self.zones.get(zone) else {
            return Vec::new();
        };
        if z.spec.view.is_none() {
            return z.steered.iter().cloned().collect();
        }
        z.nodes
            .iter()
            .flat_map(|(_, node)| node.rrsets.iter())
            .filter(|s| s.rtype != Rt::SOA)
            .cloned()
            .collect()
    }

    /// The index of the zone of `apex` for view `view` (by name; `None`:
    /// the zone of no view).
    pub fn zone_named(&self, apex: &Name, view: Option<&str>) -> Option<usize> {
        self.zones
            .iter()
            .position(|z| z.apex == *apex && z.spec.view.as_ref().map(|v| &*v.name) == view)
    }

    /// The names of zone `zone` (its index in `zones`), in no order: what a
    /// zone transfer reads (`xfr`).
    pub fn zone_nodes(&self, zone: usize) -> impl Iterator<Item = (Name, &Node)> {
        self.zones
            .get(zone)
            .into_iter()
            .flat_map(|z| z.nodes.iter())
            .map(|(key, node)| (key_name(key), node))
    }
}

/// Whether two answers were (or would be) signed by the same signer.
pub fn same_signer<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// A record as operators name it: `www.example.test/A`.
pub fn label(name: &Name, rtype: Rt) -> String {
    let name = name.to_string();
    format!("{}/{rtype}", name.trim_end_matches('.'))
}

/// The labels of a name in wire form (the root's none).
fn labels(key: &[u8]) -> usize {
    let mut n = 0;
    let mut at = 0;
    while let Some(&len) = key.get(at).filter(|&&l| l != 0) {
        n += 1;
        at += 1 + usize::from(len);
    }
    n
}

pub fn wire_type(kind: gtm_model::config::RecordType) -> Rt {
    Rt::from(kind.code())
}
