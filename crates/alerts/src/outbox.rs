//! A notifier's messages on their way: a bounded queue, delivered in
//! order by one task, a failure retried with backoff (1 s doubling to a
//! minute) while later messages wait; when the queue is full the oldest
//! message is dropped and counted. Nothing here blocks the caller.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use gtm_model::compile::{Delivery, NotifierSpec};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{email, message::Message, syslog, webhook};

/// Messages a notifier holds back at most while its target is down.
pub const QUEUE_MAX: usize = 1000;
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A delivery never takes longer than this (then it is a failure).
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a notifier did on this device since it started.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Counts {
    pub delivered: u64,
    /// Failed attempts (each retry counts).
    pub failures: u64,
    /// Messages dropped because the queue was full.
    pub dropped: u64,
    pub last_delivered_ms: Option<u64>,
    pub last_error: Option<String>,
    pub last_error_ms: Option<u64>,
    /// Whether the last attempt failed (the target is down, or refuses).
    pub failing: bool,
}

#[derive(Debug, Default)]
pub struct Outbox {
    queue: Mutex<VecDeque<Message>>,
    counts: Mutex<Counts>,
    wake: Notify,
}

impl Outbox {
    /// Queues `message`; the oldest goes when the queue is full.
    pub fn push(&self, message: Message) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if queue.len() >= QUEUE_MAX {
            queue.pop_front();
            self.counts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .dropped += 1;
        }
        queue.push_back(message);
        drop(queue);
        self.wake.notify_one();
    }

    pub fn queued(&self) -> usize {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn counts(&self) -> Counts {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn front(&self) -> Option<Message> {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .front()
            .cloned()
    }

    fn done(&self, id: &str) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if queue.front().is_some_and(|m| m.id == id) {
            queue.pop_front();
        }
    }

    fn note(&self, result: &Result<(), String>) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let now = gtm_model::clock::now_ms();
        match result {
            Ok(()) => {
                counts.delivered += 1;
                counts.last_delivered_ms = Some(now);
                counts.failing = false;
            }
            Err(e) => {
                counts.failures += 1;
                counts.last_error = Some(e.clone());
                counts.last_error_ms = Some(now);
                counts.failing = true;
            }
        }
    }
}

/// Delivers `outbox`'s messages until `stop`.
pub async fn run(spec: Arc<NotifierSpec>, outbox: Arc<Outbox>, stop: CancellationToken) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let Some(message) = outbox.front() else {
            tokio::select! {
                () = outbox.wake.notified() => continue,
                () = stop.cancelled() => return,
            }
        };
        let result = tokio::select! {
            r = tokio::time::timeout(DELIVERY_TIMEOUT, deliver(&spec, &message)) => {
                r.unwrap_or_else(|_| Err(format!("no answer within {} s", DELIVERY_TIMEOUT.as_secs())))
            }
            () = stop.cancelled() => return,
        };
        outbox.note(&result);
        match result {
            Ok(()) => {
                outbox.done(&message.id);
                backoff = Duration::from_secs(1);
            }
            Err(e) => {
                tracing::warn!(notifier = %spec.name, error = %e, "alert not delivered; retrying");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = stop.cancelled() => return,
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// One attempt to deliver `message` as `spec` says.
pub async fn deliver(spec: &NotifierSpec, message: &Message) -> Result<(), String> {
    let ca_file = spec.ca_file.as_deref();
    match &spec.delivery {
        Delivery::Webhook { url, secret_file } => {
            webhook::send(url, secret_file.as_deref(), ca_file, message).await
        }
        Delivery::Email {
            host,
            port,
            tls,
            from,
            to,
            username,
            password_file,
        } => {
            let smtp = email::Smtp {
                host,
                port: *port,
                tls: *tls,
                from,
                to,
                username: username.as_deref(),
                password_file: password_file.as_deref(),
                ca_file,
            };
            email::send(&smtp, message).await
        }
        Delivery::Syslog {
            host,
            port,
            transport,
            facility,
        } => {
            let target = syslog::Target {
                host,
                port: *port,
                transport: *transport,
                facility: *facility,
                ca_file,
            };
            syslog::send(&target, message).await
        }
    }
}
