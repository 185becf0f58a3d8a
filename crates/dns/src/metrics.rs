//! What the DNS path counts for `/metrics`: responses by query type and
//! response code, answer latency, malformed queries by reason, UDP queries
//! left unanswered and TCP connections closed by the server, by reason.
//! The answer paths report `(qtype, rcode)` here; nothing here reads a
//! message.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::malformed::{Malformed, Reason};
use gtm_model::metrics::{Histogram, Text};

/// Query types counted apart; the rest are `other`.
const TYPES: [(u16, &str); 11] = [
    (1, "A"),
    (28, "AAAA"),
    (5, "CNAME"),
    (15, "MX"),
    (16, "TXT"),
    (33, "SRV"),
    (257, "CAA"),
    (2, "NS"),
    (6, "SOA"),
    (255, "ANY"),
    (0, "other"),
];

/// Response codes by their full 12-bit value (the header's 4 bits and the
/// OPT's extended 8, RFC 6891 §6.1.3); any other value is `other`.
const RCODES: [&str; 25] = [
    "NOERROR",
    "FORMERR",
    "SERVFAIL",
    "NXDOMAIN",
    "NOTIMP",
    "REFUSED",
    "YXDOMAIN",
    "YXRRSET",
    "NXRRSET",
    "NOTAUTH",
    "NOTZONE",
    "rcode11",
    "rcode12",
    "rcode13",
    "rcode14",
    "rcode15",
    "BADVERS",
    "BADKEY",
    "BADTIME",
    "BADMODE",
    "BADNAME",
    "BADALG",
    "BADTRUNC",
    "BADCOOKIE",
    "other",
];

/// Why a UDP query that was read got no answer (the rate limit's drops
/// are counted apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Source port 0: no socket can send there; the source is forged.
    SourcePortZero,
    /// Source 0.0.0.0 or `::`.
    SourceUnspecified,
    /// Source 255.255.255.255: an answer would go to a whole network.
    SourceBroadcast,
    /// A multicast source: an answer would go to a group.
    SourceMulticast,
    /// The kernel refused to send the answer (an unroutable source, a
    /// firewall rule); the rest of its batch is still sent.
    SendFailed,
}

impl Unanswered {
    pub const ALL: [Self; 5] = [
        Self::SourcePortZero,
        Self::SourceUnspecified,
        Self::SourceBroadcast,
        Self::SourceMulticast,
        Self::SendFailed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::SourcePortZero => "source_port_zero",
            Self::SourceUnspecified => "source_unspecified",
            Self::SourceBroadcast => "source_broadcast",
            Self::SourceMulticast => "source_multicast",
            Self::SendFailed => "send_failed",
        }
    }
}

/// Why the server closed a TCP connection, or refused a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpClosed {
    /// No complete message within the idle timeout.
    Idle,
    /// A response not taken by the client within the write timeout.
    WriteTimeout,
    /// Idle, and closed to admit a new connection (RFC 7766 §6.2.3).
    Evicted,
    /// A new connection refused: its client holds its limit of
    /// connections, none of them idle.
    ClientLimit,
    /// A new connection refused: the listener holds its limit of
    /// connections, none of them idle.
    ListenerFull,
}

impl TcpClosed {
    pub const ALL: [Self; 5] = [
        Self::Idle,
        Self::WriteTimeout,
        Self::Evicted,
        Self::ClientLimit,
        Self::ListenerFull,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::WriteTimeout => "write_timeout",
            Self::Evicted => "evicted",
            Self::ClientLimit => "client_limit",
            Self::ListenerFull => "listener_full",
        }
    }
}

/// What the DNS path counts: responses by query type and response code, and
/// how long answering took. Per-record counts live in the snapshot's slots.
#[derive(Debug, Default)]
pub struct DnsMetrics {
    responses: [[AtomicU64; RCODES.len()]; TYPES.len()],
    pub latency: Histogram,
    pub malformed: Malformed,
    unanswered: [AtomicU64; Unanswered::ALL.len()],
    tcp_closed: [AtomicU64; TcpClosed::ALL.len()],
    tcp_open: AtomicU64,
}

impl DnsMetrics {
    /// Counts one response with its full 12-bit response code.
    pub fn response(&self, qtype: u16, rcode: u16) {
        let t = TYPES
            .iter()
            .position(|(code, _)| *code == qtype)
            .unwrap_or(TYPES.len() - 1);
        let r = usize::from(rcode).min(RCODES.len() - 1);
        self.responses[t][r].fetch_add(1, Relaxed);
    }

    /// Counts a UDP query left unanswered.
    pub fn unanswered(&self, why: Unanswered) {
        self.unanswered[why as usize].fetch_add(1, Relaxed);
    }

    /// Counts a TCP connection closed (or refused) by the server.
    pub fn tcp_closed(&self, why: TcpClosed) {
        self.tcp_closed[why as usize].fetch_add(1, Relaxed);
    }

    /// One more open TCP connection (`true`) or one fewer.
    pub fn tcp_open(&self, opened: bool) {
        if opened {
            self.tcp_open.fetch_add(1, Relaxed);
        } else {
            self.tcp_open.fetch_sub(1, Relaxed);
        }
    }

    pub fn write(&self, out: &mut Text) {
        out.family(
            "gtm_dns_responses_total",
            "counter",
            "DNS responses sent, by query type and response code",
        );
        for (t, (_, tname)) in TYPES.iter().enumerate() {
            for (r, rname) in RCODES.iter().enumerate() {
                let n = self.responses[t][r].load(Relaxed);
                if n > 0 {
                    out.sample(
                        "gtm_dns_responses_total",
                        &[("type", tname), ("rcode", rname)],
                        n as f64,
                    );
                }
            }
        }
        out.family(
            "gtm_dns_response_seconds",
            "histogram",
            "Time from receiving a query to sending its response",
        );
        self.latency.write(out, "gtm_dns_response_seconds", &[]);
        out.family(
            "gtm_dns_malformed_total",
            "counter",
            "Malformed queries answered with FORMERR, by reason",
        );
        for reason in Reason::ALL {
            out.sample(
                "gtm_dns_malformed_total",
                &[("reason", reason.label())],
                self.malformed.total(reason) as f64,
            );
        }
        out.family(
            "gtm_dns_udp_unanswered_total",
            "counter",
            "UDP queries read but not answered, by reason: a source no answer should go to, or a send the kernel refused",
        );
        for why in Unanswered::ALL {
            out.sample(
                "gtm_dns_udp_unanswered_total",
                &[("reason", why.label())],
                self.unanswered[why as usize].load(Relaxed) as f64,
            );
        }
        out.family(
            "gtm_dns_tcp_connections",
            "gauge",
            "DNS TCP connections open, all listeners",
        );
        out.sample(
            "gtm_dns_tcp_connections",
            &[],
            self.tcp_open.load(Relaxed) as f64,
        );
        out.family(
            "gtm_dns_tcp_closed_total",
            "counter",
            "DNS TCP connections the server closed or refused, by reason",
        );
        for why in TcpClosed::ALL {
            out.sample(
                "gtm_dns_tcp_closed_total",
                &[("reason", why.label())],
                self.tcp_closed[why as usize].load(Relaxed) as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_response_codes_have_their_own_label() {
        let m = DnsMetrics::default();
        m.response(1, 16);
        m.response(1, 23);
        m.response(1, 0);
        m.response(1, 4095);
        let mut out = Text::default();
        m.write(&mut out);
        let text = out.finish();
        for line in [
            "gtm_dns_responses_total{type=\"A\",rcode=\"BADVERS\"} 1",
            "gtm_dns_responses_total{type=\"A\",rcode=\"BADCOOKIE\"} 1",
            "gtm_dns_responses_total{type=\"A\",rcode=\"NOERROR\"} 1",
            "gtm_dns_responses_total{type=\"A\",rcode=\"other\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
