//! Scenarios as the console shows them: each condition as written, cut
//! into its terms, each term with the truth of the check it names on this
//! device (true, false, unknown), and the decision.

use serde::Serialize;

use super::Engine;
use gtm_model::condition::CheckRef;

/// One scenario, its condition and its decision on this device.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioView {
    pub name: String,
    pub condition: Vec<Piece>,
    pub verify: Option<Vec<Piece>>,
    pub active: bool,
    /// A change the condition asks for, waiting for `verify`.
    pub pending: Option<bool>,
}

/// A piece of a condition's text: an operator, a bracket or a count as
/// written, or a check reference with its truth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Piece {
    Text(String),
    Term { text: String, truth: Option<bool> },
}

const KEYWORDS: [&str; 6] = ["AND", "OR", "NOT", "UNLESS", "AT", "LEAST"];

/// Cuts a condition's text into pieces; `truth` gives each reference's.
pub fn pieces(text: &str, truth: &impl Fn(&CheckRef) -> Option<bool>) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Piece>| {
        if word.is_empty() {
            return;
        }
        let w = std::mem::take(word);
        let keyword = KEYWORDS.contains(&w.to_ascii_uppercase().as_str())
            || w.chars().all(|c| c.is_ascii_digit());
        let reference = (!keyword).then(|| match w.split_once('@') {
            Some((name, ip)) => ip.parse().ok().map(|ip| CheckRef {
                name: name.to_string(),
                address: Some(ip),
            }),
            None => Some(CheckRef {
                name: w.clone(),
                address: None,
            }),
        });
        match reference.flatten() {
            Some(r) => out.push(Piece::Term {
                truth: truth(&r),
                text: w,
            }),
            None => out.push(Piece::Text(w)),
        }
    };
    for c in text.chars() {
        if c.is_whitespace() || matches!(c, '(' | ')' | ',') {
            flush(&mut word, &mut out);
            match out.last_mut() {
                Some(Piece::Text(t)) => t.push(c),
                _ => out.push(Piece::Text(c.to_string())),
            }
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

impl Engine {
    /// Every scenario of the configuration with its terms' truths and its
    /// decision on this device.
    pub fn scenario_views(&self) -> Vec<ScenarioView> {
        let inner = self.lock();
        // Under the lock: the configuration the health state is of.
        let config = self.config();
        let truth = |r: &CheckRef| inner.health.truth(r);
        config
            .scenarios
            .iter()
            .map(|s| {
                let d = inner
                    .health
                    .scenarios
                    .get(&s.name)
                    .copied()
                    .unwrap_or_default();
                ScenarioView {
                    name: s.name.clone(),
                    condition: pieces(&s.condition, &truth),
                    verify: s.verify.as_deref().map(|v| pieces(v, &truth)),
                    active: d.active,
                    pending: d.pending,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_cut_into_its_terms_with_their_truths() {
        let truth = |r: &CheckRef| match (r.name.as_str(), r.address) {
            ("web", Some(_)) => Some(false),
            ("maint", None) => Some(true),
            _ => None,
        };
        let p = pieces(
            "NOT (web@192.0.2.10 OR web@192.0.2.11) UNLESS maint",
            &truth,
        );
        let terms: Vec<(&str, Option<bool>)> = p
            .iter()
            .filter_map(|p| match p {
                Piece::Term { text, truth } => Some((text.as_str(), *truth)),
                Piece::Text(_) => None,
            })
            .collect();
        assert_eq!(
            terms,
            [
                ("web@192.0.2.10", Some(false)),
                ("web@192.0.2.11", Some(false)),
                ("maint", Some(true))
            ]
        );
        let text: String = p
            .iter()
            .map(|p| match p {
                Piece::Text(t) | Piece::Term { text: t, .. } => t.as_str(),
            })
            .collect();
        assert_eq!(text, "NOT (web@192.0.2.10 OR web@192.0.2.11) UNLESS maint");
        let at_least = pieces("AT LEAST 2 (a, b, c)", &|_| None);
        assert!(matches!(&at_least[0], Piece::Text(t) if t == "AT "));
        assert_eq!(
            at_least
                .iter()
                .filter(|p| matches!(p, Piece::Term { .. }))
                .count(),
            3
        );
    }
}
