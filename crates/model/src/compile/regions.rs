//! `[[region]]` and the places topology rules name (docs/topology.md):
//! checked, nested regions flattened into terms, and the classification of
//! client addresses built ([`Topology`]).

use std::collections::{HashMap, HashSet};

use super::{Cx, unique};
use crate::{
    config::{Config, Region, TopologyRule},
    node::Network,
    place::{Asn, Continent, Country, Subdivision},
    topology::{Leaf, Matcher, Term, Topology},
};

/// A rule's `client`, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Client {
    Region(String),
    Network(Network),
    Asn(Asn),
    Subdivision(Subdivision),
    Country(Country),
    Continent(Continent),
}

impl Client {
    /// The text the matcher of this place is known by.
    pub(super) fn key(&self) -> String {
        match self {
            Self::Region(name) => format!("region:{name}"),
            Self::Network(n) => n.to_string(),
            Self::Asn(a) => format!("asn:{}", a.0),
            Self::Subdivision(d) => format!("subdivision:{d}"),
            Self::Country(c) => format!("country:{c}"),
            Self::Continent(k) => format!("continent:{}", k.code()),
        }
    }
}

/// Reads a rule's `client`: `region:NAME`, `asn:N`, `subdivision:CC-SUB`,
/// `country:CC`, `continent:CC` or a network. The error says what is
/// wrong with the text.
pub(super) fn read_client(text: &str) -> Result<Client, String> {
    if let Some(name) = text.strip_prefix("region:") {
        return Ok(Client::Region(name.to_string()));
    }
    if let Some(number) = text.strip_prefix("asn:") {
        return Asn::parse(number).map(Client::Asn).ok_or_else(|| {
            format!("client \"{text}\": \"{number}\" is not an AS number (asn:64500)")
        });
    }
    if let Some(code) = text.strip_prefix("subdivision:") {
        return Subdivision::parse(code)
            .map(Client::Subdivision)
            .ok_or_else(|| {
                format!("client \"{text}\": \"{code}\" is not an ISO 3166-2 subdivision (US-CA)")
            });
    }
    if let Some(code) = text.strip_prefix("country:") {
        return Country::parse(code).map(Client::Country).ok_or_else(|| {
            format!("client \"{text}\": \"{code}\" is not an ISO 3166 two-letter code")
        });
    }
    if let Some(code) = text.strip_prefix("continent:") {
        return Continent::parse(code)
            .map(Client::Continent)
            .ok_or_else(|| {
                format!("client \"{text}\": \"{code}\" is not one of AF, AN, AS, EU, NA, OC, SA")
            });
    }
    if !text.contains('/') {
        return Err(format!(
            "client \"{text}\" is not a place: write a network (10.20.0.0/16), region:NAME, asn:N, subdivision:CC-SUB, country:CC or continent:CC"
        ));
    }
    read_network(text).map(Client::Network)
}

/// A network as written, refused unless canonical (host bits zero).
pub(super) fn read_network(text: &str) -> Result<Network, String> {
    let n = Network::try_from(text.to_string()).map_err(|e| e.to_string())?;
    let canonical = Network::of(n.addr, n.prefix);
    if canonical != n {
        return Err(format!(
            "network \"{text}\" has host bits set: write {canonical}"
        ));
    }
    Ok(canonical)
}

/// The places a list of rules names, as their matchers are known: sorted,
/// each once. Rules whose client does not read are left out (the rule
/// itself is refused).
pub(super) fn set_key(rules: &[TopologyRule]) -> Vec<String> {
    places_key(rules.iter().map(|r| r.client.as_str()))
}

/// The places of `clients` as their matchers are known: sorted, each
/// once, those that do not read left out.
pub(super) fn places_key<'a>(clients: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut keys: Vec<String> = clients
        .filter_map(|c| read_client(c).ok())
        .map(|c| c.key())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Every rule set of `config` (the places of a domain's rules, and of each
/// record's own), sorted, each once. A configuration whose compiled zones
/// are kept for the next must have the same ones, since rules hold their
/// matchers and their set by index.
pub fn rule_sets(config: &Config) -> Vec<Vec<String>> {
    let mut sets: Vec<Vec<String>> = config
        .domains
        .iter()
        .flat_map(|d| {
            std::iter::once(&d.topology_rules[..])
                .chain(d.records.iter().map(|r| &r.options().topology_rules[..]))
        })
        .filter(|rules| !rules.is_empty())
        .map(set_key)
        .chain(view_set_key(config))
        .collect();
    sets.sort();
    sets.dedup();
    sets
}

/// The places all views name together, as a rule set's key; `None`
/// without views.
pub(super) fn view_set_key(config: &Config) -> Option<Vec<String>> {
    (!config.views.is_empty()).then(|| {
        places_key(
            config
                .views
                .iter()
                .flat_map(|v| v.clients.iter().map(String::as_str)),
        )
    })
}

/// What is built while flattening regions.
#[derive(Default)]
struct Builder {
    networks: Vec<Network>,
    index: HashMap<Network, u32>,
}

impl Builder {
    fn network(&mut self, n: Network) -> u32 {
        *self.index.entry(n).or_insert_with(|| {
            self.networks.push(n);
            (self.networks.len() - 1) as u32
        })
    }
}

/// A region's own places, read: members and exclusions.
struct Read {
    members: Vec<Leaf>,
    excluded: Vec<Leaf>,
    nested: Vec<String>,
}

impl Cx {
    /// The regions and the places rules name, compiled; each place's
    /// matcher by its key ([`Client::key`]), and each rule set's index by
    /// its places ([`set_key`]).
    pub(super) fn topology(
        &mut self,
        config: &Config,
    ) -> (Topology, HashMap<String, u32>, HashMap<Vec<String>, u32>) {
        unique(
            self,
            "region",
            config.regions.iter().map(|r| r.name.as_str()),
        );
        let mut b = Builder::default();
        let by_name: HashMap<&str, &Region> = config
            .regions
            .iter()
            .map(|r| (r.name.as_str(), &**r))
            .collect();
        let read: HashMap<&str, Read> = config
            .regions
            .iter()
            .map(|r| (r.name.as_str(), self.read_region(r, &by_name, &mut b)))
            .collect();
        // Flattened: each region's terms, nested regions' with their own
        // exclusions and this one's.
        let mut flat: HashMap<String, Vec<Term>> = HashMap::new();
        for r in &config.regions {
            let mut path = Vec::new();
            if let Err(cycle) = flatten(&r.name, &read, &mut flat, &mut path)
                && cycle.first().map(String::as_str) == Some(r.name.as_str())
            {
                self.err(
                    format!("region {}", r.name),
                    format!("includes itself: {}", cycle.join(" → ")),
                );
            }
        }
        let mut matchers = Vec::new();
        let mut keys = HashMap::new();
        let mut regions = Vec::new();
        for r in &config.regions {
            let terms = flat.remove(&r.name).unwrap_or_default();
            let m = matchers.len() as u32;
            matchers.push(Matcher {
                name: format!("region:{}", r.name),
                terms: terms.into_boxed_slice(),
            });
            keys.insert(format!("region:{}", r.name), m);
            regions.push((r.name.clone(), m));
        }
        let sets = rule_sets(config);
        let mut places: Vec<&String> = sets.iter().flatten().collect();
        places.sort();
        places.dedup();
        for place in places {
            let Ok(client) = read_client(place) else {
                continue;
            };
            let leaf = match client {
                Client::Network(n) => Leaf::Network(b.network(n)),
                Client::Asn(a) => Leaf::Asn(a.0),
                Client::Subdivision(d) => Leaf::Subdivision(d),
                Client::Country(c) => Leaf::Country(c),
                Client::Continent(k) => Leaf::Continent(k),
                Client::Region(_) => continue,
            };
            keys.insert(place.clone(), matchers.len() as u32);
            matchers.push(Matcher {
                name: place.clone(),
                terms: Box::new([Term {
                    leaf,
                    excluded: Box::default(),
                }]),
            });
        }
        let matcher_sets: Vec<Vec<u32>> = sets
            .iter()
            .map(|set| set.iter().filter_map(|k| keys.get(k).copied()).collect())
            .collect();
        let set_index = sets
            .into_iter()
            .enumerate()
            .map(|(i, set)| (set, i as u32))
            .collect();
        (
            Topology::build(b.networks, matchers, regions, &matcher_sets),
            keys,
            set_index,
        )
    }

    fn read_region(
        &mut self,
        r: &Region,
        by_name: &HashMap<&str, &Region>,
        b: &mut Builder,
    ) -> Read {
        let path = format!("region {}", r.name);
        let mut leaves = |cx: &mut Cx, lists: [&[String]; 4], asns: &[Asn]| {
            let [networks, subdivisions, countries, continents] = lists;
            let mut out: Vec<Leaf> = asns.iter().map(|a| Leaf::Asn(a.0)).collect();
            for n in networks {
                match read_network(n) {
                    Ok(n) => out.push(Leaf::Network(b.network(n))),
                    Err(e) => cx.err(&path, e),
                }
            }
            for d in subdivisions {
                match Subdivision::parse(d) {
                    Some(d) => out.push(Leaf::Subdivision(d)),
                    None => cx.err(
                        &path,
                        format!("subdivision \"{d}\" is not an ISO 3166-2 code (US-CA)"),
                    ),
                }
            }
            for c in countries {
                match Country::parse(c) {
                    Some(c) => out.push(Leaf::Country(c)),
                    None => cx.err(
                        &path,
                        format!("country \"{c}\" is not an ISO 3166 two-letter code"),
                    ),
                }
            }
            for k in continents {
                if let Some(k) = cx.continent(&path, k) {
                    out.push(Leaf::Continent(k));
                }
            }
            out.sort();
            out.dedup();
            out
        };
        let members = leaves(
            self,
            [&r.networks, &r.subdivisions, &r.countries, &r.continents],
            &r.asns,
        );
        let excluded = leaves(
            self,
            [
                &r.exclude_networks,
                &r.exclude_subdivisions,
                &r.exclude_countries,
                &r.exclude_continents,
            ],
            &r.exclude_asns,
        );
        for name in &r.regions {
            if !by_name.contains_key(name.as_str()) {
                self.err(&path, format!("unknown region \"{name}\""));
            }
        }
        if members.is_empty() && r.regions.is_empty() {
            self.err(
                &path,
                "holds no client: give networks, asns, subdivisions, countries, continents or regions",
            );
        }
        Read {
            members,
            excluded,
            nested: r
                .regions
                .iter()
                .filter(|n| by_name.contains_key(n.as_str()))
                .cloned()
                .collect(),
        }
    }
}

/// Flattens region `name` into `flat` (its nested regions first). Err:
/// the regions of a circle, from the first one back to it.
fn flatten(
    name: &str,
    read: &HashMap<&str, Read>,
    flat: &mut HashMap<String, Vec<Term>>,
    path: &mut Vec<String>,
) -> Result<(), Vec<String>> {
    if flat.contains_key(name) {
        return Ok(());
    }
    if let Some(at) = path.iter().position(|p| p == name) {
        let mut cycle = path[at..].to_vec();
        cycle.push(name.to_string());
        return Err(cycle);
    }
    let Some(r) = read.get(name) else {
        return Ok(());
    };
    path.push(name.to_string());
    let mut terms: Vec<Term> = r
        .members
        .iter()
        .map(|&leaf| Term {
            leaf,
            excluded: r.excluded.clone().into_boxed_slice(),
        })
        .collect();
    let mut failed = None;
    for nested in &r.nested {
        match flatten(nested, read, flat, path) {
            Ok(()) => {
                for t in flat.get(nested).into_iter().flatten() {
                    let mut excluded: Vec<Leaf> = t.excluded.to_vec();
                    excluded.extend(r.excluded.iter().copied());
                    excluded.sort();
                    excluded.dedup();
                    terms.push(Term {
                        leaf: t.leaf,
                        excluded: excluded.into_boxed_slice(),
                    });
                }
            }
            Err(cycle) => failed = failed.or(Some(cycle)),
        }
    }
    path.pop();
    // A leaf given twice with the same exclusions is one term.
    let mut seen = HashSet::new();
    terms.retain(|t| seen.insert((t.leaf, t.excluded.clone())));
    flat.insert(name.to_string(), terms);
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use crate::compile::{Content, compile};

    fn compiled(text: &str) -> Result<crate::compile::Compiled, Vec<String>> {
        let config = crate::parse(text).map_err(|e| e.lines())?;
        compile(&config).map_err(|e| e.lines())
    }

    const ZONE: &str = r#"
[[datacenter]]
name = "east"

[[datacenter]]
name = "west"

[[domain]]
name = "t.test"
nameservers = ["ns1.t.test"]
"#;

    #[test]
    fn regions_are_checked_and_every_error_names_its_region() {
        let text = format!(
            "{ZONE}\n[[region]]\nname = \"a\"\nnetworks = [\"10.20.1.0/16\", \"nope/8\"]\ncountries = [\"USA\"]\ncontinents = [\"XX\"]\nsubdivisions = [\"US-CALI\"]\nregions = [\"b\", \"missing\"]\n\n[[region]]\nname = \"b\"\nregions = [\"a\"]\n\n[[region]]\nname = \"empty\"\n\n[[region]]\nname = \"c\"\ncountries = [\"DE\"]\n\n[[region]]\nname = \"c\"\ncountries = [\"FR\"]"
        );
        let errors = compiled(&text).unwrap_err();
        for want in [
            "region a: network \"10.20.1.0/16\" has host bits set: write 10.20.0.0/16",
            "region a: \"nope/8\" is not a network",
            "region a: country \"USA\" is not an ISO 3166 two-letter code",
            "region a: continent \"XX\" is not one of AF, AN, AS, EU, NA, OC, SA",
            "region a: subdivision \"US-CALI\" is not an ISO 3166-2 code (US-CA)",
            "region a: unknown region \"missing\"",
            "region a: includes itself: a → b → a",
            "region empty: holds no client",
            "region c: is defined twice",
        ] {
            assert!(
                errors.iter().any(|e| e.starts_with(want)),
                "{want}\nin {errors:#?}"
            );
        }
    }

    #[test]
    fn a_bad_as_number_is_a_type_error_naming_its_line_region_and_value() {
        let text = format!("{ZONE}\n[[region]]\nname = \"carriers\"\nasns = [64500, \"AS-7\"]\n");
        assert_eq!(
            compiled(&text).unwrap_err(),
            ["line 14: region carriers: asns[1]: \"AS-7\" is not an AS number (64500 or AS64500)"]
        );
        let text = format!(
            "{ZONE}\n[[region]]\nname = \"carriers\"\nasns = [64500, \"AS64501\"]\nexclude_asns = [64502]\n"
        );
        let compiled = compiled(&text).expect("compiles");
        let m = compiled.topology.region("carriers").unwrap();
        let terms = &compiled.topology.matchers[m as usize].terms;
        use crate::topology::Leaf;
        let leaves: Vec<Leaf> = terms.iter().map(|t| t.leaf).collect();
        assert_eq!(leaves, [Leaf::Asn(64500), Leaf::Asn(64501)]);
        assert!(terms.iter().all(|t| *t.excluded == [Leaf::Asn(64502)]));
    }

    #[test]
    fn rules_name_known_places_datacenters_and_addresses() {
        let text = format!(
            r#"{ZONE}
topology_rules = [{{ client = "region:nowhere", datacenter = "east" }}]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "192.0.2.1", dc = "east" }}]
topology_rules = [
  {{ client = "10.0.0.1/8", datacenter = "east" }},
  {{ client = "country:USA", datacenter = "east" }},
  {{ client = "10.0.0.0/8", datacenter = "north" }},
  {{ client = "10.0.0.0/8", address = "192.0.2.9" }},
  {{ client = "10.0.0.0/8" }},
  {{ client = "somewhere", datacenter = "east", weight = 0 }},
  {{ client = "asn:ASX", datacenter = "east" }},
  {{ client = "10.0.0.0/8", group = "nope" }},
]

[[domain.record]]
name = "mx"
type = "TXT"
values = ['"x"']
topology_rules = [{{ client = "10.0.0.0/8", datacenter = "east" }}]
"#
        );
        let errors = compiled(&text).unwrap_err();
        for want in [
            "domain t.test / topology rule 1: unknown region \"nowhere\"",
            "domain t.test / record www A / topology rule 1: network \"10.0.0.1/8\" has host bits set",
            "domain t.test / record www A / topology rule 2: client \"country:USA\": \"USA\" is not an ISO 3166",
            "domain t.test / record www A / topology rule 3: unknown datacenter \"north\"",
            "domain t.test / record www A / topology rule 4: address \"192.0.2.9\" is not one of the record's",
            "domain t.test / record www A / topology rule 5: give one of datacenter, group or address",
            "domain t.test / record www A / topology rule 6: weight must be 1 or more",
            "domain t.test / record www A / topology rule 6: client \"somewhere\" is not a place",
            "domain t.test / record www A / topology rule 8: group \"nope\" is not a group of the record's addresses",
            "domain t.test / record www A / topology rule 7: client \"asn:ASX\": \"ASX\" is not an AS number (asn:64500)",
            "topology_rules applies to steered records only",
        ] {
            assert!(
                errors
                    .iter()
                    .any(|e| e.starts_with(want) || e.contains(want)),
                "{want}\nin {errors:#?}"
            );
        }
        // The domain's rule is said once, not per record.
        assert_eq!(
            errors.iter().filter(|e| e.contains("nowhere")).count(),
            1,
            "{errors:#?}"
        );
    }

    #[test]
    fn a_record_takes_its_domains_rules_for_the_addresses_it_has() {
        let text = format!(
            r#"{ZONE}
topology_rules = [
  {{ client = "region:branch", datacenter = "west" }},
  {{ client = "country:US", address = "192.0.2.1" }},
]

[[region]]
name = "branch"
networks = ["10.20.0.0/16"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "192.0.2.1", dc = "east" }}, {{ ip = "192.0.2.2", dc = "west" }}]

[[domain.record]]
name = "api"
type = "A"
addresses = [{{ ip = "192.0.2.3", dc = "west" }}]

[[domain.record]]
name = "own"
type = "A"
addresses = [{{ ip = "192.0.2.4", dc = "east" }}]
topology_rules = [{{ client = "10.30.0.0/16", datacenter = "east", weight = 3 }}]
"#
        );
        let c = compiled(&text).expect("compiles");
        let rules = |name: &str| {
            let r = c.zones[0]
                .records
                .iter()
                .find(|r| r.label().starts_with(name))
                .expect("the record");
            match &r.content {
                Content::Steered(s) => s.rules().to_vec(),
                Content::Static(_) | Content::Alias(_) => Vec::new(),
            }
        };
        assert_eq!(rules("www").len(), 2);
        assert_eq!(rules("api").len(), 1, "the address rule is not api's");
        let own = rules("own");
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].weight, 3);
        let t = &c.topology;
        assert_eq!(t.matchers[own[0].matcher as usize].name, "10.30.0.0/16");
        assert_eq!(t.region("branch"), Some(0));
    }
}
