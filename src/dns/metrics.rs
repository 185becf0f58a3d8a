//! What the DNS path counts for `/metrics`: responses by query type and
//! response code, answer latency, and malformed queries by reason. The
//! answer paths report `(qtype, rcode)` here; nothing here reads a message.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::malformed::{Malformed, Reason};
use crate::metrics::{Histogram, Text};

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

const RCODES: [&str; 16] = [
    "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
    "NXRRSET", "NOTAUTH", "NOTZONE", "rcode11", "rcode12", "rcode13", "rcode14", "rcode15",
];

/// What the DNS path counts: responses by query type and response code, and
/// how long answering took. Per-record counts live in the snapshot's slots.
#[derive(Debug, Default)]
pub struct DnsMetrics {
    responses: [[AtomicU64; RCODES.len()]; TYPES.len()],
    pub latency: Histogram,
    pub malformed: Malformed,
}

impl DnsMetrics {
    /// Counts one response.
    pub fn response(&self, qtype: u16, rcode: u8) {
        let t = TYPES
            .iter()
            .position(|(code, _)| *code == qtype)
            .unwrap_or(TYPES.len() - 1);
        self.responses[t][usize::from(rcode & 0x0F)].fetch_add(1, Relaxed);
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
    }
}
