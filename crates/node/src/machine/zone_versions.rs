//! Per domain, the configuration version that last changed it: the SOA
//! serial its zone gives (docs/configuration.md, "SOA serial"), the same on
//! every device and after a restart because it is replicated state.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use gtm_cluster::{Map, Write};

use gtm_model::{
    compile::{Compiled, ZoneSpec},
    config::{Config, Domain},
};

const ZONE_VERSION_PREFIX: &str = "zone-version/";

/// Per domain (lower case, no final dot), the configuration version that
/// last changed it: its table, or the datacenters, checks, scenarios or
/// services its steered records read. A domain missing here (kept by a
/// gtm before zone versions) follows the configuration version.
pub fn zone_versions(kv: &Map) -> HashMap<String, u64> {
    kv.range(ZONE_VERSION_PREFIX.to_string()..)
        .take_while(|(k, _)| k.starts_with(ZONE_VERSION_PREFIX))
        .filter_map(|(k, v)| {
            let domain = k.strip_prefix(ZONE_VERSION_PREFIX)?;
            let version = std::str::from_utf8(v).ok()?.parse().ok()?;
            Some((domain.to_string(), version))
        })
        .collect()
}

/// What keeps the zone versions of `new` (compiled as `compiled`), the
/// configuration `version` makes from `current` (at `before`): a domain
/// that changed, or every domain when what steered records read changed,
/// gets `version`; one that did not keeps its version (or gets `before`,
/// what it served, when it had none yet); a domain that is gone loses its
/// key. `adopt`: every domain gets `version`.
pub(super) fn zone_version_writes(
    kv: &Map,
    current: &Config,
    new: &Config,
    compiled: &Compiled,
    (before, version): (u64, u64),
    adopt: bool,
) -> Vec<Write> {
    let known = zone_versions(kv);
    let globals = current.steers_alike(new);
    let old: HashMap<&str, &Arc<Domain>> = current
        .domains
        .iter()
        .map(|d| (d.name.as_str(), d))
        .collect();
    let mut writes = Vec::new();
    let mut kept = HashSet::new();
    let domains: HashMap<String, &Arc<Domain>> = new
        .domains
        .iter()
        .map(|d| (d.name.trim_end_matches('.').to_ascii_lowercase(), d))
        .collect();
    for zone in &compiled.zones {
        let key = zone.key();
        let Some(domain) = domains.get(&gtm_model::compile::zone_key(&zone.apex)) else {
            continue;
        };
        let same = !adopt
            && globals
            && old
                .get(domain.name.as_str())
                .is_some_and(|o| same_zone(o, domain, zone));
        let value = match (same, known.get(&key)) {
            (true, Some(_)) => None,
            (true, None) => Some(before),
            (false, _) => Some(version),
        };
        if let Some(value) = value {
            writes.push(Write::Put {
                key: format!("{ZONE_VERSION_PREFIX}{key}"),
                value: value.to_string().into_bytes(),
            });
        }
        kept.insert(key);
    }
    writes.extend(
        known
            .into_keys()
            .filter(|k| !kept.contains(k))
            .map(|k| Write::Delete {
                key: format!("{ZONE_VERSION_PREFIX}{k}"),
            }),
    );
    writes
}

/// Whether `zone` (of domain `new`) answers as it did in `old`: the
/// domain is the same, or its fields and the records the zone can answer
/// are (a view's zone: its own and those in no view; the zone every client
/// gets: those in no view), so that a change in one view leaves the other
/// zones' serials (docs/views.md).
fn same_zone(old: &Arc<Domain>, new: &Arc<Domain>, zone: &ZoneSpec) -> bool {
    if old == new {
        return true;
    }
    // Without views a domain is its one zone, and it changed.
    if !old.has_views() && !new.has_views() {
        return false;
    }
    fn seen<'a>(
        d: &'a Domain,
        view: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<gtm_model::config::Record>> {
        d.records
            .iter()
            .filter(move |r| r.view().is_none() || r.view() == view)
    }
    let view = zone.view.as_ref().map(|v| &*v.name);
    old.same_but_records(new) && seen(old, view).eq(seen(new, view))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{
        command::{Action, Outcome},
        machine::{GtmMachine, apply_for_test},
    };

    fn domain(name: &str, txt: &str) -> String {
        format!(
            "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n"
        )
    }

    fn apply(machine: &GtmMachine, kv: &mut Map, index: u64, text: String) {
        let command = crate::machine::admin_command(Action::ApplyConfig { text });
        let outcome = apply_for_test(machine, kv, index, &command);
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
    }

    fn versions(kv: &Map) -> Vec<(String, u64)> {
        let mut v: Vec<_> = zone_versions(kv).into_iter().collect();
        v.sort();
        v
    }

    #[test]
    fn a_domain_keeps_the_version_that_last_changed_it() {
        let machine = GtmMachine::default();
        let mut kv = BTreeMap::new();
        let both = |a: &str, b: &str| format!("{}{}", domain("A.test", a), domain("b.test", b));
        apply(&machine, &mut kv, 1, both("1", "1"));
        let at = |a, b| vec![("a.test".to_string(), a), ("b.test".to_string(), b)];
        assert_eq!(versions(&kv), at(1, 1), "keyed by the zone, in lower case");
        apply(&machine, &mut kv, 2, both("1", "2"));
        assert_eq!(versions(&kv), at(1, 2));

        // A store from before zone versions: an unchanged domain keeps the
        // version it served, the one before this command.
        kv.remove("zone-version/a.test");
        apply(&machine, &mut kv, 3, both("1", "3"));
        assert_eq!(versions(&kv), at(2, 3));

        // What steered records read changes every domain.
        let check = "[[check]]\nname = \"c\"\ntype = \"tcp\"\ntarget = \"127.0.0.1\"\nport = 9\n";
        apply(&machine, &mut kv, 4, format!("{check}{}", both("1", "3")));
        assert_eq!(versions(&kv), at(4, 4));

        // A domain that is gone loses its version.
        apply(
            &machine,
            &mut kv,
            5,
            format!("{check}{}", domain("A.test", "1")),
        );
        assert_eq!(versions(&kv), [("a.test".to_string(), 4)]);
    }
}
