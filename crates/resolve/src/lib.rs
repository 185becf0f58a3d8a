//! The record resolution logic (spec §2): pure, no I/O.
//!
//! Given a record, the health of what its addresses depend on, and the state
//! left by its previous evaluation, [`evaluate`] decides which addresses a
//! client in each place may get, the record's status, and the events of the
//! transition. It runs when health or configuration changes, never per query:
//! the DNS path only picks among the answers decided here (see `dns`).

mod place;
mod trace;

#[cfg(test)]
mod tests;

use std::{borrow::Cow, fmt};

use serde::{Deserialize, Serialize};

pub use place::{
    NearAnswer, NearChoice, PlaceAnswers, PlaceKey, RuleAnswer, RuleChoice, Steer, nearest_for,
    place_entry, place_group, rule_for,
};
pub use trace::{AddressStep, ModeStep, Narrowed, PlaceStep, Trace};

use gtm_model::{
    compile::{AddressSpec, DcId, DcSpec, DrCondition, DrSpec, Hc, ModeSpec, Steering},
    condition::CheckRef,
    config::{Balance, Failback, OnNoHealthy},
    place::Place,
    severity::Severity,
};

/// The state of one check as this device sees it (spec §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum CheckState {
    /// No result yet since the check started or changed.
    Preparing,
    #[serde(rename = "OK")]
    Ok,
    Error,
    /// No fresh result: the check runs elsewhere and no fresh report came.
    #[serde(rename = "No Data")]
    NoData,
}

impl CheckState {
    /// The state as operators read it (seed wording), the same text as its
    /// JSON form: `Preparing`, `OK`, `Error`, `No Data`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Preparing => "Preparing",
            Self::Ok => "OK",
            Self::Error => "Error",
            Self::NoData => "No Data",
        }
    }

    /// Three-valued truth for scenarios: unknown is `None`.
    pub fn truth(self) -> Option<bool> {
        match self {
            Self::Ok => Some(true),
            Self::Error => Some(false),
            Self::Preparing | Self::NoData => None,
        }
    }
}

impl fmt::Display for CheckState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the resolver asks about health. The health engine implements it;
/// tests implement it with plain maps.
pub trait HealthView {
    /// The state of a check, bound to an address for template checks.
    fn check(&self, check: &CheckRef) -> CheckState;
    /// Whether a (user-defined) scenario is active.
    fn scenario_active(&self, name: &str) -> bool;
    /// Whether a scenario's condition has ever decided (its checks had
    /// results). Until then an address it guards is undecided, not unhealthy.
    fn scenario_decided(&self, _name: &str) -> bool {
        true
    }
    /// Whether a datacenter is reachable; addresses in a down datacenter
    /// are unhealthy.
    fn datacenter_up(&self, _dc: DcId) -> bool {
        true
    }
    /// Whether an operator took this address of this record (or its whole
    /// datacenter) out of answers (maintenance / drain).
    fn drained(&self, _record: &str, _address: &AddressSpec) -> bool {
        false
    }
}

/// Record status values of seed 000. The API and `--json` give each as a
/// stable code (`ok`, `partially_ok_record_down`, ...: the serde form) and
/// its label, the seed's exact wording ([`Status::as_str`], what people
/// read); reports between devices carry the label ([`status_label`]), and
/// either form is read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every address of the answer group is healthy.
    #[serde(alias = "OK")]
    Ok,
    /// Answered, but an address of the group is down.
    #[serde(alias = "Partially OK (a record is down)")]
    PartiallyOkRecordDown,
    /// Answered by fewer datacenters than the mode selects.
    #[serde(alias = "Partially OK")]
    PartiallyOk,
    /// Disaster Recovery is on: the DR datacenter answers.
    #[serde(alias = "DR")]
    Dr,
    /// No healthy address: the fail-safe values are answered.
    #[serde(alias = "Fail-safe")]
    FailSafe,
    /// No healthy address and no fail-safe values.
    #[serde(alias = "No healthy records")]
    NoHealthy,
}

impl Status {
    /// The seed's label, as people read it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::PartiallyOkRecordDown => "Partially OK (a record is down)",
            Self::PartiallyOk => "Partially OK",
            Self::Dr => "DR",
            Self::FailSafe => "Fail-safe",
            Self::NoHealthy => "No healthy records",
        }
    }

    /// The stable code, as the API names it (snake case).
    pub fn code(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::PartiallyOkRecordDown => "partially_ok_record_down",
            Self::PartiallyOk => "partially_ok",
            Self::Dr => "dr",
            Self::FailSafe => "fail_safe",
            Self::NoHealthy => "no_healthy",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `Option<Status>` written as its label (`"Partially OK"`) and read
/// as a label or a code: the form the reports between devices carry,
/// which devices of an earlier version read (`#[serde(with)]`).
pub mod status_label {
    use super::Status;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(status: &Option<Status>, s: S) -> Result<S::Ok, S::Error> {
        match status {
            Some(status) => s.serialize_some(status.as_str()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Status>, D::Error> {
        Option::<Status>::deserialize(d)
    }
}

/// What one evaluation leaves for the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RecordState {
    /// Per address: its last health decision, kept while its check is
    /// unknown.
    pub healthy: Box<[bool]>,
    pub dr_on: bool,
    pub status: Status,
    /// Addresses in the answer: those of a client with no particular place
    /// first, in answer order, then those only clients of some place get
    /// (topological selection), so that every address entering or leaving
    /// an answer is reported. Empty while fail-safe records or nothing is
    /// answered.
    pub active: Box<[usize]>,
}

/// What a client in some place is answered with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Answer {
    /// These addresses, in order; the balance algorithm picks among them.
    Addresses(Vec<usize>),
    FailSafe,
    Empty,
}

/// The result of evaluating a record.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub state: RecordState,
    pub answers: PlaceAnswers,
    /// The mode's decision and its condition, for the record preview
    /// (Standalone's is one text for every record: not a copy each).
    pub decision: Cow<'static, str>,
    /// DR stays on only because failback is manual: an operator's resume
    /// ends it.
    pub held: bool,
    /// Events of the transition, as on the GTM Logs screen.
    pub events: Vec<RecordEvent>,
}

/// An event of a record's transition: its text and how much it asks of an
/// operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEvent {
    pub severity: Severity,
    pub text: String,
}

impl RecordEvent {
    fn new(severity: Severity, text: String) -> Self {
        Self { severity, text }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Compared by text: the tests list a transition's events as texts.
impl PartialEq<&str> for RecordEvent {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

/// The severity of a record's new status: OK needs nothing, a reduced
/// answer (partly down, DR) is a warning, fail-safe or nothing healthy an
/// error.
pub fn status_severity(status: Status) -> Severity {
    match status {
        Status::Ok => Severity::Info,
        Status::PartiallyOkRecordDown | Status::PartiallyOk | Status::Dr => Severity::Warning,
        Status::FailSafe | Status::NoHealthy => Severity::Error,
    }
}

/// Operator input to one evaluation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Operator {
    /// Release a DR hold kept by `failback = "manual"`.
    pub resume: bool,
}

/// Evaluates one steered record (spec §2 steps 1–5).
///
/// `label` is `name/TYPE` as events show it; `prev` is the state the
/// previous evaluation returned, `None` on the first one.
///
/// Unknown is not unhealthy (seed 000: "keep the last decision"): an
/// address whose check (or scenario) has no result keeps its last decision,
/// and on a record's first evaluation, which has none, it counts as healthy,
/// so a new record answers from its Main group (every address of a
/// Standalone record, datacenters in order) and never starts in DR. An
/// address that joins a record already answering has the decision "not in
/// the answer" until its first result.
///
/// The first evaluation reports no transition except the switchovers it
/// opens (DR is on, Fail-safe records are on, No healthy records left), so
/// that every later `DR ended` or status change has its opening event.
pub fn evaluate(
    label: &str,
    steering: &Steering,
    dcs: &[DcSpec],
    health: &impl HealthView,
    prev: Option<&RecordState>,
    operator: Operator,
) -> Evaluation {
    run(label, steering, dcs, health, prev, operator, None)
}

/// [`evaluate`], writing each decision it takes into `trace` as it takes
/// it: what `explain` shows. The same code decides; only the writing is
/// added, so the explanation cannot drift from the answer.
pub fn evaluate_traced(
    label: &str,
    steering: &Steering,
    dcs: &[DcSpec],
    health: &impl HealthView,
    prev: Option<&RecordState>,
    operator: Operator,
    trace: &mut Trace,
) -> Evaluation {
    run(label, steering, dcs, health, prev, operator, Some(trace))
}

/// The evaluation itself; `trace` is `None` on every path but `explain`'s,
/// and nothing is written (or allocated) for it then.
fn run(
    label: &str,
    steering: &Steering,
    dcs: &[DcSpec],
    health: &impl HealthView,
    prev: Option<&RecordState>,
    operator: Operator,
    mut trace: Option<&mut Trace>,
) -> Evaluation {
    let addresses = &steering.addresses;
    // Step 1: health filtering. With no previous state, nothing has decided
    // against an address yet: unknown counts as healthy.
    let last = |i: usize| match prev {
        Some(p) => p.healthy.get(i).copied().unwrap_or(false),
        None => true,
    };
    // Drained (maintenance) addresses leave the answers but do not make a
    // record "down": an operator took them out on purpose.
    let drained: Vec<bool> = addresses.iter().map(|a| health.drained(label, a)).collect();
    let healthy: Vec<bool> = addresses
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let dc_up = a.dc().is_none_or(|dc| health.datacenter_up(dc));
            dc_up && !drained[i] && address_healthy(a, health, last(i))
        })
        .collect();
    if let Some(t) = trace.as_deref_mut() {
        t.addresses = addresses
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let decided = hc_decision(a, health);
                AddressStep {
                    dc_up: a.dc().is_none_or(|dc| health.datacenter_up(dc)),
                    drained: drained[i],
                    by_hc: decided.unwrap_or(last(i)),
                    kept_last: decided.is_none(),
                    healthy: healthy[i],
                }
            })
            .collect();
    }
    let usable = |i: usize| healthy[i];

    // Step 2: mode.
    let mut dr_on = false;
    let mut held_by_failback = false;
    let decision;
    let mut group: Vec<usize> = (0..addresses.len())
        .filter(|&i| addresses[i].hc != Hc::Disabled)
        .collect();
    let mut partial_dcs = false;
    let candidates: Vec<usize> = match &steering.mode {
        ModeSpec::Standalone => {
            decision = Cow::Borrowed("Standalone: every healthy address");
            group.iter().copied().filter(|&i| usable(i)).collect()
        }
        ModeSpec::DisasterRecovery(spec) => {
            let DrSpec {
                main,
                dr,
                condition,
                on_no_healthy,
                failback,
            } = &**spec;
            let in_dc = |dc: DcId| -> Vec<usize> {
                group
                    .iter()
                    .copied()
                    .filter(|&i| addresses[i].dc() == Some(dc))
                    .collect()
            };
            let (main_group, dr_group) = (in_dc(*main), in_dc(*dr));
            let main_healthy = main_group.iter().any(|&i| usable(i));
            let (holds, why) = match condition {
                DrCondition::Automatic => (
                    !main_healthy,
                    "automatic (when no healthy primary records left)".to_string(),
                ),
                DrCondition::Scenario(name) => {
                    let active = scenario_active(health, name);
                    (
                        active || (*on_no_healthy && !main_healthy),
                        format!(
                            "scenario {name} ({}){}",
                            if active { "active" } else { "passive" },
                            if *on_no_healthy {
                                ", or no healthy primary records"
                            } else {
                                ""
                            }
                        ),
                    )
                }
            };
            let was_on = prev.is_some_and(|p| p.dr_on);
            let held = was_on && !holds && *failback == Failback::Manual && !operator.resume;
            dr_on = holds || held;
            held_by_failback = held;
            if let Some(t) = trace.as_deref_mut() {
                t.mode = ModeStep::DisasterRecovery {
                    main: *main,
                    dr: *dr,
                    main_healthy,
                    condition: why.clone(),
                    holds,
                    held,
                    dr_on,
                };
            }
            let main_name = &dcs[*main].name;
            let dr_name = &dcs[*dr].name;
            decision = Cow::Owned(match (dr_on, held) {
                (true, true) => format!(
                    "DR on: held by manual failback until an operator resumes (condition {why} has cleared); answering from {dr_name}"
                ),
                (true, false) => format!("DR on: condition {why} holds; answering from {dr_name}"),
                (false, _) => {
                    format!("Main: condition {why} does not hold; answering from {main_name}")
                }
            });
            group = if dr_on { dr_group } else { main_group };
            group.iter().copied().filter(|&i| usable(i)).collect()
        }
        ModeSpec::Datacenter { order, count } => {
            let with_healthy: Vec<DcId> = order
                .iter()
                .copied()
                .filter(|&dc| {
                    group
                        .iter()
                        .any(|&i| addresses[i].dc() == Some(dc) && usable(i))
                })
                .collect();
            let with_addresses = order
                .iter()
                .filter(|&&dc| group.iter().any(|&i| addresses[i].dc() == Some(dc)))
                .count();
            partial_dcs = with_healthy.len() < with_addresses;
            let chosen: Vec<DcId> = with_healthy.iter().copied().take(*count as usize).collect();
            if let Some(t) = trace.as_deref_mut() {
                t.mode = ModeStep::Datacenter {
                    order: order.to_vec(),
                    with_healthy: with_healthy.clone(),
                    with_addresses,
                    count: *count,
                    chosen: chosen.clone(),
                };
            }
            decision = Cow::Owned(format!(
                "Datacenter: {} of {} datacenters with a healthy address, selecting up to {}: {}",
                with_healthy.len(),
                with_addresses,
                count,
                names(dcs, &chosen)
            ));
            group = in_dcs(&group, addresses, &chosen);
            group.iter().copied().filter(|&i| usable(i)).collect()
        }
    };

    if let Some(t) = trace.as_deref_mut() {
        t.group = group.clone();
        t.candidates = candidates.clone();
    }

    // Step 4: status.
    let status = if candidates.is_empty() {
        if steering.fail_safe().is_empty() {
            Status::NoHealthy
        } else {
            Status::FailSafe
        }
    } else if dr_on {
        Status::Dr
    } else if partial_dcs {
        Status::PartiallyOk
    } else if group.iter().any(|&i| !usable(i) && !drained[i]) {
        Status::PartiallyOkRecordDown
    } else {
        Status::Ok
    };

    // Step 3: the answer for each place.
    let answers = place::answers(
        steering,
        dcs,
        &candidates,
        |place| match (&steering.mode, place) {
            // Topological selection orders datacenters nearest first.
            (ModeSpec::Datacenter { order, count }, Some(place)) if steering.topology => {
                let nearest = nearest_first(order, dcs, place);
                let chosen: Vec<DcId> = nearest
                    .into_iter()
                    .filter(|&dc| {
                        (0..addresses.len()).any(|i| addresses[i].dc() == Some(dc) && usable(i))
                    })
                    .take(*count as usize)
                    .collect();
                let list = in_dcs(&candidates_all(addresses, &healthy), addresses, &chosen);
                (list, Some(chosen))
            }
            _ => (candidates.clone(), None),
        },
        trace.map(|t| &mut t.places),
    );

    let state = RecordState {
        healthy: healthy.into_boxed_slice(),
        dr_on,
        status,
        // What DNS answers: with no candidate, nothing, the fail-safe
        // records (not addresses), or every address (on_no_healthy = all).
        active: answered(&answers).into_boxed_slice(),
    };
    let events = match prev {
        Some(p) => transition(label, steering, p, &state),
        None => opening(label, &state),
    };
    Evaluation {
        state,
        answers,
        decision,
        held: held_by_failback,
        events,
    }
}

/// Every address some client is answered with, the default answer first.
pub fn answered(answers: &PlaceAnswers) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let default = std::iter::once(answers.default_answer());
    for group in default.chain(answers.groups.iter()) {
        if let Answer::Addresses(list) = group {
            for &i in list {
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
    }
    out
}

/// An address's health from its HC field; `last` is its last decision,
/// kept while its check or scenario has no result (seed 000).
fn address_healthy(a: &AddressSpec, health: &impl HealthView, last: bool) -> bool {
    hc_decision(a, health).unwrap_or(last)
}

/// What an address's HC field decides now; `None` while its check or
/// scenario has no result (then its last decision stands).
fn hc_decision(a: &AddressSpec, health: &impl HealthView) -> Option<bool> {
    match &a.hc {
        Hc::Static => Some(true),
        Hc::Disabled => Some(false),
        Hc::Scenario(name) if health.scenario_decided(name) || is_builtin(name) => {
            Some(scenario_active(health, name))
        }
        Hc::Scenario(_) => None,
        Hc::Check(check) => health.check(check).truth(),
    }
}

fn is_builtin(name: &str) -> bool {
    name == "always" || name == "never"
}

fn scenario_active(health: &impl HealthView, name: &str) -> bool {
    match name {
        "always" => true,
        "never" => false,
        _ => health.scenario_active(name),
    }
}

fn candidates_all(addresses: &[AddressSpec], healthy: &[bool]) -> Vec<usize> {
    (0..addresses.len()).filter(|&i| healthy[i]).collect()
}

/// The addresses of `from` in the datacenters `dcs`, datacenter by
/// datacenter in that order.
fn in_dcs(from: &[usize], addresses: &[AddressSpec], dcs: &[DcId]) -> Vec<usize> {
    dcs.iter()
        .flat_map(|&dc| {
            from.iter()
                .copied()
                .filter(move |&i| addresses[i].dc() == Some(dc))
        })
        .collect()
}

fn nearest_first(order: &[DcId], dcs: &[DcSpec], place: &Place) -> Vec<DcId> {
    let rank = |dc: DcId| {
        let d = &dcs[dc];
        if place.country.is_some() && d.country == place.country {
            0
        } else if place.continent.is_some() && d.continent == place.continent {
            1
        } else {
            2
        }
    };
    let mut sorted = order.to_vec();
    sorted.sort_by_key(|&dc| rank(dc)); // stable: dc_order breaks ties
    sorted
}

fn names(dcs: &[DcSpec], ids: &[DcId]) -> String {
    if ids.is_empty() {
        return "none".to_string();
    }
    ids.iter()
        .map(|&d| dcs[d].name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The events of a first evaluation: only the switchovers it starts in, the
/// opening events of whatever later ends them. Addresses entering the
/// answer are not listed (every address of every record would be, at each
/// start-up).
fn opening(label: &str, state: &RecordState) -> Vec<RecordEvent> {
    let mut events = Vec::new();
    if state.dr_on {
        events.push(dr_on(label));
    }
    events.extend(fallen_back(label, state.status));
    events
}

fn dr_on(label: &str) -> RecordEvent {
    RecordEvent::new(Severity::Warning, format!("{label}: DR is on"))
}

/// The event of a status that answers only the last resort, if it is one.
fn fallen_back(label: &str, status: Status) -> Option<RecordEvent> {
    let text = match status {
        Status::FailSafe => "Fail-safe records are on",
        Status::NoHealthy => "No healthy records left",
        _ => return None,
    };
    Some(RecordEvent::new(
        Severity::Error,
        format!("{label}: {text}"),
    ))
}

/// The events between two states, in the order an operator reads them.
fn transition(
    label: &str,
    steering: &Steering,
    prev: &RecordState,
    next: &RecordState,
) -> Vec<RecordEvent> {
    let mut events = Vec::new();
    let addr = |i: usize| steering.addresses[i].display();
    for &i in prev.active.iter().filter(|i| !next.active.contains(i)) {
        events.push(RecordEvent::new(
            Severity::Warning,
            format!("{label}: {} is disabled", addr(i)),
        ));
    }
    if prev.dr_on && !next.dr_on {
        events.push(RecordEvent::new(
            Severity::Info,
            format!("{label}: DR ended"),
        ));
    }
    if !prev.dr_on && next.dr_on {
        events.push(dr_on(label));
    }
    for &i in next.active.iter().filter(|i| !prev.active.contains(i)) {
        events.push(RecordEvent::new(
            Severity::Info,
            format!("{label}: {} is enabled", addr(i)),
        ));
    }
    if next.status != prev.status {
        events.extend(fallen_back(label, next.status));
    }
    events
}

/// Removes addresses a balance algorithm never answers: weight 0 answers
/// only when every candidate has weight 0 (seed 002).
pub(crate) fn balance_filter(steering: &Steering, candidates: Vec<usize>) -> Vec<usize> {
    if steering.balance == Balance::Weighted
        && candidates.iter().any(|&i| steering.addresses[i].weight > 0)
    {
        candidates
            .into_iter()
            .filter(|&i| steering.addresses[i].weight > 0)
            .collect()
    } else {
        candidates
    }
}

/// The answer when nothing is healthy.
pub(crate) fn no_candidate_answer(steering: &Steering) -> Answer {
    if !steering.fail_safe().is_empty() {
        Answer::FailSafe
    } else {
        match steering.on_no_healthy {
            OnNoHealthy::Empty => Answer::Empty,
            OnNoHealthy::All => Answer::Addresses(
                (0..steering.addresses.len())
                    .filter(|&i| steering.addresses[i].hc != Hc::Disabled)
                    .collect(),
            ),
        }
    }
}
