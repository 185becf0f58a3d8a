//! RFC 2136 dynamic updates as the state machine applies them to the
//! committed configuration (docs/transfer.md, "Dynamic update").
//!
//! The zone is a domain served to every client (not a view's); the
//! prerequisites (§3.2) are judged against the committed configuration, so
//! they hold for the very change they guard; every change must be granted
//! to the update's key by the domain's `updates` (§3.3: one that is not,
//! and nothing is applied: REFUSED); the changes (§3.4) are then made to a
//! copy of the domain, in order, and the result goes the way of every
//! configuration change (proven servable whole, or refused whole).
//!
//! Records map onto the configuration's (name, type) records in no view:
//! an A or AAAA add adds `{ ip }` to `addresses`; a CNAME add makes the
//! record's single target; any other type's data is one of `values`, in
//! zone-file syntax. The SOA and the apex NS set are the domain's `soa`
//! and `nameservers`: an update naming them is REFUSED.
//!
//! A refusal's message starts with its response code's name
//! ([`gtm_dns::update::refusal`]), which the device answers with.

use std::{net::IpAddr, sync::Arc};

use hickory_proto::rr::{Name, RData};

use super::{Change, rejected};
use gtm_dns::update::{
    CLASS_ANY, CLASS_IN, CLASS_NONE, ResponseCode, TYPE_ANY, Update, UpdateRr, refusal,
};
use gtm_model::{
    Config,
    compile::{DEFAULT_TTL, read_value},
    config::{Address, AddressFields, Domain, Record, RecordFields, RecordType},
    error::ErrorKind,
};

/// A refusal answered with `code`.
fn refuse(code: ResponseCode, why: impl std::fmt::Display) -> Change {
    let kind = match code {
        ResponseCode::FormErr | ResponseCode::NotZone => ErrorKind::BadRequest,
        ResponseCode::Refused => ErrorKind::Forbidden,
        ResponseCode::NotAuth => ErrorKind::NotFound,
        ResponseCode::YXDomain
        | ResponseCode::YXRRSet
        | ResponseCode::NXDomain
        | ResponseCode::NXRRSet => ErrorKind::Conflict,
        _ => ErrorKind::Internal,
    };
    rejected(kind, refusal(code, &why.to_string()))
}

/// The zone an update changes: its domain, apex and origin.
struct Zone<'a> {
    domain: &'a Domain,
    apex: String,
    origin: Name,
}

impl Zone<'_> {
    /// A record's owner name, lower case without the final dot.
    fn owner(&self, record: &Record) -> String {
        let name = record.name.to_ascii_lowercase();
        match name.as_str() {
            "@" | "" => self.apex.clone(),
            n if n.ends_with('.') => n.trim_end_matches('.').to_string(),
            n => format!("{n}.{}", self.apex),
        }
    }

    /// A name relative to the apex (`@`: the apex itself).
    fn relative(&self, name: &str) -> String {
        if name == self.apex {
            return "@".into();
        }
        name.strip_suffix(&self.apex)
            .and_then(|p| p.strip_suffix('.'))
            .unwrap_or(name)
            .to_string()
    }

    /// The records (in no view) at `name`.
    fn at<'b>(&'b self, d: &'b Domain, name: &'b str) -> impl Iterator<Item = &'b Arc<Record>> {
        d.records
            .iter()
            .filter(move |r| r.view().is_none() && self.owner(r) == name)
    }

    fn in_use(&self, d: &Domain, name: &str) -> bool {
        name == self.apex || self.at(d, name).next().is_some()
    }

    /// The data of the RRset at `name` of type `rtype`, as the zone holds
    /// it (a steered record's every address), read as record data.
    fn rrset(&self, d: &Domain, name: &str, rtype: u16) -> Vec<RData> {
        let kind = RecordType::from_code(rtype);
        if name == self.apex && kind == RecordType::NS {
            return d
                .nameservers
                .iter()
                .filter_map(|ns| data_of(kind, &absolute(ns), &Name::root()).ok())
                .collect();
        }
        self.at(d, name)
            .filter(|r| r.kind == kind)
            .flat_map(|r| texts(r))
            .filter_map(|text| data_of(kind, &text, &self.origin).ok())
            .collect()
    }

    fn exists(&self, d: &Domain, name: &str, rtype: u16) -> bool {
        let kind = RecordType::from_code(rtype);
        (name == self.apex && (kind == RecordType::SOA || kind == RecordType::NS))
            || self.at(d, name).any(|r| r.kind == kind)
    }
}

/// A name with its final dot.
fn absolute(name: &str) -> String {
    format!("{}.", name.trim_end_matches('.'))
}

/// A record's data as zone-file texts: its addresses' IPs or targets, or
/// its values.
fn texts(r: &Record) -> Vec<String> {
    let mut out: Vec<String> = r.addresses.iter().filter_map(address_text).collect();
    out.extend(r.values().iter().cloned());
    out
}

/// An address's data in zone-file syntax: an MX's or SRV's value, an IP,
/// or a CNAME's target.
fn address_text(a: &Address) -> Option<String> {
    match (a.value(), a.ip, a.target()) {
        (Some(v), _, _) => Some(v.to_string()),
        (None, Some(ip), _) => Some(ip.to_string()),
        (None, None, Some(t)) => Some(t.to_string()),
        _ => None,
    }
}

/// Data of type `kind` in zone-file syntax, relative names under
/// `origin`: A, AAAA and CNAME (which the configuration holds as
/// addresses, not values) read here, any other type as a value is.
fn data_of(kind: RecordType, text: &str, origin: &Name) -> Result<RData, String> {
    use hickory_proto::rr::rdata::{A, AAAA, CNAME};
    let bad = |e: &dyn std::fmt::Display| e.to_string();
    match kind {
        RecordType::A => text.parse().map(|ip| RData::A(A(ip))).map_err(|e| bad(&e)),
        RecordType::AAAA => text
            .parse()
            .map(|ip| RData::AAAA(AAAA(ip)))
            .map_err(|e| bad(&e)),
        RecordType::CNAME => {
            gtm_model::compile::absolute(text, origin).map(|n| RData::CNAME(CNAME(n)))
        }
        _ => read_value(kind, text, origin),
    }
}

/// Types that are never a record of a zone: meta and question types.
fn is_meta(rtype: u16) -> bool {
    rtype == 0 || rtype == 41 || (128..=255).contains(&rtype)
}

/// The configuration `update` makes of `config`, or its refusal.
pub(super) fn apply(config: &Config, update: &Update) -> Result<Config, Change> {
    let i = config.domain_index(&update.zone).ok_or_else(|| {
        refuse(
            ResponseCode::NotAuth,
            format!("{} is not a zone of this cluster", update.zone),
        )
    })?;
    let domain = &config.domains[i];
    let apex = domain.name.trim_end_matches('.').to_ascii_lowercase();
    let origin = Name::from_ascii(absolute(&apex))
        .map_err(|e| refuse(ResponseCode::NotAuth, format!("{apex}: {e}")))?;
    let zone = Zone {
        domain,
        apex,
        origin,
    };
    for rr in update.prerequisites.iter().chain(&update.updates) {
        let name = rr.name.trim_end_matches('.');
        if name != zone.apex && !name.ends_with(&format!(".{}", zone.apex)) {
            return Err(refuse(
                ResponseCode::NotZone,
                format!("{} is outside zone {}", rr.name, zone.apex),
            ));
        }
    }
    prerequisites(&zone, &update.prerequisites)?;
    prescan(&update.updates)?;
    permitted(&zone, &update.key, &update.updates)?;
    let mut d = Domain::clone(domain);
    for rr in &update.updates {
        change(&zone, &mut d, rr);
    }
    let mut new = config.clone();
    new.domains[i] = Arc::new(d);
    Ok(new)
}

/// RFC 2136 §3.2: every prerequisite holds, or the code of the first that
/// does not.
fn prerequisites(zone: &Zone, prereqs: &[UpdateRr]) -> Result<(), Change> {
    let d = zone.domain;
    // Value-dependent prerequisites, by name and type (§3.2.3): the
    // RRsets they make must equal the zone's.
    let mut sets: Vec<(&str, u16, Vec<RData>)> = Vec::new();
    for rr in prereqs {
        let name = rr.name.as_str();
        let form = || {
            refuse(
                ResponseCode::FormErr,
                format!("prerequisite {name}: malformed"),
            )
        };
        if rr.ttl != 0 {
            return Err(form());
        }
        match (rr.class, rr.rtype, &rr.data) {
            (CLASS_ANY, TYPE_ANY, None) => {
                if !zone.in_use(d, name) {
                    return Err(refuse(
                        ResponseCode::NXDomain,
                        format!("{name} is not in use"),
                    ));
                }
            }
            (CLASS_ANY, t, None) if !is_meta(t) => {
                if !zone.exists(d, name, t) {
                    return Err(refuse(
                        ResponseCode::NXRRSet,
                        format!("{name} has no {} RRset", RecordType::from_code(t)),
                    ));
                }
            }
            (CLASS_NONE, TYPE_ANY, None) => {
                if zone.in_use(d, name) {
                    return Err(refuse(ResponseCode::YXDomain, format!("{name} is in use")));
                }
            }
            (CLASS_NONE, t, None) if !is_meta(t) => {
                if zone.exists(d, name, t) {
                    return Err(refuse(
                        ResponseCode::YXRRSet,
                        format!("{name} has a {} RRset", RecordType::from_code(t)),
                    ));
                }
            }
            (CLASS_IN, t, Some(text)) if !is_meta(t) => {
                let data =
                    data_of(RecordType::from_code(t), text, &Name::root()).map_err(|_| form())?;
                match sets.iter_mut().find(|(n, k, _)| *n == name && *k == t) {
                    Some((_, _, set)) => {
                        if !set.contains(&data) {
                            set.push(data);
                        }
                    }
                    None => sets.push((name, t, vec![data])),
                }
            }
            _ => return Err(form()),
        }
    }
    for (name, t, wanted) in sets {
        let held = zone.rrset(d, name, t);
        let same = held.len() == wanted.len() && held.iter().all(|h| wanted.contains(h));
        if !same {
            return Err(refuse(
                ResponseCode::NXRRSet,
                format!(
                    "the {} RRset of {name} is not the one given",
                    RecordType::from_code(t)
                ),
            ));
        }
    }
    Ok(())
}

/// RFC 2136 §3.4.1.3: the form of every change, before any is made.
fn prescan(updates: &[UpdateRr]) -> Result<(), Change> {
    for rr in updates {
        let form = || {
            refuse(
                ResponseCode::FormErr,
                format!("update {}: malformed", rr.name),
            )
        };
        let ok = match (rr.class, &rr.data) {
            (CLASS_IN, Some(_)) => !is_meta(rr.rtype),
            (CLASS_ANY, None) => rr.ttl == 0 && (rr.rtype == TYPE_ANY || !is_meta(rr.rtype)),
            (CLASS_NONE, Some(_)) => rr.ttl == 0 && !is_meta(rr.rtype),
            _ => false,
        };
        if !ok {
            return Err(form());
        }
        if let Some(text) = &rr.data
            && data_of(RecordType::from_code(rr.rtype), text, &Name::root()).is_err()
        {
            return Err(form());
        }
    }
    Ok(())
}

/// Whether the grants of `d` let `key` change `rtype` at `relative`.
fn granted(d: &Domain, key: &str, relative: &str, rtype: RecordType) -> bool {
    d.updates.iter().any(|g| {
        g.key == key && covers(&g.name, g.subdomains, relative) && g.types.contains(&rtype)
    })
}

/// Whether a grant of `name` (and, with `subdomains`, the names below it)
/// covers the name `relative`.
fn covers(name: &str, subdomains: bool, relative: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == relative {
        return true;
    }
    subdomains
        && (name == "@"
            || relative
                .strip_suffix(name.as_str())
                .is_some_and(|p| p.ends_with('.')))
}

/// RFC 2136 §3.3: every change is granted to the key, or none is made.
/// The SOA and the apex NS set are the domain's own settings, never
/// updated. Deleting every RRset of a name needs a grant of each type
/// the name holds.
fn permitted(zone: &Zone, key: &str, updates: &[UpdateRr]) -> Result<(), Change> {
    let d = zone.domain;
    for rr in updates {
        let name = rr.name.as_str();
        let kind = RecordType::from_code(rr.rtype);
        if kind == RecordType::SOA || (kind == RecordType::NS && name == zone.apex) {
            return Err(refuse(
                ResponseCode::Refused,
                format!(
                    "{name} {kind}: the SOA and the apex NS set are the domain's soa and nameservers, not updated by DNS"
                ),
            ));
        }
        let relative = zone.relative(name);
        let kinds: Vec<RecordType> = if rr.rtype == TYPE_ANY {
            zone.at(d, name).map(|r| r.kind).collect()
        } else {
            vec![kind]
        };
        let covered = d
            .updates
            .iter()
            .any(|g| g.key == key && covers(&g.name, g.subdomains, &relative));
        if let Some(k) = kinds
            .iter()
            .find(|k| !granted(d, key, &relative, **k))
            .or((!covered).then_some(&kind))
        {
            return Err(refuse(
                ResponseCode::Refused,
                format!("key {key} is not granted {k} at {name}"),
            ));
        }
    }
    Ok(())
}

/// The TTL a record written by an update keeps: none when it is the
/// domain's.
fn ttl_of(d: &Domain, ttl: u32) -> Option<u32> {
    (ttl != d.ttl.unwrap_or(DEFAULT_TTL)).then_some(ttl)
}

/// RFC 2136 §3.4.2: one change made to `d`.
fn change(zone: &Zone, d: &mut Domain, rr: &UpdateRr) {
    let name = rr.name.as_str();
    let kind = RecordType::from_code(rr.rtype);
    let at = |d: &Domain, kind: RecordType| {
        d.records
            .iter()
            .position(|r| r.view().is_none() && r.kind == kind && zone.owner(r) == name)
    };
    match (rr.class, &rr.data) {
        (CLASS_IN, Some(text)) => add(zone, d, rr, text, at(d, kind)),
        (CLASS_ANY, None) => d.records.retain(|r| {
            !(r.view().is_none()
                && zone.owner(r) == name
                && (rr.rtype == TYPE_ANY || r.kind == kind))
        }),
        (CLASS_NONE, Some(text)) => {
            if let Some(i) = at(d, kind) {
                let Ok(data) = data_of(kind, text, &Name::root()) else {
                    return;
                };
                let matches = |t: &str| data_of(kind, t, &zone.origin).is_ok_and(|v| v == data);
                let mut fields = RecordFields::from(Record::clone(&d.records[i]));
                let mut addresses = fields.addresses.into_vec();
                addresses.retain(|a| address_text(a).is_none_or(|t| !matches(&t)));
                fields.addresses = addresses.into();
                let mut values = fields.values.into_vec();
                values.retain(|v| !matches(v));
                fields.values = values.into();
                if fields.addresses.is_empty() && fields.values.is_empty() {
                    d.records.remove(i);
                } else {
                    d.records[i] = Arc::new(fields.into());
                }
            }
        }
        _ => {}
    }
}

/// An add (§3.4.2.2): to the record of that name and type, or a new one.
/// A CNAME replaces the record's target, and is ignored at a name with
/// other data; other data is ignored at a name with a CNAME.
fn add(zone: &Zone, d: &mut Domain, rr: &UpdateRr, text: &str, at: Option<usize>) {
    let name = rr.name.as_str();
    let kind = RecordType::from_code(rr.rtype);
    let others = zone
        .at(d, name)
        .any(|r| (r.kind == RecordType::CNAME) != (kind == RecordType::CNAME));
    if others {
        return;
    }
    let Ok(data) = data_of(kind, text, &Name::root()) else {
        return;
    };
    let address = |text: &str| -> Address {
        let mut fields = AddressFields::default();
        match text.parse::<IpAddr>() {
            Ok(ip) => fields.ip = Some(ip),
            Err(_) => fields.target = Some(text.into()),
        }
        fields.into()
    };
    let default_ttl = d.ttl.unwrap_or(DEFAULT_TTL);
    let ttl = ttl_of(d, rr.ttl);
    let Some(i) = at else {
        let new = serde_json::json!({ "name": zone.relative(name), "type": kind.as_str() });
        let Ok(mut fields) = serde_json::from_value::<RecordFields>(new) else {
            return;
        };
        fields.ttl = ttl;
        if kind.is_steerable() {
            fields.addresses = vec![address(text)].into();
        } else {
            fields.values = vec![text.to_string()].into();
        }
        d.records.push(Arc::new(fields.into()));
        return;
    };
    let mut fields = RecordFields::from(Record::clone(&d.records[i]));
    if fields.ttl.unwrap_or(default_ttl) != rr.ttl {
        fields.ttl = ttl;
    }
    let held = |t: &str| data_of(kind, t, &zone.origin).is_ok_and(|v| v == data);
    if kind == RecordType::CNAME {
        fields.addresses = vec![address(text)].into();
    } else if kind.is_steerable() {
        let present = fields
            .addresses
            .iter()
            .any(|a| a.ip.map(|ip| ip.to_string()).is_some_and(|t| held(&t)));
        if !present {
            let mut addresses = fields.addresses.into_vec();
            addresses.push(address(text));
            fields.addresses = addresses.into();
        }
    } else if !fields.addresses.is_empty() {
        // A steered MX or SRV: the data is an address's value.
        if !fields
            .addresses
            .iter()
            .any(|a| a.value().is_some_and(&held))
        {
            let mut addresses = fields.addresses.into_vec();
            addresses.push(
                AddressFields {
                    value: Some(text.into()),
                    ..AddressFields::default()
                }
                .into(),
            );
            fields.addresses = addresses.into();
        }
    } else if !fields.values.iter().any(|v| held(v)) {
        let mut values = fields.values.into_vec();
        values.push(text.to_string());
        fields.values = values.into();
    }
    d.records[i] = Arc::new(fields.into());
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_dns::update::{CLASS_ANY, CLASS_IN, CLASS_NONE, TYPE_ANY};

    const CONFIG: &str = r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
ttl = 60
updates = [
  { key = "acme", name = "_acme-challenge", subdomains = true, types = ["TXT"] },
  { key = "dns", name = "k8s", subdomains = true, types = ["A", "TXT", "CNAME"] },
]

[[domain.record]]
name = "_acme-challenge"
type = "TXT"
values = ["one"]

[[domain.record]]
name = "web.k8s"
type = "A"
addresses = [{ ip = "192.0.2.1" }]

[[domain.record]]
name = "web.k8s"
type = "TXT"
values = ["meta"]
"#;

    fn config() -> Config {
        gtm_model::parse(CONFIG).unwrap()
    }

    fn rr(name: &str, class: u16, rtype: u16, ttl: u32, data: Option<&str>) -> UpdateRr {
        UpdateRr {
            name: name.into(),
            class,
            rtype,
            ttl,
            data: data.map(Into::into),
        }
    }

    fn update(key: &str, prerequisites: Vec<UpdateRr>, updates: Vec<UpdateRr>) -> Update {
        Update {
            key: key.into(),
            zone: "example.test".into(),
            prerequisites,
            updates,
        }
    }

    /// The response code of a refusal, or the configuration made.
    fn run(u: &Update) -> Result<Config, String> {
        apply(&config(), u).map_err(|c| match c.outcome {
            crate::command::Outcome::Rejected(e) => e.message,
            other => panic!("{other:?}"),
        })
    }

    fn code(u: &Update) -> String {
        let e = run(u).expect_err("refused");
        e.split(':').next().unwrap_or_default().to_string()
    }

    fn record<'a>(c: &'a Config, name: &str, kind: RecordType) -> Option<&'a Record> {
        c.domains[0]
            .records
            .iter()
            .find(|r| &*r.name == name && r.kind == kind)
            .map(|r| &**r)
    }

    const TXT: u16 = 16;
    const A: u16 = 1;
    const CNAME: u16 = 5;
    const ACME: &str = "_acme-challenge.example.test";

    #[test]
    fn prerequisites_answer_with_their_codes() {
        let add = || vec![rr(ACME, CLASS_IN, TXT, 60, Some("\"two\""))];
        let cases = [
            (rr(ACME, CLASS_NONE, TYPE_ANY, 0, None), "YXDOMAIN"),
            (
                rr("gone.example.test", CLASS_ANY, TYPE_ANY, 0, None),
                "NXDOMAIN",
            ),
            (rr(ACME, CLASS_ANY, A, 0, None), "NXRRSET"),
            (rr(ACME, CLASS_NONE, TXT, 0, None), "YXRRSET"),
            (rr(ACME, CLASS_IN, TXT, 0, Some("\"other\"")), "NXRRSET"),
            (rr(ACME, CLASS_ANY, TXT, 5, None), "FORMERR"),
            (rr(ACME, CLASS_ANY, TXT, 0, Some("\"x\"")), "FORMERR"),
            (rr("elsewhere.test", CLASS_ANY, TXT, 0, None), "NOTZONE"),
        ];
        for (prereq, want) in cases {
            let u = update("acme", vec![prereq.clone()], add());
            assert_eq!(code(&u), want, "{prereq:?}");
        }
        // Those that hold: the apex is in use with its SOA and NS, the
        // TXT RRset is exactly the one given.
        for prereq in [
            rr("example.test", CLASS_ANY, TYPE_ANY, 0, None),
            rr("example.test", CLASS_ANY, 2, 0, None),
            rr("example.test", CLASS_IN, 2, 0, Some("ns1.example.test.")),
            rr(ACME, CLASS_IN, TXT, 0, Some("\"one\"")),
            rr("new.example.test", CLASS_NONE, TYPE_ANY, 0, None),
        ] {
            let u = update("acme", vec![prereq.clone()], add());
            let c = run(&u).unwrap_or_else(|e| panic!("{prereq:?}: {e}"));
            assert_eq!(
                record(&c, "_acme-challenge", RecordType::TXT)
                    .unwrap()
                    .values(),
                ["one", "\"two\""]
            );
        }
        assert_eq!(
            code(&Update {
                zone: "other.test".into(),
                ..update("acme", Vec::new(), add())
            }),
            "NOTAUTH"
        );
    }

    #[test]
    fn every_change_must_be_granted_or_none_is_made() {
        let refused = [
            // Another key's names.
            update(
                "acme",
                vec![],
                vec![rr("a.k8s.example.test", CLASS_IN, A, 60, Some("192.0.2.9"))],
            ),
            // A type the grant lacks.
            update(
                "acme",
                vec![],
                vec![rr(ACME, CLASS_IN, A, 60, Some("192.0.2.9"))],
            ),
            // One granted and one not: nothing.
            update(
                "dns",
                vec![],
                vec![
                    rr("a.k8s.example.test", CLASS_IN, A, 60, Some("192.0.2.9")),
                    rr("www.example.test", CLASS_IN, A, 60, Some("192.0.2.9")),
                ],
            ),
            // The apex NS set and the SOA are the domain's.
            update(
                "dns",
                vec![],
                vec![rr("example.test", CLASS_ANY, 2, 0, None)],
            ),
            update(
                "dns",
                vec![],
                vec![rr("example.test", CLASS_ANY, 6, 0, None)],
            ),
            // A key no grant names.
            update(
                "nobody",
                vec![],
                vec![rr(ACME, CLASS_IN, TXT, 60, Some("\"x\""))],
            ),
        ];
        for u in refused {
            assert_eq!(code(&u), "REFUSED", "{u:?}");
        }
        // `k8s` itself is granted, and so is every name below it.
        for name in ["k8s.example.test", "a.b.k8s.example.test"] {
            let u = update(
                "dns",
                vec![],
                vec![rr(name, CLASS_IN, TXT, 60, Some("\"x\""))],
            );
            assert!(run(&u).is_ok(), "{name}");
        }
        // Not a name that only ends like it.
        let u = update(
            "dns",
            vec![],
            vec![rr("xk8s.example.test", CLASS_IN, TXT, 60, Some("\"x\""))],
        );
        assert_eq!(code(&u), "REFUSED");
        // Deleting every RRset of a name needs each of its types.
        let all = |key| {
            update(
                key,
                vec![],
                vec![rr("web.k8s.example.test", CLASS_ANY, TYPE_ANY, 0, None)],
            )
        };
        let c = run(&all("dns")).unwrap();
        assert!(record(&c, "web.k8s", RecordType::A).is_none());
        assert!(record(&c, "web.k8s", RecordType::TXT).is_none());
        assert_eq!(code(&all("acme")), "REFUSED");
    }

    #[test]
    fn malformed_changes_are_formerr() {
        for bad in [
            rr(ACME, CLASS_IN, TYPE_ANY, 60, Some("\"x\"")),
            rr(ACME, CLASS_IN, TXT, 60, None),
            rr(ACME, CLASS_ANY, TXT, 60, None),
            rr(ACME, CLASS_NONE, TXT, 0, None),
            rr(ACME, 3, TXT, 60, Some("\"x\"")),
            rr(
                "a.k8s.example.test",
                CLASS_IN,
                A,
                60,
                Some("not an address"),
            ),
        ] {
            assert_eq!(
                code(&update("dns", vec![], vec![bad.clone()])),
                "FORMERR",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn adds_and_deletes_map_onto_records() {
        let host = "host.k8s.example.test";
        // A new record: the update's TTL, omitted when it is the domain's.
        let c = run(&update(
            "dns",
            vec![],
            vec![
                rr(host, CLASS_IN, A, 60, Some("192.0.2.10")),
                rr(host, CLASS_IN, A, 60, Some("192.0.2.11")),
                rr(host, CLASS_IN, A, 60, Some("192.0.2.10")),
                rr("txt.k8s.example.test", CLASS_IN, TXT, 300, Some("\"v=1\"")),
            ],
        ))
        .unwrap();
        let a = record(&c, "host.k8s", RecordType::A).unwrap();
        assert_eq!(a.ttl, None);
        let ips: Vec<String> = a
            .addresses
            .iter()
            .filter_map(|a| a.ip)
            .map(|i| i.to_string())
            .collect();
        assert_eq!(ips, ["192.0.2.10", "192.0.2.11"]);
        assert_eq!(
            record(&c, "txt.k8s", RecordType::TXT).unwrap().ttl,
            Some(300)
        );

        // An add to an existing record sets its TTL; delete RR removes a
        // value, and the record goes when it is empty.
        let c = run(&update(
            "dns",
            vec![],
            vec![
                rr("web.k8s.example.test", CLASS_IN, A, 120, Some("192.0.2.2")),
                rr("web.k8s.example.test", CLASS_NONE, TXT, 0, Some("\"meta\"")),
            ],
        ))
        .unwrap();
        let web = record(&c, "web.k8s", RecordType::A).unwrap();
        assert_eq!(web.ttl, Some(120));
        assert_eq!(web.addresses.len(), 2);
        assert!(record(&c, "web.k8s", RecordType::TXT).is_none());

        // A CNAME is ignored at a name with other data, and replaces the
        // target of a CNAME record.
        let c = run(&update(
            "dns",
            vec![],
            vec![
                rr(
                    "web.k8s.example.test",
                    CLASS_IN,
                    CNAME,
                    60,
                    Some("elsewhere.test."),
                ),
                rr(
                    "alias.k8s.example.test",
                    CLASS_IN,
                    CNAME,
                    60,
                    Some("one.test."),
                ),
                rr(
                    "alias.k8s.example.test",
                    CLASS_IN,
                    CNAME,
                    60,
                    Some("two.test."),
                ),
                rr(
                    "alias.k8s.example.test",
                    CLASS_IN,
                    TXT,
                    60,
                    Some("\"ignored\""),
                ),
            ],
        ))
        .unwrap();
        assert!(record(&c, "web.k8s", RecordType::CNAME).is_none());
        let alias = record(&c, "alias.k8s", RecordType::CNAME).unwrap();
        assert_eq!(alias.addresses.len(), 1);
        assert_eq!(alias.addresses[0].target(), Some("two.test."));
        assert!(record(&c, "alias.k8s", RecordType::TXT).is_none());

        // Changes that change nothing leave the configuration as it is.
        let same = run(&update(
            "acme",
            vec![],
            vec![
                rr(ACME, CLASS_IN, TXT, 60, Some("\"one\"")),
                rr("x._acme-challenge.example.test", CLASS_ANY, TXT, 0, None),
                rr(ACME, CLASS_NONE, TXT, 0, Some("\"absent\"")),
            ],
        ))
        .unwrap();
        assert_eq!(same, config());
    }

    /// Through the whole machine: grant keys must exist; an update is a
    /// version whose actor is its key; one that changes nothing is none.
    #[test]
    fn an_update_is_a_version_by_its_key_and_a_no_op_is_none() {
        use crate::command::{Action, Command, Outcome, TsigChange};
        use crate::machine::{GtmMachine, apply_for_test, history_of};
        let machine = GtmMachine::default();
        let mut kv = gtm_cluster::Map::new();
        let mut index = 0;
        let mut run = |kv: &mut gtm_cluster::Map, actor: &str, action: Action| {
            index += 1;
            let mut command = Command::new(crate::updates::actor(actor, "gtm1"), None, action);
            command.actor.user = actor.to_string();
            apply_for_test(&machine, kv, index, &command)
        };
        let apply = Action::ApplyConfig {
            text: CONFIG.into(),
        };
        let Outcome::Rejected(e) = run(&mut kv, "admin", apply.clone()) else {
            panic!("grants naming unknown keys were applied");
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("domain example.test / updates[0]"), "{text}");
        assert!(text.contains("unknown TSIG key \\\"acme\\\""), "{text}");
        for key in ["acme", "dns"] {
            let add = Action::Tsig(TsigChange::Add {
                name: key.into(),
                algorithm: gtm_dns::tsig::ALGORITHM.into(),
                secret: gtm_dns::tsig::Secret::new(vec![1; gtm_dns::tsig::SECRET_LEN]),
            });
            assert!(matches!(
                run(&mut kv, "admin", add),
                Outcome::Applied { .. }
            ));
        }
        assert!(matches!(
            run(&mut kv, "admin", apply),
            Outcome::Applied { version: 1, .. }
        ));
        let add = update(
            "acme",
            vec![],
            vec![rr(ACME, CLASS_IN, TXT, 60, Some("\"two\""))],
        );
        let Outcome::Applied {
            version, changed, ..
        } = run(&mut kv, "key:acme", Action::Update(Box::new(add.clone())))
        else {
            panic!("not applied");
        };
        assert_eq!((version, changed), (2, true));
        let last = history_of(&kv).pop().unwrap();
        assert_eq!(last.actor.user, "key:acme");
        assert_eq!(last.what, "dynamic update of example.test (key acme)");
        let Outcome::Applied {
            version, changed, ..
        } = run(&mut kv, "key:acme", Action::Update(Box::new(add)))
        else {
            panic!("not applied");
        };
        assert_eq!((version, changed), (2, false), "the same add again");
        // A change the configuration refuses: a CNAME to itself.
        let refused = update(
            "dns",
            vec![],
            vec![rr(
                "loop.k8s.example.test",
                CLASS_IN,
                CNAME,
                60,
                Some("loop.k8s.example.test."),
            )],
        );
        let Outcome::Rejected(e) = run(&mut kv, "key:dns", Action::Update(Box::new(refused)))
        else {
            panic!("an invalid change was applied: {:?}", history_of(&kv).pop());
        };
        assert_eq!(e.error, ErrorKind::InvalidConfig, "{e:?}");
        // A key a grant names cannot go.
        let delete = Action::Tsig(TsigChange::Delete { name: "dns".into() });
        assert!(matches!(
            run(&mut kv, "admin", delete),
            Outcome::Rejected(_)
        ));
    }
}
