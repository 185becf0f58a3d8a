//! `[[domain]]`: a domain's zone, its settings (apex, datacenters, name
//! servers, SOA) and its records.

use std::sync::Arc;

use hickory_server::proto::rr::{Name, rdata::SOA};

use super::delegation::Cuts;
use super::{
    Cx, DcId, DomainCx, ModeCx, Refs, ZoneSpec, ZoneView, rdata::fqdn, records::Kept, reuse,
};
use crate::config::{Domain, Record, Secondary};

/// The records of one view of a domain (or of none): the view's index
/// and name, and its records.
type Part<'a> = (Option<(u16, &'a str)>, Vec<Arc<Record>>);

/// What every zone of a domain has ([`Cx::settings`]).
struct Settings {
    apex: Name,
    ttl: u32,
    dcs: ModeCx,
    nameservers: Vec<Name>,
    soa: SOA,
}

/// The default TTL of records (spec §6, seed 002's advice of 30–60 s).
pub const DEFAULT_TTL: u32 = 30;

impl Cx {
    /// A domain's zone. `compiled`: the same domain compiled before (in a
    /// configuration whose datacenters, checks, scenarios and services are
    /// these), whose records' compiled forms are taken where they did not
    /// change.
    pub(super) fn domain(
        &mut self,
        d: &Domain,
        refs: &Refs,
        compiled: Option<(&Domain, &ZoneSpec)>,
    ) -> Option<ZoneSpec> {
        let path = format!("domain {}", d.name);
        let before = self.errors.len();
        self.primary(&path, d);
        // A domain transferred in serves its own records over the
        // transferred ones, compiled whole.
        let layered = super::primary::layered(d);
        let (d, compiled) = match &layered {
            std::borrow::Cow::Owned(d) => (d, None),
            std::borrow::Cow::Borrowed(d) => (*d, compiled),
        };
        let settings = self.settings(&path, d, refs)?;
        // The records before and after the changed ones keep their
        // compiled forms.
        let kept = compiled.and_then(|(old, zone)| {
            let (start, end) = reuse::unchanged(d, (old, zone))?;
            Some(Kept { zone, start, end })
        });
        if let Some((old, zone)) = compiled
            && let Some(k) = &kept
            && reuse::shares_a_kept_name(
                k.changed(d),
                (old, zone),
                (k.start, k.end),
                &settings.apex,
            )
        {
            // A changed record with the name and type of a kept one: the
            // whole domain is compiled, so that the error is said as ever.
            self.errors.truncate(before);
            return self.domain(d, refs, None);
        }
        let zone = self.zone(&path, d, refs, &settings, None, kept)?;
        (self.errors.len() == before).then_some(zone)
    }

    /// The zones of a domain in a configuration with views
    /// (docs/views.md): the zone every client gets, of the records in no
    /// view, and one per view its records name, of those records; or, for
    /// a domain that is one view's alone, that view's zone of all of
    /// them. `views`: each view's index (from 1) by its name.
    pub(super) fn domain_views(
        &mut self,
        d: &Domain,
        refs: &Refs,
        views: &[&str],
    ) -> Vec<ZoneSpec> {
        let path = format!("domain {}", d.name);
        let before = self.errors.len();
        self.primary(&path, d);
        let layered = super::primary::layered(d);
        let d: &Domain = &layered;
        let index = |name: &str| {
            views
                .iter()
                .position(|v| *v == name)
                .and_then(|i| u16::try_from(i + 1).ok())
        };
        let Some(settings) = self.settings(&path, d, refs) else {
            return Vec::new();
        };
        // The domain's own view, and each record's.
        let own = match d.view.as_deref() {
            None => None,
            Some(v) => match index(v) {
                Some(i) => Some((i, v)),
                None => {
                    self.err(&path, format!("view: unknown view \"{v}\""));
                    return Vec::new();
                }
            },
        };
        let mut parts: Vec<Part> = vec![(own, Vec::new())];
        for r in &d.records {
            let view = match (r.view(), own) {
                (None, own) => own,
                (Some(v), Some((_, o))) if v == o => own,
                (Some(v), Some((_, o))) => {
                    self.err(
                        format!("{path} / record {} {}", r.name, r.kind.as_str()),
                        format!("view: \"{v}\" in a domain that is view \"{o}\"'s alone"),
                    );
                    continue;
                }
                (Some(v), None) => match index(v) {
                    Some(i) => Some((i, v)),
                    None => {
                        self.err(
                            format!("{path} / record {} {}", r.name, r.kind.as_str()),
                            format!("view: unknown view \"{v}\""),
                        );
                        continue;
                    }
                },
            };
            match parts.iter_mut().find(|(v, _)| *v == view) {
                Some((_, list)) => list.push(r.clone()),
                None => parts.push((view, vec![r.clone()])),
            }
        }
        // A secondary's view: the one it names, in a view's own domain
        // that view. A view no record names has a zone all the same when a
        // secondary transfers it: the zone its clients get.
        fn named<'a>(s: &'a Secondary, own: Option<(u16, &'a str)>) -> Option<&'a str> {
            s.view.as_deref().or(own.map(|(_, o)| o))
        }
        let view_of = |s| named(s, own);
        for s in d.secondaries.iter().filter(|_| own.is_none()) {
            if let Some(v) = view_of(s)
                && let Some(i) = index(v)
                && !parts.iter().any(|(p, _)| *p == Some((i, v)))
            {
                parts.push((Some((i, v)), Vec::new()));
            }
        }
        let mut zones: Vec<ZoneSpec> = Vec::new();
        for (view, records) in parts {
            let part = Domain {
                records,
                secondaries: d
                    .secondaries
                    .iter()
                    .filter(|s| view_of(s) == view.map(|(_, v)| v))
                    .cloned()
                    .collect(),
                ..d.without_records()
            };
            let vpath = match view {
                Some((_, v)) if own.is_none() => format!("{path} / view {v}"),
                _ => path.clone(),
            };
            let Some(mut zone) =
                self.zone(&vpath, &part, refs, &settings, view.map(|(_, v)| v), None)
            else {
                continue;
            };
            if let Some((index, name)) = view {
                // The zone every client gets is first: a view's zone takes
                // its records at the names the view leaves alone.
                let inherited = match (own, zones.first()) {
                    (None, Some(all)) => {
                        let names: std::collections::HashSet<&[u8]> =
                            zone.records.iter().map(|r| &*r.owner).collect();
                        all.records
                            .iter()
                            .filter(|r| !names.contains(&*r.owner))
                            .cloned()
                            .collect()
                    }
                    _ => Vec::new(),
                };
                // The delegations of the zone every client gets hold in
                // the view's zone too.
                if let (None, Some(all)) = (own, zones.first())
                    && !all.cuts.is_empty()
                {
                    let base = all.cuts.clone();
                    zone.cuts = self.delegations(&vpath, &zone.apex, &zone.records, &[], &base);
                }
                zone.view = Some(Box::new(ZoneView {
                    index,
                    name: name.into(),
                    inherited,
                }));
            }
            zones.push(zone);
        }
        // An address is one secondary: of one view (within a view, each
        // zone's own list says so).
        let mut views_of = std::collections::HashMap::new();
        for s in &d.secondaries {
            if let Some(first) = views_of.insert(s.address.as_str(), view_of(s))
                && first != view_of(s)
            {
                self.err(
                    format!("{path} / secondaries"),
                    format!("address {} is listed for two views", s.address),
                );
            }
            if let Some(v) = s.view.as_deref()
                && (index(v).is_none() || own.is_some_and(|(_, o)| o != v))
            {
                self.err(
                    format!("{path} / secondaries"),
                    format!("view: \"{v}\" is not a view of this domain"),
                );
            }
        }
        if self.errors.len() == before {
            zones
        } else {
            Vec::new()
        }
    }

    /// What every zone of a domain has: its apex, TTL, datacenters, name
    /// servers and SOA. `None` when the domain has no valid name.
    fn settings(&mut self, path: &str, d: &Domain, refs: &Refs) -> Option<Settings> {
        let apex = self.apex(path, d)?;
        self.updates(path, d, &apex);
        let ttl = d.ttl.unwrap_or(DEFAULT_TTL);
        let dcs = self.domain_dcs(path, d, refs);
        let nameservers = self.nameservers(path, d);
        let soa = self.soa(path, d, &apex, ttl, &nameservers);
        self.domain_rules(path, &d.topology_rules, refs);
        Some(Settings {
            apex,
            ttl,
            dcs,
            nameservers,
            soa,
        })
    }

    /// The zone of `d`'s records (with `settings`, its domain's), in
    /// `view`'s zone when given; those of `kept` taken as they are.
    fn zone(
        &mut self,
        path: &str,
        d: &Domain,
        refs: &Refs,
        settings: &Settings,
        view: Option<&str>,
        kept: Option<Kept>,
    ) -> Option<ZoneSpec> {
        let before = self.errors.len();
        let Settings {
            apex,
            ttl,
            dcs,
            nameservers,
            soa,
        } = settings;
        let secondaries = self.secondaries(path, d);
        let within = DomainCx {
            path,
            apex,
            ttl: *ttl,
            mode: d.mode.unwrap_or_default(),
            rules: &d.topology_rules,
            view,
            dcs,
            refs,
        };
        let records = self.zone_records(d, &within, kept)?;
        let checked = records.checked();
        self.names(path, apex, (soa, nameservers), &checked);
        let cuts = self.delegations(path, apex, records.all(), &checked, &Cuts::new());
        let aliased = self.aliases(path, apex, records.all());
        drop(checked);
        let (records, cnames, owners) = records.finish();
        (self.errors.len() == before).then(|| ZoneSpec {
            apex: apex.clone(),
            soa: soa.clone(),
            serial_set: d.soa.as_ref().is_some_and(|soa| soa.serial.is_some()),
            soa_ttl: *ttl,
            nameservers: nameservers.clone(),
            ns_ttl: *ttl,
            cnames,
            records,
            dnssec: (d.dnssec == Some(true)).then(|| d.dnssec_algorithm.unwrap_or_default()),
            secondaries,
            owners,
            view: None,
            cuts,
            aliased,
        })
    }

    /// The domain's name, fully qualified: never the root.
    fn apex(&mut self, path: &str, d: &Domain) -> Option<Name> {
        match fqdn(&d.name, &Name::root()) {
            Ok(n) if !n.is_root() => Some(n),
            Ok(_) => {
                self.err(path, "the root zone cannot be served");
                None
            }
            Err(e) => {
                self.err(path, e.to_string());
                None
            }
        }
    }

    /// The datacenters the domain's records steer between: `main_dc` and
    /// `dr_dc` for disaster recovery, `dc_order` (all datacenters when
    /// unset) and `dcs_to_select` for datacenter mode.
    fn domain_dcs(&mut self, path: &str, d: &Domain, refs: &Refs) -> ModeCx {
        let dc = |cx: &mut Cx, key: &str, name: &Option<String>| -> Option<DcId> {
            let name = name.as_deref()?;
            let id = refs.dcs.get(name).copied();
            if id.is_none() {
                cx.err(path, format!("{key}: unknown datacenter \"{name}\""));
            }
            id
        };
        let main_dc = dc(self, "main_dc", &d.main_dc);
        let dr_dc = dc(self, "dr_dc", &d.dr_dc);
        if main_dc.is_some() && main_dc == dr_dc {
            self.err(path, "main_dc and dr_dc must be different datacenters");
        }
        let mut dc_order = Vec::new();
        for name in &d.dc_order {
            match refs.dcs.get(name.as_str()) {
                Some(id) if dc_order.contains(id) => {
                    self.err(path, format!("dc_order names \"{name}\" twice"))
                }
                Some(id) => dc_order.push(*id),
                None => self.err(path, format!("dc_order: unknown datacenter \"{name}\"")),
            }
        }
        if d.dcs_to_select == Some(0) {
            self.err(path, "dcs_to_select must be 1 or more");
        }
        ModeCx {
            main_dc,
            dr_dc,
            dc_order: if dc_order.is_empty() {
                (0..refs.dcs.len()).collect()
            } else {
                dc_order
            },
            dcs_to_select: d.dcs_to_select,
        }
    }

    /// The apex NS set: at least one name server, each a valid name.
    fn nameservers(&mut self, path: &str, d: &Domain) -> Vec<Name> {
        if d.nameservers.is_empty() {
            self.err(
                path,
                "a domain needs at least one name server: nameservers = [\"ns1.example.test\"]",
            );
        }
        d.nameservers
            .iter()
            .filter_map(|n| match fqdn(n, &Name::root()) {
                Ok(n) => Some(n),
                Err(e) => {
                    self.err(path, format!("nameservers: {e}"));
                    None
                }
            })
            .collect()
    }

    /// The SOA record, with its defaults: the first name server as
    /// `mname`, `hostmaster.<domain>` as `rname`, the domain's TTL as
    /// `minimum`, serial 1 until the configuration version replaces it.
    fn soa(&mut self, path: &str, d: &Domain, apex: &Name, ttl: u32, nameservers: &[Name]) -> SOA {
        let soa_in = d.soa.clone().unwrap_or_default();
        let mname = match &soa_in.mname {
            Some(m) => fqdn(m, &Name::root())
                .map_err(|e| self.err(path, format!("soa.mname: {e}")))
                .ok(),
            None => nameservers.first().cloned(),
        };
        let rname = match &soa_in.rname {
            Some(r) => fqdn(r, &Name::root())
                .map_err(|e| self.err(path, format!("soa.rname: {e}")))
                .ok(),
            None => Name::from_ascii("hostmaster")
                .ok()
                .and_then(|h| h.append_domain(apex).ok()),
        };
        let minimum = soa_in.minimum.unwrap_or(ttl);
        SOA::new(
            mname.unwrap_or_else(Name::root),
            rname.unwrap_or_else(Name::root),
            soa_in.serial.unwrap_or(1),
            soa_in.refresh.unwrap_or(3600) as i32,
            soa_in.retry.unwrap_or(600) as i32,
            soa_in.expire.unwrap_or(604_800) as i32,
            minimum,
        )
    }
}
