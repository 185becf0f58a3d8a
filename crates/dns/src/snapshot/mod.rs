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

    /// In a signed zone, per variant: the RRSIG over exactly its records.
    /// Empty when unsigned.
    pub fn sigs(&self) -> &[Signed] {
        self.more.as_ref().map_or(&[], |m| &m.signatures)
    }

    /// Answers nothing (a steered record with nothing to answer).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The first candidate as a record of `owner` (an SOA slot's SOA).
    pub fn first(&self, owner: &Name) -> Option<Record> {
        Some(self.values.first()?.record(owner, self.ttl))
    }

    /// The counter indexes of the records of variant `v`.
    fn sources(&self, v: usize) -> impl Iterator<Item = usize> {
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
    /// form: its index in `zones`.
    pub fn zone_at(&self, wire_name: &[u8]) -> Option<usize> {
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
                self.apexes.get(wire_name.get(start..)?).copied()
            })
    }

    /// The node of an existing name given as its lower-case wire form,
    /// with the index of its zone (the innermost holding it).
    pub fn find(&self, wire_name: &[u8]) -> Option<(usize, &Node)> {
        let zone = self.zone_at(wire_name)?;
        Some((zone, self.zones.get(zone)?.node(wire_name)?))
    }

    /// The node of an existing name.
    pub fn node(&self, wire_name: &[u8]) -> Option<&Node> {
        self.find(wire_name).map(|(_, node)| node)
    }

    /// Every record with the responses it was answered in (nonzero only),
    /// as `www.example.test/A`.
    pub fn answer_counts(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .zones
            .iter()
            .flat_map(|zone| zone.nodes.iter())
            .flat_map(|(key, node)| {
                node.rrsets.iter().filter_map(move |slot| {
                    let n = slot
                        .counters
                        .answers()
                        .load(std::sync::atomic::Ordering::Relaxed);
                    (n > 0).then(|| (label(&key_name(key), slot.rtype), n))
                })
            })
            .collect();
        out.sort();
        out
    }

    /// The slot of a record, `None` when no record has that name and type.
    pub fn slot(&self, name: &Name, rtype: Rt) -> Option<&Arc<RrsetSlot>> {
        self.slot_at(&wire_key(name), rtype)
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
    use gtm_model::config::RecordType as K;
    match kind {
        K::A => Rt::A,
        K::Aaaa => Rt::AAAA,
        K::Cname => Rt::CNAME,
        K::Mx => Rt::MX,
        K::Txt => Rt::TXT,
        K::Srv => Rt::SRV,
        K::Caa => Rt::CAA,
        K::Ns => Rt::NS,
    }
}
