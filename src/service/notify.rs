//! The systemd notification protocol (sd_notify(3)): `READY=1` once DNS and
//! the API listen, `WATCHDOG=1` while the device is alive, `RELOADING=1`
//! around a reload and `STOPPING=1` on shutdown. A datagram on the Unix
//! socket named by `NOTIFY_SOCKET`; without it (not under systemd, or not
//! `Type=notify`) every call is a no-op. The std socket is enough: the
//! protocol is one datagram of text per state.

use std::{
    os::unix::net::{SocketAddr, UnixDatagram},
    time::Duration,
};

/// Where notifications go, read once from the environment.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From `NOTIFY_SOCKET` and `WATCHDOG_USEC` (with `WATCHDOG_PID`, when
    /// set, naming this process).
    pub fn from_env() -> Self {
        let target = std::env::var_os("NOTIFY_SOCKET").and_then(|path| {
            let addr = match address(path.as_encoded_bytes()) {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(socket = ?path, error = %e, "NOTIFY_SOCKET is not usable; the service manager is not told the device's state");
                    return None;
                }
            };
            match UnixDatagram::unbound() {
                Ok(socket) => Some((socket, addr)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open a socket for sd_notify");
                    None
                }
            }
        });
        let for_us = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none_or(|pid| pid == std::process::id());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|u| *u > 0 && for_us)
            .map(Duration::from_micros);
        Self { target, watchdog }
    }

    /// How often to send `WATCHDOG=1`: half the manager's timeout, as
    /// sd_watchdog_enabled(3) advises. `None` without a watchdog.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.target.as_ref()?;
        self.watchdog.map(|w| w / 2)
    }

    /// Sends `state` (e.g. `READY=1`); a failure is logged, never fatal: the
    /// device serves whether or not the manager hears it.
    pub fn notify(&self, state: &str) {
        if let Some((socket, addr)) = &self.target
            && let Err(e) = socket.send_to_addr(state.as_bytes(), addr)
        {
            tracing::warn!(state, error = %e, "sd_notify failed");
        }
    }

    /// `RELOADING=1` with the monotonic time systemd (253+) asks for.
    pub fn reloading(&self) {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec the call writes into.
        let usec = if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } == 0 {
            u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000
                + u64::try_from(now.tv_nsec).unwrap_or(0) / 1_000
        } else {
            0
        };
        self.notify(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
    }
}

/// A path, or an abstract socket name written `@name`.
fn address(path: &[u8]) -> std::io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    match path.split_first() {
        Some((b'@', name)) => SocketAddr::from_abstract_name(name),
        Some((b'/', _)) => SocketAddr::from_pathname(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path),
        ),
        _ => Err(std::io::Error::other(
            "neither an absolute path nor an abstract name (@...)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_socket_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier {
            target: Some((
                UnixDatagram::unbound().unwrap(),
                address(path.as_os_str().as_encoded_bytes()).unwrap(),
            )),
            watchdog: Some(Duration::from_secs(10)),
        };
        notifier.notify("READY=1");
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        assert_eq!(notifier.watchdog_interval(), Some(Duration::from_secs(5)));
    }

    #[test]
    fn refuses_a_relative_path() {
        assert!(address(b"notify").is_err());
        assert!(address(b"@abstract").is_ok());
    }
}
