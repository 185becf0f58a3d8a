//! What a new parse has in common with the configuration a device holds,
//! taken from the one held: a text applied again, or changed in a few
//! lines, parses to objects equal to those already held, and keeping both
//! would hold the configuration twice while the new one is applied (and,
//! for a large domain, would compare every record again where a pointer
//! says they are the same).
//!
//! Records are matched by their place in their domain, counted from its
//! start and from its end, so a change in the middle of a list still
//! shares what lies before and after it.

use std::{collections::HashMap, sync::Arc};

use super::config::{Config, Domain, Record};

/// The configuration held, indexed for [`Like::share`].
#[derive(Debug)]
pub(super) struct Like<'a> {
    config: &'a Config,
    domains: HashMap<&'a str, &'a Arc<Domain>>,
}

impl<'a> Like<'a> {
    pub(super) fn new(config: &'a Config) -> Self {
        Like {
            config,
            domains: config
                .domains
                .iter()
                .map(|d| (d.name.as_str(), d))
                .collect(),
        }
    }

    /// The held domain named `name`.
    pub(super) fn domain(&self, name: &str) -> Option<&'a Arc<Domain>> {
        self.domains.get(name).copied()
    }

    /// Takes into `config` (a whole new parse) each datacenter, check,
    /// scenario and service equal to the held one in its place.
    pub(super) fn share_lists(&self, config: &mut Config) {
        share_list(&mut config.datacenters, &self.config.datacenters);
        share_list(&mut config.checks, &self.config.checks);
        share_list(&mut config.scenarios, &self.config.scenarios);
        share_list(&mut config.services, &self.config.services);
    }

    /// Takes into `piece` (the parse of a piece of the text) each domain
    /// equal to the held one of its name, and of the others each record
    /// equal to the held domain's at the same place.
    pub(super) fn share_domains(&self, piece: &mut Config) {
        for domain in &mut piece.domains {
            let Some(held) = self.domain(&domain.name) else {
                continue;
            };
            if let Some(d) = Arc::get_mut(domain) {
                let total = d.records.len();
                share_records(&mut d.records, 0, total, &held.records);
            }
            share_domain(domain, held);
        }
    }
}

/// Each of `list` taken from `held` where the one at the same place is
/// equal.
fn share_list<T: PartialEq>(list: &mut [Arc<T>], held: &[Arc<T>]) {
    for (item, h) in list.iter_mut().zip(held) {
        if **h == **item {
            *item = h.clone();
        }
    }
}

/// Each of `records`, records `first..` of a domain of `total` records,
/// taken from `held` (the held domain's records) where the record at the
/// same place from the list's start, or from its end, is equal.
pub(super) fn share_records(
    records: &mut [Arc<Record>],
    first: usize,
    total: usize,
    held: &[Arc<Record>],
) {
    for (k, record) in records.iter_mut().enumerate() {
        let i = first + k;
        let from_end = (held.len() + i).checked_sub(total);
        for j in [Some(i), from_end].into_iter().flatten() {
            if let Some(h) = held.get(j)
                && **h == **record
            {
                *record = h.clone();
                break;
            }
        }
    }
}

/// `domain` replaced by `held` when they are equal (its records shared
/// first, this compares them by pointer).
pub(super) fn share_domain(domain: &mut Arc<Domain>, held: &Arc<Domain>) {
    if **domain == **held {
        *domain = held.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_like;

    fn text(records: &[&str]) -> String {
        crate::domain_text("ns1.a.test", records)
    }

    /// What is equal is the held object itself; what changed is new; the
    /// result equals a parse of its own.
    #[test]
    fn equal_objects_are_taken_from_the_held_configuration() {
        let held_text = format!(
            "[[datacenter]]\nname = \"dc1\"\n[[datacenter]]\nname = \"dc2\"\n{}",
            text(&[
                "a A 192.0.2.1",
                "b A 192.0.2.2",
                "c A 192.0.2.3",
                "d A 192.0.2.4"
            ])
        );
        let held = crate::parse(&held_text).unwrap();
        // The same text: every object shared, the domain itself too.
        let same = held_text.clone();
        let again = parse_like(&same, Some(&held)).unwrap();
        assert_eq!(again, held);
        assert!(Arc::ptr_eq(&again.domains[0], &held.domains[0]));
        assert!(Arc::ptr_eq(&again.datacenters[1], &held.datacenters[1]));
        // A record inserted in the middle, and a datacenter changed.
        let changed = format!(
            "[[datacenter]]\nname = \"dc1\"\n[[datacenter]]\nname = \"dc3\"\n{}",
            text(&[
                "a A 192.0.2.1",
                "b A 192.0.2.2",
                "x A 192.0.2.9",
                "c A 192.0.2.3",
                "d A 192.0.2.4"
            ])
        );
        let next = parse_like(&changed, Some(&held)).unwrap();
        assert_eq!(next, crate::parse(&changed).unwrap());
        assert!(Arc::ptr_eq(&next.datacenters[0], &held.datacenters[0]));
        assert!(!Arc::ptr_eq(&next.datacenters[1], &held.datacenters[1]));
        assert!(!Arc::ptr_eq(&next.domains[0], &held.domains[0]));
        let (new, old) = (&next.domains[0].records, &held.domains[0].records);
        let shared: Vec<bool> = new
            .iter()
            .map(|r| old.iter().any(|o| Arc::ptr_eq(o, r)))
            .collect();
        assert_eq!(shared, [true, true, false, true, true]);
    }
}
