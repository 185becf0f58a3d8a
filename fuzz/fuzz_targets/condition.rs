//! Arbitrary text as a scenario condition: parse, evaluate, print.
//!
//! Asserts: an error points inside the text (column 1 to one past the
//! end); a parsed condition prints to text that parses back to the same
//! tree; evaluation is Kleene-monotonic: when a condition decides with some
//! checks unknown, deciding those checks cannot change the result.
#![no_main]

use std::hash::{DefaultHasher, Hash, Hasher};

use gtm_model::condition::{CheckRef, parse};
use libfuzzer_sys::fuzz_target;

/// A check's result under assignment `salt`: OK, Error or unknown.
fn result(salt: u64, check: &CheckRef) -> Option<bool> {
    let mut h = DefaultHasher::new();
    salt.hash(&mut h);
    check.hash(&mut h);
    match h.finish() % 3 {
        0 => Some(true),
        1 => Some(false),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let expr = match parse(text) {
        Ok(expr) => expr,
        Err(e) => {
            let end = text.chars().count() + 1;
            assert!(
                (1..=end).contains(&e.position),
                "error position {} outside 1..={end}: {e}",
                e.position
            );
            let _ = e.to_string();
            return;
        }
    };
    let printed = expr.to_string();
    match parse(&printed) {
        Ok(again) => assert_eq!(again, expr, "{text:?} printed as {printed:?}"),
        Err(e) => panic!("{text:?} printed as {printed:?}, which does not parse: {e}"),
    }
    assert!(!expr.refs().is_empty(), "{text:?} references no check");
    for salt in 0..4u64 {
        let partial = expr.eval(&|r| result(salt, r));
        if let Some(decided) = partial {
            for fill in [true, false] {
                let full = expr.eval(&|r| Some(result(salt, r).unwrap_or(fill)));
                assert_eq!(
                    full,
                    Some(decided),
                    "{text:?}: deciding unknown checks as {fill} changed the result"
                );
            }
        }
    }
});
