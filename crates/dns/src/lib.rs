//! Authoritative DNS over UDP and TCP (spec §3), with DNSSEC signing
//! ([`dnssec`]) and zone transfers ([`xfr`]).

pub mod chunked;
pub mod cpus;
pub mod dnssec;
pub mod dnstap;
pub mod ede;

pub mod cookies;
pub mod counters;
pub mod fast;
pub mod handler;
pub mod identity;
pub mod limits;
pub mod lookup;
pub mod malformed;
pub mod metrics;
pub mod notify;
pub mod notify_in;
mod referral;
pub mod resolved;
pub mod rrl;
pub mod server;
pub mod snapshot;
pub mod tcp;
pub mod tsig;
pub mod udp;
pub mod update;
pub mod updater;
pub mod wire;
pub mod xfr;
pub mod xfr_in;
pub mod xot;
pub mod zonefile;

#[cfg(test)]
mod tests;
