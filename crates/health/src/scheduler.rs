//! Runs the check instances of the current configuration.
//!
//! One task per instance. The first probe starts after a random offset
//! within the interval (at most one second, so a new address is decided
//! quickly), so a thousand checks do not fire together; afterwards probes start on a fixed schedule, start to
//! start, and a slow probe never stretches it: a probe is bounded by its
//! timeout, which validation keeps within the interval, and a start that
//! falls due while a probe still runs is skipped, never queued. A semaphore
//! bounds how many probes run at once. When the configuration changes,
//! removed and changed instances stop at once and new ones start; unchanged
//! ones go on, and an unchanged instance run in another datacenter is not
//! marked No Data again (its state comes from that datacenter's reports).
//!
//! The scheduler reads instances from a watch channel and hands results to
//! a [`ResultSink`] (the engine): it knows nothing of what consumes them.

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::{
    sync::{Semaphore, watch},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::{
    Instance,
    probe::{Prober, Session, Target},
    probe_spec, target_of,
};
use gtm_model::{compile::CheckSpec, condition::CheckRef, config::CheckType};

/// Where probe results go.
pub trait ResultSink: Send + Sync + 'static {
    /// One probe of `check` ended (`ok`, why, and how long it took).
    fn probe_result(&self, check: &CheckRef, ok: bool, reason: String, elapsed: Duration);
    /// `check` runs in another datacenter: this device has no data of its
    /// own for it (reports from there judge it).
    fn runs_elsewhere(&self, check: &CheckRef, reason: &str);
}

/// Follows the check instances of `instances` until `cancel` (or until the
/// sender is gone).
pub async fn run<S: ResultSink>(
    mut instances: watch::Receiver<Arc<Vec<Instance>>>,
    sink: Arc<S>,
    prober: Arc<Prober>,
    datacenter: String,
    max_concurrent: usize,
    cancel: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(max_concurrent.max(1)));
    let mut running: HashMap<String, (Instance, CancellationToken, JoinHandle<()>)> =
        HashMap::new();
    // Instances run elsewhere, as last marked: an unchanged one is not
    // marked again (that would reset the state its reports gave it).
    let mut elsewhere: HashMap<String, CheckSpec> = HashMap::new();
    loop {
        let wanted = instances.borrow_and_update().clone();
        let mut keep = HashMap::new();
        let mut still_elsewhere = HashMap::new();
        for instance in wanted.iter() {
            let key = instance.check.to_string();
            if let Some((old, token, task)) = running.remove(&key) {
                if old == *instance {
                    keep.insert(key, (old, token, task));
                    continue;
                }
                token.cancel();
            }
            if instance.spec.kind == CheckType::Manual {
                continue;
            }
            let runs_here = match instance.spec.run_on {
                None => true,
                Some(_) => instance.spec.raw.run_on.as_deref() == Some(datacenter.as_str()),
            };
            if !runs_here {
                // The engine keeps the state of an instance whose spec did
                // not change: so does this.
                let marked = elsewhere.remove(&key);
                still_elsewhere.insert(key, instance.spec.clone());
                if marked.is_some_and(|m| m.same_check(&instance.spec)) {
                    continue;
                }
                sink.runs_elsewhere(
                    &instance.check,
                    &format!(
                        "runs in {}; no report from there",
                        instance.spec.raw.run_on.as_deref().unwrap_or("?")
                    ),
                );
                continue;
            }
            let token = cancel.child_token();
            let task = tokio::spawn(probe_loop(
                sink.clone(),
                prober.clone(),
                permits.clone(),
                instance.clone(),
                token.clone(),
            ));
            keep.insert(key, (instance.clone(), token, task));
        }
        for (_, (_, token, _)) in running.drain() {
            token.cancel();
        }
        running = keep;
        elsewhere = still_elsewhere;
        tokio::select! {
            changed = instances.changed() => if changed.is_err() { break },
            _ = cancel.cancelled() => break,
        }
    }
    for (_, (_, token, task)) in running {
        token.cancel();
        let _ = task.await;
    }
}

async fn probe_loop<S: ResultSink>(
    sink: Arc<S>,
    prober: Arc<Prober>,
    permits: Arc<Semaphore>,
    instance: Instance,
    cancel: CancellationToken,
) {
    let spec = probe_spec(&instance);
    let started = Instant::now();
    let target: Target = target_of(&instance);
    let interval = instance.spec.interval;
    let spread = interval.min(Duration::from_secs(1));
    let offset = Duration::from_millis(fastrand::u64(0..spread.as_millis().max(1) as u64));
    let mut next = Instant::now() + offset;
    let mut session = Session::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = cancel.cancelled() => return,
        }
        if prober.waits(&spec, started.elapsed()) {
            // A push check that nobody could have reported to yet.
            next = next_start(next, interval, Instant::now());
            continue;
        }
        let outcome = {
            let Ok(_permit) = permits.acquire().await else {
                return;
            };
            tokio::select! {
                outcome = prober.probe_in(&spec, &target, &mut session) => outcome,
                _ = cancel.cancelled() => return,
            }
        };
        if cancel.is_cancelled() {
            return; // the configuration changed while this probe ran
        }
        sink.probe_result(&instance.check, outcome.ok, outcome.reason, outcome.elapsed);
        next = next_start(next, interval, Instant::now());
    }
}

/// About 30 years: where a start that the clock cannot hold is put.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The first start after `now` on the schedule `prev + k × interval`,
/// skipping starts missed while waiting for a permit. The interval comes
/// from configuration, so the sum is checked: an interval the clock cannot
/// add is scheduled far in the future instead of overflowing `Instant`.
fn next_start(prev: Instant, interval: Duration, now: Instant) -> Instant {
    // Validation refuses a zero interval; the floor keeps the loop finite anyway.
    let interval = interval.max(Duration::from_millis(1));
    let far = now.checked_add(FAR_FUTURE).unwrap_or(now);
    let mut next = prev.checked_add(interval).unwrap_or(far);
    while next <= now {
        next = next.checked_add(interval).unwrap_or(far);
        if next == far {
            break;
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_start_keeps_the_schedule_and_skips_missed_starts() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(next_start(t0, s(5), t0), t0 + s(5));
        assert_eq!(next_start(t0, s(5), t0 + s(12)), t0 + s(15));
        assert_eq!(next_start(t0, s(5), t0 + s(15)), t0 + s(20));
    }

    #[test]
    fn next_start_never_overflows_the_clock() {
        let t0 = Instant::now();
        assert_eq!(next_start(t0, Duration::MAX, t0), t0 + FAR_FUTURE);
        let longest = Duration::from_millis(u64::MAX); // the longest Interval parses to
        assert!(next_start(t0, longest, t0) > t0);
        assert!(next_start(t0, Duration::ZERO, t0) > t0);
    }
}
