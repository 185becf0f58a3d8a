//! The store's key-value seam: the few operations gtm-cluster asks of a
//! storage engine, behind one trait ([`Engine`]), and the handles the rest
//! of the crate uses ([`Db`], [`Tree`], [`Batch`]).
//!
//! Adapters, one per file: `sled` (what a device runs on, and every
//! workaround only sled needs), `memory` (a `BTreeMap`, for tests) and
//! `faults` (wraps any other and fails its writes and flushes on demand).
//! Nothing outside this module names an engine's type: replacing sled is
//! a new adapter and a new [`Backend`].
//!
//! What every adapter promises:
//! - a tree is an ordered map of byte strings, found again by its name;
//!   the default tree ([`Db::default_tree`]) is there from the start and
//!   is never dropped;
//! - a write is seen by every read that follows it, from any thread, and
//!   is durable once a flush that began after it returned `Ok`;
//! - a batch is applied whole or not at all, also across trees, also
//!   after a crash;
//! - an iterator yields each key at most once, in order, reading the tree
//!   as it is at each step (not a snapshot of it): a caller that stops
//!   early has read no more;
//! - nothing panics, whatever the bytes or the bounds.

mod faults;
mod memory;
mod sled;

use std::fmt;
use std::future::Future;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

pub use faults::FaultSwitch;
pub use memory::MemoryDb;

use crate::types::Value;

/// Why the engine under a store failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("the storage engine found its data corrupt: {0}")]
    Corrupt(String),
    #[error("tree {0:?} was dropped")]
    NoTree(String),
    #[error("the storage engine failed: {0}")]
    Engine(String),
    /// Made by a [`FaultSwitch`], never by an engine.
    #[error("{0} refused: the store's fault switch is on")]
    Injected(&'static str),
}

/// Which engine keeps a store's keys and values. The store's large values
/// are files beside it whatever the engine (`side_files`).
#[derive(Debug, Clone, Default)]
pub enum Backend {
    /// sled, in `store/` of the data directory: what a device runs on.
    #[default]
    Sled,
    /// A map in memory, for tests. What it holds lives as long as a clone
    /// of the handle does: a store opened again with it finds it.
    Memory(MemoryDb),
    /// Another backend whose writes and flushes fail while `switch` says
    /// so: how a test makes a running device's store fail.
    Faulty {
        inner: Box<Backend>,
        switch: FaultSwitch,
    },
}

impl Backend {
    /// A new, empty [`Backend::Memory`].
    pub fn memory() -> Self {
        Self::Memory(MemoryDb::default())
    }

    /// This backend, failing while `switch` says so.
    pub fn with_faults(self, switch: &FaultSwitch) -> Self {
        Self::Faulty {
            inner: Box::new(self),
            switch: switch.clone(),
        }
    }
}

/// A tree of an engine: an index the engine gave it when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeId(pub(crate) usize);

/// The default tree's id, in every engine.
pub(crate) const DEFAULT_TREE: TreeId = TreeId(0);

/// Which way an iterator walks its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    Forward,
    Reverse,
}

/// The bounds of a range, owned by the iterator that walks it.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) from: Bound<Vec<u8>>,
    pub(crate) to: Bound<Vec<u8>>,
}

impl Span {
    fn of<K: AsRef<[u8]> + ?Sized>(range: &impl RangeBounds<K>) -> Self {
        let owned = |b: Bound<&K>| b.map(|k| k.as_ref().to_vec());
        Self {
            from: owned(range.start_bound()),
            to: owned(range.end_bound()),
        }
    }

    /// Whether no key can be in it (`from` after `to`, or both at one key
    /// that either excludes): `BTreeMap::range` would panic on it.
    pub(crate) fn is_empty(&self) -> bool {
        use Bound::{Excluded, Included};
        match (&self.from, &self.to) {
            (Included(a), Included(b)) => a > b,
            (Included(a), Excluded(b))
            | (Excluded(a), Included(b))
            | (Excluded(a), Excluded(b)) => a >= b,
            _ => false,
        }
    }
}

/// Keys and values, in key order or its reverse.
pub(crate) type Entries = Box<dyn Iterator<Item = Result<(Value, Value), DbError>> + Send>;

/// A flush under way.
pub(crate) type Flushing = Pin<Box<dyn Future<Output = Result<(), DbError>> + Send>>;

/// What an adapter implements: an engine of named, ordered trees.
pub(crate) trait Engine: Send + Sync + fmt::Debug {
    /// The tree `name`, made empty if there is none.
    fn open_tree(&self, name: &str) -> Result<TreeId, DbError>;
    fn has_tree(&self, name: &str) -> Result<bool, DbError>;
    /// Removes the tree `name` and everything in it; none is fine.
    fn drop_tree(&self, name: &str) -> Result<(), DbError>;
    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Value>, DbError>;
    fn insert(&self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError>;
    fn remove(&self, tree: TreeId, key: &[u8]) -> Result<(), DbError>;
    fn range(&self, tree: TreeId, span: Span, order: Order) -> Entries;
    /// An empty batch, to apply at once ([`EngineBatch::apply`]).
    fn batch(&self) -> Box<dyn EngineBatch>;
    /// Makes every write so far durable. Blocking.
    fn flush(&self) -> Result<(), DbError>;
    /// [`Engine::flush`], off the caller's thread.
    fn flush_async(&self) -> Flushing;
}

/// Writes to apply together, made by their engine: a value it holds can
/// then be handed back as the very bytes it keeps.
pub(crate) trait EngineBatch: Send {
    /// Puts `value` under `key`, and returns it as the engine will hold
    /// it: one allocation for the engine and the caller when the engine
    /// can share it.
    fn insert(&mut self, tree: TreeId, key: &[u8], value: Vec<u8>) -> Value;
    fn remove(&mut self, tree: TreeId, key: &[u8]);
    /// Applies every write, or none (an error).
    fn apply(self: Box<Self>) -> Result<(), DbError>;
}

/// An open engine. Cheap to clone: the clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Db(Arc<dyn Engine>);

impl Db {
    /// The engine `backend` names, its files (if any) in `path`.
    pub(crate) fn open(path: &Path, backend: &Backend) -> Result<Self, DbError> {
        Ok(Self(Self::engine(path, backend)?))
    }

    fn engine(path: &Path, backend: &Backend) -> Result<Arc<dyn Engine>, DbError> {
        Ok(match backend {
            Backend::Sled => Arc::new(sled::SledEngine::open(path)?),
            Backend::Memory(db) => Arc::new(db.clone()),
            Backend::Faulty { inner, switch } => Arc::new(faults::Faulty::new(
                Self::engine(path, inner)?,
                switch.clone(),
            )),
        })
    }

    pub(crate) fn default_tree(&self) -> Tree {
        Tree {
            db: self.clone(),
            id: DEFAULT_TREE,
        }
    }

    pub(crate) fn open_tree(&self, name: &str) -> Result<Tree, DbError> {
        Ok(Tree {
            db: self.clone(),
            id: self.0.open_tree(name)?,
        })
    }

    pub(crate) fn has_tree(&self, name: &str) -> Result<bool, DbError> {
        self.0.has_tree(name)
    }

    pub(crate) fn drop_tree(&self, name: &str) -> Result<(), DbError> {
        self.0.drop_tree(name)
    }

    pub(crate) fn batch(&self) -> Batch {
        Batch(self.0.batch())
    }

    /// Makes every write so far durable. Blocking.
    pub(crate) fn flush(&self) -> Result<(), DbError> {
        self.0.flush()
    }

    /// Makes every write so far durable, without blocking the caller's
    /// thread.
    pub(crate) async fn flush_async(&self) -> Result<(), DbError> {
        self.0.flush_async().await
    }
}

/// A tree of a [`Db`]. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    db: Db,
    id: TreeId,
}

impl Tree {
    /// The database this tree is in, for a [`Batch`] to write it.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    pub(crate) fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>, DbError> {
        self.db.0.get(self.id, key.as_ref())
    }

    pub(crate) fn insert(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), DbError> {
        self.db.0.insert(self.id, key.as_ref(), value.as_ref())
    }

    pub(crate) fn remove(&self, key: impl AsRef<[u8]>) -> Result<(), DbError> {
        self.db.0.remove(self.id, key.as_ref())
    }

    /// Every entry, in key order.
    pub(crate) fn iter(&self) -> Entries {
        self.walk(Span::of::<[u8]>(&..), Order::Forward)
    }

    /// Every entry, last key first.
    pub(crate) fn iter_rev(&self) -> Entries {
        self.walk(Span::of::<[u8]>(&..), Order::Reverse)
    }

    /// The entries in `range`, in key order.
    pub(crate) fn range<K: AsRef<[u8]> + ?Sized>(&self, range: impl RangeBounds<K>) -> Entries {
        self.walk(Span::of(&range), Order::Forward)
    }

    /// The entries in `range`, last key first.
    pub(crate) fn range_rev<K: AsRef<[u8]> + ?Sized>(&self, range: impl RangeBounds<K>) -> Entries {
        self.walk(Span::of(&range), Order::Reverse)
    }

    /// The entries whose key starts with `prefix`, in key order.
    pub(crate) fn scan_prefix(&self, prefix: &[u8]) -> Entries {
        let to = match prefix.iter().rposition(|&b| b < u8::MAX) {
            // The first key after every key with the prefix.
            Some(last) => {
                let mut next = prefix[..=last].to_vec();
                next[last] += 1;
                Bound::Excluded(next)
            }
            None => Bound::Unbounded,
        };
        let span = Span {
            from: Bound::Included(prefix.to_vec()),
            to,
        };
        self.walk(span, Order::Forward)
    }

    /// The entry with the largest key.
    pub(crate) fn last(&self) -> Result<Option<(Value, Value)>, DbError> {
        self.iter_rev().next().transpose()
    }

    /// How many entries the tree holds: reads them all.
    #[cfg(test)]
    pub(crate) fn len(&self) -> Result<usize, DbError> {
        self.iter().try_fold(0, |n, item| item.map(|_| n + 1))
    }

    fn walk(&self, span: Span, order: Order) -> Entries {
        if span.is_empty() {
            return Box::new(std::iter::empty());
        }
        self.db.0.range(self.id, span, order)
    }
}

/// Writes to one or more trees of a [`Db`], applied whole or not at all.
pub(crate) struct Batch(Box<dyn EngineBatch>);

impl Batch {
    pub(crate) fn insert(&mut self, tree: &Tree, key: impl AsRef<[u8]>, value: impl Into<Vec<u8>>) {
        self.0.insert(tree.id, key.as_ref(), value.into());
    }

    /// Puts `value` under `key`, and returns it as the engine will hold
    /// it: a caller that keeps the value (the replicated map in memory)
    /// then shares the engine's allocation instead of holding a copy.
    pub(crate) fn insert_shared(
        &mut self,
        tree: &Tree,
        key: impl AsRef<[u8]>,
        value: Vec<u8>,
    ) -> Value {
        self.0.insert(tree.id, key.as_ref(), value)
    }

    pub(crate) fn remove(&mut self, tree: &Tree, key: impl AsRef<[u8]>) {
        self.0.remove(tree.id, key.as_ref());
    }

    /// Applies every write, or none (an error). Not durable until a flush.
    pub(crate) fn apply(self) -> Result<(), DbError> {
        self.0.apply()
    }
}

/// Runs a test of the store once per engine, as `<name>::sled` and
/// `<name>::memory`: `$backend` is the [`Backend`] to open stores with
/// (clone it to open one again).
#[cfg(test)]
macro_rules! on_each_engine {
    ($(#[$doc:meta])* fn $name:ident($backend:ident: $ty:ty) $body:block) => {
        $(#[$doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($backend: $ty) $body

            #[test]
            fn sled() {
                run($crate::Backend::Sled)
            }

            #[test]
            fn memory() {
                run($crate::Backend::memory())
            }
        }
    };
    ($(#[$doc:meta])* async fn $name:ident($backend:ident: $ty:ty) $body:block) => {
        $(#[$doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($backend: $ty) $body

            #[tokio::test]
            async fn sled() {
                run($crate::Backend::Sled).await
            }

            #[tokio::test]
            async fn memory() {
                run($crate::Backend::memory()).await
            }
        }
    };
}
#[cfg(test)]
pub(crate) use on_each_engine;

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(entries: Entries) -> Vec<Vec<u8>> {
        entries.map(|e| e.expect("read").0.to_vec()).collect()
    }

    on_each_engine! {
        /// Ranges, prefixes and their reverses read what the contract says,
        /// and bounds that hold no key read nothing rather than panic.
        fn ranges_read_in_order(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(&dir.path().join("store"), &backend).expect("open");
            let tree = db.open_tree("t").expect("tree");
            for key in [&b"a"[..], b"ab", b"ab\xff", b"b", b"\xff\xff"] {
                tree.insert(key, b"v").expect("insert");
            }
            assert_eq!(keys(tree.range(&b"ab"[..]..&b"b"[..])), [&b"ab"[..], b"ab\xff"]);
            assert_eq!(keys(tree.range_rev(&b"ab"[..]..)), [&b"\xff\xff"[..], b"b", b"ab\xff", b"ab"]);
            assert_eq!(keys(tree.scan_prefix(b"ab")), [&b"ab"[..], b"ab\xff"]);
            assert_eq!(keys(tree.scan_prefix(b"\xff")), [&b"\xff\xff"[..]]);
            assert_eq!(keys(tree.scan_prefix(b"")).len(), 5);
            assert_eq!(tree.last().expect("last").expect("some").0, &b"\xff\xff"[..]);
            // Empty and inverted bounds.
            assert!(keys(tree.range(&b"b"[..]..&b"a"[..])).is_empty());
            assert!(keys(tree.range(&b"b"[..]..&b"b"[..])).is_empty());
            let span = (Bound::Excluded(&b"b"[..]), Bound::Included(&b"b"[..]));
            assert!(keys(tree.range_rev::<[u8]>(span)).is_empty());
            // A tree is its own: the default tree holds none of these.
            assert!(keys(db.default_tree().iter()).is_empty());
        }
    }

    on_each_engine! {
        /// A batch across trees is applied whole; a tree dropped and opened
        /// again is empty; values handed back by a batch are what reads
        /// return.
        fn a_batch_spans_trees(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(&dir.path().join("store"), &backend).expect("open");
            let (one, two) = (db.open_tree("one").expect("one"), db.open_tree("two").expect("two"));
            one.insert(b"gone", b"x").expect("insert");
            let mut batch = db.batch();
            let kept = batch.insert_shared(&one, b"k", vec![7; 100]);
            batch.insert(&two, b"k", b"2".to_vec());
            batch.insert(&db.default_tree(), b"k", b"0".to_vec());
            batch.remove(&one, b"gone");
            batch.apply().expect("apply");
            assert_eq!(one.get(b"k").expect("get").expect("some"), kept);
            assert_eq!(one.get(b"gone").expect("get"), None);
            assert_eq!(two.get(b"k").expect("get").expect("some"), &b"2"[..]);
            assert_eq!(db.default_tree().get(b"k").expect("get").expect("some"), &b"0"[..]);
            db.flush().expect("flush");

            assert!(db.has_tree("two").expect("has"));
            db.drop_tree("two").expect("drop");
            assert!(!db.has_tree("two").expect("has"));
            db.drop_tree("two").expect("dropping none is fine");
            let two = db.open_tree("two").expect("again");
            assert_eq!(two.len().expect("len"), 0);
            assert_eq!(one.len().expect("len"), 1);
        }
    }
}
