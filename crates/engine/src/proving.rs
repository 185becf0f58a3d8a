//! Proving a configuration servable before it is committed: every error
//! with its object path, and the answers of new and changed records built.

use super::*;

/// A configuration the state machine compiled and proved servable
/// ([`servable`]), for the engine to install without doing either again.
#[derive(Debug)]
pub struct Proven {
    pub compiled: Compiled,
    /// The answers the proof built: a zone built whole there (a new
    /// domain, or one most of whose records changed) is taken from it by
    /// the install's build rather than built a second time
    /// (`Snapshot::build`).
    pub(super) proof: Snapshot,
}

/// Proves that `config` can be served: validates it and builds the
/// answers of every domain that is not in `proven` exactly as it is there
/// (the committed configuration: its domains were proven when they were
/// committed), and returns the compiled form with those answers. What the
/// state machine checks before a configuration is committed.
/// `proven_zones`: the compiled zones of `proven`, when at hand: an
/// unchanged domain's zone is taken as it is, and of a changed one only
/// the records that are new or changed are built (each record's answer
/// is built on its own), or all of them when those are most.
pub fn servable(
    config: &Config,
    proven: &Config,
    proven_zones: Option<&[Arc<ZoneSpec>]>,
) -> Result<Proven, ConfigErrors> {
    let proven_zones = proven_zones.filter(|z| z.len() == proven.domains.len());
    let before = proven_zones.map(|zones| (proven, zones));
    let mut compiled = gtm_model::compile::compile_from(config, before)?;
    // Per proven domain: the domain, and its zone when at hand.
    let proven: HashMap<&str, (&Arc<gtm_model::config::Domain>, Option<&Arc<ZoneSpec>>)> = proven
        .domains
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.as_str(), (d, proven_zones.and_then(|z| z.get(i)))))
        .collect();
    // One zone per domain, in order, when the configuration compiles.
    let aligned = compiled.zones.len() == config.domains.len();
    let zones = std::mem::take(&mut compiled.zones);
    let mut proof = compiled.clone();
    proof.zones = zones
        .iter()
        .zip(&config.domains)
        .filter_map(|(zone, domain)| match proven.get(domain.name.as_str()) {
            Some((_, Some(before))) if aligned && Arc::ptr_eq(zone, before) => None,
            Some((before, _)) if aligned && *before == domain => None,
            // Only its records that are new or changed; all of them when
            // that is most: the install then builds the zone whole, and
            // takes the proof's build of it (`Snapshot::build`).
            Some((_, Some(before))) if aligned => {
                let changed = changed_records(zone, before);
                match changed.records.len() * 2 > zone.records.len() {
                    true => Some(zone.clone()),
                    false => Some(Arc::new(changed)),
                }
            }
            _ => Some(zone.clone()),
        })
        // Zones of no domain of their own (the catalog zone, views' zones
        // past the domains' count) are proven whole.
        .chain(zones.iter().skip(config.domains.len()).cloned())
        .collect();
    compiled.zones = zones;
    // The version only sets SOA serials, which are always valid.
    let proof =
        Snapshot::build(&proof, &Snapshot::default(), None, &[], &[]).map_err(build_error)?;
    Ok(Proven { compiled, proof })
}

/// `zone` with only its records that `before` does not have as they are:
/// of those between the records both have alike from their start and
/// from their end (what a write left, compared in place), the ones
/// `before` does not have between its own.
pub(super) fn changed_records(zone: &ZoneSpec, before: &ZoneSpec) -> ZoneSpec {
    let (start, end) = gtm_model::ends::same_ends(&zone.records, &before.records, same_record);
    let old: HashMap<(&[u8], RecordType), &Arc<RecordSpec>> = before.records
        [start..before.records.len() - end]
        .iter()
        .map(|r| ((&*r.owner, r.kind), r))
        .collect();
    zone.with_records(
        zone.records[start..zone.records.len() - end]
            .iter()
            .filter(|r| {
                old.get(&(&*r.owner, r.kind))
                    .is_none_or(|o| !same_record(o, r))
            })
            .cloned()
            .collect(),
    )
}

pub(super) fn build_error(e: gtm_dns::snapshot::BuildError) -> ConfigErrors {
    ConfigErrors::from(gtm_model::ConfigError {
        path: format!("record {}", e.record),
        message: format!("cannot be served: {}", e.message),
    })
}

#[cfg(test)]
mod servable_tests {
    use super::*;

    fn domain(records: &[(&str, &str)]) -> Config {
        let records: String = records
            .iter()
            .map(|(name, value)| {
                format!("\n[[domain.record]]\nname = \"{name}\"\ntype = \"TXT\"\nvalues = [\"{value}\"]\n")
            })
            .collect();
        gtm_model::parse(&format!(
            "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n{records}"
        ))
        .unwrap()
    }

    #[test]
    fn a_changed_domain_is_proven_for_its_new_and_changed_records_only() {
        let before = compile(&domain(&[("www", "1"), ("api", "1"), ("old", "1")])).unwrap();
        let after = compile(&domain(&[("new", "1"), ("www", "1"), ("api", "2")])).unwrap();
        let proof = changed_records(&after.zones[0], &before.zones[0]);
        let names: Vec<String> = proof.records.iter().map(|r| r.label()).collect();
        assert_eq!(names, ["new.a.test/TXT", "api.a.test/TXT"]);
        assert_eq!(proof.apex, after.zones[0].apex);

        // servable takes the compiled zones of what it proved before.
        let proven = domain(&[("www", "1")]);
        let zones = compile(&proven).unwrap().zones;
        let next = servable(&domain(&[("www", "2")]), &proven, Some(&zones)).unwrap();
        assert_eq!(next.compiled.zones[0].records.len(), 1);

        // One record of three changed: proven alone. Two of three: the
        // zone is proven whole, from the very spec the install builds,
        // which takes the proof's build of it.
        let proven = domain(&[("www", "1"), ("api", "1"), ("old", "1")]);
        let zones = compile(&proven).unwrap().zones;
        let one = domain(&[("www", "1"), ("api", "2"), ("old", "1")]);
        let next = servable(&one, &proven, Some(&zones)).unwrap();
        assert_eq!(next.proof.zones[0].spec.records.len(), 1);
        let two = domain(&[("www", "2"), ("api", "2"), ("old", "1")]);
        let next = servable(&two, &proven, Some(&zones)).unwrap();
        assert!(Arc::ptr_eq(
            &next.proof.zones[0].spec,
            &next.compiled.zones[0]
        ));
    }
}
