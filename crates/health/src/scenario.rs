//! Scenario decisions (spec §1 "Health scenario", seed 000 step 2).
//!
//! A scenario is active or passive. Its condition is evaluated three-valued;
//! when it is unknown (a Preparing or No Data check the others do not
//! decide) the scenario keeps its last decision, initially passive; until its
//! condition has decided once, the addresses it guards are undecided (they
//! keep their own last decision, see `resolve::evaluate`). With a
//! `verify` condition ("With Trigger"), a change of decision applies only
//! once `verify` is true; until then it is pending.

use gtm_model::{compile::ScenarioSpec, condition::CheckRef};

/// The decision of one scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decision {
    pub active: bool,
    /// A change the condition asks for, waiting for `verify`.
    pub pending: Option<bool>,
    /// The condition has been known (not unknown) at least once.
    pub decided: bool,
}

/// Re-decides a scenario from check truths (`None` = unknown). Returns the
/// new decision; `active` differs from `last.active` when it switched.
pub fn decide(
    spec: &ScenarioSpec,
    last: Decision,
    truth: &impl Fn(&CheckRef) -> Option<bool>,
) -> Decision {
    let known = spec.condition.eval(truth);
    let decided = last.decided || known.is_some();
    let wanted = known.unwrap_or(last.active);
    if wanted == last.active {
        return Decision {
            active: last.active,
            pending: None,
            decided,
        };
    }
    match &spec.verify {
        Some(verify) if verify.eval(truth) != Some(true) => Decision {
            active: last.active,
            pending: Some(wanted),
            decided,
        },
        _ => Decision {
            active: wanted,
            pending: None,
            decided,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use gtm_model::condition;

    fn spec(condition: &str, verify: Option<&str>) -> ScenarioSpec {
        ScenarioSpec {
            name: "s".into(),
            condition: condition::parse(condition).unwrap(),
            verify: verify.map(|v| condition::parse(v).unwrap()),
        }
    }

    fn truths(pairs: &[(&str, Option<bool>)]) -> impl Fn(&CheckRef) -> Option<bool> {
        let map: HashMap<String, Option<bool>> =
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        move |r: &CheckRef| map.get(&r.to_string()).copied().flatten()
    }

    #[test]
    fn decisions_of_seed_000() {
        let fresh = Decision::default();
        let passive = Decision {
            decided: true,
            ..fresh
        };
        let active = Decision {
            active: true,
            pending: None,
            decided: true,
        };
        for (what, s, last, checks, expect) in [
            (
                "a true condition activates",
                spec("a", None),
                passive,
                vec![("a", Some(true))],
                active,
            ),
            (
                "a false condition deactivates",
                spec("a", None),
                active,
                vec![("a", Some(false))],
                passive,
            ),
            (
                "Preparing/No Data the others do not decide: the scenario keeps its last decision",
                spec("a AND b", None),
                active,
                vec![("a", Some(true)), ("b", None)],
                active,
            ),
            (
                "initially passive while unknown, and undecided",
                spec("a", None),
                fresh,
                vec![("a", None)],
                fresh,
            ),
            (
                "the first known condition decides, even when it keeps passive",
                spec("a", None),
                fresh,
                vec![("a", Some(false))],
                passive,
            ),
            (
                "a first result activates an undecided scenario",
                spec("a", None),
                fresh,
                vec![("a", Some(true))],
                active,
            ),
            (
                "an unknown check the others decide does not hold the decision",
                spec("a OR b", None),
                passive,
                vec![("a", Some(true)), ("b", None)],
                active,
            ),
            (
                "With Trigger: the change waits for the verification condition",
                spec("a", Some("v")),
                passive,
                vec![("a", Some(true)), ("v", Some(false))],
                Decision {
                    active: false,
                    pending: Some(true),
                    decided: true,
                },
            ),
            (
                "With Trigger: the change applies once verify is true",
                spec("a", Some("v")),
                Decision {
                    active: false,
                    pending: Some(true),
                    decided: true,
                },
                vec![("a", Some(true)), ("v", Some(true))],
                active,
            ),
            (
                "With Trigger: an unknown verify keeps waiting",
                spec("a", Some("v")),
                passive,
                vec![("a", Some(true)), ("v", None)],
                Decision {
                    active: false,
                    pending: Some(true),
                    decided: true,
                },
            ),
            (
                "UNLESS builds \"main data center unhealthy\" conditions",
                spec("NOT web UNLESS maint", None),
                passive,
                vec![("web", Some(false)), ("maint", Some(true))],
                passive,
            ),
        ] {
            assert_eq!(decide(&s, last, &truths(&checks)), expect, "{what}");
        }
    }
}
