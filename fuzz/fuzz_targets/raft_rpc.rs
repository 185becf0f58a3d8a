//! Arbitrary bytes as a Raft RPC body from a peer: the append, vote and
//! snapshot requests a device's `/cluster/v1/` routes decode, and the
//! replies its client decodes, each with the types the device uses.
//!
//! Input: one selector byte (which body), then the body. Asserts: decoding
//! never panics nor exhausts memory; what decodes encodes again, and that
//! encoding is stable (decoding and encoding it again gives the same bytes).
#![no_main]

use gtm_cluster::{RpcBody, decode_rpc_body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let kind = RpcBody::ALL[usize::from(selector) % RpcBody::ALL.len()];
    let Ok(encoded) = decode_rpc_body(kind, body) else {
        return;
    };
    match decode_rpc_body(kind, &encoded) {
        Ok(again) => assert_eq!(again, encoded, "{kind:?}: the encoding is not stable"),
        Err(e) => panic!("{kind:?}: a re-encoded body does not decode: {e}"),
    }
});
