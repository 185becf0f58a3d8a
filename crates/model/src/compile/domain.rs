//! `[[domain]]`: a domain's zone.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use hickory_server::proto::rr::{Name, rdata::SOA};

use super::{
    Cx, DcId, ModeCx, RecordSpec, Refs, ZoneSpec, normal,
    owners::{OwnerHashes, owner_hash},
    paths::{record_path, relative},
    rdata::fqdn,
    reuse,
    size::{MAX_NAME_BYTES, answer_size, apex_size},
};
use crate::{
    config::{Domain, RecordType},
    names::{key_name, wire_key},
};

/// The default TTL of records (spec §6, seed 002's advice of 30–60 s).
pub const DEFAULT_TTL: u32 = 30;

impl Cx {
    /// A domain's zone. `compiled`: the same domain compiled before (in a
    /// configuration whose datacenters, checks, scenarios and services are
    /// these), whose records' compiled forms are taken where they did not
    /// change.
    pub(super) fn domain(
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
}
