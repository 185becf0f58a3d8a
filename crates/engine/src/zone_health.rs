//! What each zone's steered records read of health (the checks and
//! scenarios they follow, the check instances they make), kept per
//! compiled zone: a zone that a change did not touch is the same compiled
//! zone (the same `Arc`), and its records are not walked again to find the
//! dependency index and the check instances of a configuration.

use std::sync::Arc;

use gtm_model::{
    compile::{Content, DrCondition, Hc, ModeSpec, ZoneSpec},
    condition::CheckRef,
};

/// One zone's steered records as health sees them. Records are named by
/// their index among the zone's steered records.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ZoneHealth {
    /// How many steered records the zone has.
    pub steered: usize,
    /// A check a record's address follows, per address.
    pub checks: Vec<(CheckRef, usize)>,
    /// A scenario a record's address or DR condition follows.
    pub scenarios: Vec<(Box<str>, usize)>,
    /// The check instances the records make, in record order: the check
    /// and its server name (the record's name, or the address for a
    /// wildcard record).
    pub instances: Vec<(CheckRef, String)>,
}

impl ZoneHealth {
    pub(super) fn of(zone: &ZoneSpec) -> Self {
        let mut health = ZoneHealth::default();
        let steered = zone.records.iter().filter_map(|r| match &r.content {
            Content::Steered(s) => Some((r, s)),
            _ => None,
        });
        for (i, (record, steering)) in steered.enumerate() {
            health.steered = i + 1;
            for a in &steering.addresses {
                match &a.hc {
                    Hc::Check(check) => {
                        health.checks.push(((**check).clone(), i));
                        let owner = record.owner_name().to_string();
                        let name = if owner.starts_with("*.") {
                            a.display()
                        } else {
                            owner.trim_end_matches('.').to_string()
                        };
                        health.instances.push(((**check).clone(), name));
                    }
                    Hc::Scenario(s) => health.scenarios.push((s.as_str().into(), i)),
                    Hc::Static | Hc::Disabled => {}
                }
            }
            if let ModeSpec::DisasterRecovery(spec) = &steering.mode
                && let DrCondition::Scenario(s) = &spec.condition
            {
                health.scenarios.push((s.clone(), i));
            }
        }
        health
    }
}

/// Each zone's health, taken from `before` (the zones of the configuration
/// before, with theirs) for a zone that is the same compiled zone there.
pub(super) fn of_zones(
    zones: &[Arc<ZoneSpec>],
    before: &[(Arc<ZoneSpec>, Arc<ZoneHealth>)],
) -> Vec<(Arc<ZoneSpec>, Arc<ZoneHealth>)> {
    let known: std::collections::HashMap<*const ZoneSpec, &Arc<ZoneHealth>> = before
        .iter()
        .map(|(zone, health)| (Arc::as_ptr(zone), health))
        .collect();
    zones
        .iter()
        .map(|zone| {
            let health = match known.get(&Arc::as_ptr(zone)) {
                Some(health) => Arc::clone(health),
                None => Arc::new(ZoneHealth::of(zone)),
            };
            (Arc::clone(zone), health)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(web: &str) -> gtm_model::Compiled {
        let text = format!(
            r#"
[[datacenter]]
name = "dc1"

[[check]]
name = "web"
type = "tcp"
port = 80

[[scenario]]
name = "maint"
condition = "web@192.0.2.50"

[[domain]]
name = "a.test"
nameservers = ["ns1.a.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "{web}", dc = "dc1", hc = "check:web" }}, {{ ip = "192.0.2.2", dc = "dc1", hc = "scenario:maint" }}]

[[domain.record]]
name = "*.w"
type = "A"
addresses = [{{ ip = "192.0.2.3", dc = "dc1", hc = "check:web" }}]

[[domain]]
name = "b.test"
nameservers = ["ns1.b.test"]

[[domain.record]]
name = "txt"
type = "TXT"
values = ["static"]

[[domain.record]]
name = "api"
type = "A"
addresses = [{{ ip = "192.0.2.9", dc = "dc1", hc = "check:web" }}]
"#
        );
        gtm_model::compile(&gtm_model::parse(&text).unwrap()).unwrap()
    }

    #[test]
    fn a_zone_says_what_its_steered_records_follow() {
        let c = compiled("192.0.2.1");
        let a = ZoneHealth::of(&c.zones[0]);
        // A check on a record's address is bound to that address.
        let web = |address: &str| CheckRef {
            name: "web".into(),
            address: Some(address.parse().unwrap()),
        };
        assert_eq!(a.steered, 2);
        assert_eq!(a.checks, [(web("192.0.2.1"), 0), (web("192.0.2.3"), 1)]);
        assert_eq!(a.scenarios, [("maint".into(), 0)]);
        assert_eq!(
            a.instances,
            [
                (web("192.0.2.1"), "www.a.test".to_string()),
                (web("192.0.2.3"), "192.0.2.3".to_string())
            ]
        );
        // Indices count steered records only (the TXT is not one).
        let b = ZoneHealth::of(&c.zones[1]);
        assert_eq!(
            (b.steered, &b.checks[..]),
            (1, &[(web("192.0.2.9"), 0)][..])
        );
    }

    #[test]
    fn a_zone_the_change_did_not_touch_keeps_its_health() {
        let first = compiled("192.0.2.1");
        let before = of_zones(&first.zones, &[]);
        // A zone compiled again is walked again; the same zone is not.
        let mut zones = compiled("192.0.2.7").zones;
        zones[1] = first.zones[1].clone();
        let after = of_zones(&zones, &before);
        assert!(!Arc::ptr_eq(&after[0].1, &before[0].1));
        assert!(Arc::ptr_eq(&after[1].1, &before[1].1));
        for (zone, health) in &after {
            assert_eq!(**health, ZoneHealth::of(zone));
        }
    }
}
