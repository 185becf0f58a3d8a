//! dnstap output: each answered query (1 in `sample` of them) as an
//! AUTH_QUERY and an AUTH_RESPONSE message, the steering decision of a
//! steered answer in `extra`, written in Frame Streams to a Unix socket,
//! a TCP connection or a file (docs/operations.md, "dnstap").
//!
//! The DNS workers never wait for it. A sampled query's bytes, times and
//! addresses, and what decided a steered answer ([`Steered`]), go into a
//! bounded queue with `try_send`; when the queue is full the query is
//! dropped and counted. One task ([`writer`]) encodes the messages, puts
//! the decision into words ([`extra`]) and writes them, connecting again
//! with backoff when the reader is gone. With dnstap off the answer paths
//! do nothing for it: the UDP worker reads [`DnsState::dnstap`] once per
//! batch and finds nothing, and the fast path's note of its decision is
//! compiled away.
//!
//! [`DnsState::dnstap`]: crate::handler::DnsState::dnstap

use std::{
    cell::Cell,
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
    },
};

use arc_swap::{ArcSwap, ArcSwapOption};
use gtm_geo::Geo;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use gtm_model::metrics::Text;

pub mod extra;
pub mod frames;
pub mod message;
mod note;
pub mod writer;

pub use message::{Seen, SocketProtocol};
pub use note::{Note, Steered};

/// Where the messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A Frame Streams reader's Unix socket (bidirectional).
    Unix(PathBuf),
    /// A Frame Streams reader's TCP address (bidirectional).
    Tcp(SocketAddr),
    /// A file, written whole (unidirectional), replaced at start.
    File(PathBuf),
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unix(p) => write!(f, "unix:{}", p.display()),
            Self::Tcp(a) => write!(f, "tcp:{a}"),
            Self::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

/// What a device taps, from its node settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub output: Output,
    /// Send AUTH_QUERY messages.
    pub queries: bool,
    /// Send AUTH_RESPONSE messages.
    pub responses: bool,
    /// 1 in `sample` answered queries is tapped (1: every one).
    pub sample: u32,
    /// Queries queued for the writer at most.
    pub buffer: usize,
    /// `Dnstap.identity`.
    pub identity: bytes::Bytes,
    /// `Dnstap.version`.
    pub version: bytes::Bytes,
}

impl Settings {
    /// The messages one tapped query makes.
    fn per_query(&self) -> u64 {
        u64::from(self.queries) + u64::from(self.responses)
    }
}

/// One tapped query, as the answer path hands it over.
#[derive(Debug)]
pub struct Tapped {
    pub seen: Seen,
    /// What decided its answer, when a steered record answered.
    pub steered: Option<Steered>,
}

/// The running tap the answer paths hand queries to.
#[derive(Debug)]
pub struct Tap {
    settings: Settings,
    queue: mpsc::Sender<Tapped>,
    stats: Arc<Stats>,
}

thread_local! {
    /// Queries seen by this thread since its last sample.
    static SKIPPED: Cell<u32> = const { Cell::new(0) };
}

impl Tap {
    /// Whether the query now answered is tapped: 1 in `sample`, counted
    /// per answering thread (no counter shared between workers).
    #[inline]
    pub fn sampled(&self) -> bool {
        if self.settings.sample <= 1 {
            return true;
        }
        SKIPPED.with(|n| {
            let seen = n.get() + 1;
            if seen >= self.settings.sample {
                n.set(0);
                true
            } else {
                n.set(seen);
                false
            }
        })
    }

    /// Queues a tapped query for the writer, or drops it (counted) when the
    /// queue is full or the writer is gone. Never waits.
    pub fn send(&self, tapped: Tapped) {
        if self.queue.try_send(tapped).is_err() {
            self.stats
                .dropped
                .fetch_add(self.settings.per_query(), Relaxed);
        }
    }
}

/// What the tap counts, kept across reloads.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages written to the output.
    pub sent: AtomicU64,
    /// Messages dropped: the queue was full, or the output was lost with
    /// them unwritten.
    pub dropped: AtomicU64,
    /// The output is open: connected and accepted, or the file open.
    pub connected: AtomicBool,
    /// Connections made (or files opened), the first included.
    pub connects: AtomicU64,
    /// Why the output is not open, or the last error writing it.
    pub last_error: Mutex<Option<String>>,
}

impl Stats {
    pub(crate) fn set_error(&self, error: Option<String>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = error;
    }

    pub fn error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What the answer paths read ([`crate::handler::DnsState::dnstap`]):
/// the tap while dnstap is on, and its counts.
#[derive(Debug, Default)]
pub struct TapSlot {
    pub tap: ArcSwapOption<Tap>,
    pub stats: Arc<Stats>,
}

impl TapSlot {
    /// `gtm_dnstap_messages_total`, `gtm_dnstap_connected` and
    /// `gtm_dnstap_connects_total`.
    pub fn write(&self, out: &mut Text) {
        write_metrics(&self.stats, self.tap.load().is_some(), out);
    }
}

/// A device's dnstap: the tap the answer paths read, and the writer
/// behind it. Started, changed by a reload and stopped here.
#[derive(Debug)]
pub struct Dnstap {
    /// Shared with [`crate::handler::DnsState::dnstap`].
    slot: Arc<TapSlot>,
    running: Mutex<Option<Running>>,
    /// The GeoIP databases the answers are placed with (the decision's
    /// `place` and `asn`).
    geo: Arc<ArcSwap<Geo>>,
}

#[derive(Debug)]
struct Running {
    settings: Settings,
    stop: CancellationToken,
    writer: tokio::task::JoinHandle<()>,
}

/// How long a stop waits for the writer to send what it holds and STOP.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl Dnstap {
    /// The dnstap of the device whose answer paths read `slot` and place
    /// clients with `geo` (off until [`Dnstap::apply`]).
    pub fn new(slot: Arc<TapSlot>, geo: Arc<ArcSwap<Geo>>) -> Self {
        Self {
            slot,
            running: Mutex::new(None),
            geo,
        }
    }

    /// Taps with `settings` from now on (`None`: off). Unchanged settings
    /// change nothing; changed ones start a new writer, and the one before
    /// writes what it holds and closes its output. Within the runtime.
    pub fn apply(&self, settings: Option<Settings>) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.as_ref().map(|r| &r.settings) == settings.as_ref() {
            return;
        }
        let before = running.take().map(|before| {
            self.slot.tap.store(None);
            before.stop.cancel();
            before.writer
        });
        let Some(settings) = settings else {
            self.slot.stats.connected.store(false, Relaxed);
            return;
        };
        let (queue, receive) = mpsc::channel(settings.buffer.max(1));
        let stop = CancellationToken::new();
        let run = writer::run(
            settings.clone(),
            receive,
            self.slot.stats.clone(),
            self.geo.clone(),
            stop.clone(),
        );
        let writer = tokio::spawn(async move {
            // The writer before closes its output first (a file of the
            // same path is made anew only then).
            if let Some(before) = before {
                let _ = tokio::time::timeout(STOP_WAIT, before).await;
            }
            run.await
        });
        self.slot.tap.store(Some(Arc::new(Tap {
            settings: settings.clone(),
            queue,
            stats: self.slot.stats.clone(),
        })));
        *running = Some(Running {
            settings,
            stop,
            writer,
        });
    }

    /// Stops tapping: the writer sends what it holds (for a few seconds at
    /// most) and closes its output.
    pub async fn stop(&self) {
        self.slot.tap.store(None);
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(r) = running {
            r.stop.cancel();
            let mut writer = r.writer;
            if tokio::time::timeout(STOP_WAIT, &mut writer).await.is_err() {
                writer.abort();
            }
        }
    }

    /// The output tapped to now, `None` when off.
    pub fn output(&self) -> Option<Output> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|r| r.settings.output.clone())
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.slot.stats
    }
}

/// The dnstap families of `/metrics`: messages sent and dropped, and
/// whether the output is open (absent while dnstap is off).
pub fn write_metrics(stats: &Stats, on: bool, out: &mut Text) {
    out.family(
        "gtm_dnstap_messages_total",
        "counter",
        "dnstap messages written to the output (sent), or dropped: the queue was full (a reader slower than DNS) or the output was lost",
    );
    out.sample(
        "gtm_dnstap_messages_total",
        &[("result", "sent")],
        stats.sent.load(Relaxed) as f64,
    );
    out.sample(
        "gtm_dnstap_messages_total",
        &[("result", "dropped")],
        stats.dropped.load(Relaxed) as f64,
    );
    out.family(
        "gtm_dnstap_connected",
        "gauge",
        "1 while the dnstap output is open (a reader connected and accepted, or the file open); absent while dnstap is off",
    );
    if on {
        out.sample(
            "gtm_dnstap_connected",
            &[],
            if stats.connected.load(Relaxed) {
                1.0
            } else {
                0.0
            },
        );
    }
    out.family(
        "gtm_dnstap_connects_total",
        "counter",
        "dnstap connections made to a reader (or files opened)",
    );
    out.sample(
        "gtm_dnstap_connects_total",
        &[],
        stats.connects.load(Relaxed) as f64,
    );
}
