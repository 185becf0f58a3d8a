//! The GTM Logs: events recorded in memory and in the store, read back by
//! sequence or by time, and sent to subscribers.

use super::*;

impl Engine {
    /// How many events this device has logged (the next one's number): a
    /// page that knows it can tell whether an event came after it.
    pub fn events_logged(&self) -> u64 {
        self.lock().next_seq
    }

    /// New events as they are logged.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Event> {
        self.events_tx.subscribe()
    }

    /// Logs an event that comes from outside the engine (a configuration
    /// change as the state machine recorded it, an operator action).
    pub fn record_event(&self, kind: EventKind, severity: Severity, object: String, text: String) {
        let mut inner = self.lock();
        self.log(&mut inner, kind, severity, object, text);
    }

    pub(super) fn log(
        &self,
        inner: &mut Inner,
        kind: EventKind,
        severity: Severity,
        object: String,
        text: String,
    ) {
        match severity {
            Severity::Info => tracing::info!(device = %self.device, "{text}"),
            Severity::Warning => tracing::warn!(device = %self.device, "{text}"),
            Severity::Error => tracing::error!(device = %self.device, "{text}"),
        }
        let event = Event {
            seq: inner.next_seq,
            time_ms: now_ms(),
            device: self.device.clone(),
            kind,
            severity,
            object,
            text,
        };
        inner.next_seq += 1;
        match &self.store {
            // Handed to the writer thread: no storage I/O under the lock.
            Some(p) => {
                if let Ok(bytes) = serde_json::to_vec(&event) {
                    p.writer.event(event.seq, event.time_ms, bytes);
                }
            }
            None => {
                if inner.events.len() == MEMORY_EVENTS {
                    inner.events.pop_front();
                }
                inner.events.push_back(event.clone());
            }
        }
        let _ = self.events_tx.send(event);
    }

    /// At most `limit` events after `after_seq`, oldest first. Reads the
    /// store (blocking): call it off the async workers.
    pub fn events_since(&self, after_seq: u64, limit: usize) -> Vec<Event> {
        match self.store_read() {
            Some(store) => store
                .events_after(after_seq, limit)
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "cannot read the event log");
                    Vec::new()
                })
                .into_iter()
                .filter_map(|e| serde_json::from_slice(&e.bytes).ok())
                .collect(),
            None => self
                .lock()
                .events
                .iter()
                .filter(|e| e.seq > after_seq)
                .take(limit)
                .cloned()
                .collect(),
        }
    }

    /// The newest `limit` events older than `before_ms` that `keep`
    /// accepts, oldest first, stopping at the first event older than
    /// `since_ms`: reads only what it returns and what `keep` skips on the
    /// way. Reads the store (blocking): call it off the async workers.
    pub fn events_page(
        &self,
        before_ms: Option<u64>,
        since_ms: u64,
        limit: usize,
        keep: impl Fn(&Event) -> bool,
    ) -> Result<Vec<Event>, gtm_cluster::StoreError> {
        let mut page = Vec::new();
        match self.store_read() {
            Some(store) => {
                for stored in store.events_newest_first(before_ms) {
                    let stored = stored?;
                    if page.len() >= limit || stored.time_ms < since_ms {
                        break;
                    }
                    if let Ok(e) = serde_json::from_slice::<Event>(&stored.bytes)
                        && keep(&e)
                    {
                        page.push(e);
                    }
                }
            }
            None => {
                let inner = self.lock();
                let mut newest_first: Vec<&Event> = inner.events.iter().collect();
                newest_first.sort_by_key(|e| std::cmp::Reverse((e.time_ms, e.seq)));
                for e in newest_first {
                    if before_ms.is_some_and(|b| e.time_ms >= b) {
                        continue;
                    }
                    if page.len() >= limit || e.time_ms < since_ms {
                        break;
                    }
                    if keep(e) {
                        page.push(e.clone());
                    }
                }
            }
        }
        page.reverse();
        Ok(page)
    }

    /// The newest events (at most [`MEMORY_EVENTS`]), oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.last_events(MEMORY_EVENTS)
    }

    /// The newest `limit` events by sequence number, oldest first.
    pub(super) fn last_events(&self, limit: usize) -> Vec<Event> {
        match self.store_read() {
            Some(store) => store
                .last_events(limit)
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "cannot read the event log");
                    Vec::new()
                })
                .into_iter()
                .filter_map(|e| serde_json::from_slice(&e.bytes).ok())
                .collect(),
            None => {
                let inner = self.lock();
                let skip = inner.events.len().saturating_sub(limit);
                inner.events.iter().skip(skip).cloned().collect()
            }
        }
    }
}
