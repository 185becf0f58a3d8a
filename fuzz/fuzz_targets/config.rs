//! Arbitrary text as a configuration: parsed, compiled, and when it
//! compiles, installed on a device and asked for its records.
//!
//! Asserts: compile OK ⇒ the device installs it (the snapshot builds, no
//! panic), and every record's answer, by either path, with or without
//! EDNS, decodes strictly and fits the client's limit. And for any text
//! that parses, an edit of its first domain's records written as an edit
//! of the text (`model::text::write`, the layout read from the text)
//! parses to the edited configuration, and the layout read back from the
//! new text is the one the write gave (every device writes the same).
//! And any text parses the same cut into the smallest pieces and record
//! batches as whole.
#![no_main]

use gtm_dns::{fast, handler::{DnsState, Handler, answer_udp}, snapshot::{Draw, Snapshot}, wire};
use gtm_engine::{Engine, Prepared};
use gtm_geo::Geo;
use gtm_model::{Config, compile, layout::Layout, parse, text::{Before, write}};
use std::sync::Arc;
use gtm_fuzz::{hex, query, source, strict_decode};
use libfuzzer_sys::fuzz_target;

/// Records asked per configuration at most: the first ones.
const ASKED: usize = 16;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Cut into pieces and record batches as small as can be, a text
    // parses as it does whole.
    let [fine, whole] = gtm_model::parse_finely_and_whole(text);
    match (&fine, &whole) {
        (Ok(a), Ok(b)) => assert!(a == b, "parsed in pieces, not as whole: {}", hex(data)),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "in pieces {}, whole {}: {}",
            fine.is_ok(),
            whole.is_ok(),
            hex(data)
        ),
    }
    let Ok(config) = parse(text) else {
        return;
    };
    edit_as_written(text, &config);
    let Ok(compiled) = compile(&config) else {
        return;
    };
    let state = DnsState::new(Snapshot::default(), Geo::none(), 1232);
    let prepared = match Prepared::new(1, &Default::default(), config, &state) {
        Ok(prepared) => prepared,
        Err(e) => panic!("compiled once, refused at install: {e}"),
    };
    let engine = Engine::new("fuzz", prepared, state, None);
    let handler = Handler {
        state: engine.dns().clone(),
    };
    let src = source(0);
    let names = compiled
        .zones
        .iter()
        .flat_map(|z| z.records.iter().map(|r| (r.owner_name(), r.kind)));
    for (owner, kind) in names.take(ASKED) {
        let rtype = gtm_dns::snapshot::wire_type(kind);
        for edns in [true, false] {
            let Ok(bytes) = query(owner.clone(), rtype, edns).to_vec() else {
                continue;
            };
            let limit = usize::from(
                handler
                    .state
                    .udp_limit(wire::edns(&bytes).ok().flatten().as_ref()),
            );
            let mut out = Vec::new();
            let mut responses = Vec::new();
            if fast::answer(
                &handler.state,
                &bytes,
                src.ip(),
                &mut Draw::new(1),
                &mut out,
            ) {
                responses.push(("fast", out));
            }
            if let Some(general) = answer_udp(&handler, &bytes, src, &mut Draw::new(1)) {
                responses.push(("general", general));
            }
            for (path, response) in responses {
                if let Err(e) = strict_decode(&response) {
                    panic!(
                        "{path} path: the answer of {owner} {rtype} does not decode: {e}\nquery    {}\nresponse {}",
                        hex(&bytes),
                        hex(&response)
                    );
                }
                assert!(
                    response.len() <= limit,
                    "{path} path: {owner} {rtype}: {} bytes over the limit {limit}",
                    response.len()
                );
            }
        }
    }
});

/// Replaces the first domain's first record (its TTL changed) and appends
/// a copy of it, each written as an edit of `text`.
fn edit_as_written(text: &str, config: &Config) {
    let Some(layout) = Layout::of(text, config) else {
        return;
    };
    let Some(first) = config.domains.first().and_then(|d| d.records.first()) else {
        return;
    };
    let mut changed = (**first).clone();
    changed.ttl = Some(changed.ttl.map_or(1, |t| t.wrapping_add(1)));
    let mut next = config.clone();
    let domain = Arc::make_mut(&mut next.domains[0]);
    let name = domain.name.clone();
    domain.records[0] = Arc::new(changed.clone());
    changed.name = "fuzz-edit".into();
    domain.records.push(Arc::new(changed));
    let pieces = [gtm_cluster::parts::Part::plain(text.as_bytes())];
    let before = Before {
        text: &pieces,
        layout: &layout,
        config,
        touched: Some(&name),
    };
    let Ok((splice, written)) = write(&next, Some(before)) else {
        return;
    };
    let mut new = text.as_bytes()[..splice.front].to_vec();
    new.extend_from_slice(&splice.middle);
    new.extend_from_slice(&text.as_bytes()[text.len() - splice.back..]);
    let new = String::from_utf8(new).expect("an edit of a text is text");
    match parse(&new) {
        Ok(parsed) => assert!(parsed == next, "the edit parses to another configuration:\n{new}"),
        Err(e) => panic!("the edit does not parse: {e}\n{new}"),
    }
    assert_eq!(Layout::of(&new, &next), Some(written), "{new}");
}