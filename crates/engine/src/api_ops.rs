//! What the API asks of the engine beyond its state reports: the GeoIP
//! database the DNS path answers with (read it, swap a new one in), the
//! DNS path's counters, and the check instance a "Test now" probes. They live here so that the API
//! names no engine internals (the DNS state, the instance list).

use std::{
    net::IpAddr,
    sync::{Arc, atomic::Ordering::Relaxed},
};

use super::{Engine, RecordKey};
use hickory_server::proto::rr::{Name, RecordType};

use gtm_dns::{
    counters::{RecordStats, address_stats},
    snapshot::label,
};
use gtm_geo::Geo;
use gtm_health::Instance;
use gtm_model::{
    compile::{CheckSpec, Steering},
    condition::CheckRef,
    config::CheckType,
};

/// Why "Test now" does not probe a check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TestRefused {
    #[error("check \"{0}\" is manual: it is set by an operator, not probed")]
    Manual(String),
    #[error(
        "check \"{0}\" is a template: give the address to probe (gtm check test {0} --address IP)"
    )]
    NeedsAddress(String),
    #[error("check \"{0}\" has a fixed target; it takes no address")]
    TakesNoAddress(String),
}

impl Engine {
    /// The GeoIP database the DNS path answers with now.
    pub fn geoip(&self) -> Arc<Geo> {
        self.dns.geo.load_full()
    }

    /// Makes `db` the database of its kind the DNS path answers with, from
    /// the next query on (the caller has checked it whole); the other
    /// kind's stays.
    pub fn install_geoip(&self, db: gtm_geo::Db) {
        let db = Arc::new(db);
        self.dns
            .geo
            .rcu(|geo| Arc::new(geo.with_shared(Arc::clone(&db))));
    }

    /// The DNS path's query and response metrics, in Prometheus text.
    pub fn write_dns_metrics(&self, out: &mut gtm_model::metrics::Text) {
        self.dns.metrics.write(out);
        self.dns.rrl.write(out);
        self.dns.cookies.write(out);
        self.dns.transfers.write(out);
        self.dns.dnstap.write(out);
    }

    /// Every record with the responses it was answered in (nonzero only),
    /// as (`www.example.test/A`, count).
    pub fn answer_counts(&self) -> Vec<(String, u64)> {
        self.dns.snapshot.load().answer_counts()
    }

    /// Every steered record's addresses with the responses that carried
    /// each (nonzero only), as (`www.example.test/A`, `192.0.2.10`, count).
    pub fn address_counts(&self) -> Vec<(String, String, u64)> {
        self.slot_counts(|_, r, slot| {
            address_stats(shown(r.steering()), slot.counters.addresses())
                .into_iter()
                .map(|a| (a.address, a.answers))
                .collect()
        })
    }

    /// Every steered record's topology rules with the responses each
    /// decided (nonzero only), as (`www.example.test/A`, `1: region:branch
    /// → datacenter east`, count).
    pub fn rule_counts(&self) -> Vec<(String, String, u64)> {
        self.slot_counts(|inner, r, slot| {
            rule_stats(r.steering(), inner, slot.counters.rules())
                .into_iter()
                .map(|s| (format!("{}: {}", s.rule, s.text), s.answers))
                .collect()
        })
    }

    /// The named counts `of` gives for each steered record and its slot,
    /// nonzero only, as (record, name, count), sorted.
    fn slot_counts(
        &self,
        of: impl Fn(&crate::Inner, &crate::Steered, &gtm_dns::snapshot::RrsetSlot) -> Vec<(String, u64)>,
    ) -> Vec<(String, String, u64)> {
        let snapshot = self.dns.snapshot.load();
        let inner = self.lock();
        // The snapshot's steered slots are in the order of the records.
        let mut out: Vec<(String, String, u64)> = inner
            .records
            .iter()
            .zip(snapshot.steered_slots())
            .flat_map(|(r, slot)| {
                of(&inner, r, slot)
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(name, n)| (r.label(), name, n))
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort();
        out
    }

    /// The answer counts of a record on this device (`gtm record stats`),
    /// `None` when no record has that name and type.
    pub fn record_stats(
        &self,
        name: &Name,
        rtype: RecordType,
        view: Option<&str>,
    ) -> Option<RecordStats> {
        let snapshot = self.dns.snapshot.load();
        let index = match view {
            None => 0,
            Some(v) => snapshot.view_index(v)?,
        };
        let slot = snapshot.slot_in(name, rtype, index)?;
        let record = match view {
            None => label(name, rtype),
            Some(_) => format!("{}@{}", label(name, rtype), snapshot.view_name(index)),
        };
        let key = RecordKey::of(&record);
        let inner = self.lock();
        let found = inner
            .records
            .iter()
            .find(|r| key.as_ref().is_some_and(|key| r.is(key)));
        let addresses = found
            .map(|r| address_stats(shown(r.steering()), slot.counters.addresses()))
            .unwrap_or_default();
        let rules = found
            .map(|r| rule_stats(r.steering(), &inner, slot.counters.rules()))
            .unwrap_or_default();
        Some(RecordStats {
            record,
            answers: slot.counters.answers().load(Relaxed),
            addresses,
            rules,
        })
    }

    /// The instance "Test now" probes for `spec` (a saved check, or one
    /// not saved) against `address`: the one the scheduler runs when there
    /// is one, so the probe sends the same Host and TLS name; else the
    /// address (or fixed target) stands for the name.
    pub fn test_instance(
        &self,
        spec: CheckSpec,
        address: Option<IpAddr>,
    ) -> Result<Instance, TestRefused> {
        let name = spec.name.clone();
        if spec.kind == CheckType::Manual {
            return Err(TestRefused::Manual(name));
        }
        match (&spec.target, address) {
            (None, None) => return Err(TestRefused::NeedsAddress(name)),
            (Some(_), Some(_)) => return Err(TestRefused::TakesNoAddress(name)),
            _ => {}
        }
        let check = CheckRef { name, address };
        let server_name = self
            .instances
            .borrow()
            .iter()
            .find(|i| i.check == check)
            .map_or_else(
                || {
                    address.map_or_else(
                        || spec.target.clone().unwrap_or_default(),
                        |a| a.to_string(),
                    )
                },
                |i| i.server_name.clone(),
            );
        Ok(Instance {
            check,
            spec,
            server_name,
        })
    }
}

/// The text of each counted address of a record, in counter order:
/// candidates, then fail-safe values.
fn shown(steering: &Steering) -> impl Iterator<Item = String> + '_ {
    steering
        .addresses
        .iter()
        .map(|a| a.display())
        .chain(steering.fail_safe().iter().map(ToString::to_string))
}

/// Each topology rule of `steering` with its count among `counts` (the
/// slot's rule counters, in the same order).
fn rule_stats(
    steering: &gtm_model::compile::Steering,
    inner: &crate::Inner,
    counts: &[gtm_dns::counters::AddressCount],
) -> Vec<gtm_dns::counters::RuleStats> {
    steering
        .rules()
        .iter()
        .zip(counts)
        .enumerate()
        .map(|(i, (r, c))| gtm_dns::counters::RuleStats {
            rule: i + 1,
            text: format!(
                "{} → {}",
                crate::answered::rule_client(&inner.compiled.topology, r),
                crate::answered::rule_target(steering, &inner.compiled.datacenters, r)
            ),
            answers: c.count.load(Relaxed),
        })
        .collect()
}
