//! Runs the check instances of the current configuration.
//!
//! One task per instance. The first probe starts after a random offset
//! within the interval (at most one second, so a new address is decided
//! quickly), so a thousand checks do not fire together; afterwards probes start on a fixed schedule, start to
//! start, and a slow probe never stretches it: a probe is bounded by its
//! timeout, which validation keeps within the interval, and a start that
//! falls due while a probe still runs is skipped, never queued. A semaphore
//! bounds how many probes run at once. When the configuration changes,
//! removed and changed instances stop at once and new ones start.

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::{sync::Semaphore, task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    probe::{Prober, Target},
    probe_spec, target_of,
};
use crate::{
    engine::{Engine, Instance},
    model::config::CheckType,
    resolve::CheckState,
};

/// Follows the engine's check instances until `cancel`.
pub async fn run(
    engine: Arc<Engine>,
    prober: Arc<Prober>,
    datacenter: String,
    max_concurrent: usize,
    cancel: CancellationToken,
) {
    let mut instances = engine.instances();
    let permits = Arc::new(Semaphore::new(max_concurrent.max(1)));
    let mut running: HashMap<String, (Instance, CancellationToken, JoinHandle<()>)> =
        HashMap::new();
    loop {
        let wanted = instances.borrow_and_update().clone();
        let mut keep = HashMap::new();
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
                engine.set_check(
                    &instance.check,
                    CheckState::NoData,
                    &format!(
                        "runs in {}; no report from there",
                        instance.spec.raw.run_on.as_deref().unwrap_or("?")
                    ),
                );
                continue;
            }
            let token = cancel.child_token();
            let task = tokio::spawn(probe_loop(
                engine.clone(),
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

async fn probe_loop(
    engine: Arc<Engine>,
    prober: Arc<Prober>,
    permits: Arc<Semaphore>,
    instance: Instance,
    cancel: CancellationToken,
) {
    let spec = probe_spec(&instance.spec);
    let target: Target = target_of(&instance);
    let interval = instance.spec.interval;
    let spread = interval.min(Duration::from_secs(1));
    let offset = Duration::from_millis(fastrand::u64(0..spread.as_millis().max(1) as u64));
    let mut next = Instant::now() + offset;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = cancel.cancelled() => return,
        }
        let outcome = {
            let Ok(_permit) = permits.acquire().await else {
                return;
            };
            tokio::select! {
                outcome = prober.probe(&spec, &target) => outcome,
                _ = cancel.cancelled() => return,
            }
        };
        if cancel.is_cancelled() {
            return; // the configuration changed while this probe ran
        }
        engine
            .probe_metrics()
            .observe(&instance.check.to_string(), outcome.elapsed);
        engine.probe_result(&instance.check, outcome.ok, outcome.reason);
        next += interval;
        let now = Instant::now();
        while next <= now {
            next += interval; // skip starts missed while waiting for a permit
        }
    }
}
