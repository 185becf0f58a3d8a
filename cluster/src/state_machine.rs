//! The replicated key/value map: openraft's state machine, in the store's
//! engine (`db`).
//!
//! Tree `raft-sm`: `k/<key>` → value; `\0applied` → last applied log id;
//! `\0membership` → last applied membership; `\0snapshot-file` → the
//! current snapshot's meta and what its file holds (length and hash). The
//! snapshot's data is a file of its own (`side_files`,
//! `raft-snapshot/<hash>.snapshot`): in the tree, sled would write it
//! again each time the leaf beside it changes, and `\0applied` changes
//! with every command. (A store written before kept the data in the tree,
//! under `\0snapshot`; it is read from there until the next snapshot.)
//! Every `apply` call and every snapshot install is one batch, so the
//! map and its applied pointer move together.
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

use crate::db::{Batch, Db, DbError, Tree};
use crate::low_priority::LowPriority;
use crate::machine::Machine;
use crate::side_files::{Checked, SideFiles};
use crate::types::{
    Applied, Entry, LogId, Map, Snapshot, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership, TypeConfig, Write, decode, encode,
};

const TREE: &str = "raft-sm";
const KV_PREFIX: &[u8] = b"k/";
const APPLIED: &[u8] = b"\0applied";
const MEMBERSHIP: &[u8] = b"\0membership";
/// The snapshot with its data, as stores before `SNAPSHOT_FILE` kept it.
const SNAPSHOT: &[u8] = b"\0snapshot";
const SNAPSHOT_FILE: &[u8] = b"\0snapshot-file";

/// What a snapshot carries.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SnapshotData {
    #[serde(with = "crate::types::bytes::map")]
    kv: Map,
    last_applied: Option<LogId>,
    membership: StoredMembership,
}

/// The current snapshot as stores before `SNAPSHOT_FILE` kept it, and as
/// it is read.
#[derive(Debug, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    #[serde(with = "crate::types::bytes")]
    data: Vec<u8>,
}

/// The current snapshot as the tree holds it: its data is in a file.
#[derive(Debug, Serialize, Deserialize)]
struct SnapshotInFile {
    meta: SnapshotMeta,
    data: Checked,
}

/// The files of snapshots, in `dir`.
pub(crate) fn snapshot_files(dir: std::path::PathBuf) -> SideFiles {
    SideFiles::new(dir, ".snapshot")
}

/// The name of a snapshot's file: its data's hash (never a name a peer
/// sent).
fn file_name(data: &Checked) -> String {
    data.hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where snapshots are stored: their files and the tree that names them,
/// one store at a time (the builder and an install may run at once).
#[derive(Debug, Clone)]
struct SnapshotStore {
    db: Db,
    tree: Tree,
    files: SideFiles,
    lock: Arc<std::sync::Mutex<()>>,
}

/// Why a snapshot was not stored ([`SnapshotStore::store`]): the step that
/// failed, shown as the error underneath says it.
#[derive(Debug, thiserror::Error)]
enum StoreSnapshotError {
    /// The snapshot's file was not written.
    #[error("{0}")]
    File(std::io::Error),
    /// The record naming the file did not encode.
    #[error("{0}")]
    Encode(bincode::error::EncodeError),
    /// The batch naming the file was not applied.
    #[error("{0}")]
    Apply(DbError),
    /// The database was not flushed.
    #[error("{0}")]
    Flush(DbError),
}

impl SnapshotStore {
    /// Writes the snapshot's file, then `batch` with the tree naming it,
    /// flushes, and removes every other snapshot file. Blocking.
    fn store(
        &self,
        meta: &SnapshotMeta,
        data: &[u8],
        mut batch: Batch,
    ) -> Result<(), StoreSnapshotError> {
        let _one = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let checked = Checked::of(data);
        let name = file_name(&checked);
        self.files
            .write(&name, data)
            .map_err(StoreSnapshotError::File)?;
        let named = SnapshotInFile {
            meta: meta.clone(),
            data: checked,
        };
        batch.insert(
            &self.tree,
            SNAPSHOT_FILE,
            encode(&named).map_err(StoreSnapshotError::Encode)?,
        );
        batch.remove(&self.tree, SNAPSHOT);
        batch.apply().map_err(StoreSnapshotError::Apply)?;
        // Logs are purged behind a snapshot: it must be durable first.
        self.db.flush().map_err(StoreSnapshotError::Flush)?;
        if let Err(e) = self.files.keep_only(&[name]) {
            tracing::warn!(error = %e, "cannot remove an earlier snapshot's file");
        }
        Ok(())
    }

    /// The current snapshot, its data read from its file.
    fn current(&self) -> Result<Option<StoredSnapshot>, StorageError> {
        let read = |e: &dyn std::fmt::Display| {
            StorageError::from(StorageIOError::new(
                ErrorSubject::Snapshot(None),
                ErrorVerb::Read,
                AnyError::error(e.to_string()),
            ))
        };
        if let Some(bytes) = self.tree.get(SNAPSHOT_FILE).map_err(|e| read(&e))? {
            let named: SnapshotInFile = decode(&bytes).map_err(|e| read(&e))?;
            let data = self
                .files
                .read(&file_name(&named.data), named.data)
                .map_err(|e| read(&e))?;
            return Ok(Some(StoredSnapshot {
                meta: named.meta,
                data,
            }));
        }
        let Some(bytes) = self.tree.get(SNAPSHOT).map_err(|e| read(&e))? else {
            return Ok(None);
        };
        decode(&bytes).map(Some).map_err(|e| read(&e))
    }

    /// The name of the file the tree names, if any.
    fn named(&self) -> Result<Option<String>, StorageError> {
        let Some(bytes) = self.tree.get(SNAPSHOT_FILE).map_err(|e| sm_read(&e))? else {
            return Ok(None);
        };
        let named: SnapshotInFile = decode(&bytes).map_err(|e| sm_read(&e))?;
        Ok(Some(file_name(&named.data)))
    }
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
    tree: Tree,
    snapshots: SnapshotStore,
    kv: Arc<Map>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    applied_tx: Arc<watch::Sender<Applied>>,
    machine: Arc<dyn Machine>,
    /// Where the machine applies commands: below Raft's own threads.
    apply_thread: LowPriority,
}

impl StateMachine {
    /// Opens the state machine, its snapshot's data in `snapshot_files`,
    /// and publishes its current content on `applied_tx`. Removes the
    /// snapshot files the tree does not name (left by a crash, or by a
    /// device that cleared its state); a directory that cannot be written
    /// to keeps them, with a warning: they are never read.
    pub(crate) fn open(
        db: &Db,
        snapshot_files: SideFiles,
        applied_tx: Arc<watch::Sender<Applied>>,
        machine: Arc<dyn Machine>,
    ) -> Result<Self, StorageError> {
        let tree = Self::tree(db)?;
        let snapshots = SnapshotStore {
            db: db.clone(),
            tree: tree.clone(),
            files: snapshot_files,
            lock: Arc::default(),
        };
        let named: Vec<String> = snapshots.named()?.into_iter().collect();
        if let Err(e) = snapshots.files.keep_only(&named) {
            tracing::warn!(error = %e, "cannot remove unused snapshot files");
        }
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
            kv.insert(key, v);
        }
        let sm = Self {
            tree,
            snapshots,
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
    pub(crate) fn tree(db: &Db) -> Result<Tree, StorageError> {
        db.open_tree(TREE).map_err(|e| sm_read(&e))
    }

    fn publish(&self) {
        self.applied_tx.send_replace(Applied {
            index: self.last_applied.map_or(0, |l| l.index),
            kv: self.kv.clone(),
        });
    }
}

/// A copy of the state machine at one point, to build a snapshot from
/// while the state machine goes on applying.
#[derive(Debug)]
pub(crate) struct SnapshotBuilder {
    snapshots: SnapshotStore,
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
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        // Its file, then the tree naming it, durably: logs are purged
        // behind a snapshot.
        let (snapshots, stored_meta) = (self.snapshots.clone(), meta.clone());
        let (data, kept) = tokio::task::spawn_blocking(move || {
            let kept = snapshots.store(&stored_meta, &data, snapshots.db.batch());
            (data, kept)
        })
        .await
        .map_err(|e| io_err(subject.clone(), ErrorVerb::Write, &e))?;
        kept.map_err(|e| io_err(subject, ErrorVerb::Write, &std::io::Error::other(e)))?;
        tracing::info!(snapshot = %meta.snapshot_id, bytes = data.len(), "built a snapshot");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
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
        let mut batch = self.tree.db().batch();
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
                                let value = batch.insert_shared(&self.tree, kv_key(&key), value);
                                kv.insert(key, value);
                            }
                            Write::Delete { key } => {
                                batch.remove(&self.tree, kv_key(&key));
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
            &self.tree,
            APPLIED,
            encode(&self.last_applied).map_err(|e| sm_write(&e))?,
        );
        if membership_changed {
            batch.insert(
                &self.tree,
                MEMBERSHIP,
                encode(&self.membership).map_err(|e| sm_write(&e))?,
            );
        }
        // Off the runtime's threads: a batch can hold megabytes, and the
        // runtime answers heartbeats meanwhile.
        tokio::task::spawn_blocking(move || batch.apply())
            .await
            .map_err(|e| sm_write(&e))?
            .map_err(|e| sm_write(&e))?;
        self.publish();
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            snapshots: self.snapshots.clone(),
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
        let mut batch = self.tree.db().batch();
        for item in self.tree.scan_prefix(KV_PREFIX) {
            let (k, _) = item.map_err(|e| write(&e))?;
            batch.remove(&self.tree, k);
        }
        let mut kv = BTreeMap::new();
        for (k, v) in payload.kv {
            let value = batch.insert_shared(&self.tree, kv_key(&k), v.into());
            kv.insert(k, value);
        }
        batch.insert(
            &self.tree,
            APPLIED,
            encode(&meta.last_log_id).map_err(|e| write(&e))?,
        );
        batch.insert(
            &self.tree,
            MEMBERSHIP,
            encode(&meta.last_membership).map_err(|e| write(&e))?,
        );
        // The snapshot's file, then the batch naming it, durably.
        let (snapshots, stored_meta) = (self.snapshots.clone(), meta.clone());
        tokio::task::spawn_blocking(move || snapshots.store(&stored_meta, &data, batch))
            .await
            .map_err(|e| write(&e))?
            .map_err(|e| write(&e))?;

        self.kv = Arc::new(kv);
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        tracing::info!(snapshot = %meta.snapshot_id, "installed a snapshot");
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        Ok(self.snapshots.current()?.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, RaftSnapshotBuilder};

    use super::*;
    use crate::Backend;
    use crate::db::on_each_engine;
    use crate::machine::Writes;

    fn put(index: u64, key: &str, value: Vec<u8>) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 7), index),
            payload: EntryPayload::Normal(Writes::command(vec![Write::Put {
                key: key.into(),
                value,
            }])),
        }
    }

    fn open(store: &crate::Store) -> StateMachine {
        StateMachine::open(
            store.db(),
            store.snapshot_files(),
            Arc::new(watch::Sender::new(Applied::default())),
            Arc::new(Writes),
        )
        .expect("state machine")
    }

    /// The files in the snapshot directory.
    fn files_in(store: &crate::Store) -> Vec<String> {
        let dir = store.snapshot_files().path("x");
        let dir = dir.parent().expect("dir");
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Applies `entries`, then builds a snapshot.
    async fn snapshot_after(sm: &mut StateMachine, entries: Vec<Entry>) -> Snapshot {
        sm.apply(entries).await.expect("apply");
        sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build")
    }

    async fn current(sm: &mut StateMachine) -> Option<(SnapshotMeta, Vec<u8>)> {
        sm.get_current_snapshot()
            .await
            .expect("current snapshot")
            .map(|s| (s.meta, s.snapshot.into_inner()))
    }

    on_each_engine! {
        /// A snapshot's data is a file the tree names, written once; the next
        /// snapshot replaces it; a state machine opened again reads it.
        async fn a_snapshot_lives_in_a_file_the_tree_names(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = crate::Store::open_with(dir.path(), &backend).expect("store");
            let mut sm = open(&store);
            let first = snapshot_after(&mut sm, vec![put(1, "a", vec![1; 5000])]).await;
            let tree = StateMachine::tree(store.db()).expect("tree");
            let named = tree.get(SNAPSHOT_FILE).expect("get").expect("named");
            assert!(named.len() < 500, "the tree holds {} bytes", named.len());
            assert!(tree.get(SNAPSHOT).expect("get").is_none());
            let first_files = files_in(&store);
            assert_eq!(first_files.len(), 1, "{first_files:?}");
            let (meta, data) = current(&mut sm).await.expect("a snapshot");
            assert_eq!(meta, first.meta);
            assert_eq!(data, first.snapshot.into_inner());

            let second = snapshot_after(&mut sm, vec![put(2, "b", vec![2; 10])]).await;
            let second_files = files_in(&store);
            assert_eq!(second_files.len(), 1, "{second_files:?}");
            assert_ne!(
                second_files, first_files,
                "the earlier snapshot's file is gone"
            );

            drop(sm);
            let mut sm = open(&store);
            let (meta, data) = current(&mut sm).await.expect("a snapshot");
            assert_eq!(meta, second.meta);
            assert_eq!(data, second.snapshot.into_inner());
        }
    }

    on_each_engine! {
        /// A snapshot sent by the leader is kept the same way; a file left by
        /// a crash is removed when the state machine opens; a file altered
        /// on disk is an error, not a snapshot.
        async fn an_installed_snapshot_is_a_file_and_only_the_named_one_stays(backend: Backend) {
            let (leader_dir, dir) = (
                tempfile::tempdir().expect("tempdir"),
                tempfile::tempdir().expect("tempdir"),
            );
            let leader = crate::Store::open(leader_dir.path()).expect("store");
            let mut sm = open(&leader);
            let sent = snapshot_after(&mut sm, vec![put(1, "a", vec![1; 100])]).await;

            let store = crate::Store::open_with(dir.path(), &backend).expect("store");
            let mut follower = open(&store);
            follower
                .install_snapshot(&sent.meta, sent.snapshot.clone())
                .await
                .expect("install");
            assert_eq!(
                follower.applied_state().await.expect("applied").0,
                sent.meta.last_log_id
            );
            let (meta, data) = current(&mut follower).await.expect("installed");
            assert_eq!(
                (meta, data),
                (sent.meta.clone(), sent.snapshot.clone().into_inner())
            );
            let named = files_in(&store);
            assert_eq!(named.len(), 1);

            let stray = store.snapshot_files().path("0123");
            std::fs::write(&stray, b"left by a crash").expect("stray");
            drop(follower);
            let mut follower = open(&store);
            assert_eq!(files_in(&store), named);

            let file = store
                .snapshot_files()
                .path(named[0].trim_end_matches(".snapshot"));
            std::fs::write(&file, b"something else").expect("alter");
            let err = follower.get_current_snapshot().await.expect_err("altered");
            assert!(err.to_string().contains(&named[0]), "{err}");
        }
    }

    on_each_engine! {
        /// A store whose snapshot an earlier version kept in the tree still
        /// reads it, until the next snapshot replaces it with a file.
        async fn a_snapshot_kept_in_the_tree_still_reads(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = crate::Store::open_with(dir.path(), &backend).expect("store");
            let mut sm = open(&store);
            let built = snapshot_after(&mut sm, vec![put(1, "a", vec![1; 100])]).await;
            let (meta, data) = (built.meta, built.snapshot.into_inner());
            // As an earlier version left it: in the tree, no file.
            let tree = StateMachine::tree(store.db()).expect("tree");
            let old = StoredSnapshot {
                meta: meta.clone(),
                data: data.clone(),
            };
            tree.insert(SNAPSHOT, encode(&old).expect("encode"))
                .expect("insert");
            tree.remove(SNAPSHOT_FILE).expect("remove");
            drop(sm);
            let mut sm = open(&store);
            assert!(files_in(&store).is_empty(), "unnamed: removed at open");
            assert_eq!(current(&mut sm).await, Some((meta, data)));

            sm.get_snapshot_builder()
                .await
                .build_snapshot()
                .await
                .expect("build");
            assert!(tree.get(SNAPSHOT).expect("get").is_none());
            assert_eq!(files_in(&store).len(), 1);
        }
    }
}
