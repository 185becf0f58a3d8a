//! The faults: kill -9 and restart, SIGSTOP/SIGCONT of the leader, a
//! partition of one device; and the failover time after a killed leader.

use std::time::{Duration, Instant};

use super::{
    client::{Target, leader, leader_seen_by, until_up},
    devices::{Device, Firewall},
};

/// A random length between `from_ms` and `to_ms`.
pub(super) fn pause(rng: &mut fastrand::Rng, from_ms: u64, to_ms: u64) -> Duration {
    Duration::from_millis(rng.u64(from_ms..=to_ms))
}

/// The faults, their targets chosen by a seeded generator (the seed is
/// printed; `GTM_CHAOS_SEED` repeats the choices, not the timing).
pub(super) struct Nemesis {
    pub(super) rng: fastrand::Rng,
    /// kill -9 of the leader until a survivor names another one.
    pub(super) failovers: Vec<Duration>,
    /// Kills of the leader after which no survivor named another leader
    /// within 20 s.
    pub(super) failovers_missed: usize,
    pub(super) log: Vec<String>,
}

impl Nemesis {
    pub(super) fn new(seed: u64) -> Self {
        Nemesis {
            rng: fastrand::Rng::with_seed(seed),
            failovers: Vec::new(),
            failovers_missed: 0,
            log: Vec::new(),
        }
    }

    /// kill -9 of a device (the leader two times in three), restart after
    /// a short pause; measures the failover when it was the leader.
    pub(super) async fn kill(
        &mut self,
        http: &reqwest::Client,
        devices: &mut [Device],
        targets: &[Target],
    ) {
        let all: Vec<usize> = (0..devices.len()).collect();
        let leader = leader(http, targets, &all).await;
        let victim = match leader {
            Some(l) if self.rng.u8(0..3) < 2 => l,
            _ => self.rng.usize(0..devices.len()),
        };
        let killed_at = Instant::now();
        devices[victim].kill();
        self.log.push(format!(
            "kill -9 {}{}",
            devices[victim].name,
            if Some(victim) == leader {
                " (leader)"
            } else {
                ""
            }
        ));
        if Some(victim) == leader {
            let survivors: Vec<usize> = all.iter().copied().filter(|&i| i != victim).collect();
            let deadline = killed_at + Duration::from_secs(20);
            let old = &targets[victim].name;
            let mut seen = None;
            while seen.is_none() && Instant::now() < deadline {
                for &s in &survivors {
                    if let Some((_, name)) = leader_seen_by(http, &targets[s]).await
                        && &name != old
                    {
                        seen = Some(killed_at.elapsed());
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            match seen {
                Some(t) => {
                    self.log
                        .push(format!("  new leader after {} ms", t.as_millis()));
                    self.failovers.push(t);
                }
                None => {
                    self.log.push("  no new leader within 20 s".into());
                    self.failovers_missed += 1;
                }
            }
        }
        let rest = pause(&mut self.rng, 500, 1500);
        tokio::time::sleep(rest.saturating_sub(killed_at.elapsed())).await;
        devices[victim].spawn();
        if !until_up(http, &targets[victim], Duration::from_secs(30)).await {
            self.log.push(format!(
                "  {} did not come back within 30 s",
                devices[victim].name
            ));
        }
    }

    /// SIGSTOP of the leader for 2-4 s, then SIGCONT.
    pub(super) async fn stop_leader(
        &mut self,
        http: &reqwest::Client,
        devices: &[Device],
        targets: &[Target],
    ) {
        let all: Vec<usize> = (0..devices.len()).collect();
        let Some(l) = leader(http, targets, &all).await else {
            self.log.push("SIGSTOP: no leader to pause".into());
            return;
        };
        let length = pause(&mut self.rng, 2000, 4000);
        self.log.push(format!(
            "SIGSTOP {} (leader) for {} ms",
            devices[l].name,
            length.as_millis()
        ));
        devices[l].signal(libc::SIGSTOP);
        tokio::time::sleep(length).await;
        devices[l].signal(libc::SIGCONT);
    }

    /// One device (the leader one time in two) cut off from the others in
    /// both directions for 3-5 s, then healed.
    pub(super) async fn partition(
        &mut self,
        http: &reqwest::Client,
        devices: &[Device],
        targets: &[Target],
        fw: &mut Firewall,
    ) {
        let all: Vec<usize> = (0..devices.len()).collect();
        let leader = leader(http, targets, &all).await;
        let cut = match leader {
            Some(l) if self.rng.bool() => l,
            _ => self.rng.usize(0..devices.len()),
        };
        let length = pause(&mut self.rng, 3000, 5000);
        self.log.push(format!(
            "partition {}{} for {} ms",
            devices[cut].name,
            if Some(cut) == leader { " (leader)" } else { "" },
            length.as_millis()
        ));
        for other in all.iter().filter(|&&o| o != cut) {
            fw.drop_traffic(&devices[cut], &devices[*other]);
            fw.drop_traffic(&devices[*other], &devices[cut]);
        }
        tokio::time::sleep(length).await;
        // What each side believes just before the heal (a cut-off leader
        // that still names itself is a second leader).
        let mut views = Vec::new();
        for &i in &all {
            let seen = leader_seen_by(http, &targets[i]).await;
            views.push(format!(
                "{} sees {}",
                targets[i].name,
                seen.map_or("no leader".into(), |(term, name)| format!(
                    "{name} (term {term})"
                ))
            ));
        }
        self.log.push(format!(
            "  before the heal: {}; {} packets dropped",
            views.join(", "),
            fw.dropped()
        ));
        fw.heal();
    }
}
