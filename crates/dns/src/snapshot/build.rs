//! Building a snapshot: every name of every zone laid out with a slot per
//! record type, zones kept whole or derived from the build before, the
//! apex and negative answers signed when the zone is.

use super::*;

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
    pub(super) fn new(owner: &Name, rtype: Rt, message: impl fmt::Display) -> Self {
        let owner = owner.to_string();
        Self {
            record: format!("{}/{rtype}", owner.trim_end_matches('.')),
            message: message.to_string(),
        }
    }
}

/// The names and types of the steered ones of `records`, in order, as a
/// hash ([`ZoneData::steered_order`]).
pub(super) fn steered_order(records: &[Arc<RecordSpec>]) -> u64 {
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

/// The slot of `previous` whose counters the record of type `rtype` at the
/// name `key` (lower-case wire form) counts on.
pub(super) fn counters_before<'a>(
    previous: &'a Snapshot,
    key: &[u8],
    rtype: Rt,
    view: u16,
) -> Option<&'a RrsetSlot> {
    let (zone, node) = previous.find_in(key, view)?;
    // A view's record counts on its own counters only.
    if previous.zones.get(zone)?.spec.view_index() != view {
        return None;
    }
    node.rrsets.iter().find(|s| s.rtype == rtype).map(|s| &**s)
}

/// The SOA `soa` of `zone` as negative answers carry it.
pub(super) fn negative_soa(zone: &ZoneSpec, soa: &SOA) -> Record {
    // RFC 2308 §5: the negative TTL is the lesser of the SOA's TTL and MINIMUM.
    let ttl = zone.soa_ttl.min(soa.minimum);
    Record::from_rdata(zone.apex.clone(), ttl, RData::SOA(soa.clone()))
}

/// The end of a NODATA body: the negative SOA's serial, refresh, retry,
/// expire and minimum, the last 20 bytes of its data.
pub(super) const NODATA_TAIL: usize = 20;

/// The NODATA body of `name` in a zone whose negative SOA is
/// `negative_soa`, in two: what its node holds, and the last
/// [`NODATA_TAIL`] bytes, the zone's ([`ZoneData::nodata_tail`]).
pub(super) fn nodata_body(
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
pub(super) fn nodata_tail(negative_soa: &Record) -> Result<[u8; NODATA_TAIL], BuildError> {
    Ok(nodata_body(&negative_soa.name, negative_soa)?.1)
}

/// What the node of `name` holds of its NODATA body ([`nodata_body`]),
/// held once per distinct bytes in `bodies`.
pub(super) fn nodata_prefix(
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
        let mut snap = Snapshot {
            topology: compiled.topology.clone(),
            datacenters: compiled
                .datacenters
                .iter()
                .map(|d| d.name.clone())
                .collect(),
            views: compiled.views.clone().into(),
            view_set: compiled.view_set,
            ..Snapshot::default()
        };
        let serial_of =
            |zi: usize, zone: &ZoneSpec| serials.get(zi).copied().unwrap_or(zone.soa.serial);
        let mut kept = previous.kept_zones(compiled, signers, &serial_of);
        // The proof's zones by apex, each taken at most once.
        let mut proven: HashMap<Box<[u8]>, ZoneData> = proof
            .map(|p| p.zones)
            .unwrap_or_default()
            .into_iter()
            .filter(|z| z.spec.view.is_none())
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
            // A view's zone is built whole each time: it holds slots of the
            // zone every client gets, which are this snapshot's.
            let alone = zone.view.is_none();
            if alone && signer.is_none() && snap.derive_zone(previous, zone, &soa, &mut bodies)? {
                continue;
            }
            if alone
                && signer.is_none()
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
                viewed: false,
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
                if matches!(record.content, Content::Alias(_)) {
                    continue;
                }
                let slot = snap.record_slot(previous, zi, record)?;
                snap.place(&mut bodies, zi, &record.owner, slot.clone())?;
                if matches!(record.content, Content::Steered(_)) {
                    steered.push(slot);
                }
            }
            if let Some(data) = snap.zones.last_mut() {
                data.steered = Chunked::from_vec(steered);
            }
            snap.place_aliases(&mut bodies, zi, zone)?;
            snap.place_inherited(&mut bodies, zi, zone)?;
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
    pub(super) fn kept_zones(
        &self,
        compiled: &Compiled,
        signers: &[Option<Arc<ZoneSigner>>],
        serial_of: &dyn Fn(usize, &ZoneSpec) -> u32,
    ) -> HashMap<usize, usize> {
        let mut kept = HashMap::new();
        for (zi, zone) in compiled.zones.iter().enumerate() {
            if zone.view.is_some() {
                continue;
            }
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
    pub(super) fn keep_zone(&mut self, spec: &Arc<ZoneSpec>, before: usize, previous: &Snapshot) {
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
            viewed: false,
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
    pub(super) fn sign_nodata(&mut self) -> Result<(), BuildError> {
        // A zone kept whole has its proofs already.
        for zone in self.zones.iter_mut().filter(|z| z.kept_from.is_none()) {
            let (Some(signer), Some(soa_sig)) = (&zone.signer, &zone.negative_soa_sig) else {
                continue;
            };
            // Built by this snapshot, so not shared, and not copied here.
            let spec = zone.spec.clone();
            for (key, node) in zone.nodes.iter_mut() {
                // Below a delegation a name is the child zone's: never
                // answered here, so never denied.
                if spec.cut_of(key).is_some_and(|cut| *cut != **key) {
                    continue;
                }
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

    /// Indexes the zones by apex, once they are all in: the zones every
    /// client gets in `apexes`, each view's in its own map.
    pub(super) fn index_apexes(&mut self) {
        let mut by_view: Vec<HashMap<Box<[u8]>, usize>> = vec![HashMap::new(); self.views.len()];
        for (i, zone) in self.zones.iter().enumerate() {
            match zone.spec.view_index().checked_sub(1) {
                None => {
                    self.apexes.entry(wire_key(&zone.apex)).or_insert(i);
                }
                Some(v) => {
                    if let Some(map) = by_view.get_mut(usize::from(v)) {
                        map.entry(wire_key(&zone.apex)).or_insert(i);
                    }
                }
            }
        }
        // A zone whose name a view has a zone of answers per view.
        let viewed: HashSet<Box<[u8]>> = by_view.iter().flat_map(|m| m.keys().cloned()).collect();
        for zone in &mut self.zones {
            zone.viewed = viewed.contains(&*wire_key(&zone.apex));
        }
        self.view_apexes = by_view.into_boxed_slice();
        self.viewed_apexes = viewed;
        let mut depths: Vec<usize> = self.zones.iter().map(|z| z.apex_labels).collect();
        depths.sort_unstable_by(|a, b| b.cmp(a));
        depths.dedup();
        self.apex_depths = depths;
    }

    /// Puts at each alias record's name of zone `zi` the slot of its
    /// target: one answer, its target's, under two names.
    pub(super) fn place_aliases(
        &mut self,
        bodies: &mut HashSet<Arc<[u8]>>,
        zi: usize,
        zone: &ZoneSpec,
    ) -> Result<(), BuildError> {
        if zone.aliased.is_empty() {
            return Ok(());
        }
        for record in &zone.records {
            let Content::Alias(target) = &record.content else {
                continue;
            };
            let rt = wire_type(record.kind);
            let slot = self
                .zones
                .get(zi)
                .and_then(|z| z.node(&target.0))
                .and_then(|n| n.rrsets.iter().find(|s| s.rtype == rt))
                .cloned()
                .ok_or_else(|| {
                    BuildError::new(
                        &record.owner_name(),
                        rt,
                        "is an alias of a record the zone lacks",
                    )
                })?;
            self.place(bodies, zi, &record.owner, slot)?;
        }
        Ok(())
    }

    /// Puts into view zone `zi` the slots of the records it takes from the
    /// zone every client gets (built before it): the same slots, so that
    /// one answer serves both.
    pub(super) fn place_inherited(
        &mut self,
        bodies: &mut HashSet<Arc<[u8]>>,
        zi: usize,
        zone: &ZoneSpec,
    ) -> Result<(), BuildError> {
        let Some(view) = &zone.view else {
            return Ok(());
        };
        if view.inherited.is_empty() {
            return Ok(());
        }
        let Some(base) = self
            .zones
            .iter()
            .position(|z| z.spec.view.is_none() && z.apex == zone.apex)
        else {
            return Err(BuildError::new(
                &zone.apex,
                Rt::SOA,
                "is a view's zone of a domain with no zone for every client",
            ));
        };
        for record in &view.inherited {
            let rt = wire_type(record.kind);
            let slot = self
                .zones
                .get(base)
                .and_then(|z| z.node(&record.owner))
                .and_then(|n| n.rrsets.iter().find(|s| s.rtype == rt))
                .cloned();
            match slot {
                Some(slot) => self.place(bodies, zi, &record.owner, slot)?,
                None => {
                    return Err(BuildError::new(
                        &record.owner_name(),
                        rt,
                        "is missing from the zone a view takes it from",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The slots of zone `zone`'s apex records (SOA and NS, and a signed
    /// zone's keys), in that order, its SOA `soa`.
    pub(super) fn apex_slots(
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
                let signer = self.zones.get(zone).and_then(|z| z.signer.clone());
                Ok(self.new_slot(previous, zone, &apex, rt, answer, (Vec::new(), 0), signer))
            })
            .collect()
    }

    /// The slot of a record of zone `zone`. A steered one starts with an
    /// empty answer, and counts answers per address: its candidates, then
    /// its fail-safe values (as `steered_answer` numbers them).
    pub(super) fn record_slot(
        &self,
        previous: &Snapshot,
        zone: usize,
        record: &RecordSpec,
    ) -> Result<Arc<RrsetSlot>, BuildError> {
        // A delegation's NS and its glue are the child zone's data: sent
        // unsigned in referrals (RFC 4035 §2.2); its DS is signed.
        let delegated = self
            .zones
            .get(zone)
            .and_then(|z| z.spec.cut_of(&record.owner))
            .is_some_and(|cut| {
                record.kind != gtm_model::config::RecordType::DS || *cut != *record.owner
            });
        let signer = self
            .zones
            .get(zone)
            .and_then(|z| z.signer.clone())
            .filter(|_| !delegated);
        let rt = wire_type(record.kind);
        let values = match &record.content {
            Content::Static(data) => data.iter().cloned().map(Value::from).collect(),
            Content::Steered(_) | Content::Alias(_) => Vec::new(),
        };
        let answer = static_answer(&record.owner_name(), record.ttl, values, signer.as_deref())?;
        let counted = match &record.content {
            Content::Static(_) | Content::Alias(_) => (Vec::new(), 0),
            Content::Steered(steering) => {
                let mut keys: Vec<u64> = steering
                    .addresses
                    .iter()
                    .map(|a| a.value.to_bytes())
                    .chain(steering.fail_safe().iter().map(|d| d.to_bytes()))
                    .map(|bytes| hash_bytes(&bytes.unwrap_or_default()))
                    .collect();
                let addresses = keys.len();
                // A rule by its place and target: kept while they stay.
                keys.extend(steering.rules().iter().map(|r| {
                    let place = self
                        .topology
                        .matchers
                        .get(r.matcher as usize)
                        .map_or("", |m| m.name.as_str());
                    hash_bytes(format!("{place}|{:?}", r.target).as_bytes())
                }));
                (keys, addresses)
            }
        };
        Ok(self.new_slot(previous, zone, &record.owner, rt, answer, counted, signer))
    }

    /// A slot of zone `zone` answering `answer` at the name `key` (lower-case
    /// wire form), whose new answers `signer` signs. A record also in
    /// `previous` keeps counting on its counters.
    #[expect(clippy::too_many_arguments, reason = "a slot's parts, each its own")]
    pub(super) fn new_slot(
        &self,
        previous: &Snapshot,
        zone: usize,
        key: &[u8],
        rtype: Rt,
        answer: RrsetAnswer,
        (counted, addresses): (Vec<u64>, usize),
        signer: Option<Arc<ZoneSigner>>,
    ) -> Arc<RrsetSlot> {
        let view = self.zones.get(zone).map_or(0, |z| z.spec.view_index());
        let before = counters_before(previous, key, rtype, view);
        Arc::new(RrsetSlot {
            rtype,
            answer: ArcSwap::from_pointee(answer),
            counters: Counters::carried(counted, addresses, before.map(|s| &s.counters)),
            signer,
        })
    }

    /// Puts `slot` at the name `key` (lower-case wire form) of zone
    /// `zone`, after the slots the name has, making the name and every
    /// ancestor up to the apex exist.
    pub(super) fn place(
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
}
