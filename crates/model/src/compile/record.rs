//! `[[domain.record]]`: a record's owner and its static or steered content.

use hickory_server::proto::rr::Name;

use super::{
    Content, Cx, DomainCx, RecordSpec,
    rdata::{fqdn, static_rdata},
};
use crate::{
    config::{Record, RecordOptions, RecordType},
    names::wire_key,
};

impl Cx {
    /// A record of the domain `within` describes, refused whole on any
    /// error.
    pub(super) fn record(
        &mut self,
        path: &str,
        r: &Record,
        within: &DomainCx,
    ) -> Option<RecordSpec> {
        let before = self.errors.len();
        let owner = self.owner(path, r, within.apex)?;
        let ttl = r.ttl.unwrap_or(within.ttl);
        if !self.servable(path, r, &owner, within) {
            return None;
        }
        let content = if let Some(target) = &r.options().alias {
            Content::Alias(Box::new(super::AliasTarget(
                self.alias(path, r, target, within)?,
            )))
        } else if r.kind.is_steerable() || (r.kind.steers_values() && !r.addresses.is_empty()) {
            if !r.values().is_empty() {
                let why = if r.kind.steers_values() {
                    "take values = [...] (static) or addresses = [...] (steered), not both"
                } else {
                    "take addresses = [...], not values"
                };
                self.err(path, format!("{} records {why}", r.kind.as_str()));
            }
            Content::Steered(Box::new(self.steering(path, r, within)?))
        } else {
            self.static_content(path, r, within.apex)
        };
        (self.errors.len() == before).then_some(RecordSpec {
            owner: wire_key(&owner),
            kind: r.kind,
            ttl,
            content,
        })
    }

    /// Whether a record of this type can be at this name: the types gtm
    /// makes or never serves are refused, and NS and DS are a delegation's
    /// (below the apex, not at a wildcard, the same for every client).
    fn servable(&mut self, path: &str, r: &Record, owner: &Name, within: &DomainCx) -> bool {
        if let Some(why) = r.kind.refusal() {
            self.err(
                path,
                format!("{} records cannot be configured: {why}", r.kind),
            );
            return false;
        }
        if !matches!(r.kind, RecordType::NS | RecordType::DS) {
            return true;
        }
        let why = if owner == within.apex {
            match r.kind {
                RecordType::NS => {
                    "the apex NS set is the domain's nameservers = [...]; an NS record delegates a name below the apex"
                }
                _ => {
                    "a DS record of the apex belongs in the parent zone; here DS records sit at the delegations below the apex"
                }
            }
        } else if r.name.starts_with('*') {
            "a wildcard cannot be delegated (RFC 4592 §4.2)"
        } else if r.view().is_some() || within.view.is_some() {
            "a delegation is the same for every client: NS and DS records take no view"
        } else {
            return true;
        };
        self.err(path, why);
        false
    }

    /// An alias record's target (lower-case wire form): a name of the
    /// domain, written as `name` is; the record takes no other key.
    fn alias(
        &mut self,
        path: &str,
        r: &Record,
        target: &str,
        within: &DomainCx,
    ) -> Option<Box<[u8]>> {
        if !matches!(r.kind, RecordType::A | RecordType::AAAA) {
            self.err(
                path,
                "alias: only A and AAAA records are aliases (a CNAME names another name itself)",
            );
            return None;
        }
        let o = r.options();
        let own = [
            (r.ttl.is_some(), "ttl"),
            (!r.addresses.is_empty(), "addresses"),
            (!o.values.is_empty(), "values"),
            (o.view.is_some() || within.view.is_some(), "view"),
        ];
        for (set, key) in own.into_iter().chain(steering_keys(o)) {
            if set {
                self.err(
                    path,
                    format!("{key}: an alias answers with its target's answer (its TTL, health and steering); it takes no {key}"),
                );
            }
        }
        let name = if target == "@" {
            within.apex.clone()
        } else if target.ends_with('.') {
            match fqdn(target, &Name::root()) {
                Ok(n) if within.apex.zone_of(&n) => n,
                Ok(n) => {
                    self.err(path, format!("alias: {n} is outside the domain; an alias answers from a record of its own domain"));
                    return None;
                }
                Err(e) => {
                    self.err(path, format!("alias: {e}"));
                    return None;
                }
            }
        } else {
            match fqdn(target, within.apex) {
                Ok(n) => n,
                Err(e) => {
                    self.err(path, format!("alias: {e}"));
                    return None;
                }
            }
        };
        Some(wire_key(&name))
    }

    /// The record's name under `apex`: `@`, a relative name, or a wildcard
    /// whose only `*` is its first label.
    fn owner(&mut self, path: &str, r: &Record, apex: &Name) -> Option<Name> {
        let owner = if &*r.name == "@" {
            apex.clone()
        } else if r.name.ends_with('.') {
            self.err(
                path,
                "write the name relative to the domain (\"www\", \"@\" or \"*\"), not as a full name",
            );
            return None;
        } else {
            match fqdn(&r.name, apex) {
                Ok(n) => n,
                Err(e) => {
                    self.err(path, e.to_string());
                    return None;
                }
            }
        };
        if r.name.contains('*')
            && !(&*r.name == "*" || (r.name.starts_with("*.") && !r.name[2..].contains('*')))
        {
            self.err(
                path,
                "a wildcard is \"*\" or starts with \"*.\" and has no other \"*\"",
            );
        }
        Some(owner)
    }

    /// A static record's values, read in zone-file syntax; the keys of
    /// steering are refused.
    fn static_content(&mut self, path: &str, r: &Record, apex: &Name) -> Content {
        let o = r.options();
        for (set, key) in steering_keys(o)
            .into_iter()
            .chain([(!r.addresses.is_empty(), "addresses")])
        {
            if set {
                self.err(
                    path,
                    format!(
                        "{key} applies to steered records only (A, AAAA, CNAME, and MX and SRV with addresses = [...]); {} records are static and take values = [...]",
                        r.kind.as_str()
                    ),
                );
            }
        }
        if r.values().is_empty() {
            self.err(
                path,
                "a static record needs values = [...] in zone-file syntax",
            );
        }
        let mut data = Vec::new();
        for (i, v) in r.values().iter().enumerate() {
            match static_rdata(r.kind, v, apex) {
                Ok(d) => data.push(d),
                Err(e) => self.err(format!("{path} / value {}", i + 1), e.to_string()),
            }
        }
        Content::Static(Box::new(data.into_boxed_slice()))
    }
}

/// Each steering key of `o`, and whether it is set.
fn steering_keys(o: &RecordOptions) -> [(bool, &'static str); 11] {
    [
        (o.mode.is_some(), "mode"),
        (o.balance.is_some(), "balance"),
        (o.max_answers.is_some(), "max_answers"),
        (o.dr_condition.is_some(), "dr_condition"),
        (o.dr_on_no_healthy.is_some(), "dr_on_no_healthy"),
        (o.failback.is_some(), "failback"),
        (!o.fail_safe.is_empty(), "fail_safe"),
        (o.on_no_healthy.is_some(), "on_no_healthy"),
        (o.topology.is_some(), "topology"),
        (o.nearest.is_some(), "nearest"),
        (!o.topology_rules.is_empty(), "topology_rules"),
    ]
}
