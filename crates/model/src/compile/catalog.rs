//! `[catalog]`: a catalog zone (RFC 9432, schema version 2) listing every
//! domain with secondaries, compiled as a zone of its own, served and
//! transferred as any other, so that a secondary provisions the domains
//! from it.
//!
//! ```text
//! catalog.example.test.                 SOA  invalid. hostmaster... (serial of its own)
//! catalog.example.test.                 NS   invalid.
//! version.catalog.example.test.         TXT  "2"
//! <id>.zones.catalog.example.test.      PTR  example.test.
//! group.<id>.zones.catalog.example.test. TXT "edge"            (catalog_group)
//! coo.<id>.zones.catalog.example.test.  PTR  new.catalog.test. (catalog_coo)
//! ```
//! A member's id is a hash of its name: the same on every device and in
//! every version, so a secondary keeps a member's zone while it stays.

use std::{collections::HashMap, sync::Arc};

use hickory_server::proto::rr::Name;

use super::{Cx, Refs, ZoneSpec, rdata::fqdn};
use crate::config::{Config, Domain, Record, RecordType};

/// A member's label under `zones`: the FNV-1a hash of its lower-case name
/// without the final dot, in hexadecimal.
pub fn member_id(domain: &str) -> String {
    let name = domain.trim_end_matches('.').to_ascii_lowercase();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl Cx {
    /// The catalog zone of `config`, or `None` (without `[catalog]`, or
    /// with an error said).
    pub(super) fn catalog(&mut self, config: &Config, refs: &Refs) -> Option<ZoneSpec> {
        for d in &config.domains {
            if (d.catalog_group.is_some() || d.catalog_coo.is_some())
                && (config.catalog.is_none() || d.secondaries.is_empty())
            {
                self.err(
                    format!("domain {}", d.name),
                    "catalog_group and catalog_coo describe a member of the catalog zone: the domain needs secondaries, and the configuration a [catalog]",
                );
            }
        }
        let catalog = config.catalog.as_ref()?;
        let before = self.errors.len();
        let apex = match fqdn(&catalog.name, &Name::root()) {
            Ok(n) if !n.is_root() => n,
            Ok(_) => {
                self.err("catalog", "name: the root cannot be the catalog zone");
                return None;
            }
            Err(e) => {
                self.err("catalog", format!("name: {e}"));
                return None;
            }
        };
        if config
            .domains
            .iter()
            .any(|d| fqdn(&d.name, &Name::root()).is_ok_and(|n| n == apex))
        {
            self.err(
                "catalog",
                format!(
                    "name: {} is a domain; the catalog zone needs a name of its own",
                    catalog.name
                ),
            );
        }
        let records = self.members(config);
        let domain = Domain {
            name: catalog.name.clone(),
            nameservers: vec!["invalid".into()],
            secondaries: catalog.secondaries.clone(),
            records,
            ..serde_json::from_value::<Domain>(serde_json::json!({ "name": catalog.name })).ok()?
        };
        // The catalog's own fields said with its path first.
        self.secondaries("catalog", &domain);
        if self.errors.len() != before {
            return None;
        }
        self.domain(&domain, refs, None)
    }

    /// The catalog's records: its version, and each member (every domain
    /// with secondaries, once, in configuration order) with its properties.
    fn members(&mut self, config: &Config) -> Vec<Arc<Record>> {
        let record = |name: String, kind: RecordType, value: String| {
            serde_json::from_value::<Record>(serde_json::json!({
                "name": name,
                "type": kind.to_string(),
                "values": [value],
            }))
            .ok()
            .map(Arc::new)
        };
        let mut records: Vec<Arc<Record>> = Vec::new();
        records.extend(record("version".into(), RecordType::TXT, "\"2\"".into()));
        let mut ids: HashMap<String, &str> = HashMap::new();
        for d in config.domains.iter().filter(|d| !d.secondaries.is_empty()) {
            let Ok(member) = fqdn(&d.name, &Name::root()) else {
                continue;
            };
            let id = member_id(&d.name);
            match ids.get(&id) {
                Some(first) if !crate::config::same_name(first, &d.name) => {
                    self.err(
                        format!("domain {}", d.name),
                        format!("its catalog member id {id} is also {first}'s"),
                    );
                    continue;
                }
                Some(_) => continue,
                None => {
                    ids.insert(id.clone(), &d.name);
                }
            }
            let at = format!("{id}.zones");
            records.extend(record(at.clone(), RecordType::PTR, member.to_string()));
            if let Some(group) = &d.catalog_group {
                records.extend(record(
                    format!("group.{at}"),
                    RecordType::TXT,
                    format!("\"{}\"", group.replace('\\', "\\\\").replace('"', "\\\"")),
                ));
            }
            if let Some(coo) = &d.catalog_coo {
                match fqdn(coo, &Name::root()) {
                    Ok(coo) => records.extend(record(
                        format!("coo.{at}"),
                        RecordType::PTR,
                        coo.to_string(),
                    )),
                    Err(e) => self.err(format!("domain {}", d.name), format!("catalog_coo: {e}")),
                }
            }
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_errors_name_their_paths() {
        for (text, wanted) in [
            (
                "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\ncatalog_group = \"g\"\n",
                "domain a.test: catalog_group and catalog_coo describe a member of the catalog zone",
            ),
            (
                "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n[catalog]\nname = \"a.test\"\n",
                "catalog: name: a.test is a domain",
            ),
            (
                "[catalog]\nname = \"cat.test\"\nsecondaries = [{ address = \"nowhere\", key = \"k\" }]\n",
                "catalog / secondaries[0]: address \"nowhere\" is not an IP address",
            ),
        ] {
            let config = crate::parse(text).unwrap();
            let errors = crate::compile(&config).unwrap_err().lines();
            assert!(
                errors.iter().any(|e| e.starts_with(wanted)),
                "{text}\nwanted {wanted}\ngot {errors:?}"
            );
        }
    }

    #[test]
    fn members_are_the_domains_with_secondaries_with_their_properties() {
        let text = "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\nsecondaries = [{ address = \"192.0.2.53\", key = \"k\" }]\ncatalog_group = \"edge\"\ncatalog_coo = \"new.catalog.test\"\n\n[[domain]]\nname = \"b.test\"\nnameservers = [\"ns1.b.test\"]\n\n[catalog]\nname = \"cat.test\"\n";
        let compiled = crate::compile(&crate::parse(text).unwrap()).unwrap();
        let cat = compiled
            .zones
            .iter()
            .find(|z| z.key() == "cat.test")
            .unwrap();
        let id = member_id("a.test");
        let names: Vec<String> = cat
            .records
            .iter()
            .map(|r| format!("{} {}", r.owner_name(), r.kind))
            .collect();
        assert_eq!(
            names,
            [
                "version.cat.test. TXT".to_string(),
                format!("{id}.zones.cat.test. PTR"),
                format!("group.{id}.zones.cat.test. TXT"),
                format!("coo.{id}.zones.cat.test. PTR"),
            ],
            "b.test has no secondaries, so it is no member"
        );
    }

    #[test]
    fn a_member_id_is_stable_and_ignores_case_and_the_final_dot() {
        assert_eq!(member_id("example.test"), member_id("Example.Test."));
        assert_ne!(member_id("example.test"), member_id("example.net"));
        assert_eq!(member_id("example.test").len(), 16);
    }
}
