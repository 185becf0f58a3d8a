//! After the faults: waits for the devices to agree, then compares what
//! they hold with what the clients were told.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use serde_json::Value;

use super::client::{Outcome, Target, Write, get_json, get_text};

/// What the checker found.
pub(super) struct Verdict {
    pub(super) acknowledged: usize,
    pub(super) rejected: usize,
    pub(super) unknown: usize,
    pub(super) lost: Vec<String>,
    pub(super) rejected_present: Vec<String>,
    pub(super) not_monotonic: Vec<String>,
    pub(super) exports_differ: bool,
    /// Unknown outcomes by kind (timeout, connection, HTTP status).
    pub(super) unknown_why: BTreeMap<String, usize>,
    /// Rejected writes by error label.
    pub(super) rejected_why: BTreeMap<String, usize>,
}

/// A short kind of an unknown outcome, for the summary.
fn kind_of(why: &str) -> String {
    if why.contains("timed out") {
        "timeout".into()
    } else if why.contains("error sending request") || why.contains("connect") {
        "connection".into()
    } else {
        why.split(':').next().unwrap_or(why).to_string()
    }
}

fn percentile(sorted: &[Duration], p: usize) -> String {
    if sorted.is_empty() {
        return "n/a".into();
    }
    let i = (sorted.len() - 1) * p / 100;
    format!("{}", sorted[i].as_millis())
}

/// Polls (bounded) until the exports of every device are identical twice
/// in a row; returns them (None for a device that did not answer).
async fn converge(http: &reqwest::Client, targets: &[Target]) -> Vec<Option<String>> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut previous: Vec<Option<String>> = Vec::new();
    loop {
        let mut exports = Vec::new();
        for t in targets {
            exports.push(get_text(http, t, "/api/v1/config").await);
        }
        let same = exports.iter().all(|e| e.is_some() && *e == exports[0]);
        if (same && exports == previous) || Instant::now() >= deadline {
            return exports;
        }
        previous = exports;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub(super) async fn check(http: &reqwest::Client, targets: &[Target], writes: &[Write]) -> Verdict {
    let exports = converge(http, targets).await;
    let exports_differ = !exports.iter().all(|e| e.is_some() && *e == exports[0]);
    // The datacenters each device holds (an unreachable device holds none).
    let mut present: Vec<BTreeSet<String>> = Vec::new();
    for t in targets {
        let list = get_json(http, t, "/api/v1/datacenters", Duration::from_secs(5)).await;
        let names = list
            .as_ref()
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|d| d["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        present.push(names);
    }
    let mut v = Verdict {
        acknowledged: 0,
        rejected: 0,
        unknown: 0,
        lost: Vec::new(),
        rejected_present: Vec::new(),
        not_monotonic: Vec::new(),
        exports_differ,
        unknown_why: BTreeMap::new(),
        rejected_why: BTreeMap::new(),
    };
    let mut last_version: BTreeMap<usize, (u64, String)> = BTreeMap::new();
    for w in writes {
        match &w.outcome {
            Outcome::Acknowledged(version) => {
                v.acknowledged += 1;
                let missing: Vec<&str> = targets
                    .iter()
                    .zip(&present)
                    .filter(|(_, p)| !p.contains(&w.name))
                    .map(|(t, _)| t.name.as_str())
                    .collect();
                if !missing.is_empty() {
                    let on = if missing.len() == targets.len() {
                        "every device".to_string()
                    } else {
                        missing.join(",")
                    };
                    v.lost.push(format!(
                        "{} (v{version} via {}, missing on {on})",
                        w.name, w.device
                    ));
                }
                if let Some((before, name)) = last_version.get(&w.writer)
                    && version <= before
                {
                    v.not_monotonic
                        .push(format!("{} v{version} after {name} v{before}", w.name));
                }
                last_version.insert(w.writer, (*version, w.name.clone()));
            }
            Outcome::Rejected(label) => {
                v.rejected += 1;
                *v.rejected_why.entry(label.clone()).or_default() += 1;
                let on: Vec<&str> = targets
                    .iter()
                    .zip(&present)
                    .filter(|(_, p)| p.contains(&w.name))
                    .map(|(t, _)| t.name.as_str())
                    .collect();
                if !on.is_empty() {
                    v.rejected_present.push(format!(
                        "{} ({label} via {}, present on {})",
                        w.name,
                        w.device,
                        on.join(",")
                    ));
                }
            }
            Outcome::Unknown(why) => {
                v.unknown += 1;
                *v.unknown_why.entry(kind_of(why)).or_default() += 1;
            }
        }
    }
    v
}

impl Verdict {
    /// The summary line.
    pub(super) fn summary(&self, failovers: &[Duration]) -> String {
        let mut failovers = failovers.to_vec();
        failovers.sort();
        format!(
            "acknowledged {}, lost {}, rejected {}, unknown {}, failover p50 {} ms max {} ms",
            self.acknowledged,
            self.lost.len(),
            self.rejected,
            self.unknown,
            percentile(&failovers, 50),
            percentile(&failovers, 100),
        )
    }

    /// The other counts the checker asserts on, and the kinds of outcomes.
    pub(super) fn details(&self) -> String {
        format!(
            "{} rejected writes present, {} versions not monotonic, exports {}; rejected by label {:?}; unknown by kind {:?}",
            self.rejected_present.len(),
            self.not_monotonic.len(),
            if self.exports_differ {
                "DIFFER"
            } else {
                "identical"
            },
            self.rejected_why,
            self.unknown_why
        )
    }

    /// What breaks the promise, one line per kind (empty: it held).
    pub(super) fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if !self.lost.is_empty() {
            failures.push(format!(
                "lost acknowledged writes: {}",
                self.lost.join("; ")
            ));
        }
        if !self.rejected_present.is_empty() {
            failures.push(format!(
                "writes reported rejected are present: {}",
                self.rejected_present.join("; ")
            ));
        }
        if !self.not_monotonic.is_empty() {
            failures.push(format!(
                "versions not monotonic per writer: {}",
                self.not_monotonic.join("; ")
            ));
        }
        if self.exports_differ {
            failures.push("the devices' exports differ after convergence".into());
        }
        failures
    }
}
