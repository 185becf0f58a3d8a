//! What a configuration apply changes, field by field.
//!
//! One line per change, for dry runs, apply results and the configuration
//! history:
//!
//! ```text
//! + check web: interval 10s, path "/health", type "http"
//! ~ check api: interval 10s → 30s
//! - datacenter dc3
//! ~ domain example.test: soa.refresh 3600 → 7200
//! ~ record www.example.test/A in domain example.test: ttl 60 → 300
//! + address 192.0.2.10 of record www.example.test/A: dc "dc1", hc "check:web"
//! ~ address 192.0.2.11 of record www.example.test/A: hc "check:web" → "check:web2"
//! ~ record www.example.test/A in domain example.test: address order [192.0.2.11, 192.0.2.12] → [192.0.2.12, 192.0.2.11]
//! ```
//!
//! Objects are matched by key (name; a record by name and type; an address
//! by IP or CNAME target), not by position, so that a domain of 100,000
//! records diffs in linear time, and unchanged objects are only compared,
//! never formatted. The order of the lines is: datacenters, regions,
//! checks, scenarios, services, domains, then the tables `geoip`, `rate_limit` and
//! `cookies`; inside each, the new file's order,
//! then what was removed in the old file's order; the fields of an object in
//! name order.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use gtm_model::config::{Address, Config, Domain, Record, RecordType};

/// A value longer than this (in characters, as printed) is cut with an
/// ellipsis: a diff line names a change, the export shows the whole value.
const MAX_VALUE: usize = 60;

/// Fields of a check that are durations: printed bare (`10s`), as an
/// operator reads them, not as the quoted string they are stored as. A test
/// holds this list to the check's schema.
const CHECK_DURATIONS: &[&str] = &["interval", "max_latency", "stale_after", "timeout"];
/// The same for a notifier.
const NOTIFIER_DURATIONS: &[&str] = &["delay", "repeat"];

/// The changes from `old` to `new`, one line each (see the module doc).
/// Empty exactly when nothing changed.
pub fn diff(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    named(
        &mut out,
        "datacenter",
        &old.datacenters,
        &new.datacenters,
        |d| d.name.as_str(),
        &[],
    );
    named(
        &mut out,
        "region",
        &old.regions,
        &new.regions,
        |r| r.name.as_str(),
        &[],
    );
    named(
        &mut out,
        "view",
        &old.views,
        &new.views,
        |v| v.name.as_str(),
        &[],
    );
    named(
        &mut out,
        "check",
        &old.checks,
        &new.checks,
        |c| c.name.as_str(),
        CHECK_DURATIONS,
    );
    named(
        &mut out,
        "scenario",
        &old.scenarios,
        &new.scenarios,
        |s| s.name.as_str(),
        &[],
    );
    named(
        &mut out,
        "service",
        &old.services,
        &new.services,
        |s| s.name.as_str(),
        &[],
    );
    domains(&mut out, &old.domains, &new.domains);
    named(
        &mut out,
        "notifier",
        &old.notifiers,
        &new.notifiers,
        |n| n.name.as_str(),
        NOTIFIER_DURATIONS,
    );
    table(&mut out, "geoip", &old.geoip, &new.geoip);
    table(&mut out, "rate_limit", &old.rate_limit, &new.rate_limit);
    table(&mut out, "cookies", &old.cookies, &new.cookies);
    // Keys are unique in a valid configuration; should two objects share
    // one, a change could hide behind it: say that something changed rather
    // than "no changes".
    if out.is_empty() && old != new {
        out.push("~ configuration (changed objects share a name)".to_string());
    }
    out
}

/// A top-level table: added, removed, or its fields changed.
fn table<T: PartialEq + Serialize>(
    out: &mut Vec<String>,
    name: &str,
    old: &Option<T>,
    new: &Option<T>,
) {
    match (old, new) {
        (None, Some(_)) => out.push(format!("+ {name}")),
        (Some(_), None) => out.push(format!("- {name}")),
        (Some(o), Some(n)) if o != n => fields(out, name, o, n, &["rotate"]),
        _ => {}
    }
}

/// Top-level objects known by their name.
fn named<T: PartialEq + Serialize>(
    out: &mut Vec<String>,
    kind: &str,
    old: &[T],
    new: &[T],
    name: impl Fn(&T) -> &str,
    bare: &[&str],
) {
    let m = match_up(old, new, &name);
    for n in &m.added {
        out.push(added(format!("+ {kind} {}", name(n)), n, &["name"], bare));
    }
    for (o, n) in &m.common {
        if o != n {
            fields(out, &format!("{kind} {}", name(n)), *o, *n, bare);
        }
    }
    for o in &m.removed {
        out.push(format!("- {kind} {}", name(o)));
    }
    if m.reordered {
        out.push(format!("~ {kind} {}", order(&m, |t| name(t).to_string())));
    }
}

fn domains(out: &mut Vec<String>, old: &[Arc<Domain>], new: &[Arc<Domain>]) {
    let m = match_up(old, new, |d| d.name.as_str());
    for n in &m.added {
        out.push(added(
            format!("+ domain {}", n.name),
            &n.without_records(),
            &["name"],
            &[],
        ));
    }
    for (o, n) in &m.common {
        if o == n {
            continue;
        }
        if !o.same_but_records(n) {
            fields(
                out,
                &format!("domain {}", n.name),
                &o.without_records(),
                &n.without_records(),
                &[],
            );
        }
        records(out, &n.name, &o.records, &n.records);
    }
    for o in &m.removed {
        out.push(format!("- domain {}", o.name));
    }
    if m.reordered {
        out.push(format!("~ domain {}", order(&m, |d| d.name.clone())));
    }
}

fn records(out: &mut Vec<String>, domain: &str, old: &[Arc<Record>], new: &[Arc<Record>]) {
    fn key(r: &Arc<Record>) -> (&str, RecordType) {
        (&r.name, r.kind)
    }
    // The records equal at both ends say nothing: the others are matched,
    // unless they were reordered (the order's line names every record).
    let (start, end) = gtm_model::ends::same_ends(old, new, |o, n| o == n);
    let middle = match_up(
        old.get(start..old.len() - end).unwrap_or_default(),
        new.get(start..new.len() - end).unwrap_or_default(),
        key,
    );
    let m = if middle.reordered {
        match_up(old, new, key)
    } else {
        middle
    };
    let id = |r: &Arc<Record>| record_id(domain, r);
    for n in &m.added {
        let record = id(n);
        out.push(added(
            format!("+ record {record} in domain {domain}"),
            &record_header(n),
            &["name", "type"],
            &[],
        ));
        for a in n.addresses.iter() {
            out.push(added(
                format!("+ address {} of record {record}", address_key(a)),
                a,
                &["ip", "target"],
                &[],
            ));
        }
    }
    for (o, n) in &m.common {
        if o == n {
            continue;
        }
        let record = id(n);
        let (ho, hn) = (record_header(o), record_header(n));
        if ho != hn {
            fields(
                out,
                &format!("record {record} in domain {domain}"),
                &ho,
                &hn,
                &[],
            );
        }
        addresses(out, domain, &record, &o.addresses, &n.addresses);
    }
    for o in &m.removed {
        out.push(format!("- record {} in domain {domain}", id(o)));
    }
    if m.reordered {
        out.push(format!("~ domain {domain}: record {}", order(&m, id)));
    }
}

fn addresses(out: &mut Vec<String>, domain: &str, record: &str, old: &[Address], new: &[Address]) {
    let m = match_up(old, new, address_key);
    let id = |a: &Address| address_key(a).to_string();
    for n in &m.added {
        out.push(added(
            format!("+ address {} of record {record}", id(n)),
            *n,
            &["ip", "target"],
            &[],
        ));
    }
    for (o, n) in &m.common {
        if o != n {
            fields(
                out,
                &format!("address {} of record {record}", id(n)),
                *o,
                *n,
                &[],
            );
        }
    }
    for o in &m.removed {
        out.push(format!("- address {} of record {record}", id(o)));
    }
    // The order of addresses is meaningful (priority balance).
    if m.reordered {
        out.push(format!(
            "~ record {record} in domain {domain}: address {}",
            order(&m, id)
        ));
    }
}

/// `www.example.test/A`; the apex record is `example.test/MX`.
fn record_id(domain: &str, r: &Record) -> String {
    let domain = domain.trim_end_matches('.');
    if &*r.name == "@" {
        format!("{domain}/{}", r.kind.as_str())
    } else {
        format!("{}.{domain}/{}", r.name, r.kind.as_str())
    }
}

/// How an address is known inside its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum AddressKey<'a> {
    Ip(IpAddr),
    Target(&'a str),
    /// Neither (an invalid address): all such addresses share this key.
    Unnamed,
}

fn address_key(a: &Address) -> AddressKey<'_> {
    match (&a.ip, a.target()) {
        (Some(ip), _) => AddressKey::Ip(*ip),
        (None, Some(t)) => AddressKey::Target(t),
        (None, None) => AddressKey::Unnamed,
    }
}

impl std::fmt::Display for AddressKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ip(ip) => write!(f, "{ip}"),
            Self::Target(t) => write!(f, "{t}"),
            Self::Unnamed => write!(f, "(no ip or target)"),
        }
    }
}

/// Two lists of objects paired by key.
struct Matched<'a, T> {
    /// In the new list's order.
    added: Vec<&'a T>,
    /// (old, new), in the new list's order.
    common: Vec<(&'a T, &'a T)>,
    /// In the old list's order.
    removed: Vec<&'a T>,
    /// Objects present in both lists are not in the same relative order.
    reordered: bool,
    /// The old objects of `common`, in the old list's order.
    common_old_order: Vec<&'a T>,
}

fn match_up<'a, T, K: Hash + Eq>(
    old: &'a [T],
    new: &'a [T],
    key: impl Fn(&'a T) -> K,
) -> Matched<'a, T> {
    let old_by_key: HashMap<K, (usize, &T)> = old
        .iter()
        .enumerate()
        .map(|(i, o)| (key(o), (i, o)))
        .collect();
    let new_keys: HashSet<K> = new.iter().map(&key).collect();
    let mut m = Matched {
        added: Vec::new(),
        common: Vec::new(),
        removed: Vec::new(),
        reordered: false,
        common_old_order: Vec::new(),
    };
    let mut last_old = None;
    for n in new {
        match old_by_key.get(&key(n)) {
            None => m.added.push(n),
            Some(&(i, o)) => {
                m.reordered |= last_old.is_some_and(|last| i < last);
                last_old = Some(i);
                m.common.push((o, n));
            }
        }
    }
    for o in old {
        if new_keys.contains(&key(o)) {
            if m.reordered {
                m.common_old_order.push(o);
            }
        } else {
            m.removed.push(o);
        }
    }
    m
}

/// `order [a, b] → [b, a]` over the objects both lists have; built only
/// for a reordered list and cut at [`MAX_VALUE`], so a reordered domain of
/// 100,000 records costs a few names.
fn order<T>(m: &Matched<'_, T>, id: impl Fn(&T) -> String) -> String {
    let list = |items: &mut dyn Iterator<Item = &T>| {
        let mut text = String::from("[");
        for (i, item) in items.enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(&id(item));
            if text.chars().count() > MAX_VALUE {
                break;
            }
        }
        text.push(']');
        shorten(text)
    };
    format!(
        "order {} → {}",
        list(&mut m.common_old_order.iter().copied()),
        list(&mut m.common.iter().map(|(_, n)| *n))
    )
}

/// The line of an object added, with the fields it is given:
/// `+ check web: port 8080, type "http"`, in name order (nested tables named with dots,
/// the keys in `skip` left out: they are in the head already).
fn added<T: Serialize>(head: String, new: &T, skip: &[&str], bare: &[&str]) -> String {
    fn leaves(out: &mut Vec<String>, path: &str, v: &Value, bare: &[&str]) {
        match v {
            Value::Object(t) if !t.is_empty() => {
                for (k, item) in t {
                    let child = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    leaves(out, &child, item, bare);
                }
            }
            Value::Null => {}
            Value::Array(items) if items.is_empty() => {}
            _ => out.push(format!("{path} {}", shown(Some(v), bare.contains(&path)))),
        }
    }
    let mut given = Vec::new();
    if let Ok(Value::Object(t)) = serde_json::to_value(new) {
        for (k, v) in t.iter().filter(|(k, _)| !skip.contains(&k.as_str())) {
            leaves(&mut given, k, v, bare);
        }
    }
    if given.is_empty() {
        head
    } else {
        format!("{head}: {}", given.join(", "))
    }
}

/// One line per changed field of an object known to have changed:
/// `~ {what}: {field} {old} → {new}`. Nested tables are named with dots
/// (`soa.refresh`); lists of scalars compare as values.
fn fields<T: Serialize>(out: &mut Vec<String>, what: &str, old: &T, new: &T, bare: &[&str]) {
    let before = out.len();
    if let (Ok(o), Ok(n)) = (serde_json::to_value(old), serde_json::to_value(new)) {
        let mut changes = Vec::new();
        walk(&mut changes, "", Some(&o), Some(&n), bare);
        out.extend(changes.into_iter().map(|c| format!("~ {what}: {c}")));
    }
    // The caller saw a difference: never let it go unreported.
    if out.len() == before {
        out.push(format!("~ {what}"));
    }
}

fn walk(
    changes: &mut Vec<String>,
    path: &str,
    old: Option<&Value>,
    new: Option<&Value>,
    bare: &[&str],
) {
    fn table<'a>(
        v: Option<&'a Value>,
        empty: &'a Map<String, Value>,
    ) -> Option<&'a Map<String, Value>> {
        match v {
            Some(Value::Object(t)) => Some(t),
            None => Some(empty),
            Some(_) => None,
        }
    }
    let empty = Map::new();
    // A table on both sides, or a non-empty one where there was none: its
    // fields. (An empty table appearing is a change of its own, below.)
    let is_table = |v: Option<&Value>| matches!(v, Some(Value::Object(_)));
    let nonempty = |v: Option<&Value>| matches!(v, Some(Value::Object(t)) if !t.is_empty());
    let descend = (is_table(old) && is_table(new))
        || (old.is_none() && nonempty(new))
        || (new.is_none() && nonempty(old));
    if descend && let (Some(o), Some(n)) = (table(old, &empty), table(new, &empty)) {
        let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
        for key in keys {
            let child = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            walk(changes, &child, o.get(key), n.get(key), bare);
        }
        return;
    }
    if old != new {
        let bare = bare.contains(&path);
        changes.push(format!(
            "{path} {} → {}",
            shown(old, bare),
            shown(new, bare)
        ));
    }
}

/// A value as the configuration file shows it (TOML: strings quoted, lists
/// in brackets, tables inline), cut at [`MAX_VALUE`] characters.
fn shown(v: Option<&Value>, bare: bool) -> String {
    match v {
        None | Some(Value::Null) => "(unset)".to_string(),
        Some(Value::String(s)) if bare => shorten(s.clone()),
        Some(v) => {
            let mut text = String::new();
            toml_like(&mut text, v);
            shorten(text)
        }
    }
}

fn toml_like(text: &mut String, v: &Value) {
    match v {
        Value::Null => text.push_str("(unset)"),
        Value::Bool(b) => {
            let _ = write!(text, "{b}");
        }
        Value::Number(n) => {
            let _ = write!(text, "{n}");
        }
        // JSON's escapes are TOML's for what a configuration holds.
        Value::String(s) => text.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(items) => {
            text.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                toml_like(text, item);
                if text.len() > MAX_VALUE * 4 {
                    break; // cut below anyway; a long list is not walked
                }
            }
            text.push(']');
        }
        Value::Object(t) => {
            text.push('{');
            for (i, (k, item)) in t.iter().enumerate() {
                text.push_str(if i > 0 { ", " } else { " " });
                let _ = write!(text, "{k} = ");
                toml_like(text, item);
                if text.len() > MAX_VALUE * 4 {
                    break;
                }
            }
            text.push_str(if t.is_empty() { "}" } else { " }" });
        }
    }
}

/// At most [`MAX_VALUE`] characters, the cut marked with an ellipsis.
fn shorten(text: String) -> String {
    match text.char_indices().nth(MAX_VALUE) {
        None => text,
        Some((cut, _)) => {
            let mut short = text[..cut].to_string();
            short.push('…');
            short
        }
    }
}

/// A record without its addresses (diffed one by one); its static
/// `values` stay, a list of scalars compared as one value.
fn record_header(r: &Record) -> Record {
    r.without_addresses()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[[datacenter]]
name = "dc1"
country = "FR"

[[datacenter]]
name = "dc3"

[[check]]
name = "web"
type = "http"
interval = "10s"

[[scenario]]
name = "dr"
condition = "web"

[[service]]
name = "shop"
domains = ["example.test"]

[[domain]]
name = "example.test"
ttl = 30
soa = { refresh = 3600 }

[[domain.record]]
name = "www"
type = "A"
ttl = 60
addresses = [
  { ip = "192.0.2.11", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.12", dc = "dc1" },
]

[[domain.record]]
name = "@"
type = "MX"
values = ["10 mail.example.test."]

[[domain.record]]
name = "alias"
type = "CNAME"
addresses = [{ target = "www.example.test." }]
"#;

    fn config(text: &str) -> Config {
        toml::from_str(text).unwrap()
    }

    /// The diff from `BASE` to `BASE` with `from` replaced by `to`.
    fn changed(from: &str, to: &str) -> Vec<String> {
        assert!(BASE.contains(from), "{from}");
        diff(&config(BASE), &config(&BASE.replacen(from, to, 1)))
    }

    #[test]
    fn nothing_changed_gives_no_lines() {
        assert_eq!(diff(&config(BASE), &config(BASE)), Vec::<String>::new());
        assert_eq!(
            diff(&Config::default(), &Config::default()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_geoip_table_is_compared_like_the_other_tables() {
        let with = |table: &str| config(&format!("{table}\n{BASE}"));
        assert_eq!(diff(&config(BASE), &with("[geoip]")), ["+ geoip"]);
        assert_eq!(
            diff(
                &with("[geoip]\nupdate = \"off\""),
                &with("[geoip]\nupdate = \"monthly\"")
            ),
            ["~ geoip: update \"off\" → \"monthly\""]
        );
        assert_eq!(diff(&with("[geoip]"), &config(BASE)), ["- geoip"]);
    }

    #[test]
    fn a_domain_field_names_the_domain_and_both_values() {
        assert_eq!(
            changed("ttl = 30", "ttl = 3600"),
            ["~ domain example.test: ttl 30 → 3600"]
        );
        assert_eq!(
            changed("ttl = 30\n", ""),
            ["~ domain example.test: ttl 30 → (unset)"]
        );
    }

    #[test]
    fn nested_fields_are_named_with_dots() {
        assert_eq!(
            changed("soa = { refresh = 3600 }", "soa = { refresh = 7200 }"),
            ["~ domain example.test: soa.refresh 3600 → 7200"]
        );
        assert_eq!(
            changed(
                "soa = { refresh = 3600 }",
                "soa = { refresh = 3600, retry = 600 }"
            ),
            ["~ domain example.test: soa.retry (unset) → 600"]
        );
        // A table that appears or goes: its fields, one line each.
        assert_eq!(
            changed("soa = { refresh = 3600 }", ""),
            ["~ domain example.test: soa.refresh 3600 → (unset)"]
        );
        // An empty table is a change too.
        assert_eq!(
            changed("soa = { refresh = 3600 }", "soa = {}"),
            ["~ domain example.test: soa.refresh 3600 → (unset)"]
        );
        let with_soa = diff(
            &config(&BASE.replacen("soa = { refresh = 3600 }", "", 1)),
            &config(&BASE.replacen("soa = { refresh = 3600 }", "soa = {}", 1)),
        );
        assert_eq!(with_soa, ["~ domain example.test: soa (unset) → {}"]);
    }

    #[test]
    fn lists_of_scalars_compare_as_values() {
        assert_eq!(
            changed(
                "domains = [\"example.test\"]",
                "domains = [\"example.test\", \"other.test\"]"
            ),
            [r#"~ service shop: domains ["example.test"] → ["example.test", "other.test"]"#]
        );
        assert_eq!(
            changed(
                "values = [\"10 mail.example.test.\"]",
                "values = [\"20 mail.example.test.\"]"
            ),
            [
                r#"~ record example.test/MX in domain example.test: values ["10 mail.example.test."] → ["20 mail.example.test."]"#
            ]
        );
    }

    #[test]
    fn a_record_field_names_the_record_and_its_domain() {
        assert_eq!(
            changed("ttl = 60", "ttl = 300"),
            ["~ record www.example.test/A in domain example.test: ttl 60 → 300"]
        );
        assert_eq!(
            changed(
                "name = \"alias\"\ntype = \"CNAME\"\n",
                "name = \"alias\"\ntype = \"CNAME\"\nbalance = \"priority\"\n"
            ),
            [
                r#"~ record alias.example.test/CNAME in domain example.test: balance (unset) → "priority""#
            ]
        );
    }

    #[test]
    fn records_added_come_with_their_addresses_and_removed_are_one_line() {
        assert_eq!(
            changed(
                "[[domain.record]]\nname = \"@\"",
                "[[domain.record]]\nname = \"api\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.40\" }]\n\n[[domain.record]]\nname = \"@\""
            ),
            [
                "+ record api.example.test/A in domain example.test",
                "+ address 192.0.2.40 of record api.example.test/A"
            ]
        );
        assert_eq!(
            changed("type = \"MX\"", "type = \"TXT\""),
            [
                "+ record example.test/TXT in domain example.test: values [\"10 mail.example.test.\"]",
                "- record example.test/MX in domain example.test",
            ]
        );
    }

    #[test]
    fn addresses_are_named_inside_their_record() {
        assert_eq!(
            changed(
                "{ ip = \"192.0.2.12\", dc = \"dc1\" },",
                "{ ip = \"192.0.2.12\", dc = \"dc1\" },\n  { ip = \"192.0.2.10\" },"
            ),
            ["+ address 192.0.2.10 of record www.example.test/A"]
        );
        assert_eq!(
            changed("  { ip = \"192.0.2.12\", dc = \"dc1\" },\n", ""),
            ["- address 192.0.2.12 of record www.example.test/A"]
        );
        assert_eq!(
            changed("hc = \"check:web\"", "hc = \"check:web2\""),
            [r#"~ address 192.0.2.11 of record www.example.test/A: hc "check:web" → "check:web2""#]
        );
        assert_eq!(
            changed(
                "{ target = \"www.example.test.\" }",
                "{ target = \"www.example.test.\", weight = 5 }"
            ),
            ["~ address www.example.test. of record alias.example.test/CNAME: weight (unset) → 5"]
        );
        // A record field and an address field change: both, record first.
        assert_eq!(
            changed(
                "ttl = 60\naddresses = [\n  { ip = \"192.0.2.11\", dc = \"dc1\", hc = \"check:web\" },",
                "ttl = 61\naddresses = [\n  { ip = \"192.0.2.11\", dc = \"dc1\", hc = \"check:web\", countries = [\"FR\"] },"
            ),
            [
                "~ record www.example.test/A in domain example.test: ttl 60 → 61",
                r#"~ address 192.0.2.11 of record www.example.test/A: countries (unset) → ["FR"]"#,
            ]
        );
    }

    #[test]
    fn a_reordered_list_says_so() {
        // The order of addresses decides a priority answer.
        assert_eq!(
            changed(
                "  { ip = \"192.0.2.11\", dc = \"dc1\", hc = \"check:web\" },\n  { ip = \"192.0.2.12\", dc = \"dc1\" },",
                "  { ip = \"192.0.2.12\", dc = \"dc1\" },\n  { ip = \"192.0.2.11\", dc = \"dc1\", hc = \"check:web\" },"
            ),
            [
                "~ record www.example.test/A in domain example.test: address order [192.0.2.11, 192.0.2.12] → [192.0.2.12, 192.0.2.11]"
            ]
        );
        let mut swapped = config(BASE);
        swapped.datacenters.reverse();
        assert_eq!(
            diff(&config(BASE), &swapped),
            ["~ datacenter order [dc1, dc3] → [dc3, dc1]"]
        );
        let mut swapped = config(BASE);
        Arc::make_mut(&mut swapped.domains[0]).records.swap(0, 2);
        assert_eq!(
            diff(&config(BASE), &swapped),
            [
                "~ domain example.test: record order [www.example.test/A, example.test/MX, alias.example.test/CNA… \
                 → [alias.example.test/CNAME, example.test/MX, www.example.test…"
            ]
        );
    }

    /// A change between records equal at both ends is said as a change of
    /// the whole list would be: the order line names every record.
    #[test]
    fn records_equal_at_both_ends_are_left_out_but_from_an_order() {
        let text = |names: &[&str], last: &str| {
            let mut t =
                String::from("[[domain]]\nname = \"d.test\"\nnameservers = [\"ns1.d.test\"]\n");
            for n in names {
                let value = if *n == "r4" { last } else { "v" };
                t.push_str(&format!(
                    "[[domain.record]]\nname = \"{n}\"\ntype = \"TXT\"\nvalues = [\"{value}\"]\n"
                ));
            }
            gtm_model::parse(&t).unwrap()
        };
        let before = text(&["r1", "r2", "r3", "r4", "r5"], "v");
        assert_eq!(
            diff(&before, &text(&["r1", "r3", "r2", "r4", "r5"], "v")),
            [
                "~ domain d.test: record order [r1.d.test/TXT, r2.d.test/TXT, r3.d.test/TXT, r4.d.test/TXT,… \
              → [r1.d.test/TXT, r3.d.test/TXT, r2.d.test/TXT, r4.d.test/TXT,…"
            ]
        );
        assert_eq!(
            diff(&before, &text(&["r1", "r2", "r3", "r4", "r5", "r6"], "w")),
            [
                "+ record r6.d.test/TXT in domain d.test: values [\"v\"]",
                "~ record r4.d.test/TXT in domain d.test: values [\"v\"] → [\"w\"]"
            ]
        );
    }

    #[test]
    fn views_and_notifiers_field_by_field() {
        let before = config(
            "[[view]]\nname = \"internal\"\nclients = [\"10.0.0.0/8\"]\n\n[[notifier]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"https://h.test/a\"\ndelay = \"30s\"\n",
        );
        let after = config(
            "[[view]]\nname = \"internal\"\nclients = [\"10.0.0.0/8\", \"192.168.0.0/16\"]\n\n[[notifier]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"https://h.test/a\"\ndelay = \"1m\"\n\n[[notifier]]\nname = \"mail\"\ntype = \"email\"\nsmtp = \"m.test\"\nfrom = \"a@b.test\"\nto = [\"c@d.test\"]\n",
        );
        assert_eq!(
            diff(&before, &after),
            [
                r#"~ view internal: clients ["10.0.0.0/8"] → ["10.0.0.0/8", "192.168.0.0/16"]"#,
                r#"+ notifier mail: from "a@b.test", smtp "m.test", to ["c@d.test"], type "email""#,
                "~ notifier ops: delay 30s → 1m",
            ]
        );
    }

    #[test]
    fn checks_datacenters_scenarios_services_field_by_field() {
        assert_eq!(
            changed("interval = \"10s\"", "interval = \"30s\""),
            ["~ check web: interval 10s → 30s"]
        );
        assert_eq!(
            changed("type = \"http\"", "type = \"tcp\"\nport = 80"),
            [
                "~ check web: port (unset) → 80",
                r#"~ check web: type "http" → "tcp""#,
            ]
        );
        assert_eq!(
            changed("country = \"FR\"", "country = \"DE\""),
            [r#"~ datacenter dc1: country "FR" → "DE""#]
        );
        assert_eq!(
            changed("condition = \"web\"", "condition = \"web and web\""),
            [r#"~ scenario dr: condition "web" → "web and web""#]
        );
    }

    /// Regions and topology rules are diffed like the other objects and
    /// fields, not left to "changed objects share a name".
    #[test]
    fn regions_and_topology_rules_diff_field_by_field() {
        let old = config("[[region]]\nname = \"office\"\nnetworks = [\"10.20.0.0/16\"]\n");
        let new = config(
            "[[region]]\nname = \"office\"\nnetworks = [\"10.20.0.0/16\", \"10.30.0.0/16\"]\n\n\
             [[region]]\nname = \"west\"\ncountries = [\"US\"]\n",
        );
        assert_eq!(
            diff(&old, &new),
            [
                r#"+ region west: countries ["US"]"#,
                r#"~ region office: networks ["10.20.0.0/16"] → ["10.20.0.0/16", "10.30.0.0/16"]"#,
            ]
        );
        let ruled = |rules: &str| {
            config(&format!(
                "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\ntopology_rules = [{rules}]\n"
            ))
        };
        let changed = diff(
            &ruled(""),
            &ruled("{ client = \"region:west\", datacenter = \"dc1\" }"),
        );
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert!(
            changed[0].starts_with("~ domain a.test: topology_rules"),
            "{changed:?}"
        );
    }

    #[test]
    fn objects_added_show_their_fields_and_removed_are_one_line() {
        assert_eq!(
            changed("[[datacenter]]\nname = \"dc3\"\n", ""),
            ["- datacenter dc3"]
        );
        assert_eq!(
            changed("name = \"web\"", "name = \"web2\""),
            ["+ check web2: interval 10s, type \"http\"", "- check web"]
        );
        let before = Config::default();
        let after = config(BASE);
        assert_eq!(
            diff(&before, &after),
            [
                "+ datacenter dc1: country \"FR\"",
                "+ datacenter dc3",
                "+ check web: interval 10s, type \"http\"",
                "+ scenario dr: condition \"web\"",
                "+ service shop: domains [\"example.test\"]",
                "+ domain example.test: soa.refresh 3600, ttl 30",
            ]
        );
        assert_eq!(
            diff(&after, &before),
            [
                "- datacenter dc1",
                "- datacenter dc3",
                "- check web",
                "- scenario dr",
                "- service shop",
                "- domain example.test",
            ]
        );
    }

    #[test]
    fn lines_follow_the_file_order_whatever_changed() {
        let new = BASE
            .replacen("ttl = 30", "ttl = 31", 1)
            .replacen("ttl = 60", "ttl = 61", 1)
            .replacen("interval = \"10s\"", "interval = \"11s\"", 1)
            .replacen("country = \"FR\"", "country = \"BE\"", 1)
            .replacen("[[datacenter]]\nname = \"dc3\"\n", "", 1);
        let expected = [
            r#"~ datacenter dc1: country "FR" → "BE""#,
            "- datacenter dc3",
            "~ check web: interval 10s → 11s",
            "~ domain example.test: ttl 30 → 31",
            "~ record www.example.test/A in domain example.test: ttl 60 → 61",
        ];
        // The same every time (no hash order leaks out).
        for _ in 0..10 {
            assert_eq!(diff(&config(BASE), &config(&new)), expected);
        }
    }

    #[test]
    fn long_values_are_cut_with_an_ellipsis() {
        let long = "é".repeat(200);
        let lines = changed(
            "condition = \"web\"",
            &format!("condition = \"web or {long}\""),
        );
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert!(
            line.starts_with(r#"~ scenario dr: condition "web" → "web or éé"#),
            "{line}"
        );
        assert!(line.ends_with('…'), "{line}");
        assert!(line.chars().count() < 100, "{line}");
    }

    #[test]
    fn duration_fields_are_the_checks_intervals() {
        // What prints bare is exactly what the schema says is a duration,
        // in checks and notifiers and nowhere else.
        fn durations(schema: schemars::Schema) -> Vec<String> {
            let value = schema.as_value();
            let props = value.get("properties").and_then(Value::as_object).unwrap();
            props
                .iter()
                .filter(|(_, p)| p.to_string().contains("Interval"))
                .map(|(k, _)| k.clone())
                .collect()
        }
        use gtm_model::config::*;
        assert_eq!(durations(schemars::schema_for!(Check)), CHECK_DURATIONS);
        assert_eq!(
            durations(schemars::schema_for!(Notifier)),
            NOTIFIER_DURATIONS
        );
        for other in [
            schemars::schema_for!(Datacenter),
            schemars::schema_for!(Scenario),
            schemars::schema_for!(Service),
            schemars::schema_for!(Domain),
            schemars::schema_for!(Soa),
            schemars::schema_for!(Record),
            schemars::schema_for!(Address),
        ] {
            assert_eq!(durations(other), Vec::<String>::new());
        }
    }

    #[test]
    fn one_change_among_100000_records_is_one_line() {
        let mut old = config(BASE);
        let template = old.domains[0].records[0].clone();
        Arc::make_mut(&mut old.domains[0]).records = (0..100_000)
            .map(|i| {
                let mut r = (*template).clone();
                r.name = format!("r{i}").into();
                Arc::new(r)
            })
            .collect();
        let mut new = old.clone();
        Arc::make_mut(&mut Arc::make_mut(&mut new.domains[0]).records[54_321]).ttl = Some(5);
        assert_eq!(
            diff(&old, &new),
            ["~ record r54321.example.test/A in domain example.test: ttl 60 → 5"]
        );
        assert_eq!(diff(&old, &old.clone()), Vec::<String>::new());
    }

    #[test]
    fn objects_sharing_a_name_still_show_a_change() {
        let mut old = config(BASE);
        old.checks.push(old.checks[0].clone());
        let mut new = old.clone();
        Arc::make_mut(&mut new.checks[0]).port = Some(81);
        assert!(!diff(&old, &new).is_empty());
        // Pairing by name sees two equal checks; the difference is shown.
        let mut old = config(BASE);
        let mut second = gtm_model::config::Check::clone(&old.checks[0]);
        second.port = Some(81);
        old.checks.push(Arc::new(second.clone()));
        let mut new = old.clone();
        new.checks[0] = Arc::new(second);
        assert_eq!(
            diff(&old, &new),
            ["~ configuration (changed objects share a name)"]
        );
    }
}
