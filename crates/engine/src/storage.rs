//! What the engine keeps in the device store (events, health decisions,
//! records held in DR) and the store's fault state.

use super::*;

/// A device's store with what the engine restores from it. Reading it is
/// the start-up's business: a read that fails is an error, never an empty
/// state (that would restart event numbering over the old events).
#[derive(Debug)]
pub struct Stored {
    pub(super) store: Store,
    pub(super) writer: StoreWriter,
    pub(super) health: Vec<(CheckRef, CheckStatus)>,
    /// Records whose DR was on when the device stopped.
    pub(super) holds: HashSet<String>,
    pub(super) next_seq: u64,
}

/// The key prefix, in the health decisions, of a record's DR state: `1`
/// while DR is on. A manual-failback hold survives a restart through it.
pub(super) const HOLD_PREFIX: &str = "dr-on/";

impl Stored {
    /// Reads the health decisions and the event log's position, and starts
    /// the writer thread; `dir` is the data directory. `on_copy`: `store`
    /// is a copy of the store in `dir`, which is read-only
    /// ([`StoreWriter::start`]).
    pub fn load(
        store: Store,
        dir: &std::path::Path,
        on_copy: bool,
    ) -> Result<Self, gtm_cluster::StoreError> {
        // Events of the log's first layout, before it was indexed by time.
        let migrated = store.migrate_legacy_events(|bytes| {
            serde_json::from_slice::<Event>(bytes).map_or(0, |e| e.time_ms)
        })?;
        if migrated > 0 {
            tracing::info!(events = migrated, "event log moved to the indexed layout");
        }
        let mut health = Vec::new();
        let mut holds = HashSet::new();
        for (key, value) in store.health_decisions()? {
            if let Some(label) = key.strip_prefix(HOLD_PREFIX) {
                if value == b"1" {
                    holds.insert(label.to_string());
                }
                continue;
            }
            // A decision this version cannot read is probed again.
            match (
                parse_ref(&key),
                serde_json::from_slice::<CheckStatus>(&value),
            ) {
                (Some(check), Ok(status)) => health.push((check, status)),
                _ => {
                    tracing::warn!(check = %key, "a stored health decision does not parse; probed again")
                }
            }
        }
        let next_seq = store.last_event_seq()? + 1;
        let writer =
            StoreWriter::start(store.clone(), dir.to_path_buf(), on_copy).map_err(|e| {
                gtm_cluster::StoreError::Corrupt {
                    what: "writer thread",
                    why: e.to_string(),
                }
            })?;
        Ok(Self {
            store,
            writer,
            health,
            holds,
            next_seq,
        })
    }
}

/// The engine's storage: the store for reads, its writer for writes.
#[derive(Debug)]
pub(super) struct Persist {
    pub(super) store: Store,
    pub(super) writer: StoreWriter,
    /// The records whose DR state is stored as on (`1`): a record's state
    /// is written only when it differs from what is stored, where no key
    /// reads as off (a million new records write nothing).
    pub(super) dr_on: Mutex<HashSet<String>>,
}

impl Engine {
    /// Keeps whether DR is on for a record with the health decisions (on
    /// the writer thread), so a manual-failback hold survives a restart.
    pub(super) fn keep_dr_state(&self, label: &str, dr_on: bool) {
        let Some(p) = &self.store else { return };
        let mut stored_on = p.dr_on.lock().unwrap_or_else(|e| e.into_inner());
        let changed = if dr_on {
            stored_on.insert(label.to_string())
        } else {
            stored_on.remove(label)
        };
        if changed {
            let value = if dr_on { b"1".to_vec() } else { b"0".to_vec() };
            p.writer.health(format!("{HOLD_PREFIX}{label}"), value);
        }
    }

    /// Why this device cannot write its store now, if it cannot.
    pub fn storage_fault(&self) -> Option<StorageFault> {
        self.store.as_ref().and_then(|p| p.writer.fault())
    }

    /// Writes what was logged and releases the store's writer: for a device
    /// that stops (what is logged later is not written).
    pub fn close_storage(&self) {
        if let Some(p) = &self.store {
            p.writer.close();
        }
    }

    /// Turns true once a device that started on a copy of its store can
    /// write its own store again; `None` without a store.
    pub fn storage_reopened(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.store.as_ref().map(|p| p.writer.reopened())
    }

    /// Waits until every event and health decision logged so far is in the
    /// store and flushed (or kept in memory while the store cannot be
    /// written).
    pub fn flush_storage(&self) {
        if let Some(p) = &self.store {
            p.writer.barrier();
        }
    }

    /// The store, once everything logged so far is in it.
    pub(super) fn store_read(&self) -> Option<&Store> {
        let p = self.store.as_ref()?;
        p.writer.barrier();
        Some(&p.store)
    }
}
