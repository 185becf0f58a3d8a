//! The in-memory adapter, for tests: each tree a `BTreeMap` behind one
//! lock, so a batch across trees is applied under it at once. A flush has
//! nothing to do; nothing survives the last handle.
//!
//! An iterator holds no lock between steps: each step looks up the first
//! key past the last one it returned, as sled's do, so a long walk never
//! blocks a writer and sees the tree as it is at each step.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{DbError, Engine, EngineBatch, Entries, Flushing, Order, Span, TreeId};
use crate::types::Value;

/// A store's keys and values in memory ([`crate::Backend::Memory`]).
/// Clones share them.
#[derive(Debug, Clone)]
pub struct MemoryDb(Arc<RwLock<Trees>>);

/// The trees by [`TreeId`], the default tree first. A dropped tree keeps
/// its place (`None`), taken again if it is opened again.
#[derive(Debug)]
struct Trees(Vec<(String, Option<Keys>)>);

/// One tree's keys and values.
type Keys = BTreeMap<Vec<u8>, Value>;

impl Default for MemoryDb {
    fn default() -> Self {
        Self(Arc::new(RwLock::new(Trees(vec![(
            String::new(),
            Some(BTreeMap::new()),
        )]))))
    }
}

impl Trees {
    fn tree(&self, id: TreeId) -> Result<&Keys, DbError> {
        match self.0.get(id.0) {
            Some((_, Some(tree))) => Ok(tree),
            Some((name, None)) => Err(DbError::NoTree(name.clone())),
            None => Err(DbError::NoTree(format!("#{}", id.0))),
        }
    }

    fn tree_mut(&mut self, id: TreeId) -> Result<&mut Keys, DbError> {
        match self.0.get_mut(id.0) {
            Some((_, Some(tree))) => Ok(tree),
            Some((name, None)) => Err(DbError::NoTree(name.clone())),
            None => Err(DbError::NoTree(format!("#{}", id.0))),
        }
    }

    /// The place of the tree `name` (dropped or not), never the default
    /// tree's.
    fn place(&self, name: &str) -> Option<usize> {
        self.0
            .iter()
            .skip(1)
            .position(|(n, _)| n == name)
            .map(|i| i + 1)
    }
}

impl MemoryDb {
    fn read(&self) -> RwLockReadGuard<'_, Trees> {
        self.0.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Trees> {
        self.0.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl Engine for MemoryDb {
    fn open_tree(&self, name: &str) -> Result<TreeId, DbError> {
        let mut trees = self.write();
        Ok(TreeId(match trees.place(name) {
            Some(i) => {
                trees.0[i].1.get_or_insert_with(BTreeMap::new);
                i
            }
            None => {
                trees.0.push((name.to_owned(), Some(BTreeMap::new())));
                trees.0.len() - 1
            }
        }))
    }

    fn has_tree(&self, name: &str) -> Result<bool, DbError> {
        let trees = self.read();
        Ok(trees.place(name).is_some_and(|i| trees.0[i].1.is_some()))
    }

    fn drop_tree(&self, name: &str) -> Result<(), DbError> {
        let mut trees = self.write();
        if let Some(i) = trees.place(name) {
            trees.0[i].1 = None;
        }
        Ok(())
    }

    fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Value>, DbError> {
        Ok(self.read().tree(tree)?.get(key).cloned())
    }

    fn insert(&self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        let value = Value::copy_from_slice(value);
        self.write().tree_mut(tree)?.insert(key.to_vec(), value);
        Ok(())
    }

    fn remove(&self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        self.write().tree_mut(tree)?.remove(key);
        Ok(())
    }

    fn range(&self, tree: TreeId, span: Span, order: Order) -> Entries {
        Box::new(Walk {
            db: self.clone(),
            tree,
            span,
            order,
            done: false,
        })
    }

    fn batch(&self) -> Box<dyn EngineBatch> {
        Box::new(MemoryBatch {
            db: self.clone(),
            writes: Vec::new(),
        })
    }

    fn flush(&self) -> Result<(), DbError> {
        Ok(())
    }

    fn flush_async(&self) -> Flushing {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// An iterator over a range, one lookup per step.
struct Walk {
    db: MemoryDb,
    tree: TreeId,
    /// What is left to walk: narrowed past each key returned.
    span: Span,
    order: Order,
    done: bool,
}

impl Iterator for Walk {
    type Item = Result<(Value, Value), DbError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.span.is_empty() {
            return None;
        }
        let trees = self.db.read();
        let tree = match trees.tree(self.tree) {
            Ok(tree) => tree,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let bounds = (bound(&self.span.from), bound(&self.span.to));
        let mut range = tree.range::<[u8], _>(bounds);
        let found = match self.order {
            Order::Forward => range.next(),
            Order::Reverse => range.next_back(),
        };
        let Some((key, value)) = found else {
            self.done = true;
            return None;
        };
        let entry = (Value::copy_from_slice(key), value.clone());
        match self.order {
            Order::Forward => self.span.from = Bound::Excluded(key.clone()),
            Order::Reverse => self.span.to = Bound::Excluded(key.clone()),
        }
        Some(Ok(entry))
    }
}

fn bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// Writes kept in order, applied under the lock at once.
struct MemoryBatch {
    db: MemoryDb,
    writes: Vec<(TreeId, Vec<u8>, Option<Value>)>,
}

impl EngineBatch for MemoryBatch {
    fn insert(&mut self, tree: TreeId, key: &[u8], value: Vec<u8>) -> Value {
        let value = Value::from(value);
        self.writes.push((tree, key.to_vec(), Some(value.clone())));
        value
    }

    fn remove(&mut self, tree: TreeId, key: &[u8]) {
        self.writes.push((tree, key.to_vec(), None));
    }

    fn apply(self: Box<Self>) -> Result<(), DbError> {
        let mut trees = self.db.write();
        // Every tree there before anything is written: all or nothing.
        for (tree, _, _) in &self.writes {
            trees.tree(*tree)?;
        }
        for (tree, key, value) in self.writes {
            let tree = trees.tree_mut(tree)?;
            match value {
                Some(value) => tree.insert(key, value),
                None => tree.remove(&key),
            };
        }
        Ok(())
    }
}
