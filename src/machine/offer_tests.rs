//! A configuration the receiving device's API parsed is offered to its
//! machine, which takes that parse for the same text instead of parsing
//! it again, and only for that text.

use std::collections::BTreeMap;

use super::*;
use crate::command::{Action, Actor, Command, Outcome};

fn text(ip: &str) -> String {
    format!(
        "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n\n\
         [[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"{ip}\" }}]\n"
    )
}

fn apply(machine: &GtmMachine, kv: &mut Map, text: &str) -> Config {
    let command = Command::new(
        Actor {
            user: "admin".into(),
            device: "gtm1".into(),
        },
        None,
        Action::ApplyConfig { text: text.into() },
    );
    let index = kv.len() as u64 + 1;
    let outcome = apply_for_test(machine, kv, index, &command);
    assert!(
        matches!(outcome, Outcome::Applied { changed: true, .. }),
        "{outcome:?}"
    );
    let current = machine.current(kv).unwrap_or_else(|e| panic!("{e}"));
    (*current.config).clone()
}

fn parsed(text: &str) -> Config {
    model::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

/// The offer is taken as it is: offered another text's parse under this
/// text, the machine commits the offered configuration (which it would
/// not, were it to parse the text itself).
#[test]
fn an_offered_parse_of_the_text_is_taken_not_parsed_again() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    let (one, two) = (text("192.0.2.1"), text("192.0.2.2"));
    let _offer = machine.offer(&one, parsed(&two));
    assert_eq!(apply(&machine, &mut kv, &one), parsed(&two));
    // Taken once: the next apply of another text parses its own.
    assert_eq!(
        apply(&machine, &mut kv, &text("192.0.2.3")),
        parsed(&text("192.0.2.3"))
    );
}

#[test]
fn an_offer_for_another_text_or_withdrawn_is_not_taken() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    let (one, two, three) = (text("192.0.2.1"), text("192.0.2.2"), text("192.0.2.3"));
    // Another text's offer is left for that text.
    let offer = machine.offer(&two, parsed(&three));
    assert_eq!(apply(&machine, &mut kv, &one), parsed(&one));
    // Dropped, it is withdrawn.
    drop(offer);
    assert_eq!(apply(&machine, &mut kv, &two), parsed(&two));
    // A dropped offer withdraws only its own: one made since stays.
    let old = machine.offer(&one, parsed(&three));
    let _new = machine.offer(&three, parsed(&one));
    drop(old);
    assert_eq!(apply(&machine, &mut kv, &three), parsed(&one));
}
