//! A TCP stream of length-prefixed DNS messages, answered as a device's TCP
//! listener answers them (`gtm_dns::tcp`).
//!
//! This target cuts the input into frames the way the stream does (two
//! bytes of length, then the message; several messages per connection; an
//! incomplete last frame ends it) and hands each message to
//! [`tcp::reply`](gtm_dns::tcp::reply), which the listener calls for every
//! complete message.
//!
//! Input: one selector byte (the client address), then the stream.
//! Asserts: each reply is framed (its length prefix matches), its response
//! decodes strictly, answers the message's id, fits TCP, and keeps the
//! question of a message whose question reads.
#![no_main]

use gtm_dns::tcp;
use gtm_fuzz::{device, hex, source, strict_decode};
use libfuzzer_sys::fuzz_target;

/// Messages read from one stream at most: enough for pipelining.
const MAX_FRAMES: usize = 16;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, mut stream)) = data.split_first() else {
        return;
    };
    let handler = &device().handler;
    let src = source(selector);
    for _ in 0..MAX_FRAMES {
        let Some((len, rest)) = stream.split_first_chunk::<2>() else {
            return;
        };
        let len = usize::from(u16::from_be_bytes(*len));
        let Some(message) = rest.get(..len) else {
            return;
        };
        stream = &rest[len..];
        let Some(framed) = tcp::reply(handler, message, src) else {
            // Nothing is sent back only to a response or a short message.
            assert!(
                message.len() < 12 || message[2] & 0x80 != 0,
                "no reply to a query: {}",
                hex(message)
            );
            continue;
        };
        let (prefix, response) = framed.split_at(2);
        assert_eq!(
            usize::from(u16::from_be_bytes([prefix[0], prefix[1]])),
            response.len(),
            "length prefix"
        );
        strict_decode(response).unwrap_or_else(|e| {
            panic!(
                "response does not decode: {e}\nmessage  {}\nresponse {}",
                hex(message),
                hex(response)
            )
        });
        assert_eq!(response.get(..2), message.get(..2), "response id differs");
    }
});
