//! The Raft log, the vote and the committed pointer, in the store's
//! engine (`db`).
//!
//! Tree `raft-log`: big-endian log index → bincode of the entry; an entry
//! whose command is [`IN_FILE_BYTES`] or more is stored without it, with
//! the length and hash of the command, which is in a file of its own
//! (`side_files`, `raft-log/<index>-<term>-<node>.command`): sled, the
//! engine a device runs on, would write it again with every change to its
//! leaf.
//! Tree `raft-meta`: `vote`, `committed`, `last_purged` → bincode values.
//!
//! Durability: `append` flushes before it reports the entries as persisted
//! (`log_io_completed`), `save_vote` flushes before it returns, `purge` and
//! `truncate` flush too. `committed` is not flushed on its own (openraft only
//! uses it to re-apply already durable entries on start-up); it rides along
//! with the next flush. A stored value that does not decode, or a command
//! file that is missing or holds other bytes, is a `StorageError`, never
//! treated as absent. A command's file is written durably before the log
//! names it, and removed only once the log no longer does, durably.
//!
//! The last entry appended with its command in a file is also kept
//! decoded until it is committed: openraft reads the entries it sends
//! again for every retry of an append (each heartbeat interval while a
//! large one is still on its way), and reading a 57 MB command each time
//! cost a leader seconds.

// openraft's `StorageError` (224 bytes) is fixed by its traits' signatures.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader};

use crate::db::{Db, DbError, Tree};
use crate::machine::{Machine, PREPARE_BYTES};
use crate::side_files::{Checked, SideFiles};
use crate::types::{
    Entry, LogId, Proposal, StorageError, StorageIOError, TypeConfig, Value, Vote, decode,
    decode_command_in_file, encode, encode_command_in_file,
};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

/// A command at least this large is kept in a file of its own.
pub(crate) const IN_FILE_BYTES: usize = 1024 * 1024;

/// The files of the log's large commands, in `dir`.
pub(crate) fn command_files(dir: std::path::PathBuf) -> SideFiles {
    SideFiles::new(dir, ".command")
}

/// Whether the log holds the file of `entry`'s command already (the
/// entry was appended before, and is sent again).
pub(crate) fn command_file_exists(files: &SideFiles, entry: &Entry) -> bool {
    files.path(&file_name(&entry.log_id)).exists()
}

/// The name of the file of an entry's command: by its log id, which Raft
/// never gives two different entries.
fn file_name(log_id: &LogId) -> String {
    format!(
        "{}-{}-{}",
        log_id.index, log_id.leader_id.term, log_id.leader_id.node_id
    )
}

/// An entry as the log's tree holds it when its command is in a file:
/// the entry with an empty command, and what the file must hold.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct StoredInFile {
    entry: Entry,
    command: Checked,
}

/// A stored entry, its command read or not yet.
enum Stored {
    Whole(Entry),
    InFile(StoredInFile),
}

impl Stored {
    fn log_id(&self) -> LogId {
        match self {
            Stored::Whole(entry) => entry.log_id,
            Stored::InFile(stored) => stored.entry.log_id,
        }
    }
}

/// The command of `entry` if it is to be kept in a file.
pub(crate) fn command_for_file(entry: &Entry) -> Option<&Value> {
    match &entry.payload {
        EntryPayload::Normal(Proposal(command)) if command.len() >= IN_FILE_BYTES => Some(command),
        _ => None,
    }
}

/// Large commands written to files of their own before the log store is
/// given them, off Raft's core: by the leader before it proposes one, by
/// a follower as an append brings one. Raft's core appends entries one
/// call at a time and does nothing else meanwhile (no heartbeat, no vote):
/// writing and syncing 57 MB there took longer than an election timeout,
/// and a pair held elections during its whole applies. The append then
/// renames the file. A command is known by its allocation, which the
/// registry keeps alive (a clone of its `Bytes`), so that no other bytes
/// can take its place meanwhile.
#[derive(Debug, Clone, Default)]
pub(crate) struct PreWritten(Arc<Mutex<HashMap<(usize, usize), Pending>>>);

#[derive(Debug)]
struct Pending {
    _command: Value,
    name: String,
    checked: Checked,
}

fn allocation(command: &Value) -> (usize, usize) {
    (command.as_ptr() as usize, command.len())
}

/// Names the pre-written files of this process apart.
static PRE_WRITTEN: AtomicU64 = AtomicU64::new(0);

impl PreWritten {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, usize), Pending>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `command` to a file of `files`, durably (blocking), for the
    /// append that carries it to rename while the returned guard lives.
    pub(crate) fn write(&self, files: &SideFiles, command: &Value) -> io::Result<PreWrite> {
        let name = format!("pending-{}", PRE_WRITTEN.fetch_add(1, Ordering::Relaxed));
        files.write(&name, command)?;
        let key = allocation(command);
        let pending = Pending {
            _command: command.clone(),
            name,
            checked: Checked::of(command),
        };
        if let Some(earlier) = self.lock().insert(key, pending) {
            // The same allocation written twice at once: one file is enough.
            let _ = files.remove(&[earlier.name]);
        }
        Ok(PreWrite {
            registry: self.clone(),
            files: files.clone(),
            key,
        })
    }

    fn take(&self, command: &Value) -> Option<Pending> {
        self.lock().remove(&allocation(command))
    }
}

/// A pre-written command's file, removed when this goes unless an append
/// took it.
#[derive(Debug)]
pub(crate) struct PreWrite {
    registry: PreWritten,
    files: SideFiles,
    key: (usize, usize),
}

impl Drop for PreWrite {
    fn drop(&mut self) {
        let left = self.registry.lock().remove(&self.key);
        if let Some(left) = left
            && let Err(e) = self.files.remove(&[left.name])
        {
            tracing::warn!(error = %e, "cannot remove an unused pre-written command file");
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct LogStore {
    db: Db,
    log: Tree,
    meta: Tree,
    /// The commands of [`IN_FILE_BYTES`] or more.
    files: SideFiles,
    /// The last large entry inserted, decoded (its payload shared), while
    /// the log holds it at its index and it is not known committed. Shared
    /// by the log store and its readers.
    decoded: Arc<Mutex<Option<Entry>>>,
    /// Offered each large command appended ([`Machine::prepare`]).
    machine: Option<Arc<dyn Machine>>,
    /// Large commands already in files, to rename.
    prewritten: PreWritten,
}

fn io_err(
    subject: ErrorSubject<u64>,
    verb: ErrorVerb,
    e: &(impl std::error::Error + 'static),
) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::new(e)).into()
}

fn corrupt(
    subject: ErrorSubject<u64>,
    what: &str,
    e: &(impl std::error::Error + 'static),
) -> StorageError {
    StorageIOError::new(
        subject,
        ErrorVerb::Read,
        AnyError::new(e).add_context(|| format!("decoding stored {what}")),
    )
    .into()
}

fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn index_of(key: &[u8]) -> Result<u64, StorageError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| {
        StorageError::from(StorageIOError::new(
            ErrorSubject::Logs,
            ErrorVerb::Read,
            AnyError::error(format!("log key of {} bytes, want 8", key.len())),
        ))
    })?;
    Ok(u64::from_be_bytes(bytes))
}

impl LogStore {
    /// The log in `db`, its large commands in `files`. Removes the files
    /// the log does not name (left by a crash); a directory that cannot be
    /// written to keeps them, with a warning: they are never read.
    pub(crate) fn open(db: &Db, files: SideFiles) -> Result<Self, StorageError> {
        let open = |name: &str| {
            db.open_tree(name)
                .map_err(|e| io_err(ErrorSubject::Store, ErrorVerb::Read, &e))
        };
        let store = Self {
            db: db.clone(),
            log: open("raft-log")?,
            meta: open("raft-meta")?,
            files,
            decoded: Arc::default(),
            machine: None,
            prewritten: PreWritten::default(),
        };
        let named = store.in_files(..)?;
        if let Err(e) = store.files.keep_only(&named) {
            tracing::warn!(error = %e, "cannot remove the Raft log's unused command files");
        }
        Ok(store)
    }

    /// The log ids of the entries in `range` whose command is in a file.
    fn in_files(&self, range: impl RangeBounds<[u8; 8]>) -> Result<Vec<String>, StorageError> {
        let mut ids = Vec::new();
        for item in self.log.range(range) {
            let (_, bytes) = item.map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
            if let Some(stored) = decode_command_in_file::<StoredInFile>(&bytes) {
                let stored = stored.map_err(|e| corrupt(ErrorSubject::Logs, "log entry", &e))?;
                ids.push(file_name(&stored.entry.log_id));
            }
        }
        Ok(ids)
    }

    /// This log store, offering each large command appended to `machine`
    /// ([`Machine::prepare`]).
    pub(crate) fn preparing_for(self, machine: Arc<dyn Machine>) -> Self {
        Self {
            machine: Some(machine),
            ..self
        }
    }

    /// This log store, renaming the commands `prewritten` holds instead of
    /// writing them.
    pub(crate) fn with_prewritten(self, prewritten: PreWritten) -> Self {
        Self { prewritten, ..self }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Option<Entry>> {
        self.decoded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry at `index`, decoded from `bytes` (what the log holds
    /// there, its command read from its file if it is in one) unless it is
    /// the one kept decoded.
    fn entry_at(&self, index: u64, bytes: &[u8]) -> Result<Entry, StorageError> {
        if let Some(entry) = self.kept().as_ref().filter(|e| e.log_id.index == index) {
            return Ok(entry.clone());
        }
        match Self::decode_stored(bytes)? {
            Stored::Whole(entry) => Ok(entry),
            Stored::InFile(StoredInFile { mut entry, command }) => {
                let bytes = self
                    .files
                    .read(&file_name(&entry.log_id), command)
                    .map_err(|e| {
                        StorageError::from(StorageIOError::read_log_at_index(
                            entry.log_id.index,
                            AnyError::new(&e),
                        ))
                    })?;
                entry.payload = EntryPayload::Normal(Proposal(bytes.into()));
                Ok(entry)
            }
        }
    }

    /// Forgets the entry kept decoded when `gone` says its index no longer
    /// holds it (removed) or no longer needs it (committed).
    fn forget_kept(&self, gone: impl Fn(u64) -> bool) {
        let mut kept = self.kept();
        if kept.as_ref().is_some_and(|e| gone(e.log_id.index)) {
            *kept = None;
        }
    }

    async fn flush(&self, subject: ErrorSubject<u64>) -> Result<(), StorageError> {
        self.db
            .flush_async()
            .await
            .map_err(|e| io_err(subject, ErrorVerb::Write, &e))
    }

    fn get_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &[u8],
        subject: ErrorSubject<u64>,
    ) -> Result<Option<T>, StorageError> {
        let Some(bytes) = self
            .meta
            .get(key)
            .map_err(|e| io_err(subject.clone(), ErrorVerb::Read, &e))?
        else {
            return Ok(None);
        };
        let what = String::from_utf8_lossy(key).into_owned();
        decode(&bytes)
            .map(Some)
            .map_err(|e| corrupt(subject, &what, &e))
    }

    fn put_meta<T: serde::Serialize>(
        &self,
        key: &[u8],
        value: &T,
        subject: ErrorSubject<u64>,
    ) -> Result<(), StorageError> {
        let bytes = encode(value).map_err(|e| io_err(subject.clone(), ErrorVerb::Write, &e))?;
        self.meta
            .insert(key, bytes)
            .map_err(|e| io_err(subject, ErrorVerb::Write, &e))?;
        Ok(())
    }

    pub(crate) fn vote(&self) -> Result<Option<Vote>, StorageError> {
        self.get_meta(VOTE, ErrorSubject::Vote)
    }

    fn last_purged(&self) -> Result<Option<LogId>, StorageError> {
        self.get_meta(LAST_PURGED, ErrorSubject::Store)
    }

    fn decode_stored(bytes: &[u8]) -> Result<Stored, StorageError> {
        let what = |e| corrupt(ErrorSubject::Logs, "log entry", &e);
        match decode_command_in_file(bytes) {
            Some(stored) => stored.map(Stored::InFile).map_err(what),
            None => decode(bytes).map(Stored::Whole).map_err(what),
        }
    }

    /// The id of the last entry present, else the last purged one.
    pub(crate) fn last_log_id(&self) -> Result<Option<LogId>, StorageError> {
        let last = self
            .log
            .last()
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
        match last {
            Some((_, bytes)) => Ok(Some(Self::decode_stored(&bytes)?.log_id())),
            None => self.last_purged(),
        }
    }

    /// Writes entries and the vote, then flushes: used by recovery while
    /// Raft is stopped.
    pub(crate) async fn write_direct(
        &self,
        entries: &[Entry],
        vote: &Vote,
    ) -> Result<(), StorageError> {
        self.insert_entries(entries.iter())?;
        self.put_meta(VOTE, vote, ErrorSubject::Vote)?;
        self.flush(ErrorSubject::Logs).await
    }

    /// Forgets the whole Raft state, only while Raft is stopped: every log
    /// entry, the vote, the committed and purged pointers, and every key of
    /// `also` (the state machine's tree), in one transaction, then flushes.
    /// A crash leaves all of it or none of it: a log without the state
    /// machine it was applied to (or the reverse) would not start.
    pub(crate) async fn clear_with(&self, also: &Tree) -> Result<(), StorageError> {
        self.forget_kept(|_| true);
        let mut batch = self.db.batch();
        for tree in [&self.log, &self.meta, also] {
            for item in tree.iter() {
                let (key, _) =
                    item.map_err(|e| io_err(ErrorSubject::Store, ErrorVerb::Read, &e))?;
                batch.remove(tree, key);
            }
        }
        batch
            .apply()
            .map_err(|e| io_err(ErrorSubject::Store, ErrorVerb::Delete, &e))?;
        self.flush(ErrorSubject::Store).await?;
        if let Err(e) = self.files.keep_only(&[]) {
            tracing::warn!(error = %e, "cannot remove the Raft log's command files");
        }
        Ok(())
    }

    fn insert_entries<'a>(
        &self,
        entries: impl Iterator<Item = &'a Entry>,
    ) -> Result<(), StorageError> {
        let mut batch = self.db.batch();
        let mut large = None;
        let mut first = None;
        for entry in entries {
            let failed =
                |e: AnyError| StorageError::from(StorageIOError::write_log_entry(entry.log_id, e));
            let bytes = match command_for_file(entry) {
                // Durable before the log names it; kept decoded until
                // committed.
                Some(command) => {
                    large = Some(entry.clone());
                    let name = file_name(&entry.log_id);
                    let renamed = self.prewritten.take(command).and_then(|pending| {
                        match self.files.rename(&pending.name, &name) {
                            Ok(()) => Some(pending.checked),
                            Err(e) => {
                                tracing::warn!(error = %e, "writing the command again instead");
                                let _ = self.files.remove(&[pending.name]);
                                None
                            }
                        }
                    });
                    let checked = match renamed {
                        Some(checked) => checked,
                        None => {
                            self.files
                                .write(&name, command)
                                .map_err(|e| failed(AnyError::new(&e)))?;
                            Checked::of(command)
                        }
                    };
                    encode_command_in_file(&StoredInFile {
                        entry: Entry {
                            log_id: entry.log_id,
                            payload: EntryPayload::Normal(Proposal::default()),
                        },
                        command: checked,
                    })
                }
                None => encode(entry),
            }
            .map_err(|e| failed(AnyError::new(&e)))?;
            first.get_or_insert(entry.log_id.index);
            batch.insert(&self.log, index_key(entry.log_id.index), bytes);
        }
        // Whatever these entries replace is not kept decoded any more.
        if let Some(first) = first {
            self.forget_kept(|i| i >= first);
        }
        let appended = batch
            .apply()
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Write, &e));
        if appended.is_ok() && large.is_some() {
            *self.kept() = large;
        }
        appended
    }

    /// Removes the entries in `[from, to)` (`to` None: to the end), then
    /// flushes, then removes their command files.
    async fn remove_range(&self, from: u64, to: Option<u64>) -> Result<(), StorageError> {
        self.forget_kept(|i| i >= from && to.is_none_or(|to| i < to));
        let io = |e: DbError| io_err(ErrorSubject::Logs, ErrorVerb::Delete, &e);
        let (start, end) = (
            Bound::Included(index_key(from)),
            to.map_or(Bound::Unbounded, |to| Bound::Excluded(index_key(to))),
        );
        let files = self.in_files((start, end))?;
        let mut batch = self.db.batch();
        for item in self.log.range((start, end)) {
            let (key, _) = item.map_err(io)?;
            batch.remove(&self.log, key);
        }
        batch.apply().map_err(io)?;
        self.flush(ErrorSubject::Logs).await?;
        // Left behind, a file is removed when the log opens again.
        if let Err(e) = self.files.remove(&files) {
            tracing::warn!(error = %e, "cannot remove a Raft log command file");
        }
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&x) => x,
            Bound::Excluded(&x) => match x.checked_add(1) {
                Some(x) => x,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => 0,
        };
        let mut entries = Vec::new();
        for item in self.log.range(index_key(start)..) {
            let (key, bytes) = item.map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
            let index = index_of(&key)?;
            if !range.contains(&index) {
                break;
            }
            let entry = self.entry_at(index, &bytes)?;
            if entry.log_id.index != index {
                return Err(StorageIOError::read_log_at_index(
                    index,
                    AnyError::error(format!(
                        "entry under key {index} has index {}",
                        entry.log_id.index
                    )),
                )
                .into());
            }
            entries.push(entry);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.last_purged()?;
        let last_log_id = self.last_log_id()?;
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.put_meta(VOTE, vote, ErrorSubject::Vote)?;
        self.flush(ErrorSubject::Vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.vote()
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // A committed entry is read once more, to be applied; nothing
        // retries sending it to a quorum.
        if let Some(c) = committed {
            self.forget_kept(|i| i <= c.index);
        }
        self.put_meta(COMMITTED, &committed, ErrorSubject::Store)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self
            .get_meta::<Option<LogId>>(COMMITTED, ErrorSubject::Store)?
            .flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        self.insert_entries(entries.iter())?;
        if let Some(machine) = &self.machine {
            for entry in &entries {
                if let EntryPayload::Normal(Proposal(command)) = &entry.payload
                    && command.len() >= PREPARE_BYTES
                {
                    machine.prepare(entry.log_id.index, command);
                }
            }
        }
        // Durable before openraft may count these entries towards a quorum.
        match self.db.flush_async().await {
            Ok(_) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let err = io_err(ErrorSubject::Logs, ErrorVerb::Write, &e);
                callback.log_io_completed(Err(io::Error::other(e.to_string())));
                Err(err)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(%log_id, "truncating the raft log");
        self.remove_range(log_id.index, None).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(%log_id, "purging the raft log");
        // Record the purge point first: a crash in between leaves extra
        // entries below it, never a hole above it.
        self.put_meta(LAST_PURGED, &log_id, ErrorSubject::Store)?;
        self.remove_range(0, log_id.index.checked_add(1)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use openraft::storage::RaftStateMachine;
    use openraft::{CommittedLeaderId, RaftSnapshotBuilder};
    use tokio::sync::watch;

    use super::*;
    use crate::Backend;
    use crate::db::on_each_engine;
    use crate::machine::Writes;
    use crate::state_machine::StateMachine;
    use crate::types::{Applied, Write};

    on_each_engine! {
        async fn clearing_forgets_the_log_the_vote_the_state_machine_and_the_snapshot(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = crate::Store::open_with(dir.path(), &backend).expect("store");
            let db = store.db();
            let mut log = LogStore::open(db, store.log_files()).expect("log");
            let applied = Arc::new(watch::Sender::new(Applied::default()));
            let mut sm = StateMachine::open(
                db,
                store.snapshot_files(),
                applied.clone(),
                Arc::new(Writes),
            )
            .expect("state machine");
            // The last one's command is in a file.
            let entries: Vec<Entry> = (1..=3u8)
                .map(|i| Entry {
                    log_id: LogId::new(CommittedLeaderId::new(1, 7), u64::from(i)),
                    payload: EntryPayload::Normal(Writes::command(vec![Write::Put {
                        key: format!("k{i}"),
                        value: vec![i; if i == 3 { IN_FILE_BYTES } else { 1 }],
                    }])),
                })
                .collect();
            log.write_direct(&entries, &Vote::new(1, 7))
                .await
                .expect("append");
            log.save_committed(Some(entries[2].log_id))
                .await
                .expect("committed");
            log.purge(entries[0].log_id).await.expect("purge");
            sm.apply(entries.clone()).await.expect("apply");
            sm.get_snapshot_builder()
                .await
                .build_snapshot()
                .await
                .expect("snapshot");
            assert_eq!(applied.borrow().kv.len(), 3);

            let tree = StateMachine::tree(db).expect("tree");
            let file = store.log_files().path(&file_name(&entries[2].log_id));
            assert!(file.exists());
            log.clear_with(&tree).await.expect("clear");
            assert!(!file.exists());

            let state = log.get_log_state().await.expect("log state");
            assert_eq!(state.last_log_id, None);
            assert_eq!(state.last_purged_log_id, None);
            assert_eq!(log.read_vote().await.expect("vote"), None);
            assert_eq!(log.read_committed().await.expect("committed"), None);
            assert_eq!(tree.len().expect("len"), 0);
            // What Raft finds when it starts again: nothing, and an empty map.
            let mut sm = StateMachine::open(
                db,
                store.snapshot_files(),
                applied.clone(),
                Arc::new(Writes),
            )
            .expect("reopen");
            assert_eq!(sm.applied_state().await.expect("applied").0, None);
            assert!(sm.get_current_snapshot().await.expect("snapshot").is_none());
            assert!(applied.borrow().kv.is_empty());
            assert_eq!(applied.borrow().index, 0);
        }
    }

    fn entry(index: u64, value: Vec<u8>) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 7), index),
            payload: EntryPayload::Normal(Writes::command(vec![Write::Put {
                key: format!("k{index}"),
                value,
            }])),
        }
    }

    /// The payload's bytes, to tell a decoded copy from the kept one.
    fn payload_at(entry: &Entry) -> *const u8 {
        match &entry.payload {
            EntryPayload::Normal(p) => p.0.as_ptr(),
            _ => std::ptr::null(),
        }
    }

    on_each_engine! {
        /// A large entry is read back as kept (its payload shared, not decoded
        /// again) until it is committed or its index is rewritten, and always
        /// as it was written.
        async fn a_large_entry_is_read_as_kept_until_committed_or_replaced(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = crate::Store::open_with(dir.path(), &backend).expect("store");
            let mut log = LogStore::open(store.db(), store.log_files()).expect("log");
            let vote = Vote::new(1, 7);
            let large = entry(1, vec![7; 2 * IN_FILE_BYTES]);
            let written = vec![large.clone(), entry(2, vec![2])];
            log.write_direct(&written, &vote).await.expect("write");
            let read = log.try_get_log_entries(1..3).await.expect("read");
            assert_eq!(read, written);
            let again = log.try_get_log_entries(1..2).await.expect("read");
            assert_eq!(
                payload_at(&again[0]),
                payload_at(&read[0]),
                "kept, not decoded"
            );

            // Truncated and rewritten: the new entry, not the kept one.
            log.truncate(large.log_id).await.expect("truncate");
            let small = entry(1, vec![1]);
            log.write_direct(std::slice::from_ref(&small), &vote)
                .await
                .expect("rewrite");
            assert_eq!(log.try_get_log_entries(1..2).await.expect("read"), [small]);

            // Committed: decoded from the log again, the same entry.
            let large = entry(2, vec![9; 2 * IN_FILE_BYTES]);
            log.write_direct(std::slice::from_ref(&large), &vote)
                .await
                .expect("write");
            let kept = log.try_get_log_entries(2..3).await.expect("read");
            log.save_committed(Some(large.log_id))
                .await
                .expect("commit");
            let read = log.try_get_log_entries(2..3).await.expect("read");
            assert_eq!(read, [large]);
            assert_ne!(payload_at(&read[0]), payload_at(&kept[0]), "decoded again");
        }
    }

    /// The bytes the log's tree holds at `index`.
    fn stored_at(store: &crate::Store, index: u64) -> Option<Value> {
        let tree = store.db().open_tree("raft-log").expect("tree");
        tree.get(index_key(index)).expect("get")
    }

    on_each_engine! {
        /// A command of 1 MiB or more is written to a file of its own, read
        /// back from it whole by a log opened afresh, and the file goes with
        /// its entry (truncated, purged); the log's tree holds a few bytes.
        async fn a_large_command_lives_in_a_file_the_log_names(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = crate::Store::open_with(dir.path(), &backend).expect("store");
            let files = store.log_files();
            let vote = Vote::new(1, 7);
            let written = vec![
                entry(1, vec![1]),
                entry(2, vec![2; IN_FILE_BYTES]),
                entry(3, vec![3; IN_FILE_BYTES + 1]),
                entry(4, vec![4; 10]),
            ];
            let mut log = LogStore::open(store.db(), files.clone()).expect("log");
            log.write_direct(&written, &vote).await.expect("write");
            for e in &written[1..3] {
                assert!(files.path(&file_name(&e.log_id)).exists(), "{}", e.log_id);
                let stored = stored_at(&store, e.log_id.index).expect("stored");
                assert!(stored.len() < 200, "{} bytes in the tree", stored.len());
            }
            assert!(!files.path(&file_name(&written[0].log_id)).exists());

            // Read by a log store that keeps nothing decoded: from the files.
            let mut reopened = LogStore::open(store.db(), files.clone()).expect("reopen");
            assert_eq!(
                reopened.try_get_log_entries(1..5).await.expect("read"),
                written
            );
            let state = reopened.get_log_state().await.expect("state");
            assert_eq!(state.last_log_id, Some(written[3].log_id));

            log.purge(written[1].log_id).await.expect("purge");
            assert!(!files.path(&file_name(&written[1].log_id)).exists());
            assert!(files.path(&file_name(&written[2].log_id)).exists());
            log.truncate(written[2].log_id).await.expect("truncate");
            assert!(!files.path(&file_name(&written[2].log_id)).exists());
            assert_eq!(log.try_get_log_entries(..).await.expect("read"), []);
            assert_eq!(
                log.get_log_state().await.expect("state").last_log_id,
                Some(written[1].log_id),
                "the last purged"
            );
        }
    }

    /// A store whose log holds `entries`, and the log's command files.
    async fn written(
        backend: &Backend,
        entries: &[Entry],
    ) -> (tempfile::TempDir, crate::Store, SideFiles) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::Store::open_with(dir.path(), backend).expect("store");
        let files = store.log_files();
        let log = LogStore::open(store.db(), files.clone()).expect("log");
        log.write_direct(entries, &Vote::new(1, 7))
            .await
            .expect("write");
        (dir, store, files)
    }

    on_each_engine! {
        /// A file written before a crash kept the log from naming it is
        /// removed when the log opens; a named one stays.
        async fn a_command_file_the_log_does_not_name_is_removed_at_open(backend: Backend) {
            let named = entry(1, vec![1; IN_FILE_BYTES]);
            let (_dir, store, files) = written(&backend, std::slice::from_ref(&named)).await;
            let stray = entry(2, vec![2; IN_FILE_BYTES]);
            files
                .write(&file_name(&stray.log_id), &[2; 10])
                .expect("stray file");

            let mut log = LogStore::open(store.db(), files.clone()).expect("reopen");
            assert!(!files.path(&file_name(&stray.log_id)).exists());
            assert!(files.path(&file_name(&named.log_id)).exists());
            assert_eq!(log.try_get_log_entries(..).await.expect("read"), [named]);
        }
    }

    on_each_engine! {
        /// A command file that is gone or holds other bytes is a storage
        /// error naming the file, never an entry read short or as absent.
        async fn a_command_file_gone_or_altered_is_an_error(backend: Backend) {
            let large = entry(1, vec![1; IN_FILE_BYTES]);
            let (_dir, store, files) = written(&backend, std::slice::from_ref(&large)).await;
            let path = files.path(&file_name(&large.log_id));
            let mut bytes = std::fs::read(&path).expect("read file");
            let last = bytes.len() - 1;
            bytes[last] ^= 1;
            std::fs::write(&path, &bytes).expect("alter");
            let mut log = LogStore::open(store.db(), files.clone()).expect("reopen");
            let err = log.try_get_log_entries(..).await.expect_err("altered");
            assert!(err.to_string().contains("1-1-7.command"), "{err}");

            std::fs::remove_file(&path).expect("remove");
            let err = log.try_get_log_entries(..).await.expect_err("gone");
            assert!(err.to_string().contains("1-1-7.command"), "{err}");
        }
    }

    fn with_command(index: u64, command: &Value) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 7), index),
            payload: EntryPayload::Normal(Proposal(command.clone())),
        }
    }

    fn inode(path: &std::path::Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).expect("metadata").ino()
    }

    on_each_engine! {
        /// A command written ahead (off Raft's core) is renamed by the append
        /// that carries it, not written again; one never appended is removed
        /// with its guard; one whose file went is written by the append.
        async fn a_command_written_ahead_is_renamed_by_its_append(backend: Backend) {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = crate::Store::open_with(dir.path(), &backend).expect("store");
            let files = store.log_files();
            let prewritten = PreWritten::default();
            let log = LogStore::open(store.db(), files.clone())
                .expect("log")
                .with_prewritten(prewritten.clone());
            let vote = Vote::new(1, 7);

            let command: Value = vec![3u8; IN_FILE_BYTES].into();
            let guard = prewritten.write(&files, &command).expect("write ahead");
            let pending = files.path(&prewritten.lock().values().next().expect("pending").name);
            let written = inode(&pending);
            let entry = with_command(1, &command);
            log.write_direct(std::slice::from_ref(&entry), &vote)
                .await
                .expect("append");
            let file = files.path(&file_name(&entry.log_id));
            assert_eq!(inode(&file), written, "renamed, not written again");
            assert!(!pending.exists());
            drop(guard);
            assert!(file.exists(), "the guard leaves a file the log took");

            // Never appended: removed with its guard.
            let other: Value = vec![4u8; IN_FILE_BYTES].into();
            let guard = prewritten.write(&files, &other).expect("write ahead");
            let pending = files.path(&prewritten.lock().values().next().expect("pending").name);
            assert!(pending.exists());
            drop(guard);
            assert!(!pending.exists());

            // Its file gone before the append: the append writes it.
            let guard = prewritten.write(&files, &other).expect("write ahead");
            let pending = files.path(&prewritten.lock().values().next().expect("pending").name);
            std::fs::remove_file(&pending).expect("remove");
            let entry = with_command(2, &other);
            log.write_direct(std::slice::from_ref(&entry), &vote)
                .await
                .expect("append");
            drop(guard);
            let mut reopened = LogStore::open(store.db(), files.clone()).expect("reopen");
            let read = reopened.try_get_log_entries(1..3).await.expect("read");
            assert_eq!(read, [with_command(1, &command), entry]);
        }
    }
}
