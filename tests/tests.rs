//! gtm's integration tests: one binary (one link step), real sockets on
//! loopback, real devices started in-process on port 0.

mod support;

mod access;
mod alerts;
mod api;
mod backends;
mod chaos;
mod cli;
mod cluster;
mod config_files;
mod console;
mod differential;
mod dns;
mod dnssec;
mod dnstap;
mod explain;
mod geo;
mod geoip_download;
mod health;
mod history;
mod input;
mod inputs;
mod integrations;
mod judge;
mod node_file;
mod operator;
mod operator_cluster;
mod probes;
mod reading;
mod records;
mod rrl;
mod schedule;
mod service;
mod storage;
mod test_now;
mod topology;
mod transport;
mod typed_json;
mod valid;
mod versions;
mod views;
mod wire;
mod writes;
mod xfr;
mod zonefile;
