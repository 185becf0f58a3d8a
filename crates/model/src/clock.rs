//! The one clock. Wall time: milliseconds since the Unix epoch, as
//! commands, events, history and TSIG carry times (a clock set before 1970
//! reads 0). Elapsed time: `Instant` (CLOCK_MONOTONIC), and [`Wakeful`],
//! the part of it this process was running.

use std::{
    sync::Mutex,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How often a device's own timer beats ([`Wakeful::beat`]).
pub const BEAT_EVERY: Duration = Duration::from_millis(250);
/// A gap between two beats longer than this (four beats missed) is a
/// stall: the process was stopped (SIGSTOP), frozen with its machine, or
/// starved of CPU.
pub const STALLED_AFTER: Duration = Duration::from_secs(1);

/// How long this process has been running since it last stalled, started
/// or was told to count again ([`Wakeful::restart`]: it joined a cluster).
///
/// CLOCK_MONOTONIC, which `Instant` reads, keeps running while a process
/// is stopped: after a SIGCONT every peer looks silent for as long as the
/// pause lasted, although it was this process that could not listen. A
/// device that judges others by the time since it heard from them counts
/// that silence only while it was itself awake to hear.
#[derive(Debug)]
pub struct Wakeful {
    inner: Mutex<Awake>,
}

#[derive(Debug, Clone, Copy)]
struct Awake {
    /// Running, without a stall, since.
    since: Instant,
    /// The last beat; `None` before the first.
    beat: Option<Instant>,
}

impl Default for Wakeful {
    fn default() -> Self {
        Wakeful::starting_at(Instant::now())
    }
}

impl Wakeful {
    /// A process that starts running at `now`.
    pub fn starting_at(now: Instant) -> Self {
        Wakeful {
            inner: Mutex::new(Awake {
                since: now,
                beat: None,
            }),
        }
    }

    /// A moment this process runs: beaten every [`BEAT_EVERY`] by its own
    /// timer, and by whoever is about to read [`Wakeful::awake`]. The gap
    /// since the last beat, when it exceeds [`STALLED_AFTER`], is a stall:
    /// returned, and the time awake counts from now.
    pub fn beat(&self) -> Option<Duration> {
        self.beat_at(Instant::now())
    }

    /// [`Wakeful::beat`] at `now`.
    pub fn beat_at(&self, now: Instant) -> Option<Duration> {
        let mut awake = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let gap = awake
            .beat
            .map(|last| now.saturating_duration_since(last))
            .filter(|gap| *gap > STALLED_AFTER);
        if gap.is_some() {
            awake.since = now;
        }
        if awake.beat.is_none_or(|last| now > last) {
            awake.beat = Some(now);
        }
        gap
    }

    /// The time awake counts from `now` again (this device started, or
    /// joined a cluster: what it heard before says nothing of now).
    pub fn restart_at(&self, now: Instant) {
        let mut awake = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        awake.since = now;
    }

    /// [`Wakeful::restart_at`] now.
    pub fn restart(&self) {
        self.restart_at(Instant::now());
    }

    /// How long, at `now`, this process has been running since its last
    /// stall, start or restart.
    pub fn awake_at(&self, now: Instant) -> Duration {
        let awake = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        now.saturating_duration_since(awake.since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_between_beats_is_a_stall_and_awake_counts_from_its_end() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let w = Wakeful::starting_at(t0);
        // The first beat has no gap before it.
        assert_eq!(w.beat_at(at(0)), None);
        for ms in (250..=10_000).step_by(250) {
            assert_eq!(w.beat_at(at(ms)), None, "a beat on time at {ms} ms");
        }
        assert_eq!(w.awake_at(at(10_000)), Duration::from_secs(10));
        // Stopped for 3 s: the first beat after it says so.
        assert_eq!(w.beat_at(at(13_000)), Some(Duration::from_secs(3)));
        assert_eq!(w.awake_at(at(13_000)), Duration::ZERO);
        assert_eq!(w.beat_at(at(13_250)), None);
        // A gap at the limit is not a stall; a beat from the past changes
        // nothing.
        assert_eq!(w.beat_at(at(14_250)), None);
        assert_eq!(w.beat_at(at(14_000)), None);
        assert_eq!(w.beat_at(at(15_250)), None);
        assert_eq!(w.awake_at(at(20_000)), Duration::from_secs(7));
        // A restart (a join) counts from its moment.
        w.restart_at(at(21_000));
        assert_eq!(w.awake_at(at(22_000)), Duration::from_secs(1));
    }
}
