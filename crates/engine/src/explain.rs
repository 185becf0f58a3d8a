//! `explain`: a record's resolution for one client, step by step, ending in
//! the exact answer DNS gives that client now.
//!
//! Nothing here decides anything. The record is evaluated again with the
//! resolver's own code ([`gtm_resolve::evaluate_traced`]) from the health
//! and state the last evaluation left, which writes each decision into a
//! trace as it takes it; the client's place and the balance's choice come
//! from the query path's own code over the answer it serves now
//! ([`gtm_dns::snapshot::explain_choice`]). This module only puts both
//! into words.

use std::net::{IpAddr, Ipv4Addr};

use gtm_dns::{
    snapshot::{Chosen, Client, explain_choice},
    wire::Ecs,
};
use gtm_model::{
    compile::{DcSpec, Steering},
    config::Balance,
};
use gtm_resolve::{Answer, ModeStep, Narrowed, PlaceKey, Trace};

use super::*;
use views::why;

/// The most possible answers listed: enough for any record read by a
/// person, bounded for one of thousands of addresses.
const SHOWN: usize = 64;

/// A record's resolution for one client (`gtm record explain`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Explain {
    pub device: String,
    pub record: String,
    /// The query's source address.
    pub client: String,
    /// The client subnet (ECS) the query carries, masked to its prefix.
    pub ecs: Option<String>,
    /// The steps in the order the resolution runs them.
    pub steps: Vec<ExplainStep>,
    pub answer: ExplainAnswer,
}

/// One step of the resolution and its outcome.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExplainStep {
    /// `address`, `mode`, `dr-condition`, `datacenters`, `candidates`,
    /// `place`, `rule`, `place-match`, `balance`, `fail-safe`, `status` or
    /// `note`.
    pub step: String,
    /// What the step is about (an address); empty for the record.
    pub subject: String,
    pub outcome: String,
    pub reason: String,
}

/// The answer DNS gives the client now.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExplainAnswer {
    /// `addresses`, `fail-safe` or `empty` (NOERROR with no record: the
    /// zone's SOA in the authority section).
    pub kind: String,
    pub rcode: String,
    /// The TTL of the records; `None` when empty.
    pub ttl: Option<u32>,
    /// Each answer section the client can get now, in order. One unless
    /// the balance draws per query (round-robin, random, weighted).
    pub possible: Vec<PossibleAnswer>,
    /// Possible answers past the first 64, not listed (a round-robin
    /// record of n addresses has n orders of n records each).
    #[serde(default)]
    pub omitted: usize,
    /// How a query picks among `possible`.
    pub rotation: String,
    /// The ECS scope prefix the answer carries (with ECS only).
    pub ecs_scope: Option<u8>,
}

/// One answer section a client can get.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PossibleAnswer {
    /// The records' data, in answer order (`192.0.2.10`).
    pub records: Vec<String>,
    /// Its weight among the possible answers (1 each but for weighted).
    pub weight: u64,
}

/// The client `explain` answers for: a source address and, optionally, a
/// client subnet.
#[derive(Debug, Clone, Copy)]
pub struct ExplainClient {
    pub src: IpAddr,
    pub ecs: Option<Ecs>,
}

impl ExplainClient {
    /// The client of `client` (an address; 127.0.0.1 when absent, which
    /// GeoIP places nowhere) and `ecs` (`ADDRESS/PREFIX`, or an address
    /// meaning its whole length). The error names the value refused.
    pub fn parse(client: Option<&str>, ecs: Option<&str>) -> Result<Self, String> {
        let src = match client.map(str::trim).filter(|c| !c.is_empty()) {
            Some(text) => text
                .parse()
                .map_err(|_| format!("client \"{text}\" is not an IP address"))?,
            None => IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        let ecs = match ecs.map(str::trim).filter(|e| !e.is_empty()) {
            Some(text) => Some(parse_ecs(text)?),
            None => None,
        };
        Ok(Self { src, ecs })
    }
}

/// `ADDRESS/PREFIX` as a query's client subnet, the address zeroed beyond
/// the prefix (as it travels on the wire).
fn parse_ecs(text: &str) -> Result<Ecs, String> {
    let bad = || {
        format!(
            "ecs \"{text}\" is not a network (ADDRESS/PREFIX, e.g. 81.2.69.0/24 or 2001:db8::/56)"
        )
    };
    let (addr, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let address: IpAddr = addr.parse().map_err(|_| bad())?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = match prefix {
        Some(p) => p.parse().map_err(|_| bad())?,
        None => max,
    };
    if prefix > max {
        return Err(format!(
            "ecs \"{text}\": a prefix of {prefix} is longer than the address ({max} bits)"
        ));
    }
    let address = match address {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    };
    Ok(Ecs {
        family: if address.is_ipv4() { 1 } else { 2 },
        source_prefix: prefix,
        address,
    })
}

impl Engine {
    /// How the record `label` (`www.example.test/A`) resolves for `client`
    /// on this device now; `None` when no steered record has that label.
    pub fn explain(&self, label: &str, client: ExplainClient) -> Option<Explain> {
        let inner = self.lock();
        let key = RecordKey::of(label)?;
        let r = inner.records.iter().find(|r| r.is(&key))?;
        let steering = r.steering();
        let dcs = &inner.compiled.datacenters;
        let label = r.label();

        // The resolver again, from where the last evaluation left the
        // record: the same decisions, written down.
        let mut trace = Trace::default();
        let eval = resolve::evaluate_traced(
            &label,
            steering,
            dcs,
            &inner.health,
            Some(&r.state),
            Operator::default(),
            &mut trace,
        );

        let mut steps = Vec::new();
        let step = |step: &str, subject: String, outcome: String, reason: String| ExplainStep {
            step: step.into(),
            subject,
            outcome,
            reason,
        };
        for (a, s) in steering.addresses.iter().zip(&trace.addresses) {
            let outcome = if a.hc == Hc::Disabled {
                "disabled"
            } else if s.drained {
                "drained"
            } else if !s.dc_up {
                "datacenter down"
            } else if s.healthy {
                "healthy"
            } else {
                "unhealthy"
            };
            let mut reason = why(&inner.health, &a.hc);
            if s.kept_last {
                reason.push_str(&format!(
                    "; no result yet, so its last decision stands ({})",
                    if s.by_hc { "healthy" } else { "unhealthy" }
                ));
            }
            if s.drained {
                reason.push_str("; taken out of answers by an operator (drain)");
            }
            if !s.dc_up {
                reason.push_str("; its datacenter is down");
            }
            if let Some(dc) = a.dc().and_then(|d| dcs.get(d)) {
                reason.push_str(&format!(" (in {})", dc.name));
            }
            steps.push(step("address", a.display(), outcome.into(), reason));
        }
        mode_steps(&mut steps, &trace, dcs);
        steps.push(step(
            "candidates",
            String::new(),
            list(steering, &trace.candidates),
            format!(
                "the healthy addresses of {}",
                if trace.group.is_empty() {
                    "the group answered from (it has none)".to_string()
                } else {
                    format!("the group answered from ({})", list(steering, &trace.group))
                }
            ),
        ));

        // The query path: the answer served now, for this client.
        let snapshot = self.dns.snapshot.load();
        let geo = self.dns.geo.load();
        let owner = key_name(r.owner());
        let rtype = wire_type(r.kind());
        let view = match r.spec.view() {
            Some(v) => snapshot.view_index(v)?,
            None => 0,
        };
        let slot = snapshot.slot_in(&owner, rtype, view)?;
        let served = slot.answer.load();
        let query_client = Client {
            src: client.src,
            ecs: client.ecs,
        };
        if !snapshot.views.is_empty() {
            let (in_view, _) = snapshot.view_of(&geo, &query_client);
            let asked = snapshot.view_name(in_view).to_string();
            let reason = if in_view == view {
                format!("the client is in view {asked}: it gets this record")
            } else if snapshot
                .slot_in(&owner, rtype, in_view)
                .is_some_and(|s| Arc::ptr_eq(s, slot))
            {
                format!("the client is in view {asked}, which answers this record too")
            } else {
                format!(
                    "the client is in view {asked}: it does not get this record (its view answers {} from its own records)",
                    label.split('@').next().unwrap_or_default()
                )
            };
            steps.push(step("view", String::new(), asked, reason));
        }
        let chosen = explain_choice(&served, &snapshot.topology, &geo, &query_client);
        let place = place_step(steering, &trace, &chosen, &geo, served.places().is_empty());
        let answer = trace
            .places
            .iter()
            .find(|p| p.key == chosen.entry)
            .or_else(|| trace.places.first());
        steps.push(place);
        rule_steps(
            &mut steps,
            steering,
            &served,
            &snapshot.topology,
            &chosen,
            dcs,
        );
        nearest_step(&mut steps, steering, &served, &chosen, &geo, dcs);
        let decided = chosen
            .rule
            .map(|c| c.group)
            .or(chosen.nearest.map(|n| n.group));
        if let Some(ruled) = decided.and_then(|g| eval.answers.groups.get(g)) {
            let narrowed = match ruled {
                Answer::Addresses(list) => list.clone(),
                _ => Vec::new(),
            };
            steps.push(balance_step(steering, &narrowed, ruled));
            steps.push(fail_safe_step(steering, ruled));
        } else if let Some(p) = answer {
            if steering.topology && p.by != Narrowed::NoTopology {
                steps.push(narrow_step(steering, p, dcs));
            }
            steps.push(balance_step(steering, &p.narrowed, &p.answer));
            steps.push(fail_safe_step(steering, &p.answer));
        }
        steps.push(step(
            "status",
            String::new(),
            eval.state.status.to_string(),
            "the record's status on this device".into(),
        ));
        if eval.answers != r.answers || eval.state != r.state {
            steps.push(step(
                "note",
                String::new(),
                "changing".into(),
                "health changed since the record's last evaluation: it is being evaluated again; explain again for its next answer".into(),
            ));
        }

        let group = served.groups.get(chosen.group)?;
        let omitted = chosen.variants.len().saturating_sub(SHOWN);
        let possible: Vec<PossibleAnswer> = chosen
            .variants
            .iter()
            .take(SHOWN)
            .map(|&(v, weight)| PossibleAnswer {
                records: group
                    .variant(&owner, v)
                    .map(|r| r.data.to_string())
                    .collect(),
                weight,
            })
            .collect();
        let empty = group.is_empty();
        let fail_safe = match decided.and_then(|g| eval.answers.groups.get(g)) {
            Some(ruled) => *ruled == Answer::FailSafe,
            None => answer.is_some_and(|p| p.answer == Answer::FailSafe),
        };
        let answer = ExplainAnswer {
            kind: if empty {
                "empty"
            } else if fail_safe {
                "fail-safe"
            } else {
                "addresses"
            }
            .into(),
            rcode: "NOERROR".into(),
            ttl: (!empty).then_some(group.ttl),
            rotation: rotation(served.balance, &chosen.variants, empty),
            possible: if empty { Vec::new() } else { possible },
            omitted,
            ecs_scope: client.ecs.map(|_| chosen.scope),
        };
        Some(Explain {
            device: self.device.clone(),
            record: label,
            client: client.src.to_string(),
            ecs: client
                .ecs
                .map(|e| format!("{}/{}", e.address, e.source_prefix)),
            steps,
            answer,
        })
    }
}

fn list(steering: &Steering, indices: &[usize]) -> String {
    if indices.is_empty() {
        return "none".into();
    }
    indices
        .iter()
        .filter_map(|&i| steering.addresses.get(i))
        .map(|a| a.display())
        .collect::<Vec<_>>()
        .join(", ")
}

fn dc_names(dcs: &[DcSpec], ids: &[usize]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.iter()
        .filter_map(|&d| dcs.get(d))
        .map(|d| d.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn mode_steps(steps: &mut Vec<ExplainStep>, trace: &Trace, dcs: &[DcSpec]) {
    let name = |d: usize| dcs.get(d).map_or("?", |d| d.name.as_str()).to_string();
    let mut push = |step: &str, outcome: String, reason: String| {
        steps.push(ExplainStep {
            step: step.into(),
            subject: String::new(),
            outcome,
            reason,
        })
    };
    match &trace.mode {
        ModeStep::Standalone => push(
            "mode",
            "Standalone".into(),
            "every healthy address of the record is a candidate".into(),
        ),
        ModeStep::DisasterRecovery {
            main,
            dr,
            main_healthy,
            condition,
            holds,
            held,
            dr_on,
        } => {
            push(
                "mode",
                "Disaster Recovery".into(),
                format!("Main DC {}, DR DC {}", name(*main), name(*dr)),
            );
            let outcome = match (dr_on, held) {
                (true, true) => "DR on (held by manual failback)",
                (true, false) => "DR on",
                (false, _) => "DR off",
            };
            let held = if *held {
                "; it has cleared, but failback is manual: DR stays on until an operator resumes"
            } else {
                ""
            };
            push(
                "dr-condition",
                outcome.into(),
                format!(
                    "condition {condition} {}; the Main DC {} {}{held}; answering from {}",
                    if *holds { "holds" } else { "does not hold" },
                    name(*main),
                    if *main_healthy {
                        "has a healthy address"
                    } else {
                        "has no healthy address"
                    },
                    name(if *dr_on { *dr } else { *main })
                ),
            );
        }
        ModeStep::Datacenter {
            order,
            with_healthy,
            with_addresses,
            count,
            chosen,
        } => {
            push(
                "mode",
                "Datacenter".into(),
                format!("DC Selection order {}", dc_names(dcs, order)),
            );
            push(
                "datacenters",
                dc_names(dcs, chosen),
                format!(
                    "{} of the {with_addresses} datacenters with addresses have a healthy one ({}); up to {count} selected in order",
                    with_healthy.len(),
                    dc_names(dcs, with_healthy)
                ),
            );
        }
    }
}

/// Where the client is placed and which entry of the record's table of
/// places answers it.
fn place_step(
    steering: &Steering,
    trace: &Trace,
    chosen: &Chosen,
    geo: &gtm_geo::Geo,
    one_answer: bool,
) -> ExplainStep {
    let by = match (chosen.placed_by, chosen.source) {
        (None, _) => "ECS with source prefix 0 (do not place me)".to_string(),
        (Some(ip), Some(src)) => format!("ECS network {ip}/{src}"),
        (Some(ip), None) => format!("source address {ip}"),
    };
    let (outcome, reason) = if !steering.topology && steering.nearest {
        (
            "not used".to_string(),
            "the record has no topological selection: clients are placed by distance (nearest)"
                .to_string(),
        )
    } else if !steering.topology {
        (
            "not used".to_string(),
            "the record has no topological selection: every client gets the same answer"
                .to_string(),
        )
    } else if one_answer {
        (
            "not used".to_string(),
            format!(
                "topological selection is on, but every place gets the same answer now ({} place answers decided)",
                trace.places.len()
            ),
        )
    } else {
        let located = match chosen.located {
            Some(l) => match (l.place.country, l.place.continent, l.unplaced) {
                (None, None, why) => format!(
                    "GeoIP ({}) places it nowhere{}",
                    geo.description(),
                    why.map_or(String::new(), |w| format!(" ({w})"))
                ),
                (country, continent, _) => format!(
                    "GeoIP ({}) places it in country {}, continent {} (network /{})",
                    geo.description(),
                    country.map_or("-".into(), |c| c.to_string()),
                    continent.map_or("-".into(), |c| c.to_string()),
                    l.prefix
                ),
            },
            None => "not placed".to_string(),
        };
        let private = if chosen.private {
            "; the ECS address is private: placed nowhere"
        } else {
            ""
        };
        let outcome = match chosen.entry {
            Some(PlaceKey::Country(c)) => format!("answer for country {c}"),
            Some(PlaceKey::Continent(k)) => format!("answer for continent {k}"),
            None => "default answer".to_string(),
        };
        (outcome, format!("placed by {by}: {located}{private}"))
    };
    ExplainStep {
        step: "place".into(),
        subject: String::new(),
        outcome,
        reason,
    }
}

/// How the candidates were narrowed to the client's place.
/// The `rule` steps of a record with topology rules: each rule that
/// holds the client but has no candidate (skipped), then the rule that
/// answered or that none did.
fn rule_steps(
    steps: &mut Vec<ExplainStep>,
    steering: &Steering,
    served: &gtm_dns::snapshot::RrsetAnswer,
    topology: &gtm_model::topology::Topology,
    chosen: &Chosen,
    dcs: &[DcSpec],
) {
    let rules = steering.rules();
    if rules.is_empty() {
        return;
    }
    let Some(ip) = chosen.placed_by else {
        steps.push(ExplainStep {
            step: "rule".into(),
            subject: String::new(),
            outcome: "none".into(),
            reason: "the client asked not to be placed (ECS /0): no topology rule applies".into(),
        });
        return;
    };
    let set = served.rule_set();
    let class = topology.class(set, ip);
    let place = gtm_model::place::Place {
        asn: chosen.asn,
        ..chosen.located.as_ref().map(|l| l.place).unwrap_or_default()
    };
    let describe = |i: usize| -> String {
        let Some(r) = rules.get(i) else {
            return String::new();
        };
        let client = crate::answered::rule_client(topology, r);
        let target = crate::answered::rule_target(steering, dcs, r);
        format!("rule {} ({client} → {target}, weight {})", i + 1, r.weight)
    };
    for (i, r) in served.rules().iter().enumerate() {
        let holds = topology
            .closeness(r.matcher, set, class.id, &place, &mut Default::default())
            .is_some();
        if holds && r.group.is_none() {
            steps.push(ExplainStep {
                step: "rule".into(),
                subject: String::new(),
                outcome: "skipped".into(),
                reason: format!(
                    "{} holds the client, but none of its addresses is a healthy candidate",
                    describe(i)
                ),
            });
        }
    }
    steps.push(match chosen.rule {
        Some(c) => ExplainStep {
            step: "rule".into(),
            subject: String::new(),
            outcome: describe(c.rule),
            reason: format!(
                "holds the client {}: of the rules that do and have a candidate, the closest (then the higher weight, then the first written)",
                c.closeness.describe()
            ),
        },
        None => ExplainStep {
            step: "rule".into(),
            subject: String::new(),
            outcome: "none".into(),
            reason: "no topology rule with a healthy candidate holds the client: answered as without rules"
                .into(),
        },
    });
}

/// The `nearest` step of a record with `nearest = true` that no rule
/// answered: where the client is, each datacenter's biased distance, and
/// the one that answers.
fn nearest_step(
    steps: &mut Vec<ExplainStep>,
    steering: &Steering,
    served: &gtm_dns::snapshot::RrsetAnswer,
    chosen: &Chosen,
    geo: &gtm_geo::Geo,
    dcs: &[DcSpec],
) {
    if !steering.nearest || chosen.rule.is_some() {
        return;
    }
    let name = |dc: usize| dcs.get(dc).map_or("?", |d| d.name.as_str());
    let location = chosen.located.as_ref().and_then(|l| l.place.location);
    let Some(at) = location else {
        let why = match (chosen.placed_by, chosen.located) {
            (None, _) => "the client asked not to be placed (ECS /0)".to_string(),
            (Some(_), Some(l)) if l.unplaced.is_some() => format!(
                "GeoIP ({}) has no location for the client ({})",
                geo.description(),
                l.unplaced.unwrap_or_default()
            ),
            _ => format!(
                "GeoIP ({}) has no location for the client (a City database has them)",
                geo.description()
            ),
        };
        steps.push(ExplainStep {
            step: "nearest".into(),
            subject: String::new(),
            outcome: "none".into(),
            reason: format!("{why}: answered as without nearest"),
        });
        return;
    };
    let distances: Vec<String> = served
        .nearest()
        .iter()
        .map(|n| {
            let real = at.km_to(n.at);
            let mut text = format!("{} {:.0} km", name(n.dc), real);
            if n.bias != 0 {
                text.push_str(&format!(" (bias {:+}: {:.0} km)", n.bias, n.biased_km(at)));
            }
            if n.group.is_none() {
                text.push_str(" skipped, no healthy candidate");
            }
            text
        })
        .collect();
    let place = format!("the client is at {at}");
    steps.push(match chosen.nearest {
        Some(c) => ExplainStep {
            step: "nearest".into(),
            subject: String::new(),
            outcome: format!(
                "datacenter {}",
                served.nearest().get(c.index).map_or("?", |n| name(n.dc))
            ),
            reason: format!(
                "{place}; {}: the nearest with a candidate answers",
                distances.join(", ")
            ),
        },
        None => ExplainStep {
            step: "nearest".into(),
            subject: String::new(),
            outcome: "none".into(),
            reason: format!(
                "{place}; {}: no datacenter with a location has a candidate, answered as without nearest",
                distances.join(", ")
            ),
        },
    });
}

fn narrow_step(steering: &Steering, p: &gtm_resolve::PlaceStep, dcs: &[DcSpec]) -> ExplainStep {
    let nearest = p.nearest.as_ref().map_or(String::new(), |n| {
        format!("datacenters nearest first: {}; ", dc_names(dcs, n))
    });
    let how = match p.by {
        Narrowed::NoTopology => "no topological selection".to_string(),
        Narrowed::Country(c) => format!("the addresses listed for country {c}"),
        Narrowed::Continent(k) => format!("the addresses listed for continent {k}"),
        Narrowed::NoPlace => {
            "no address is listed for this place: those listed for no place".into()
        }
        Narrowed::All => "no address is listed for this place or for no place: all of them".into(),
    };
    ExplainStep {
        step: "place-match".into(),
        subject: String::new(),
        outcome: list(steering, &p.narrowed),
        reason: format!(
            "{nearest}of the candidates {}, {how}",
            list(steering, &p.from)
        ),
    }
}

fn balance_step(steering: &Steering, narrowed: &[usize], answer: &Answer) -> ExplainStep {
    let max = steering.max_answers;
    let (outcome, reason) = match answer {
        Answer::Addresses(among) => {
            let dropped: Vec<usize> = narrowed
                .iter()
                .copied()
                .filter(|i| !among.contains(i))
                .collect();
            let per_answer = if max as usize >= among.len() {
                "all of them in each answer".to_string()
            } else {
                format!("at most {max} per answer")
            };
            let mut reason = format!(
                "{} among {}, {per_answer}",
                steering.balance.as_str(),
                list(steering, among)
            );
            if !dropped.is_empty() {
                reason.push_str(&format!(
                    "; weight 0 leaves out {}",
                    list(steering, &dropped)
                ));
            }
            if narrowed.is_empty() {
                reason.push_str("; no candidate: every enabled address (on_no_healthy = all)");
            }
            (steering.balance.as_str().to_string(), reason)
        }
        Answer::FailSafe | Answer::Empty => (
            "not used".to_string(),
            "no candidate is left to balance".to_string(),
        ),
    };
    ExplainStep {
        step: "balance".into(),
        subject: String::new(),
        outcome,
        reason,
    }
}

fn fail_safe_step(steering: &Steering, answer: &Answer) -> ExplainStep {
    let values = || {
        steering
            .fail_safe()
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (outcome, reason) = match answer {
        Answer::Addresses(_) => (
            "not used".to_string(),
            if steering.fail_safe().is_empty() {
                "a candidate is left (the record has no fail-safe records)".to_string()
            } else {
                format!("a candidate is left; fail-safe records {} wait", values())
            },
        ),
        Answer::FailSafe => (
            "used".to_string(),
            format!("no healthy candidate: the fail-safe records {}", values()),
        ),
        Answer::Empty => (
            "none".to_string(),
            "no healthy candidate and no fail-safe records: an empty answer".to_string(),
        ),
    };
    ExplainStep {
        step: "fail-safe".into(),
        subject: String::new(),
        outcome,
        reason,
    }
}

/// How a query picks among `variants` (with their weights).
fn rotation(balance: Balance, variants: &[(usize, u64)], empty: bool) -> String {
    if empty {
        return "none: NOERROR with no answer record (NODATA), the zone's SOA in authority".into();
    }
    if variants.len() <= 1 {
        return match balance {
            Balance::Persist => {
                "persist: this client's subnet (/24, /56) always gets this answer".into()
            }
            _ => "every query gets this answer".into(),
        };
    }
    match balance {
        Balance::RoundRobin => format!(
            "round-robin: each query gets the next of these {} orders in turn (a counter per answering thread)",
            variants.len()
        ),
        Balance::Random => format!(
            "random: each query gets one of these {} at random",
            variants.len()
        ),
        Balance::Weighted => {
            let total: u64 = variants.iter().map(|(_, w)| w).sum();
            format!(
                "weighted: each query gets one of these {} at random, each by its weight of {total}",
                variants.len()
            )
        }
        Balance::Priority | Balance::Persist => "every query gets this answer".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any text is refused with its value named, never a panic; a network
    /// is masked to its prefix as on the wire.
    #[test]
    fn clients_and_networks_parse_or_are_refused_by_name() {
        let c = ExplainClient::parse(None, None).unwrap();
        assert_eq!(c.src.to_string(), "127.0.0.1");
        assert!(c.ecs.is_none());
        let c = ExplainClient::parse(Some("2.2.2.9"), Some("81.2.69.77/24")).unwrap();
        let e = c.ecs.unwrap();
        assert_eq!(
            (e.address.to_string(), e.source_prefix, e.family),
            ("81.2.69.0".into(), 24, 1)
        );
        let e = ExplainClient::parse(None, Some("2001:db8:1:2::5/0"))
            .unwrap()
            .ecs
            .unwrap();
        assert_eq!((e.address.to_string(), e.source_prefix), ("::".into(), 0));
        let e = ExplainClient::parse(None, Some("3.3.3.3"))
            .unwrap()
            .ecs
            .unwrap();
        assert_eq!(e.source_prefix, 32);
        for (client, ecs, named) in [
            (Some("nope"), None, "\"nope\""),
            (None, Some("1.2.3.4/33"), "\"1.2.3.4/33\""),
            (None, Some("1.2.3.4/x"), "\"1.2.3.4/x\""),
            (None, Some("/24"), "\"/24\""),
            (None, Some("::1/129"), "\"::1/129\""),
            (None, Some("1.2.3.4/-1"), "\"1.2.3.4/-1\""),
        ] {
            let e = ExplainClient::parse(client, ecs).unwrap_err();
            assert!(e.contains(named), "{e}");
        }
    }
}
