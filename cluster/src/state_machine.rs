//! The replicated key/value map: openraft's state machine, in sled.
//!
//! Tree `raft-sm`: `k/<key>` → value; `\0applied` → last applied log id;
//! `\0membership` → last applied membership; `\0snapshot` → the current
//! snapshot (meta and data). Every `apply` call and every snapshot install is
//! one sled batch, so the map and its applied pointer move together.
//!
//! `apply` does not flush: the log entries it applies are already durable
//! and openraft re-applies from the persisted applied pointer up to the
//! persisted committed pointer on start-up. Snapshots are flushed, since logs
//! are purged behind them.
//!
//! A snapshot's data is bincode of [`SnapshotData`]: the whole map, the last
//! applied log id and the membership.

// openraft's `StorageError` (224 bytes) is fixed by its traits' signatures.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::low_priority::LowPriority;
use crate::machine::Machine;
use crate::types::{
    Applied, Entry, LogId, Map, Snapshot, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership, TypeConfig, Write, decode, encode,
};

const TREE: &str = "raft-sm";
const KV_PREFIX: &[u8] = b"k/";
const APPLIED: &[u8] = b"\0applied";
const MEMBERSHIP: &[u8] = b"\0membership";
const SNAPSHOT: &[u8] = b"\0snapshot";

/// What a snapshot carries.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SnapshotData {
    #[serde(with = "crate::types::bytes::map")]
    kv: Map,
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

/// The current snapshot as stored.
#[derive(Debug, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    #[serde(with = "crate::types::bytes")]
    data: Vec<u8>,
}

fn io_err(
    subject: ErrorSubject<u64>,
    verb: ErrorVerb,
    e: &(impl std::error::Error + 'static),
) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::new(e)).into()
}

fn sm_read(e: &(impl std::error::Error + 'static)) -> StorageError {
    io_err(ErrorSubject::StateMachine, ErrorVerb::Read, e)
}

fn sm_write(e: &(impl std::error::Error + 'static)) -> StorageError {
    io_err(ErrorSubject::StateMachine, ErrorVerb::Write, e)
}

fn kv_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(KV_PREFIX.len() + key.len());
    k.extend_from_slice(KV_PREFIX);
    k.extend_from_slice(key.as_bytes());
    k
}

#[derive(Debug)]
pub(crate) struct StateMachine {
    db: sled::Db,
    tree: sled::Tree,
    kv: Arc<Map>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    applied_tx: Arc<watch::Sender<Applied>>,
    machine: Arc<dyn Machine>,
    /// Where the machine applies commands: below Raft's own threads.
    apply_thread: LowPriority,
}

impl StateMachine {
    /// Opens the state machine and publishes its current content on
    /// `applied_tx`.
    pub(crate) fn open(
        db: &sled::Db,
        applied_tx: Arc<watch::Sender<Applied>>,
        machine: Arc<dyn Machine>,
    ) -> Result<Self, StorageError> {
        let tree = Self::tree(db)?;
        let last_applied: Option<LogId> = match tree.get(APPLIED).map_err(|e| sm_read(&e))? {
            Some(bytes) => decode(&bytes).map_err(|e| sm_read(&e))?,
            None => None,
        };
        let membership: StoredMembership = match tree.get(MEMBERSHIP).map_err(|e| sm_read(&e))? {
            Some(bytes) => decode(&bytes).map_err(|e| sm_read(&e))?,
            None => StoredMembership::default(),
        };
        let mut kv = BTreeMap::new();
        for item in tree.scan_prefix(KV_PREFIX) {
            let (k, v) = item.map_err(|e| sm_read(&e))?;
            let key = std::str::from_utf8(&k[KV_PREFIX.len()..])
                .map_err(|e| sm_read(&e))?
                .to_owned();
            kv.insert(key, crate::types::Value::from_owner(v));
        }
        let sm = Self {
            db: db.clone(),
            tree,
            kv: Arc::new(kv),
            last_applied,
            membership,
            applied_tx,
            machine,
            apply_thread: LowPriority::spawn("gtm-apply").map_err(|e| sm_read(&e))?,
        };
        sm.publish();
        Ok(sm)
    }

    /// The tree that holds the state machine and its snapshot: a device
    /// that leaves its cluster clears it together with the log
    /// (`LogStore::clear_with`).
    pub(crate) fn tree(db: &sled::Db) -> Result<sled::Tree, StorageError> {
        db.open_tree(TREE).map_err(|e| sm_read(&e))
    }

    fn publish(&self) {
        self.applied_tx.send_replace(Applied {
            index: self.last_applied.map_or(0, |l| l.index),
            kv: self.kv.clone(),
        });
    }

    fn stored_snapshot(&self) -> Result<Option<StoredSnapshot>, StorageError> {
        let Some(bytes) = self
            .tree
            .get(SNAPSHOT)
            .map_err(|e| io_err(ErrorSubject::Snapshot(None), ErrorVerb::Read, &e))?
        else {
            return Ok(None);
        };
        decode(&bytes)
            .map(Some)
            .map_err(|e| io_err(ErrorSubject::Snapshot(None), ErrorVerb::Read, &e))
    }
}

/// A copy of the state machine at one point, to build a snapshot from
/// while the state machine goes on applying.
#[derive(Debug)]
pub(crate) struct SnapshotBuilder {
    db: sled::Db,
    tree: sled::Tree,
    kv: Arc<Map>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let data = SnapshotData {
            kv: (*self.kv).clone(),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
        };
        // Encoding the whole map is work for the blocking pool.
        let data = tokio::task::spawn_blocking(move || encode(&data))
            .await
            .map_err(|e| io_err(ErrorSubject::Snapshot(None), ErrorVerb::Write, &e))?
            .map_err(|e| io_err(ErrorSubject::Snapshot(None), ErrorVerb::Write, &e))?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let snapshot_id = match self.last_applied {
            Some(l) => format!(
                "{}-{}-{}-{nanos}",
                l.leader_id.term, l.leader_id.node_id, l.index
            ),
            None => format!("--{nanos}"),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        let tree = self.tree.clone();
        let (stored, kept) = tokio::task::spawn_blocking(move || {
            let kept = encode(&stored)
                .map_err(|e| e.to_string())
                .and_then(|bytes| tree.insert(SNAPSHOT, bytes).map_err(|e| e.to_string()));
            (stored, kept)
        })
        .await
        .map_err(|e| io_err(subject.clone(), ErrorVerb::Write, &e))?;
        kept.map_err(|e| io_err(subject.clone(), ErrorVerb::Write, &std::io::Error::other(e)))?;
        // Logs are purged behind a snapshot: it must be durable first.
        self.db
            .flush_async()
            .await
            .map_err(|e| io_err(subject, ErrorVerb::Write, &e))?;
        tracing::info!(snapshot = %meta.snapshot_id, bytes = stored.data.len(), "built a snapshot");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Vec<u8>>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = sled::Batch::default();
        let mut replies = Vec::new();
        let mut membership_changed = false;
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => replies.push(Vec::new()),
                EntryPayload::Normal(proposal) => {
                    // The application's work (parsing, validating a whole
                    // configuration) runs on the low-priority thread,
                    // against the map as the entries before this one left
                    // it.
                    let (machine, kv) = (self.machine.clone(), self.kv.clone());
                    let index = entry.log_id.index;
                    let effect = self
                        .apply_thread
                        .run(move || machine.apply(&kv, index, &proposal.0))
                        .await
                        .ok_or_else(|| {
                            sm_write(&std::io::Error::other("the apply thread stopped"))
                        })?;
                    let kv = Arc::make_mut(&mut self.kv);
                    for write in effect.writes {
                        match write {
                            Write::Put { key, value } => {
                                let (stored, value) = crate::types::shared(value);
                                batch.insert(kv_key(&key), stored);
                                kv.insert(key, value);
                            }
                            Write::Delete { key } => {
                                batch.remove(kv_key(&key));
                                kv.remove(&key);
                            }
                        }
                    }
                    replies.push(effect.outcome);
                }
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), membership);
                    membership_changed = true;
                    replies.push(Vec::new());
                }
            }
        }
        if replies.is_empty() {
            return Ok(replies);
        }
        batch.insert(
            APPLIED,
            encode(&self.last_applied).map_err(|e| sm_write(&e))?,
        );
        if membership_changed {
            batch.insert(
                MEMBERSHIP,
                encode(&self.membership).map_err(|e| sm_write(&e))?,
            );
        }
        // Off the runtime's threads: a batch can hold megabytes, and the
        // runtime answers heartbeats meanwhile.
        let tree = self.tree.clone();
        tokio::task::spawn_blocking(move || {
            let applied = tree.apply_batch(batch);
            crate::reclaim::reclaim();
            applied
        })
        .await
        .map_err(|e| sm_write(&e))?
        .map_err(|e| sm_write(&e))?;
        self.publish();
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            db: self.db.clone(),
            tree: self.tree.clone(),
            kv: self.kv.clone(),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        let data = snapshot.into_inner();
        let payload: SnapshotData =
            decode(&data).map_err(|e| io_err(subject.clone(), ErrorVerb::Read, &e))?;
        let write = |e: &dyn std::fmt::Display| {
            StorageError::from(StorageIOError::new(
                subject.clone(),
                ErrorVerb::Write,
                AnyError::error(e.to_string()),
            ))
        };

        // One batch replaces the whole map, its pointers and the snapshot.
        let mut batch = sled::Batch::default();
        for item in self.tree.scan_prefix(KV_PREFIX) {
            let (k, _) = item.map_err(|e| write(&e))?;
            batch.remove(k);
        }
        let mut kv = BTreeMap::new();
        for (k, v) in payload.kv {
            let (stored, value) = crate::types::shared(v.into());
            batch.insert(kv_key(&k), stored);
            kv.insert(k, value);
        }
        batch.insert(APPLIED, encode(&meta.last_log_id).map_err(|e| write(&e))?);
        batch.insert(
            MEMBERSHIP,
            encode(&meta.last_membership).map_err(|e| write(&e))?,
        );
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        batch.insert(SNAPSHOT, encode(&stored).map_err(|e| write(&e))?);
        self.tree.apply_batch(batch).map_err(|e| write(&e))?;
        crate::reclaim::reclaim();
        self.db.flush_async().await.map_err(|e| write(&e))?;

        self.kv = Arc::new(kv);
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        tracing::info!(snapshot = %meta.snapshot_id, "installed a snapshot");
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        Ok(self.stored_snapshot()?.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}
