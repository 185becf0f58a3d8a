//! The device's long-running background tasks that act on the cluster's
//! behalf: firing schedules ([`schedule`]), rotating the DNS cookie secret
//! ([`cookie_secret`]), making DNSSEC keys and signing again each window
//! ([`dnssec`]). Each runs until the device's stop token is cancelled.

pub mod cookie_secret;
pub mod dnssec;
pub mod schedule;
