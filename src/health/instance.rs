//! Check instances: each check bound to what it probes, derived from a
//! compiled configuration. Plain data the scheduler runs and the engine
//! keeps state for; deriving them needs only the model.

use std::collections::HashMap;

use crate::model::{
    compile::{CheckSpec, Compiled, Content, Hc},
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

/// Every check instance of a configuration.
pub fn instances(compiled: &Compiled) -> Vec<Instance> {
    let by_name: HashMap<&str, &CheckSpec> = compiled
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let mut out: Vec<Instance> = Vec::new();
    let mut push = |check: CheckRef, server_name: String| {
        if out.iter().any(|i| i.check == check) {
            return;
        }
        if let Some(spec) = by_name.get(check.name.as_str()) {
            out.push(Instance {
                check,
                spec: (*spec).clone(),
                server_name,
            });
        }
    };
    for zone in &compiled.zones {
        for record in &zone.records {
            let Content::Steered(steering) = &record.content else {
                continue;
            };
            for a in &steering.addresses {
                if let Hc::Check(r) = &a.hc {
                    let owner = record.owner.to_string();
                    let name = if owner.starts_with("*.") {
                        a.display()
                    } else {
                        owner.trim_end_matches('.').to_string()
                    };
                    push((**r).clone(), name);
                }
            }
        }
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
            push(r.clone(), name);
        }
    }
    for c in &compiled.checks {
        if c.target.is_some() || c.kind == CheckType::Manual {
            push(
                CheckRef {
                    name: c.name.clone(),
                    address: None,
                },
                c.target.clone().unwrap_or_default(),
            );
        }
    }
    out
}
