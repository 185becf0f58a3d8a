//! Arbitrary bytes as a peer report (the JSON body of
//! `POST /cluster/v1/report`), decoded with the route's type and taken in
//! as the device does.
//!
//! Asserts: decoding and taking in never panic; a decoded report prints
//! back to JSON that decodes again; the merged peer events stay in
//! increasing sequence order whatever the reports carry.
#![no_main]

use gtm_node::peers::{Peers, Report};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(report) = serde_json::from_slice::<Report>(data) else {
        return;
    };
    let json = serde_json::to_vec(&report).expect("a decoded report encodes");
    if let Err(e) = serde_json::from_slice::<Report>(&json) {
        panic!("a report does not decode after encoding: {e}");
    }
    let peers = Peers::default();
    // Twice: the second repeats every event, which must be dropped.
    peers.receive(report.clone());
    peers.receive(report);
    // One reporting device: one log, in strictly increasing order.
    let events = peers.events();
    for pair in events.windows(2) {
        assert!(
            pair[0].seq < pair[1].seq,
            "event {} kept after {}",
            pair[1].seq,
            pair[0].seq
        );
    }
});
