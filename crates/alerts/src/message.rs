//! A message as every transport sends it: the JSON body of a webhook, the
//! subject and text of an e-mail, the RFC 5424 line of syslog.

use gtm_model::{severity::Severity, when::rfc3339};
use serde::{Deserialize, Serialize};

use super::notice::Notice;

/// What a message says of its alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// A warning or an error, open (sent again with `repeat` > 0).
    Firing,
    /// The alert ended: an info event about the same object came.
    Resolved,
    /// An info event, sent once (a notifier with `severity = "info"`).
    Info,
    /// `gtm alert test`.
    Test,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Firing => "firing",
            Self::Resolved => "resolved",
            Self::Info => "info",
            Self::Test => "test",
        }
    }
}

/// One message (the webhook's JSON body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Message {
    /// Unique per message; the same on every retry of it (a receiver can
    /// drop a message it already has).
    pub id: String,
    pub status: Status,
    pub notifier: String,
    /// The device that sent it (whose event it is).
    pub device: String,
    pub datacenter: String,
    pub kind: String,
    pub severity: Severity,
    pub object: String,
    /// The event's text (for a resolution, the event that resolved it).
    pub text: String,
    /// When the alert opened (RFC 3339, UTC).
    pub since: String,
    /// When the event was logged.
    pub time: String,
    /// 0, then 1, 2 ... for repeats of an open alert.
    pub repeat: u32,
}

impl Message {
    pub fn new(
        notifier: &str,
        status: Status,
        notice: &Notice,
        since_ms: u64,
        repeat: u32,
    ) -> Self {
        Message {
            id: format!(
                "{}-{}-{}-{repeat}-{:08x}",
                notice.device,
                notice.seq,
                status.as_str(),
                fastrand::u32(..)
            ),
            status,
            notifier: notifier.to_string(),
            device: notice.device.clone(),
            datacenter: notice.datacenter.clone(),
            kind: notice.kind.clone(),
            severity: notice.severity,
            object: notice.object.clone(),
            text: notice.text.clone(),
            since: rfc3339(since_ms),
            time: rfc3339(notice.time_ms),
            repeat,
        }
    }

    /// `[gtm FIRING warning] www.example.test/A: DR is on (gtm1)`.
    pub fn subject(&self) -> String {
        let again = if self.repeat > 0 {
            format!(" (repeat {})", self.repeat)
        } else {
            String::new()
        };
        format!(
            "[gtm {} {}] {} ({}){again}",
            self.status.as_str().to_ascii_uppercase(),
            self.severity.as_str(),
            self.text,
            self.device
        )
    }

    /// The plain text of an e-mail.
    pub fn body(&self) -> String {
        format!(
            "{}\n\nstatus:     {}\nseverity:   {}\nkind:       {}\nobject:     {}\ndevice:     {} ({})\nsince:      {}\ntime:       {}\nrepeat:     {}\nnotifier:   {}\nid:         {}\n",
            self.text,
            self.status.as_str(),
            self.severity.as_str(),
            self.kind,
            self.object,
            self.device,
            self.datacenter,
            self.since,
            self.time,
            self.repeat,
            self.notifier,
            self.id
        )
    }

    /// The RFC 5424 line (without framing): `<PRI>1 TIME HOST gtm - ALERT
    /// [gtm@32473 ...] TEXT`. An error is `err`, a warning `warning`, a
    /// resolution, an info event and a test `notice`.
    pub fn syslog(&self, facility: u8) -> String {
        let level = match (self.status, self.severity) {
            (Status::Firing, Severity::Error) => 3,
            (Status::Firing, _) => 4,
            _ => 5,
        };
        let pri = u32::from(facility) * 8 + level;
        let param = |v: &str| {
            v.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace(']', "\\]")
        };
        // RFC 5424 HOSTNAME: printable US-ASCII, no space, at most 255.
        let host: String = self
            .device
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(255)
            .collect();
        format!(
            "<{pri}>1 {} {} gtm - ALERT [gtm@32473 status=\"{}\" severity=\"{}\" kind=\"{}\" object=\"{}\" since=\"{}\" repeat=\"{}\" id=\"{}\"] {}",
            self.time,
            if host.is_empty() { "-" } else { &host },
            self.status.as_str(),
            self.severity.as_str(),
            param(&self.kind),
            param(&self.object),
            self.since,
            self.repeat,
            param(&self.id),
            self.text.replace(['\n', '\r'], " ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_in_each_form() {
        let notice = Notice {
            seq: 7,
            time_ms: 1_767_225_600_000,
            device: "gtm1".into(),
            datacenter: "dc1".into(),
            kind: "record".into(),
            severity: Severity::Warning,
            object: "www.example.test/A".into(),
            text: "www.example.test/A: DR is on".into(),
        };
        let m = Message::new("ops", Status::Firing, &notice, 1_767_225_600_000, 0);
        assert!(m.id.starts_with("gtm1-7-firing-0-"), "{}", m.id);
        assert_eq!(
            m.subject(),
            "[gtm FIRING warning] www.example.test/A: DR is on (gtm1)"
        );
        assert!(m.body().contains("object:     www.example.test/A\n"));
        let line = m.syslog(3);
        assert!(
            line.starts_with("<28>1 2026-01-01T00:00:00Z gtm1 gtm - ALERT [gtm@32473 status=\"firing\" severity=\"warning\" kind=\"record\" object=\"www.example.test/A\""),
            "{line}"
        );
        assert!(line.ends_with("] www.example.test/A: DR is on"), "{line}");
    }
}
