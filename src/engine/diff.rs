//! What a configuration apply changes, object by object.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::model::Config;

/// Lines like `+ domain example.test / record api A`, `~ check web`,
/// `- scenario old`, in file order.
pub fn diff(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    objects(
        &mut out,
        "datacenter",
        &old.datacenters,
        &new.datacenters,
        |d| d.name.clone(),
    );
    objects(&mut out, "check", &old.checks, &new.checks, |c| {
        c.name.clone()
    });
    objects(&mut out, "scenario", &old.scenarios, &new.scenarios, |s| {
        s.name.clone()
    });
    objects(&mut out, "service", &old.services, &new.services, |s| {
        s.name.clone()
    });
    let old_domains: HashMap<&str, &crate::model::config::Domain> =
        old.domains.iter().map(|d| (d.name.as_str(), d)).collect();
    for d in &new.domains {
        let path = format!("domain {}", d.name);
        match old_domains.get(d.name.as_str()) {
            None => out.push(format!("+ {path}")),
            Some(o) => {
                if !same_header(o, d) {
                    out.push(format!("~ {path}"));
                }
                objects(
                    &mut out,
                    &format!("{path} / record"),
                    &o.records,
                    &d.records,
                    |r| format!("{} {}", r.name, r.kind.as_str()),
                );
            }
        }
    }
    for o in &old.domains {
        if !new.domains.iter().any(|d| d.name == o.name) {
            out.push(format!("- domain {}", o.name));
        }
    }
    out
}

fn objects<T: PartialEq + Serialize>(
    out: &mut Vec<String>,
    kind: &str,
    old: &[T],
    new: &[T],
    key: impl Fn(&T) -> String,
) {
    // By key: a domain of 100,000 records diffs in linear time.
    let old_by_key: HashMap<String, &T> = old.iter().map(|o| (key(o), o)).collect();
    let new_keys: HashSet<String> = new.iter().map(&key).collect();
    for n in new {
        let k = key(n);
        match old_by_key.get(&k) {
            None => out.push(format!("+ {kind} {k}")),
            Some(o) if *o != n => out.push(format!("~ {kind} {k}")),
            Some(_) => {}
        }
    }
    for o in old {
        let k = key(o);
        if !new_keys.contains(&k) {
            out.push(format!("- {kind} {k}"));
        }
    }
}

/// A domain's own keys (not its records) are equal. Destructured so that a
/// new key cannot be forgotten here.
fn same_header(a: &crate::model::config::Domain, b: &crate::model::config::Domain) -> bool {
    let crate::model::config::Domain {
        name,
        ttl,
        mode,
        main_dc,
        dr_dc,
        dc_order,
        dcs_to_select,
        nameservers,
        soa,
        records: _,
    } = a;
    *name == b.name
        && *ttl == b.ttl
        && *mode == b.mode
        && *main_dc == b.main_dc
        && *dr_dc == b.dr_dc
        && *dc_order == b.dc_order
        && *dcs_to_select == b.dcs_to_select
        && *nameservers == b.nameservers
        && *soa == b.soa
}
