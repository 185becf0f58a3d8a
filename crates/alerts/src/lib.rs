//! Alerts (docs/operations.md, "Alerts"): each device sends the events of
//! its GTM Logs that its notifiers take (`[[notifier]]`, replicated
//! configuration) to webhooks, e-mail and syslog. A device sends its own
//! events; events every device logs from the replicated state (operator
//! and configuration changes) are sent by the leader alone. Delivery never
//! blocks the caller: events go through a notifier's open alerts
//! ([`book`]) into its bounded queue ([`outbox`]), delivered by a task of
//! its own.

pub mod book;
mod email;
pub mod message;
pub mod notice;
pub mod outbox;
mod syslog;
mod tls;
mod webhook;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Instant,
};

use gtm_model::{
    compile::{Delivery, NotifierSpec, notifier_spec},
    config::Notifier,
    severity::Severity,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use message::{Message, Status};
pub use notice::Notice;
pub use webhook::signature;

/// A notifier's delivery state on this device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotifierStatus {
    pub name: String,
    /// `webhook`, `email` or `syslog`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Where it sends (URL, SMTP server and recipients, syslog address).
    pub target: String,
    /// `ok`, `failing` (the last attempt failed; messages wait and are
    /// retried) or `idle` (nothing sent yet).
    pub state: String,
    /// Alerts open now (sent, or waiting for their delay).
    pub open: usize,
    /// Messages waiting to be delivered.
    pub queued: usize,
    #[serde(flatten)]
    pub counts: outbox::Counts,
}

struct Running {
    spec: Arc<NotifierSpec>,
    book: book::Book,
    outbox: Arc<outbox::Outbox>,
    stop: CancellationToken,
}

/// The alert workers of one device.
pub struct Alerts {
    device: String,
    datacenter: String,
    /// Whether this device sends the events every device logs: it leads
    /// the cluster, or is in none.
    leads: Box<dyn Fn() -> bool + Send + Sync>,
    running: Mutex<BTreeMap<String, Running>>,
    stop: CancellationToken,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Alerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerts")
            .field("device", &self.device)
            .finish()
    }
}

fn target_of(spec: &NotifierSpec) -> (String, String) {
    match &spec.delivery {
        Delivery::Webhook { url, .. } => ("webhook".into(), url.clone()),
        Delivery::Email { host, port, to, .. } => (
            "email".into(),
            format!("{} via {host}:{port}", to.join(", ")),
        ),
        Delivery::Syslog {
            host,
            port,
            transport,
            ..
        } => (
            "syslog".into(),
            format!(
                "{host}:{port} ({})",
                format!("{transport:?}").to_ascii_lowercase()
            ),
        ),
    }
}

impl Alerts {
    /// Alert workers on the current runtime, stopped with `stop`.
    pub fn new(
        device: &str,
        datacenter: &str,
        leads: impl Fn() -> bool + Send + Sync + 'static,
        stop: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Alerts {
            device: device.to_string(),
            datacenter: datacenter.to_string(),
            leads: Box::new(leads),
            running: Mutex::default(),
            stop,
            runtime: tokio::runtime::Handle::current(),
        })
    }

    fn running(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows the configuration's notifiers: a notifier whose definition
    /// did not change keeps its open alerts and its queue; a changed one
    /// starts over; a removed one stops (its queue is dropped).
    pub fn configure(&self, notifiers: &[Arc<Notifier>]) {
        let mut running = self.running();
        let mut next = BTreeMap::new();
        for n in notifiers {
            // Validation refused what does not read.
            let Ok(spec) = notifier_spec(n) else { continue };
            match running.remove(&spec.name) {
                Some(r) if *r.spec == spec => {
                    next.insert(spec.name.clone(), r);
                }
                old => {
                    if let Some(old) = old {
                        old.stop.cancel();
                    }
                    let spec = Arc::new(spec);
                    let outbox = Arc::new(outbox::Outbox::default());
                    let stop = self.stop.child_token();
                    self.runtime
                        .spawn(outbox::run(spec.clone(), outbox.clone(), stop.clone()));
                    next.insert(
                        spec.name.clone(),
                        Running {
                            spec,
                            book: book::Book::default(),
                            outbox,
                            stop,
                        },
                    );
                }
            }
        }
        for (_, gone) in running.iter() {
            gone.stop.cancel();
        }
        *running = next;
    }

    /// An event this device logged. Returns at once.
    pub fn notice(&self, notice: &Notice) {
        if notice.cluster_wide() && !(self.leads)() {
            return;
        }
        let now = Instant::now();
        for r in self.running().values_mut() {
            for message in r.book.notice(&r.spec, notice, now) {
                r.outbox.push(message);
            }
        }
    }

    /// Sends what is due: alerts whose delay is over, repeats. Called
    /// every quarter second.
    pub fn tick(&self) {
        let now = Instant::now();
        for r in self.running().values_mut() {
            for message in r.book.tick(&r.spec, now) {
                r.outbox.push(message);
            }
        }
    }

    /// Every notifier's state on this device.
    pub fn statuses(&self) -> Vec<NotifierStatus> {
        self.running()
            .values()
            .map(|r| {
                let counts = r.outbox.counts();
                let (kind, target) = target_of(&r.spec);
                NotifierStatus {
                    name: r.spec.name.clone(),
                    kind,
                    target,
                    state: if counts.failing {
                        "failing"
                    } else if counts.delivered == 0 {
                        "idle"
                    } else {
                        "ok"
                    }
                    .into(),
                    open: r.book.open(),
                    queued: r.outbox.queued(),
                    counts,
                }
            })
            .collect()
    }

    /// Sends a test message through `name` now, from this device, outside
    /// its queue: `Ok` once delivered, else why not. `None`: no such
    /// notifier.
    pub async fn test(&self, name: &str) -> Option<Result<Message, String>> {
        let spec = self.running().get(name).map(|r| r.spec.clone())?;
        let now = gtm_model::clock::now_ms();
        let notice = Notice {
            seq: 0,
            time_ms: now,
            device: self.device.clone(),
            datacenter: self.datacenter.clone(),
            kind: "device".into(),
            severity: Severity::Info,
            object: self.device.clone(),
            text: format!("test of notifier {name} from {}", self.device),
        };
        let message = Message::new(name, Status::Test, &notice, now, 0);
        Some(outbox::deliver(&spec, &message).await.map(|()| message))
    }
}
