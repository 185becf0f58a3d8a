//! Scheduled operator actions in the replicated map (docs/cluster.md,
//! "Scheduled changes"): added and cancelled by commands, fired by a
//! [`Action::FireSchedule`] command that applies the action and marks the
//! schedule fired in the same apply, so a schedule fires once however many
//! devices propose its firing. The machine never reads the clock: the
//! firing time is the command's `time_ms`.
//!
//! Key `schedules`: JSON [`Book`].

use gtm_cluster::Map;

use serde::{Deserialize, Serialize};

use super::{Change, operator, rejected};
use crate::command::{Action, Command, Outcome, ScheduleSpec};
use gtm_cluster::Write;
use gtm_model::{
    Config,
    actor::Actor,
    error::{ApiError, ErrorKind},
    operator::OperatorState,
};

pub const SCHEDULES_KEY: &str = "schedules";
/// Finished (fired, failed or cancelled) schedules kept for `schedule list`;
/// pending ones are always kept.
pub const DONE_KEPT: usize = 100;
/// Schedules with something left to fire, at most: every schedule command
/// rewrites the whole list, which must stay a small Raft entry.
pub const OPEN_MAX: usize = 1000;

/// Every schedule, and the next id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Book {
    #[serde(default)]
    pub next_id: u64,
    #[serde(default)]
    pub schedules: Vec<Schedule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleState {
    /// Its action has not fired yet.
    Pending,
    /// Its action fired (its reverse, with `until`, fires at `until`).
    Fired,
    /// Its action could not be applied at its time (e.g. the address is no
    /// longer configured); nothing changed and nothing more will fire.
    Failed,
    /// Cancelled before it (or its reverse) fired.
    Cancelled,
}

/// One firing: when, by which device, how late, what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Firing {
    pub time_ms: u64,
    pub device: String,
    /// How long after its time it fired.
    pub late_ms: u64,
    pub ok: bool,
    /// The change made, or why nothing was.
    pub result: String,
    /// Not made because it would have left a record with no answer on
    /// some device (the schedule was not forced).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Schedule {
    pub id: u64,
    pub at_ms: u64,
    #[serde(default)]
    pub until_ms: Option<u64>,
    /// The action, as a command carries it.
    #[schemars(with = "serde_json::Value")]
    pub action: Action,
    /// The action in words: `drain datacenter dc1`.
    pub what: String,
    /// Who created it.
    pub actor: Actor,
    pub created_ms: u64,
    pub state: ScheduleState,
    #[serde(default)]
    pub fired: Option<Firing>,
    /// The reverse's firing (schedules with `until`).
    #[serde(default)]
    pub reversed: Option<Firing>,
    /// Who cancelled it, and when.
    #[serde(default)]
    pub cancelled: Option<(Actor, u64)>,
    /// A check set's operator-set state before it fired: what the reverse
    /// restores (`ok` when there was none).
    #[serde(default)]
    pub previous_check: Option<String>,
    /// Added with `--force`: its firings are not judged, and one that
    /// would leave a record with no answer on some device fires even so.
    /// Without it such a firing is skipped ([`Firing::skipped`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

impl Schedule {
    /// What is due at `now_ms`: `Some(false)` the action, `Some(true)` its
    /// reverse.
    pub fn due(&self, now_ms: u64) -> Option<bool> {
        match self.state {
            ScheduleState::Pending if self.at_ms <= now_ms => Some(false),
            ScheduleState::Fired
                if self.reversed.is_none() && self.until_ms.is_some_and(|u| u <= now_ms) =>
            {
                Some(true)
            }
            _ => None,
        }
    }
}

/// The schedules of a map.
pub fn book_of(kv: &Map) -> Book {
    kv.get(SCHEDULES_KEY)
        .and_then(|v| serde_json::from_slice(v).ok())
        .unwrap_or_default()
}

fn put_book(book: &Book) -> Write {
    Write::Put {
        key: SCHEDULES_KEY.into(),
        value: serde_json::to_vec(book).unwrap_or_default(),
    }
}

/// An operator action in words.
pub fn describe(action: &Action) -> String {
    match action {
        Action::Drain {
            target,
            drained: true,
        } => format!("drain {target}"),
        Action::Drain {
            target,
            drained: false,
        } => format!("undrain {target}"),
        Action::SetCheck { check, state } => format!("set check {check} to {state}"),
        Action::Resume { record } => format!("resume {record}"),
        _ => "?".into(),
    }
}

/// What a schedule of `action` with an `until` fires then, in words
/// (`None`: the action has no reverse).
pub fn describe_reverse(action: &Action) -> Option<String> {
    match action {
        Action::Drain { target, drained } => Some(describe(&Action::Drain {
            target: target.clone(),
            drained: !drained,
        })),
        Action::SetCheck { check, .. } => Some(format!(
            "set check {check} back to its state before (ok when it had none)"
        )),
        _ => None,
    }
}

/// Applies a schedule command; `None` for other commands.
pub(super) fn run(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
) -> Option<Change> {
    let applied = |changed: bool, line: String, writes: Vec<Write>| Change {
        writes,
        outcome: Outcome::Applied {
            version,
            index,
            changed,
            changes: vec![line],
        },
    };
    let mut book = book_of(kv);
    Some(match &command.action {
        Action::AddSchedule(spec) | Action::AddForcedSchedule(spec) => {
            let open = book.schedules.iter().filter(|s| is_open(s)).count();
            if open >= OPEN_MAX {
                return Some(rejected(
                    ErrorKind::Conflict,
                    format!(
                        "{open} schedules are waiting to fire, the most there can be; cancel some first"
                    ),
                ));
            }
            if let Err(e) = check_spec(kv, index, version, current, command, spec) {
                return Some(Change {
                    writes: Vec::new(),
                    outcome: Outcome::Rejected(e),
                });
            }
            let id = book.next_id.max(1);
            book.next_id = id + 1;
            let spec = spec.as_ref();
            let what = describe(&spec.action);
            book.schedules.push(Schedule {
                id,
                at_ms: spec.at_ms,
                until_ms: spec.until_ms,
                action: spec.action.clone(),
                what: what.clone(),
                actor: command.actor.clone(),
                created_ms: command.time_ms,
                state: ScheduleState::Pending,
                fired: None,
                reversed: None,
                cancelled: None,
                previous_check: None,
                force: matches!(command.action, Action::AddForcedSchedule(_)),
            });
            prune(&mut book);
            applied(
                true,
                format!("schedule {id}: {what}"),
                vec![put_book(&book)],
            )
        }
        Action::CancelSchedule { id } => {
            let Some(s) = book.schedules.iter_mut().find(|s| s.id == *id) else {
                return Some(rejected(
                    ErrorKind::NotFound,
                    format!("no schedule {id} (gtm schedule list shows them)"),
                ));
            };
            let open = is_open(s);
            if s.state == ScheduleState::Cancelled {
                return Some(applied(
                    false,
                    format!("schedule {id} is cancelled already"),
                    Vec::new(),
                ));
            }
            if !open {
                return Some(rejected(
                    ErrorKind::Conflict,
                    format!(
                        "schedule {id} is {:?} and has nothing left to fire",
                        s.state
                    )
                    .to_lowercase(),
                ));
            }
            s.state = ScheduleState::Cancelled;
            s.cancelled = Some((command.actor.clone(), command.time_ms));
            let line = format!("schedule {id} cancelled ({})", command.actor);
            let mut state = operator::state_of(kv);
            operator::note(&mut state, &format!("schedule {id}"), line.clone());
            applied(true, line, vec![put_book(&book), operator::put(&state)])
        }
        Action::FireSchedule { id, reverse } => fire(
            kv, index, version, current, command, &mut book, *id, *reverse, None,
        ),
        Action::SkipSchedule { id, reverse, why } => fire(
            kv,
            index,
            version,
            current,
            command,
            &mut book,
            *id,
            *reverse,
            Some(why),
        ),
        _ => return None,
    })
}

/// A schedule's action must be one an operator can schedule, named in the
/// committed configuration (an undrain is checked when it fires: the drain
/// it names may be scheduled too).
fn check_spec(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
    spec: &ScheduleSpec,
) -> Result<(), ApiError> {
    if let Some(until) = spec.until_ms
        && until <= spec.at_ms
    {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            "--until must be after --at",
        ));
    }
    match &spec.action {
        Action::Drain { drained: false, .. } => return Ok(()),
        Action::Drain { .. } | Action::SetCheck { .. } => {}
        Action::Resume { .. } if spec.until_ms.is_some() => {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                "a resume has no reverse: schedule it without --until",
            ));
        }
        Action::Resume { .. } => {}
        other => {
            return Err(ApiError::new(
                ErrorKind::BadRequest,
                format!(
                    "only drains, undrains, check sets and resumes can be scheduled, not {other:?}"
                ),
            ));
        }
    }
    let probe = Command {
        action: spec.action.clone(),
        ..command.clone()
    };
    match operator::run(kv, index, version, current, &probe) {
        Some(Change {
            outcome: Outcome::Rejected(e),
            ..
        }) => Err(e),
        _ => Ok(()),
    }
}

/// What a schedule's firing does: its action, or (`reverse`) the
/// reverse's; `None` for a reverse of an action that has none.
pub fn firing_action(s: &Schedule, reverse: bool) -> Option<Action> {
    if reverse {
        reverse_of(s)
    } else {
        Some(s.action.clone())
    }
}

/// The reverse of a schedule's action.
fn reverse_of(s: &Schedule) -> Option<Action> {
    match &s.action {
        Action::Drain { target, drained } => Some(Action::Drain {
            target: target.clone(),
            drained: !drained,
        }),
        Action::SetCheck { check, .. } => Some(Action::SetCheck {
            check: check.clone(),
            state: s.previous_check.clone().unwrap_or_else(|| "ok".into()),
        }),
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn fire(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
    book: &mut Book,
    id: u64,
    reverse: bool,
    skip: Option<&String>,
) -> Change {
    let now = command.time_ms;
    let Some(s) = book.schedules.iter_mut().find(|s| s.id == id) else {
        return rejected(ErrorKind::NotFound, format!("no schedule {id}"));
    };
    if s.due(now) != Some(reverse) {
        // Fired already (by an earlier leader), cancelled, or not due by
        // this command's time: nothing to do.
        return Change {
            writes: Vec::new(),
            outcome: Outcome::Applied {
                version,
                index,
                changed: false,
                changes: vec![format!("schedule {id} has nothing due")],
            },
        };
    }
    let (action, due) = if reverse {
        (reverse_of(s), s.until_ms.unwrap_or(s.at_ms))
    } else {
        (Some(s.action.clone()), s.at_ms)
    };
    let mut state = operator::state_of(kv);
    if !reverse && let Action::SetCheck { check, .. } = &s.action {
        s.previous_check = state.checks.get(check).map(|c| c.state.clone());
    }
    let device = command.actor.device.clone();
    let inner = action.map(|action| Command {
        actor: Actor {
            user: format!("schedule {id} of {}", s.actor.user),
            device: device.clone(),
        },
        action,
        ..command.clone()
    });
    let run = match skip {
        Some(_) => None,
        None => inner.and_then(|c| operator::run(kv, index, version, current, &c)),
    };
    let result = match (skip, run) {
        (Some(why), _) => Err(why.clone()),
        (
            None,
            Some(Change {
                writes,
                outcome: Outcome::Applied { changes, .. },
            }),
        ) => {
            if let Some(new) = writes.iter().find_map(|w| match w {
                Write::Put { key, value } if key == operator::OPERATOR_KEY => {
                    serde_json::from_slice::<OperatorState>(value).ok()
                }
                _ => None,
            }) {
                state = new;
            }
            Ok(changes.join("; "))
        }
        (
            None,
            Some(Change {
                outcome: Outcome::Rejected(e),
                ..
            }),
        ) => Err(e.message),
        (None, None) => Err("the action has no reverse".to_string()),
    };
    let late_ms = now.saturating_sub(due);
    let (ok, text) = match &result {
        Ok(t) => (true, t.clone()),
        Err(e) => (false, e.clone()),
    };
    let firing = Firing {
        time_ms: now,
        device: device.clone(),
        late_ms,
        ok,
        result: text.clone(),
        skipped: skip.is_some(),
    };
    let phase = if reverse { "reverse of " } else { "" };
    let late = if late_ms >= 2000 {
        format!(
            ", {} late (no quorum or no leader at its time)",
            gtm_model::when::age(late_ms)
        )
    } else {
        String::new()
    };
    let line = format!(
        "{phase}schedule {id} (created by {}) {} on {device} at {}{late}: {text}",
        s.actor,
        if ok { "fired" } else { "skipped" },
        gtm_model::when::utc(now),
    );
    if reverse {
        s.reversed = Some(firing);
    } else {
        s.fired = Some(firing);
        s.state = if ok {
            ScheduleState::Fired
        } else {
            ScheduleState::Failed
        };
    }
    let severity = if skip.is_some() {
        gtm_model::severity::Severity::Warning
    } else {
        gtm_model::severity::Severity::Info
    };
    operator::note_as(
        &mut state,
        &format!("schedule {id}"),
        line.clone(),
        severity,
    );
    prune(book);
    Change {
        writes: vec![put_book(book), operator::put(&state)],
        outcome: Outcome::Applied {
            version,
            index,
            changed: true,
            changes: vec![line],
        },
    }
}

/// Whether a schedule has something left to fire.
fn is_open(s: &Schedule) -> bool {
    match s.state {
        ScheduleState::Pending => true,
        ScheduleState::Fired => s.until_ms.is_some() && s.reversed.is_none(),
        ScheduleState::Failed | ScheduleState::Cancelled => false,
    }
}

/// Keeps every open schedule and the last [`DONE_KEPT`] finished ones.
fn prune(book: &mut Book) {
    let finished = |s: &Schedule| !is_open(s);
    let done = book.schedules.iter().filter(|s| finished(s)).count();
    let mut excess = done.saturating_sub(DONE_KEPT);
    book.schedules.retain(|s| {
        if excess > 0 && finished(s) {
            excess -= 1;
            return false;
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_cluster::Machine;
    use gtm_model::drain::DrainTarget;

    const CONFIG: &str = r#"
[[datacenter]]
name = "east"

[[datacenter]]
name = "west"

[[check]]
name = "gate"
type = "manual"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.10", dc = "east" },
  { ip = "192.0.2.11", dc = "west" },
]
"#;

    fn actor(device: &str) -> Actor {
        Actor {
            user: "admin".into(),
            device: device.into(),
        }
    }

    fn apply(
        machine: &super::super::GtmMachine,
        kv: &mut Map,
        device: &str,
        time_ms: u64,
        action: Action,
    ) -> Outcome {
        let mut command = Command::new(actor(device), None, action);
        command.time_ms = time_ms;
        let index = kv.len() as u64 + 1;
        let effect = machine.apply(kv, index, &command.encode().unwrap());
        for w in effect.writes {
            w.apply_to(kv);
        }
        Outcome::decode(&effect.outcome).unwrap()
    }

    fn configured() -> (super::super::GtmMachine, Map) {
        let machine = super::super::GtmMachine::default();
        let mut kv = Map::new();
        let outcome = apply(
            &machine,
            &mut kv,
            "gtm1",
            1,
            Action::ApplyConfig {
                text: CONFIG.into(),
            },
        );
        assert!(matches!(outcome, Outcome::Applied { changed: true, .. }));
        (machine, kv)
    }

    fn drain_west() -> Action {
        Action::Drain {
            target: DrainTarget::Datacenter {
                name: "west".into(),
            },
            drained: true,
        }
    }

    fn changed(outcome: &Outcome) -> bool {
        matches!(outcome, Outcome::Applied { changed: true, .. })
    }

    /// A schedule's dry run asks the machine as the add itself does: the
    /// same refusals, the same acceptances, and nothing written.
    #[test]
    fn a_dry_run_of_an_add_answers_as_the_add() {
        let (machine, mut kv) = configured();
        let spec = |at_ms, until_ms, action| {
            Action::AddSchedule(Box::new(ScheduleSpec {
                at_ms,
                until_ms,
                action,
            }))
        };
        let nowhere = Action::Drain {
            target: DrainTarget::Datacenter {
                name: "nowhere".into(),
            },
            drained: true,
        };
        let set = |check: &str, state: &str| Action::SetCheck {
            check: check.into(),
            state: state.into(),
        };
        let resume = Action::Resume {
            record: "www.example.test/A".into(),
        };
        for add in [
            spec(10_000, None, nowhere),
            spec(10_000, None, set("gate", "error")),
            spec(10_000, None, set("gate", "maybe")),
            spec(10_000, None, set("absent", "ok")),
            spec(10_000, Some(20_000), resume.clone()),
            spec(10_000, None, resume),
            spec(20_000, Some(10_000), drain_west()),
            spec(10_000, Some(20_000), drain_west()),
        ] {
            let kept = kv.clone();
            let checked =
                machine.check_schedule(&kv, &Command::new(actor("gtm1"), None, add.clone()));
            assert_eq!(kv, kept, "{add:?}: a dry run writes nothing");
            match (
                checked,
                apply(&machine, &mut kv, "gtm1", 5_000, add.clone()),
            ) {
                (Err(e), Outcome::Rejected(r)) => {
                    assert_eq!((e.error, e.message), (r.error, r.message), "{add:?}")
                }
                (Ok(()), Outcome::Applied { changed: true, .. }) => {}
                (checked, applied) => panic!("{add:?}: {checked:?} but {applied:?}"),
            }
        }
    }

    #[test]
    fn a_schedule_fires_once_and_its_reverse_once() {
        let (machine, mut kv) = configured();
        let add = Action::AddSchedule(Box::new(ScheduleSpec {
            at_ms: 10_000,
            until_ms: Some(20_000),
            action: drain_west(),
        }));
        assert!(changed(&apply(&machine, &mut kv, "gtm1", 5_000, add)));
        let fire = |reverse| Action::FireSchedule { id: 1, reverse };

        // Not due yet by the command's time: nothing.
        assert!(!changed(&apply(
            &machine,
            &mut kv,
            "gtm1",
            9_000,
            fire(false)
        )));
        assert!(operator::state_of(&kv).drains.is_empty());

        // Two leaders in a row propose it: applied by the first only.
        assert!(changed(&apply(
            &machine,
            &mut kv,
            "gtm1",
            15_000,
            fire(false)
        )));
        assert!(!changed(&apply(
            &machine,
            &mut kv,
            "gtm2",
            15_100,
            fire(false)
        )));
        let state = operator::state_of(&kv);
        assert_eq!(state.drains.len(), 1);
        assert_eq!(state.drains[0].actor.user, "schedule 1 of admin");
        let firings: Vec<_> = state
            .recent
            .iter()
            .filter(|r| {
                r.text
                    .contains("schedule 1 (created by admin on gtm1) fired")
            })
            .collect();
        assert_eq!(firings.len(), 1, "{:?}", state.recent);
        assert!(firings[0].text.contains("on gtm1"), "{}", firings[0].text);
        assert!(firings[0].text.contains("5 s late"), "{}", firings[0].text);
        let s = &book_of(&kv).schedules[0];
        assert_eq!(s.state, ScheduleState::Fired);
        assert_eq!(s.fired.as_ref().unwrap().late_ms, 5_000);

        // The reverse at `until`, once.
        assert!(!changed(&apply(
            &machine,
            &mut kv,
            "gtm2",
            19_000,
            fire(true)
        )));
        assert!(changed(&apply(
            &machine,
            &mut kv,
            "gtm2",
            20_000,
            fire(true)
        )));
        assert!(!changed(&apply(
            &machine,
            &mut kv,
            "gtm1",
            20_001,
            fire(true)
        )));
        assert!(operator::state_of(&kv).drains.is_empty());
        let s = &book_of(&kv).schedules[0];
        assert_eq!(s.reversed.as_ref().unwrap().device, "gtm2");
        assert_eq!(s.due(u64::MAX), None);
    }

    #[test]
    fn cancelled_schedules_never_fire_and_failures_are_recorded() {
        let (machine, mut kv) = configured();
        let add = |action| {
            Action::AddSchedule(Box::new(ScheduleSpec {
                at_ms: 10_000,
                until_ms: None,
                action,
            }))
        };
        apply(&machine, &mut kv, "gtm1", 1, add(drain_west()));
        assert!(changed(&apply(
            &machine,
            &mut kv,
            "gtm1",
            2,
            Action::CancelSchedule { id: 1 }
        )));
        assert!(!changed(&apply(
            &machine,
            &mut kv,
            "gtm1",
            11_000,
            Action::FireSchedule {
                id: 1,
                reverse: false
            }
        )));
        assert!(operator::state_of(&kv).drains.is_empty());
        assert_eq!(book_of(&kv).schedules[0].state, ScheduleState::Cancelled);

        // An undrain of nothing drained: recorded as skipped, nothing else.
        let undrain = Action::Drain {
            target: DrainTarget::Datacenter {
                name: "west".into(),
            },
            drained: false,
        };
        apply(&machine, &mut kv, "gtm1", 3, add(undrain));
        assert!(changed(&apply(
            &machine,
            &mut kv,
            "gtm2",
            10_000,
            Action::FireSchedule {
                id: 2,
                reverse: false
            }
        )));
        let s = &book_of(&kv).schedules[1];
        assert_eq!(s.state, ScheduleState::Failed);
        assert!(s.fired.as_ref().unwrap().result.contains("is not drained"));
        let last = operator::state_of(&kv).recent.pop().unwrap();
        assert!(
            last.text
                .contains("schedule 2 (created by admin on gtm1) skipped on gtm2")
        );

        // Refused when added: an unknown datacenter, a reverse of a resume,
        // until before at.
        for (action, until, text) in [
            (
                Action::Drain {
                    target: DrainTarget::Datacenter {
                        name: "north".into(),
                    },
                    drained: true,
                },
                None,
                "no datacenter named \"north\"",
            ),
            (
                Action::Resume {
                    record: "www.example.test/A".into(),
                },
                Some(20_000),
                "a resume has no reverse",
            ),
            (drain_west(), Some(5_000), "--until must be after --at"),
        ] {
            let outcome = apply(
                &machine,
                &mut kv,
                "gtm1",
                4,
                Action::AddSchedule(Box::new(ScheduleSpec {
                    at_ms: 10_000,
                    until_ms: until,
                    action,
                })),
            );
            match outcome {
                Outcome::Rejected(e) => assert!(e.message.contains(text), "{}", e.message),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(book_of(&kv).schedules.len(), 2);
    }

    #[test]
    fn a_check_set_until_restores_the_previous_state() {
        let (machine, mut kv) = configured();
        let set = |state: &str| Action::SetCheck {
            check: "gate".into(),
            state: state.into(),
        };
        apply(&machine, &mut kv, "gtm1", 1, set("error"));
        apply(
            &machine,
            &mut kv,
            "gtm1",
            2,
            Action::AddSchedule(Box::new(ScheduleSpec {
                at_ms: 10,
                until_ms: Some(20),
                action: set("ok"),
            })),
        );
        let fire = |reverse| Action::FireSchedule { id: 1, reverse };
        apply(&machine, &mut kv, "gtm1", 10, fire(false));
        assert_eq!(operator::state_of(&kv).checks["gate"].state, "ok");
        apply(&machine, &mut kv, "gtm1", 20, fire(true));
        assert_eq!(operator::state_of(&kv).checks["gate"].state, "error");
    }
}
