//! A domain's dynamic update grants (RFC 2136, docs/transfer.md "Dynamic
//! update"): which TSIG key may change which names and types.

use hickory_server::proto::rr::Name;

use super::{Cx, rdata::fqdn};
use crate::config::Domain;

impl Cx {
    /// Checks a domain's `updates`: a key name (whether the key exists is
    /// the cluster's to say: the state machine checks it against its
    /// keys), a name relative to the domain, and types that a record of a
    /// zone can have.
    pub(super) fn updates(&mut self, path: &str, d: &Domain, apex: &Name) {
        for (i, g) in d.updates.iter().enumerate() {
            let gpath = format!("{path} / updates[{i}]");
            if let Err(e) = crate::names::check_tsig_key_name(&g.key) {
                self.err(&gpath, format!("key: {e}"));
            }
            if g.name.ends_with('.') {
                self.err(
                    &gpath,
                    format!(
                        "name: {:?} ends with a dot; give it relative to the domain (\"@\": the apex)",
                        g.name
                    ),
                );
            } else if g.name != "@"
                && let Err(e) = fqdn(&g.name, apex)
            {
                self.err(&gpath, format!("name: {e}"));
            } else if g.name.starts_with('*') {
                self.err(
                    &gpath,
                    "name: a wildcard is not a name to grant; use subdomains = true",
                );
            }
            if g.types.is_empty() {
                self.err(&gpath, "types: list at least one record type");
            }
            for t in &g.types {
                if let Some(why) = t.refusal() {
                    self.err(&gpath, format!("types: {t} cannot be updated: {why}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::compile;

    fn errors(updates: &str) -> Vec<String> {
        let text = format!(
            "[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\nupdates = {updates}\n"
        );
        let config = crate::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        match compile(&config) {
            Ok(_) => Vec::new(),
            Err(e) => e.listed.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn grants_are_checked_with_their_paths() {
        assert!(
            errors(r#"[{ key = "acme", name = "_acme-challenge", subdomains = true, types = ["TXT", "TYPE65280"] }, { key = "k", name = "@", types = ["A"] }]"#)
                .is_empty()
        );
        assert_eq!(
            errors(
                r#"[{ key = "Bad Key", name = "www", types = ["TXT"] }, { key = "k", name = "www.example.test.", types = [] }, { key = "k", name = "a..b", types = ["SOA"] }]"#
            ),
            [
                "domain example.test / updates[0]: key: TSIG key name \"Bad Key\" is not valid: a domain name (labels of 1 to 63 of a-z, 0-9, '-' and '_', separated by dots, no final dot)".to_string(),
                "domain example.test / updates[1]: name: \"www.example.test.\" ends with a dot; give it relative to the domain (\"@\": the apex)".to_string(),
                "domain example.test / updates[1]: types: list at least one record type".to_string(),
                "domain example.test / updates[2]: name: \"a..b\" is not a valid DNS name: Malformed label: ".to_string(),
                "domain example.test / updates[2]: types: SOA cannot be updated: the SOA record is the domain's soa = { ... }".to_string(),
            ]
        );
    }
}
