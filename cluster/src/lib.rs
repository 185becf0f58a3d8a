//! gtm's replication layer: the durable store of a device and the Raft
//! cluster (openraft) that replicates a generic key/value map between devices.
//!
//! The crate knows nothing of DNS: the application proposes commands
//! (opaque bytes) through [`ClusterNode::propose`] on any member; every
//! device applies each committed command to its copy of the replicated
//! key/value map through the application's [`Machine`], and observes the
//! map through [`ClusterNode::applied`].
//!
//! Layout, one concern per module:
//! - `types`: the openraft type configuration and the public value types;
//! - `db`: the storage seam: the key-value trait the store is written
//!   against, and its adapters (sled, the default; in memory; failing on
//!   demand), chosen by [`Backend`];
//! - `log_store`: the Raft log, vote and committed pointer;
//! - `state_machine`: the replicated map, its snapshots, the applied watch;
//! - `side_files`: values kept in files of their own beside the store's
//!   engine (the log's large commands, the snapshot, the device's
//!   configuration parts);
//! - `machine`: the application's state machine trait;
//! - `error`: [`ClusterError`], the one error type of the crate;
//! - `rpc_client`: Raft RPC over HTTP, what a device sends (imports nothing
//!   of `node`);
//! - `rpc_server`: the RPC routes a device serves (drives `node`);
//! - `forward`: the client that hands a command to the leader;
//! - `http`: the one HTTP client constructor (TLS, mutual TLS);
//! - `node`: [`ClusterNode`], the facade the application uses;
//! - `config_store`: a device's own copy of the configuration it serves,
//!   kept as `parts`, each in a side file.
//!
//! Nothing outside this crate names an openraft or storage engine type:
//! only the types re-exported here are public.

use std::path::Path;

mod config_store;
mod db;
mod error;
mod forward;
mod http;
mod log_store;
mod low_priority;
mod machine;
mod node;
pub mod parts;
mod rpc_client;
mod rpc_server;
mod side_files;
mod state_machine;
mod types;

pub use config_store::{KeptConfig, PartName, StoredConfig};
pub use db::{Backend, DbError, FaultSwitch, MemoryDb};
pub use error::ClusterError;
pub use http::{ClientTls, HttpClientError, PeerCredentials, PeerTls, http_client, trust_roots};
pub use low_priority::LowPriority;
pub use machine::{Effect, Machine, PREPARE_BYTES};
pub use node::{
    ClusterConfig, ClusterNode, ClusterStatus, JOIN_TIMEOUT, MAX_COMMAND_BYTES, MemberStatus,
    NodeState, PROPOSE_DEADLINE, WRITE_TIMEOUT, apply_allowance,
};
pub use rpc_client::SECRET_HEADER;
pub use rpc_server::{
    ChunkOutOfBounds, RPC_PATHS, RpcBody, RpcBodyError, constant_time_eq, decode_rpc_body,
    rpc_router,
};
pub use types::{Applied, Kept, Map, NodeInfo, Proposal, Value, Write};

/// Storage failures, with the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store in {path}: {source}")]
    Open { path: String, source: DbError },
    #[error("store I/O failed while {action}: {source}")]
    Io {
        action: &'static str,
        source: DbError,
    },
    #[error("stored {what} is corrupt: {why}")]
    Corrupt { what: &'static str, why: String },
}

/// A device's durable state.
#[derive(Debug, Clone)]
pub struct Store {
    db: db::Db,
    /// The default tree: the lists of the device's own configuration
    /// (`config_store`).
    default_tree: db::Tree,
    /// The store's directory, for error messages.
    path: std::sync::Arc<Path>,
    /// The parts of the device's own copy of its configuration
    /// (`config_store`).
    config_parts: side_files::SideFiles,
    /// Last health decision per check instance.
    health: db::Tree,
    /// The event log: big-endian sequence number → big-endian time (ms,
    /// 8 bytes) followed by the event.
    events: db::Tree,
    /// The event log by time: big-endian time + sequence number → nothing.
    /// Paging by time reads only the events it returns.
    event_times: db::Tree,
    event_retention: u64,
}

/// Events kept by default: the oldest beyond this are dropped.
pub const DEFAULT_EVENT_RETENTION: u64 = 100_000;

/// The tree of a device's state while it is in no cluster.
const LOCAL_TREE: &str = "local-kv";

impl Store {
    /// The store in the data directory `dir`, on sled (`dir/store`).
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(dir, &Backend::Sled)
    }

    /// The store in the data directory `dir`, its keys and values kept by
    /// `backend` (its large values are files in `dir` whatever it is).
    pub fn open_with(dir: &Path, backend: &Backend) -> Result<Self, StoreError> {
        let path = dir.join("store");
        let open_err = |source| StoreError::Open {
            path: dir.display().to_string(),
            source,
        };
        let db = db::Db::open(&path, backend).map_err(open_err)?;
        let health = db.open_tree("health").map_err(open_err)?;
        let events = db.open_tree("event-log").map_err(open_err)?;
        let event_times = db.open_tree("event-time").map_err(open_err)?;
        let store = Self {
            default_tree: db.default_tree(),
            db,
            path: path.into(),
            config_parts: config_store::part_files(dir),
            health,
            events,
            event_times,
            event_retention: DEFAULT_EVENT_RETENTION,
        };
        store.move_parts_to_files()?;
        // Space only: a part left over is never read.
        if let Err(e) = store.drop_unnamed_parts() {
            tracing::warn!(error = %e, "cannot remove the configuration's unused parts");
        }
        Ok(store)
    }

    /// How many events the log keeps (at least 1).
    pub fn with_event_retention(mut self, events: u64) -> Self {
        self.event_retention = events.max(1);
        self
    }

    /// How many events the log keeps.
    pub fn event_retention(&self) -> u64 {
        self.event_retention
    }

    /// Every kept health decision, by check instance name.
    pub fn health_decisions(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.health
            .iter()
            .map(|item| {
                let (k, v) = item.map_err(|source| StoreError::Io {
                    action: "reading health decisions",
                    source,
                })?;
                Ok((String::from_utf8_lossy(&k).into_owned(), v.to_vec()))
            })
            .collect()
    }

    pub fn put_health_decision(&self, check: &str, value: &[u8]) -> Result<(), StoreError> {
        self.health
            .insert(check.as_bytes(), value)
            .map_err(|source| StoreError::Io {
                action: "writing a health decision",
                source,
            })?;
        Ok(())
    }

    /// Where the store lives on disk.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the events of the log's first layout (tree `events`, sequence
    /// → event, no time index) into the indexed one; `time_of` reads an
    /// event's time. Nothing happens when there are none.
    pub fn migrate_legacy_events(
        &self,
        time_of: impl Fn(&[u8]) -> u64,
    ) -> Result<usize, StoreError> {
        let io = |source| StoreError::Io {
            action: "migrating the event log",
            source,
        };
        if !self.db.has_tree("events").map_err(io)? {
            return Ok(0);
        }
        let legacy = self.db.open_tree("events").map_err(io)?;
        let mut moved = 0;
        for item in legacy.iter() {
            let (k, v) = item.map_err(io)?;
            self.append_event(seq_of(&k), time_of(&v), &v)?;
            moved += 1;
        }
        self.db.drop_tree("events").map_err(io)?;
        Ok(moved)
    }

    /// Appends an event and drops the oldest beyond the retention.
    pub fn append_event(&self, seq: u64, time_ms: u64, value: &[u8]) -> Result<(), StoreError> {
        let io = |source| StoreError::Io {
            action: "writing the event log",
            source,
        };
        let mut stored = Vec::with_capacity(8 + value.len());
        stored.extend_from_slice(&time_ms.to_be_bytes());
        stored.extend_from_slice(value);
        // The event first, then its index entry: an index entry never
        // points at nothing (readers skip one that does anyway).
        self.events.insert(seq.to_be_bytes(), stored).map_err(io)?;
        self.event_times
            .insert(time_key(time_ms, seq), [])
            .map_err(io)?;
        if seq > self.event_retention {
            let cutoff = (seq - self.event_retention + 1).to_be_bytes();
            // Usually one entry: the log is trimmed on every append.
            for item in self.events.range(..cutoff) {
                let (k, v) = item.map_err(io)?;
                let (time, _) = split_event(&v);
                self.event_times
                    .remove(time_key(time, seq_of(&k)))
                    .map_err(io)?;
                self.events.remove(k).map_err(io)?;
            }
        }
        Ok(())
    }

    pub fn last_event_seq(&self) -> Result<u64, StoreError> {
        let last = self.events.last().map_err(|source| StoreError::Io {
            action: "reading the event log",
            source,
        })?;
        Ok(last.map_or(0, |(k, _)| seq_of(&k)))
    }

    /// At most `limit` events with a sequence number above `after`, oldest
    /// first.
    pub fn events_after(&self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        self.events
            .range((after.saturating_add(1)).to_be_bytes()..)
            .take(limit)
            .map(|item| {
                let (k, v) = item.map_err(read_err)?;
                Ok(stored_event(&k, &v))
            })
            .collect()
    }

    /// The newest `limit` events by sequence number, oldest first.
    pub fn last_events(&self, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let mut events = self
            .events
            .iter_rev()
            .take(limit)
            .map(|item| {
                let (k, v) = item.map_err(read_err)?;
                Ok(stored_event(&k, &v))
            })
            .collect::<Result<Vec<_>, _>>()?;
        events.reverse();
        Ok(events)
    }

    /// Events older than `before_ms` (all when `None`), newest first by
    /// time, read one at a time: a caller that stops early reads no more.
    pub fn events_newest_first(
        &self,
        before_ms: Option<u64>,
    ) -> impl Iterator<Item = Result<StoredEvent, StoreError>> + '_ {
        let range = match before_ms {
            Some(before) => self.event_times.range_rev(..time_key(before, 0)),
            None => self.event_times.iter_rev(),
        };
        range.filter_map(move |item| {
            let key = match item {
                Ok((k, _)) => k,
                Err(e) => return Some(Err(read_err(e))),
            };
            let seq = key.get(8..16).map_or(0, seq_of);
            match self.events.get(seq.to_be_bytes()) {
                Ok(Some(v)) => Some(Ok(stored_event(&seq.to_be_bytes(), &v))),
                // Trimmed between the two reads.
                Ok(None) => None,
                Err(e) => Some(Err(read_err(e))),
            }
        })
    }

    /// Makes every write so far durable (the engine may hold a write in
    /// memory until then: sled for up to half a second).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map_err(|source| StoreError::Io {
            action: "flushing the store",
            source,
        })?;
        Ok(())
    }

    /// The database shared with the Raft log and state machine trees.
    pub(crate) fn db(&self) -> &db::Db {
        &self.db
    }

    /// Where the Raft log keeps its large commands: `raft-log/` beside
    /// the store's directory, in the data directory.
    pub(crate) fn log_files(&self) -> side_files::SideFiles {
        log_store::command_files(self.data_dir().join("raft-log"))
    }

    /// Where the state machine keeps its snapshot: `raft-snapshot/`
    /// beside the store's directory, in the data directory.
    pub(crate) fn snapshot_files(&self) -> side_files::SideFiles {
        state_machine::snapshot_files(self.data_dir().join("raft-snapshot"))
    }

    /// The data directory the store is in.
    fn data_dir(&self) -> &Path {
        self.path.parent().unwrap_or(&self.path)
    }

    /// The state of a device in no cluster: the keys a cluster's
    /// replicated map has, applied by the same [`Machine`], kept in tree
    /// `local-kv`.
    pub fn local_map(&self) -> Result<Map, StoreError> {
        let io = |source| StoreError::Io {
            action: "reading the local state",
            source,
        };
        let tree = self.db.open_tree(LOCAL_TREE).map_err(io)?;
        let mut map = std::collections::BTreeMap::new();
        for item in tree.iter() {
            let (k, v) = item.map_err(io)?;
            let key = String::from_utf8(k.to_vec()).map_err(|e| StoreError::Corrupt {
                what: "local state key",
                why: e.to_string(),
            })?;
            map.insert(key, v);
        }
        Ok(map)
    }

    /// Applies `writes` to the local state at once, and flushes: when this
    /// returns, they survive a crash. Returns them as kept, for the map in
    /// memory to share the stored values.
    pub fn apply_local(&self, writes: Vec<Write>) -> Result<Vec<Kept>, StoreError> {
        let io = |source| StoreError::Io {
            action: "writing the local state",
            source,
        };
        let tree = self.db.open_tree(LOCAL_TREE).map_err(io)?;
        let mut batch = self.db.batch();
        let mut kept = Vec::with_capacity(writes.len());
        for write in writes {
            match write {
                Write::Put { key, value } => {
                    let value = batch.insert_shared(&tree, key.as_bytes(), value);
                    kept.push(Kept {
                        key,
                        value: Some(value),
                    });
                }
                Write::Delete { key } => {
                    batch.remove(&tree, key.as_bytes());
                    kept.push(Kept { key, value: None });
                }
            }
        }
        batch.apply().map_err(io)?;
        self.db.flush().map_err(|source| StoreError::Io {
            action: "flushing the local state",
            source,
        })?;
        Ok(kept)
    }
}

/// One stored event: its sequence number, time and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub seq: u64,
    pub time_ms: u64,
    pub bytes: Vec<u8>,
}

fn read_err(source: DbError) -> StoreError {
    StoreError::Io {
        action: "reading the event log",
        source,
    }
}

fn time_key(time_ms: u64, seq: u64) -> [u8; 16] {
    let mut key = [0; 16];
    key[..8].copy_from_slice(&time_ms.to_be_bytes());
    key[8..].copy_from_slice(&seq.to_be_bytes());
    key
}

/// A stored event's time and bytes.
fn split_event(value: &[u8]) -> (u64, &[u8]) {
    match value.split_first_chunk::<8>() {
        Some((time, rest)) => (u64::from_be_bytes(*time), rest),
        None => (0, value),
    }
}

fn stored_event(key: &[u8], value: &[u8]) -> StoredEvent {
    let (time_ms, bytes) = split_event(value);
    StoredEvent {
        seq: seq_of(key),
        time_ms,
        bytes: bytes.to_vec(),
    }
}

fn seq_of(key: &[u8]) -> u64 {
    key.try_into().map_or(0, u64::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::on_each_engine;

    on_each_engine! {
        /// A value the local state keeps is one allocation, shared by the
        /// engine and the map in memory; and it reads back the same after
        /// reopening.
        fn a_local_value_is_held_once(backend: Backend) {
            let dir = tempfile::tempdir().unwrap();
            let text = vec![b'x'; 1 << 20];
            {
                let store = Store::open_with(dir.path(), &backend).unwrap();
                let kept = store
                    .apply_local(vec![
                        Write::Put {
                            key: "config".into(),
                            value: text.clone(),
                        },
                        Write::Delete { key: "gone".into() },
                    ])
                    .unwrap();
                let [put, delete] = kept.as_slice() else {
                    panic!("one kept write per write: {kept:?}");
                };
                assert_eq!(delete.key, "gone");
                assert!(delete.value.is_none());
                let value = put.value.as_ref().unwrap();
                assert_eq!(value.as_ref(), text.as_slice());
                let read = store.local_map().unwrap();
                assert_eq!(
                    read["config"].as_ptr(),
                    value.as_ptr(),
                    "the map read back holds the engine's bytes, not a copy"
                );
            }
            let store = Store::open_with(dir.path(), &backend).unwrap();
            assert_eq!(
                store.local_map().unwrap()["config"].as_ref(),
                text.as_slice()
            );
        }
    }

    on_each_engine! {
        fn configuration_survives_reopening(backend: Backend) {
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            {
                let store = Store::open_with(dir, &backend).unwrap();
                assert_eq!(store.load_config().unwrap(), None);
                // The first committed configuration did not install: none is good.
                store
                    .save_uninstalled(
                        &StoredConfig {
                            version: 2,
                            text: "bad".into(),
                            zone_versions: Vec::new(),
                        }
                        .kept(),
                    )
                    .unwrap();
                assert_eq!(store.last_good_config().unwrap(), Some(None));
                store
                    .save_config(
                        &StoredConfig {
                            version: 3,
                            text: "[[datacenter]]\nname = \"dc1\"\n".into(),
                            zone_versions: vec![("example.test".into(), 2)],
                        }
                        .kept(),
                    )
                    .unwrap();
            }
            let store = Store::open_with(dir, &backend)
                .unwrap()
                .with_event_retention(3);
            assert_eq!(store.load_config().unwrap().unwrap().version, 3);
            assert_eq!(
                store.load_config().unwrap().unwrap().zone_versions,
                [("example.test".to_string(), 2)]
            );
            assert_eq!(store.last_good_config().unwrap(), None);
            // A committed configuration that did not install keeps the good one
            // beside it, until one installs again.
            let good = store.load_config().unwrap().unwrap();
            for version in [4, 5] {
                store
                    .save_uninstalled(
                        &StoredConfig {
                            version,
                            text: "bad".into(),
                            zone_versions: Vec::new(),
                        }
                        .kept(),
                    )
                    .unwrap();
                assert_eq!(store.load_config().unwrap().unwrap().version, version);
                assert_eq!(store.last_good_config().unwrap(), Some(Some(good.clone())));
            }
            store.save_config(&good.kept()).unwrap();
            assert_eq!(store.last_good_config().unwrap(), None);
            for seq in 1..=5u64 {
                store
                    .append_event(seq, 1000 + seq * 10, format!("event {seq}").as_bytes())
                    .unwrap();
            }
            let seqs = |events: Vec<StoredEvent>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
            assert_eq!(
                seqs(store.events_after(0, 100).unwrap()),
                [3, 4, 5],
                "retention keeps the newest"
            );
            assert_eq!(store.last_event_seq().unwrap(), 5);
            assert_eq!(seqs(store.events_after(3, 1).unwrap()), [4]);
            assert_eq!(seqs(store.last_events(2).unwrap()), [4, 5]);
            let newest = store.events_after(4, 10).unwrap();
            assert_eq!(newest[0].time_ms, 1050);
            assert_eq!(newest[0].bytes, b"event 5");
            // Paging by time: strictly older than `before`, newest first; the
            // trimmed events left the time index too.
            let by_time = |before| {
                store
                    .events_newest_first(before)
                    .map(|e| e.unwrap().seq)
                    .collect::<Vec<_>>()
            };
            assert_eq!(by_time(None), [5, 4, 3]);
            assert_eq!(by_time(Some(1050)), [4, 3]);
            assert_eq!(by_time(Some(1030)), Vec::<u64>::new());
            assert_eq!(store.event_times.len().unwrap(), 3);
            store.put_health_decision("web@192.0.2.10", b"ok").unwrap();
            drop(store);
            let store = Store::open_with(dir, &backend).unwrap();
            assert_eq!(
                store.health_decisions().unwrap(),
                [("web@192.0.2.10".to_string(), b"ok".to_vec())]
            );
        }
    }

    on_each_engine! {
        fn events_of_the_first_layout_move_into_the_indexed_log(backend: Backend) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open_with(dir.path(), &backend).unwrap();
            let legacy = store.db.open_tree("events").unwrap();
            for seq in 1..=3u64 {
                legacy
                    .insert(seq.to_be_bytes(), format!("{}", seq * 100).as_bytes())
                    .unwrap();
            }
            let time_of = |b: &[u8]| std::str::from_utf8(b).unwrap().parse().unwrap();
            assert_eq!(store.migrate_legacy_events(time_of).unwrap(), 3);
            assert!(!store.db.has_tree("events").unwrap());
            let moved = store.events_after(0, 10).unwrap();
            assert_eq!(moved.len(), 3);
            assert_eq!((moved[2].seq, moved[2].time_ms), (3, 300));
            assert_eq!(moved[2].bytes, b"300");
            assert_eq!(store.migrate_legacy_events(time_of).unwrap(), 0);
        }
    }
}

#[cfg(test)]
mod storage_suite {
    //! openraft's storage test suite against the log and state machine, on
    //! each engine (and through the fault-injecting adapter, switched off),
    //! each case in a fresh store.

    use std::sync::Arc;

    use openraft::testing::{StoreBuilder, Suite};
    use tokio::sync::watch;

    use crate::log_store::LogStore;
    use crate::state_machine::StateMachine;
    use crate::types::{Applied, StorageError, TypeConfig};
    use crate::{Backend, FaultSwitch, Store};

    /// Builds each case's store on a new backend of one kind.
    struct Builder(fn() -> Backend);

    /// Keeps the directory until the case ends; the store closes first.
    struct Guard {
        _store: Store,
        _dir: tempfile::TempDir,
    }

    impl StoreBuilder<TypeConfig, LogStore, StateMachine, Guard> for Builder {
        async fn build(&self) -> Result<(Guard, LogStore, StateMachine), StorageError> {
            let dir = tempfile::tempdir().expect("temp dir");
            let store = Store::open_with(dir.path(), &(self.0)()).expect("open store");
            let log = LogStore::open(store.db(), store.log_files())?;
            let sm = StateMachine::open(
                store.db(),
                store.snapshot_files(),
                Arc::new(watch::Sender::new(Applied::default())),
                Arc::new(crate::machine::Writes),
            )?;
            Ok((
                Guard {
                    _store: store,
                    _dir: dir,
                },
                log,
                sm,
            ))
        }
    }

    fn suite(backend: fn() -> Backend) {
        if let Err(e) = Suite::test_all(Builder(backend)) {
            panic!("openraft storage suite: {e}");
        }
    }

    #[test]
    fn openraft_storage_suite_on_sled() {
        suite(|| Backend::Sled);
    }

    #[test]
    fn openraft_storage_suite_in_memory() {
        suite(Backend::memory);
    }

    #[test]
    fn openraft_storage_suite_through_a_fault_switch_left_off() {
        suite(|| Backend::memory().with_faults(&FaultSwitch::new()));
    }
}
