//! Response rate limiting (RRL) of UDP answers, per client network
//! (docs/operations.md, "Abuse resistance").
//!
//! A UDP source address can be forged, so an authoritative server can be
//! made to send its answers to a victim who never asked. The limit bounds
//! how many responses per second one client network (an IPv4 /24, an IPv6
//! /56 by default) gets; of the responses over it, every `slip`-th is sent
//! truncated (TC=1, no records), so a real client retries over TCP, which
//! cannot be forged, and the others are dropped. TCP is never limited, nor
//! exempt networks, nor a client showing a valid server cookie
//! ([`super::cookies`]).
//!
//! One table serves every UDP worker of a device: the kernel spreads one
//! client's queries over the workers' sockets, so tables per worker would
//! multiply the limit. It is [`SLOTS`] atomic words, each the second it
//! counts (high 32 bits) and the responses in it (low 32 bits); a network
//! maps to a slot by a hash keyed with a random key chosen at start, so
//! nobody outside can aim two networks at one slot. Checking a query costs
//! that hash and one atomic add; networks sharing a slot share its budget.

use std::{
    net::IpAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;

use super::cookies::Cookies;
use gtm_model::{abuse::Limits, metrics::Text};

/// Slots of the table (a power of two).
pub const SLOTS: usize = 1 << 16;
/// How often at most a line about limited responses is logged.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// What to do with the response to one UDP query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Under the limit (or not limited): answer.
    Answer,
    /// Over the limit: send nothing.
    Drop,
    /// Over the limit, this one sent truncated.
    Slip,
}

/// The table shared by a device's UDP workers, with its counters.
#[derive(Debug)]
pub struct Rrl {
    limits: ArcSwap<Limits>,
    slots: Box<[AtomicU64]>,
    key: u64,
    epoch: Instant,
    dropped: AtomicU64,
    slipped: AtomicU64,
    /// Limited responses since the last log line.
    pending: AtomicU64,
    /// Milliseconds after `epoch` before which no line is logged.
    next_log_ms: AtomicU64,
}

impl Default for Rrl {
    fn default() -> Self {
        Self {
            limits: ArcSwap::from_pointee(Limits::default()),
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            key: fastrand::u64(..),
            epoch: Instant::now(),
            dropped: AtomicU64::new(0),
            slipped: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            next_log_ms: AtomicU64::new(0),
        }
    }
}

impl Rrl {
    /// Puts a new limit in effect (a configuration was installed).
    pub fn set(&self, limits: Limits) {
        if **self.limits.load() != limits {
            self.limits.store(Arc::new(limits));
        }
    }

    /// The limit in effect, read once per batch of queries.
    pub fn limits(&self) -> arc_swap::Guard<Arc<Limits>> {
        self.limits.load()
    }

    /// The table's second at `at` (the batch's receive time).
    pub fn second(&self, at: Instant) -> u32 {
        u32::try_from(at.saturating_duration_since(self.epoch).as_secs()).unwrap_or(u32::MAX)
    }

    /// Counts one response to `ip` in `second` and says what to do with it.
    pub fn check(&self, limits: &Limits, ip: IpAddr, second: u32) -> Verdict {
        if !limits.enabled || limits.exempt.iter().any(|n| n.contains(ip)) {
            return Verdict::Answer;
        }
        let network = match ip.to_canonical() {
            // The family bit keeps IPv4 networks apart from IPv6 ones.
            IpAddr::V4(v4) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(limits.ipv4_prefix.min(32)))
                    .unwrap_or(0);
                u128::from(u32::from(v4) & mask) | 1 << 127
            }
            IpAddr::V6(v6) => u128::from(v6) & mask128(limits.ipv6_prefix),
        };
        let index = (mix(network, self.key) as usize) & (SLOTS - 1);
        let Some(slot) = self.slots.get(index) else {
            return Verdict::Answer;
        };
        let count = count(slot, second);
        if count <= u64::from(limits.per_second) {
            return Verdict::Answer;
        }
        let over = count - u64::from(limits.per_second);
        if limits.slip > 0 && over.is_multiple_of(u64::from(limits.slip)) {
            Verdict::Slip
        } else {
            Verdict::Drop
        }
    }

    /// Counts one limited response to `src` and logs a line when the last
    /// one is at least [`LOG_INTERVAL`] old.
    pub fn report(&self, verdict: Verdict, src: IpAddr) {
        match verdict {
            Verdict::Drop => self.dropped.fetch_add(1, Relaxed),
            Verdict::Slip => self.slipped.fetch_add(1, Relaxed),
            Verdict::Answer => return,
        };
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(count) = self.log_due(now_ms) {
            tracing::warn!(
                count,
                latest_source = %src,
                dropped_total = self.dropped.load(Relaxed),
                truncated_total = self.slipped.load(Relaxed),
                "UDP responses over the rate limit, dropped or sent truncated (at most one such line per {}s)",
                LOG_INTERVAL.as_secs()
            );
        }
    }

    /// Counts one limited response at `now_ms`; the number to log when a
    /// line is due (the responses since the previous line, this one too).
    fn log_due(&self, now_ms: u64) -> Option<u64> {
        self.pending.fetch_add(1, Relaxed);
        let next = self.next_log_ms.load(Relaxed);
        if now_ms < next {
            return None;
        }
        let interval = u64::try_from(LOG_INTERVAL.as_millis()).unwrap_or(u64::MAX);
        self.next_log_ms
            .compare_exchange(next, now_ms.saturating_add(interval), Relaxed, Relaxed)
            .ok()?;
        Some(self.pending.swap(0, Relaxed))
    }

    pub fn write(&self, out: &mut Text) {
        out.family(
            "gtm_dns_rrl_dropped_total",
            "counter",
            "UDP responses over the rate limit of their client network, not sent",
        );
        out.sample(
            "gtm_dns_rrl_dropped_total",
            &[],
            self.dropped.load(Relaxed) as f64,
        );
        out.family(
            "gtm_dns_rrl_slipped_total",
            "counter",
            "UDP responses over the rate limit of their client network, sent truncated (TC=1) instead",
        );
        out.sample(
            "gtm_dns_rrl_slipped_total",
            &[],
            self.slipped.load(Relaxed) as f64,
        );
    }
}

/// What to do with one UDP query's response: counted against its
/// network's limit; over it, a valid server cookie still gets an answer.
/// Counts and logs what is limited. A message that gets no response (a
/// response itself, no header) is not counted.
pub fn screen(
    rrl: &Rrl,
    cookies: &Cookies,
    limits: &Limits,
    query: &[u8],
    ip: IpAddr,
    second: u32,
) -> Verdict {
    if query.get(2).is_none_or(|flags| flags & 0x80 != 0) || query.len() < 12 {
        return Verdict::Answer;
    }
    let verdict = rrl.check(limits, ip, second);
    if verdict == Verdict::Answer {
        return verdict;
    }
    let cookie = super::wire::edns(query)
        .ok()
        .flatten()
        .and_then(|e| e.cookie);
    if cookie.is_some_and(|c| cookies.valid(&c, ip)) {
        return Verdict::Answer;
    }
    rrl.report(verdict, ip);
    verdict
}

/// Adds one response to a slot in `second`; the slot's count after it.
fn count(slot: &AtomicU64, second: u32) -> u64 {
    let current = slot.load(Relaxed);
    // A newer second starts the count again; a worker whose batch began
    // just before the second turned only adds to the newer count.
    if ((current >> 32) as u32) < second {
        let fresh = u64::from(second) << 32 | 1;
        if slot
            .compare_exchange(current, fresh, Relaxed, Relaxed)
            .is_ok()
        {
            return 1;
        }
    }
    (slot.fetch_add(1, Relaxed) & 0xFFFF_FFFF) + 1
}

/// The high `prefix` bits of 128 set.
fn mask128(prefix: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix.min(128)))
        .unwrap_or(0)
}

/// A keyed mix of a network into 64 bits (the splitmix64 finalizer).
fn mix(network: u128, key: u64) -> u64 {
    let folded = (network as u64) ^ ((network >> 64) as u64).rotate_left(29) ^ key;
    let mut z = folded.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes into `out` the truncated response sent instead of a limited one:
/// the query's id, opcode and RD, TC=1, NOERROR, its question when it reads
/// and an OPT when it has one, and no records; false (nothing written) when
/// the query has no header.
pub fn truncate_into(msg: &[u8], payload: u16, out: &mut Vec<u8>) -> bool {
    match truncated(msg, payload) {
        Some(t) => {
            *out = t;
            true
        }
        None => false,
    }
}

/// [`truncate_into`]'s response as a new message.
pub fn truncated(msg: &[u8], payload: u16) -> Option<Vec<u8>> {
    let mut out = super::wire::formerr(msg, payload);
    if out.len() < 12 {
        return None;
    }
    if let Some(flags) = out.get_mut(2..4) {
        flags[0] |= 0x02;
        flags[1] = 0;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_model::node::Network;

    fn limits(per_second: u32, slip: u32) -> Limits {
        Limits {
            per_second,
            slip,
            exempt: Vec::new(),
            ..Limits::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_network_gets_its_rate_then_every_slipth_truncated() {
        let rrl = Rrl::default();
        let l = limits(5, 2);
        let verdicts: Vec<Verdict> = (0..11)
            .map(|i| rrl.check(&l, ip(&format!("192.0.2.{i}")), 7))
            .collect();
        use Verdict::*;
        assert_eq!(
            verdicts,
            [
                Answer, Answer, Answer, Answer, Answer, Drop, Slip, Drop, Slip, Drop, Slip
            ],
            "one /24 shares one budget"
        );
        // Another /24 has its own; the next second starts again.
        assert_eq!(rrl.check(&l, ip("192.0.3.1"), 7), Answer);
        assert_eq!(rrl.check(&l, ip("192.0.2.1"), 8), Answer);
        // IPv6: one /56 shares, the next /56 does not.
        let l6 = limits(1, 0);
        assert_eq!(rrl.check(&l6, ip("2001:db8:0:100::1"), 9), Answer);
        assert_eq!(rrl.check(&l6, ip("2001:db8:0:1ff::2"), 9), Drop);
        assert_eq!(rrl.check(&l6, ip("2001:db8:0:200::1"), 9), Answer);
    }

    #[test]
    fn exempt_disabled_and_slip_one() {
        let rrl = Rrl::default();
        let mut l = limits(1, 1);
        assert_eq!(rrl.check(&l, ip("198.51.100.1"), 1), Verdict::Answer);
        assert_eq!(rrl.check(&l, ip("198.51.100.1"), 1), Verdict::Slip);
        l.exempt = vec![Network::try_from("198.51.100.0/25".to_string()).unwrap()];
        assert_eq!(rrl.check(&l, ip("198.51.100.1"), 1), Verdict::Answer);
        assert_eq!(rrl.check(&l, ip("198.51.100.200"), 1), Verdict::Slip);
        let off = Limits {
            enabled: false,
            ..limits(1, 1)
        };
        assert_eq!(rrl.check(&off, ip("198.51.100.200"), 1), Verdict::Answer);
        // Loopback is exempt by default.
        assert_eq!(
            rrl.check(
                &Limits {
                    per_second: 1,
                    ..Limits::default()
                },
                ip("127.0.0.1"),
                1
            ),
            Verdict::Answer
        );
    }

    #[test]
    fn prefixes_of_any_length_group_clients() {
        let rrl = Rrl::default();
        for (i, (v4, v6)) in [(0, 0), (32, 128), (1, 1), (31, 127)]
            .into_iter()
            .enumerate()
        {
            let l = Limits {
                ipv4_prefix: v4,
                ipv6_prefix: v6,
                ..limits(1, 0)
            };
            let s = 10 + i as u32;
            assert_eq!(rrl.check(&l, ip("203.0.113.8"), s), Verdict::Answer);
            assert_eq!(rrl.check(&l, ip("2001:db8::8"), s), Verdict::Answer);
            assert_eq!(rrl.check(&l, ip("203.0.113.8"), s), Verdict::Drop);
            assert_eq!(rrl.check(&l, ip("2001:db8::8"), s), Verdict::Drop);
        }
    }

    #[test]
    fn a_flood_logs_once_per_interval_with_its_count() {
        let rrl = Rrl::default();
        let lines: Vec<u64> = (0..1000).filter_map(|_| rrl.log_due(1_000)).collect();
        assert_eq!(lines, vec![1]);
        assert_eq!(rrl.log_due(5_000), None);
        assert_eq!(rrl.log_due(11_000), Some(1001));
    }

    #[test]
    fn the_truncated_response_keeps_question_and_opt() {
        let mut q = vec![0xab, 0xcd, 0x01, 0x20, 0, 1, 0, 0, 0, 0, 0, 1];
        q.extend_from_slice(b"\x03www\x07example\x04test\x00\x00\x01\x00\x01");
        q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
        let t = truncated(&q, 1232).unwrap();
        assert_eq!(&t[..12], &[0xab, 0xcd, 0x83, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(t.len(), q.len());
        assert_eq!(truncated(&q[..5], 1232), None);
    }
}
