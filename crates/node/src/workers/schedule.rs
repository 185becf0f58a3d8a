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

use std::{collections::HashMap, sync::Arc, time::Duration};

use crate::{command::Action, machine::schedule::book_of, replication::Replication};
use gtm_model::{actor::Actor, clock::now_ms};

/// How often the firing device looks for due schedules.
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The name firings act as (with the firing device), in history and logs.
pub const FIRING_USER: &str = "scheduler";

/// Fires due schedules while this device leads (or is in no cluster), until
/// `stop`.
pub async fn run(
    replication: Arc<Replication>,
    device: String,
    stop: tokio_util::sync::CancellationToken,
) {
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
        let due: Vec<(u64, bool)> = book_of(&*replication.state().await)
            .schedules
            .iter()
            .filter_map(|s| s.due(now).map(|reverse| (s.id, reverse)))
            .collect();
        for (id, reverse) in due {
            let actor = Actor {
                user: FIRING_USER.into(),
                device: device.clone(),
            };
            match replication
                .propose(actor, None, Action::FireSchedule { id, reverse })
                .await
            {
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
