//! What devices tell each other outside the Raft log (spec §4): their check
//! states, record states and new events, every few seconds.

pub mod combine;
