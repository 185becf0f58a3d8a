//! Which CPUs a device's threads run on (`dns_cpus` in the node file).
//!
//! With `dns_cpus` given, the UDP DNS workers run on those CPUs, one
//! `SO_REUSEPORT` worker per CPU unless `udp_workers` says otherwise, and
//! every other thread of the device (probes, the API, the cluster, TCP DNS,
//! installs) on the CPUs left: thousands of probes a second, and the kernel
//! work of their connections, then stay off the cores that answer queries.
//! Without it, nothing is pinned and the kernel places every thread.

use std::{io, sync::OnceLock};

/// Why the CPUs of `dns_cpus` cannot be split from the rest; each names the
/// node setting and the entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error("node setting dns_cpus: cannot read the CPUs this device may run on: {0}")]
    Unreadable(#[source] io::Error),
    #[error(
        "node setting dns_cpus[{index}]: CPU {cpu} is not one this device may run on \
         (it may run on {allowed})"
    )]
    NotAllowed {
        index: usize,
        cpu: usize,
        allowed: String,
    },
    #[error("node setting dns_cpus[{index}]: CPU {cpu} is listed twice")]
    Twice { index: usize, cpu: usize },
    #[error(
        "node setting dns_cpus: {dns} takes every CPU this device may run on ({allowed}); \
         leave at least one for probes, the API and the cluster, or remove the setting"
    )]
    TakesAll { dns: String, allowed: String },
}

/// The CPUs of a device split between its DNS workers and the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The UDP DNS workers' CPUs, as the node file lists them.
    pub dns: Vec<usize>,
    /// Every other CPU this process may run on, ascending.
    pub rest: Vec<usize>,
}

impl Split {
    /// The split `dns_cpus` asks for, checked against the CPUs this process
    /// may run on; `None` when `dns_cpus` is empty (nothing pinned).
    pub fn new(dns_cpus: &[usize]) -> Result<Option<Self>, SplitError> {
        if dns_cpus.is_empty() {
            return Ok(None);
        }
        let allowed = allowed().map_err(SplitError::Unreadable)?;
        Self::within(dns_cpus, &allowed).map(Some)
    }

    /// The split of `allowed` (ascending CPU numbers) that `dns_cpus` asks for.
    fn within(dns_cpus: &[usize], allowed: &[usize]) -> Result<Self, SplitError> {
        for (i, &cpu) in dns_cpus.iter().enumerate() {
            if !allowed.contains(&cpu) {
                return Err(SplitError::NotAllowed {
                    index: i,
                    cpu,
                    allowed: list(allowed),
                });
            }
            if dns_cpus[..i].contains(&cpu) {
                return Err(SplitError::Twice { index: i, cpu });
            }
        }
        let rest: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|c| !dns_cpus.contains(c))
            .collect();
        if rest.is_empty() {
            return Err(SplitError::TakesAll {
                dns: list(dns_cpus),
                allowed: list(allowed),
            });
        }
        Ok(Self {
            dns: dns_cpus.to_vec(),
            rest,
        })
    }

    /// The CPU of UDP worker `i`: the DNS CPUs in turn (none when the
    /// split lists none).
    pub fn dns_cpu(&self, i: usize) -> Option<usize> {
        self.dns.get(i.checked_rem(self.dns.len())?).copied()
    }
}

/// The CPUs this process may run on (its affinity mask), ascending, as
/// they were when first asked: before `gtm serve` keeps its threads to the
/// CPUs the DNS workers leave, so that the split is made once, from what
/// the process was given.
pub fn allowed() -> io::Result<Vec<usize>> {
    static GIVEN: OnceLock<Vec<usize>> = OnceLock::new();
    if let Some(given) = GIVEN.get() {
        return Ok(given.clone());
    }
    let now = current()?;
    Ok(GIVEN.get_or_init(|| now).clone())
}

/// The calling thread's affinity mask, ascending.
fn current() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array for which zero bytes are the
    // empty set; sched_getaffinity writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: the index is below CPU_SETSIZE, the set's size in bits.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Keeps the calling thread (and the threads it starts from now on) to
/// `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: as in `allowed`; every index is checked against CPU_SETSIZE,
    // and pid 0 is the calling thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::other(format!("CPU {cpu} is out of range")));
        }
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    if unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CPU numbers as an operator reads them: `0-3, 6`.
fn list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dns_cpus_and_the_rest_of_the_allowed_ones() {
        let split = Split::within(&[2, 0], &[0, 1, 2, 3]).unwrap();
        assert_eq!(split.dns, vec![2, 0]);
        assert_eq!(split.rest, vec![1, 3]);
        assert_eq!(
            (split.dns_cpu(0), split.dns_cpu(1), split.dns_cpu(2)),
            (Some(2), Some(0), Some(2))
        );
        let none = Split {
            dns: Vec::new(),
            rest: vec![0],
        };
        assert_eq!(none.dns_cpu(0), None);
    }

    #[test]
    fn a_cpu_outside_the_allowed_set_is_refused_by_its_place() {
        let e = Split::within(&[1, 7], &[0, 1, 2, 3, 5]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node setting dns_cpus[1]: CPU 7 is not one this device may run on (it may run on 0-3, 5)"
        );
        let e = Split::within(&[1, 1], &[0, 1, 2]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node setting dns_cpus[1]: CPU 1 is listed twice"
        );
    }

    #[test]
    fn every_allowed_cpu_for_dns_is_refused() {
        let e = Split::within(&[1, 0], &[0, 1]).unwrap_err().to_string();
        assert!(
            e.starts_with("node setting dns_cpus: 0-1 takes every CPU"),
            "{e}"
        );
    }

    #[test]
    fn no_dns_cpus_pins_nothing() {
        assert!(matches!(Split::new(&[]), Ok(None)));
    }

    #[test]
    fn the_process_may_run_on_some_cpu() {
        assert!(!allowed().unwrap().is_empty());
    }
}
