//! The sled adapter: what a device's store runs on, and every workaround
//! only sled needs.
//!
//! - Opening caps sled's cache (1 GiB by default; a device's store is
//!   small), and waits briefly for a store closed a moment ago in this
//!   process: sled's flusher thread holds the directory's lock until it
//!   notices.
//! - The default tree is sled's own, never opened by name: a second handle
//!   on it would track its root apart from the first.
//! - A value written in a batch is made an `IVec` once and handed back as
//!   a `Value` over that very allocation: the replicated map in memory
//!   costs pointers beside sled's cache, not a second copy.
//! - After each batch and each dropped tree, what the write replaced is
//!   freed at once ([`reclaim`]).
//! - A batch on one tree is sled's `apply_batch`; one across trees (rare:
//!   a device leaving its cluster) is a sled transaction, the only way
//!   sled writes several trees atomically.

use std::convert::Infallible;
use std::path::Path;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use ::sled::Transactional;
use ::sled::transaction::ConflictableTransactionError;

use super::{DbError, Engine, EngineBatch, Entries, Flushing, Order, Span, TreeId};
use crate::types::Value;

/// sled's page cache, at most.
const CACHE_BYTES: u64 = 64 << 20;
/// How long opening waits for this process to let go of the store.
const LOCK_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub(super) struct SledEngine {
    db: ::sled::Db,
    /// The trees opened, by [`TreeId`]; the default tree first. A dropped
    /// tree keeps its place (`None`), taken again if it is opened again.
    trees: RwLock<Vec<(String, Option<::sled::Tree>)>>,
}

fn err(e: ::sled::Error) -> DbError {
    match e {
        ::sled::Error::Io(e) => DbError::Io(e),
        ::sled::Error::Corruption { at, .. } => DbError::Corrupt(match at {
            Some(at) => format!("at {at:?}"),
            None => "at an unknown place".into(),
        }),
        ::sled::Error::CollectionNotFound(name) => {
            DbError::NoTree(String::from_utf8_lossy(&name).into_owned())
        }
        e @ (::sled::Error::Unsupported(_) | ::sled::Error::ReportableBug(_)) => {
            DbError::Engine(e.to_string())
        }
    }
}

impl SledEngine {
    pub(super) fn open(path: &Path) -> Result<Self, DbError> {
        let config = ::sled::Config::new().path(path).cache_capacity(CACHE_BYTES);
        let deadline = Instant::now() + LOCK_WAIT;
        let db = loop {
            match config.open() {
                Ok(db) => break db,
                Err(::sled::Error::Io(e))
                    if e.to_string().contains("could not acquire lock")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(err(e)),
            }
        };
        // sled's default tree, at place 0 (`DEFAULT_TREE`).
        let default = (*db).clone();
        Ok(Self {
            db,
            trees: RwLock::new(vec![(String::new(), Some(default))]),
        })
    }

    fn trees(&self) -> std::sync::RwLockReadGuard<'_, Vec<(String, Option<::sled::Tree>)>> {
        self.trees.read().unwrap_or_else(|p| p.into_inner())
    }

    fn tree(&self, id: TreeId) -> Result<::sled::Tree, DbError> {
        match self.trees().get(id.0) {
            Some((_, Some(tree))) => Ok(tree.clone()),
            Some((name, None)) => Err(DbError::NoTree(name.clone())),
            None => Err(DbError::NoTree(format!("#{}", id.0))),
        }
    }
}

impl Engine for SledEngine {
    fn open_tree(&self, name: &str) -> Result<TreeId, DbError> {
        let mut trees = self.trees.write().unwrap_or_else(|p| p.into_inner());
        let place = trees.iter().skip(1).position(|(n, _)| n == name);
        if let Some(i) = place
            && trees[i + 1].1.is_some()
        {
            return Ok(TreeId(i + 1));
        }
        let tree = self.db.open_tree(name).map_err(err)?;
        Ok(match place {
            Some(i) => {
                trees[i + 1].1 = Some(tree);
                TreeId(i + 1)
            }
            None => {
                trees.push((name.to_owned(), Some(tree)));
                TreeId(trees.len() - 1)
            }
        })
    }

    fn has_tree(&self, name: &str) -> Result<bool, DbError> {
        Ok(self
            .db
            .tree_names()
            .iter()
            .any(|n| n.as_ref() == name.as_bytes()))
    }

    fn drop_tree(&self, name: &str) -> Result<(), DbError> {
        let mut trees = self.trees.write().unwrap_or_else(|p| p.into_inner());
        if let Some((_, tree)) = trees.iter_mut().skip(1).find(|(n, _)| n == name) {
            *tree = None;
        }
        self.db.drop_tree(name).map_err(err)?;
        reclaim();
        Ok(())
    }

    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Value>, DbError> {
        let value = self.tree(tree)?.get(key).map_err(err)?;
        Ok(value.map(Value::from_owner))
    }

    fn insert(&self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.tree(tree)?.insert(key, value).map_err(err)?;
        Ok(())
    }

    fn remove(&self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        self.tree(tree)?.remove(key).map_err(err)?;
        Ok(())
    }

    fn range(&self, tree: TreeId, span: Span, order: Order) -> Entries {
        let tree = match self.tree(tree) {
            Ok(tree) => tree,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let iter = tree.range((span.from, span.to));
        let entry = |item: Result<(::sled::IVec, ::sled::IVec), ::sled::Error>| {
            item.map(|(k, v)| (Value::from_owner(k), Value::from_owner(v)))
                .map_err(err)
        };
        match order {
            Order::Forward => Box::new(iter.map(entry)),
            Order::Reverse => Box::new(iter.rev().map(entry)),
        }
    }

    fn batch(&self) -> Box<dyn EngineBatch> {
        Box::new(SledBatch {
            trees: self.trees().clone(),
            writes: Vec::new(),
        })
    }

    fn flush(&self) -> Result<(), DbError> {
        self.db.flush().map_err(err)?;
        Ok(())
    }

    fn flush_async(&self) -> Flushing {
        let db = self.db.clone();
        Box::pin(async move {
            db.flush_async().await.map_err(err)?;
            Ok(())
        })
    }
}

/// A batch per tree written, in the order first written.
struct SledBatch {
    /// The engine's trees when the batch began, by [`TreeId`].
    trees: Vec<(String, Option<::sled::Tree>)>,
    writes: Vec<(TreeId, ::sled::Batch)>,
}

impl SledBatch {
    fn of(&mut self, tree: TreeId) -> &mut ::sled::Batch {
        let at = match self.writes.iter().position(|(t, _)| *t == tree) {
            Some(at) => at,
            None => {
                self.writes.push((tree, ::sled::Batch::default()));
                self.writes.len() - 1
            }
        };
        &mut self.writes[at].1
    }
}

impl EngineBatch for SledBatch {
    fn insert(&mut self, tree: TreeId, key: &[u8], value: Vec<u8>) -> Value {
        let stored = ::sled::IVec::from(value);
        let shared = Value::from_owner(stored.clone());
        self.of(tree).insert(key, stored);
        shared
    }

    fn remove(&mut self, tree: TreeId, key: &[u8]) {
        self.of(tree).remove(key);
    }

    fn apply(self: Box<Self>) -> Result<(), DbError> {
        let SledBatch { trees, writes } = *self;
        let mut resolved = Vec::with_capacity(writes.len());
        for (id, batch) in writes {
            let tree = match trees.get(id.0) {
                Some((_, Some(tree))) => tree.clone(),
                Some((name, None)) => return Err(DbError::NoTree(name.clone())),
                None => return Err(DbError::NoTree(format!("#{}", id.0))),
            };
            resolved.push((tree, batch));
        }
        let applied = if resolved.len() <= 1 {
            match resolved.pop() {
                None => return Ok(()),
                Some((tree, batch)) => tree.apply_batch(batch).map_err(err),
            }
        } else {
            let (targets, batches): (Vec<_>, Vec<_>) = resolved.into_iter().unzip();
            targets
                .as_slice()
                .transaction(|views| {
                    for (view, batch) in views.iter().zip(&batches) {
                        view.apply_batch(batch)?;
                    }
                    Ok::<(), ConflictableTransactionError<Infallible>>(())
                })
                .map_err(|e| match e {
                    ::sled::transaction::TransactionError::Storage(e) => err(e),
                    ::sled::transaction::TransactionError::Abort(never) => match never {},
                })
        };
        reclaim();
        applied
    }
}

/// Frees what sled replaced, at once.
///
/// sled drops a replaced page (and the values it holds) through
/// crossbeam's epoch collector: the garbage waits in the writing thread's
/// bag until that bag is full or flushed, and is freed once the epoch has
/// moved on twice. A device writes seldom and from many threads, so a
/// replaced multi-megabyte value (a configuration text, its history
/// entry) could stay resident for many writes: with 100,000 records, six
/// one-record writes left 21 copies of the 7.5 MB text in memory
/// (heaptrack; docs/design-scale.md, "Why RSS creeps"). Called on the
/// thread that wrote, right after the write.
fn reclaim() {
    // Each pin-and-flush moves the bag to the global queue and tries to
    // advance the epoch; garbage two epochs old is freed on the third.
    for _ in 0..3 {
        crossbeam_epoch::pin().flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch on a tree dropped since the batch began is refused whole,
    /// and a store's directory locked by this process is waited for.
    #[test]
    fn a_batch_on_a_dropped_tree_is_refused_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = SledEngine::open(dir.path()).expect("open");
        let (a, b) = (
            engine.open_tree("a").expect("a"),
            engine.open_tree("b").expect("b"),
        );
        let mut batch = engine.batch();
        batch.insert(a, b"k", b"v".to_vec());
        batch.insert(b, b"k", b"v".to_vec());
        engine.drop_tree("b").expect("drop");
        let refused = batch.apply().expect_err("tree b is gone");
        assert!(
            matches!(&refused, DbError::NoTree(name) if name == "b"),
            "{refused}"
        );
        assert_eq!(engine.get(a, b"k").expect("get"), None);
        let b_again = engine.open_tree("b").expect("b again");
        assert_eq!(b_again, b, "the same place");
    }
}
