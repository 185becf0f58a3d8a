//! CNAME chains through the served zones that lead back to themselves.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use hickory_server::proto::rr::{Name, RData};

use super::{Content, Cx, RecordSpec, ZoneSpec, paths::record_path};
use crate::{
    names::{key_name, wire_key},
    value::Value,
};

/// A CNAME being followed and the targets of it not followed yet.
type Step<'z> = (&'z [u8], Vec<&'z [u8]>);

impl Cx {
    /// Refuses CNAMEs that can lead back to themselves through the served
    /// zones (any of their targets, wildcards included): a resolver would
    /// chase such a chain until its limit.
    pub(super) fn cname_loops(&mut self, zones: &[Arc<ZoneSpec>]) {
        // No chain without a CNAME: skip gathering every name.
        if zones.iter().all(|z| z.cnames == 0) {
            return;
        }
        let apexes: Vec<Box<[u8]>> = zones.iter().map(|z| wire_key(&z.apex)).collect();
        let chains = Chains::new(zones, &apexes);
        let mut order: Vec<&[u8]> = chains.cnames.keys().copied().collect();
        order.sort_by_cached_key(|k| key_name(k));
        let mut done: HashSet<&[u8]> = HashSet::new();
        let mut reported: HashSet<&[u8]> = HashSet::new();
        for start in order {
            if !done.contains(start) {
                self.follow(&chains, start, &mut done, &mut reported);
            }
        }
    }

    /// Follows the chains from `start` depth-first, iteratively (a chain
    /// may be long): a target on the current path closes a loop, reported
    /// once. Each CNAME left is `done`.
    fn follow<'z>(
        &mut self,
        chains: &Chains<'z>,
        start: &'z [u8],
        done: &mut HashSet<&'z [u8]>,
        reported: &mut HashSet<&'z [u8]>,
    ) {
        let mut path: Vec<Step> = vec![(start, chains.targets(start))];
        let mut on_path: HashSet<&[u8]> = HashSet::from([start]);
        while let Some((node, pending)) = path.last_mut() {
            let node = *node;
            match pending.pop() {
                Some(t) if on_path.contains(t) => {
                    if reported.insert(t) {
                        self.report_loop(chains, &path, t);
                    }
                }
                Some(t) if !done.contains(t) => {
                    on_path.insert(t);
                    path.push((t, chains.targets(t)));
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

    /// The loop `path` closes at `t`, said at the record of `t`.
    fn report_loop(&mut self, chains: &Chains, path: &[Step], t: &[u8]) {
        let from = path.iter().position(|(n, _)| *n == t).unwrap_or(0);
        let chain: Vec<String> = path[from..]
            .iter()
            .map(|(n, _)| key_name(n).to_string())
            .chain(std::iter::once(key_name(t).to_string()))
            .collect();
        if let Some((zi, r)) = chains.cnames.get(t) {
            let z = &chains.zones[*zi];
            let dpath = format!("domain {}", z.apex.to_string().trim_end_matches('.'));
            self.err(
                record_path(&dpath, &z.apex, r),
                format!("CNAME loop: {}", chain.join(" → ")),
            );
        }
    }
}

/// The served zones' names and CNAMEs, by their wire forms (an owner's
/// ancestors are its suffixes).
struct Chains<'z> {
    zones: &'z [Arc<ZoneSpec>],
    /// Every name that exists: apexes, owners and their ancestors.
    names: HashSet<&'z [u8]>,
    /// The CNAME records with targets by owner, with their zone's index.
    cnames: HashMap<&'z [u8], (usize, &'z RecordSpec)>,
}

impl<'z> Chains<'z> {
    /// The names and CNAMEs of `zones`, whose apexes are `apexes`.
    fn new(zones: &'z [Arc<ZoneSpec>], apexes: &'z [Box<[u8]>]) -> Self {
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
        Self {
            zones,
            names,
            cnames,
        }
    }

    fn exists(&self, n: &Name) -> bool {
        self.names.contains(&*wire_key(n))
    }

    /// The CNAME a target leads to, as the query path finds it.
    fn next(&self, target: &Name) -> Option<&'z [u8]> {
        let zone = self
            .zones
            .iter()
            .filter(|z| z.apex.zone_of(target))
            .max_by_key(|z| z.apex.num_labels())?;
        if self.exists(target) {
            return self
                .cnames
                .get_key_value(&*wire_key(target))
                .map(|(k, _)| *k);
        }
        let labels = target.iter().count();
        for n in (zone.apex.iter().count()..labels).rev() {
            let ancestor = target.trim_to(n);
            if self.exists(&ancestor) {
                let wildcard = wire_key(&ancestor.prepend_label("*").ok()?);
                return self.cnames.get_key_value(&*wildcard).map(|(k, _)| *k);
            }
        }
        None
    }

    /// The CNAMEs the targets of the CNAME at `owner` lead to (its
    /// addresses' and its fail-safe values').
    fn targets(&self, owner: &[u8]) -> Vec<&'z [u8]> {
        let Some((_, r)) = self.cnames.get(owner) else {
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
            .chain(s.fail_safe())
            .filter_map(|v| match v {
                RData::CNAME(c) => self.next(&c.0),
                _ => None,
            })
            .collect()
    }
}
