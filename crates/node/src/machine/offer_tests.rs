//! A configuration the receiving device's API parsed is offered to its
//! machine, which takes that parse for the same text instead of parsing
//! it again, and only for that text.

use std::collections::BTreeMap;

use super::*;
use crate::command::{Action, Command, Outcome};
use gtm_model::actor::Actor;

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

fn apply_command(text: &str) -> Command {
    Command::new(
        Actor {
            user: "admin".into(),
            device: "gtm2".into(),
        },
        None,
        Action::ApplyConfig { text: text.into() },
    )
}

/// What the command at the next index applies, with a parse put in place
/// as `prepare` leaves it: `sent` arriving for that index.
fn apply_prepared(
    machine: &GtmMachine,
    kv: &mut Map,
    text: &str,
    at: u64,
    sent: Option<(u64, Config)>,
) -> Config {
    let index = kv.len() as u64 + 1;
    let (done, parsed) = std::sync::mpsc::channel();
    if let Some((hash, config)) = sent {
        done.send((hash, Ok(config))).unwrap();
    }
    drop(done);
    *machine.preparing.lock().unwrap() = Some(Preparing {
        index: index + at,
        parsed,
    });
    let outcome = apply_for_test(machine, kv, index, &apply_command(text));
    assert!(
        matches!(outcome, Outcome::Applied { changed: true, .. }),
        "{outcome:?}"
    );
    // Taken or dropped at its index; one for a later index stays.
    assert_eq!(machine.preparing.lock().unwrap().is_some(), at > 0);
    (*machine.current(kv).unwrap().config).clone()
}

/// A parse started when the command was appended is taken as it arrives
/// for that index and text (here: another text's parse under this text's
/// hash, which the machine commits as it is); for another text, another
/// index, or when none arrives, the text is parsed.
#[test]
fn a_parse_prepared_for_the_index_and_text_is_taken() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    let [one, two, three, four] = ["1", "2", "3", "4"].map(|n| text(&format!("192.0.2.{n}")));
    let hash = |t: &str| text_hash(t.as_bytes());
    assert_eq!(
        apply_prepared(&machine, &mut kv, &one, 0, Some((hash(&one), parsed(&two)))),
        parsed(&two)
    );
    // Another text's parse, nothing sent, or another index: parsed here.
    assert_eq!(
        apply_prepared(
            &machine,
            &mut kv,
            &three,
            0,
            Some((hash(&four), parsed(&one)))
        ),
        parsed(&three)
    );
    assert_eq!(
        apply_prepared(&machine, &mut kv, &one, 0, None),
        parsed(&one)
    );
    assert_eq!(
        apply_prepared(
            &machine,
            &mut kv,
            &four,
            1,
            Some((hash(&four), parsed(&two)))
        ),
        parsed(&four)
    );
}

/// `prepare` parses an appended `apply` command's text on a thread, and
/// the apply at its index takes that parse; a text this device's API
/// offered is not parsed again, and another command starts nothing.
#[test]
fn prepare_parses_an_apply_command_unless_its_text_was_offered() {
    use gtm_cluster::Machine;
    let machine = GtmMachine::default();
    let one = text("192.0.2.1");
    let bytes = |t: &str| gtm_cluster::Value::from(apply_command(t).encode().unwrap());
    machine.prepare(7, &bytes(&one));
    assert_eq!(
        machine.take_parse(7, &one).map(Result::unwrap),
        Some(parsed(&one))
    );
    assert!(machine.preparing.lock().unwrap().is_none());

    // Offered by the API: the thread sends nothing, the offer is taken.
    let two = text("192.0.2.2");
    let _offer = machine.offer(&one, parsed(&two));
    machine.prepare(8, &bytes(&one));
    let preparing = machine.take_preparing(8).expect("started");
    assert!(
        preparing.parsed.recv().is_err(),
        "no parse of an offered text"
    );

    // Not an apply: nothing arrives.
    let other = Command::new(
        Actor::default(),
        None,
        Action::SetCheck {
            check: "c".into(),
            state: "ok".into(),
        },
    );
    machine.prepare(9, &other.encode().unwrap().into());
    let preparing = machine.take_preparing(9).expect("started");
    assert!(preparing.parsed.recv().is_err());

    // One at a time: while a parse is under way, another starts nothing
    // (that command is parsed when applied).
    machine
        .parsing
        .store(true, std::sync::atomic::Ordering::Release);
    machine.prepare(10, &bytes(&two));
    assert!(machine.take_preparing(10).is_none());
    assert_eq!(machine.take_parse(10, &two), None);
}
