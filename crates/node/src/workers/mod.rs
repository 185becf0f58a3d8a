//! The device's long-running background tasks that act on the cluster's
//! behalf: firing schedules ([`schedule`]), rotating the DNS cookie secret
//! ([`cookie_secret`]), making DNSSEC keys and signing again each window
//! ([`dnssec`]), transferring domains in from their primaries
//! ([`transfer_in`]). Each runs until the device's stop token is cancelled.
//!
//! Every long-running task of a device, these and the others (DNS, API,
//! probes, Raft, store), is a named worker in the device's [`registry`].

pub mod cookie_secret;
pub mod dnssec;
pub mod registry;
pub mod schedule;
pub mod transfer_in;

pub use registry::{Observed, WorkerInfo, WorkerState, Workers};
