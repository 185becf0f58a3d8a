//! Authoritative DNS over UDP and TCP (spec §3).
pub mod fast;
pub mod handler;
pub mod lookup;
pub mod server;
pub mod snapshot;
pub mod udp;
pub mod wire;
