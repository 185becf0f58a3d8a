//! Table-driven tests of the record resolution logic (spec §1 "HC field",
//! spec §2; seeds 000 and 001; seed 002 "How an answer is picked").
//!
//! Every record is built by compiling a TOML snippet with the real
//! configuration path (`model::parse` + `model::compile`). Health is given
//! as a short text read by [`TestHealth::parse`]:
//!
//! - `web@192.0.2.10=ok` (also `error`, `preparing`, `nodata`): the state
//!   of a check bound to an address; `maint=ok` for a check with no address;
//!   a check not named is `Preparing` (no result yet);
//! - `scenario:flag=on` (or `off`): a scenario; not named = passive;
//!   `scenario:flag=unknown`: its condition has never decided;
//! - `dc:dc2=down`: a datacenter none of whose devices is reachable.
//!
//! A row is a sequence of evaluations: the `state` of one is the `prev` of
//! the next, so rows test transitions and their events. Each row names the
//! sentence of the spec or seed it tests in its `seed` field.

use std::collections::{HashMap, HashSet};

use super::*;
use gtm_model::{
    Compiled, compile,
    compile::{Content, DcId, Steering},
    condition::CheckRef,
    parse,
    place::{Continent, Country, Place},
};

// ---------------------------------------------------------------------------
// Health as the tests see it.

#[derive(Debug, Default)]
struct TestHealth {
    checks: HashMap<CheckRef, CheckState>,
    scenarios: HashMap<String, Option<bool>>,
    down: HashSet<DcId>,
}

impl HealthView for TestHealth {
    fn check(&self, check: &CheckRef) -> CheckState {
        self.checks
            .get(check)
            .copied()
            .unwrap_or(CheckState::Preparing)
    }

    fn scenario_active(&self, name: &str) -> bool {
        self.scenarios.get(name).copied().flatten().unwrap_or(false)
    }

    fn scenario_decided(&self, name: &str) -> bool {
        self.scenarios.get(name).is_none_or(|s| s.is_some())
    }

    fn datacenter_up(&self, dc: DcId) -> bool {
        !self.down.contains(&dc)
    }
}

impl TestHealth {
    fn parse(text: &str, dcs: &[DcSpec]) -> Self {
        let mut h = Self::default();
        for token in text.split_whitespace() {
            let (key, value) = token
                .split_once('=')
                .unwrap_or_else(|| panic!("health token {token:?} needs key=value"));
            if let Some(name) = key.strip_prefix("scenario:") {
                let on = match value {
                    "on" => Some(true),
                    "off" => Some(false),
                    "unknown" => None,
                    _ => panic!("scenario state {value:?} is not on/off/unknown"),
                };
                h.scenarios.insert(name.to_string(), on);
            } else if let Some(name) = key.strip_prefix("dc:") {
                let id = dcs
                    .iter()
                    .position(|d| d.name == name)
                    .unwrap_or_else(|| panic!("unknown datacenter {name}"));
                match value {
                    "down" => {
                        h.down.insert(id);
                    }
                    "up" => {
                        h.down.remove(&id);
                    }
                    _ => panic!("datacenter state {value:?} is not up/down"),
                }
            } else {
                let state = match value {
                    "ok" => CheckState::Ok,
                    "error" => CheckState::Error,
                    "preparing" => CheckState::Preparing,
                    "nodata" => CheckState::NoData,
                    _ => panic!("check state {value:?} is not ok/error/preparing/nodata"),
                };
                let check = match key.split_once('@') {
                    Some((name, ip)) => CheckRef {
                        name: name.to_string(),
                        address: Some(ip.parse().expect("an IP after @")),
                    },
                    None => CheckRef {
                        name: key.to_string(),
                        address: None,
                    },
                };
                h.checks.insert(check, state);
            }
        }
        h
    }
}

// ---------------------------------------------------------------------------
// Records, compiled from TOML through the real configuration path.

const PRELUDE: &str = r#"
[[datacenter]]
name = "dc1"
country = "DE"
continent = "EU"

[[datacenter]]
name = "dc2"
country = "US"
continent = "NA"

[[datacenter]]
name = "dc3"
country = "JP"
continent = "AS"

[[check]]
name = "web"
type = "http"

[[check]]
name = "maint"
type = "manual"

[[scenario]]
name = "dc1-down"
condition = "maint"

[[scenario]]
name = "flag"
condition = "maint"
"#;

/// Compiles a domain `example.test` with `domain` keys and one
/// `[[domain.record]]` per entry of `records` (each holds its own `name`
/// and `type`).
fn compile_text(domain: &str, records: &[String]) -> Compiled {
    let mut text = format!(
        "{PRELUDE}\n[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n{domain}\n"
    );
    for r in records {
        text.push_str(&format!("\n[[domain.record]]\n{r}\n"));
    }
    let config = parse(&text).unwrap_or_else(|e| panic!("parse: {e}\n{text}"));
    compile(&config).unwrap_or_else(|e| panic!("compile: {e}\n{text}"))
}

struct Fixture {
    compiled: Compiled,
    index: usize,
}

impl Fixture {
    /// One A record `www` with the keys `record`.
    fn new(domain: &str, record: &str) -> Self {
        let compiled = compile_text(domain, &[format!("name = \"www\"\ntype = \"A\"\n{record}")]);
        Self { compiled, index: 0 }
    }

    fn steering(&self) -> &Steering {
        match &self.compiled.zones[0].records[self.index].content {
            Content::Steered(s) => s,
            Content::Static(_) | Content::Alias(_) => panic!("record is not steered"),
        }
    }

    fn label(&self) -> String {
        self.compiled.zones[0].records[self.index].label()
    }

    /// Every row also evaluates traced (what `explain` reads): the trace
    /// changes no decision, and says what was decided.
    fn eval(&self, health: &str, prev: Option<&RecordState>, resume: bool) -> Evaluation {
        let dcs = &self.compiled.datacenters;
        let h = TestHealth::parse(health, dcs);
        let (label, steering) = (self.label(), self.steering());
        let eval = evaluate(&label, steering, dcs, &h, prev, Operator { resume });
        let mut trace = Trace::default();
        let traced = evaluate_traced(
            &label,
            steering,
            dcs,
            &h,
            prev,
            Operator { resume },
            &mut trace,
        );
        assert_eq!(traced.state, eval.state, "{label}: traced state");
        assert_eq!(traced.answers, eval.answers, "{label}: traced answers");
        assert_eq!(traced.decision, eval.decision, "{label}: traced decision");
        assert_eq!(traced.held, eval.held, "{label}: traced hold");
        assert_eq!(traced.events, eval.events, "{label}: traced events");
        let healthy: Vec<bool> = trace.addresses.iter().map(|a| a.healthy).collect();
        assert_eq!(*healthy, *eval.state.healthy, "{label}: traced health");
        assert_eq!(
            trace.places.first().map(|p| &p.answer),
            Some(eval.answers.default_answer()),
            "{label}: the trace's first place is the default answer"
        );
        for p in &trace.places {
            assert!(
                eval.answers.groups.contains(&p.answer),
                "{label}: a traced place's answer is one of the record's"
            );
        }
        eval
    }

    /// An answer as text: the addresses as operators read them, or
    /// `fail-safe` / `empty`.
    fn show(&self, answer: &Answer) -> String {
        match answer {
            Answer::Addresses(list) => list
                .iter()
                .map(|&i| self.steering().addresses[i].display())
                .collect::<Vec<_>>()
                .join(" "),
            Answer::FailSafe => "fail-safe".to_string(),
            Answer::Empty => "empty".to_string(),
        }
    }
}

/// An event of `www.example.test/A`, in its exact text.
macro_rules! ev {
    ($text:literal) => {
        concat!("www.example.test/A: ", $text)
    };
}

// ---------------------------------------------------------------------------
// Sequences of evaluations.

struct Step {
    health: String,
    resume: bool,
    status: Status,
    dr: bool,
    /// The default answer (a client with no particular place).
    answer: &'static str,
    events: Vec<&'static str>,
    decision: Option<&'static str>,
}

fn step(
    health: impl Into<String>,
    status: Status,
    answer: &'static str,
    events: &[&'static str],
) -> Step {
    Step {
        health: health.into(),
        resume: false,
        status,
        dr: false,
        answer,
        events: events.to_vec(),
        decision: None,
    }
}

impl Step {
    /// DR is on after this step.
    fn dr(mut self) -> Self {
        self.dr = true;
        self
    }

    /// The operator resumes (manual failback) in this step.
    fn resume(mut self) -> Self {
        self.resume = true;
        self
    }

    /// The preview's decision text contains this.
    fn decision(mut self, text: &'static str) -> Self {
        self.decision = Some(text);
        self
    }
}

struct Row {
    seed: &'static str,
    domain: String,
    record: String,
    steps: Vec<Step>,
}

fn row(
    seed: &'static str,
    domain: impl Into<String>,
    record: impl Into<String>,
    steps: Vec<Step>,
) -> Row {
    Row {
        seed,
        domain: domain.into(),
        record: record.into(),
        steps,
    }
}

/// Runs every row and reports every mismatch at once.
fn run(rows: Vec<Row>) -> usize {
    let mut failures = Vec::new();
    let count = rows.len();
    for row in rows {
        let fx = Fixture::new(&row.domain, &row.record);
        assert_eq!(fx.label(), "www.example.test/A");
        let mut prev: Option<RecordState> = None;
        for (n, s) in row.steps.iter().enumerate() {
            let e = fx.eval(&s.health, prev.as_ref(), s.resume);
            let mut wrong = Vec::new();
            if e.state.status != s.status {
                wrong.push(format!(
                    "status {:?}, want {:?}",
                    e.state.status.as_str(),
                    s.status.as_str()
                ));
            }
            let answer = fx.show(e.answers.default_answer());
            if answer != s.answer {
                wrong.push(format!("answer {answer:?}, want {:?}", s.answer));
            }
            if e.state.dr_on != s.dr {
                wrong.push(format!("dr_on {}, want {}", e.state.dr_on, s.dr));
            }
            if e.events != s.events {
                wrong.push(format!("events {:?}, want {:?}", e.events, s.events));
            }
            if let Some(d) = s.decision
                && !e.decision.contains(d)
            {
                wrong.push(format!("decision {:?} lacks {d:?}", e.decision));
            }
            // A first evaluation reports only the switchovers it starts in.
            let opening = [
                ev!("DR is on"),
                ev!("Fail-safe records are on"),
                ev!("No healthy records left"),
            ];
            if n == 0 && e.events.iter().any(|t| !opening.contains(&t.as_str())) {
                wrong.push("a transition on the first evaluation".to_string());
            }
            // `active` is the default answer, then what only some places get:
            // what DNS answers (every address, with on_no_healthy = all and
            // nothing healthy), and nothing when it answers no address.
            match (e.answers.default_answer(), e.state.status) {
                (Answer::Addresses(a), st) if st != Status::FailSafe => {
                    let mut all: Vec<usize> = a.clone();
                    for g in &e.answers.groups {
                        if let Answer::Addresses(list) = g {
                            all.extend(list.iter().filter(|i| !a.contains(i)));
                        }
                    }
                    all.sort();
                    all.dedup();
                    let mut active = e.state.active.clone();
                    if !active.starts_with(a) || {
                        active.sort();
                        *active != *all
                    } {
                        wrong.push(format!(
                            "active {:?} is not the default answer {a:?} then the others",
                            e.state.active
                        ));
                    }
                }
                _ => {
                    if !e.state.active.is_empty() {
                        wrong.push(format!(
                            "active {:?} while no address is answered",
                            e.state.active
                        ));
                    }
                }
            }
            if !wrong.is_empty() {
                failures.push(format!(
                    "[{}] step {} (health {:?}): {}\n    decision: {}",
                    row.seed,
                    n + 1,
                    s.health,
                    wrong.join("; "),
                    e.decision
                ));
            }
            prev = Some(e.state);
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    count
}

// Shorthands for the rows.
use Status::{Dr, FailSafe, NoHealthy, Ok as OK, PartiallyOk, PartiallyOkRecordDown as DOWN};

const TWO_CHECKED: &str = r#"addresses = [
  { ip = "192.0.2.10", hc = "check:web" },
  { ip = "192.0.2.11", hc = "check:web" },
]"#;
const BOTH_OK: &str = "web@192.0.2.10=ok web@192.0.2.11=ok";
const BOTH_DOWN: &str = "web@192.0.2.10=error web@192.0.2.11=error";

const DR_DOMAIN: &str = "mode = \"disaster-recovery\"\nmain_dc = \"dc1\"\ndr_dc = \"dc2\"";
/// Main addresses checked, DR addresses static.
const DR_ADDRESSES: &str = r#"addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.11", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.10", dc = "dc2" },
  { ip = "198.51.100.11", dc = "dc2" },
]"#;
/// Every address checked.
const DR_CHECKED: &str = r#"addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.11", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.10", dc = "dc2", hc = "check:web" },
  { ip = "198.51.100.11", dc = "dc2", hc = "check:web" },
]"#;
const DR_UP: &str = "web@198.51.100.10=ok web@198.51.100.11=ok";
const DR_DOWN_H: &str = "web@198.51.100.10=error web@198.51.100.11=error";

const DC_ADDRESSES: &str = r#"addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.11", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.10", dc = "dc2", hc = "check:web" },
  { ip = "198.51.100.11", dc = "dc2", hc = "check:web" },
  { ip = "203.0.113.10", dc = "dc3", hc = "check:web" },
]"#;
const DC1_OK: &str = "web@192.0.2.10=ok web@192.0.2.11=ok";
const DC1_DOWN: &str = "web@192.0.2.10=error web@192.0.2.11=error";
const DC2_OK: &str = "web@198.51.100.10=ok web@198.51.100.11=ok";
const DC2_DOWN: &str = "web@198.51.100.10=error web@198.51.100.11=error";
const DC3_OK: &str = "web@203.0.113.10=ok";
const DC3_DOWN: &str = "web@203.0.113.10=error";

fn h(parts: &[&str]) -> String {
    parts.join(" ")
}

fn dc_domain(count: usize) -> String {
    format!(
        "mode = \"datacenter\"\ndc_order = [\"dc2\", \"dc1\", \"dc3\"]\ndcs_to_select = {count}"
    )
}

// ---------------------------------------------------------------------------
// HC field (spec §1; seed 000).

#[test]
fn hc_field() {
    let n = run(vec![
        row(
            "000: Static (default, always in the answer); misconception 1: a Static address always stays in the answer",
            "",
            r#"addresses = [ { ip = "192.0.2.10" }, { ip = "192.0.2.11", hc = "static" } ]"#,
            vec![
                step("", OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    "web@192.0.2.10=error web@192.0.2.11=error maint=error scenario:flag=off",
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[],
                ),
            ],
        ),
        row(
            "000: Disabled (in no answer)",
            "",
            r#"addresses = [ { ip = "192.0.2.10", hc = "disabled" }, { ip = "192.0.2.11" } ]"#,
            vec![
                step("", OK, "192.0.2.11", &[]),
                step(
                    "scenario:flag=on maint=ok web@192.0.2.10=ok",
                    OK,
                    "192.0.2.11",
                    &[],
                ),
            ],
        ),
        row(
            "000: an address with HC Scenario selected enters the answer only while the scenario is active; \
             an address whose scenario is passive leaves the candidate list",
            "",
            r#"addresses = [ { ip = "192.0.2.10", hc = "scenario:flag" }, { ip = "192.0.2.11" } ]"#,
            vec![
                step("", DOWN, "192.0.2.11", &[]),
                step(
                    "scenario:flag=on",
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[ev!("192.0.2.10 is enabled")],
                ),
                step(
                    "scenario:flag=off",
                    DOWN,
                    "192.0.2.11",
                    &[ev!("192.0.2.10 is disabled")],
                ),
            ],
        ),
        row(
            "spec §1: check:NAME — a candidate while that check, probed against this address, is OK; \
             002: records whose health check is failing are left out",
            "",
            TWO_CHECKED,
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    "web@192.0.2.10=error web@192.0.2.11=ok",
                    DOWN,
                    "192.0.2.11",
                    &[ev!("192.0.2.10 is disabled")],
                ),
                step(
                    BOTH_OK,
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[ev!("192.0.2.10 is enabled")],
                ),
            ],
        ),
        row(
            "000 misconception 2: in the Preparing or No Data status ... the address stays in its previous state",
            "",
            TWO_CHECKED,
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    "web@192.0.2.10=nodata web@192.0.2.11=ok",
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[],
                ),
                step(
                    "web@192.0.2.10=preparing web@192.0.2.11=ok",
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[],
                ),
                step(
                    "web@192.0.2.10=error web@192.0.2.11=ok",
                    DOWN,
                    "192.0.2.11",
                    &[ev!("192.0.2.10 is disabled")],
                ),
                step(
                    "web@192.0.2.10=nodata web@192.0.2.11=ok",
                    DOWN,
                    "192.0.2.11",
                    &[],
                ),
                step(
                    "web@192.0.2.10=preparing web@192.0.2.11=ok",
                    DOWN,
                    "192.0.2.11",
                    &[],
                ),
                step(
                    BOTH_OK,
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[ev!("192.0.2.10 is enabled")],
                ),
            ],
        ),
        row(
            "000 misconception 2: a check whose result is unknown does not remove the address — a new \
             record has no last decision: its addresses answer as if healthy until a result decides (first result OK)",
            "",
            TWO_CHECKED,
            vec![
                step("", OK, "192.0.2.10 192.0.2.11", &[]),
                step("web@192.0.2.11=ok", OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    "web@192.0.2.10=preparing web@192.0.2.11=ok",
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[],
                ),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
            ],
        ),
        row(
            "000 misconception 2: a new record's address answers until its first result decides (first result Error)",
            "",
            TWO_CHECKED,
            vec![
                step(
                    "web@192.0.2.10=nodata web@192.0.2.11=ok",
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[],
                ),
                step(
                    "web@192.0.2.10=error web@192.0.2.11=ok",
                    DOWN,
                    "192.0.2.11",
                    &[ev!("192.0.2.10 is disabled")],
                ),
                step(
                    "web@192.0.2.10=nodata web@192.0.2.11=ok",
                    DOWN,
                    "192.0.2.11",
                    &[],
                ),
            ],
        ),
        row(
            "000 step 2: a scenario in Preparing ... keeps its last decision — a new record's address on a \
             scenario that has not decided answers as if healthy, then follows the scenario",
            "",
            r#"addresses = [ { ip = "192.0.2.10", hc = "scenario:flag" }, { ip = "192.0.2.11" } ]"#,
            vec![
                step("scenario:flag=unknown", OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    "scenario:flag=off",
                    DOWN,
                    "192.0.2.11",
                    &[ev!("192.0.2.10 is disabled")],
                ),
                step("scenario:flag=unknown", DOWN, "192.0.2.11", &[]),
            ],
        ),
        row(
            "spec §1: manual check (its state is set by an operator) as check:NAME",
            "",
            r#"addresses = [ { ip = "192.0.2.10", hc = "check:maint" }, { ip = "192.0.2.11" } ]"#,
            vec![
                step("maint=ok", OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    "maint=error",
                    DOWN,
                    "192.0.2.11",
                    &[ev!("192.0.2.10 is disabled")],
                ),
            ],
        ),
        row(
            "000 step 4: in Standalone mode, the healthy addresses of the single group are taken",
            "",
            r#"addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.10", dc = "dc2", hc = "check:web" },
  { ip = "203.0.113.10", dc = "dc3", hc = "check:web" },
]"#,
            vec![
                step(
                    "web@192.0.2.10=ok web@198.51.100.10=ok web@203.0.113.10=ok",
                    OK,
                    "192.0.2.10 198.51.100.10 203.0.113.10",
                    &[],
                ),
                step(
                    "web@192.0.2.10=ok web@198.51.100.10=error web@203.0.113.10=ok",
                    DOWN,
                    "192.0.2.10 203.0.113.10",
                    &[ev!("198.51.100.10 is disabled")],
                ),
            ],
        ),
    ]);
    assert_eq!(n, 10);
}

/// 000 misconception 2 ("the address stays in its previous state"): an
/// address added to a record that is already answering was not in the
/// answer; it stays out until its first result decides.
#[test]
fn an_address_joining_a_live_record_waits_for_its_first_result() {
    let fx = Fixture::new("", TWO_CHECKED);
    // The previous configuration had only 192.0.2.10 (the engine remaps a
    // record's state by address: a new address has no entry).
    let prev = RecordState {
        healthy: Box::new([true]),
        dr_on: false,
        status: Status::Ok,
        active: Box::new([0]),
    };
    let e = fx.eval("web@192.0.2.10=ok", Some(&prev), false);
    assert_eq!(fx.show(e.answers.default_answer()), "192.0.2.10");
    assert!(e.events.is_empty(), "{:?}", e.events);
    let next = fx.eval(BOTH_OK, Some(&e.state), false);
    assert_eq!(
        fx.show(next.answers.default_answer()),
        "192.0.2.10 192.0.2.11"
    );
    assert_eq!(next.events, [ev!("192.0.2.11 is enabled")]);
}

// ---------------------------------------------------------------------------
// Disaster Recovery (spec §2; seeds 000 and 001).

#[test]
fn disaster_recovery() {
    let main_up_dr_on = [
        ev!("192.0.2.10 is disabled"),
        ev!("192.0.2.11 is disabled"),
        ev!("DR is on"),
        ev!("198.51.100.10 is enabled"),
        ev!("198.51.100.11 is enabled"),
    ];
    let back_to_main = [
        ev!("198.51.100.10 is disabled"),
        ev!("198.51.100.11 is disabled"),
        ev!("DR ended"),
        ev!("192.0.2.10 is enabled"),
        ev!("192.0.2.11 is enabled"),
    ];
    let scenario =
        |extra: &str| format!("dr_condition = \"scenario:dc1-down\"\n{extra}\n{DR_ADDRESSES}");
    let n = run(vec![
        row(
            "001: DNS Service normally answers only with the healthy addresses of the Main DC (active-passive); \
             misconception: DR DC addresses are not in the answer under normal conditions",
            DR_DOMAIN,
            DR_ADDRESSES,
            vec![step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]).decision("Main")],
        ),
        row(
            "001: if only some of the addresses in the Main DC are unhealthy, no switchover is made; \
             ... Partially OK (a record is down)",
            DR_DOMAIN,
            DR_ADDRESSES,
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    "web@192.0.2.10=error web@192.0.2.11=ok",
                    DOWN,
                    "192.0.2.11",
                    &[ev!("192.0.2.10 is disabled")],
                ),
            ],
        ),
        row(
            "001: Automatic — the switchover to DR is made when no healthy address remains in the Main DC; \
             at the first evaluation in which the condition is cleared, the answers are given from the Main DC again",
            DR_DOMAIN,
            format!("dr_condition = \"automatic\"\n{DR_ADDRESSES}"),
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(BOTH_DOWN, Dr, "198.51.100.10 198.51.100.11", &main_up_dr_on).dr(),
                step(
                    "web@192.0.2.10=ok web@192.0.2.11=error",
                    DOWN,
                    "192.0.2.10",
                    &[
                        ev!("198.51.100.10 is disabled"),
                        ev!("198.51.100.11 is disabled"),
                        ev!("DR ended"),
                        ev!("192.0.2.10 is enabled"),
                    ],
                ),
            ],
        ),
        row(
            "001: the switchover is made while the scenario is active (even with a healthy Main DC); \
             000: while the selected scenario is active ... answers are given from the DR DC",
            DR_DOMAIN,
            scenario(""),
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    h(&[BOTH_OK, "scenario:dc1-down=on"]),
                    Dr,
                    "198.51.100.10 198.51.100.11",
                    &main_up_dr_on,
                )
                .dr()
                .decision("scenario dc1-down (active)"),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &back_to_main),
            ],
        ),
        row(
            "000 TR7: Disaster Recovery on No Healthy Records (on by default) switches to the DR DC when no \
             healthy address remains in the Main DC, even if the scenario is not active",
            DR_DOMAIN,
            scenario(""),
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    h(&[BOTH_DOWN, "scenario:dc1-down=off"]),
                    Dr,
                    "198.51.100.10 198.51.100.11",
                    &main_up_dr_on,
                )
                .dr(),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &back_to_main),
            ],
        ),
        row(
            "spec §2: scenario:NAME = the scenario is active, or (with DR-on-no-healthy) no healthy Main — \
             with dr_on_no_healthy = false only the scenario switches",
            DR_DOMAIN,
            scenario("dr_on_no_healthy = false"),
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    BOTH_DOWN,
                    NoHealthy,
                    "empty",
                    &[
                        ev!("192.0.2.10 is disabled"),
                        ev!("192.0.2.11 is disabled"),
                        ev!("No healthy records left"),
                    ],
                ),
                step(
                    h(&[BOTH_DOWN, "scenario:dc1-down=on"]),
                    Dr,
                    "198.51.100.10 198.51.100.11",
                    &[
                        ev!("DR is on"),
                        ev!("198.51.100.10 is enabled"),
                        ev!("198.51.100.11 is enabled"),
                    ],
                )
                .dr(),
            ],
        ),
        row(
            "spec §6 failback = manual: DR stays on after the condition clears until an operator resumes",
            DR_DOMAIN,
            format!("failback = \"manual\"\n{DR_ADDRESSES}"),
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(BOTH_DOWN, Dr, "198.51.100.10 198.51.100.11", &main_up_dr_on).dr(),
                step(BOTH_OK, Dr, "198.51.100.10 198.51.100.11", &[])
                    .dr()
                    .decision("held by manual failback"),
                step(BOTH_OK, Dr, "198.51.100.10 198.51.100.11", &[]).dr(),
                // Resuming while the condition holds does not end DR.
                step(BOTH_DOWN, Dr, "198.51.100.10 198.51.100.11", &[])
                    .dr()
                    .resume(),
                step(BOTH_OK, Dr, "198.51.100.10 198.51.100.11", &[]).dr(),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &back_to_main).resume(),
            ],
        ),
        row(
            "spec §6 failback = auto (explicit): returns on the first evaluation in which the condition clears",
            DR_DOMAIN,
            format!("failback = \"auto\"\n{DR_ADDRESSES}"),
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(BOTH_DOWN, Dr, "198.51.100.10 198.51.100.11", &main_up_dr_on).dr(),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &back_to_main),
            ],
        ),
        row(
            "001: in DR, if there is no healthy address in the DR DC either, Fail-Safe Records are returned; \
             000 status DR: in Disaster Recovery mode, the answers are given from the DR DC",
            DR_DOMAIN,
            format!("fail_safe = [\"192.0.2.250\"]\n{DR_CHECKED}"),
            vec![
                step(h(&[BOTH_OK, DR_UP]), OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    h(&[BOTH_DOWN, DR_DOWN_H]),
                    FailSafe,
                    "fail-safe",
                    &[
                        ev!("192.0.2.10 is disabled"),
                        ev!("192.0.2.11 is disabled"),
                        ev!("DR is on"),
                        ev!("Fail-safe records are on"),
                    ],
                )
                .dr(),
                step(
                    h(&[BOTH_DOWN, "web@198.51.100.10=ok web@198.51.100.11=error"]),
                    Dr,
                    "198.51.100.10",
                    &[ev!("198.51.100.10 is enabled")],
                )
                .dr(),
            ],
        ),
        row(
            "001: if there are no Fail-Safe Records, the record passes to the No healthy records status",
            DR_DOMAIN,
            DR_CHECKED,
            vec![
                step(h(&[BOTH_OK, DR_UP]), OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    h(&[BOTH_DOWN, DR_DOWN_H]),
                    NoHealthy,
                    "empty",
                    &[
                        ev!("192.0.2.10 is disabled"),
                        ev!("192.0.2.11 is disabled"),
                        ev!("DR is on"),
                        ev!("No healthy records left"),
                    ],
                )
                .dr(),
                step(
                    h(&[BOTH_OK, DR_DOWN_H]),
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[
                        ev!("DR ended"),
                        ev!("192.0.2.10 is enabled"),
                        ev!("192.0.2.11 is enabled"),
                    ],
                ),
            ],
        ),
        row(
            "spec §4 / §2: a datacenter reported down makes its addresses unhealthy (Main DC down → DR)",
            DR_DOMAIN,
            DR_ADDRESSES,
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    h(&[BOTH_OK, "dc:dc1=down"]),
                    Dr,
                    "198.51.100.10 198.51.100.11",
                    &main_up_dr_on,
                )
                .dr(),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &back_to_main),
            ],
        ),
        row(
            "001 status: DR answers from the DR DC even when some DR addresses are down",
            DR_DOMAIN,
            DR_CHECKED,
            vec![
                step(
                    h(&[BOTH_DOWN, "web@198.51.100.10=error web@198.51.100.11=ok"]),
                    Dr,
                    "198.51.100.11",
                    &[ev!("DR is on")],
                )
                .dr(),
            ],
        ),
        row(
            "000 'keep the last decision', for a new DR record that has none: it answers from the Main DC \
             before its checks decide, never from DR, and logs no switchover it did not make (automatic failback)",
            DR_DOMAIN,
            DR_ADDRESSES,
            vec![
                step("", OK, "192.0.2.10 192.0.2.11", &[]).decision("Main"),
                step("web@192.0.2.10=ok", OK, "192.0.2.10 192.0.2.11", &[]),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(BOTH_DOWN, Dr, "198.51.100.10 198.51.100.11", &main_up_dr_on).dr(),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &back_to_main),
            ],
        ),
        row(
            "000 'keep the last decision', for a new DR record with manual failback: Main from the start, \
             no hold, since Main never failed; a real failure is still held until resumed",
            DR_DOMAIN,
            format!("failback = \"manual\"\n{DR_CHECKED}"),
            vec![
                step("", OK, "192.0.2.10 192.0.2.11", &[]).decision("Main"),
                step(h(&[BOTH_OK, DR_UP]), OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    h(&[BOTH_DOWN, DR_UP]),
                    Dr,
                    "198.51.100.10 198.51.100.11",
                    &main_up_dr_on,
                )
                .dr(),
                step(h(&[BOTH_OK, DR_UP]), Dr, "198.51.100.10 198.51.100.11", &[])
                    .dr()
                    .decision("held by manual failback"),
            ],
        ),
        row(
            "000: Main checks unknown again (No Data) keep the last decision: DR stays on, Main stays off",
            DR_DOMAIN,
            DR_ADDRESSES,
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(BOTH_DOWN, Dr, "198.51.100.10 198.51.100.11", &main_up_dr_on).dr(),
                step(
                    "web@192.0.2.10=nodata web@192.0.2.11=preparing",
                    Dr,
                    "198.51.100.10 198.51.100.11",
                    &[],
                )
                .dr(),
            ],
        ),
        row(
            "000 step 2 / 001 step 1: Main addresses on a scenario that has not decided yet are not unhealthy: \
             no DR at start-up",
            DR_DOMAIN,
            r#"addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "scenario:flag" },
  { ip = "198.51.100.10", dc = "dc2" },
]"#,
            vec![
                step("scenario:flag=unknown", OK, "192.0.2.10", &[]).decision("Main"),
                step("scenario:flag=on", OK, "192.0.2.10", &[]),
            ],
        ),
        row(
            "every logged switchover has its opening event: a record that starts in DR (its Main DC \
             is down at start-up) logs DR is on first, so DR ended later has it",
            DR_DOMAIN,
            DR_ADDRESSES,
            vec![
                step(
                    h(&[BOTH_OK, "dc:dc1=down"]),
                    Dr,
                    "198.51.100.10 198.51.100.11",
                    &[ev!("DR is on")],
                )
                .dr(),
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &back_to_main),
            ],
        ),
    ]);
    assert_eq!(n, 17);
}

/// 001 misconception 4: "Each record has its own condition; in the same
/// domain, one record can be in DR while another is in the Main DC. To
/// switch several records together, the same health scenario is selected as
/// the condition of these records."
#[test]
fn dr_is_per_record() {
    let compiled = compile_text(
        DR_DOMAIN,
        &[
            format!("name = \"www\"\ntype = \"A\"\n{DR_ADDRESSES}"),
            r#"name = "api"
type = "A"
addresses = [ { ip = "192.0.2.20", dc = "dc1" }, { ip = "198.51.100.20", dc = "dc2" } ]"#
                .to_string(),
            r#"name = "www2"
type = "A"
dr_condition = "scenario:dc1-down"
addresses = [ { ip = "192.0.2.30", dc = "dc1" }, { ip = "198.51.100.30", dc = "dc2" } ]"#
                .to_string(),
            r#"name = "api2"
type = "A"
dr_condition = "scenario:dc1-down"
addresses = [ { ip = "192.0.2.40", dc = "dc1" }, { ip = "198.51.100.40", dc = "dc2" } ]"#
                .to_string(),
        ],
    );
    let dcs = &compiled.datacenters;
    let eval = |i: usize, health: &str| {
        let r = &compiled.zones[0].records[i];
        let Content::Steered(s) = &r.content else {
            panic!()
        };
        evaluate(
            &r.label(),
            s,
            dcs,
            &TestHealth::parse(health, dcs),
            None,
            Operator::default(),
        )
    };
    // www's Main DC is down, api's is not: one is in DR, the other in Main.
    assert!(eval(0, BOTH_DOWN).state.dr_on);
    assert!(!eval(1, BOTH_DOWN).state.dr_on);
    // The same scenario switches both records together.
    assert!(!eval(2, "").state.dr_on);
    assert!(!eval(3, "").state.dr_on);
    assert!(eval(2, "scenario:dc1-down=on").state.dr_on);
    assert!(eval(3, "scenario:dc1-down=on").state.dr_on);
    assert_eq!(compiled.zones[0].records[1].label(), "api.example.test/A");
}

// ---------------------------------------------------------------------------
// Datacenter mode (spec §2; seed 000 step 4).

#[test]
fn datacenter_mode() {
    let all = h(&[DC1_OK, DC2_OK, DC3_OK]);
    let n = run(vec![
        row(
            "000 step 4: the data centers that have at least one healthy address, in the DC Selection order \
             and up to the Total DCs to Select from count (1)",
            dc_domain(1),
            DC_ADDRESSES,
            vec![
                step(all.clone(), OK, "198.51.100.10 198.51.100.11", &[]),
                step(
                    h(&[
                        DC1_OK,
                        "web@198.51.100.10=error web@198.51.100.11=ok",
                        DC3_OK,
                    ]),
                    DOWN,
                    "198.51.100.11",
                    &[ev!("198.51.100.10 is disabled")],
                ),
                step(
                    h(&[DC1_OK, DC2_DOWN, DC3_OK]),
                    PartiallyOk,
                    "192.0.2.10 192.0.2.11",
                    &[
                        ev!("198.51.100.11 is disabled"),
                        ev!("192.0.2.10 is enabled"),
                        ev!("192.0.2.11 is enabled"),
                    ],
                ),
                step(
                    h(&[DC1_DOWN, DC2_DOWN, DC3_OK]),
                    PartiallyOk,
                    "203.0.113.10",
                    &[
                        ev!("192.0.2.10 is disabled"),
                        ev!("192.0.2.11 is disabled"),
                        ev!("203.0.113.10 is enabled"),
                    ],
                ),
                step(
                    h(&[DC1_DOWN, DC2_DOWN, DC3_DOWN]),
                    NoHealthy,
                    "empty",
                    &[
                        ev!("203.0.113.10 is disabled"),
                        ev!("No healthy records left"),
                    ],
                ),
                step(
                    all.clone(),
                    OK,
                    "198.51.100.10 198.51.100.11",
                    &[
                        ev!("198.51.100.10 is enabled"),
                        ev!("198.51.100.11 is enabled"),
                    ],
                ),
            ],
        ),
        row(
            "000 step 4: ... up to the Total DCs to Select from count (2), in the DC Selection order; \
             000 status Partially OK: in Datacenter mode, only some of the data centers have a healthy address",
            dc_domain(2),
            DC_ADDRESSES,
            vec![
                step(
                    all.clone(),
                    OK,
                    "198.51.100.10 198.51.100.11 192.0.2.10 192.0.2.11",
                    &[],
                ),
                step(
                    h(&[DC1_DOWN, DC2_OK, DC3_OK]),
                    PartiallyOk,
                    "198.51.100.10 198.51.100.11 203.0.113.10",
                    &[
                        ev!("192.0.2.10 is disabled"),
                        ev!("192.0.2.11 is disabled"),
                        ev!("203.0.113.10 is enabled"),
                    ],
                ),
            ],
        ),
        row(
            "spec §2 Datacenter: every datacenter with a healthy address when dcs_to_select covers them all",
            dc_domain(3),
            DC_ADDRESSES,
            vec![step(
                all.clone(),
                OK,
                "198.51.100.10 198.51.100.11 192.0.2.10 192.0.2.11 203.0.113.10",
                &[],
            )],
        ),
        row(
            "spec §4: a datacenter reported down has no healthy address (Datacenter mode picks the next)",
            dc_domain(1),
            DC_ADDRESSES,
            vec![step(
                h(&[&all, "dc:dc2=down"]),
                PartiallyOk,
                "192.0.2.10 192.0.2.11",
                &[],
            )],
        ),
        row(
            "spec §2 Datacenter: dc_order defaults to the datacenters in declaration order, 1 to select",
            "mode = \"datacenter\"",
            DC_ADDRESSES,
            vec![step(all.clone(), OK, "192.0.2.10 192.0.2.11", &[])],
        ),
    ]);
    assert_eq!(n, 5);
}

// ---------------------------------------------------------------------------
// No candidate: fail-safe records and on_no_healthy (spec §2 step 3).

#[test]
fn no_candidate() {
    let n = run(vec![
        row(
            "000: if no address remains, Fail-Safe Records are returned if they are defined; \
             status Fail-safe; event Fail-safe records are on",
            "",
            format!("fail_safe = [\"192.0.2.250\"]\n{TWO_CHECKED}"),
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    BOTH_DOWN,
                    FailSafe,
                    "fail-safe",
                    &[
                        ev!("192.0.2.10 is disabled"),
                        ev!("192.0.2.11 is disabled"),
                        ev!("Fail-safe records are on"),
                    ],
                ),
                step(BOTH_DOWN, FailSafe, "fail-safe", &[]),
                step(
                    "web@192.0.2.10=ok web@192.0.2.11=error",
                    DOWN,
                    "192.0.2.10",
                    &[ev!("192.0.2.10 is enabled")],
                ),
            ],
        ),
        row(
            "000 status No healthy records: there is no healthy address and no Fail-safe record; \
             spec: on_no_healthy = empty (NOERROR, no answer; default); event No healthy records left",
            "",
            TWO_CHECKED,
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    BOTH_DOWN,
                    NoHealthy,
                    "empty",
                    &[
                        ev!("192.0.2.10 is disabled"),
                        ev!("192.0.2.11 is disabled"),
                        ev!("No healthy records left"),
                    ],
                ),
                step(BOTH_DOWN, NoHealthy, "empty", &[]),
                step(
                    BOTH_OK,
                    OK,
                    "192.0.2.10 192.0.2.11",
                    &[ev!("192.0.2.10 is enabled"), ev!("192.0.2.11 is enabled")],
                ),
            ],
        ),
        row(
            "spec §2 step 5: the first evaluation reports no transition, only the switchover it starts in \
             (the opening event of a later return)",
            "",
            format!("fail_safe = [\"192.0.2.250\"]\n{TWO_CHECKED}"),
            vec![step(
                BOTH_DOWN,
                FailSafe,
                "fail-safe",
                &[ev!("Fail-safe records are on")],
            )],
        ),
        row(
            "spec: on_no_healthy = all (every address, as seed 002 does); 002: if every checked record of \
             the name is failing, all of them are answered — a disabled address still never is; \
             the addresses stay answered, so none is logged disabled",
            "",
            r#"on_no_healthy = "all"
addresses = [
  { ip = "192.0.2.10", hc = "check:web" },
  { ip = "192.0.2.11", hc = "check:web" },
  { ip = "192.0.2.12", hc = "disabled" },
]"#,
            vec![
                step(BOTH_OK, OK, "192.0.2.10 192.0.2.11", &[]),
                step(
                    BOTH_DOWN,
                    NoHealthy,
                    "192.0.2.10 192.0.2.11",
                    &[ev!("No healthy records left")],
                ),
            ],
        ),
        row(
            "spec: no candidate → fail-safe records if defined; else the on_no_healthy policy",
            "",
            format!("on_no_healthy = \"all\"\nfail_safe = [\"192.0.2.250\"]\n{TWO_CHECKED}"),
            vec![step(
                BOTH_DOWN,
                FailSafe,
                "fail-safe",
                &[ev!("Fail-safe records are on")],
            )],
        ),
    ]);
    assert_eq!(n, 5);
}

// ---------------------------------------------------------------------------
// Weights (spec §2 step 3; seed 002 step 3 and examples). Which candidate a
// query gets is decided per query elsewhere; here: which candidates remain.

#[test]
fn weights() {
    let n = run(vec![
        row(
            "002 failover: A 192.0.2.1 with a check weight 1 · A 192.0.2.2 weight 0 (the weight-0 record \
             answers only when the other is left out by its check)",
            "",
            r#"balance = "weighted"
addresses = [
  { ip = "192.0.2.1", hc = "check:web", weight = 1 },
  { ip = "192.0.2.2", weight = 0 },
]"#,
            vec![
                step("web@192.0.2.1=ok", OK, "192.0.2.1", &[]),
                step(
                    "web@192.0.2.1=error",
                    DOWN,
                    "192.0.2.2",
                    &[ev!("192.0.2.1 is disabled"), ev!("192.0.2.2 is enabled")],
                ),
                step(
                    "web@192.0.2.1=ok",
                    OK,
                    "192.0.2.1",
                    &[ev!("192.0.2.2 is disabled"), ev!("192.0.2.1 is enabled")],
                ),
            ],
        ),
        row(
            "002: weight 0 only answers when all are 0",
            "",
            r#"balance = "weighted"
addresses = [ { ip = "192.0.2.1", weight = 0 }, { ip = "192.0.2.2", weight = 0 } ]"#,
            vec![step("", OK, "192.0.2.1 192.0.2.2", &[])],
        ),
        row(
            "002: a record without a weight counts as 1",
            "",
            r#"balance = "weighted"
addresses = [ { ip = "192.0.2.1" }, { ip = "192.0.2.2", weight = 0 } ]"#,
            vec![step("", OK, "192.0.2.1", &[])],
        ),
        row(
            "002 canary: A 192.0.2.1 weight 9 · A 192.0.2.2 weight 1 (both remain candidates)",
            "",
            r#"balance = "weighted"
addresses = [ { ip = "192.0.2.1", weight = 9 }, { ip = "192.0.2.2", weight = 1 } ]"#,
            vec![step("", OK, "192.0.2.1 192.0.2.2", &[])],
        ),
        row(
            "spec §2: weight 0 answers only when every candidate has weight 0 or all others are out",
            "",
            r#"balance = "weighted"
addresses = [
  { ip = "192.0.2.1", hc = "check:web", weight = 2 },
  { ip = "192.0.2.2", weight = 0 },
  { ip = "192.0.2.3", hc = "check:web" },
]"#,
            vec![
                step(
                    "web@192.0.2.1=ok web@192.0.2.3=ok",
                    OK,
                    "192.0.2.1 192.0.2.3",
                    &[],
                ),
                step(
                    "web@192.0.2.1=error web@192.0.2.3=ok",
                    DOWN,
                    "192.0.2.3",
                    &[ev!("192.0.2.1 is disabled")],
                ),
                step(
                    "web@192.0.2.1=error web@192.0.2.3=error",
                    DOWN,
                    "192.0.2.2",
                    &[ev!("192.0.2.3 is disabled"), ev!("192.0.2.2 is enabled")],
                ),
            ],
        ),
        row(
            "002 round robin over healthy servers only: three A records, each with a check, no place and no weight",
            "",
            r#"balance = "round-robin"
addresses = [
  { ip = "192.0.2.1", hc = "check:web" },
  { ip = "192.0.2.2", hc = "check:web" },
  { ip = "192.0.2.3", hc = "check:web" },
]"#,
            vec![
                step(
                    "web@192.0.2.1=ok web@192.0.2.2=ok web@192.0.2.3=ok",
                    OK,
                    "192.0.2.1 192.0.2.2 192.0.2.3",
                    &[],
                ),
                step(
                    "web@192.0.2.1=ok web@192.0.2.2=error web@192.0.2.3=ok",
                    DOWN,
                    "192.0.2.1 192.0.2.3",
                    &[ev!("192.0.2.2 is disabled")],
                ),
            ],
        ),
    ]);
    assert_eq!(n, 6);
}

// ---------------------------------------------------------------------------
// Topological selection (spec §2 step 3; seed 002 step 2 "Place").

struct PlaceRow {
    seed: &'static str,
    domain: String,
    record: &'static str,
    health: &'static str,
    depends_on_place: bool,
    /// (client place as `CC/CN`, `-/CN`, `CC/-` or `-`, answer).
    lookups: Vec<(&'static str, &'static str)>,
}

fn place(text: &str) -> Place {
    if text == "-" {
        return Place::default();
    }
    let (country, continent) = text.split_once('/').expect("CC/CN");
    Place {
        country: (country != "-").then(|| Country::parse(country).expect("country")),
        continent: (continent != "-").then(|| Continent::parse(continent).expect("continent")),
        subdivision: None,
        ..Place::default()
    }
}

const GEO: &str = r#"topology = true
addresses = [
  { ip = "203.0.113.10", countries = ["ID"], hc = "check:web" },
  { ip = "198.51.100.20", continents = ["EU"], hc = "check:web" },
  { ip = "192.0.2.30", hc = "check:web" },
]"#;
const GEO_NO_DEFAULT: &str = r#"topology = true
addresses = [
  { ip = "203.0.113.10", countries = ["ID"], hc = "check:web" },
  { ip = "198.51.100.20", continents = ["EU"], hc = "check:web" },
]"#;
const DC_TOPO: &str = r#"topology = true
addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.10", dc = "dc2", hc = "check:web" },
  { ip = "203.0.113.10", dc = "dc3", hc = "check:web" },
]"#;
const DC_TOPO_OK: &str = "web@192.0.2.10=ok web@198.51.100.10=ok web@203.0.113.10=ok";

fn dc_topo_domain(count: usize) -> String {
    format!(
        "mode = \"datacenter\"\ndc_order = [\"dc1\", \"dc2\", \"dc3\"]\ndcs_to_select = {count}"
    )
}

#[test]
fn topological_selection() {
    let geo_ok = "web@203.0.113.10=ok web@198.51.100.20=ok web@192.0.2.30=ok";
    let rows = vec![
        PlaceRow {
            seed: "002: records for the client's country are answered; if there are none, those for its \
                   continent; if there are none, the records for no place in particular (the default)",
            domain: String::new(),
            record: GEO,
            health: geo_ok,
            depends_on_place: true,
            lookups: vec![
                ("ID/AS", "203.0.113.10"),
                ("ID/-", "203.0.113.10"),
                ("DE/EU", "198.51.100.20"),
                ("-/EU", "198.51.100.20"),
                ("US/NA", "192.0.2.30"),
                ("JP/AS", "192.0.2.30"),
                ("-", "192.0.2.30"),
            ],
        },
        PlaceRow {
            seed: "002 step 1 then 2: a country's record whose check fails is left out, so the client gets \
                   the records of its continent, else the default",
            domain: String::new(),
            record: GEO,
            health: "web@203.0.113.10=error web@198.51.100.20=ok web@192.0.2.30=ok",
            depends_on_place: true,
            lookups: vec![
                ("ID/AS", "192.0.2.30"),
                ("DE/EU", "198.51.100.20"),
                ("-", "192.0.2.30"),
            ],
        },
        PlaceRow {
            seed: "002: if there are none [for the country], those for its continent (country record down)",
            domain: String::new(),
            record: r#"topology = true
addresses = [
  { ip = "192.0.2.1", countries = ["DE"], hc = "check:web" },
  { ip = "192.0.2.2", continents = ["EU"], hc = "check:web" },
  { ip = "192.0.2.3", hc = "check:web" },
]"#,
            health: "web@192.0.2.1=error web@192.0.2.2=ok web@192.0.2.3=ok",
            depends_on_place: true,
            lookups: vec![
                ("DE/EU", "192.0.2.2"),
                ("FR/EU", "192.0.2.2"),
                ("US/NA", "192.0.2.3"),
            ],
        },
        PlaceRow {
            seed: "002: continent record down → the default",
            domain: String::new(),
            record: GEO,
            health: "web@203.0.113.10=ok web@198.51.100.20=error web@192.0.2.30=ok",
            depends_on_place: true,
            lookups: vec![
                ("DE/EU", "192.0.2.30"),
                ("ID/AS", "203.0.113.10"),
                ("-", "192.0.2.30"),
            ],
        },
        PlaceRow {
            seed: "002: without a default, every record left after step 1 is answered",
            domain: String::new(),
            record: GEO_NO_DEFAULT,
            health: "web@203.0.113.10=ok web@198.51.100.20=ok",
            depends_on_place: true,
            lookups: vec![
                ("US/NA", "203.0.113.10 198.51.100.20"),
                ("-", "203.0.113.10 198.51.100.20"),
                ("ID/AS", "203.0.113.10"),
                ("DE/EU", "198.51.100.20"),
            ],
        },
        PlaceRow {
            seed: "002: without a default, every record left after step 1 is answered (one left out by its check)",
            domain: String::new(),
            record: GEO_NO_DEFAULT,
            health: "web@203.0.113.10=ok web@198.51.100.20=error",
            depends_on_place: false,
            lookups: vec![
                ("DE/EU", "203.0.113.10"),
                ("ID/AS", "203.0.113.10"),
                ("-", "203.0.113.10"),
            ],
        },
        PlaceRow {
            seed: "spec §2 step 3: no candidate anywhere → the no-candidate answer for every place",
            domain: String::new(),
            record: GEO,
            health: "web@203.0.113.10=error web@198.51.100.20=error web@192.0.2.30=error",
            depends_on_place: false,
            lookups: vec![("ID/AS", "empty"), ("DE/EU", "empty"), ("-", "empty")],
        },
        PlaceRow {
            seed: "spec §3 ECS scope: without topological selection the answer does not depend on the place",
            domain: String::new(),
            record: TWO_CHECKED,
            health: BOTH_OK,
            depends_on_place: false,
            lookups: vec![
                ("ID/AS", "192.0.2.10 192.0.2.11"),
                ("-", "192.0.2.10 192.0.2.11"),
            ],
        },
        PlaceRow {
            seed: "002: records of the name without steering count as defaults (topology on, no place named)",
            domain: String::new(),
            record: r#"topology = true
addresses = [ { ip = "192.0.2.1" }, { ip = "192.0.2.2" } ]"#,
            health: "",
            depends_on_place: false,
            lookups: vec![
                ("ID/AS", "192.0.2.1 192.0.2.2"),
                ("-", "192.0.2.1 192.0.2.2"),
            ],
        },
        PlaceRow {
            seed: "002 step 2 then 3: weights apply within the place (weight 0 only when the other is out)",
            domain: String::new(),
            record: r#"topology = true
balance = "weighted"
addresses = [
  { ip = "192.0.2.1", countries = ["ID"], hc = "check:web" },
  { ip = "192.0.2.2", countries = ["ID"], weight = 0 },
  { ip = "192.0.2.3" },
]"#,
            health: "web@192.0.2.1=ok",
            depends_on_place: true,
            lookups: vec![("ID/AS", "192.0.2.1"), ("-", "192.0.2.3")],
        },
        PlaceRow {
            seed: "002 step 2 then 3: weights apply within the place (the weight-0 record once the other is out)",
            domain: String::new(),
            record: r#"topology = true
balance = "weighted"
addresses = [
  { ip = "192.0.2.1", countries = ["ID"], hc = "check:web" },
  { ip = "192.0.2.2", countries = ["ID"], weight = 0 },
  { ip = "192.0.2.3" },
]"#,
            health: "web@192.0.2.1=error",
            depends_on_place: true,
            lookups: vec![("ID/AS", "192.0.2.2"), ("-", "192.0.2.3")],
        },
        PlaceRow {
            seed: "spec §2 Datacenter: nearest first when topological selection is on (country, continent, \
                   then dc_order)",
            domain: dc_topo_domain(1),
            record: DC_TOPO,
            health: DC_TOPO_OK,
            depends_on_place: true,
            lookups: vec![
                ("-", "192.0.2.10"),
                ("DE/EU", "192.0.2.10"),
                ("FR/EU", "192.0.2.10"),
                ("US/NA", "198.51.100.10"),
                ("CA/NA", "198.51.100.10"),
                ("-/NA", "198.51.100.10"),
                ("JP/AS", "203.0.113.10"),
                ("SG/AS", "203.0.113.10"),
                ("BR/SA", "192.0.2.10"),
            ],
        },
        PlaceRow {
            seed: "spec §2 Datacenter: nearest first among the datacenters that have a healthy address",
            domain: dc_topo_domain(1),
            record: DC_TOPO,
            health: "web@192.0.2.10=ok web@198.51.100.10=error web@203.0.113.10=ok",
            depends_on_place: true,
            lookups: vec![
                ("US/NA", "192.0.2.10"),
                ("JP/AS", "203.0.113.10"),
                ("-", "192.0.2.10"),
            ],
        },
        PlaceRow {
            seed: "spec §2 Datacenter: nearest first, up to dcs_to_select (2)",
            domain: dc_topo_domain(2),
            record: DC_TOPO,
            health: DC_TOPO_OK,
            depends_on_place: true,
            lookups: vec![
                ("-", "192.0.2.10 198.51.100.10"),
                ("US/NA", "198.51.100.10 192.0.2.10"),
                ("JP/AS", "203.0.113.10 192.0.2.10"),
                ("DE/EU", "192.0.2.10 198.51.100.10"),
            ],
        },
    ];
    let mut failures = Vec::new();
    let count = rows.len();
    for r in rows {
        let fx = Fixture::new(&r.domain, r.record);
        let e = fx.eval(r.health, None, false);
        if e.answers.depends_on_place() != r.depends_on_place {
            failures.push(format!(
                "[{}] depends_on_place {}, want {} (groups {:?})",
                r.seed,
                e.answers.depends_on_place(),
                r.depends_on_place,
                e.answers.groups
            ));
        }
        for (p, want) in &r.lookups {
            let g = e.answers.lookup(&place(p));
            let got = fx.show(&e.answers.groups[g]);
            if got != *want {
                failures.push(format!("[{}] client {p}: {got:?}, want {want:?}", r.seed));
            }
        }
        // The default group is what a client with no particular place gets.
        assert_eq!(e.answers.lookup(&Place::default()), e.answers.default);
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(count, 14);
}

// ---------------------------------------------------------------------------
// Status values and event texts, in their exact wording (seed 000).

#[test]
fn status_texts() {
    let table = [
        (Status::Ok, "OK"),
        (
            Status::PartiallyOkRecordDown,
            "Partially OK (a record is down)",
        ),
        (Status::PartiallyOk, "Partially OK"),
        (Status::Dr, "DR"),
        (Status::FailSafe, "Fail-safe"),
        (Status::NoHealthy, "No healthy records"),
    ];
    for (status, text) in table {
        assert_eq!(status.as_str(), text);
        assert_eq!(status.to_string(), text);
        // The label, as reports between devices carry it.
        let sent = serde_json::to_value(StatusLabel(Some(status))).unwrap();
        assert_eq!(sent, serde_json::json!(text));
    }

    #[derive(serde::Serialize)]
    struct StatusLabel(#[serde(with = "status_label")] Option<Status>);
}

#[test]
fn event_texts_are_exact() {
    // The macro is a convenience; the texts themselves, written out once.
    assert_eq!(
        ev!("192.0.2.10 is enabled"),
        "www.example.test/A: 192.0.2.10 is enabled"
    );
    assert_eq!(ev!("DR ended"), "www.example.test/A: DR ended");
    // Labels of other types and names.
    let compiled = compile_text(
        "",
        &[
            r#"name = "@"
type = "AAAA"
addresses = [ { ip = "2001:db8::1", hc = "check:web" } ]"#
                .to_string(),
            r#"name = "alias"
type = "CNAME"
addresses = [ { target = "a.example.net.", hc = "scenario:flag" }, { target = "b.example.net." } ]"#
                .to_string(),
        ],
    );
    let dcs = &compiled.datacenters;
    let run = |i: usize, health: &str, prev: Option<&RecordState>| {
        let r = &compiled.zones[0].records[i];
        let Content::Steered(s) = &r.content else {
            panic!()
        };
        evaluate(
            &r.label(),
            s,
            dcs,
            &TestHealth::parse(health, dcs),
            prev,
            Operator::default(),
        )
    };
    let first = run(0, "web@2001:db8::1=ok", None);
    let next = run(0, "web@2001:db8::1=error", Some(&first.state));
    assert_eq!(
        next.events,
        [
            "example.test/AAAA: 2001:db8::1 is disabled",
            "example.test/AAAA: No healthy records left"
        ]
    );
    let first = run(1, "", None);
    assert_eq!(first.state.status, Status::PartiallyOkRecordDown);
    let next = run(1, "scenario:flag=on", Some(&first.state));
    assert_eq!(
        next.events,
        ["alias.example.test/CNAME: a.example.net is enabled"]
    );
}

// ---------------------------------------------------------------------------
// Places and events together.

/// 000: "in every mode, the addresses entering and leaving the answer (is
/// enabled / is disabled)" — also an address that only clients of one place
/// get (002 "Place").
#[test]
fn place_only_addresses_have_events() {
    let n = run(vec![
        row(
            "000: the addresses entering and leaving the answer (is enabled / is disabled) — a country's record",
            "",
            GEO,
            vec![
                step(
                    "web@203.0.113.10=ok web@198.51.100.20=ok web@192.0.2.30=ok",
                    OK,
                    "192.0.2.30",
                    &[],
                ),
                step(
                    "web@203.0.113.10=error web@198.51.100.20=ok web@192.0.2.30=ok",
                    DOWN,
                    "192.0.2.30",
                    &[ev!("203.0.113.10 is disabled")],
                ),
                step(
                    "web@203.0.113.10=ok web@198.51.100.20=ok web@192.0.2.30=ok",
                    OK,
                    "192.0.2.30",
                    &[ev!("203.0.113.10 is enabled")],
                ),
            ],
        ),
        row(
            "000: the addresses entering and leaving the answer — Datacenter mode, nearest first",
            dc_topo_domain(1),
            DC_TOPO,
            vec![
                step(DC_TOPO_OK, OK, "192.0.2.10", &[]),
                step(
                    "web@192.0.2.10=ok web@198.51.100.10=error web@203.0.113.10=ok",
                    PartiallyOk,
                    "192.0.2.10",
                    &[ev!("198.51.100.10 is disabled")],
                ),
            ],
        ),
    ]);
    assert_eq!(n, 2);
}

/// 002: "records for the client's country are answered. If there are none,
/// those for its continent" — a country's records win even when they are all
/// the records left (so its answer equals the default) and a narrower
/// continent answer exists.
#[test]
fn country_answer_wins_over_continent_answer() {
    let fx = Fixture::new(
        "",
        r#"topology = true
addresses = [
  { ip = "192.0.2.1", countries = ["DE"] },
  { ip = "192.0.2.2", countries = ["DE"], continents = ["EU"] },
]"#,
    );
    let e = fx.eval("", None, false);
    let show = |p: &str| fx.show(&e.answers.groups[e.answers.lookup(&place(p))]);
    assert_eq!(show("DE/EU"), "192.0.2.1 192.0.2.2");
    assert_eq!(show("FR/EU"), "192.0.2.2");
    assert_eq!(show("US/NA"), "192.0.2.1 192.0.2.2");
    assert_eq!(show("-"), "192.0.2.1 192.0.2.2");
}

/// Spec §1 check states: one text, the same on screens, in events, in
/// metrics labels and in JSON.
#[test]
fn check_states_read_as_the_spec_names_them() {
    for (state, text) in [
        (CheckState::Preparing, "Preparing"),
        (CheckState::Ok, "OK"),
        (CheckState::Error, "Error"),
        (CheckState::NoData, "No Data"),
    ] {
        assert_eq!(state.to_string(), text);
        assert_eq!(serde_json::to_value(state).unwrap(), text);
    }
}

/// The API names each status by a stable code and people read its label;
/// reports between devices carry the label, and both forms are read.
#[test]
fn a_status_is_a_code_for_the_api_and_a_label_between_devices() {
    let all = [
        (Status::Ok, "ok", "OK"),
        (
            Status::PartiallyOkRecordDown,
            "partially_ok_record_down",
            "Partially OK (a record is down)",
        ),
        (Status::PartiallyOk, "partially_ok", "Partially OK"),
        (Status::Dr, "dr", "DR"),
        (Status::FailSafe, "fail_safe", "Fail-safe"),
        (Status::NoHealthy, "no_healthy", "No healthy records"),
    ];
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Reported {
        #[serde(with = "status_label")]
        status: Option<Status>,
    }
    for (status, code, label) in all {
        assert_eq!(status.code(), code);
        assert_eq!(status.to_string(), label);
        assert_eq!(serde_json::to_value(status).unwrap(), code);
        for form in [code, label] {
            let read: Status = serde_json::from_value(form.into()).unwrap();
            assert_eq!(read, status, "{form}");
            let reported: Reported =
                serde_json::from_value(serde_json::json!({ "status": form })).unwrap();
            assert_eq!(reported.status, Some(status), "{form}");
        }
        let sent = serde_json::to_value(Reported {
            status: Some(status),
        })
        .unwrap();
        assert_eq!(sent, serde_json::json!({ "status": label }));
    }
    let none: Reported = serde_json::from_str(r#"{"status":null}"#).unwrap();
    assert_eq!(none.status, None);
    assert!(serde_json::from_str::<Status>(r#""okay""#).is_err());
}

// ---------------------------------------------------------------------------
// Topology rules (docs/topology.md): the rule that answers a client.

const RULES: &str = r#"
[[region]]
name = "branch"
networks = ["10.20.0.0/16", "2001:db8:20::/48"]
exclude_networks = ["10.20.99.0/24"]

[[region]]
name = "europe-but-fr"
continents = ["EU"]
exclude_countries = ["FR"]

[[region]]
name = "nested"
regions = ["branch"]
networks = ["10.30.0.0/16"]
"#;

const RULED: &str = r#"name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.1", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.2", dc = "dc2" },
  { ip = "192.0.2.3", dc = "dc3" },
]
topology_rules = [
  { client = "region:branch", datacenter = "dc1" },
  { client = "10.20.5.0/24", datacenter = "dc3" },
  { client = "region:europe-but-fr", datacenter = "dc2" },
  { client = "country:DE", address = "192.0.2.3" },
  { client = "10.40.0.0/16", datacenter = "dc1" },
  { client = "10.40.0.0/16", datacenter = "dc2", weight = 5 },
  { client = "10.50.0.0/16", datacenter = "dc1" },
  { client = "10.50.0.0/16", datacenter = "dc2" },
  { client = "region:nested", datacenter = "dc2" },
]"#;

struct RuleRow {
    case: &'static str,
    health: &'static str,
    client: &'static str,
    country: Option<&'static str>,
    continent: Option<Continent>,
    /// The rule that answers (1-based as written), or 0 for none.
    rule: usize,
    answer: &'static str,
}

#[test]
fn topology_rules_pick_the_closest_holding_rule_with_a_candidate() {
    let compiled = compile_text(RULES, &[RULED.to_string()]);
    let f = Fixture { compiled, index: 0 };
    let t = |case, health, client, country, continent, rule, answer| RuleRow {
        case,
        health,
        client,
        country,
        continent,
        rule,
        answer,
    };
    let eu = Some(Continent::Eu);
    let all = "192.0.2.1 192.0.2.2 192.0.2.3";
    let rows = [
        t(
            "a region's network",
            "web@192.0.2.1=ok",
            "10.20.1.1",
            None,
            None,
            1,
            "192.0.2.1",
        ),
        t(
            "a longer prefix wins",
            "web@192.0.2.1=ok",
            "10.20.5.9",
            None,
            None,
            2,
            "192.0.2.3",
        ),
        t(
            "an excluded network: no rule; without topology, every candidate",
            "web@192.0.2.1=ok",
            "10.20.99.1",
            None,
            None,
            0,
            all,
        ),
        t(
            "IPv6 networks",
            "web@192.0.2.1=ok",
            "2001:db8:20::5",
            None,
            None,
            1,
            "192.0.2.1",
        ),
        t(
            "a preferred datacenter with no healthy address is skipped",
            "web@192.0.2.1=error",
            "10.20.1.1",
            None,
            None,
            9,
            "192.0.2.2",
        ),
        t(
            "a country beats a continent",
            "web@192.0.2.1=ok",
            "192.0.2.200",
            Some("DE"),
            eu,
            4,
            "192.0.2.3",
        ),
        t(
            "a country a region excludes",
            "web@192.0.2.1=ok",
            "192.0.2.200",
            Some("FR"),
            eu,
            0,
            all,
        ),
        t(
            "a continent",
            "web@192.0.2.1=ok",
            "192.0.2.200",
            Some("IT"),
            eu,
            3,
            "192.0.2.2",
        ),
        t(
            "a network beats a country",
            "web@192.0.2.1=ok",
            "10.20.1.1",
            Some("DE"),
            eu,
            1,
            "192.0.2.1",
        ),
        t(
            "a tie goes to the higher weight",
            "web@192.0.2.1=ok",
            "10.40.1.1",
            None,
            None,
            6,
            "192.0.2.2",
        ),
        t(
            "an equal tie to the first written",
            "web@192.0.2.1=ok",
            "10.50.1.1",
            None,
            None,
            7,
            "192.0.2.1",
        ),
        t(
            "a nested region's own network",
            "web@192.0.2.1=ok",
            "10.30.1.1",
            None,
            None,
            9,
            "192.0.2.2",
        ),
        t(
            "outside every rule",
            "web@192.0.2.1=ok",
            "192.0.2.200",
            None,
            None,
            0,
            all,
        ),
    ];
    for row in rows {
        let eval = f.eval(row.health, None, false);
        let place = Place {
            country: row.country.and_then(Country::parse),
            continent: row.continent,
            subdivision: None,
            ..Place::default()
        };
        let topology = &f.compiled.topology;
        let set = eval.answers.rule_set();
        let class = topology.class(set, row.client.parse().unwrap());
        let chosen = rule_for(
            eval.answers.rules(),
            topology,
            set,
            class.id,
            &place,
            &mut false,
        );
        assert_eq!(
            chosen.map_or(0, |c| c.rule + 1),
            row.rule,
            "{}: the rule",
            row.case
        );
        let group = chosen.map_or(eval.answers.default, |c| c.group);
        assert_eq!(
            f.show(&eval.answers.groups[group]),
            row.answer,
            "{}: the answer",
            row.case
        );
    }
}

/// A rule's group exists only while its target has a candidate; every
/// address a rule answers with counts as answered.
#[test]
fn a_rules_group_follows_its_targets_health() {
    let compiled = compile_text(RULES, &[RULED.to_string()]);
    let f = Fixture { compiled, index: 0 };
    let up = f.eval("web@192.0.2.1=ok", None, false);
    assert!(up.answers.rules()[0].group.is_some());
    let down = f.eval("web@192.0.2.1=error", None, false);
    assert_eq!(
        down.answers.rules()[0].group,
        None,
        "dc1's only address is down"
    );
    assert!(down.answers.rules()[1].group.is_some(), "dc3 is up");
    assert_eq!(answered(&down.answers), [1, 2]);
}

/// A subdivision (a City database's) holds a client more closely than its
/// country, less than a network.
#[test]
fn a_subdivision_rule_beats_its_country_and_loses_to_a_network() {
    let record = r#"name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.1", dc = "dc1" },
  { ip = "192.0.2.2", dc = "dc2" },
  { ip = "192.0.2.3", dc = "dc3" },
]
topology_rules = [
  { client = "country:US", datacenter = "dc2" },
  { client = "subdivision:US-CA", datacenter = "dc3", weight = 1 },
  { client = "3.3.0.0/16", datacenter = "dc1" },
]"#;
    let compiled = compile_text("", &[record.to_string()]);
    let f = Fixture { compiled, index: 0 };
    let eval = f.eval("", None, false);
    let topology = &f.compiled.topology;
    let set = eval.answers.rule_set();
    let us = |sub: Option<&str>| Place {
        country: Country::parse("US"),
        continent: Some(Continent::Na),
        subdivision: sub.and_then(gtm_model::place::Subdivision::parse),
        ..Place::default()
    };
    let answer = |client: &str, place: Place| {
        let class = topology.class(set, client.parse().unwrap());
        let chosen = rule_for(
            eval.answers.rules(),
            topology,
            set,
            class.id,
            &place,
            &mut false,
        )
        .expect("a rule");
        (chosen.rule + 1, f.show(&eval.answers.groups[chosen.group]))
    };
    assert_eq!(
        answer("192.0.2.200", us(Some("US-CA"))),
        (2, "192.0.2.3".into())
    );
    assert_eq!(
        answer("192.0.2.200", us(Some("US-NY"))),
        (1, "192.0.2.2".into())
    );
    assert_eq!(answer("192.0.2.200", us(None)), (1, "192.0.2.2".into()));
    assert_eq!(
        answer("3.3.1.1", us(Some("US-CA"))),
        (3, "192.0.2.1".into())
    );
}

/// Datacenters with locations (San Francisco, New York, Frankfurt) and one
/// without, and a record answered by the nearest; `east_bias` is New
/// York's bias.
fn nearest_fixture(east_bias: i32) -> Fixture {
    let text = format!(
        r#"
[[datacenter]]
name = "west"
latitude = 37.7749
longitude = -122.4194

[[datacenter]]
name = "east"
latitude = 40.7128
longitude = -74.0060
bias = {east_bias}

[[datacenter]]
name = "fra"
latitude = 50.1109
longitude = 8.6821

[[datacenter]]
name = "tokyo"

[[check]]
name = "web"
type = "http"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
[[domain.record]]
name = "www"
type = "A"
nearest = true
addresses = [
  {{ ip = "192.0.2.1", dc = "west", hc = "check:web" }},
  {{ ip = "192.0.2.2", dc = "east" }},
  {{ ip = "192.0.2.3", dc = "fra", hc = "check:web" }},
  {{ ip = "192.0.2.4", dc = "tokyo" }},
]
"#
    );
    let compiled = compile(&parse(&text).expect("parses")).expect("compiles");
    Fixture { compiled, index: 0 }
}

#[test]
fn nearest_answers_from_the_closest_datacenter_with_a_candidate_by_biased_distance() {
    let at = |lat, lon| gtm_model::place::Coordinates::from_degrees(lat, lon).unwrap();
    let los_angeles = at(34.0522, -118.2437);
    let boston = at(42.3601, -71.0589);
    let paris = at(48.8566, 2.3522);
    let denver = at(39.7392, -104.9903);
    let kansas_city = at(39.0997, -94.5786);
    let up = "web@192.0.2.1=ok web@192.0.2.3=ok";
    // (case, east's bias, health, client, answer)
    let rows = [
        ("Los Angeles: west", 0, up, los_angeles, Some("192.0.2.1")),
        ("Boston: east", 0, up, boston, Some("192.0.2.2")),
        ("Paris: Frankfurt", 0, up, paris, Some("192.0.2.3")),
        (
            "west has no healthy address: Los Angeles goes to the next nearest",
            0,
            "web@192.0.2.1=error web@192.0.2.3=ok",
            los_angeles,
            Some("192.0.2.2"),
        ),
        (
            "Frankfurt down: Paris goes across the Atlantic to east",
            0,
            "web@192.0.2.1=ok web@192.0.2.3=error",
            paris,
            Some("192.0.2.2"),
        ),
        (
            "Denver is nearer west (1,520 km to 2,620)",
            0,
            up,
            denver,
            Some("192.0.2.1"),
        ),
        (
            "east's bias of +50 draws Denver (2,620 km counts 1,310)",
            50,
            up,
            denver,
            Some("192.0.2.2"),
        ),
        (
            "Kansas City is nearer east (1,760 km to 2,410)",
            0,
            up,
            kansas_city,
            Some("192.0.2.2"),
        ),
        (
            "east's bias of -50 sends Kansas City west (1,760 km counts 2,640)",
            -50,
            up,
            kansas_city,
            Some("192.0.2.1"),
        ),
        (
            "east's bias of -99 still keeps Boston (306 km counts 609)",
            -99,
            up,
            boston,
            Some("192.0.2.2"),
        ),
    ];
    for (case, bias, health, client, want) in rows {
        let f = nearest_fixture(bias);
        let eval = f.eval(health, None, false);
        let near = eval.answers.nearest();
        // Tokyo has no location: it is never nearest.
        assert_eq!(near.len(), 3, "{case}");
        let got = nearest_for(near, client).map(|c| f.show(&eval.answers.groups[c.group]));
        assert_eq!(got.as_deref(), want, "{case}");
        // Clients with no location get every candidate, Tokyo's too.
        let default = f.show(eval.answers.default_answer());
        assert!(default.contains("192.0.2.4"), "{case}: {default}");
    }
    // Nothing has a candidate: no datacenter answers by distance.
    let f = nearest_fixture(0);
    let eval = f.eval("web@192.0.2.1=error web@192.0.2.3=error", None, false);
    let near = eval.answers.nearest();
    assert!(near[0].group.is_none() && near[1].group.is_some());
    assert_eq!(
        nearest_for(&near[..1], los_angeles),
        None,
        "a datacenter without a candidate is skipped"
    );
}

#[test]
fn datacenter_locations_and_nearest_are_checked() {
    let refused = |dc: &str, record: &str| -> String {
        let text = format!(
            "[[datacenter]]\nname = \"a\"\n{dc}\n[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\n{record}\naddresses = [{{ ip = \"192.0.2.1\", dc = \"a\" }}]\n"
        );
        compile(&parse(&text).expect("parses"))
            .expect_err("refused")
            .to_string()
    };
    for (dc, record, says) in [
        (
            "latitude = 91.0\nlongitude = 0.0",
            "",
            "datacenter a: latitude 91 is not between -90 and 90",
        ),
        (
            "latitude = 1.0\nlongitude = -181.5",
            "",
            "datacenter a: longitude -181.5 is not between -180 and 180",
        ),
        (
            "latitude = 1.0",
            "",
            "datacenter a: latitude needs longitude",
        ),
        (
            "longitude = 1.0",
            "",
            "datacenter a: longitude needs latitude",
        ),
        (
            "latitude = 1.0\nlongitude = 1.0\nbias = 100",
            "",
            "datacenter a: bias 100 is not between -99 and 99",
        ),
        (
            "bias = 10",
            "",
            "datacenter a: bias needs latitude and longitude",
        ),
        (
            "",
            "nearest = true",
            "nearest = true needs an address in a datacenter with a latitude and longitude",
        ),
    ] {
        let got = refused(dc, record);
        assert!(got.contains(says), "{dc} / {record}: {got}");
    }
}

#[test]
fn a_group_rule_answers_from_the_healthy_addresses_of_its_group() {
    let record = r#"name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.1", dc = "dc1", hc = "check:web", group = "edge" },
  { ip = "192.0.2.2", dc = "dc2", group = "core" },
  { ip = "192.0.2.3", dc = "dc3", group = "edge" },
]
topology_rules = [{ client = "10.0.0.0/8", group = "edge" }]"#;
    let compiled = compile_text("", &[record.to_string()]);
    let f = Fixture { compiled, index: 0 };
    let topology = &f.compiled.topology;
    let answer = |health: &str| {
        let eval = f.eval(health, None, false);
        let set = eval.answers.rule_set();
        let class = topology.class(set, "10.1.2.3".parse().unwrap());
        rule_for(
            eval.answers.rules(),
            topology,
            set,
            class.id,
            &Place::default(),
            &mut false,
        )
        .map(|c| f.show(&eval.answers.groups[c.group]))
    };
    // The group's addresses across datacenters, not the other group's.
    assert_eq!(
        answer("web@192.0.2.1=ok").as_deref(),
        Some("192.0.2.1 192.0.2.3")
    );
    // One of them down: the other.
    assert_eq!(answer("web@192.0.2.1=error").as_deref(), Some("192.0.2.3"));
}
