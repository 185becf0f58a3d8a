//! The record form (docs/console.md): create or edit a record of a domain
//! with its addresses (IP or CNAME target, datacenter, HC field, weight,
//! countries, continents), its mode, balance, disaster recovery (condition,
//! on no healthy records, failback), fail-safe records, and the domain's
//! datacenter settings (Main DC, DR DC, order, count).
//!
//! **Preview** sends the whole domain with the record changed to the API's
//! own object route as a dry run and shows the field-level changes;
//! **Apply** sends it for real, guarded by the version the preview was
//! made against (another change meanwhile gives a conflict, not an
//! overwrite). Either way the domain is one write: one command, one
//! version. Errors are shown beside the fields they name (an address's on
//! its row) and all together above the form.

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Path, Query, State},
    response::{IntoResponse, Response},
};
use maud::html;
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

use super::fields::{
    Fields, Problems, errors_of, flag_options, flag_text, list_text, select_field, split_list,
    summary, text_field, with_default,
};
use super::layout::{self, csrf_field, segment};
use crate::{
    ApiState,
    objects::{WriteOptions, put},
};
use gtm_model::config::{
    Address, AddressFields, Config, Domain, Record, RecordFields, RecordType, TopologyRule,
};
use gtm_node::access::Principal;

/// Empty address rows offered below the record's own: one, and one more
/// for each press of "Add an address row" (at most [`MAX_SPARE_ROWS`]).
const SPARE_ROWS: usize = 1;
const MAX_SPARE_ROWS: usize = 50;

/// The types a record of the form can have: not NS, which the configuration
/// refuses in records (the apex NS set is the domain's nameservers).
const TYPES: [&str; 7] = ["A", "AAAA", "CNAME", "MX", "TXT", "SRV", "CAA"];
/// The types whose answers come from addresses (the others are static
/// data): the controls only they use are shown for them.
const ADDRESSED: &str = "f-type:A,AAAA,CNAME";
const MODES: [&str; 3] = ["standalone", "disaster-recovery", "datacenter"];
const BALANCES: [&str; 5] = ["round-robin", "weighted", "random", "priority", "persist"];

#[derive(Debug, Default, Deserialize)]
pub struct EditQuery {
    #[serde(default)]
    pub domain: String,
    /// `name/TYPE` of the record to edit; absent: a new record.
    #[serde(default)]
    pub record: Option<String>,
    /// Or the record's label, `www.example.test/A`: its domain is the
    /// longest one it is in.
    #[serde(default)]
    pub label: Option<String>,
}

/// What to show above the form after a submission.
enum Outcome {
    Preview {
        version: u64,
        changes: Vec<String>,
        /// Each record's answers on every device, now → after.
        devices: Option<Box<gtm_node::judge::Judgement>>,
    },
    Applied {
        version: u64,
        changes: Vec<String>,
    },
}

/// The form of a record as the configuration has it (or a new one).
pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<EditQuery>,
) -> Response {
    let config = state.engine.config();
    let mut q = q;
    if let Some((owner, rtype)) = q.label.as_deref().and_then(|l| l.rsplit_once('/')) {
        let owner = owner.trim_end_matches('.').to_ascii_lowercase();
        let found = config
            .domains
            .iter()
            .map(|d| d.name.trim_end_matches('.').to_ascii_lowercase())
            .filter(|d| owner == *d || owner.ends_with(&format!(".{d}")))
            .max_by_key(String::len);
        if let Some(d) = found {
            let name = if owner == d {
                "@".to_string()
            } else {
                owner[..owner.len() - d.len() - 1].to_string()
            };
            q.record = Some(format!("{name}/{rtype}"));
            q.domain = d;
        }
    }
    let domain_name = if q.domain.is_empty() {
        config
            .domains
            .first()
            .map(|d| d.name.clone())
            .unwrap_or_default()
    } else {
        q.domain.clone()
    };
    let Some(domain) = config.domains.iter().find(|d| same(&d.name, &domain_name)) else {
        return not_found(&state, &who, &format!("no domain named \"{domain_name}\""));
    };
    let record = match &q.record {
        None => None,
        Some(key) => match find(domain, key) {
            Some(i) => Some(domain.records[i].clone()),
            None => {
                return not_found(
                    &state,
                    &who,
                    &format!("no record {key} in domain {}", domain.name),
                );
            }
        },
    };
    let fields = fields_of(domain, record.as_deref());
    render(&state, &who, &config, &fields, &Problems::default(), None)
}

/// Preview (a dry run) or apply the form.
pub async fn submit(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let mut fields = Fields::parse(&form);
    let config = state.engine.config();
    if fields.get("action") == "add-row" {
        // The form again, as typed, with one more empty row.
        let spare = spare_rows(&fields) + 1;
        fields.set("spare", spare.to_string());
        return render(&state, &who, &config, &fields, &Problems::default(), None);
    }
    // Rows added and filled are the record's own now: one spare again.
    fields.set("spare", SPARE_ROWS.to_string());
    // "force": apply even if a device would answer a record with nothing,
    // offered when the preview says one would.
    let force = fields.get("action") == "force";
    let apply = fields.get("action") == "apply" || force;
    let mut problems = Problems::default();
    let built = build(&config, &fields, &mut problems);
    let Some(domain) = built.filter(|_| problems.is_empty()) else {
        return render(&state, &who, &config, &fields, &problems, None);
    };
    let version = if apply {
        fields.get("version").parse().ok()
    } else {
        None
    };
    let body = match serde_json::to_value(&domain) {
        Ok(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let result = put::<Domain>(
        State(state.clone()),
        Extension(who.clone()),
        Path(domain.name.clone()),
        Query(WriteOptions {
            dry_run: !apply,
            version,
            force,
        }),
        Json(body),
    )
    .await;
    match result {
        Ok(Json(r)) => {
            let outcome = if apply {
                Outcome::Applied {
                    version: r.version,
                    changes: r.changes,
                }
            } else {
                Outcome::Preview {
                    version: r.version,
                    changes: r.changes,
                    devices: r.devices.map(Box::new),
                }
            };
            // After an apply, the form edits the record as it now is.
            if apply {
                fields.set(
                    "orig",
                    format!("{}/{}", fields.get("name"), fields.get("type")),
                );
            }
            render(
                &state,
                &who,
                &state.engine.config(),
                &fields,
                &problems,
                Some(outcome),
            )
        }
        Err(e) => {
            problems.add_api_error(e, field_of);
            render(&state, &who, &config, &fields, &problems, None)
        }
    }
}

fn same(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// The index of the record `name/TYPE` in a domain.
fn find(domain: &Domain, key: &str) -> Option<usize> {
    let (name, rtype) = key.rsplit_once('/')?;
    let (rtype, view) = gtm_model::names::type_and_view(rtype);
    domain.records.iter().position(|r| {
        same(&r.name, name) && r.kind.as_str().eq_ignore_ascii_case(rtype) && r.view() == view
    })
}

fn word<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn parse_word<T: DeserializeOwned>(text: &str) -> Option<T> {
    serde_json::from_value(Value::String(text.to_string())).ok()
}

/// The form's fields for a record (or a new one) of `domain`.
fn fields_of(domain: &Domain, record: Option<&Record>) -> Fields {
    let mut f = Fields::default();
    f.set("domain", domain.name.clone());
    let Some(r) = record else {
        f.set("type", "A");
        return f;
    };
    f.set(
        "orig",
        match r.view() {
            None => format!("{}/{}", r.name, r.kind.as_str()),
            Some(v) => format!("{}/{}@{v}", r.name, r.kind.as_str()),
        },
    );
    f.set("name", r.name.clone());
    f.set("view", r.view().unwrap_or_default());
    f.set("type", r.kind.as_str());
    f.set("ttl", r.ttl.map_or(String::new(), |t| t.to_string()));
    let o = r.options();
    f.set("mode", o.mode.map(|m| word(&m)).unwrap_or_default());
    f.set("balance", o.balance.map(|b| word(&b)).unwrap_or_default());
    f.set(
        "max_answers",
        o.max_answers.map_or(String::new(), |n| n.to_string()),
    );
    f.set("dr_condition", o.dr_condition.clone().unwrap_or_default());
    f.set("dr_on_no_healthy", flag_text(o.dr_on_no_healthy));
    f.set("failback", o.failback.map(|b| word(&b)).unwrap_or_default());
    f.set("fail_safe", list_text(&o.fail_safe));
    f.set(
        "on_no_healthy",
        o.on_no_healthy.map(|o| word(&o)).unwrap_or_default(),
    );
    f.set("topology", flag_text(o.topology));
    f.set("nearest", flag_text(o.nearest));
    f.set("values", r.values().join("\n"));
    for (i, a) in r.addresses.iter().enumerate() {
        let a = a.fields();
        let value =
            a.ip.map(|ip| ip.to_string())
                .or_else(|| a.target.as_deref().map(str::to_string))
                .unwrap_or_default();
        f.set(&format!("a{i}_value"), value);
        f.set(&format!("a{i}_dc"), a.dc.clone().unwrap_or_default());
        f.set(&format!("a{i}_hc"), a.hc.clone().unwrap_or_default());
        f.set(
            &format!("a{i}_weight"),
            a.weight.map_or(String::new(), |w| w.to_string()),
        );
        f.set(&format!("a{i}_countries"), list_text(&a.countries));
        f.set(&format!("a{i}_continents"), list_text(&a.continents));
        f.set(
            &format!("a{i}_group"),
            a.group.as_deref().unwrap_or_default().to_string(),
        );
    }
    for (i, rule) in r.options().topology_rules.iter().enumerate() {
        f.set(&format!("r{i}_client"), rule.client.clone());
        let (kind, to) = match (&rule.datacenter, &rule.group, &rule.address) {
            (Some(dc), _, _) => ("datacenter", dc.clone()),
            (None, Some(group), _) => ("group", group.clone()),
            (None, None, Some(address)) => ("address", address.clone()),
            (None, None, None) => ("datacenter", String::new()),
        };
        f.set(&format!("r{i}_kind"), kind);
        f.set(&format!("r{i}_to"), to);
        f.set(
            &format!("r{i}_weight"),
            rule.weight.map_or(String::new(), |w| w.to_string()),
        );
    }
    f
}

/// The rule rows the form holds: up to the last one with a client (the
/// empty row after it is the spare one).
fn rule_rows(f: &Fields) -> usize {
    f.0.iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .filter_map(|(k, _)| {
            k.strip_prefix('r')?
                .strip_suffix("_client")?
                .parse::<usize>()
                .ok()
        })
        .max()
        .map_or(0, |m| m + 1)
}

/// The record's topology rules as the form's rule rows give them; a row
/// without a client is left out.
fn rules_of(f: &Fields, problems: &mut Problems) -> Vec<TopologyRule> {
    let mut rules = Vec::new();
    for i in 0..rule_rows(f) {
        let key = |field: &str| format!("r{i}_{field}");
        let client = f.get(&key("client")).trim();
        if client.is_empty() {
            continue;
        }
        let to = f.get(&key("to")).trim().to_string();
        if to.is_empty() {
            problems.add(
                Some(format!("r{i}")),
                format!(
                    "rule row {}: give the datacenter, group or address it answers from",
                    i + 1
                ),
            );
            continue;
        }
        let weight = match f.get(&key("weight")).trim() {
            "" => None,
            w => match w.parse() {
                Ok(w) => Some(w),
                Err(_) => {
                    problems.add(
                        Some(format!("r{i}")),
                        format!("rule row {}: weight \"{w}\" is not a whole number", i + 1),
                    );
                    continue;
                }
            },
        };
        let (datacenter, group, address) = match f.get(&key("kind")) {
            "group" => (None, Some(to), None),
            "address" => (None, None, Some(to)),
            _ => (Some(to), None, None),
        };
        rules.push(TopologyRule {
            client: client.to_string(),
            datacenter,
            group,
            address,
            weight,
        });
    }
    rules
}

/// The address rows the form holds: every index with a field.
/// The address rows the form holds: up to the last one with an address
/// (empty rows after it are the spare ones, offered again, not counted).
fn rows(f: &Fields) -> usize {
    f.0.iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .filter_map(|(k, _)| {
            k.strip_prefix('a')?
                .strip_suffix("_value")?
                .parse::<usize>()
                .ok()
        })
        .max()
        .map_or(0, |m| m + 1)
}

/// The empty rows offered after the record's own: one, and as many more
/// as "Add an address row" asked for.
fn spare_rows(f: &Fields) -> usize {
    f.get("spare")
        .parse::<usize>()
        .unwrap_or(SPARE_ROWS)
        .clamp(SPARE_ROWS, MAX_SPARE_ROWS)
}

/// The domain the form describes, or the problems that stop it.
fn build(config: &Config, f: &Fields, problems: &mut Problems) -> Option<Domain> {
    let Some(current) = config
        .domains
        .iter()
        .find(|d| same(&d.name, f.get("domain")))
    else {
        problems.add(None, format!("no domain named \"{}\"", f.get("domain")));
        return None;
    };
    let mut domain = Domain::clone(current);
    let number = |key: &str, problems: &mut Problems| -> Option<u64> {
        let text = f.get(key);
        if text.is_empty() {
            return None;
        }
        match text.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                problems.add(
                    Some(key.into()),
                    format!("{key}: \"{text}\" is not a whole number"),
                );
                None
            }
        }
    };
    let some = |key: &str| (!f.get(key).is_empty()).then(|| f.get(key).to_string());
    let Some(kind) = parse_word::<RecordType>(f.get("type")) else {
        problems.add(
            Some("type".into()),
            format!("type: \"{}\" is not a record type", f.get("type")),
        );
        return None;
    };
    if f.get("name").is_empty() {
        problems.add(
            Some("name".into()),
            "name: give the record's name (@ for the apex)".into(),
        );
    }
    let ttl = number("ttl", problems).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let max_answers = number("max_answers", problems).map(|n| n as usize);
    let flag = |key: &str| match f.get(key) {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    };
    let addressed = matches!(kind, RecordType::A | RecordType::AAAA | RecordType::CNAME);
    let mut addresses = Vec::new();
    for i in 0..rows(f) {
        let key = |field: &str| format!("a{i}_{field}");
        let value = f.get(&key("value"));
        // Rows of a static type are hidden and not the record's.
        if value.is_empty() || !addressed {
            continue;
        }
        let (ip, target) = match value.parse() {
            Ok(ip) => (Some(ip), None),
            Err(_) if kind == RecordType::CNAME => (None, Some(value.to_string())),
            Err(_) => {
                problems.add(
                    Some(format!("a{i}")),
                    format!("address row {}: \"{value}\" is not an IP address", i + 1),
                );
                continue;
            }
        };
        let weight = match f.get(&key("weight")) {
            "" => None,
            w => match w.parse() {
                Ok(w) => Some(w),
                Err(_) => {
                    problems.add(
                        Some(format!("a{i}")),
                        format!(
                            "address row {}: weight \"{w}\" is not a whole number",
                            i + 1
                        ),
                    );
                    None
                }
            },
        };
        let nonempty = |k: &str| (!f.get(k).is_empty()).then(|| f.get(k).into());
        addresses.push(Address::from(AddressFields {
            ip,
            target: target.map(String::into_boxed_str),
            value: None,
            dc: nonempty(&key("dc")),
            hc: nonempty(&key("hc")),
            weight,
            countries: split_list(f.get(&key("countries"))).into(),
            continents: split_list(f.get(&key("continents"))).into(),
            group: nonempty(&key("group")),
        }));
    }
    let at = match f.get("orig") {
        "" => None,
        key => find(&domain, key),
    };
    let topology_rules = if addressed {
        rules_of(f, problems).into()
    } else {
        Box::default()
    };
    let record = Record::from(RecordFields {
        name: f.get("name").into(),
        kind,
        ttl,
        mode: parse_word(f.get("mode")),
        balance: parse_word(f.get("balance")),
        max_answers,
        dr_condition: some("dr_condition").map(String::into_boxed_str),
        dr_on_no_healthy: flag("dr_on_no_healthy"),
        failback: parse_word(f.get("failback")),
        fail_safe: split_list(f.get("fail_safe")).into(),
        on_no_healthy: parse_word(f.get("on_no_healthy")),
        topology: flag("topology"),
        nearest: flag("nearest"),
        topology_rules,
        // A steered MX or SRV keeps its addresses as the record has them:
        // the form shows values only for those types.
        addresses: match at.and_then(|i| domain.records.get(i)) {
            Some(r) if !addressed && kind.steers_values() && !r.addresses.is_empty() => {
                r.addresses.clone()
            }
            _ => addresses.into(),
        },
        view: some("view").map(String::into_boxed_str),
        // Kept as the record has it: the form does not show it.
        alias: at
            .and_then(|i| domain.records.get(i))
            .and_then(|r| r.options().alias.clone()),
        values: f
            .get("values")
            .lines()
            .filter(|_| !addressed)
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
        // A record edited here is the domain's own, not the primary's.
        transferred: None,
    });
    match at {
        Some(i) => domain.records[i] = record.into(),
        None => domain.records.push(record.into()),
    }
    Some(domain)
}

/// The field an error of the configuration names: an address row
/// (`... / address 3: ...`), a rule row (`... / topology rule 2: ...`) or
/// a record or domain key it starts with.
fn field_of(error: &str) -> Option<String> {
    if let Some(rest) = error.split(" / topology rule ").nth(1) {
        let n: usize = rest
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?;
        return Some(format!("r{}", n.checked_sub(1)?));
    }
    if let Some(rest) = error.split(" / address ").nth(1) {
        let n: usize = rest
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?;
        return Some(format!("a{}", n.checked_sub(1)?));
    }
    let detail = error.rsplit_once(": ").map_or(error, |(_, d)| d);
    let head = error.split(": ").nth(1).unwrap_or(detail);
    [
        "ttl",
        "mode",
        "balance",
        "max_answers",
        "dr_condition",
        "dr_on_no_healthy",
        "failback",
        "fail_safe",
        "on_no_healthy",
        "topology",
        "nearest",
        "values",
    ]
    .into_iter()
    .find(|k| head.starts_with(k) || detail.starts_with(k))
    .map(str::to_string)
}

fn not_found(state: &ApiState, who: &Principal, why: &str) -> Response {
    let body = html! { h1 { "Record form" } p.error role="alert" { (why) } };
    (
        axum::http::StatusCode::NOT_FOUND,
        layout::page("Record form", state.engine.device(), Some(who), body),
    )
        .into_response()
}

fn render(
    state: &ApiState,
    who: &Principal,
    config: &Config,
    f: &Fields,
    p: &Problems,
    outcome: Option<Outcome>,
) -> Response {
    let dcs: Vec<String> = config.datacenters.iter().map(|d| d.name.clone()).collect();
    let dc_options: Vec<(String, String)> = std::iter::once((String::new(), "(none)".to_string()))
        .chain(dcs.iter().map(|d| (d.clone(), d.clone())))
        .collect();
    let mut hc_options = vec![
        (String::new(), "Static (default)".to_string()),
        ("disabled".to_string(), "Disabled".to_string()),
    ];
    hc_options.extend(config.scenarios.iter().map(|s| {
        (
            format!("scenario:{}", s.name),
            format!("scenario {}", s.name),
        )
    }));
    hc_options.extend(
        config
            .checks
            .iter()
            .map(|c| (format!("check:{}", c.name), format!("check {}", c.name))),
    );
    let mut dr_options = vec![
        (String::new(), "(none)".to_string()),
        (
            "automatic".to_string(),
            "automatic (no healthy Main address)".to_string(),
        ),
    ];
    dr_options.extend(config.scenarios.iter().map(|s| {
        (
            format!("scenario:{}", s.name),
            format!("scenario {}", s.name),
        )
    }));
    let domain_mode = config
        .domains
        .iter()
        .find(|d| same(&d.name, f.get("domain")))
        .map(|d| word(&d.mode.unwrap_or_default()))
        .unwrap_or_default();
    let spare = spare_rows(f);
    let n_rows = rows(f) + spare;
    let editing = !f.get("orig").is_empty();
    let title = if editing {
        format!("Edit {} in {}", f.get("orig"), f.get("domain"))
    } else {
        format!("New record in {}", f.get("domain"))
    };
    let body = html! {
        h1 { (title) }
        (summary(p))
        @match &outcome {
            None => {},
            Some(Outcome::Preview { version, changes, devices }) => div.notice #diff role="status" {
                p { "The changes this would make to version " (version) ":" }
                @if changes.is_empty() { p { "no changes" } }
                pre.changes tabindex="0" { @for c in changes { (c) "\n" } }
                @if let Some(j) = devices {
                    (super::drains::judgement_box(j, "answers-preview", "answers-emptied"))
                }
            },
            Some(Outcome::Applied { version, changes }) => div.notice #applied role="status" {
                p { "Applied as version " (version) " (" (changes.len()) " change" @if changes.len() != 1 { "s" } ")." }
                pre.changes tabindex="0" { @for c in changes { (c) "\n" } }
                @if let Some((name, rtype)) = f.get("orig").rsplit_once('/') {
                    p { a href={ "/ui/records/" (segment(&owner(name, f.get("domain")))) "/" (segment(rtype)) } { "See the record's preview" } }
                }
            },
        }
        form.record method="post" action="/ui/records/edit" {
            (csrf_field(who))
            input type="hidden" name="domain" value=(f.get("domain"));
            input type="hidden" name="orig" value=(f.get("orig"));
            input type="hidden" name="spare" value=(spare);
            @if let Some(Outcome::Preview { version, .. }) = &outcome {
                input type="hidden" name="version" value=(version);
            }
            fieldset {
                legend { "Record" }
                (text_field(f, p, "name", "Name (relative to the domain; @ for the apex)", "www"))
                (select_field(f, p, "type", "Type", &TYPES.iter().map(|t| (t.to_string(), t.to_string())).collect::<Vec<_>>()))
                (text_field(f, p, "ttl", "TTL (seconds)", "the domain's"))
                (text_field(f, p, "view", "View (only its clients get this record)", "every client"))
                div data-when=(ADDRESSED) {
                    (select_field(f, p, "mode", "Mode", &with_default(&MODES, &format!("the domain's, {domain_mode}"))))
                (select_field(f, p, "balance", "Balance", &with_default(&BALANCES, "round-robin")))
                (text_field(f, p, "max_answers", "Answers at most", "every candidate"))
                    (select_field(f, p, "topology", "Topological selection", &flag_options("no")))
                    (select_field(f, p, "nearest", "Nearest datacenter by distance", &flag_options("no")))
                }
            }
            p.hint data-when=(ADDRESSED) {
                "Main DC, DR DC and the datacenter order are the domain's, for every record of it: "
                a href={ "/ui/objects/domains/edit?name=" (layout::query_value(f.get("domain"))) } { "edit the domain " (f.get("domain")) }
                "."
            }
            fieldset data-when="f-mode:disaster-recovery" data-empty=(domain_mode) {
                legend { "Disaster recovery" }
                (select_field(f, p, "dr_condition", "Disaster Recovery Condition", &dr_options))
                (select_field(f, p, "dr_on_no_healthy", "Disaster Recovery on No Healthy Records", &flag_options("yes")))
                (select_field(f, p, "failback", "Failback", &with_default(&["auto", "manual"], "auto")))
            }
            fieldset data-when=(ADDRESSED) {
                legend { "When nothing is healthy" }
                (select_field(f, p, "on_no_healthy", "Answer", &with_default(&["empty", "all"], "empty")))
                (text_field(f, p, "fail_safe", "Fail-safe records (comma-separated)", "192.0.2.250"))
            }
            fieldset data-when=(ADDRESSED) {
                legend { "Addresses" }
                @if let Some(list) = p.by_field.get("addresses") { @for e in list { p.field-error { (e) } } }
                div.scroll tabindex="0" role="region" aria-label="Addresses" {
                    table.addresses {
                        thead { tr {
                            th scope="col" { "#" }
                            th scope="col" { "IP or CNAME target" }
                            th scope="col" { "Datacenter" }
                            th scope="col" { "HC field" }
                            th scope="col" { "Weight" }
                            th scope="col" { "Countries" }
                            th scope="col" { "Continents" }
                            th scope="col" { "Group" }
                        } }
                        tbody {
                            @for i in 0..n_rows {
                                @let k = |field: &str| format!("a{i}_{field}");
                                @let row_key = format!("a{i}");
                                tr data-row=(i) .invalid[p.by_field.contains_key(&row_key)] {
                                    td { (i + 1) }
                                    td {
                                        input name=(k("value")) type="text" value=(f.get(&k("value"))) aria-label={ "Address " (i + 1) };
                                        (errors_of(p, &row_key))
                                    }
                                    td {
                                        select name=(k("dc")) aria-label={ "Datacenter of address " (i + 1) } {
                                            @for (v, t) in &dc_options { option value=(v) selected[f.get(&k("dc")) == v] { (t) } }
                                        }
                                    }
                                    td {
                                        select name=(k("hc")) aria-label={ "HC field of address " (i + 1) } {
                                            @for (v, t) in &hc_options { option value=(v) selected[f.get(&k("hc")) == v] { (t) } }
                                        }
                                    }
                                    td { input.narrow name=(k("weight")) type="text" value=(f.get(&k("weight"))) aria-label={ "Weight of address " (i + 1) }; }
                                    td { input.narrow name=(k("countries")) type="text" value=(f.get(&k("countries"))) aria-label={ "Countries of address " (i + 1) } placeholder="DE, FR"; }
                                    td { input.narrow name=(k("continents")) type="text" value=(f.get(&k("continents"))) aria-label={ "Continents of address " (i + 1) } placeholder="EU"; }
                                    td { input.narrow name=(k("group")) type="text" value=(f.get(&k("group"))) aria-label={ "Group of address " (i + 1) } placeholder="edge"; }
                                }
                            }
                        }
                    }
                }
                p.hint { "A row left empty is dropped." }
                button type="submit" name="action" value="add-row" #add-row formnovalidate { "Add an address row" }
            }
            fieldset data-when=(ADDRESSED) #rules {
                legend { "Topology rules" }
                p.hint {
                    "Clients at a place (a network, region:NAME, asn:N, subdivision:US-CA, country:US or continent:EU) are answered from a datacenter, a group or an address of the record; the rule that holds a client most closely answers it. "
                    "With none of its own, the record takes its domain's. A row left without a client is dropped."
                }
                div.scroll tabindex="0" role="region" aria-label="Topology rules" {
                    table.addresses {
                        thead { tr {
                            th scope="col" { "#" }
                            th scope="col" { "Client" }
                            th scope="col" { "Answers from" }
                            th scope="col" { "Datacenter, group or address" }
                            th scope="col" { "Weight" }
                        } }
                        tbody {
                            @for i in 0..(rule_rows(f) + 1) {
                                @let k = |field: &str| format!("r{i}_{field}");
                                @let row_key = format!("r{i}");
                                tr data-rule=(i) .invalid[p.by_field.contains_key(&row_key)] {
                                    td { (i + 1) }
                                    td {
                                        input name=(k("client")) type="text" value=(f.get(&k("client"))) aria-label={ "Client of rule " (i + 1) } placeholder="region:branch";
                                        (errors_of(p, &row_key))
                                    }
                                    td {
                                        select name=(k("kind")) aria-label={ "What rule " (i + 1) " answers from" } {
                                            @for (v, t) in [("datacenter", "datacenter"), ("group", "group"), ("address", "address")] {
                                                option value=(v) selected[f.get(&k("kind")) == v] { (t) }
                                            }
                                        }
                                    }
                                    td { input name=(k("to")) type="text" value=(f.get(&k("to"))) aria-label={ "Datacenter, group or address of rule " (i + 1) } placeholder="east"; }
                                    td { input.narrow name=(k("weight")) type="text" value=(f.get(&k("weight"))) aria-label={ "Weight of rule " (i + 1) } placeholder="1"; }
                                }
                            }
                        }
                    }
                }
            }
            fieldset data-when="f-type:MX,TXT,SRV,CAA" {
                legend { "Static data (one value per line)" }
                div.field {
                    label for="f-values" { "Values" }
                    textarea #f-values name="values" rows="3" { (f.get("values")) }
                    (errors_of(p, "values"))
                }
            }
            div.actions {
                button type="submit" name="action" value="preview" #preview { "Preview changes" }
                @if let Some(Outcome::Preview { devices, .. }) = &outcome && p.is_empty() {
                    @if devices.as_ref().is_some_and(|j| !j.emptied_lines().is_empty()) {
                        button type="submit" name="action" value="force" #apply-force { "Apply anyway (force)" }
                    } @else {
                        button type="submit" name="action" value="apply" #apply { "Apply" }
                    }
                }
                @if editing && let Some((name, rtype)) = f.get("orig").rsplit_once('/') {
                    a href={ "/ui/records/" (segment(&owner(name, f.get("domain")))) "/" (segment(rtype)) } { "Cancel" }
                }
            }
        }
    };
    layout::page("Record form", state.engine.device(), Some(who), body).into_response()
}

/// The owner name of a record (`www` in `example.test` → `www.example.test`).
fn owner(name: &str, domain: &str) -> String {
    let domain = domain.trim_end_matches('.');
    match name {
        "@" | "" => domain.to_string(),
        n => format!("{}.{domain}", n.trim_end_matches('.')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_find_the_fields_they_name() {
        assert_eq!(
            field_of("domain example.test / record www A / address 3: unknown scenario \"x\"")
                .as_deref(),
            Some("a2")
        );
        assert_eq!(
            field_of("domain example.test / record www A: dr_condition: unknown scenario \"x\"")
                .as_deref(),
            Some("dr_condition")
        );
        assert_eq!(
            field_of("domain example.test / record @ MX: values: \"x\" is not an MX value")
                .as_deref(),
            Some("values")
        );
        assert_eq!(
            field_of("domain example.test / record www A / topology rule 2: unknown region \"x\"")
                .as_deref(),
            Some("r1")
        );
        assert_eq!(field_of("something else entirely"), None);
    }

    #[test]
    fn rule_rows_read_as_rules_and_a_row_without_a_target_is_refused() {
        let mut f = Fields::default();
        for (k, v) in [
            ("r0_client", "10.20.0.0/16"),
            ("r0_kind", "datacenter"),
            ("r0_to", "east"),
            ("r1_client", " "),
            ("r2_client", "region:branch"),
            ("r2_kind", "group"),
            ("r2_to", "edge"),
            ("r2_weight", "3"),
        ] {
            f.set(k, v);
        }
        let mut problems = Problems::default();
        let rules = rules_of(&f, &mut problems);
        assert!(problems.is_empty());
        assert_eq!(rules.len(), 2, "{rules:?}");
        assert_eq!(rules[0].datacenter.as_deref(), Some("east"));
        assert_eq!(rules[1].group.as_deref(), Some("edge"));
        assert_eq!(rules[1].weight, Some(3));
        f.set("r3_client", "country:US");
        f.set("r2_weight", "x");
        let rules = rules_of(&f, &mut problems);
        assert_eq!(rules.len(), 1);
        assert!(problems.by_field.contains_key("r3") && problems.by_field.contains_key("r2"));
    }
}
