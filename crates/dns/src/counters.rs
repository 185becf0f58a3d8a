//! Answer counters of a steered record's addresses: how many responses
//! carried each one (`gtm record stats`, `gtm_address_answers_total`), and
//! of its topology rules: how many responses each rule decided
//! (`gtm_topology_rule_answers_total`).
//!
//! A record's slot holds one counter per candidate and per fail-safe value,
//! and each answer group lists, per candidate, which counter it feeds; the
//! DNS path adds one to the counter of each address it sends. The counters
//! belong to the slot, not to the answer, so a health change (a new answer
//! in the same slot) keeps counting on them; a new configuration carries
//! them over while the record and the address stay.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering::Relaxed},
};

use serde::{Deserialize, Serialize};

/// One address of a record and the responses that carried it. The address
/// is known by a hash of its data, enough to carry its count from one
/// configuration to the next; its text comes from the record's steering
/// when it is shown. Sixteen bytes, however long the address.
#[derive(Debug)]
pub struct AddressCount {
    pub key: u64,
    pub count: AtomicU64,
}

/// A record's counters in one allocation: the responses that carried the
/// record (its key is the number of addresses), then one per address,
/// candidates then fail-safe values, then one per topology rule (a large
/// zone holds a slot per record, and two allocations for its counters
/// took 56 bytes where one takes 48).
#[derive(Debug, Clone)]
pub struct Counters(Arc<[AddressCount]>);

impl Counters {
    /// The counters of `keys`: the first `addresses` are the addresses',
    /// the rest the rules'; carried over from `previous` (the same
    /// record's counters in the configuration before). An unchanged list
    /// keeps the very counters, the record's with them, so no answer in
    /// flight during the change is lost; otherwise the record and each
    /// address and rule that stays start from their old counts.
    pub fn carried(keys: Vec<u64>, addresses: usize, previous: Option<&Counters>) -> Self {
        let addresses = addresses.min(keys.len());
        if let Some(previous) = previous
            && previous.address_count() == addresses
            && previous.0.len() == keys.len() + 1
            && previous.0[1..].iter().zip(&keys).all(|(p, k)| p.key == *k)
        {
            return previous.clone();
        }
        let record = AddressCount {
            key: addresses as u64,
            count: AtomicU64::new(previous.map_or(0, |p| p.answers().load(Relaxed))),
        };
        let counted = keys.into_iter().enumerate().map(|(i, key)| {
            let before = previous
                .and_then(|p| {
                    let list = if i < addresses {
                        p.addresses()
                    } else {
                        p.rules()
                    };
                    list.iter().find(|c| c.key == key)
                })
                .map_or(0, |c| c.count.load(Relaxed));
            AddressCount {
                key,
                count: AtomicU64::new(before),
            }
        });
        Self(std::iter::once(record).chain(counted).collect())
    }

    /// The responses whose answer section held the record.
    pub fn answers(&self) -> &AtomicU64 {
        // `carried` makes the record's counter first: never empty.
        &self.0[0].count
    }

    /// How many of the counters are the addresses'.
    pub fn address_count(&self) -> usize {
        usize::try_from(self.0[0].key).unwrap_or(usize::MAX)
    }

    /// One counter per address, candidates then fail-safe values.
    pub fn addresses(&self) -> &[AddressCount] {
        let end = self.address_count().saturating_add(1).min(self.0.len());
        self.0.get(1..end).unwrap_or_default()
    }

    /// One counter per topology rule, in the order written: the responses
    /// it decided.
    pub fn rules(&self) -> &[AddressCount] {
        let start = self.address_count().saturating_add(1).min(self.0.len());
        self.0.get(start..).unwrap_or_default()
    }

    /// The keys of the addresses, then of the rules, in order.
    pub fn keys(&self) -> Vec<u64> {
        self.0[1..].iter().map(|c| c.key).collect()
    }

    /// Whether `self` and `other` are the very same counters.
    pub fn ptr_eq(&self, other: &Counters) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A record's answer counts on one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordStats {
    /// `www.example.test/A`.
    pub record: String,
    /// Responses whose answer section held this record.
    pub answers: u64,
    /// Each address (candidates, then fail-safe values) and the responses
    /// that carried it; empty for a static record.
    pub addresses: Vec<AddressStats>,
    /// Each topology rule of the record, in order, and the responses it
    /// decided (docs/topology.md); empty without rules.
    #[serde(default)]
    pub rules: Vec<RuleStats>,
}

/// A topology rule's answer count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuleStats {
    /// Its place in the record's rules, from 1.
    pub rule: usize,
    /// `region:branch → datacenter east`.
    pub text: String,
    pub answers: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddressStats {
    pub address: String,
    pub answers: u64,
}

/// The counts of `counts`, each named by the text of the address at the
/// same place in `shown`; the same address listed twice (a fail-safe value
/// that is also a candidate) summed into one.
pub fn address_stats(
    shown: impl IntoIterator<Item = String>,
    counts: &[AddressCount],
) -> Vec<AddressStats> {
    let mut out: Vec<AddressStats> = Vec::new();
    for (address, c) in shown.into_iter().zip(counts) {
        let n = c.count.load(Relaxed);
        match out.iter_mut().find(|s| s.address == address) {
            Some(s) => s.answers += n,
            None => out.push(AddressStats {
                address,
                answers: n,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn an_unchanged_list_keeps_its_counters_and_a_changed_one_its_counts() {
        let first = Counters::carried(vec![1, 2], 2, None);
        first.answers().store(9, Relaxed);
        first.addresses()[0].count.store(5, Relaxed);
        first.addresses()[1].count.store(7, Relaxed);
        let same = Counters::carried(vec![1, 2], 2, Some(&first));
        assert!(first.ptr_eq(&same));
        let changed = Counters::carried(vec![2, 3], 2, Some(&first));
        assert!(!first.ptr_eq(&changed));
        assert_eq!(changed.answers().load(Relaxed), 9);
        assert_eq!(changed.keys(), [2, 3]);
        assert_eq!(
            address_stats(names(&["192.0.2.2", "192.0.2.3"]), changed.addresses()),
            [
                AddressStats {
                    address: "192.0.2.2".into(),
                    answers: 7
                },
                AddressStats {
                    address: "192.0.2.3".into(),
                    answers: 0
                }
            ]
        );
    }

    #[test]
    fn rule_counters_follow_the_addresses_and_keep_the_counts_of_rules_that_stay() {
        // Two addresses, then rules 10 and 11.
        let first = Counters::carried(vec![1, 2, 10, 11], 2, None);
        assert_eq!(first.addresses().len(), 2);
        assert_eq!(first.rules().len(), 2);
        first.rules()[1].count.store(6, Relaxed);
        first.addresses()[0].count.store(3, Relaxed);
        // Rule 10 gone, rule 12 new, rule 11 now first; an address added.
        let next = Counters::carried(vec![1, 2, 3, 11, 12], 3, Some(&first));
        assert_eq!(next.addresses().len(), 3);
        assert_eq!(next.addresses()[0].count.load(Relaxed), 3);
        let rules: Vec<u64> = next.rules().iter().map(|c| c.count.load(Relaxed)).collect();
        assert_eq!(rules, [6, 0]);
        // A rule key equal to an address key does not take its count.
        let odd = Counters::carried(vec![1, 2, 1], 2, Some(&first));
        assert_eq!(odd.rules()[0].count.load(Relaxed), 0);
        // The same keys split otherwise are not the same counters.
        let split = Counters::carried(vec![1, 2, 10, 11], 3, Some(&first));
        assert!(!split.ptr_eq(&first));
        assert_eq!(split.rules().len(), 1);
    }

    #[test]
    fn a_static_record_has_its_own_counter_and_no_address() {
        let counts = Counters::carried(Vec::new(), 0, None);
        counts.answers().store(4, Relaxed);
        assert!(counts.addresses().is_empty());
        let again = Counters::carried(Vec::new(), 0, Some(&counts));
        assert!(counts.ptr_eq(&again));
    }

    #[test]
    fn an_address_listed_twice_is_summed() {
        let counts = Counters::carried(vec![1, 1], 2, None);
        counts.addresses()[0].count.store(2, Relaxed);
        counts.addresses()[1].count.store(3, Relaxed);
        let stats = address_stats(names(&["192.0.2.1", "192.0.2.1"]), counts.addresses());
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].answers, 5);
    }
}
