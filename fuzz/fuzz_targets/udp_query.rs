//! Arbitrary bytes as a UDP query, answered by the fast path and by the
//! general path as a device does (fast first, general when it declines).
//!
//! Input: one selector byte (the client address and the balance draw), then
//! the query. Asserts: every response decodes strictly (no trailing bytes),
//! answers the query's id, fits the client's UDP limit; when the fast path
//! answers, the general path gives the same message with the same draw.
#![no_main]

use gtm_dns::{fast, handler::answer_udp, snapshot::Draw, wire};
use gtm_fuzz::{device, hex, source, strict_decode};
use hickory_server::proto::op::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, query)) = data.split_first() else {
        return;
    };
    let device = device();
    let state = &device.handler.state;
    let src = source(selector);
    let seed = u64::from(selector >> 3);
    let limit = usize::from(state.udp_limit(wire::edns(query).ok().flatten().as_ref()));

    let mut fast_out = Vec::new();
    let took = fast::answer(state, query, src.ip(), &mut Draw::new(seed), &mut fast_out);
    let general = answer_udp(&device.handler, query, src, &mut Draw::new(seed));

    let check = |path: &str, bytes: &[u8]| -> Option<Message> {
        let message = match strict_decode(bytes) {
            Ok(message) => message,
            Err(e) => panic!(
                "{path} response does not decode: {e}\nsource {src}\nquery    {}\nresponse {}",
                hex(query),
                hex(bytes)
            ),
        };
        assert!(
            bytes.len() <= limit,
            "{path} response of {} bytes over the client's limit {limit}\nquery {}",
            bytes.len(),
            hex(query)
        );
        assert_eq!(
            bytes.get(..2),
            query.get(..2),
            "{path} response id differs\nquery {}",
            hex(query)
        );
        Some(message)
    };

    let general_msg = general.as_deref().map(|g| check("general path", g));
    if took {
        let Some(f) = check("fast path", &fast_out) else {
            return;
        };
        let g = match general_msg {
            Some(Some(g)) => g,
            // A known defect of the general path: nothing to compare.
            Some(None) => return,
            None => panic!(
                "the fast path answered, the general path did not\nquery {}",
                hex(query)
            ),
        };
        let ctx = || format!("source {src} seed {seed}\nquery {}", hex(query));
        assert_eq!(f.metadata, g.metadata, "header differs\n{}", ctx());
        assert_eq!(f.queries, g.queries, "question differs\n{}", ctx());
        assert_eq!(f.answers, g.answers, "answers differ\n{}", ctx());
        assert_eq!(f.authorities, g.authorities, "authority differs\n{}", ctx());
        assert_eq!(
            f.additionals,
            g.additionals,
            "additional differs\n{}",
            ctx()
        );
        assert_eq!(
            format!("{:?}", f.edns),
            format!("{:?}", g.edns),
            "EDNS differs\n{}",
            ctx()
        );
    }
});
