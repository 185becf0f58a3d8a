//! gtm: an authoritative DNS server whose answers follow the health of the
//! addresses behind each name.
pub mod access;
pub mod addr;
pub mod api;
pub mod chunked;
pub mod cli;
pub mod command;
pub mod console;
pub mod cpus;
pub mod device;
pub mod dns;
pub mod dnssec;
pub mod ends;
pub mod engine;
pub mod geo;
pub mod health;
pub mod identity;
pub mod machine;
pub mod metrics;
pub mod model;

pub mod peers;
pub mod random;
pub mod replication;
pub mod resolve;
pub mod service;
pub mod tls;
pub mod when;
pub mod workers;
