//! The console's sessions: per device, in memory (docs/access.md).
//!
//! A browser logs in on one device and keeps talking to it, so a session
//! lives on that device only, and a restart ends it (the user logs in
//! again; nothing an operator set is lost). A session ends after
//! [`IDLE`] without a request, after [`LIFETIME`] in any case, and on
//! logout. Who the session acts as is looked up again on every request, so
//! removing a user or changing a role takes effect at once.
//!
//! Failed logins are counted per client address: after [`MAX_FAILURES`]
//! within [`FAILURE_WINDOW`] that address is refused until the window
//! passes, whatever it sends.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

use axum::http::{HeaderMap, header};

use super::{Role, SessionRef};

/// The session cookie's name.
pub const COOKIE: &str = "gtm_session";
/// A session unused this long ends.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// A session ends this long after its login, used or not.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Failed logins from one address before it is refused for a while.
pub const MAX_FAILURES: usize = 5;
/// How long failed logins count, and how long an address is refused.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Sessions kept at most on a device; the least recently used goes first.
const MAX_SESSIONS: usize = 10_000;

/// One logged-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// The user or token name it logged in as.
    pub name: String,
    /// The role it logged in with; the authentication layer takes the
    /// lower of this and the account's current role.
    pub role: Role,
    pub csrf: String,
    created: Instant,
    seen: Instant,
}

#[derive(Debug, Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, Session>>,
    failures: Mutex<HashMap<IpAddr, Vec<Instant>>>,
}

/// A login refused before the credentials were looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyFailures {
    /// When the address may try again.
    pub retry_after: Duration,
}

impl Sessions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a session for a principal whose credentials were checked;
    /// returns its id (the cookie's value) and CSRF token.
    pub fn open(&self, name: &str, role: Role) -> std::io::Result<SessionRef> {
        let id = gtm_model::random::hex(&gtm_model::random::bytes::<32>()?);
        let csrf = gtm_model::random::hex(&gtm_model::random::bytes::<32>()?);
        let now = Instant::now();
        let mut open = lock(&self.open);
        open.retain(|_, s| live(s, now));
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.seen)
                .map(|(k, _)| k.clone())
        {
            open.remove(&oldest);
        }
        open.insert(
            id.clone(),
            Session {
                name: name.to_string(),
                role,
                csrf: csrf.clone(),
                created: now,
                seen: now,
            },
        );
        Ok(SessionRef { id, csrf })
    }

    /// The live session with this id, marked as used now.
    pub fn get(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut open = lock(&self.open);
        let session = open.get_mut(id)?;
        if !live(session, now) {
            open.remove(id);
            return None;
        }
        session.seen = now;
        Some(session.clone())
    }

    /// The live session with this id, not marked as used: for what a page
    /// does by itself (a live update), which must not keep an unattended
    /// session from its idle timeout.
    pub fn peek(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut open = lock(&self.open);
        let session = open.get(id)?;
        if !live(session, now) {
            open.remove(id);
            return None;
        }
        Some(session.clone())
    }

    pub fn close(&self, id: &str) {
        lock(&self.open).remove(id);
    }

    /// Refuses an address that failed too often lately.
    pub fn check_address(&self, client: IpAddr) -> Result<(), TooManyFailures> {
        let now = Instant::now();
        let mut failures = lock(&self.failures);
        let Some(times) = failures.get_mut(&client) else {
            return Ok(());
        };
        times.retain(|t| now.duration_since(*t) < FAILURE_WINDOW);
        if times.len() < MAX_FAILURES {
            return Ok(());
        }
        let oldest = times.first().copied().unwrap_or(now);
        Err(TooManyFailures {
            retry_after: FAILURE_WINDOW.saturating_sub(now.duration_since(oldest)),
        })
    }

    pub fn record_failure(&self, client: IpAddr) {
        let now = Instant::now();
        let mut failures = lock(&self.failures);
        // Bounded: forget addresses whose failures have all expired.
        if failures.len() >= MAX_SESSIONS {
            failures.retain(|_, v| v.iter().any(|t| now.duration_since(*t) < FAILURE_WINDOW));
        }
        let times = failures.entry(client).or_default();
        times.push(now);
        if times.len() > MAX_FAILURES {
            times.remove(0);
        }
    }

    pub fn record_success(&self, client: IpAddr) {
        lock(&self.failures).remove(&client);
    }
}

fn live(s: &Session, now: Instant) -> bool {
    now.duration_since(s.seen) < IDLE && now.duration_since(s.created) < LIFETIME
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding it cannot happen (no code under the lock
    // panics); take the data anyway rather than fail every login after.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `Set-Cookie` value that gives a browser its session: never readable
/// by scripts, never sent by another site's page, `Secure` under TLS.
pub fn set_cookie(id: &str, secure: bool) -> String {
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict{}; Max-Age={}",
        if secure { "; Secure" } else { "" },
        LIFETIME.as_secs()
    )
}

/// The `Set-Cookie` value that makes a browser forget its session.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Strict{}; Max-Age=0",
        if secure { "; Secure" } else { "" }
    )
}

/// The session id a request's `Cookie` headers carry, if any.
pub fn cookie_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_id_until_closed() {
        let sessions = Sessions::new();
        let s = sessions.open("ann", Role::Operator).expect("open");
        let got = sessions.get(&s.id).expect("live");
        assert_eq!((got.name.as_str(), got.role), ("ann", Role::Operator));
        assert_eq!(got.csrf, s.csrf);
        assert_ne!(s.id, s.csrf);
        assert_eq!(sessions.peek(&s.id).map(|p| p.name), Some("ann".into()));
        sessions.close(&s.id);
        assert!(sessions.get(&s.id).is_none());
        assert!(sessions.peek(&s.id).is_none());
        assert!(sessions.get("not-a-session").is_none());
    }

    #[test]
    fn an_address_is_refused_after_too_many_failures_and_others_are_not() {
        let sessions = Sessions::new();
        let (bad, good): (IpAddr, IpAddr) = ("127.0.0.9".parse().unwrap(), "::1".parse().unwrap());
        for _ in 0..MAX_FAILURES {
            assert!(sessions.check_address(bad).is_ok());
            sessions.record_failure(bad);
        }
        let refused = sessions.check_address(bad).expect_err("refused");
        assert!(refused.retry_after <= FAILURE_WINDOW && refused.retry_after > Duration::ZERO);
        assert!(sessions.check_address(good).is_ok());
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_under_tls() {
        let c = set_cookie("abc", true);
        assert!(c.starts_with("gtm_session=abc;"));
        for part in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
            assert!(c.contains(part), "{c} lacks {part}");
        }
        assert!(!set_cookie("abc", false).contains("Secure"));
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; gtm_session=xyz; b=2".parse().unwrap());
        assert_eq!(cookie_of(&headers).as_deref(), Some("xyz"));
        headers.insert(header::COOKIE, "gtm_session=".parse().unwrap());
        assert_eq!(cookie_of(&headers), None);
    }
}
