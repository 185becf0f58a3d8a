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

use hickory_server::proto::rr::RData;
use serde::{Deserialize, Serialize};

/// One address of a record and the responses that carried it.
#[derive(Debug)]
pub struct AddressCount {
    pub data: RData,
    pub count: AtomicU64,
}

/// The counters of one record's addresses, candidates then fail-safe values.
pub type AddressCounts = Arc<[AddressCount]>;

/// The counters for `values`, carried over from `previous` (the same
/// record's counters in the configuration before). An unchanged list keeps
/// the very counters, so no answer in flight during the change is lost;
/// otherwise each address that stays starts from its old count.
pub fn carried(values: Vec<RData>, previous: Option<&AddressCounts>) -> AddressCounts {
    if let Some(previous) = previous
        && previous.len() == values.len()
        && previous.iter().zip(&values).all(|(p, v)| p.data == *v)
    {
        return previous.clone();
    }
    values
        .into_iter()
        .map(|data| {
            let before = previous
                .and_then(|p| p.iter().find(|c| c.data == data))
                .map_or(0, |c| c.count.load(Relaxed));
            AddressCount {
                data,
                count: AtomicU64::new(before),
            }
        })
        .collect()
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

/// The counts of `counts`, the same address listed twice (a fail-safe value
/// that is also a candidate) summed into one.
pub fn address_stats(counts: &[AddressCount]) -> Vec<AddressStats> {
    let mut out: Vec<AddressStats> = Vec::new();
    for c in counts {
        let address = c.data.to_string();
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
    use std::net::Ipv4Addr;

    use hickory_server::proto::rr::rdata::A;

    use super::*;

    fn a(last: u8) -> RData {
        RData::A(A(Ipv4Addr::new(192, 0, 2, last)))
    }

    #[test]
    fn an_unchanged_list_keeps_its_counters_and_a_changed_one_its_counts() {
        let first = carried(vec![a(1), a(2)], None);
        first[0].count.store(5, Relaxed);
        first[1].count.store(7, Relaxed);
        let same = carried(vec![a(1), a(2)], Some(&first));
        assert!(Arc::ptr_eq(&first, &same));
        let changed = carried(vec![a(2), a(3)], Some(&first));
        let stats = address_stats(&changed);
        assert_eq!(
            stats,
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
    fn an_address_listed_twice_is_summed() {
        let counts = carried(vec![a(1), a(1)], None);
        counts[0].count.store(2, Relaxed);
        counts[1].count.store(3, Relaxed);
        assert_eq!(address_stats(&counts)[0].answers, 5);
        assert_eq!(address_stats(&counts).len(), 1);
    }
}
