//! Answer counters of a steered record's addresses: how many responses
//! carried each one (`gtm record stats`, `gtm_address_answers_total`).
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
/// record, then one per address, candidates then fail-safe values (a
/// large zone holds a slot per record, and two allocations for its
/// counters took 56 bytes where one takes 48).
#[derive(Debug, Clone)]
pub struct Counters(Arc<[AddressCount]>);

impl Counters {
    /// The counters for the addresses of `keys`, carried over from
    /// `previous` (the same record's counters in the configuration
    /// before). An unchanged list keeps the very counters, the record's
    /// with them, so no answer in flight during the change is lost;
    /// otherwise the record and each address that stays start from their
    /// old counts.
    pub fn carried(keys: Vec<u64>, previous: Option<&Counters>) -> Self {
        if let Some(previous) = previous
            && previous.addresses().len() == keys.len()
            && previous
                .addresses()
                .iter()
                .zip(&keys)
                .all(|(p, k)| p.key == *k)
        {
            return previous.clone();
        }
        let record = AddressCount {
            key: 0,
            count: AtomicU64::new(previous.map_or(0, |p| p.answers().load(Relaxed))),
        };
        let addresses = keys.into_iter().map(|key| {
            let before = previous
                .and_then(|p| p.addresses().iter().find(|c| c.key == key))
                .map_or(0, |c| c.count.load(Relaxed));
            AddressCount {
                key,
                count: AtomicU64::new(before),
            }
        });
        Self(std::iter::once(record).chain(addresses).collect())
    }

    /// The responses whose answer section held the record.
    pub fn answers(&self) -> &AtomicU64 {
        // `carried` makes the record's counter first: never empty.
        &self.0[0].count
    }

    /// One counter per address, candidates then fail-safe values.
    pub fn addresses(&self) -> &[AddressCount] {
        self.0.get(1..).unwrap_or_default()
    }

    /// The keys of the addresses, in order.
    pub fn keys(&self) -> Vec<u64> {
        self.addresses().iter().map(|c| c.key).collect()
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
        let first = Counters::carried(vec![1, 2], None);
        first.answers().store(9, Relaxed);
        first.addresses()[0].count.store(5, Relaxed);
        first.addresses()[1].count.store(7, Relaxed);
        let same = Counters::carried(vec![1, 2], Some(&first));
        assert!(first.ptr_eq(&same));
        let changed = Counters::carried(vec![2, 3], Some(&first));
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
    fn a_static_record_has_its_own_counter_and_no_address() {
        let counts = Counters::carried(Vec::new(), None);
        counts.answers().store(4, Relaxed);
        assert!(counts.addresses().is_empty());
        let again = Counters::carried(Vec::new(), Some(&counts));
        assert!(counts.ptr_eq(&again));
    }

    #[test]
    fn an_address_listed_twice_is_summed() {
        let counts = Counters::carried(vec![1, 1], None);
        counts.addresses()[0].count.store(2, Relaxed);
        counts.addresses()[1].count.store(3, Relaxed);
        let stats = address_stats(names(&["192.0.2.1", "192.0.2.1"]), counts.addresses());
        assert_eq!(stats.len(), 1);
        assert_eq!(stats[0].answers, 5);
    }
}
