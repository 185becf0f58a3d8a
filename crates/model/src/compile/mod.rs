//! Validation and compilation of a [`Config`] into the form the resolver and
//! the DNS path use.
//!
//! One pass walks the whole configuration, collects *every* error with the
//! path of the object it concerns (`domain example.test / record www A /
//! address 3: unknown scenario "dc2-up"`), and only when there is none
//! returns a [`Compiled`] configuration. Nothing half-valid ever leaves this
//! module, so an apply is all or nothing.
//!
//! `Cx` holds the errors; each part of the configuration is compiled by
//! its own file: `geoip`, `datacenters`, `check` (with `status`, the HTTP
//! status sets), `scenarios`, `services`, and per domain `domain` (its
//! settings), `secondaries`, `records` (the records kept from the compile
//! before, with `reuse` and `owners`, and the ones compiled), `record`,
//! `steering`, `address`, then `by_name` (the records at one name
//! together) and `cname_loops` (across the zones, per view); `regions`
//! and `views` compile the client places topology rules and views name. `rdata` reads names
//! and record data, `size` counts their bytes, `paths` names a record in
//! errors; `compiled` holds the types all this makes.

mod address;
mod alias;
mod by_name;
mod catalog;
mod check;
mod cname_loops;
mod compiled;
mod datacenters;
mod delegation;
mod domain;
mod geoip;
mod notifiers;
mod owners;
mod paths;
mod primary;
mod rdata;
mod record;
mod records;
mod regions;
mod reuse;
mod scenarios;
mod secondaries;
mod services;
mod size;
mod status;
mod steering;
mod updates;
mod views;
pub use notifiers::{
    Delivery, EVENT_KINDS, Filter, NotifierSpec, SmtpTls, SyslogTransport, notifier_spec,
};

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use hickory_server::proto::rr::Name;

pub use catalog::member_id;
pub use check::MAX_CHECK_INTERVAL;
pub use compiled::{
    AddressSpec, AliasTarget, CheckSpec, Compiled, Content, DcId, DcSpec, DrCondition, DrSpec,
    Extra, Hc, ModeSpec, RecordSpec, RuleSpec, RuleTarget, ScenarioSpec, SecondarySpec, Steering,
    ViewSpec, ZoneSpec, ZoneView, same_record, soa_serial, zone_key,
};
pub use domain::DEFAULT_TTL;
pub use primary::layered;
pub use rdata::{MAX_CHARACTER_STRING, absolute, presentation, read_value};
pub use regions::rule_sets;
pub use scenarios::BUILTIN_SCENARIOS;
pub use secondaries::{SIGNED_EXPIRE_MAX, socket_address};
pub use size::MAX_NAME_BYTES;
pub use status::{StatusSet, StatusSetError, parse_status_set};
pub use views::DEFAULT_VIEW;

use super::{
    cancel::{Cancel, CheckError},
    config::{Config, Domain, Mode},
    config_errors::{ConfigError, ConfigErrors, Listing},
};

/// Validates a configuration and resolves its defaults.
pub fn compile(config: &Config) -> Result<Compiled, ConfigErrors> {
    compile_from(config, None)
}

/// [`compile`], stopped when `cancel` is set.
pub fn compile_until(config: &Config, cancel: &Cancel) -> Result<Compiled, CheckError> {
    compile_with(config, None, cancel)
}

/// A configuration compiled before, to take unchanged zones from: the
/// configuration and its compiled zones, one per domain in order.
pub type Before<'a> = (&'a Config, &'a [Arc<ZoneSpec>]);

/// [`compile`], taking a domain's zone from `before` as it is when the
/// domain and everything its records read (datacenters, checks,
/// scenarios, services) are the same there.
pub fn compile_from(config: &Config, before: Option<Before>) -> Result<Compiled, ConfigErrors> {
    compile_with(config, before, &Cancel::default()).map_err(CheckError::uncancelled)
}

fn compile_with(
    config: &Config,
    before: Option<Before>,
    cancel: &Cancel,
) -> Result<Compiled, CheckError> {
    let kept: HashMap<&str, (&Arc<Domain>, &Arc<ZoneSpec>)> = match before {
        // Rules hold their places' matchers and sets by index: kept only
        // when the rules name the same ones.
        Some((old, zones))
            if old.steers_alike(config)
                && zones.len() == old.domains.len() + usize::from(old.catalog.is_some())
                && rule_sets(old) == rule_sets(config) =>
        {
            old.domains
                .iter()
                .zip(zones)
                .map(|(d, z)| (d.name.as_str(), (d, z)))
                .collect()
        }
        _ => HashMap::new(),
    };
    let mut cx = Cx {
        errors: Listing::default(),
        cancel: cancel.clone(),
    };
    cx.geoip(config);
    let datacenters = cx.datacenters(config);
    let dc_index: HashMap<&str, DcId> = datacenters
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.as_str(), i))
        .collect();
    let checks = cx.checks(config, &dc_index);
    cx.notifiers(config);
    let check_index: HashMap<&str, &CheckSpec> =
        checks.iter().map(|c| (c.name.as_str(), c)).collect();
    let scenarios = cx.scenarios(config, &check_index);
    let scenario_names: HashSet<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
    cx.services(config);
    let (topology, places, sets) = cx.topology(config);
    let (views, view_set) = cx.views(config, &places, &sets);
    let view_names: Vec<&str> = views.iter().map(|v| v.name.as_str()).collect();
    let refs = Refs {
        dcs: &dc_index,
        datacenters: &datacenters,
        checks: &check_index,
        scenarios: &scenario_names,
        places: &places,
        sets: &sets,
    };
    let zones = if views.is_empty() && !config.domains.iter().any(|d| d.has_views()) {
        config
            .domains
            .iter()
            .filter_map(|d| match kept.get(d.name.as_str()) {
                _ if cx.cancel.is_cancelled() => None,
                Some((old, zone)) if *old == d => Some(Arc::clone(zone)),
                before => cx
                    .domain(d, &refs, before.map(|(old, zone)| (&***old, &***zone)))
                    .map(Arc::new),
            })
            .collect::<Vec<_>>()
    } else {
        // With views, the zones every client gets come first, in domain
        // order, then the views' zones (docs/views.md).
        let mut all = Vec::new();
        let mut of_views = Vec::new();
        for d in &config.domains {
            if cx.cancel.is_cancelled() {
                break;
            }
            for zone in cx.domain_views(d, &refs, &view_names) {
                match zone.view {
                    None => all.push(Arc::new(zone)),
                    Some(_) => of_views.push(Arc::new(zone)),
                }
            }
        }
        all.extend(of_views);
        all
    };
    let mut zones = zones;
    if let Some(catalog) = cx.catalog(config, &refs) {
        // After the zones every client gets, before the views' zones.
        let at = zones
            .iter()
            .position(|z| z.view.is_some())
            .unwrap_or(zones.len());
        zones.insert(at, Arc::new(catalog));
    }
    let mut apexes = HashSet::new();
    for z in &zones {
        if !apexes.insert((z.apex.clone(), z.view_index())) {
            cx.err(format!("domain {}", z.apex), "is defined twice");
        }
    }
    cancel.check()?;
    if views.is_empty() {
        cx.cname_loops(&zones);
    } else {
        // Each view's chains through the zones it is answered from.
        for v in 0..=views.len() {
            cx.cname_loops(&views::zones_seen(&zones, v as u16));
        }
        cx.errors.dedup();
    }
    let rate_limit = super::abuse::rate_limit(&mut cx.errors, config.rate_limit.as_ref());
    let cookie_rotation = super::abuse::cookie_rotation(&mut cx.errors, config.cookies.as_ref());
    cancel.check()?;
    if cx.errors.is_empty() {
        Ok(Compiled {
            datacenters,
            checks,
            scenarios,
            zones,
            rate_limit,
            cookie_rotation,
            topology: Arc::new(topology),
            views,
            view_set,
        })
    } else {
        Err(cx.errors.finish().into())
    }
}

/// What the configuration defines, by name: the datacenters, checks and
/// scenarios records refer to.
struct Refs<'a> {
    /// The datacenters, by [`DcId`].
    datacenters: &'a [DcSpec],
    dcs: &'a HashMap<&'a str, DcId>,
    checks: &'a HashMap<&'a str, &'a CheckSpec>,
    scenarios: &'a HashSet<&'a str>,
    /// The matchers of regions and rule places, by their key.
    places: &'a HashMap<String, u32>,
    /// The rule sets, by their places.
    sets: &'a HashMap<Vec<String>, u32>,
}

/// The compiler: every error found, in the order found.
struct Cx {
    errors: Listing,
    /// Looked at before each domain and record.
    cancel: Cancel,
}

/// Refuses a name left empty or given twice among `names`, the names of
/// the `kind` tables.
fn unique<'a>(cx: &mut Cx, kind: &str, names: impl Iterator<Item = &'a str>) {
    let mut seen = HashSet::new();
    for name in names {
        if name.trim().is_empty() {
            cx.err(kind.to_string(), "a name is required");
        } else if !seen.insert(name) {
            cx.err(format!("{kind} {name}"), "is defined twice");
        }
    }
}

impl Cx {
    /// An error about the object at `path`.
    fn err(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError {
            path: path.into(),
            message: message.into(),
        });
    }
}

/// A domain's datacenters, as its records' modes read them.
struct ModeCx {
    main_dc: Option<DcId>,
    dr_dc: Option<DcId>,
    dc_order: Vec<DcId>,
    dcs_to_select: Option<usize>,
}

/// What the records of a domain compile against: the domain's path (the
/// start of theirs), apex, defaults and datacenters, and what the
/// configuration defines.
struct DomainCx<'a> {
    path: &'a str,
    apex: &'a Name,
    /// The domain's TTL, a record's default.
    ttl: u32,
    /// The domain's mode, a record's default.
    mode: Mode,
    /// The domain's topology rules, a record's default.
    rules: &'a [crate::config::TopologyRule],
    /// The view whose zone the records are of.
    view: Option<&'a str>,
    dcs: &'a ModeCx,
    refs: &'a Refs<'a>,
}

/// A name as written compared without case and final dot.
fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod types_tests;
