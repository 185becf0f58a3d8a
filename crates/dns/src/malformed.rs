//! Malformed queries: why each one was refused, counted for `/metrics`,
//! and logged at most once per interval with a count, so a stream of bad
//! packets cannot flood the log.

use std::{
    net::IpAddr,
    sync::atomic::{AtomicU64, Ordering::Relaxed},
    time::{Duration, Instant},
};

use super::wire::WireError;

/// How often at most a line about malformed queries is logged.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Why a query was answered with FORMERR (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The message ends inside a field it announced.
    Truncated,
    /// A name with a bad label length.
    Name,
    /// A compression pointer into the header or not pointing backwards.
    Compression,
    /// More than one OPT record.
    Opt,
    /// A malformed or repeated EDNS Client Subnet option.
    Ecs,
    /// Our reader accepted it but the full decoder did not.
    Undecodable,
    /// A COOKIE option of a wrong length (RFC 7873 §5.2.2).
    Cookie,
    /// An edns-tcp-keepalive option of a wrong length (RFC 7828).
    Keepalive,
}

impl Reason {
    pub const ALL: [Reason; 8] = [
        Reason::Truncated,
        Reason::Name,
        Reason::Compression,
        Reason::Opt,
        Reason::Ecs,
        Reason::Undecodable,
        Reason::Cookie,
        Reason::Keepalive,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Reason::Truncated => "truncated",
            Reason::Name => "name",
            Reason::Compression => "compression",
            Reason::Opt => "opt",
            Reason::Ecs => "ecs",
            Reason::Undecodable => "undecodable",
            Reason::Cookie => "cookie",
            Reason::Keepalive => "keepalive",
        }
    }
}

impl From<&WireError> for Reason {
    fn from(e: &WireError) -> Self {
        match e {
            WireError::Short => Reason::Truncated,
            WireError::BadName => Reason::Name,
            WireError::BadPointer => Reason::Compression,
            WireError::TwoOpts => Reason::Opt,
            WireError::BadEcs(_) | WireError::TwoEcs => Reason::Ecs,
            WireError::BadCookie => Reason::Cookie,
            WireError::BadKeepalive => Reason::Keepalive,
        }
    }
}

/// Counts of malformed queries by reason, and the rate limit of their log.
#[derive(Debug)]
pub struct Malformed {
    counts: [AtomicU64; Reason::ALL.len()],
    /// Queries seen since the last log line.
    pending: AtomicU64,
    /// Milliseconds after `epoch` before which no line is logged.
    next_log_ms: AtomicU64,
    epoch: Instant,
}

impl Default for Malformed {
    fn default() -> Self {
        Self {
            counts: Default::default(),
            pending: AtomicU64::new(0),
            next_log_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Malformed {
    /// Counts one malformed query from `src`; logs a line when the last
    /// one is at least [`LOG_INTERVAL`] old.
    pub fn report(&self, reason: Reason, src: IpAddr) {
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(count) = self.count(reason, now_ms) {
            tracing::warn!(
                count,
                latest_reason = reason.label(),
                latest_source = %src,
                "malformed DNS queries answered with FORMERR (at most one such line per {}s)",
                LOG_INTERVAL.as_secs()
            );
        }
    }

    /// Counts one query at `now_ms`; returns the number to log when a line
    /// is due (the queries since the previous line, this one included).
    fn count(&self, reason: Reason, now_ms: u64) -> Option<u64> {
        self.counts[reason as usize].fetch_add(1, Relaxed);
        self.pending.fetch_add(1, Relaxed);
        let next = self.next_log_ms.load(Relaxed);
        if now_ms < next {
            return None;
        }
        let interval = u64::try_from(LOG_INTERVAL.as_millis()).unwrap_or(u64::MAX);
        // One thread wins the line; the others just counted.
        self.next_log_ms
            .compare_exchange(next, now_ms.saturating_add(interval), Relaxed, Relaxed)
            .ok()?;
        Some(self.pending.swap(0, Relaxed))
    }

    /// Total malformed queries with this reason.
    pub fn total(&self, reason: Reason) -> u64 {
        self.counts[reason as usize].load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_logs_once_per_interval_with_its_count() {
        let m = Malformed::default();
        let lines: Vec<u64> = (0..5000)
            .filter_map(|_| m.count(Reason::Ecs, 1_000))
            .collect();
        assert_eq!(
            lines,
            vec![1],
            "the first query logs at once, the rest wait"
        );
        assert_eq!(
            m.count(Reason::Name, 5_000),
            None,
            "still inside the interval"
        );
        assert_eq!(
            m.count(Reason::Name, 11_000),
            Some(5000 + 1),
            "the next line counts everything since the previous one"
        );
        assert_eq!(m.total(Reason::Ecs), 5000);
        assert_eq!(m.total(Reason::Name), 2);
        assert_eq!(m.total(Reason::Opt), 0);
    }
}
