//! What a record answers, as operators read it (`gtm status`, the record
//! preview): the balance's real choice set, not the candidates the mode
//! left.
//!
//! - priority answers its first `max_answers` candidates, so only those are
//!   shown;
//! - weighted answers each candidate in proportion to its weight, so each is
//!   shown with its weight and share;
//! - round-robin, random and persist answer `max_answers` of all the
//!   candidates in turn, so all are shown;
//! - fail-safe answers the fail-safe values, shown as such.

//!
//! Reports between devices carry these as texts (`192.0.2.1 (weight 3,
//! 75%)`, [`answered`]); the API gives them as [`AddressState`]s, read
//! from this device's records or, for a peer's, from its texts and the
//! configuration ([`reported`]).

use serde::{Deserialize, Serialize};

use gtm_model::{
    compile::{AddressSpec, DcSpec, Steering},
    config::Balance,
};
use gtm_resolve::{Answer, PlaceAnswers, PlaceKey};

/// The answer clients in one place get when it differs from the default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlaceAnswered {
    /// A country (`GB`) or continent (`EU`) code.
    pub place: String,
    /// What those clients are answered, as in `active`.
    pub active: Vec<AddressState>,
}

/// A topology rule of a record and what it answers now (docs/topology.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuleAnswered {
    /// Its place in the record's rules, from 1.
    pub rule: usize,
    /// Its client place: `10.20.0.0/16`, `region:branch`, `country:US`.
    pub client: String,
    /// `datacenter east` or `address 192.0.2.1`.
    pub target: String,
    pub weight: u32,
    /// What the clients it holds are answered, as in `active`; empty
    /// when the rule is skipped.
    pub active: Vec<AddressState>,
    /// None of its target's addresses is a candidate now: the clients it
    /// holds are answered by the next rule that holds them, or as without
    /// rules.
    pub skipped: bool,
}

/// A datacenter a record answers from by distance (`nearest = true`),
/// with what it answers now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NearestAnswered {
    pub datacenter: String,
    /// Decimal degrees north.
    pub latitude: f64,
    /// Decimal degrees east.
    pub longitude: f64,
    /// −99 to 99: distances to it count `1 − bias/100` times.
    pub bias: i32,
    /// What the clients nearest to it are answered; empty when skipped.
    pub active: Vec<AddressState>,
    /// None of its addresses is a candidate now: its clients go to the
    /// next nearest.
    pub skipped: bool,
}

/// How an address stands on the device that reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AddressHealth {
    /// A candidate: its check, scenario or `static` says it may be answered.
    Healthy,
    /// Its check or scenario says no, it is `disabled`, or its datacenter
    /// is down.
    Unhealthy,
    /// A fail-safe value, answered because no address is healthy.
    FailSafe,
}

impl AddressHealth {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
            Self::FailSafe => "fail-safe",
        }
    }
}

/// One address as the API gives it: what is answered (`active`), or every
/// address of a record (the preview's `addresses`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddressState {
    /// The address (`192.0.2.10`, `2001:db8::1`); a CNAME record's target
    /// name; a fail-safe value as configured.
    pub ip: String,
    /// Its configured weight; `null` for a fail-safe value, or a peer's
    /// address this device's configuration does not hold.
    pub weight: Option<u32>,
    /// With `weighted` balance only: the fraction (0 to 1, not rounded)
    /// of answers it leads, its weight over the weights of the addresses
    /// answered (all weights 0 count alike, as the DNS path answers
    /// them); 0 for an address not answered. `null` for other balances.
    pub share: Option<f64>,
    /// Its datacenter, when it has one.
    pub datacenter: Option<String>,
    pub health: AddressHealth,
    /// Why, in words: its check's state and last result with the time of
    /// the change, its scenario's decision, `static` or `disabled` (this
    /// device's addresses); for a peer's, that the peer's last report
    /// answers it.
    pub reason: String,
}

/// The weight the balance gives each of `weights` (all zero weighs them
/// alike, as the DNS path does), and their total.
fn balance_weights(weights: &[u32]) -> (Vec<u64>, u64) {
    let all_zero = weights.iter().all(|&w| w == 0);
    let weighed: Vec<u64> = weights
        .iter()
        .map(|&w| if all_zero { 1 } else { u64::from(w) })
        .collect();
    let total = weighed.iter().sum();
    (weighed, total)
}

/// Whole percentages of `shares` (fractions that add up to 1) that add up
/// to 100: each rounded down, then the points left over given to the
/// largest remainders (largest-remainder rounding), earlier first on a tie.
pub fn percents(shares: &[f64]) -> Vec<u64> {
    let exact: Vec<f64> = shares.iter().map(|s| (s * 100.0).max(0.0)).collect();
    let mut whole: Vec<u64> = exact.iter().map(|e| (e + 1e-9).floor() as u64).collect();
    let sum: f64 = exact.iter().sum();
    let target = sum.round() as u64;
    let left = target.saturating_sub(whole.iter().sum());
    let mut order: Vec<usize> = (0..exact.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - whole[a] as f64, exact[b] - whole[b] as f64);
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().take(left as usize) {
        whole[i] += 1;
    }
    whole
}

/// The texts people read of answered addresses, as `gtm status` and the
/// console show them: `192.0.2.1`, `192.0.2.1 (weight 3, 75%)` (whole
/// percentages adding up to 100), `198.51.100.9 (fail-safe)`.
pub fn active_texts(active: &[AddressState]) -> Vec<String> {
    let weighted: Vec<&AddressState> = active.iter().filter(|a| a.share.is_some()).collect();
    let weights: Vec<u32> = weighted.iter().map(|a| a.weight.unwrap_or(0)).collect();
    let (weighed, _) = balance_weights(&weights);
    let shares: Vec<f64> = weighted.iter().map(|a| a.share.unwrap_or(0.0)).collect();
    let mut percent = percents(&shares).into_iter().zip(weighed);
    active
        .iter()
        .map(|a| match (a.health, a.share) {
            (AddressHealth::FailSafe, _) => format!("{} (fail-safe)", a.ip),
            (_, Some(_)) => match percent.next() {
                Some((p, w)) => format!("{} (weight {w}, {p}%)", a.ip),
                None => a.ip.clone(),
            },
            (_, None) => a.ip.clone(),
        })
        .collect()
}

/// The addresses `steering` answers of `shown` (indices of its addresses),
/// typed; `reason` says why each is a candidate.
fn states(
    steering: &Steering,
    dcs: &[DcSpec],
    shown: &[usize],
    reason: &dyn Fn(&AddressSpec) -> String,
) -> Vec<AddressState> {
    let addresses: Vec<&AddressSpec> = shown
        .iter()
        .filter_map(|&i| steering.addresses.get(i))
        .collect();
    let weights: Vec<u32> = addresses.iter().map(|a| a.weight).collect();
    let (weighed, total) = balance_weights(&weights);
    let weighted = steering.balance == Balance::Weighted;
    addresses
        .iter()
        .zip(weighed)
        .map(|(a, w)| AddressState {
            ip: a.display(),
            weight: Some(a.weight),
            share: weighted.then(|| {
                if total == 0 {
                    0.0
                } else {
                    w as f64 / total as f64
                }
            }),
            datacenter: datacenter(dcs, a),
            health: AddressHealth::Healthy,
            reason: reason(a),
        })
        .collect()
}

pub(crate) fn datacenter(dcs: &[DcSpec], a: &AddressSpec) -> Option<String> {
    a.dc().and_then(|d| dcs.get(d)).map(|d| d.name.clone())
}

/// The indices of the addresses an answer shows (priority: its first
/// `max_answers`).
fn shown(steering: &Steering, list: &[usize]) -> Vec<usize> {
    let list = list
        .iter()
        .copied()
        .filter(|&i| i < steering.addresses.len());
    match steering.balance {
        Balance::Priority => list.take(steering.max_answers as usize).collect(),
        _ => list.collect(),
    }
}

fn fail_safe(value: String) -> AddressState {
    AddressState {
        ip: value,
        weight: None,
        share: None,
        datacenter: None,
        health: AddressHealth::FailSafe,
        reason: "fail-safe value: no address is healthy".into(),
    }
}

/// What a client is answered when its answer is `answer`, typed.
pub fn answered_states(
    steering: &Steering,
    dcs: &[DcSpec],
    answer: &Answer,
    reason: &dyn Fn(&AddressSpec) -> String,
) -> Vec<AddressState> {
    match answer {
        Answer::Addresses(list) => states(steering, dcs, &shown(steering, list), reason),
        Answer::FailSafe => steering
            .fail_safe()
            .iter()
            .map(|d| fail_safe(d.to_string()))
            .collect(),
        Answer::Empty => Vec::new(),
    }
}

/// A peer's answered addresses, from the texts its report carries
/// ([`answered`]) and, when this device's configuration holds the record
/// (`steering`), the weight and datacenter of each.
pub fn reported(
    steering: Option<&Steering>,
    dcs: &[DcSpec],
    active: &[String],
    device: &str,
) -> Vec<AddressState> {
    let reason = |_: &AddressSpec| format!("answered by {device} at its last report");
    let mut fail_safes = Vec::new();
    let mut ips = Vec::new();
    for text in active {
        if let Some(value) = text.strip_suffix(" (fail-safe)") {
            fail_safes.push(fail_safe(value.to_string()));
        } else {
            let ip = text
                .split_once(" (weight ")
                .map_or(text.as_str(), |(ip, _)| ip);
            ips.push(ip);
        }
    }
    if !fail_safes.is_empty() {
        return fail_safes;
    }
    let found: Option<Vec<usize>> = steering.and_then(|s| {
        ips.iter()
            .map(|ip| s.addresses.iter().position(|a| a.display() == *ip))
            .collect()
    });
    match (steering, found) {
        (Some(s), Some(found)) => states(s, dcs, &found, &reason),
        _ => ips
            .into_iter()
            .map(|ip| AddressState {
                ip: ip.to_string(),
                weight: None,
                share: None,
                datacenter: None,
                health: AddressHealth::Healthy,
                reason: format!("answered by {device} at its last report"),
            })
            .collect(),
    }
}

/// What a client is answered when its answer is `answer`.
pub fn answered(steering: &Steering, answer: &Answer) -> Vec<String> {
    match answer {
        Answer::Addresses(list) => {
            let shown = list.iter().filter_map(|&i| steering.addresses.get(i));
            match steering.balance {
                Balance::Priority => shown
                    .take(steering.max_answers as usize)
                    .map(|a| a.display())
                    .collect(),
                Balance::Weighted => {
                    // The DNS path's rule: all weights zero weighs them alike.
                    let weights: Vec<u32> = shown.clone().map(|a| a.weight).collect();
                    let (weighed, total) = balance_weights(&weights);
                    let shares: Vec<f64> = weighed
                        .iter()
                        .map(|&w| {
                            if total == 0 {
                                0.0
                            } else {
                                w as f64 / total as f64
                            }
                        })
                        .collect();
                    shown
                        .zip(weighed)
                        .zip(percents(&shares))
                        .map(|((a, w), p)| format!("{} (weight {w}, {p}%)", a.display()))
                        .collect()
                }
                Balance::RoundRobin | Balance::Random | Balance::Persist => {
                    shown.map(|a| a.display()).collect()
                }
            }
        }
        Answer::FailSafe => steering
            .fail_safe()
            .iter()
            .map(|d| format!("{d} (fail-safe)"))
            .collect(),
        Answer::Empty => Vec::new(),
    }
}

/// What clients without a place of their own are answered, typed.
pub fn answered_states_by_default(
    steering: &Steering,
    dcs: &[DcSpec],
    answers: &PlaceAnswers,
    reason: &dyn Fn(&AddressSpec) -> String,
) -> Vec<AddressState> {
    answers
        .groups
        .get(answers.default)
        .map(|a| answered_states(steering, dcs, a, reason))
        .unwrap_or_default()
}

/// What clients without a place of their own are answered.
pub fn answered_by_default(steering: &Steering, answers: &PlaceAnswers) -> Vec<String> {
    answers
        .groups
        .get(answers.default)
        .map(|a| answered(steering, a))
        .unwrap_or_default()
}

/// The places whose clients get another answer than the default, in the
/// order topological selection lists them.
pub fn answered_by_place(
    steering: &Steering,
    dcs: &[DcSpec],
    answers: &PlaceAnswers,
    reason: &dyn Fn(&AddressSpec) -> String,
) -> Vec<PlaceAnswered> {
    answers
        .places()
        .iter()
        .filter(|(_, g)| *g != answers.default)
        .filter_map(|(key, g)| {
            let answer = answers.groups.get(*g)?;
            Some(PlaceAnswered {
                place: match key {
                    PlaceKey::Country(c) => c.to_string(),
                    PlaceKey::Continent(c) => c.to_string(),
                },
                active: answered_states(steering, dcs, answer, reason),
            })
        })
        .collect()
}

/// A rule's client place as written: `10.20.0.0/16`, `region:branch`.
pub(crate) fn rule_client(
    topology: &gtm_model::topology::Topology,
    spec: &gtm_model::compile::RuleSpec,
) -> String {
    topology
        .matchers
        .get(spec.matcher as usize)
        .map_or_else(|| "?".to_string(), |m| m.name.clone())
}

/// A rule's target in words: `datacenter east`, `address 192.0.2.1`.
pub(crate) fn rule_target(
    steering: &Steering,
    dcs: &[DcSpec],
    spec: &gtm_model::compile::RuleSpec,
) -> String {
    match spec.target {
        gtm_model::compile::RuleTarget::Datacenter(dc) => format!(
            "datacenter {}",
            dcs.get(dc).map_or("?", |d| d.name.as_str())
        ),
        gtm_model::compile::RuleTarget::Group(first) => format!(
            "group {}",
            steering
                .addresses
                .get(first as usize)
                .and_then(|a| a.group())
                .unwrap_or("?")
        ),
        gtm_model::compile::RuleTarget::Address(a) => format!(
            "address {}",
            steering
                .addresses
                .get(a as usize)
                .map_or_else(|| "?".to_string(), |a| a.display())
        ),
    }
}

/// The record's topology rules, each with what it answers now.
pub fn answered_by_rule(
    steering: &Steering,
    dcs: &[DcSpec],
    answers: &PlaceAnswers,
    topology: &gtm_model::topology::Topology,
    reason: &dyn Fn(&AddressSpec) -> String,
) -> Vec<RuleAnswered> {
    steering
        .rules()
        .iter()
        .zip(answers.rules())
        .enumerate()
        .map(|(i, (spec, decided))| {
            let active = decided
                .group
                .and_then(|g| answers.groups.get(g as usize))
                .map(|a| answered_states(steering, dcs, a, reason))
                .unwrap_or_default();
            RuleAnswered {
                rule: i + 1,
                client: rule_client(topology, spec),
                target: rule_target(steering, dcs, spec),
                weight: spec.weight,
                active,
                skipped: decided.group.is_none(),
            }
        })
        .collect()
}

/// The datacenters the record answers from by distance, each with what it
/// answers now.
pub fn answered_by_nearest(
    steering: &Steering,
    dcs: &[DcSpec],
    answers: &PlaceAnswers,
    reason: &dyn Fn(&AddressSpec) -> String,
) -> Vec<NearestAnswered> {
    answers
        .nearest()
        .iter()
        .map(|n| NearestAnswered {
            datacenter: dcs.get(n.dc).map_or_else(|| "?".into(), |d| d.name.clone()),
            latitude: n.at.latitude(),
            longitude: n.at.longitude(),
            bias: n.bias,
            active: n
                .group
                .and_then(|g| answers.groups.get(g as usize))
                .map(|a| answered_states(steering, dcs, a, reason))
                .unwrap_or_default(),
            skipped: n.group.is_none(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_model::{
        compile::{Content, compile},
        parse,
    };

    /// The steering of `www.example.test/A` with `balance`, the given
    /// addresses and any other record keys.
    fn steering(balance: &str, addresses: &str, extra: &str) -> Steering {
        let text = format!(
            r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
[[domain.record]]
name = "www"
type = "A"
balance = "{balance}"
addresses = [{addresses}]
{extra}
"#
        );
        let compiled = compile(&parse(&text).expect("parses")).expect("compiles");
        compiled.zones[0]
            .records
            .iter()
            .find_map(|r| match &r.content {
                Content::Steered(s) => Some((**s).clone()),
                Content::Static(_) | Content::Alias(_) => None,
            })
            .expect("a steered record")
    }

    const THREE: &str = r#"{ ip = "192.0.2.1" }, { ip = "192.0.2.2" }, { ip = "192.0.2.3" }"#;
    const WEIGHED: &str = r#"{ ip = "192.0.2.1", weight = 3 }, { ip = "192.0.2.2", weight = 1 },
        { ip = "192.0.2.3", weight = 0 }"#;

    #[test]
    fn priority_shows_only_what_it_answers() {
        let s = steering("priority", THREE, "");
        let answer = Answer::Addresses(vec![1, 2]);
        assert_eq!(answered(&s, &answer), ["192.0.2.2"]);
    }

    #[test]
    fn weighted_shows_weights_and_shares() {
        let s = steering("weighted", WEIGHED, "");
        let answer = Answer::Addresses(vec![0, 1]);
        assert_eq!(
            answered(&s, &answer),
            ["192.0.2.1 (weight 3, 75%)", "192.0.2.2 (weight 1, 25%)"]
        );
        // All weights zero: alike, as the DNS path answers them.
        let answer = Answer::Addresses(vec![2]);
        assert_eq!(answered(&s, &answer), ["192.0.2.3 (weight 1, 100%)"]);
    }

    /// Six equal weights: 16.67 % each, shown as whole percentages that
    /// add up to 100 (the largest remainders first, earlier on a tie), and
    /// typed as the exact fraction.
    #[test]
    fn shares_are_exact_and_shown_percentages_add_up_to_100() {
        let six = (1..=6)
            .map(|i| format!(r#"{{ ip = "192.0.2.{i}" }}"#))
            .collect::<Vec<_>>()
            .join(", ");
        let s = steering("weighted", &six, "");
        let answer = Answer::Addresses((0..6).collect());
        let texts = answered(&s, &answer);
        assert_eq!(
            texts,
            [
                "192.0.2.1 (weight 1, 17%)",
                "192.0.2.2 (weight 1, 17%)",
                "192.0.2.3 (weight 1, 17%)",
                "192.0.2.4 (weight 1, 17%)",
                "192.0.2.5 (weight 1, 16%)",
                "192.0.2.6 (weight 1, 16%)",
            ]
        );
        let typed = answered_states(&s, &[], &answer, &|_| "why".into());
        assert!(
            typed
                .iter()
                .all(|a| a.share.is_some_and(|x| (x - 1.0 / 6.0).abs() < 1e-12))
        );
        assert_eq!(active_texts(&typed), texts);
        // A peer's texts give the same typed addresses.
        let theirs = reported(Some(&s), &[], &texts, "gtm2");
        assert_eq!(theirs.len(), 6);
        assert!(theirs.iter().zip(&typed).all(|(t, m)| t.ip == m.ip
            && t.weight == m.weight
            && t.share == m.share
            && t.reason == "answered by gtm2 at its last report"));

        assert_eq!(percents(&[1.0 / 3.0; 3]), [34, 33, 33]);
        assert_eq!(percents(&[0.75, 0.25]), [75, 25]);
        assert_eq!(percents(&[0.005, 0.995]), [1, 99]);
        assert_eq!(percents(&[]), Vec::<u64>::new());
        for n in 1..40 {
            let shares = vec![1.0 / n as f64; n];
            assert_eq!(percents(&shares).iter().sum::<u64>(), 100, "{n}");
        }
        // Weights 0 weigh alike; fail-safe values have no share.
        let s = steering("weighted", WEIGHED, r#"fail_safe = ["198.51.100.9"]"#);
        let zero = answered_states(&s, &[], &Answer::Addresses(vec![2]), &|_| String::new());
        assert_eq!((zero[0].weight, zero[0].share), (Some(0), Some(1.0)));
        assert_eq!(active_texts(&zero), ["192.0.2.3 (weight 1, 100%)"]);
        let safe = answered_states(&s, &[], &Answer::FailSafe, &|_| String::new());
        assert_eq!(safe[0].health, AddressHealth::FailSafe);
        assert_eq!(active_texts(&safe), ["198.51.100.9 (fail-safe)"]);
        assert_eq!(
            reported(Some(&s), &[], &["198.51.100.9 (fail-safe)".into()], "gtm2"),
            safe
        );
    }

    #[test]
    fn round_robin_shows_every_candidate() {
        let s = steering("round-robin", THREE, "");
        let answer = Answer::Addresses(vec![0, 2]);
        assert_eq!(answered(&s, &answer), ["192.0.2.1", "192.0.2.3"]);
    }

    #[test]
    fn fail_safe_shows_the_fail_safe_values() {
        let s = steering("round-robin", THREE, r#"fail_safe = ["198.51.100.9"]"#);
        assert_eq!(
            answered(&s, &Answer::FailSafe),
            ["198.51.100.9 (fail-safe)"]
        );
        assert!(answered(&s, &Answer::Empty).is_empty());
    }
}
