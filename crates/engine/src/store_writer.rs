//! The storage writer: one thread that persists the event log and the
//! health decisions, so that no storage I/O runs under the engine's lock
//! (probe threads in `SCHED_IDLE` take that lock too: a slow or stuck disk
//! would otherwise hold up every health change and operator action).
//!
//! It also watches the data filesystem, because sled cannot live through a
//! full disk: once one of its writes fails, every later one fails too until
//! the store is opened again. So the device never lets its store get there.
//! When free space falls under [`MIN_FREE`] (or the filesystem turns
//! read-only) the device is degraded: the reserve file is deleted so that
//! what the store is writing still fits, new events and health decisions
//! are kept in memory (bounded), and the API refuses writes. When space
//! returns, the reserve is made again, the kept writes are written and the
//! condition clears by itself.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, mpsc},
    thread::JoinHandle,
    time::Duration,
};

use serde::{Deserialize, Serialize};

use gtm_cluster::Store;

/// The reserve file in the data directory: space given back to the store
/// when the filesystem fills up.
pub const RESERVE_FILE: &str = "storage-reserve";
/// The reserve's size.
pub const RESERVE_BYTES: u64 = 4 << 20;
/// Under this much free space the device is degraded.
pub const MIN_FREE: u64 = 4 << 20;
/// How often the filesystem is looked at, and a failed write retried.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Writes kept in memory while degraded; the oldest events go beyond.
const KEPT_MAX: usize = 100_000;
/// Writes taken at once, then flushed together.
const BATCH_MAX: usize = 4096;

/// Why the device cannot write its store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StorageFault {
    /// The data directory.
    pub path: String,
    /// What the operating system said, or how little space is left.
    pub error: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub since_ms: u64,
    /// Events and health decisions waiting to be written.
    pub pending: usize,
}

impl std::fmt::Display for StorageFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot write {}: {} ({} write(s) kept in memory until space returns)",
            self.path, self.error, self.pending
        )
    }
}

enum Op {
    Event {
        seq: u64,
        time_ms: u64,
        bytes: Vec<u8>,
    },
    Health {
        check: String,
        bytes: Vec<u8>,
    },
    /// Answered once everything sent before is written and flushed (or
    /// kept).
    Barrier(mpsc::SyncSender<()>),
}

/// The handle the engine sends writes through.
#[derive(Debug)]
pub struct StoreWriter {
    tx: Mutex<Option<mpsc::Sender<Op>>>,
    fault: Arc<Mutex<Option<StorageFault>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Becomes true when a device that started on a copy of its store
    /// (read-only data directory) can write its own store again.
    reopened: tokio::sync::watch::Receiver<bool>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Event { .. } => "Event",
            Op::Health { .. } => "Health",
            Op::Barrier(_) => "Barrier",
        })
    }
}

impl StoreWriter {
    /// Starts the writer thread for `store`, whose data directory is `dir`.
    /// `on_copy`: `store` is a copy of the store in `dir`, which was
    /// read-only at start-up (docs/cluster.md): nothing is written to the
    /// copy; what is logged waits in memory until `dir` can be written, is
    /// then written to the store in `dir`, and [`Self::reopened`] turns true
    /// (the device then restarts on that store).
    pub fn start(store: Store, dir: PathBuf, on_copy: bool) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let fault = Arc::new(Mutex::new(None));
        let (reopened_tx, reopened) = tokio::sync::watch::channel(false);
        let mut writer = Writer {
            store,
            dir,
            fault: fault.clone(),
            kept: VecDeque::new(),
            dropped: 0,
            on_copy,
            unflushed: false,
            reopened: reopened_tx,
        };
        // Before anything is logged or refused: the device is degraded from
        // its first moment if it has to be.
        writer.look();
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(rx))?;
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            fault,
            thread: Mutex::new(Some(thread)),
            reopened,
        })
    }

    /// Turns true once a device that started on a copy of its store can
    /// write its own store again (it never does otherwise).
    pub fn reopened(&self) -> tokio::sync::watch::Receiver<bool> {
        self.reopened.clone()
    }

    fn send(&self, op: Op) {
        if let Some(tx) = &*self.tx.lock().unwrap_or_else(|e| e.into_inner()) {
            // The thread only ends when it is closed.
            let _ = tx.send(op);
        }
    }

    /// Writes what is queued (or keeps it, while degraded) and releases the
    /// store; later writes are dropped. For a device that stops.
    pub fn close(&self) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    pub fn event(&self, seq: u64, time_ms: u64, bytes: Vec<u8>) {
        self.send(Op::Event {
            seq,
            time_ms,
            bytes,
        });
    }

    pub fn health(&self, check: String, bytes: Vec<u8>) {
        self.send(Op::Health { check, bytes });
    }

    /// Waits until every write sent before is in the store (or kept in
    /// memory while degraded): readers of the store see what was logged.
    pub fn barrier(&self) {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(Op::Barrier(tx));
        let _ = rx.recv_timeout(Duration::from_secs(10));
    }

    /// Why the store cannot be written now, if it cannot.
    pub fn fault(&self) -> Option<StorageFault> {
        self.fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        self.close();
    }
}

struct Writer {
    store: Store,
    dir: PathBuf,
    fault: Arc<Mutex<Option<StorageFault>>>,
    /// Writes not in the store yet, oldest first.
    kept: VecDeque<Op>,
    dropped: u64,
    /// `store` is a copy of the read-only store in `dir`, never written.
    on_copy: bool,
    /// Written since the last flush.
    unflushed: bool,
    /// Set once the store in `dir` replaced the copy.
    reopened: tokio::sync::watch::Sender<bool>,
}

impl Writer {
    /// Writes what is sent, a batch at a time: everything waiting is
    /// written, then flushed once (so a write is durable moments after it
    /// is sent, not when sled's own flusher next runs), then the batch's
    /// barriers are answered.
    fn run(mut self, rx: mpsc::Receiver<Op>) {
        loop {
            let first = match rx.recv_timeout(CHECK_EVERY) {
                Ok(op) => op,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.look();
                    self.write_kept();
                    self.flush();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.write_kept();
                    self.flush();
                    return;
                }
            };
            let mut barriers = Vec::new();
            for op in std::iter::once(first).chain(rx.try_iter().take(BATCH_MAX)) {
                match op {
                    Op::Barrier(done) => barriers.push(done),
                    op => self.keep(op),
                }
            }
            self.write_kept();
            self.flush();
            for done in barriers {
                let _ = done.send(());
            }
        }
    }

    /// Makes what was written durable, when anything was.
    fn flush(&mut self) {
        if !self.unflushed {
            return;
        }
        match self.store.flush() {
            Ok(()) => self.unflushed = false,
            Err(e) => {
                // Flushed again with the next write or look.
                tracing::error!(error = %e, "cannot flush events and health decisions");
                self.set_fault(e.to_string());
            }
        }
    }

    fn keep(&mut self, op: Op) {
        if self.kept.len() >= KEPT_MAX {
            self.kept.pop_front();
            self.dropped += 1;
            if self.dropped.is_power_of_two() {
                tracing::error!(
                    dropped = self.dropped,
                    "the store cannot be written: the oldest kept events are dropped"
                );
            }
        }
        self.kept.push_back(op);
    }

    /// Writes the kept writes unless the device is degraded (a device
    /// restarting on its reopened store writes them, still degraded).
    fn write_kept(&mut self) {
        if self.degraded() && !*self.reopened.borrow() {
            self.set_pending();
            return;
        }
        while let Some(op) = self.kept.front() {
            let written = match op {
                Op::Event {
                    seq,
                    time_ms,
                    bytes,
                } => self.store.append_event(*seq, *time_ms, bytes),
                Op::Health { check, bytes } => self.store.put_health_decision(check, bytes),
                Op::Barrier(_) => Ok(()),
            };
            match written {
                Ok(()) => {
                    self.kept.pop_front();
                    self.unflushed = true;
                }
                Err(e) => {
                    // Kept, and tried again on the next look.
                    tracing::error!(error = %e, "cannot persist an event or a health decision");
                    self.set_fault(e.to_string());
                    return;
                }
            }
        }
    }

    fn degraded(&self) -> bool {
        self.fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn set_pending(&self) {
        if let Some(f) = self
            .fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            f.pending = self.kept.len();
        }
    }

    fn set_fault(&self, error: String) {
        let mut fault = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        match fault.as_mut() {
            Some(f) => {
                f.error = error;
                f.pending = self.kept.len();
            }
            None => {
                tracing::error!(path = %self.dir.display(), %error, "storage degraded: writes are refused until space returns");
                *fault = Some(StorageFault {
                    path: self.dir.display().to_string(),
                    error,
                    since_ms: gtm_model::clock::now_ms(),
                    pending: self.kept.len(),
                });
            }
        }
    }

    /// Looks at the filesystem: degrades or recovers.
    fn look(&mut self) {
        if *self.reopened.borrow() {
            // Degraded until the device restarts on its own store.
            return;
        }
        match space(&self.dir) {
            Err(e) => self.set_fault(format!("cannot look at the filesystem: {e}")),
            Ok(Space {
                read_only: true, ..
            }) => {
                let mut error = std::io::Error::from_raw_os_error(libc::EROFS).to_string();
                if self.on_copy {
                    error.push_str(
                        "; started from a copy of its store, it serves DNS and takes no part in the cluster's Raft until it can write",
                    );
                }
                self.set_fault(error);
            }
            Ok(Space { free, .. }) if free < MIN_FREE => {
                release_reserve(&self.dir);
                let free = space(&self.dir).map_or(free, |s| s.free);
                self.set_fault(format!(
                    "{} ({free} bytes free, under {MIN_FREE})",
                    std::io::Error::from_raw_os_error(libc::ENOSPC)
                ));
            }
            Ok(Space { free, .. }) => {
                let reserve = self.dir.join(RESERVE_FILE);
                if !reserve.exists() {
                    // Space for the reserve and above the minimum after it:
                    // otherwise the device would go degraded right away.
                    if free < MIN_FREE + RESERVE_BYTES {
                        if !self.degraded() {
                            tracing::warn!(free, "too little space to make the storage reserve");
                        }
                        return;
                    }
                    if let Err(e) = make_reserve(&reserve) {
                        let _ = std::fs::remove_file(&reserve);
                        self.set_fault(format!("cannot make the storage reserve: {e}"));
                        return;
                    }
                }
                if self.on_copy {
                    self.reopen();
                    return;
                }
                let was = self.fault.lock().unwrap_or_else(|e| e.into_inner()).take();
                if was.is_some() {
                    tracing::warn!(path = %self.dir.display(), "storage recovered: writes are accepted again");
                }
            }
        }
    }
}

impl Writer {
    /// The data directory can be written again after a start on a copy of
    /// its store: the writes that waited go to the store in `dir`, and the
    /// device is told to restart on it. Writes stay refused until then.
    fn reopen(&mut self) {
        let retention = self.store.event_retention();
        match Store::open(&self.dir) {
            Ok(store) => {
                self.store = store.with_event_retention(retention);
                self.on_copy = false;
                self.set_fault(
                    "the data directory can be written again: the device restarts on its store"
                        .into(),
                );
                tracing::warn!(path = %self.dir.display(), pending = self.kept.len(), "the data directory can be written again: restarting on its store");
                let _ = self.reopened.send(true);
            }
            Err(e) => self.set_fault(format!("cannot open the store again: {e}")),
        }
    }
}

struct Space {
    free: u64,
    read_only: bool,
}

/// Free space for this process and the read-only flag of `dir`'s filesystem.
fn space(dir: &Path) -> std::io::Result<Space> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs writes only into `out`, whose layout libc defines;
    // `path` is a NUL-terminated string that outlives the call.
    let out = unsafe {
        let mut out: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut out) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        out
    };
    Ok(Space {
        free: (out.f_bavail as u64).saturating_mul(out.f_frsize as u64),
        read_only: out.f_flag & libc::ST_RDONLY != 0,
    })
}

fn make_reserve(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    // Written, not sized: a sparse file would reserve nothing.
    let mut file = std::fs::File::create(path)?;
    let chunk = vec![0u8; 64 << 10];
    for _ in 0..RESERVE_BYTES / chunk.len() as u64 {
        file.write_all(&chunk)?;
    }
    file.sync_all()
}

fn release_reserve(dir: &Path) {
    match std::fs::remove_file(dir.join(RESERVE_FILE)) {
        Ok(()) => tracing::warn!("storage low: the reserve was released to the store"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::error!(error = %e, "cannot release the storage reserve"),
    }
}

/// Whether `dir` is on a filesystem mounted read-only.
pub fn read_only(dir: &Path) -> bool {
    space(dir).is_ok_and(|s| s.read_only)
}

/// Before the store opens: on a filesystem that is (nearly) full, gives
/// the reserve back so that the store can open and the device serve.
pub fn make_room(dir: &Path) {
    if space(dir).is_ok_and(|s| s.free < MIN_FREE) {
        release_reserve(dir);
    }
}
