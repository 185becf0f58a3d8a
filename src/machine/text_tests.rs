//! The text an edit writes is the whole configuration written at once, on
//! a device that wrote the text before (and copies from it) as on one
//! that did not (a restarted device, a follower that just joined).

use std::collections::BTreeMap;

use super::*;
use crate::command::{Action, Actor, Command, Edit, Kind, Outcome};

fn command(action: Action) -> Command {
    Command::new(
        Actor {
            user: "admin".into(),
            device: "gtm1".into(),
        },
        None,
        action,
    )
}

fn record(domain: &str, name: &str, ip: &str) -> Action {
    Action::Edit(Edit::PutRecord {
        domain: domain.into(),
        name: name.into(),
        rtype: "A".into(),
        json: format!(r#"{{"name": "{name}", "type": "A", "addresses": [{{"ip": "{ip}"}}]}}"#),
        keep_addresses: false,
    })
}

#[test]
fn an_edit_writes_the_same_text_with_or_without_the_text_before() {
    let start = "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n\n\
                 [[domain]]\nname = \"B.test\"\nnameservers = [\"ns1.b.test\"]\n";
    let commands = [
        Action::ApplyConfig { text: start.into() },
        record("a.test", "www", "192.0.2.1"),
        record("b.test", "www", "192.0.2.2"),
        record("b.test.", "api", "192.0.2.3"),
        Action::Edit(Edit::Put {
            kind: Kind::Check,
            name: "c".into(),
            json: r#"{"name": "c", "type": "tcp", "target": "127.0.0.1", "port": 9}"#.into(),
            keep_children: false,
        }),
        record("a.test", "www", "192.0.2.4"),
        Action::Edit(Edit::Delete {
            kind: Kind::Domain,
            name: "a.test".into(),
        }),
        record("b.test", "api", "192.0.2.5"),
    ];
    let kept = GtmMachine::default();
    let mut kv = BTreeMap::new();
    for (i, action) in commands.into_iter().enumerate() {
        let command = command(action);
        let index = i as u64 + 1;
        // A machine that has not seen the text before, on a copy of the map.
        let mut fresh_kv = kv.clone();
        let fresh = apply_for_test(&GtmMachine::default(), &mut fresh_kv, index, &command);
        let outcome = apply_for_test(&kept, &mut kv, index, &command);
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
        assert_eq!(format!("{fresh:?}"), format!("{outcome:?}"));
        assert_eq!(kv, fresh_kv, "after command {index}");
        if i > 0 {
            let text = std::str::from_utf8(&kv[CONFIG_KEY]).unwrap();
            let config = model::parse(text).unwrap();
            assert_eq!(text, toml::to_string_pretty(&config).unwrap());
        }
    }
    let text = std::str::from_utf8(&kv[CONFIG_KEY]).unwrap();
    assert!(
        text.contains("192.0.2.5") && !text.contains("a.test"),
        "{text}"
    );
}
