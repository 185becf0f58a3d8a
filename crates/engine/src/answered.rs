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

use serde::{Deserialize, Serialize};

use gtm_model::{compile::Steering, config::Balance};
use gtm_resolve::{Answer, PlaceAnswers, PlaceKey};

/// The answer clients in one place get when it differs from the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlaceAnswered {
    /// A country (`GB`) or continent (`EU`) code.
    pub place: String,
    /// What those clients are answered, as in `active`.
    pub active: Vec<String>,
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
                    let all_zero = shown.clone().all(|a| a.weight == 0);
                    let weight = |w: u32| if all_zero { 1 } else { u64::from(w) };
                    let total: u64 = shown.clone().map(|a| weight(a.weight)).sum();
                    shown
                        .map(|a| {
                            let w = weight(a.weight);
                            let share = (w * 100).checked_div(total).unwrap_or(0);
                            format!("{} (weight {w}, {share}%)", a.display())
                        })
                        .collect()
                }
                Balance::RoundRobin | Balance::Random | Balance::Persist => {
                    shown.map(|a| a.display()).collect()
                }
            }
        }
        Answer::FailSafe => steering
            .fail_safe
            .iter()
            .map(|d| format!("{d} (fail-safe)"))
            .collect(),
        Answer::Empty => Vec::new(),
    }
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
pub fn answered_by_place(steering: &Steering, answers: &PlaceAnswers) -> Vec<PlaceAnswered> {
    answers
        .places
        .iter()
        .filter(|(_, g)| *g != answers.default)
        .filter_map(|(key, g)| {
            let answer = answers.groups.get(*g)?;
            Some(PlaceAnswered {
                place: match key {
                    PlaceKey::Country(c) => c.to_string(),
                    PlaceKey::Continent(c) => c.to_string(),
                },
                active: answered(steering, answer),
            })
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
                Content::Static(_) => None,
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
