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
use crate::model::names::{key_name, wire_key};

use crate::{
    chunked::Chunked,
    dnssec::signer::{SignError, ZoneSigner},
    geo::{Geo, is_private},
    model::{
        compile::{Compiled, Content, RecordSpec, Steering, ZoneSpec},
        config::Balance,
        value::Value,
    },
    resolve::{Answer, PlaceAnswers, PlaceKey, place_group},
};

mod adopt;
mod derive;
mod nodes;
mod variants;

pub use variants::Variants;

use nodes::Nodes;
#[cfg(test)]
mod tests;

/// Why the answers of a configuration cannot be built: a record whose data
/// does not encode. Validation refuses such configurations first; this is
/// the last line, so a bug costs an error instead of the process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{record}: {message}")]
pub struct BuildError {
    /// `www.example.test/TXT`.
    pub record: String,
    pub message: String,
}

impl From<SignError> for BuildError {
    fn from(e: SignError) -> Self {
        Self {
            record: e.what,
            message: e.message,
        }
    }
}

impl BuildError {
    fn new(owner: &Name, rtype: Rt, message: impl fmt::Display) -> Self {
        let owner = owner.to_string();
        Self {
            record: format!("{}/{rtype}", owner.trim_end_matches('.')),
            message: message.to_string(),
        }
    }
}

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
    pub places: Box<[(PlaceKey, usize)]>,
    /// The index of the default group ([`RrsetAnswer::default_group`]), in
    /// 32 bits: with its `Arc`, an answer fits 56 bytes.
    default: u32,
    pub groups: Box<[Group]>,
}

impl RrsetAnswer {
    /// The index in `groups` of the group a client of no particular place
    /// is answered from.
    pub fn default_group(&self) -> usize {
        self.default as usize
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

/// The candidates variant `v` of `n` answers: at most `max_answers`, in
/// order from candidate `v` round to the start.
fn picked(n: usize, max_answers: usize, v: usize) -> impl Iterator<Item = usize> {
    (0..n.min(max_answers)).map(move |k| (v + k) % n)
}

impl Snapshot {
    /// Builds the answers of a configuration. Steered records start with an
    /// empty answer; the engine stores each one's real answer in
    /// `steered[i]` (the i-th steered record in zone and record order)
    /// before the snapshot is served. Records also in `previous` keep
    /// counting on its counters. Fails, changing nothing, when a record
    /// does not encode.
    ///
    /// `signers[i]` signs zone `i` (`None`, or missing: unsigned), whose
    /// SOA serial is `serials[i]` (missing: the one its spec has).
    ///
    /// `proof`: a snapshot built of some of the same zones (the state
    /// machine's proof that a configuration can be served, built unsigned
    /// with the specs' serials): an unsigned zone it built whole from the
    /// same spec, and that is not kept or derived from `previous`, is taken
    /// from it (`adopt`), not built again.
    pub fn build(
        compiled: &Compiled,
        previous: &Snapshot,
        proof: Option<Snapshot>,
        signers: &[Option<Arc<ZoneSigner>>],
        serials: &[u32],
    ) -> Result<Self, BuildError> {
        let mut snap = Snapshot::default();
        let serial_of =
            |zi: usize, zone: &ZoneSpec| serials.get(zi).copied().unwrap_or(zone.soa.serial);
        let mut kept = previous.kept_zones(compiled, signers, &serial_of);
        // The proof's zones by apex, each taken at most once.
        let mut proven: HashMap<Box<[u8]>, ZoneData> = proof
            .map(|p| p.zones)
            .unwrap_or_default()
            .into_iter()
            .map(|z| (wire_key(&z.apex), z))
            .collect();
        // NODATA bodies by their bytes, each held once.
        let mut bodies = HashSet::new();
        for (zi, zone) in compiled.zones.iter().enumerate() {
            let signer = signers.get(zi).cloned().flatten();
            if let Some(before) = kept.remove(&zi) {
                snap.keep_zone(zone, before, previous);
                continue;
            }
            let mut soa = zone.soa.clone();
            soa.serial = serial_of(zi, zone);
            if signer.is_none() && snap.derive_zone(previous, zone, &soa, &mut bodies)? {
                continue;
            }
            if signer.is_none()
                && let Some(data) = proven.remove(&*wire_key(&zone.apex))
                && snap.adopt_zone(previous, zone, data, &soa)?
            {
                continue;
            }
            let negative_soa = negative_soa(zone, &soa);
            let negative_soa_sig = match &signer {
                Some(s) => Some(s.sign(std::slice::from_ref(&negative_soa))?),
                None => None,
            };
            snap.zones.push(ZoneData {
                spec: zone.clone(),
                serial: soa.serial,
                steered: Chunked::default(),
                steered_order: steered_order(&zone.records),
                kept_from: None,
                derived_from: None,
                apex: zone.apex.clone(),
                apex_labels: zone.apex.num_labels() as usize,
                nodata_tail: nodata_tail(&negative_soa)?,
                negative_soa,
                signer: signer.clone(),
                negative_soa_sig,
                nodes: Nodes::with_capacity(zone.records.len() + 1),
            });
            let zi = snap.zones.len() - 1;
            for slot in snap.apex_slots(previous, zi, zone, soa)? {
                snap.place(&mut bodies, zi, &wire_key(&zone.apex), slot)?;
            }
            let mut steered = Vec::new();
            for record in &zone.records {
                let slot = snap.record_slot(previous, zi, record)?;
                snap.place(&mut bodies, zi, &record.owner, slot.clone())?;
                if matches!(record.content, Content::Steered(_)) {
                    steered.push(slot);
                }
            }
            if let Some(data) = snap.zones.last_mut() {
                data.steered = Chunked::from_vec(steered);
            }
        }
        snap.sign_nodata()?;
        snap.index_apexes();
        snap.steered_ends = snap
            .zones
            .iter()
            .scan(0, |end, z| {
                *end += z.steered.len();
                Some(*end)
            })
            .collect();
        Ok(snap)
    }

    /// The zones of `compiled` this snapshot has built exactly as they
    /// would be built again (the same spec, serial included, and signer),
    /// by their index in `compiled`: each with its index here. Left out:
    /// zones with secondaries (their SOA answer moves apart from the
    /// configuration, docs/transfer.md).
    fn kept_zones(
        &self,
        compiled: &Compiled,
        signers: &[Option<Arc<ZoneSigner>>],
        serial_of: &dyn Fn(usize, &ZoneSpec) -> u32,
    ) -> HashMap<usize, usize> {
        let mut kept = HashMap::new();
        for (zi, zone) in compiled.zones.iter().enumerate() {
            let Some(&before) = self.apexes.get(&*wire_key(&zone.apex)) else {
                continue;
            };
            let Some(data) = self.zones.get(before) else {
                continue;
            };
            let signer = signers.get(zi).cloned().flatten();
            if zone.secondaries.is_empty()
                && data.serial == serial_of(zi, zone)
                && same_signer(&signer, &data.signer)
                && (Arc::ptr_eq(&data.spec, zone) || data.spec == *zone)
            {
                kept.insert(zi, before);
            }
        }
        kept
    }

    /// Takes zone `before` of `previous` (built from `spec`) as it is: its
    /// nodes, its slots and their answers, shared with `previous`.
    fn keep_zone(&mut self, spec: &Arc<ZoneSpec>, before: usize, previous: &Snapshot) {
        let Some(data) = previous.zones.get(before) else {
            return;
        };
        self.zones.push(ZoneData {
            spec: spec.clone(),
            serial: data.serial,
            steered: data.steered.clone(),
            steered_order: data.steered_order,
            kept_from: Some(before),
            derived_from: None,
            apex: data.apex.clone(),
            apex_labels: data.apex_labels,
            negative_soa: data.negative_soa.clone(),
            nodata_tail: data.nodata_tail,
            signer: data.signer.clone(),
            negative_soa_sig: data.negative_soa_sig.clone(),
            nodes: data.nodes.clone(),
        });
    }

    /// The signed NODATA answer of every name of a signed zone. Its NSEC
    /// lists every type the name has; a steered record answering empty is
    /// proved per query instead (see `lookup`).
    fn sign_nodata(&mut self) -> Result<(), BuildError> {
        // A zone kept whole has its proofs already.
        for zone in self.zones.iter_mut().filter(|z| z.kept_from.is_none()) {
            let (Some(signer), Some(soa_sig)) = (&zone.signer, &zone.negative_soa_sig) else {
                continue;
            };
            // Built by this snapshot, so not shared, and not copied here.
            for (key, node) in zone.nodes.iter_mut() {
                let name = key_name(key);
                let types: Vec<Rt> = node.rrsets.iter().map(|s| s.rtype).collect();
                let records = signer.denial(&zone.negative_soa, soa_sig, &name, &types)?;
                let (wire, _, _) = encode_body(&name, &records, &[])
                    .map_err(|e| BuildError::new(&name, Rt::NSEC, e))?;
                // The zone's SOA and its RRSIG are the zone's: a node keeps
                // its NSEC and RRSIG only (the wire form has all four).
                let [_, _, nsec, nsec_sig] = records;
                node.signed_nodata = Some(Box::new(Signed {
                    records: vec![nsec, nsec_sig],
                    wire,
                }));
            }
        }
        Ok(())
    }

    /// Indexes the zones by apex, once they are all in.
    fn index_apexes(&mut self) {
        for (i, zone) in self.zones.iter().enumerate() {
            self.apexes.entry(wire_key(&zone.apex)).or_insert(i);
        }
        let mut depths: Vec<usize> = self.zones.iter().map(|z| z.apex_labels).collect();
        depths.sort_unstable_by(|a, b| b.cmp(a));
        depths.dedup();
        self.apex_depths = depths;
    }

    /// The slots of zone `zone`'s apex records (SOA and NS, and a signed
    /// zone's keys), in that order, its SOA `soa`.
    fn apex_slots(
        &self,
        previous: &Snapshot,
        zone: usize,
        spec: &ZoneSpec,
        soa: SOA,
    ) -> Result<Vec<Arc<RrsetSlot>>, BuildError> {
        let Some(signer) = self.zones.get(zone).map(|z| z.signer.as_deref()) else {
            return Err(BuildError::new(
                &spec.apex,
                Rt::SOA,
                "is outside every zone",
            ));
        };
        let mut sets: Vec<(Rt, u32, Vec<RData>)> = vec![
            (Rt::SOA, spec.soa_ttl, vec![RData::SOA(soa)]),
            (
                Rt::NS,
                spec.ns_ttl,
                spec.nameservers
                    .iter()
                    .map(|ns| RData::NS(hickory_server::proto::rr::rdata::NS(ns.clone())))
                    .collect(),
            ),
        ];
        if let Some(s) = signer {
            sets.extend(
                crate::dnssec::signer::apex_records(s)
                    .into_iter()
                    .map(|(rt, data)| (rt, spec.soa_ttl, data)),
            );
        }
        sets.into_iter()
            .map(|(rt, ttl, data)| {
                let values = data.into_iter().map(Value::from).collect();
                let answer = static_answer(&spec.apex, ttl, values, signer)?;
                let apex = wire_key(&spec.apex);
                Ok(self.new_slot(previous, zone, &apex, rt, answer, Vec::new()))
            })
            .collect()
    }

    /// The slot of a record of zone `zone`. A steered one starts with an
    /// empty answer, and counts answers per address: its candidates, then
    /// its fail-safe values (as `steered_answer` numbers them).
    fn record_slot(
        &self,
        previous: &Snapshot,
        zone: usize,
        record: &RecordSpec,
    ) -> Result<Arc<RrsetSlot>, BuildError> {
        let signer = self.zones.get(zone).and_then(|z| z.signer.as_deref());
        let rt = wire_type(record.kind);
        let values = match &record.content {
            Content::Static(data) => data.iter().cloned().map(Value::from).collect(),
            Content::Steered(_) => Vec::new(),
        };
        let answer = static_answer(&record.owner_name(), record.ttl, values, signer)?;
        let counted = match &record.content {
            Content::Static(_) => Vec::new(),
            Content::Steered(steering) => steering
                .addresses
                .iter()
                .map(|a| a.value.to_bytes())
                .chain(steering.fail_safe.iter().map(|d| d.to_bytes()))
                .map(|bytes| hash_bytes(&bytes.unwrap_or_default()))
                .collect(),
        };
        Ok(self.new_slot(previous, zone, &record.owner, rt, answer, counted))
    }

    /// A slot of zone `zone` answering `answer` at the name `key` (lower-case
    /// wire form). A record also in `previous` keeps counting on its
    /// counters.
    fn new_slot(
        &self,
        previous: &Snapshot,
        zone: usize,
        key: &[u8],
        rtype: Rt,
        answer: RrsetAnswer,
        counted: Vec<u64>,
    ) -> Arc<RrsetSlot> {
        let before = counters_before(previous, key, rtype);
        Arc::new(RrsetSlot {
            rtype,
            answer: ArcSwap::from_pointee(answer),
            counters: Counters::carried(counted, before.map(|s| &s.counters)),
            signer: self.zones.get(zone).and_then(|z| z.signer.clone()),
        })
    }

    /// Puts `slot` at the name `key` (lower-case wire form) of zone
    /// `zone`, after the slots the name has, making the name and every
    /// ancestor up to the apex exist.
    fn place(
        &mut self,
        bodies: &mut HashSet<Arc<[u8]>>,
        zone: usize,
        key: &[u8],
        slot: Arc<RrsetSlot>,
    ) -> Result<(), BuildError> {
        let rtype = slot.rtype;
        let Some(zone_data) = self.zones.get_mut(zone) else {
            return Err(BuildError::new(
                &key_name(key),
                rtype,
                "is outside every zone",
            ));
        };
        // Of a zone this snapshot builds, or of the shards its change
        // touches (copied once, when first touched).
        let nodes = &mut zone_data.nodes;
        // An ancestor's key is a suffix of the name's; walking up from the
        // name, the first that exists already has all of its own.
        let labels = labels(key);
        let mut next = 0;
        for _ in (zone_data.apex_labels..=labels).rev() {
            let at = next;
            next += 1 + usize::from(key.get(at).copied().unwrap_or(0));
            let Some(suffix) = key.get(at..) else { break };
            if nodes.contains_key(suffix) {
                break;
            }
            let ancestor = key_name(suffix);
            let nodata_wire = nodata_prefix(&ancestor, &zone_data.negative_soa, bodies)?;
            nodes.insert(
                suffix.into(),
                Node {
                    nodata_wire,
                    rrsets: Vec::new(),
                    signed_nodata: None,
                },
            );
        }
        match nodes.get_mut(key) {
            // Most names have one record: room for it alone, not the four
            // a first push reserves.
            Some(node) => {
                node.rrsets.reserve_exact(1);
                node.rrsets.push(slot);
                Ok(())
            }
            None => Err(BuildError::new(
                &key_name(key),
                rtype,
                "is outside its zone",
            )),
        }
    }

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

/// The names and types of the steered ones of `records`, in order, as a
/// hash ([`ZoneData::steered_order`]).
fn steered_order(records: &[Arc<RecordSpec>]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for r in records
        .iter()
        .filter(|r| matches!(r.content, Content::Steered(_)))
    {
        // Owners are lower case: their labels' bytes are the name.
        for label in r.owner.iter() {
            label.hash(&mut h);
        }
        r.kind.hash(&mut h);
    }
    h.finish()
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

pub fn wire_type(kind: crate::model::config::RecordType) -> Rt {
    use crate::model::config::RecordType as K;
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

/// The slot of `previous` whose counters the record of type `rtype` at the
/// name `key` (lower-case wire form) counts on.
fn counters_before<'a>(previous: &'a Snapshot, key: &[u8], rtype: Rt) -> Option<&'a RrsetSlot> {
    let (_, node) = previous.find(key)?;
    node.rrsets.iter().find(|s| s.rtype == rtype).map(|s| &**s)
}

/// The SOA `soa` of `zone` as negative answers carry it.
fn negative_soa(zone: &ZoneSpec, soa: &SOA) -> Record {
    // RFC 2308 §5: the negative TTL is the lesser of the SOA's TTL and MINIMUM.
    let ttl = zone.soa_ttl.min(soa.minimum);
    Record::from_rdata(zone.apex.clone(), ttl, RData::SOA(soa.clone()))
}

/// The end of a NODATA body: the negative SOA's serial, refresh, retry,
/// expire and minimum, the last 20 bytes of its data.
const NODATA_TAIL: usize = 20;

/// The NODATA body of `name` in a zone whose negative SOA is
/// `negative_soa`, in two: what its node holds, and the last
/// [`NODATA_TAIL`] bytes, the zone's ([`ZoneData::nodata_tail`]).
fn nodata_body(
    name: &Name,
    negative_soa: &Record,
) -> Result<(Box<[u8]>, [u8; NODATA_TAIL]), BuildError> {
    let (body, _, _) = encode_body(name, &[], std::slice::from_ref(negative_soa))
        .map_err(|e| BuildError::new(name, Rt::SOA, e))?;
    let at = body
        .len()
        .checked_sub(NODATA_TAIL)
        .ok_or_else(|| BuildError::new(name, Rt::SOA, "is too short"))?;
    let (prefix, tail) = body.split_at(at);
    let tail = tail
        .try_into()
        .map_err(|_| BuildError::new(name, Rt::SOA, "is too short"))?;
    Ok((prefix.into(), tail))
}

/// The end of every NODATA body of a zone whose negative SOA is
/// `negative_soa` ([`nodata_body`]).
fn nodata_tail(negative_soa: &Record) -> Result<[u8; NODATA_TAIL], BuildError> {
    Ok(nodata_body(&negative_soa.name, negative_soa)?.1)
}

/// What the node of `name` holds of its NODATA body ([`nodata_body`]),
/// held once per distinct bytes in `bodies`.
fn nodata_prefix(
    name: &Name,
    negative_soa: &Record,
    bodies: &mut HashSet<Arc<[u8]>>,
) -> Result<Arc<[u8]>, BuildError> {
    let (prefix, _) = nodata_body(name, negative_soa)?;
    Ok(match bodies.get(&*prefix) {
        Some(shared) => shared.clone(),
        None => {
            let body: Arc<[u8]> = prefix.into();
            bodies.insert(body.clone());
            body
        }
    })
}

/// The answer of a static record set (one group, every record), signed by
/// `signer` when its zone is signed.
pub fn static_answer(
    owner: &Name,
    ttl: u32,
    values: Vec<Value>,
    signer: Option<&ZoneSigner>,
) -> Result<RrsetAnswer, BuildError> {
    Ok(RrsetAnswer {
        balance: Balance::Priority,
        places: Box::default(),
        default: 0,
        groups: Box::new([group(
            owner,
            ttl,
            values,
            usize::MAX,
            Balance::Priority,
            &[],
            Vec::new(),
            signer,
        )?]),
    })
}

/// Builds the answer of a steered record from the resolver's decision,
/// signed by `signer` when its zone is signed.
pub fn steered_answer(
    owner: &Name,
    ttl: u32,
    steering: &Steering,
    places: &PlaceAnswers,
    signer: Option<&ZoneSigner>,
) -> Result<RrsetAnswer, BuildError> {
    // Collected with its exact length: a `Result` collect starts at four
    // and keeps the spare room, 450 bytes per record of a large zone.
    let mut groups = Vec::with_capacity(places.groups.len());
    for answer in &places.groups {
        groups.push({
            // Each candidate with its weight and its counter: candidate `i`
            // counts on counter `i`, fail-safe value `j` on the one after
            // every candidate's (see `Snapshot::build`).
            let chosen: Vec<(Value, u32, u32)> = match answer {
                Answer::Addresses(list) => list
                    .iter()
                    .filter_map(|&i| Some((steering.addresses.get(i)?, i)))
                    .map(|(a, i)| (a.value.clone(), a.weight, i as u32))
                    .collect(),
                Answer::FailSafe => (steering.addresses.len()..)
                    .zip(&steering.fail_safe)
                    .map(|(i, d)| (Value::from(d.clone()), 1, i as u32))
                    .collect(),
                Answer::Empty => Vec::new(),
            };
            let weights: Vec<u32> = chosen.iter().map(|c| c.1).collect();
            let sources: Vec<u32> = chosen.iter().map(|c| c.2).collect();
            let values = chosen.into_iter().map(|c| c.0).collect();
            let balance = if matches!(answer, Answer::Addresses(_)) {
                steering.balance
            } else {
                Balance::RoundRobin
            };
            group(
                owner,
                ttl,
                values,
                steering.max_answers as usize,
                balance,
                &weights,
                sources,
                signer,
            )?
        });
    }
    // The query path picks `groups[default]` and `groups[places[i].1]`.
    if groups.is_empty()
        || places.default >= groups.len()
        || places.places.iter().any(|(_, g)| *g >= groups.len())
    {
        return Err(BuildError::new(
            owner,
            Rt::A,
            "the resolver named an answer group that does not exist",
        ));
    }
    Ok(RrsetAnswer {
        balance: steering.balance,
        places: places.places.clone(),
        default: u32::try_from(places.default).unwrap_or(u32::MAX),
        groups: groups.into_boxed_slice(),
    })
}

#[expect(clippy::too_many_arguments, reason = "a group's parts, each its own")]
fn group(
    owner: &Name,
    ttl: u32,
    values: Vec<Value>,
    max_answers: usize,
    balance: Balance,
    weights: &[u32],
    sources: Vec<u32>,
    signer: Option<&ZoneSigner>,
) -> Result<Group, BuildError> {
    let rtype = values.first().map_or(Rt::A, Value::record_type);
    let fail = |e: ProtoError| BuildError::new(owner, rtype, e);
    let n = values.len();
    // Priority answers the first ones in order; one candidate has one order.
    let variants = if balance == Balance::Priority || n <= 1 {
        1
    } else {
        n
    };
    let all_zero = weights.iter().all(|&w| w == 0);
    let mut total = 0u64;
    let cumulative: Vec<u64> = (0..n)
        .map(|i| {
            total += if all_zero {
                1
            } else {
                u64::from(weights.get(i).copied().unwrap_or(1))
            };
            total
        })
        .collect();
    let keys: Box<[u64]> = values
        .iter()
        .map(|v| hash_bytes(&v.to_bytes().unwrap_or_default()))
        .collect();
    // The candidates of variant `v`: rotated to start at `v`.
    let records = |v: usize| -> Vec<Record> {
        picked(n, max_answers, v)
            .map(|i| values[i].record(owner, ttl))
            .collect()
    };
    let sections: Vec<(Box<[u8]>, u16)> = (0..variants)
        .map(|v| {
            let (body, count, _) = encode_body(owner, &records(v), &[])?;
            Ok((body, count))
        })
        .collect::<Result<_, ProtoError>>()
        .map_err(fail)?;
    let wire = Variants::new(&sections)
        .ok_or_else(|| BuildError::new(owner, rtype, "its answers take over 4 GiB"))?;
    let mut sigs: Vec<Signed> = Vec::new();
    if let Some(signer) = signer
        && n > 0
    {
        // Variants holding the same records in another order share one
        // signature: the signed form is sorted (RFC 4034 §6.3).
        let mut made: HashMap<Vec<u64>, usize> = HashMap::new();
        for v in 0..variants {
            let mut set: Vec<u64> = picked(n, max_answers, v).map(|i| keys[i]).collect();
            set.sort_unstable();
            if let Some(&first) = made.get(&set) {
                let same = Signed {
                    records: sigs[first].records.clone(),
                    wire: sigs[first].wire.clone(),
                };
                sigs.push(same);
                continue;
            }
            let sig = signer.sign(&records(v))?;
            sigs.push(Signed::new(owner, vec![sig]).map_err(fail)?);
            made.insert(set, v);
        }
    }
    // One candidate has one order: its weight and its key are never read
    // (`choose`), and a group per record of a large zone holds neither.
    let more = GroupMore {
        spread: match n > 1 {
            true => cumulative.into_iter().chain(keys).collect(),
            false => Box::default(),
        },
        sources: match sources.iter().enumerate().all(|(i, &s)| s as usize == i) {
            true => Box::default(),
            false => sources.into_boxed_slice(),
        },
        signatures: sigs.into_boxed_slice(),
    };
    let lacks_more =
        more.spread.is_empty() && more.sources.is_empty() && more.signatures.is_empty();
    Ok(Group {
        values: values.into_boxed_slice(),
        ttl,
        max_answers: u32::try_from(max_answers).unwrap_or(u32::MAX),
        wire,
        more: (!lacks_more).then(|| Box::new(more)),
    })
}

/// Encodes answer and authority records as they follow a question for
/// `qname`, with names compressed against that question. Valid after any
/// question whose name has the same labels in any case. Fails when a
/// record does not encode (a character-string over 255 bytes) or the whole
/// does not fit a DNS message.
pub fn encode_body(
    qname: &Name,
    answers: &[Record],
    authority: &[Record],
) -> Result<(Box<[u8]>, u16, u16), ProtoError> {
    let count = |records: &[Record]| {
        u16::try_from(records.len()).map_err(|_| {
            ProtoError::from(format!("{} records do not fit a message", records.len()))
        })
    };
    let (answer_count, authority_count) = (count(answers)?, count(authority)?);
    let mut buf = Vec::with_capacity(128);
    let mut enc = BinEncoder::new(&mut buf);
    enc.emit_vec(&[0u8; 12])?;
    Query::query(qname.clone(), Rt::A).emit(&mut enc)?;
    let start = enc.offset();
    for r in answers.iter().chain(authority) {
        r.emit(&mut enc)?;
    }
    let body = buf
        .get(start..)
        .unwrap_or_default()
        .to_vec()
        .into_boxed_slice();
    Ok((body, answer_count, authority_count))
}

/// FNV-1a, then a finalizer: stable across runs and builds, so a persist
/// client keeps its answer across restarts too.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Who asks: the source address and the client subnet a resolver sent.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    pub src: IpAddr,
    pub ecs: Option<Ecs>,
}

/// What a client is placed by.
#[derive(Debug, Clone, Copy)]
struct Placement {
    /// The address placed (and hashed by persist); none for ECS /0.
    addr: Option<IpAddr>,
    /// The ECS source prefix, when the answer's scope must be told.
    source: Option<u8>,
    /// The ECS address is private or otherwise unplaceable.
    private: bool,
}

impl Client {
    /// The address a client is placed by. ECS with a source prefix of 0
    /// means "do not use my address". A private ECS address places nowhere
    /// (spec §3: default records), but its answer must still be scoped to
    /// that subnet: a resolver would otherwise serve it to every client.
    fn placement(&self) -> Placement {
        match self.ecs {
            Some(e) if e.source_prefix == 0 => Placement {
                addr: None,
                source: None,
                private: false,
            },
            Some(e) => Placement {
                addr: Some(e.address),
                source: Some(e.source_prefix),
                private: is_private(e.address),
            },
            None => Placement {
                addr: Some(self.src),
                source: None,
                private: false,
            },
        }
    }
}

/// Which answer a client gets, and the ECS scope it depended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub group: usize,
    pub variant: usize,
    pub scope: u8,
}

/// The numbers balance algorithms draw from: a round-robin counter and a
/// random sequence, one per answering thread. Seeded, so the fast and
/// general paths can be compared on the same draws.
#[derive(Debug, Clone)]
pub struct Draw {
    counter: u64,
    state: u64,
}

impl Draw {
    pub fn new(seed: u64) -> Self {
        Self {
            counter: seed,
            state: mix(seed) | 1,
        }
    }

    fn next_counter(&mut self) -> u64 {
        self.counter = self.counter.wrapping_add(1);
        self.counter
    }

    /// xorshift64*: fast, and plenty for spreading answers.
    fn next_random(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Picks the group by the client's place and the variant by the balance
/// algorithm.
pub fn choose(answer: &RrsetAnswer, geo: &Geo, client: &Client, draw: &mut Draw) -> Choice {
    let Placement {
        addr,
        source,
        private,
    } = client.placement();
    // The scope an answer depending on the client's `width`-bit network
    // carries: that width capped at the source prefix, or the whole source
    // prefix for a private subnet (no resolver may share it further).
    let cover = |width: u8, src: u8| if private { src } else { width.min(src) };
    let mut scope = 0u8;
    let group = if answer.places.is_empty() {
        answer.default_group()
    } else {
        match addr {
            Some(ip) => {
                let located = geo.locate(ip);
                if let Some(src) = source {
                    scope = scope.max(cover(located.prefix, src));
                }
                place_group(&answer.places, answer.default_group(), &located.place)
            }
            None => answer.default_group(),
        }
    };
    let g = &answer.groups[group];
    let n = g.wire.len();
    let variant = if n <= 1 {
        0
    } else {
        match answer.balance {
            Balance::RoundRobin => (draw.next_counter() % n as u64) as usize,
            Balance::Random => (draw.next_random() % n as u64) as usize,
            Balance::Priority => 0,
            Balance::Weighted => {
                let cumulative = g.cumulative();
                let total = cumulative.last().copied().unwrap_or(1).max(1);
                let r = draw.next_random() % total;
                cumulative.partition_point(|&c| c <= r)
            }
            Balance::Persist => match addr {
                Some(ip) => {
                    let (subnet, width) = persist_subnet(ip);
                    if let Some(src) = source {
                        scope = scope.max(cover(width, src));
                    }
                    {
                        let keys = g.keys();
                        (0..n)
                            .max_by_key(|&i| mix(subnet ^ keys.get(i).copied().unwrap_or(0)))
                            .unwrap_or(0)
                    }
                }
                None => 0,
            },
        }
    };
    Choice {
        group,
        variant,
        scope,
    }
}

/// The subnet that keeps a persist answer: /24 for IPv4, /56 for IPv6.
fn persist_subnet(ip: IpAddr) -> (u64, u8) {
    match ip {
        IpAddr::V4(v4) => (mix(u64::from(u32::from(v4) & 0xFFFF_FF00)), 24),
        IpAddr::V6(v6) => (mix((u128::from(v6) >> 72) as u64), 56),
    }
}
