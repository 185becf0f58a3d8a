//! A device in its cluster: the commands that change replicated state
//! ([`command`]), the state machine that applies them ([`machine`]),
//! proposing and installing them ([`replication`]), reports between devices
//! outside Raft ([`peers`]), an operator action judged on every device
//! ([`judge`]), the background workers ([`workers`]), the
//! device's identity on disk ([`identity`]), users, tokens and sessions
//! ([`access`]), TLS ([`tls`]) and the RFC 2136 updates the DNS layer
//! hands up ([`updates`]).

pub mod access;
pub mod command;
pub mod identity;
pub mod judge;
pub mod machine;
pub mod peers;
pub mod replication;
pub mod tls;
pub mod updates;
pub mod workers;
