//! DNS cookies (RFC 7873) with server cookies in the interoperable format
//! of RFC 9018, and the EDNS TCP keepalive option (RFC 7828).
//!
//! A query carrying a client cookie gets a server cookie back: version 1,
//! three reserved bytes, the time (seconds, 32 bits), and SipHash-2-4 of
//! the client cookie, those 8 bytes and the client's address, keyed with the
//! cluster's server secret. The secret is replicated state
//! (`gtm_node::machine::cookies`), so a cookie made by one device is valid
//! on every device; a rotation keeps the previous secret valid. A client
//! showing a valid server cookie proves it receives answers at its address,
//! so the rate limit ([`super::rrl`]) lets it through. Cookies are never
//! required (no BADCOOKIE): a query without one, or with a stale one, is
//! answered as usual, with a fresh server cookie.
//!
//! The secret is never logged and never in `Debug` output.

use std::{
    net::IpAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use arc_swap::ArcSwapOption;
use hickory_server::proto::{op::Edns, rr::rdata::opt::EdnsOption};
use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher24;

use super::wire::{COOKIE_CODE, EdnsInfo, KEEPALIVE_CODE, QueryCookie};
use gtm_model::metrics::Text;

/// A server cookie older than this (seconds) is no longer valid.
pub const MAX_AGE: u32 = 3600;
/// A server cookie from further in the future than this (seconds, another
/// device's clock) is not valid.
pub const MAX_AHEAD: u32 = 300;
/// A valid server cookie younger than this (seconds) is sent back as it
/// is; an older one is replaced (RFC 9018 §4.3).
pub const REISSUE_AFTER: u32 = 1800;
/// Bytes of a server cookie we make.
pub const SERVER_LEN: usize = 16;

/// A server secret: 16 random bytes.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secret(pub [u8; 16]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    /// A new random secret, or an error when the system has no randomness.
    pub fn generate() -> std::io::Result<Self> {
        gtm_model::random::bytes::<16>().map(Self)
    }
}

/// The secrets a device validates with: the current one, which makes new
/// cookies, and the one it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secrets {
    pub current: Secret,
    pub previous: Option<Secret>,
    /// When the current one was made (ms since the epoch).
    pub created_ms: u64,
}

/// The server cookie for `client` at `ip` and `time` with `secret`
/// (RFC 9018 §4.2).
pub fn server_cookie(secret: &Secret, client: &[u8; 8], ip: IpAddr, time: u32) -> [u8; 16] {
    let mut input = [0u8; 8 + 8 + 16];
    input[..8].copy_from_slice(client);
    input[8] = 1; // version
    input[12..16].copy_from_slice(&time.to_be_bytes());
    let len = match ip.to_canonical() {
        IpAddr::V4(v4) => {
            input[16..20].copy_from_slice(&v4.octets());
            20
        }
        IpAddr::V6(v6) => {
            input[16..32].copy_from_slice(&v6.octets());
            32
        }
    };
    let hash = SipHasher24::new_with_key(&secret.0).hash(&input[..len]);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&input[8..16]);
    out[8..].copy_from_slice(&hash.to_le_bytes());
    out
}

/// How a query's cookie was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A client cookie alone.
    ClientOnly,
    /// A server cookie made with the current secret, `fresh` when young
    /// enough to be sent back as it is.
    Valid { fresh: bool },
    /// A server cookie made with the previous secret.
    ValidPrevious,
    /// A server cookie that is not ours, too old, or from a secret gone.
    Invalid,
}

/// The cluster's cookie secrets on this device, and what cookies were seen.
#[derive(Debug, Default)]
pub struct Cookies {
    secrets: ArcSwapOption<Secrets>,
    client_only: AtomicU64,
    valid: AtomicU64,
    invalid: AtomicU64,
}

/// Seconds since the epoch, as RFC 9018's 32-bit timestamp.
pub fn unix_seconds() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

impl Cookies {
    /// Installs the secrets the replicated state holds (a no-op when they
    /// did not change).
    pub fn install(&self, secrets: Option<Secrets>) {
        if self.secrets.load().as_deref() != secrets.as_ref() {
            self.secrets.store(secrets.map(Arc::new));
        }
    }

    /// When the current secret was made (ms since the epoch), if there is one.
    pub fn created_ms(&self) -> Option<u64> {
        self.secrets.load().as_ref().map(|s| s.created_ms)
    }

    /// Checks a query's cookie from `ip` at `now` (seconds).
    pub fn check(&self, cookie: &QueryCookie, ip: IpAddr, now: u32) -> Check {
        let server = cookie.server();
        if server.is_empty() {
            return Check::ClientOnly;
        }
        let guard = self.secrets.load();
        let Some(secrets) = guard.as_deref() else {
            return Check::Invalid;
        };
        let Some(time) = server
            .get(4..8)
            .and_then(|t| <[u8; 4]>::try_from(t).ok())
            .map(u32::from_be_bytes)
        else {
            return Check::Invalid;
        };
        let age = now.wrapping_sub(time) as i32;
        if server.len() != SERVER_LEN
            || server.first() != Some(&1)
            || age > MAX_AGE as i32
            || age < -(MAX_AHEAD as i32)
        {
            return Check::Invalid;
        }
        let matches = |secret: &Secret| {
            let made = server_cookie(secret, &cookie.client, ip, time);
            gtm_cluster::constant_time_eq(&made, server)
        };
        if matches(&secrets.current) {
            Check::Valid {
                fresh: age < REISSUE_AFTER as i32,
            }
        } else if secrets.previous.as_ref().is_some_and(matches) {
            Check::ValidPrevious
        } else {
            Check::Invalid
        }
    }

    /// Whether a query showing `cookie` from `ip` shows a valid server
    /// cookie (what exempts it from the rate limit). Counts nothing.
    pub fn valid(&self, cookie: &QueryCookie, ip: IpAddr) -> bool {
        matches!(
            self.check(cookie, ip, unix_seconds()),
            Check::Valid { .. } | Check::ValidPrevious
        )
    }

    /// The server cookie to answer `cookie` from `ip` with, counting what
    /// was shown; `None` while the cluster has no secret yet.
    pub fn answer(&self, cookie: &QueryCookie, ip: IpAddr) -> Option<[u8; 16]> {
        let now = unix_seconds();
        let check = self.check(cookie, ip, now);
        match check {
            Check::ClientOnly => &self.client_only,
            Check::Valid { .. } | Check::ValidPrevious => &self.valid,
            Check::Invalid => &self.invalid,
        }
        .fetch_add(1, Relaxed);
        if check == (Check::Valid { fresh: true }) {
            return cookie.server().try_into().ok();
        }
        let guard = self.secrets.load();
        let secrets = guard.as_deref()?;
        Some(server_cookie(&secrets.current, &cookie.client, ip, now))
    }

    pub fn write(&self, out: &mut Text) {
        out.family(
            "gtm_dns_cookies_total",
            "counter",
            "Queries with a DNS cookie, by what they showed: a client cookie only, a valid server cookie (made by any device of the cluster), or an invalid one",
        );
        for (shown, n) in [
            ("client_only", &self.client_only),
            ("valid", &self.valid),
            ("invalid", &self.invalid),
        ] {
            out.sample(
                "gtm_dns_cookies_total",
                &[("server_cookie", shown)],
                n.load(Relaxed) as f64,
            );
        }
        out.family(
            "gtm_dns_cookie_secret_created_seconds",
            "gauge",
            "When the cluster's current server cookie secret was made (absent before the first)",
        );
        if let Some(ms) = self.created_ms() {
            out.sample(
                "gtm_dns_cookie_secret_created_seconds",
                &[],
                (ms / 1000) as f64,
            );
        }
    }
}

/// Appends a COOKIE option (client and server cookie) to an OPT's data.
pub fn push_cookie(out: &mut Vec<u8>, client: &[u8; 8], server: &[u8; 16]) {
    out.extend_from_slice(&COOKIE_CODE.to_be_bytes());
    out.extend_from_slice(&((8 + SERVER_LEN) as u16).to_be_bytes());
    out.extend_from_slice(client);
    out.extend_from_slice(server);
}

/// The bytes a COOKIE option adds to a response.
pub const COOKIE_OPTION_LEN: usize = 4 + 8 + SERVER_LEN;

/// The general path's options: the server cookie for a query with a
/// cookie, and over TCP, for a query asking, the idle timeout the listener
/// really uses (RFC 7828 §3.3.2; never over UDP).
pub fn add_options(
    cookies: &Cookies,
    edns: Option<&mut Edns>,
    info: Option<&EdnsInfo>,
    ip: IpAddr,
    tcp: bool,
) {
    let (Some(edns), Some(info)) = (edns, info) else {
        return;
    };
    if let Some(cookie) = &info.cookie
        && let Some(server) = cookies.answer(cookie, ip)
    {
        let mut data = Vec::with_capacity(8 + SERVER_LEN);
        data.extend_from_slice(&cookie.client);
        data.extend_from_slice(&server);
        edns.options_mut()
            .insert(EdnsOption::Unknown(COOKIE_CODE, data));
    }
    if tcp && info.keepalive {
        let units = u16::try_from(super::limits::IDLE.as_millis() / 100).unwrap_or(u16::MAX);
        edns.options_mut().insert(EdnsOption::Unknown(
            KEEPALIVE_CODE,
            units.to_be_bytes().to_vec(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{WireError, read_keepalive};

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn rfc9018_appendix_a_vector() {
        // A.1: client 198.51.100.100, secret e5e973e5…, Wed Jun 5 10:53:05
        // UTC 2019.
        let secret = Secret(hex("e5e973e5a6b2a43f48e7dc849e37bfcf").try_into().unwrap());
        let client: [u8; 8] = hex("2464c4abcf10c957").try_into().unwrap();
        let made = server_cookie(
            &secret,
            &client,
            "198.51.100.100".parse().unwrap(),
            1559731985,
        );
        assert_eq!(made.to_vec(), hex("010000005cf79f111f8130c3eee29480"));
    }

    #[test]
    fn cookies_validate_with_current_or_previous_secret_in_their_window() {
        let (a, b) = (Secret([1; 16]), Secret([2; 16]));
        let cookies = Cookies::default();
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let client = [9u8; 8];
        let now = 2_000_000_000;
        let query = |server: &[u8]| {
            let mut data = client.to_vec();
            data.extend_from_slice(server);
            QueryCookie::read(&data).unwrap()
        };
        // No secret yet: nothing to answer with.
        assert_eq!(cookies.answer(&query(&[]), ip), None);
        cookies.install(Some(Secrets {
            current: a,
            previous: None,
            created_ms: 0,
        }));
        assert_eq!(cookies.check(&query(&[]), ip, now), Check::ClientOnly);
        let made = server_cookie(&a, &client, ip, now);
        assert_eq!(
            cookies.check(&query(&made), ip, now + 10),
            Check::Valid { fresh: true }
        );
        assert_eq!(
            cookies.check(&query(&made), ip, now + REISSUE_AFTER + 1),
            Check::Valid { fresh: false }
        );
        assert_eq!(
            cookies.check(&query(&made), ip, now + MAX_AGE + 1),
            Check::Invalid
        );
        assert_eq!(
            cookies.check(&query(&made), ip, now - MAX_AHEAD - 1),
            Check::Invalid
        );
        let elsewhere: IpAddr = "192.0.2.8".parse().unwrap();
        assert_eq!(cookies.check(&query(&made), elsewhere, now), Check::Invalid);
        // Rotated: the previous secret still validates, the one before not.
        cookies.install(Some(Secrets {
            current: b,
            previous: Some(a),
            created_ms: 1,
        }));
        assert_eq!(cookies.check(&query(&made), ip, now), Check::ValidPrevious);
        cookies.install(Some(Secrets {
            current: Secret([3; 16]),
            previous: Some(b),
            created_ms: 2,
        }));
        assert_eq!(cookies.check(&query(&made), ip, now), Check::Invalid);
        assert!(format!("{:?}", Secret([7; 16])).contains("redacted"));
    }

    #[test]
    fn cookie_lengths_of_rfc7873() {
        for len in [0, 1, 7, 9, 15, 41] {
            assert_eq!(
                QueryCookie::read(&vec![0; len]).unwrap_err(),
                WireError::BadCookie,
                "{len}"
            );
        }
        for len in [8, 16, 24, 40] {
            assert_eq!(
                QueryCookie::read(&vec![0; len]).unwrap().server().len(),
                len - 8
            );
        }
        assert!(read_keepalive(&[]).is_ok());
        assert!(read_keepalive(&[0, 5]).is_ok());
        assert_eq!(read_keepalive(&[0]), Err(WireError::BadKeepalive));
    }
}
