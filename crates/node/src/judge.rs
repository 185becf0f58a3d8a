//! An operator action judged on every device (docs/operations.md, "Judged
//! on every device"). A drain, a check set or a resume is one replicated
//! command, but each device answers from its own health view: a drain that
//! leaves this device an answer may leave another with none. So before
//! such an action is made (and when a schedule fires it), every device is
//! asked what it would change (`/cluster/v1/what-if`, answered from its own
//! state by [`WhatIf::on`]); a device that does not answer in time is
//! judged here from its last report, which says how old it is.
//!
//! The action is refused without `force` when any device would answer a
//! record with nothing ([`Judgement::refusal`]), naming the device and the
//! records, with one wording for drains and schedules.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use serde::{Deserialize, Serialize};

use crate::{command::Action, peers::Peers, replication::Replication};
use gtm_cluster::SECRET_HEADER;
use gtm_engine::{
    Engine,
    dry_run::{ActionPreview, AnswerChange},
};
use gtm_model::{
    drain::DrainTarget,
    error::{ApiError, ErrorKind},
};

/// How long a device is waited for before it is judged from its report.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// An action to judge: what a device is asked about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum WhatIf {
    Drain {
        target: DrainTarget,
        drained: bool,
    },
    SetCheck {
        check: String,
        state: String,
    },
    Resume {
        record: String,
    },
    /// A configuration change: `text` is the TOML of the part of the new
    /// configuration it touches (`gtm_engine::config_preview::touched`),
    /// `action` names the change (`apply configuration`).
    Config {
        action: String,
        text: String,
    },
}

/// A configuration change that touches more records than this is not
/// judged on every device (each would compile and evaluate them all, as
/// long as the change's own install takes); the answer says so.
pub const CONFIG_JUDGED_MAX: usize = 20_000;

impl WhatIf {
    /// The what-if of an operator action; `None` for an action that
    /// changes no answer by itself.
    pub fn of(action: &Action) -> Option<Self> {
        match action {
            Action::Drain { target, drained } => Some(Self::Drain {
                target: target.clone(),
                drained: *drained,
            }),
            Action::SetCheck { check, state } => Some(Self::SetCheck {
                check: check.clone(),
                state: state.clone(),
            }),
            Action::Resume { record } => Some(Self::Resume {
                record: record.clone(),
            }),
            _ => None,
        }
    }

    /// What it would change on the device of `engine`, from that device's
    /// own state now. An error names what the device's configuration
    /// lacks.
    pub fn on(&self, engine: &Engine) -> Result<ActionPreview, String> {
        match self {
            Self::Drain { target, drained } => engine
                .drain_preview(target, *drained)
                .map(ActionPreview::from)
                .map_err(|e| e.to_string()),
            Self::SetCheck { check, state } => engine
                .check_preview(check, state)
                .map_err(|e| e.to_string()),
            Self::Resume { record } => engine.resume_preview(record).map_err(|e| e.to_string()),
            Self::Config { action, text } => {
                let config = gtm_model::parse(text).map_err(|e| e.to_string())?;
                let compiled = gtm_model::compile(&config).map_err(|e| e.to_string())?;
                Ok(engine.config_preview(&compiled, action.clone()))
            }
        }
    }

    /// The what-if of changing the configuration `current` to `new`
    /// (`action` names it): `Ok(None)` when the change touches no record;
    /// `Err` with the count when it touches more than
    /// [`CONFIG_JUDGED_MAX`].
    pub fn config(
        action: &str,
        current: &gtm_model::Config,
        new: &gtm_model::Config,
    ) -> Result<Option<Self>, usize> {
        let (touched, count) = gtm_engine::config_preview::touched(current, new);
        if count == 0 {
            return Ok(None);
        }
        if count > CONFIG_JUDGED_MAX {
            return Err(count);
        }
        Ok(toml::to_string(&touched).ok().map(|text| Self::Config {
            action: action.to_string(),
            text,
        }))
    }
}

/// Where a device's judgement comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// The device computed it now, from its own state.
    Now,
    /// The device did not answer: estimated here from its last report
    /// (`age_ms` old): its answers then, less what the drain takes out.
    Report,
    /// Neither: the device did not answer and there is no report of it
    /// to judge a drain by, or it refused the question (`why`).
    None,
}

/// What an action would change on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceJudgement {
    pub device: String,
    pub basis: Basis,
    /// With `report`: how old the report is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_ms: Option<u64>,
    /// Why the device could not be asked, or why it was not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The records whose answers would change there, now → after.
    pub changes: Vec<AnswerChange>,
    /// The records that answer there now and would answer nothing.
    pub emptied: Vec<String>,
}

impl DeviceJudgement {
    /// The device as a refusal names it: `gtm2`, `gtm2 (judged from its
    /// report 4 s old)`.
    fn named(&self) -> String {
        match (self.basis, self.age_ms) {
            (Basis::Report, Some(age)) => format!(
                "{} (judged from its report {} old)",
                self.device,
                gtm_model::when::age(age)
            ),
            _ => self.device.clone(),
        }
    }
}

/// What an action would change on every device of the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Judgement {
    /// `drain datacenter dc1`, `set check maint to error`.
    pub action: String,
    /// This device first, then its peers by name.
    pub devices: Vec<DeviceJudgement>,
}

impl Judgement {
    /// Each record some device would answer with nothing, with those
    /// devices, by record.
    pub fn emptied(&self) -> BTreeMap<&str, Vec<&DeviceJudgement>> {
        let mut by_record: BTreeMap<&str, Vec<&DeviceJudgement>> = BTreeMap::new();
        for d in &self.devices {
            for r in &d.emptied {
                by_record.entry(r.as_str()).or_default().push(d);
            }
        }
        by_record
    }

    /// `www.example.test/A on gtm1, gtm2 (judged from its report 4 s
    /// old)`, a line per record some device would answer with nothing.
    pub fn emptied_lines(&self) -> Vec<String> {
        self.emptied()
            .into_iter()
            .map(|(record, devices)| {
                let on: Vec<String> = devices.iter().map(|d| d.named()).collect();
                format!("{record} on {}", on.join(", "))
            })
            .collect()
    }

    /// The refusal of an action that would leave a record with no answer
    /// on some device, naming the records and the devices; `verb` is what
    /// `--force` does (`drain anyway`). `None` when every device keeps an
    /// answer for every record.
    pub fn refusal(&self, verb: &str) -> Option<ApiError> {
        let emptied = self.emptied_sentence()?;
        let mut e = ApiError::new(
            ErrorKind::Conflict,
            format!(
                "{emptied}; nothing was changed. Give --force (force=true) to {verb}, --dry-run (dry_run=true) to see every change on every device"
            ),
        );
        e.errors = self.emptied_lines();
        Some(e)
    }

    /// `drain datacenter dc2 would leave 1 record(s) with no answer:
    /// www.example.test/A on gtm2`; `None` when every device keeps an
    /// answer for every record.
    pub fn emptied_sentence(&self) -> Option<String> {
        let lines = self.emptied_lines();
        (!lines.is_empty()).then(|| {
            format!(
                "{} would leave {} record(s) with no answer: {}",
                self.action,
                lines.len(),
                lines.join("; ")
            )
        })
    }

    /// A judgement of this device only, saying why no device was judged
    /// (a change too large to judge, a question this device could not
    /// answer).
    pub fn not_judged(device: &str, action: &str, why: String) -> Self {
        Self {
            action: action.to_string(),
            devices: vec![unjudged(device, why)],
        }
    }

    /// The devices that could not be judged, in words, for a warning.
    pub fn unjudged(&self) -> Vec<String> {
        self.devices
            .iter()
            .filter(|d| d.basis == Basis::None)
            .map(|d| {
                format!(
                    "{} was not judged: {}",
                    d.device,
                    d.why.as_deref().unwrap_or("no answer")
                )
            })
            .collect()
    }
}

/// What judging needs: this device's engine, its peers' reports, the
/// membership and the client to ask the others with.
#[derive(Clone)]
pub struct Judge {
    pub engine: Arc<Engine>,
    pub peers: Arc<Peers>,
    pub replication: Arc<Replication>,
    pub http: reqwest::Client,
}

impl Judge {
    /// What `what` would change on every device: this one's own answer
    /// first, then each peer's, asked at once and each waited for at most
    /// [`ASK_TIMEOUT`]. An error is this device's own refusal of the
    /// question (a target its configuration lacks).
    pub async fn judge(&self, what: &WhatIf) -> Result<Judgement, ApiError> {
        let local = {
            let (engine, what) = (self.engine.clone(), what.clone());
            tokio::task::spawn_blocking(move || what.on(&engine))
                .await
                .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?
                .map_err(|e| ApiError::new(ErrorKind::NotFound, e))?
        };
        let status = self.replication.status();
        let secret = self.replication.secret_value();
        let mut others: Vec<_> = status
            .members
            .iter()
            .filter(|m| m.id != status.id)
            .map(|m| (m.info.name.clone(), m.info.api_addr.clone()))
            .collect();
        others.sort();
        let asks = others
            .iter()
            .map(|(name, addr)| self.ask(name, addr, &secret, what));
        let answers = futures_util::future::join_all(asks).await;
        let mut devices = vec![DeviceJudgement {
            device: self.engine.device().to_string(),
            basis: Basis::Now,
            age_ms: None,
            why: None,
            changes: local.changes,
            emptied: local.emptied,
        }];
        for ((name, _), answer) in others.iter().zip(answers) {
            devices.push(match answer {
                Asked::Answered(p) => DeviceJudgement {
                    device: name.clone(),
                    basis: Basis::Now,
                    age_ms: None,
                    why: None,
                    changes: p.changes,
                    emptied: p.emptied,
                },
                Asked::Refused(why) => unjudged(name, why),
                Asked::Silent(why) => self.by_report(name, what, why).await,
            });
        }
        Ok(Judgement {
            action: local.action,
            devices,
        })
    }

    /// Asks one peer what `what` would change there.
    async fn ask(&self, name: &str, addr: &str, secret: &str, what: &WhatIf) -> Asked {
        let url = format!("{}/cluster/v1/what-if", addr.trim_end_matches('/'));
        let sent = self
            .http
            .post(url)
            .header(SECRET_HEADER, secret)
            .timeout(ASK_TIMEOUT)
            .json(what)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return Asked::Silent(format!("{name} did not answer: {e}")),
        };
        if !response.status().is_success() {
            let code = response.status();
            return match response.json::<ApiError>().await {
                // The device's own refusal: its configuration lacks the
                // target (it may lag the committed one).
                Ok(e) => Asked::Refused(format!("{name} answered: {}", e.message)),
                Err(_) => Asked::Silent(format!("{name} answered {code}")),
            };
        }
        match response.json::<ActionPreview>().await {
            Ok(p) => Asked::Answered(p),
            Err(e) => Asked::Silent(format!("{name}'s answer does not parse: {e}")),
        }
    }

    /// A peer that did not answer, judged from its last report: only a
    /// drain can be (its reported answers less the addresses the drain
    /// takes out); anything else, or no report, is not judged.
    async fn by_report(&self, name: &str, what: &WhatIf, why: String) -> DeviceJudgement {
        let WhatIf::Drain {
            target,
            drained: true,
        } = what
        else {
            return unjudged(name, why);
        };
        let Some((age, states)) = self.peers.last_states(name) else {
            return unjudged(name, format!("{why}, and no report of it has come"));
        };
        let (engine, target) = (self.engine.clone(), target.clone());
        let estimated = tokio::task::spawn_blocking(move || {
            let covers = engine.drain_covers(&target);
            estimate(&covers, states.statuses())
        })
        .await;
        let Ok((changes, emptied)) = estimated else {
            return unjudged(name, why);
        };
        DeviceJudgement {
            device: name.to_string(),
            basis: Basis::Report,
            age_ms: Some(age.as_millis() as u64),
            why: Some(why),
            changes,
            emptied,
        }
    }

    /// A configuration change from `current` to `new` (`action` names it)
    /// judged on every device; `None` when it touches no steered record.
    /// A change too large to judge, or one this device cannot judge, is
    /// said so in the judgement rather than refused.
    pub async fn config(
        &self,
        action: &str,
        current: Arc<gtm_model::Config>,
        new: Arc<gtm_model::Config>,
    ) -> Option<Judgement> {
        let label = action.to_string();
        let what = tokio::task::spawn_blocking(move || WhatIf::config(&label, &current, &new))
            .await
            .unwrap_or(Ok(None));
        let device = self.engine.device();
        match what {
            Ok(None) => None,
            Ok(Some(what)) => Some(
                self.judge(&what)
                    .await
                    .unwrap_or_else(|e| Judgement::not_judged(device, action, e.message)),
            ),
            Err(count) => Some(Judgement::not_judged(
                device,
                action,
                format!(
                    "the change touches {count} records; one touching more than {CONFIG_JUDGED_MAX} is not judged"
                ),
            )),
        }
    }
}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge")
            .field("device", &self.engine.device())
            .finish_non_exhaustive()
    }
}

enum Asked {
    Answered(ActionPreview),
    /// It answered with an error of its own.
    Refused(String),
    /// No usable answer in time.
    Silent(String),
}

fn unjudged(name: &str, why: String) -> DeviceJudgement {
    DeviceJudgement {
        device: name.to_string(),
        basis: Basis::None,
        age_ms: None,
        why: Some(why),
        changes: Vec::new(),
        emptied: Vec::new(),
    }
}

/// A drain's changes to reported answers: each record's answers (an
/// address first, then how it is weighted) less the addresses `covers`
/// says the drain takes out of it. A record left with none is emptied:
/// the estimate does not know what the device would fall back to, so it
/// errs toward a refusal.
fn estimate(
    covers: &BTreeMap<String, BTreeSet<String>>,
    reported: Vec<gtm_engine::RecordStatus>,
) -> (Vec<AnswerChange>, Vec<String>) {
    let mut changes = Vec::new();
    let mut emptied = Vec::new();
    for status in reported {
        let Some(drained) = covers.get(&status.record) else {
            continue;
        };
        let address = |a: &String| a.split_whitespace().next().unwrap_or_default().to_string();
        let before: Vec<String> = status.active.iter().map(address).collect();
        let after: Vec<String> = before
            .iter()
            .filter(|a| !drained.contains(*a))
            .cloned()
            .collect();
        if after == before {
            continue;
        }
        if after.is_empty() {
            emptied.push(status.record.clone());
        }
        changes.push(AnswerChange {
            record: status.record,
            before: before.into(),
            after: after.into(),
        });
    }
    (changes, emptied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(record: &str, active: &[&str]) -> gtm_engine::RecordStatus {
        gtm_engine::RecordStatus {
            record: record.into(),
            status: None,
            active: active.iter().map(|a| a.to_string()).collect(),
            decision: String::new(),
            held: false,
        }
    }

    /// From a report, a drain takes its addresses out of each record's
    /// answers; a record left with none is emptied, one answered by
    /// others or not covered is not.
    #[test]
    fn a_drain_is_estimated_from_reported_answers() {
        let covers: BTreeMap<String, BTreeSet<String>> = [
            ("a.t/A".to_string(), ["192.0.2.1".to_string()].into()),
            ("b.t/A".to_string(), ["192.0.2.1".to_string()].into()),
        ]
        .into();
        let (changes, emptied) = estimate(
            &covers,
            vec![
                status("a.t/A", &["192.0.2.1 (weight 1, 50%)", "192.0.2.2"]),
                status("b.t/A", &["192.0.2.1"]),
                status("c.t/A", &["192.0.2.1"]),
                status("d.t/A", &[]),
            ],
        );
        assert_eq!(
            changes,
            [
                AnswerChange {
                    record: "a.t/A".into(),
                    before: vec!["192.0.2.1".into(), "192.0.2.2".into()].into(),
                    after: vec!["192.0.2.2".to_string()].into(),
                },
                AnswerChange {
                    record: "b.t/A".into(),
                    before: vec!["192.0.2.1".to_string()].into(),
                    after: Default::default(),
                },
            ]
        );
        assert_eq!(emptied, ["b.t/A"]);
    }

    /// A refusal names each emptied record with the devices it would be
    /// empty on, and how old a report judged from is.
    #[test]
    fn a_refusal_names_records_and_devices() {
        let device = |name: &str, basis, age_ms, emptied: &[&str]| DeviceJudgement {
            device: name.into(),
            basis,
            age_ms,
            why: None,
            changes: Vec::new(),
            emptied: emptied.iter().map(|e| e.to_string()).collect(),
        };
        let mut j = Judgement {
            action: "drain datacenter dc2".into(),
            devices: vec![
                device("gtm1", Basis::Now, None, &[]),
                device("gtm2", Basis::Now, None, &["edge.t/A"]),
                device("gtm3", Basis::Report, Some(4000), &["edge.t/A", "www.t/A"]),
            ],
        };
        let e = j.refusal("drain anyway").unwrap();
        assert_eq!(e.error, ErrorKind::Conflict);
        assert!(
            e.message.starts_with(
                "drain datacenter dc2 would leave 2 record(s) with no answer: edge.t/A on gtm2, gtm3 (judged from its report 4 s old); www.t/A on gtm3 (judged from its report 4 s old); nothing was changed. Give --force (force=true) to drain anyway"
            ),
            "{}",
            e.message
        );
        assert_eq!(e.errors.len(), 2);
        for d in &mut j.devices {
            d.emptied.clear();
        }
        assert!(j.refusal("drain anyway").is_none());
    }
}
