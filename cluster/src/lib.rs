//! gtm's replication layer: the durable store of a device (sled) and the Raft
//! cluster (openraft) that replicates a generic key/value map between devices.
//!
//! The crate knows nothing of DNS: the application writes [`Request`]s
//! (batches of key/value [`Write`]s, applied atomically) through
//! [`ClusterNode::write`] on the leader, and every device observes the
//! replicated map through [`ClusterNode::applied`].
//!
//! Layout, one concern per module:
//! - `types`: the openraft type configuration and the public value types;
//! - `log_store`: the Raft log, vote and committed pointer in sled;
//! - `state_machine`: the replicated map, its snapshots, the applied watch;
//! - `network`: Raft RPC over HTTP, both ends;
//! - `node`: [`ClusterNode`], the facade the application uses.
//!
//! Nothing outside this crate names an openraft or sled type: only the
//! types re-exported here are public.

use std::path::Path;

use bincode::{Decode, Encode};

mod log_store;
mod network;
mod node;
mod state_machine;
mod types;

pub use network::{
    RPC_PATHS, RpcBody, SECRET_HEADER, constant_time_eq, decode_rpc_body, rpc_router,
};
pub use node::{
    ClusterConfig, ClusterError, ClusterNode, ClusterStatus, JOIN_TIMEOUT, MemberStatus, NodeState,
    WRITE_TIMEOUT,
};
pub use types::{Applied, NodeInfo, Request, Write};

/// Storage failures, with the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store in {path}: {source}")]
    Open { path: String, source: sled::Error },
    #[error("store I/O failed while {action}: {source}")]
    Io {
        action: &'static str,
        source: sled::Error,
    },
    #[error("stored {what} is corrupt: {why}")]
    Corrupt { what: &'static str, why: String },
}

/// The applied replicated configuration: its version and its text.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub struct StoredConfig {
    pub version: u64,
    pub text: String,
}

/// A device's durable state.
#[derive(Debug, Clone)]
pub struct Store {
    db: sled::Db,
    /// Last health decision per check instance.
    health: sled::Tree,
    /// The event log, keyed by big-endian sequence number.
    events: sled::Tree,
    event_retention: u64,
}

/// Events kept by default: the oldest beyond this are dropped.
pub const DEFAULT_EVENT_RETENTION: u64 = 100_000;

const CONFIG_KEY: &[u8] = b"config";

impl Store {
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let open_err = |source| StoreError::Open {
            path: dir.display().to_string(),
            source,
        };
        // sled caches up to 1 GiB by default; a device's store is small.
        let config = sled::Config::new()
            .path(dir.join("store"))
            .cache_capacity(64 << 20);
        // A store closed a moment ago in this process may still be held by
        // sled's flusher thread until it notices: wait for it, briefly.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let db = loop {
            match config.open() {
                Ok(db) => break db,
                Err(sled::Error::Io(e))
                    if e.to_string().contains("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => return Err(open_err(e)),
            }
        };
        let health = db.open_tree("health").map_err(open_err)?;
        let events = db.open_tree("events").map_err(open_err)?;
        Ok(Self {
            db,
            health,
            events,
            event_retention: DEFAULT_EVENT_RETENTION,
        })
    }

    /// How many events the log keeps (at least 1).
    pub fn with_event_retention(mut self, events: u64) -> Self {
        self.event_retention = events.max(1);
        self
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

    /// Appends an event and drops the oldest beyond the retention.
    pub fn append_event(&self, seq: u64, value: &[u8]) -> Result<(), StoreError> {
        let io = |source| StoreError::Io {
            action: "writing the event log",
            source,
        };
        self.events.insert(seq.to_be_bytes(), value).map_err(io)?;
        if seq > self.event_retention {
            let cutoff = (seq - self.event_retention + 1).to_be_bytes();
            // Usually one entry: the log is trimmed on every append.
            for item in self.events.range(..cutoff) {
                let (k, _) = item.map_err(io)?;
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

    /// Events with a sequence number above `after`, oldest first.
    pub fn events_after(&self, after: u64) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        self.events
            .range((after.saturating_add(1)).to_be_bytes()..)
            .map(|item| {
                let (k, v) = item.map_err(|source| StoreError::Io {
                    action: "reading the event log",
                    source,
                })?;
                Ok((seq_of(&k), v.to_vec()))
            })
            .collect()
    }

    /// The sled database shared with the Raft log and state machine trees.
    pub(crate) fn db(&self) -> &sled::Db {
        &self.db
    }

    pub fn load_config(&self) -> Result<Option<StoredConfig>, StoreError> {
        let Some(bytes) = self.db.get(CONFIG_KEY).map_err(|source| StoreError::Io {
            action: "reading the configuration",
            source,
        })?
        else {
            return Ok(None);
        };
        let (config, _) = bincode::decode_from_slice(&bytes, types::decoding()).map_err(|e| {
            StoreError::Corrupt {
                what: "configuration",
                why: e.to_string(),
            }
        })?;
        Ok(Some(config))
    }

    /// Saves and flushes: when this returns, the configuration survives a crash.
    pub fn save_config(&self, config: &StoredConfig) -> Result<(), StoreError> {
        let bytes = bincode::encode_to_vec(config, bincode::config::standard()).map_err(|e| {
            StoreError::Corrupt {
                what: "configuration",
                why: e.to_string(),
            }
        })?;
        self.db
            .insert(CONFIG_KEY, bytes)
            .map_err(|source| StoreError::Io {
                action: "writing the configuration",
                source,
            })?;
        self.db.flush().map_err(|source| StoreError::Io {
            action: "flushing the configuration",
            source,
        })?;
        Ok(())
    }
}

fn seq_of(key: &[u8]) -> u64 {
    key.try_into().map_or(0, u64::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_survives_reopening() {
        let dir = std::env::temp_dir().join(format!("gtm-store-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let store = Store::open(&dir).unwrap();
            assert_eq!(store.load_config().unwrap(), None);
            store
                .save_config(&StoredConfig {
                    version: 3,
                    text: "[[datacenter]]\nname = \"dc1\"\n".into(),
                })
                .unwrap();
        }
        let store = Store::open(&dir).unwrap().with_event_retention(3);
        assert_eq!(store.load_config().unwrap().unwrap().version, 3);
        for seq in 1..=5u64 {
            store
                .append_event(seq, format!("event {seq}").as_bytes())
                .unwrap();
        }
        let kept: Vec<u64> = store
            .events_after(0)
            .unwrap()
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(kept, [3, 4, 5], "retention keeps the newest");
        assert_eq!(store.last_event_seq().unwrap(), 5);
        assert_eq!(store.events_after(4).unwrap().len(), 1);
        store.put_health_decision("web@192.0.2.10", b"ok").unwrap();
        drop(store);
        let store = Store::open(&dir).unwrap();
        assert_eq!(
            store.health_decisions().unwrap(),
            [("web@192.0.2.10".to_string(), b"ok".to_vec())]
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod storage_suite {
    //! openraft's storage test suite against the sled log and state machine,
    //! each case in a fresh directory.

    use std::sync::Arc;

    use openraft::testing::{StoreBuilder, Suite};
    use tokio::sync::watch;

    use crate::Store;
    use crate::log_store::LogStore;
    use crate::state_machine::StateMachine;
    use crate::types::{Applied, StorageError, TypeConfig};

    struct SledBuilder;

    /// Keeps the directory until the case ends; the store closes first.
    struct Guard {
        _store: Store,
        _dir: tempfile::TempDir,
    }

    impl StoreBuilder<TypeConfig, LogStore, StateMachine, Guard> for SledBuilder {
        async fn build(&self) -> Result<(Guard, LogStore, StateMachine), StorageError> {
            let dir = tempfile::tempdir().expect("temp dir");
            let store = Store::open(dir.path()).expect("open store");
            let log = LogStore::open(store.db())?;
            let sm =
                StateMachine::open(store.db(), Arc::new(watch::Sender::new(Applied::default())))?;
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

    #[test]
    fn openraft_storage_suite() {
        if let Err(e) = Suite::test_all(SledBuilder) {
            panic!("openraft storage suite: {e}");
        }
    }
}
