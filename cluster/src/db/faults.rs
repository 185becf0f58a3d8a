//! The fault-injecting adapter: wraps any other and makes its writes and
//! flushes fail while a [`FaultSwitch`] says so, the way a disk that fills
//! up or goes read-only would, so that a test can make a running device's
//! store fail and watch what the device does.
//!
//! Reads are passed through. A refused write or batch leaves the engine
//! under it untouched; once the switch is healed, writes work again (a
//! real sled store is not that forgiving: after a failed write it must be
//! opened again).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{DbError, Engine, EngineBatch, Entries, Flushing, Order, Span, TreeId};
use crate::types::Value;

/// Turns a store's failures on and off while it runs
/// ([`crate::Backend::with_faults`]). Clones share one switch.
#[derive(Debug, Clone, Default)]
pub struct FaultSwitch(Arc<Switch>);

#[derive(Debug, Default)]
struct Switch {
    writes: AtomicBool,
    flushes: AtomicBool,
    injected: AtomicU64,
}

impl FaultSwitch {
    /// A switch that fails nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// From now on every write (insert, remove, batch, dropping a tree)
    /// fails.
    pub fn fail_writes(&self) {
        self.0.writes.store(true, Ordering::SeqCst);
    }

    /// From now on every flush fails.
    pub fn fail_flushes(&self) {
        self.0.flushes.store(true, Ordering::SeqCst);
    }

    /// Writes and flushes work again.
    pub fn heal(&self) {
        self.0.writes.store(false, Ordering::SeqCst);
        self.0.flushes.store(false, Ordering::SeqCst);
    }

    /// How many operations it made fail so far: a test waits on this to
    /// know the store was asked to write.
    pub fn injected(&self) -> u64 {
        self.0.injected.load(Ordering::SeqCst)
    }

    fn check(&self, on: &AtomicBool, op: &'static str) -> Result<(), DbError> {
        if on.load(Ordering::SeqCst) {
            self.0.injected.fetch_add(1, Ordering::SeqCst);
            return Err(DbError::Injected(op));
        }
        Ok(())
    }

    fn write(&self, op: &'static str) -> Result<(), DbError> {
        self.check(&self.0.writes, op)
    }

    fn flush(&self) -> Result<(), DbError> {
        self.check(&self.0.flushes, "flush")
    }
}

#[derive(Debug)]
pub(super) struct Faulty {
    inner: Arc<dyn Engine>,
    switch: FaultSwitch,
}

impl Faulty {
    pub(super) fn new(inner: Arc<dyn Engine>, switch: FaultSwitch) -> Self {
        Self { inner, switch }
    }
}

impl Engine for Faulty {
    fn open_tree(&self, name: &str) -> Result<TreeId, DbError> {
        self.inner.open_tree(name)
    }

    fn has_tree(&self, name: &str) -> Result<bool, DbError> {
        self.inner.has_tree(name)
    }

    fn drop_tree(&self, name: &str) -> Result<(), DbError> {
        self.switch.write("dropping a tree")?;
        self.inner.drop_tree(name)
    }

    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Value>, DbError> {
        self.inner.get(tree, key)
    }

    fn insert(&self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.switch.write("insert")?;
        self.inner.insert(tree, key, value)
    }

    fn remove(&self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        self.switch.write("remove")?;
        self.inner.remove(tree, key)
    }

    fn range(&self, tree: TreeId, span: Span, order: Order) -> Entries {
        self.inner.range(tree, span, order)
    }

    fn batch(&self) -> Box<dyn EngineBatch> {
        Box::new(FaultyBatch {
            inner: self.inner.batch(),
            switch: self.switch.clone(),
        })
    }

    fn flush(&self) -> Result<(), DbError> {
        self.switch.flush()?;
        self.inner.flush()
    }

    fn flush_async(&self) -> Flushing {
        if let Err(e) = self.switch.flush() {
            return Box::pin(std::future::ready(Err(e)));
        }
        self.inner.flush_async()
    }
}

struct FaultyBatch {
    inner: Box<dyn EngineBatch>,
    switch: FaultSwitch,
}

impl EngineBatch for FaultyBatch {
    fn insert(&mut self, tree: TreeId, key: &[u8], value: Vec<u8>) -> Value {
        self.inner.insert(tree, key, value)
    }

    fn remove(&mut self, tree: TreeId, key: &[u8]) {
        self.inner.remove(tree, key);
    }

    fn apply(self: Box<Self>) -> Result<(), DbError> {
        self.switch.write("batch")?;
        self.inner.apply()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Backend;
    use crate::db::{Db, on_each_engine};

    on_each_engine! {
        /// While the switch is on, writes and flushes fail with an error
        /// that says so, nothing of a refused batch is applied, reads go
        /// on; healed, the store works as before.
        fn writes_and_flushes_fail_while_switched_on(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let switch = FaultSwitch::new();
            let db = Db::open(&dir.path().join("store"), &backend.with_faults(&switch))
                .expect("open");
            let tree = db.open_tree("t").expect("tree");
            tree.insert(b"a", b"1").expect("insert");
            db.flush().expect("flush");

            switch.fail_writes();
            let err = tree.insert(b"b", b"2").expect_err("refused");
            assert!(matches!(err, DbError::Injected("insert")), "{err}");
            assert_eq!(err.to_string(), "insert refused: the store's fault switch is on");
            tree.remove(b"a").expect_err("refused");
            let mut batch = db.batch();
            batch.insert(&tree, b"c", b"3".to_vec());
            batch.remove(&tree, b"a");
            batch.apply().expect_err("refused");
            db.drop_tree("t").expect_err("refused");
            assert_eq!(tree.get(b"a").expect("read").expect("kept"), &b"1"[..]);
            assert_eq!(tree.len().expect("len"), 1, "nothing of the batch");
            db.flush().expect("flushes still work");
            assert_eq!(switch.injected(), 4);

            switch.fail_flushes();
            db.flush().expect_err("flush refused");
            let flushed = futures_ready(db.flush_async());
            assert!(matches!(flushed, Some(Err(DbError::Injected("flush")))), "{flushed:?}");

            switch.heal();
            tree.insert(b"b", b"2").expect("insert");
            db.flush().expect("flush");
            assert_eq!(tree.len().expect("len"), 2);
            assert_eq!(switch.injected(), 6);
        }
    }

    /// The output of a future that is ready at once (a refused flush
    /// needs no runtime), else `None`.
    fn futures_ready<F: std::future::Future>(future: F) -> Option<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::pin::pin!(future).poll(&mut cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        }
    }
}
