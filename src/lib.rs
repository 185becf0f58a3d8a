//! gtm: an authoritative DNS server whose answers follow the health of the
//! addresses behind each name.
pub mod model;
pub mod resolve;
pub mod dns;
pub mod geo;
pub mod engine;
pub mod api;
pub mod device;
pub mod cli;
