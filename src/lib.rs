//! gtm: an authoritative DNS server whose answers follow the health of the
//! addresses behind each name.
pub mod cli;
pub mod device;

pub mod service;
