//! The device's workers by name: every long-running task registers here and
//! reports its state, so that `gtm status`, `/health` and `/metrics` show
//! what runs, what failed and why, and `stop` can wait for all of them.
//!
//! Two kinds of worker:
//! - a task the registry runs ([`Workers::spawn`], [`Workers::spawn_restarting`]):
//!   it must run until the registry's token is cancelled. One that ends
//!   before (it returned, or panicked in a debug build: a release build
//!   aborts) is `failed` with the reason, and the device is degraded while
//!   it is; a restarting one is started again after a back-off, counted in
//!   its `restarts`;
//! - a component with threads or a life of its own (the DNS listeners,
//!   Raft, the store), [`Workers::watch`]ed: its state is read from it when
//!   asked.

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures_util::FutureExt;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What a worker is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkerState {
    /// Running (or waiting for its next piece of work).
    Running,
    /// Deliberately not working here: e.g. a task that only runs while this
    /// device leads, or a component that is not in use.
    Idle,
    /// Ended, or broken, without being asked to stop: the device is degraded
    /// while a worker is failed.
    Failed,
    /// Ended because the device stops.
    Stopped,
}

impl std::fmt::Display for WorkerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Running => "running",
            Self::Idle => "idle",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        })
    }
}

/// One worker, as `gtm status --json` and the API show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkerInfo {
    pub name: String,
    pub state: WorkerState,
    /// How many times it was started again after it failed.
    #[serde(default)]
    pub restarts: u64,
    /// How many times it failed (or reported an error) since the device
    /// started.
    #[serde(default)]
    pub errors: u64,
    /// The last failure or error, kept after a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// What a watched component says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub state: WorkerState,
    pub error: Option<String>,
}

impl Observed {
    pub fn running() -> Self {
        Self {
            state: WorkerState::Running,
            error: None,
        }
    }

    pub fn idle() -> Self {
        Self {
            state: WorkerState::Idle,
            error: None,
        }
    }

    pub fn stopped() -> Self {
        Self {
            state: WorkerState::Stopped,
            error: None,
        }
    }

    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            state: WorkerState::Failed,
            error: Some(error.into()),
        }
    }
}

type Observe = Box<dyn Fn() -> Observed + Send + Sync>;

/// A task's state, written by the task's wrapper.
#[derive(Debug)]
struct Slot {
    info: Mutex<WorkerInfo>,
}

impl Slot {
    fn update(&self, f: impl FnOnce(&mut WorkerInfo)) {
        f(&mut self.info.lock().unwrap_or_else(|p| p.into_inner()));
    }

    fn get(&self) -> WorkerInfo {
        self.info.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

enum Kind {
    Task {
        slot: Arc<Slot>,
        handle: Option<JoinHandle<()>>,
    },
    Watched {
        /// Counts a change to failed once, and keeps the last error after
        /// the component recovers.
        seen: Mutex<WorkerInfo>,
        observe: Observe,
    },
}

/// The registry of a device's workers, with their one cancellation token.
pub struct Workers {
    cancel: CancellationToken,
    entries: Mutex<Vec<Kind>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("workers", &self.list())
            .finish()
    }
}

/// The first wait before a failed worker is started again; doubled each
/// time, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl Default for Workers {
    fn default() -> Self {
        Self::new()
    }
}

impl Workers {
    pub fn new() -> Self {
        Self {
            cancel: CancellationToken::new(),
            entries: Mutex::new(Vec::new()),
        }
    }

    /// The token every worker stops on.
    pub fn token(&self) -> CancellationToken {
        self.cancel.child_token()
    }

    /// Runs `work` on `runtime` as the worker `name`. It must run until the
    /// token is cancelled; if it ends before, it is failed for good.
    pub fn spawn<F>(&self, runtime: &tokio::runtime::Handle, name: &str, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut once = Some(work);
        self.spawn_restarting(runtime, name, 0, move || once.take());
    }

    /// Runs what `make` gives as the worker `name`; when it ends before the
    /// token is cancelled, it is failed, and `make` is called again after a
    /// back-off, at most `restarts` times (`None` from `make`: it cannot be
    /// made again, and stays failed).
    pub fn spawn_restarting<M, F>(
        &self,
        runtime: &tokio::runtime::Handle,
        name: &str,
        restarts: u64,
        mut make: M,
    ) where
        M: FnMut() -> Option<F> + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let slot = Arc::new(Slot {
            info: Mutex::new(WorkerInfo {
                name: name.to_string(),
                state: WorkerState::Running,
                restarts: 0,
                errors: 0,
                last_error: None,
            }),
        });
        let (task_slot, cancel, name) = (slot.clone(), self.cancel.clone(), name.to_string());
        let handle = runtime.spawn(async move {
            let slot = task_slot;
            let mut backoff = FIRST_BACKOFF;
            while let Some(work) = make() {
                slot.update(|i| i.state = WorkerState::Running);
                let ended = AssertUnwindSafe(work).catch_unwind().await;
                if cancel.is_cancelled() {
                    break;
                }
                let why = match ended {
                    Ok(()) => "it ended without being asked to stop".to_string(),
                    Err(panic) => format!("it panicked: {}", panic_text(&*panic)),
                };
                tracing::error!(worker = %name, reason = %why, "a worker failed: the device is degraded");
                slot.update(|i| {
                    i.state = WorkerState::Failed;
                    i.errors += 1;
                    i.last_error = Some(why);
                });
                if slot.get().restarts >= restarts {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = cancel.cancelled() => break,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                slot.update(|i| i.restarts += 1);
                tracing::warn!(worker = %name, "restarting a failed worker");
            }
            slot.update(|i| {
                if i.state != WorkerState::Failed || cancel.is_cancelled() {
                    i.state = WorkerState::Stopped;
                }
            });
        });
        self.push(Kind::Task {
            slot,
            handle: Some(handle),
        });
    }

    /// Registers a component whose state `observe` reads from it.
    pub fn watch(&self, name: &str, observe: impl Fn() -> Observed + Send + Sync + 'static) {
        self.push(Kind::Watched {
            seen: Mutex::new(WorkerInfo {
                name: name.to_string(),
                state: WorkerState::Running,
                restarts: 0,
                errors: 0,
                last_error: None,
            }),
            observe: Box::new(observe),
        });
    }

    fn push(&self, kind: Kind) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(kind);
    }

    /// Every worker, in the order they were registered.
    pub fn list(&self) -> Vec<WorkerInfo> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .map(|kind| match kind {
                Kind::Task { slot, .. } => slot.get(),
                Kind::Watched { seen, observe } => {
                    let now = observe();
                    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                    if now.state == WorkerState::Failed && seen.state != WorkerState::Failed {
                        seen.errors += 1;
                    }
                    seen.state = now.state;
                    if now.error.is_some() {
                        seen.last_error = now.error;
                    }
                    seen.clone()
                }
            })
            .collect()
    }

    /// The workers failed now.
    pub fn failed(&self) -> Vec<WorkerInfo> {
        self.list()
            .into_iter()
            .filter(|w| w.state == WorkerState::Failed)
            .collect()
    }

    /// Whether the worker `name` is registered and not failed.
    pub fn up(&self, name: &str) -> bool {
        self.list()
            .iter()
            .any(|w| w.name == name && w.state != WorkerState::Failed)
    }

    /// Cancels the token and waits, until `deadline` at most, for every task
    /// to end. Returns the names of those that did not (they are aborted).
    pub async fn stop(&self, deadline: Duration) -> Vec<String> {
        self.cancel.cancel();
        let tasks: Vec<(Arc<Slot>, JoinHandle<()>)> = {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            entries
                .iter_mut()
                .filter_map(|kind| match kind {
                    Kind::Task { slot, handle } => Some((slot.clone(), handle.take()?)),
                    Kind::Watched { .. } => None,
                })
                .collect()
        };
        let until = tokio::time::Instant::now() + deadline;
        let mut late = Vec::new();
        for (slot, mut handle) in tasks {
            if tokio::time::timeout_at(until, &mut handle).await.is_err() {
                handle.abort();
                late.push(slot.get().name);
            }
        }
        late
    }
}

/// A registry dropped without a stop (a start-up that failed half-way)
/// still stops what it started.
impl Drop for Workers {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (bounded) until `name` is in `state`.
    async fn until(workers: &Workers, name: &str, state: WorkerState) -> WorkerInfo {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let info = workers.list().into_iter().find(|w| w.name == name);
            if let Some(info) = info.filter(|w| w.state == state) {
                return info;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} never became {state}: {:?}",
                workers.list()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_worker_that_ends_early_is_failed_and_one_asked_to_stop_is_stopped() {
        let workers = Workers::new();
        let rt = tokio::runtime::Handle::current();
        let token = workers.token();
        workers.spawn(&rt, "waits", async move { token.cancelled().await });
        workers.spawn(&rt, "returns", async {});
        let failed = until(&workers, "returns", WorkerState::Failed).await;
        assert_eq!(failed.errors, 1);
        assert!(
            failed
                .last_error
                .as_deref()
                .unwrap()
                .contains("ended without"),
            "{failed:?}"
        );
        assert!(workers.up("waits"));
        assert!(!workers.up("returns"));
        assert!(!workers.up("absent"));
        assert_eq!(workers.failed().len(), 1);
        assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
        assert_eq!(
            until(&workers, "waits", WorkerState::Stopped).await.errors,
            0
        );
        // Failed before the stop: it stays so.
        until(&workers, "returns", WorkerState::Failed).await;
    }

    #[tokio::test]
    async fn a_panicking_worker_is_restarted_and_counted() {
        let workers = Workers::new();
        let rt = tokio::runtime::Handle::current();
        let token = workers.token();
        let mut runs = 0;
        workers.spawn_restarting(&rt, "flaky", 3, move || {
            runs += 1;
            let (token, run) = (token.clone(), runs);
            Some(async move {
                if run == 1 {
                    panic!("first run");
                }
                token.cancelled().await
            })
        });
        let info = loop {
            let info = until(&workers, "flaky", WorkerState::Running).await;
            if info.restarts == 1 {
                break info;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(info.errors, 1);
        assert_eq!(info.last_error.as_deref(), Some("it panicked: first run"));
        assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
        until(&workers, "flaky", WorkerState::Stopped).await;
    }

    #[tokio::test]
    async fn stop_names_a_worker_that_does_not_stop() {
        let workers = Workers::new();
        let rt = tokio::runtime::Handle::current();
        workers.spawn(&rt, "stubborn", std::future::pending::<()>());
        assert_eq!(
            workers.stop(Duration::from_millis(50)).await,
            vec!["stubborn".to_string()]
        );
    }

    #[tokio::test]
    async fn a_dropped_registry_stops_its_workers() {
        let workers = Workers::new();
        let rt = tokio::runtime::Handle::current();
        let (token, (told, mut stopped)) = (workers.token(), tokio::sync::oneshot::channel());
        workers.spawn(&rt, "waits", async move {
            token.cancelled().await;
            let _ = told.send(());
        });
        drop(workers);
        tokio::time::timeout(Duration::from_secs(10), &mut stopped)
            .await
            .expect("the worker never stopped")
            .expect("the worker ended without saying so");
    }

    #[test]
    fn a_watched_component_reports_what_it_says_and_keeps_its_last_error() {
        let broken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers = Workers::new();
        let b = broken.clone();
        workers.watch("raft", move || {
            if b.load(std::sync::atomic::Ordering::Relaxed) {
                Observed::failed("disk on fire")
            } else {
                Observed::running()
            }
        });
        assert_eq!(workers.list()[0].state, WorkerState::Running);
        broken.store(true, std::sync::atomic::Ordering::Relaxed);
        workers.list();
        let failed = workers.list().remove(0);
        assert_eq!(failed.state, WorkerState::Failed);
        assert_eq!(failed.errors, 1, "one failure, however often it is read");
        broken.store(false, std::sync::atomic::Ordering::Relaxed);
        let back = workers.list().remove(0);
        assert_eq!(back.state, WorkerState::Running);
        assert_eq!(back.last_error.as_deref(), Some("disk on fire"));
    }
}
