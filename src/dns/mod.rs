//! Authoritative DNS over UDP and TCP (spec §3).
pub mod fast;
pub mod handler;
pub mod server;
pub mod udp;
pub mod lookup;
pub mod snapshot;
pub mod wire;
