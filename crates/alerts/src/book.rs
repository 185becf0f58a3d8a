//! The alerts a notifier has open: a warning or an error opens one for its
//! object, the next info event about the same object resolves it. With a
//! `delay`, an alert is sent only if still open when the delay is over;
//! with `repeat`, sent again while it stays open. Pure: time is given.

use std::{collections::HashMap, time::Instant};

use gtm_model::{compile::NotifierSpec, severity::Severity};

use super::{
    message::{Message, Status},
    notice::{Notice, about, takes},
};

/// The most alerts one notifier keeps open; the oldest is forgotten (not
/// resolved) beyond.
pub const MAX_OPEN: usize = 10_000;

#[derive(Debug)]
struct Open {
    /// The latest event that kept it open.
    notice: Notice,
    since_ms: u64,
    sent: bool,
    repeats: u32,
    /// When it is sent (after the delay) or sent again (repeat).
    due: Option<Instant>,
}

/// One notifier's open alerts, by (kind, object).
#[derive(Debug, Default)]
pub struct Book {
    open: HashMap<(String, String), Open>,
}

impl Book {
    /// The messages `notice` makes now.
    pub fn notice(&mut self, spec: &NotifierSpec, notice: &Notice, now: Instant) -> Vec<Message> {
        let key = (notice.kind.clone(), notice.object.clone());
        if notice.severity == Severity::Info {
            let mut out = Vec::new();
            if let Some(open) = self.open.remove(&key)
                && open.sent
                && spec.resolved
                && about(&spec.filter, notice)
            {
                out.push(Message::new(
                    &spec.name,
                    Status::Resolved,
                    notice,
                    open.since_ms,
                    0,
                ));
            }
            if takes(&spec.filter, notice) {
                out.push(Message::new(
                    &spec.name,
                    Status::Info,
                    notice,
                    notice.time_ms,
                    0,
                ));
            }
            return out;
        }
        if !takes(&spec.filter, notice) {
            return Vec::new();
        }
        let repeat_due = spec.repeat.and_then(|r| now.checked_add(r));
        if let Some(open) = self.open.get_mut(&key) {
            // Still open, with news: sent at once when the alert was sent
            // already, else it is what the delay sends.
            open.notice = notice.clone();
            if !open.sent {
                return Vec::new();
            }
            open.due = repeat_due;
            return vec![Message::new(
                &spec.name,
                Status::Firing,
                notice,
                open.since_ms,
                0,
            )];
        }
        if self.open.len() >= MAX_OPEN
            && let Some(oldest) = self
                .open
                .iter()
                .min_by_key(|(_, o)| o.since_ms)
                .map(|(k, _)| k.clone())
        {
            self.open.remove(&oldest);
        }
        let now_send = spec.delay.is_zero();
        self.open.insert(
            key,
            Open {
                notice: notice.clone(),
                since_ms: notice.time_ms,
                sent: now_send,
                repeats: 0,
                due: if now_send {
                    repeat_due
                } else {
                    now.checked_add(spec.delay)
                },
            },
        );
        if now_send {
            vec![Message::new(
                &spec.name,
                Status::Firing,
                notice,
                notice.time_ms,
                0,
            )]
        } else {
            Vec::new()
        }
    }

    /// The messages due at `now`: alerts whose delay is over, repeats.
    pub fn tick(&mut self, spec: &NotifierSpec, now: Instant) -> Vec<Message> {
        let mut out = Vec::new();
        for open in self.open.values_mut() {
            if open.due.is_none_or(|due| due > now) {
                continue;
            }
            if open.sent {
                open.repeats += 1;
            }
            open.sent = true;
            out.push(Message::new(
                &spec.name,
                Status::Firing,
                &open.notice,
                open.since_ms,
                open.repeats,
            ));
            open.due = spec.repeat.and_then(|r| now.checked_add(r));
        }
        out
    }

    /// The alerts open now (sent or waiting for their delay).
    pub fn open(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use gtm_model::compile::{Delivery, Filter};

    fn spec(delay: u64, repeat: Option<u64>) -> NotifierSpec {
        NotifierSpec {
            name: "ops".into(),
            delivery: Delivery::Webhook {
                url: "http://127.0.0.1:9/".into(),
                secret_file: None,
            },
            ca_file: None,
            filter: Filter {
                kinds: Vec::new(),
                severity: Severity::Warning,
                records: Vec::new(),
                domains: Vec::new(),
                datacenters: Vec::new(),
                devices: Vec::new(),
            },
            delay: Duration::from_secs(delay),
            repeat: repeat.map(Duration::from_secs),
            resolved: true,
        }
    }

    fn notice(severity: Severity, text: &str) -> Notice {
        Notice {
            seq: 1,
            time_ms: 1_000,
            device: "gtm1".into(),
            datacenter: "dc1".into(),
            kind: "record".into(),
            severity,
            object: "www.example.test/A".into(),
            text: text.into(),
        }
    }

    fn statuses(m: &[Message]) -> Vec<(Status, &str, u32)> {
        m.iter()
            .map(|m| (m.status, m.text.as_str(), m.repeat))
            .collect()
    }

    #[test]
    fn without_a_delay_an_alert_is_sent_and_resolved() {
        let (s, mut b, t) = (spec(0, None), Book::default(), Instant::now());
        let sent = b.notice(&s, &notice(Severity::Warning, "DR is on"), t);
        assert_eq!(statuses(&sent), [(Status::Firing, "DR is on", 0)]);
        let news = b.notice(&s, &notice(Severity::Error, "No healthy records left"), t);
        assert_eq!(
            statuses(&news),
            [(Status::Firing, "No healthy records left", 0)]
        );
        let ended = b.notice(&s, &notice(Severity::Info, "DR ended"), t);
        assert_eq!(statuses(&ended), [(Status::Resolved, "DR ended", 0)]);
        assert_eq!(b.open(), 0);
    }

    #[test]
    fn a_delay_sends_only_what_stays_open_and_repeats_follow() {
        let (s, mut b, t) = (spec(30, Some(60)), Book::default(), Instant::now());
        let secs = Duration::from_secs;
        assert!(
            b.notice(&s, &notice(Severity::Warning, "DR is on"), t)
                .is_empty()
        );
        assert!(b.tick(&s, t + secs(29)).is_empty());
        // Resolved within the delay: nothing at all is sent.
        assert!(
            b.notice(&s, &notice(Severity::Info, "DR ended"), t + secs(29))
                .is_empty()
        );
        assert!(b.tick(&s, t + secs(31)).is_empty());
        // Open past the delay: sent once, then every minute.
        b.notice(&s, &notice(Severity::Warning, "DR is on"), t);
        assert_eq!(
            statuses(&b.tick(&s, t + secs(30))),
            [(Status::Firing, "DR is on", 0)]
        );
        assert!(b.tick(&s, t + secs(60)).is_empty());
        assert_eq!(
            statuses(&b.tick(&s, t + secs(90))),
            [(Status::Firing, "DR is on", 1)]
        );
        assert_eq!(
            statuses(&b.notice(&s, &notice(Severity::Info, "DR ended"), t + secs(100))),
            [(Status::Resolved, "DR ended", 0)]
        );
    }

    #[test]
    fn info_events_are_sent_as_they_are_to_an_info_notifier() {
        let mut s = spec(0, None);
        s.filter.severity = Severity::Info;
        let mut b = Book::default();
        let m = b.notice(
            &s,
            &notice(Severity::Info, "192.0.2.10 is enabled"),
            Instant::now(),
        );
        assert_eq!(statuses(&m), [(Status::Info, "192.0.2.10 is enabled", 0)]);
        let mut quiet = spec(0, None);
        quiet.resolved = false;
        let mut b = Book::default();
        b.notice(
            &quiet,
            &notice(Severity::Warning, "DR is on"),
            Instant::now(),
        );
        assert!(
            b.notice(&quiet, &notice(Severity::Info, "DR ended"), Instant::now())
                .is_empty()
        );
    }
}
