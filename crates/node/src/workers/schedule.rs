//! The `schedule` worker: firing scheduled operator actions
//! (docs/cluster.md, "Scheduled changes").
//!
//! The schedules are replicated state ([`crate::machine::schedule`]). The
//! leader, or a device in no cluster, looks at them twice a second and
//! proposes one [`Action::FireSchedule`] per due schedule, stamped with its
//! clock; the state machine applies the action and marks the schedule fired
//! in that one command, so a firing proposed twice (two leaders in a row)
//! applies once. A leader that sees no quorum proposes nothing (and a
//! proposal that fails is tried again on the next look), so a schedule
//! fires when quorum returns, late, and its event says how late.
//!
//! A schedule added without `--force` is judged on every device before it
//! fires ([`crate::judge`]): when its firing would leave a record with no
//! answer on some device, the leader proposes [`Action::SkipSchedule`]
//! instead, naming the records and the devices.

use std::{collections::HashMap, sync::Arc, time::Duration};

use crate::{
    command::Action,
    judge::{Judge, WhatIf},
    machine::schedule::{Schedule, book_of, firing_action},
};
use gtm_model::{actor::Actor, clock::now_ms};

/// How often the firing device looks for due schedules.
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The name firings act as (with the firing device), in history and logs.
pub const FIRING_USER: &str = "scheduler";

/// Fires due schedules while this device leads (or is in no cluster), until
/// `stop`.
pub async fn run(judge: Arc<Judge>, device: String, stop: tokio_util::sync::CancellationToken) {
    let replication = &judge.replication;
    // The last failure logged per schedule: logged again only when it
    // changes, not twice a second while quorum is away.
    let mut failing: HashMap<(u64, bool), String> = HashMap::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stop.cancelled() => return,
        }
        // A leader without quorum proposes nothing: its entry would wait in
        // its log and commit when quorum returns, stamped with a time long
        // past, hiding how late the schedule really fired.
        if !replication.proposes_for_cluster() {
            failing.clear();
            continue;
        }
        let now = now_ms();
        let due: Vec<(Schedule, bool)> = book_of(&*replication.state().await)
            .schedules
            .into_iter()
            .filter_map(|s| s.due(now).map(|reverse| (s, reverse)))
            .collect();
        for (schedule, reverse) in due {
            let id = schedule.id;
            let actor = Actor {
                user: FIRING_USER.into(),
                device: device.clone(),
            };
            let action = match skip_why(&judge, &schedule, reverse).await {
                Some(why) => Action::SkipSchedule { id, reverse, why },
                None => Action::FireSchedule { id, reverse },
            };
            match replication.propose(actor, None, action).await {
                Ok(_) => {
                    failing.remove(&(id, reverse));
                }
                Err(e) => {
                    let why = e.to_string();
                    if failing.get(&(id, reverse)) != Some(&why) {
                        tracing::warn!(schedule = id, reverse, error = %why, "a due schedule could not fire yet; trying again");
                        failing.insert((id, reverse), why);
                    }
                }
            }
        }
    }
}

/// Why a due firing is skipped: it is not forced, and it would leave a
/// record with no answer on some device. `None` fires it (a firing that
/// cannot be judged here fires, and the state machine says if it cannot
/// be applied).
async fn skip_why(judge: &Judge, schedule: &Schedule, reverse: bool) -> Option<String> {
    if schedule.force {
        return None;
    }
    let what = firing_action(schedule, reverse).and_then(|a| WhatIf::of(&a))?;
    let judgement = judge.judge(&what).await.ok()?;
    let emptied = judgement.emptied_sentence()?;
    Some(format!(
        "{emptied} (the schedule was not added with --force)"
    ))
}
