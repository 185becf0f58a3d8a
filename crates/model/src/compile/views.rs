//! `[[view]]` (docs/views.md): checked, each view's client places as
//! matchers of the topology, and the rule set that classes clients by
//! them.

use std::{collections::HashMap, sync::Arc};

use super::{
    Cx, ViewSpec, ZoneSpec,
    regions::{read_client, view_set_key},
    unique,
};
use crate::config::Config;

/// The name no view may take: the zone every other client gets.
pub const DEFAULT_VIEW: &str = "default";

impl Cx {
    /// The views, each with its places' matchers, and the index of their
    /// rule set. Their places are checked as a rule's client is.
    pub(super) fn views(
        &mut self,
        config: &Config,
        places: &HashMap<String, u32>,
        sets: &HashMap<Vec<String>, u32>,
    ) -> (Vec<ViewSpec>, u32) {
        unique(self, "view", config.views.iter().map(|v| v.name.as_str()));
        let mut views = Vec::with_capacity(config.views.len());
        for v in &config.views {
            let path = format!("view {}", v.name);
            if v.name.eq_ignore_ascii_case(DEFAULT_VIEW) {
                self.err(
                    &path,
                    "\"default\" names the zone of the clients no view holds: choose another name",
                );
            }
            if v.name.contains(['@', '/']) || v.name.chars().any(char::is_whitespace) {
                self.err(&path, "a view's name has no @, / or spaces");
            }
            if v.clients.is_empty() {
                self.err(&path, "clients: a view needs at least one client place");
            }
            let mut matchers = Vec::with_capacity(v.clients.len());
            for (i, client) in v.clients.iter().enumerate() {
                let at = format!("{path} / clients[{i}]");
                match read_client(client) {
                    Ok(c) => match places.get(&c.key()) {
                        Some(m) => matchers.push(*m),
                        None => self.err(&at, format!("unknown place \"{client}\"")),
                    },
                    Err(e) => self.err(&at, e),
                }
            }
            views.push(ViewSpec {
                name: v.name.clone(),
                matchers: matchers.into_boxed_slice(),
            });
        }
        let set = view_set_key(config)
            .and_then(|k| sets.get(&k).copied())
            .unwrap_or(0);
        (views, set)
    }
}

/// The zones the clients of view `view` (0: of none) are answered from,
/// each with every record a query finds in it: the view's own, and the
/// others' of the names no view's zone has.
pub(super) fn zones_seen(zones: &[Arc<ZoneSpec>], view: u16) -> Vec<Arc<ZoneSpec>> {
    let own: Vec<&Arc<ZoneSpec>> = zones
        .iter()
        .filter(|z| view != 0 && z.view_index() == view)
        .collect();
    let mut seen: Vec<Arc<ZoneSpec>> = zones
        .iter()
        .filter(|z| z.view.is_none() && !own.iter().any(|o| o.apex == z.apex))
        .cloned()
        .collect();
    seen.extend(own.into_iter().map(|z| match &z.view {
        Some(v) if !v.inherited.is_empty() => {
            Arc::new(z.with_records(z.all_records().cloned().collect()))
        }
        _ => z.clone(),
    }));
    seen
}

#[cfg(test)]
mod tests {
    use crate::compile::{Compiled, compile};

    fn compiled(text: &str) -> Result<Compiled, Vec<String>> {
        let config = crate::parse(text).map_err(|e| e.lines())?;
        compile(&config).map_err(|e| e.lines())
    }

    const VIEWS: &str = r#"
[[view]]
name = "internal"
clients = ["10.0.0.0/8"]

[[domain]]
name = "t.test"
nameservers = ["ns1.t.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }]

[[domain.record]]
name = "www"
type = "AAAA"
addresses = [{ ip = "2001:db8::1" }]

[[domain.record]]
name = "mail"
type = "MX"
values = ["10 mx.t.test."]

[[domain.record]]
name = "www"
type = "A"
view = "internal"
addresses = [{ ip = "10.0.0.1" }]
"#;

    /// The zone every client gets holds the records of no view; the view's
    /// holds its own, and takes the others' at the names it leaves alone
    /// (its `www` A replaces `www` AAAA too), the same allocations.
    #[test]
    fn a_views_zone_has_its_records_and_takes_the_names_it_leaves() {
        let c = compiled(VIEWS).unwrap();
        assert_eq!(c.zones.len(), 2);
        let (all, view) = (&c.zones[0], &c.zones[1]);
        assert_eq!(all.key(), "t.test");
        assert_eq!(view.key(), "t.test@internal");
        let labels = |z: &crate::compile::ZoneSpec| -> Vec<String> {
            z.all_records().map(|r| r.label()).collect()
        };
        assert_eq!(
            labels(all),
            ["www.t.test/A", "www.t.test/AAAA", "mail.t.test/MX"]
        );
        assert_eq!(labels(view), ["www.t.test/A@internal", "mail.t.test/MX"]);
        let inherited = &view.view.as_ref().unwrap().inherited;
        assert!(std::sync::Arc::ptr_eq(&inherited[0], &all.records[2]));
    }

    /// A secondary of a view the records do not name transfers the zone
    /// that view's clients get; one of a view's own domain, that view's.
    #[test]
    fn a_secondary_names_the_zone_it_transfers() {
        let text = VIEWS.replace(
            "nameservers = [\"ns1.t.test\"]\n",
            "nameservers = [\"ns1.t.test\"]\nview = \"internal\"\nsecondaries = [{ address = \"192.0.2.53\", key = \"k\" }]\n",
        )
        .replace("view = \"internal\"\naddresses", "addresses")
        .replace("name = \"www\"\ntype = \"A\"\naddresses = [{ ip = \"10.0.0.1\" }]", "name = \"w2\"\ntype = \"A\"\naddresses = [{ ip = \"10.0.0.1\" }]");
        let c = compiled(&text).unwrap();
        assert_eq!(c.zones.len(), 1);
        assert_eq!(c.zones[0].key(), "t.test@internal");
        assert_eq!(c.zones[0].secondaries.len(), 1);

        let other = r#"
[[view]]
name = "internal"
clients = ["10.0.0.0/8"]

[[domain]]
name = "o.test"
nameservers = ["ns1.o.test"]
secondaries = [{ address = "192.0.2.53", key = "k", view = "internal" }]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }]
"#;
        let c = compiled(other).unwrap();
        let keys: Vec<String> = c.zones.iter().map(|z| z.key()).collect();
        assert_eq!(keys, ["o.test", "o.test@internal"]);
        assert!(c.zones[0].secondaries.is_empty());
        assert_eq!(c.zones[1].secondaries.len(), 1);
        let labels: Vec<String> = c.zones[1].all_records().map(|r| r.label()).collect();
        assert_eq!(labels, ["www.o.test/A"]);
    }

    #[test]
    fn views_and_what_names_them_are_checked_and_each_error_names_its_place() {
        let text = format!(
            "{VIEWS}\n\
             [[domain.record]]\nname = \"www\"\ntype = \"A\"\nview = \"internal\"\naddresses = [{{ ip = \"10.0.0.2\" }}]\n\n\
             [[domain.record]]\nname = \"x\"\ntype = \"A\"\nview = \"intern\"\naddresses = [{{ ip = \"10.0.0.3\" }}]\n\n\
             [[view]]\nname = \"default\"\nclients = [\"country:DE\"]\n\n\
             [[view]]\nname = \"bad\"\nclients = [\"10.0.0.1\", \"region:missing\"]\n\n\
             [[view]]\nname = \"empty\"\nclients = []\n\n\
             [[domain]]\nname = \"s.test\"\nnameservers = [\"ns1.s.test\"]\n\
             secondaries = [{{ address = \"192.0.2.53\", key = \"k\" }}, {{ address = \"192.0.2.53\", key = \"k\", view = \"internal\" }}]\n\n\
             [[domain]]\nname = \"corp.test\"\nnameservers = [\"ns1.corp.test\"]\nview = \"internal\"\n\
             secondaries = [{{ address = \"192.0.2.54\", key = \"k\", view = \"bad\" }}]\n\n\
             [[domain.record]]\nname = \"wiki\"\ntype = \"A\"\nview = \"bad\"\naddresses = [{{ ip = \"10.0.0.4\" }}]\n\n\
             [[domain]]\nname = \"other.test\"\nnameservers = [\"ns1.other.test\"]\nview = \"nope\"\n"
        );
        let errors = compiled(&text).unwrap_err();
        for want in [
            "domain t.test / view internal / record www A: is defined twice",
            "domain t.test / record x A: view: unknown view \"intern\"",
            "view default: \"default\" names the zone of the clients no view holds",
            "view bad / clients[0]: client \"10.0.0.1\" is not a place",
            "view bad / clients[1]: unknown place \"region:missing\"",
            "view empty: clients: a view needs at least one client place",
            "domain corp.test / record wiki A: view: \"bad\" in a domain that is view \"internal\"'s alone",
            "domain s.test / secondaries: address 192.0.2.53 is listed for two views",
            "domain corp.test / secondaries: view: \"bad\" is not a view of this domain",
            "domain other.test: view: unknown view \"nope\"",
        ] {
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{want:?} not among:\n{}",
                errors.join("\n")
            );
        }
    }
}
