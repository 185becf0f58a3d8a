//! What a device knows of its transfers: the zones it may transfer and to
//! whom, the transfers answered, and the NOTIFY state of each secondary.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use arc_swap::ArcSwap;
use hickory_server::proto::rr::Name;

use super::journal;
use gtm_model::compile::{Compiled, SecondarySpec};

/// A zone with secondaries.
#[derive(Debug, Clone)]
pub struct TransferZone {
    pub apex: Name,
    /// The zone's key: its name, and a view's zone its view's after `@`
    /// ([`gtm_model::compile::ZoneSpec::key`]).
    pub key: String,
    /// The view whose zone it is (docs/views.md).
    pub view: Option<Box<str>>,
    pub secondaries: Vec<SecondarySpec>,
}

/// What the transfer path and the NOTIFY worker share: the zones with
/// secondaries (set when a configuration is installed) and what the worker
/// reports.
#[derive(Debug, Default)]
pub struct Transfers {
    pub zones: ArcSwap<Vec<TransferZone>>,
    /// The NOTIFY worker's state, one entry per secondary of each zone.
    pub notify: Mutex<Vec<NotifyStatus>>,
    /// Each zone's views and their differences, what transfers serve.
    pub journal: journal::Journal,
    /// Transfers answered, by [`Kind`].
    served: [AtomicU64; 3],
}

/// The NOTIFY worker's state for one secondary of one zone.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct NotifyStatus {
    pub domain: String,
    /// The secondary's address (IP:port).
    pub secondary: String,
    pub key: String,
    /// The serial last notified (or being notified).
    pub serial: u32,
    /// `answered` (the secondary acknowledged `serial`), `pending` (sent,
    /// no answer yet: retried with backoff) or `failing` (an error answer
    /// or none after several tries: still retried).
    pub state: String,
    /// Sends of this serial so far.
    pub attempts: u32,
    /// Why the last try failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the secondary last acknowledged a NOTIFY (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_ms: Option<u64>,
}

impl Transfers {
    /// The zones with secondaries of a configuration just installed.
    pub fn set_zones(&self, compiled: &Compiled) {
        let zones = compiled
            .zones
            .iter()
            .filter(|z| !z.secondaries.is_empty())
            .map(|z| TransferZone {
                apex: z.apex.clone(),
                key: z.key(),
                view: z.view.as_ref().map(|v| v.name.clone()),
                secondaries: z.secondaries.clone(),
            })
            .collect();
        self.zones.store(Arc::new(zones));
    }

    /// Transfers answered as `kind` (`whole`, `incremental`, `up_to_date`).
    pub fn served(&self, kind: &str) -> u64 {
        Kind::ALL
            .iter()
            .zip(&self.served)
            .find(|(k, _)| k.label() == kind)
            .map_or(0, |(_, n)| n.load(Ordering::Relaxed))
    }

    /// The transfer counters, in Prometheus text.
    pub fn write(&self, out: &mut gtm_model::metrics::Text) {
        out.family(
            "gtm_zone_transfers_total",
            "counter",
            "Zone transfers answered to secondaries: the whole zone (AXFR, or IXFR from a serial no longer held), incremental (IXFR), or up to date (IXFR from the current serial)",
        );
        for (kind, n) in Kind::ALL.iter().zip(&self.served) {
            out.sample(
                "gtm_zone_transfers_total",
                &[("kind", kind.label())],
                n.load(Ordering::Relaxed) as f64,
            );
        }
    }

    pub(super) fn count(&self, kind: Kind) {
        if let Some(n) = self.served.get(kind as usize) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The NOTIFY worker's state, for `gtm status`.
    pub fn notify_status(&self) -> Vec<NotifyStatus> {
        self.notify
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// What a transfer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Whole = 0,
    Incremental = 1,
    UpToDate = 2,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Whole, Kind::Incremental, Kind::UpToDate];

    pub(super) fn label(self) -> &'static str {
        match self {
            Kind::Whole => "whole",
            Kind::Incremental => "incremental",
            Kind::UpToDate => "up_to_date",
        }
    }
}
