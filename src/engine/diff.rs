//! What a configuration apply changes, object by object.

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
    for d in &new.domains {
        let path = format!("domain {}", d.name);
        match old.domains.iter().find(|o| o.name == d.name) {
            None => out.push(format!("+ {path}")),
            Some(o) => {
                let (mut a, mut b) = (o.clone(), d.clone());
                a.records.clear();
                b.records.clear();
                if a != b {
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
    for n in new {
        match old.iter().find(|o| key(o) == key(n)) {
            None => out.push(format!("+ {kind} {}", key(n))),
            Some(o) if o != n => out.push(format!("~ {kind} {}", key(n))),
            Some(_) => {}
        }
    }
    for o in old {
        if !new.iter().any(|n| key(n) == key(o)) {
            out.push(format!("- {kind} {}", key(o)));
        }
    }
}
