//! `[[domain.record]]`: a record's owner and its static or steered content.

use hickory_server::proto::rr::Name;

use super::{
    Content, Cx, ModeCx, RecordSpec, Refs,
    rdata::{fqdn, static_rdata},
};
use crate::{
    config::{Mode, Record, RecordType},
    names::wire_key,
};

impl Cx {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        path: &str,
        r: &Record,
        apex: &Name,
        domain_ttl: u32,
        domain_mode: Mode,
        m: &ModeCx,
        refs: &Refs,
    ) -> Option<RecordSpec> {
        let before = self.errors.len();
        let owner = if &*r.name == "@" {
            apex.clone()
        } else if r.name.ends_with('.') {
            self.err(path, "write the name relative to the domain (\"www\", \"@\" or \"*\"), not as a full name");
            return None;
        } else {
            match fqdn(&r.name, apex) {
                Ok(n) => n,
                Err(e) => {
                    self.err(path, e);
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
        let ttl = r.ttl.unwrap_or(domain_ttl);
        let content = if r.kind == RecordType::Ns {
            self.err(path, "NS records are not served from records: the apex NS set is the domain's nameservers, and delegation is not supported");
            return None;
        } else if r.kind.is_steerable() {
            if !r.values().is_empty() {
                self.err(
                    path,
                    format!(
                        "{} records take addresses = [...], not values",
                        r.kind.as_str()
                    ),
                );
            }
            Content::Steered(Box::new(self.steering(
                path,
                r,
                apex,
                domain_mode,
                m,
                refs,
            )?))
        } else {
            for (set, key) in [
                (r.options().mode.is_some(), "mode"),
                (r.options().balance.is_some(), "balance"),
                (r.options().max_answers.is_some(), "max_answers"),
                (r.options().dr_condition.is_some(), "dr_condition"),
                (r.options().dr_on_no_healthy.is_some(), "dr_on_no_healthy"),
                (r.options().failback.is_some(), "failback"),
                (!r.options().fail_safe.is_empty(), "fail_safe"),
                (r.options().on_no_healthy.is_some(), "on_no_healthy"),
                (r.options().topology.is_some(), "topology"),
                (!r.addresses.is_empty(), "addresses"),
            ] {
                if set {
                    self.err(path, format!("{key} applies to A, AAAA and CNAME records only; {} records are static and take values = [...]", r.kind.as_str()));
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
                    Err(e) => self.err(format!("{path} / value {}", i + 1), e),
                }
            }
            Content::Static(data.into())
        };
        (self.errors.len() == before).then_some(RecordSpec {
            owner: wire_key(&owner),
            kind: r.kind,
            ttl,
            content,
        })
    }
}
