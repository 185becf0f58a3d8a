//! gtm's replication layer. Today: the durable store of a device's applied
//! configuration, in sled. Raft (openraft) joins here, and nothing outside
//! this crate names a sled type.

use std::path::Path;

use bincode::{Decode, Encode};

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
}

const CONFIG_KEY: &[u8] = b"config";

impl Store {
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let db = sled::open(dir.join("store")).map_err(|source| StoreError::Open {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(Self { db })
    }

    pub fn load_config(&self) -> Result<Option<StoredConfig>, StoreError> {
        let Some(bytes) = self.db.get(CONFIG_KEY).map_err(|source| StoreError::Io {
            action: "reading the configuration",
            source,
        })?
        else {
            return Ok(None);
        };
        let (config, _) =
            bincode::decode_from_slice(&bytes, bincode::config::standard()).map_err(|e| {
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
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.load_config().unwrap().unwrap().version, 3);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
