//! Check instances: each check bound to what it probes, derived from a
//! compiled configuration. Plain data the scheduler runs and the engine
//! keeps state for; deriving them needs only the model.

use std::collections::{HashMap, HashSet};

use gtm_model::{
    compile::{CheckSpec, Compiled},
    condition::CheckRef,
    config::CheckType,
};

/// A check bound to what it probes: what the scheduler runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub check: CheckRef,
    pub spec: CheckSpec,
    /// Host header / TLS name: the record's name, or the address for
    /// wildcard records and scenario references.
    pub server_name: String,
}

/// Every check instance of a configuration. `zones`: per zone, in order,
/// the checks its steered records' addresses follow, each with its server
/// name, in record order (the engine keeps them per zone). A check bound
/// to the same target is one instance: the first reference names it.
pub fn instances<'a>(
    compiled: &Compiled,
    zones: impl IntoIterator<Item = &'a [(CheckRef, String)]>,
) -> Vec<Instance> {
    let by_name: HashMap<&str, &CheckSpec> = compiled
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let mut out: Vec<Instance> = Vec::new();
    let mut seen: HashSet<CheckRef> = HashSet::new();
    let mut push = |check: &CheckRef, server_name: String| {
        if seen.contains(check) {
            return;
        }
        if let Some(spec) = by_name.get(check.name.as_str()) {
            seen.insert(check.clone());
            out.push(Instance {
                check: check.clone(),
                spec: (*spec).clone(),
                server_name,
            });
        }
    };
    for (check, server_name) in zones.into_iter().flatten() {
        push(check, server_name.clone());
    }
    for s in &compiled.scenarios {
        for r in s
            .condition
            .refs()
            .into_iter()
            .chain(s.verify.iter().flat_map(|v| v.refs()))
        {
            let name = match (
                &r.address,
                by_name.get(r.name.as_str()).and_then(|c| c.target.clone()),
            ) {
                (Some(ip), _) => ip.to_string(),
                (None, Some(target)) => target,
                (None, None) => r.name.clone(),
            };
            push(r, name);
        }
    }
    for c in &compiled.checks {
        if c.target.is_some() || c.kind == CheckType::Manual {
            push(
                &CheckRef {
                    name: c.name.clone(),
                    address: None,
                },
                c.target.clone().unwrap_or_default(),
            );
        }
    }
    out
}
