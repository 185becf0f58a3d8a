//! A thread for work that must not hold back Raft or DNS.
//!
//! Applying a command can mean validating a large configuration, and
//! installing it means building its answers: seconds of CPU on a big
//! configuration. On the blocking pool that work competes as an equal with
//! the runtime's threads and the DNS workers, and on a machine with few
//! cores the heartbeats it delays cost the leadership (a follower that
//! misses them calls an election). A [`LowPriority`] thread runs such work
//! at nice [`NICE`], so the scheduler gives heartbeats, RPCs and answers
//! the CPU first. Jobs run one at a time, in the order given.

use std::io;
use std::sync::mpsc;

/// The nice value of a low-priority thread (0 is normal, 19 the lowest).
pub const NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

/// One named thread at nice [`NICE`]; it ends when this is dropped (after
/// the jobs already given).
#[derive(Debug)]
pub struct LowPriority {
    jobs: mpsc::Sender<Job>,
}

impl LowPriority {
    /// Starts the thread, named `name` (as `top -H` shows it).
    pub fn spawn(name: &str) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                lower_this_thread();
                while let Ok(job) = queue.recv() {
                    job();
                }
            })?;
        Ok(Self { jobs })
    }

    /// Runs `work` on the thread and waits for its result; `None` when the
    /// thread is gone (a job before this one panicked).
    /// Gives the thread `work` without waiting for it; false when the
    /// thread is gone.
    pub fn submit(&self, work: impl FnOnce() + Send + 'static) -> bool {
        self.jobs.send(Box::new(work)).is_ok()
    }

    pub async fn run<R: Send + 'static>(
        &self,
        work: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = done.send(work());
        });
        self.jobs.send(job).ok()?;
        result.await.ok()
    }
}

/// Lowers the calling thread's priority: on Linux the nice value is per
/// thread, and `PRIO_PROCESS` with a thread id sets that thread's. A
/// failure leaves the thread at normal priority, logged.
fn lower_this_thread() {
    // SAFETY: plain system calls on the calling thread's own id; no memory
    // is shared with them.
    let (tid, r) = unsafe {
        let tid = libc::gettid();
        (
            tid,
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICE),
        )
    };
    if r != 0 {
        tracing::warn!(
            thread = tid,
            error = %io::Error::last_os_error(),
            "cannot lower this thread's priority; it runs at normal priority"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_work_in_order_on_one_lowered_thread() {
        let worker = LowPriority::spawn("test-low").expect("spawn");
        let first = worker
            .run(|| {
                // SAFETY: reads the calling thread's own nice value.
                let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as _) };
                (std::thread::current().name().map(str::to_string), nice)
            })
            .await;
        assert_eq!(first, Some((Some("test-low".to_string()), NICE)));
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let runs = (0..5).map(|i| {
            let order = order.clone();
            worker.run(move || order.lock().unwrap().push(i))
        });
        for r in runs {
            assert_eq!(r.await, Some(()));
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }
}
