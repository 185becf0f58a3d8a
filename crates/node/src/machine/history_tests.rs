//! History pruning and rollback, applied by the machine to a map as every
//! device would.

use std::collections::BTreeMap;

use gtm_cluster::Write;

use super::*;
use crate::command::{Action, Command, Outcome};
use gtm_model::actor::Actor;

fn zone(ttl: u32) -> String {
    format!(
        "[[domain]]\nname = \"h.test\"\nnameservers = [\"ns1.h.test\"]\nttl = {ttl}\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
    )
}

/// Applies a command to `kv` as the cluster would, returning its outcome.
fn run(machine: &GtmMachine, kv: &mut Map, index: u64, keep: u32, action: Action) -> Outcome {
    let mut command = Command::new(
        Actor {
            user: "admin".into(),
            device: format!("gtm{}", index % 2 + 1),
        },
        None,
        action,
    );
    command.history_keep = keep;
    apply_for_test(machine, kv, index, &command)
}

#[test]
fn history_keeps_as_many_versions_as_the_command_says() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    for (i, ttl) in [30, 60, 90, 120, 150].into_iter().enumerate() {
        let outcome = run(
            &machine,
            &mut kv,
            i as u64 + 1,
            3,
            Action::ApplyConfig { text: zone(ttl) },
        );
        assert!(
            matches!(outcome, Outcome::Applied { version, .. } if version == i as u64 + 1),
            "{outcome:?}"
        );
    }
    let versions: Vec<u64> = history_of(&kv).iter().map(|e| e.version).collect();
    assert_eq!(versions, [3, 4, 5]);
    let last = history_entry(&kv, 5).unwrap();
    assert_eq!(last.actor.device, "gtm2");
    assert_eq!(last.what, "apply");
    assert!(
        last.changes.iter().any(|c| c.contains("ttl 120 → 150")),
        "{:?}",
        last.changes
    );

    // A larger keep lets history grow again; 0 still keeps the new version.
    run(
        &machine,
        &mut kv,
        6,
        100,
        Action::ApplyConfig { text: zone(180) },
    );
    assert_eq!(history_of(&kv).len(), 4);
    run(
        &machine,
        &mut kv,
        7,
        0,
        Action::ApplyConfig { text: zone(210) },
    );
    let versions: Vec<u64> = history_of(&kv).iter().map(|e| e.version).collect();
    assert_eq!(versions, [7]);
}

#[test]
fn a_rollback_is_a_new_version_with_the_old_text_and_a_pruned_version_is_refused() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    for (i, ttl) in [30, 60, 90].into_iter().enumerate() {
        run(
            &machine,
            &mut kv,
            i as u64 + 1,
            2,
            Action::ApplyConfig { text: zone(ttl) },
        );
    }
    match run(&machine, &mut kv, 4, 2, Action::Rollback { version: 1 }) {
        Outcome::Rejected(e) => {
            assert_eq!(e.error, gtm_model::error::ErrorKind::NotFound);
            assert!(
                e.message
                    .contains("version 1 is not in the configuration history"),
                "{}",
                e.message
            );
        }
        other => panic!("{other:?}"),
    }
    let outcome = run(&machine, &mut kv, 5, 2, Action::Rollback { version: 2 });
    assert!(
        matches!(outcome, Outcome::Applied { version: 4, .. }),
        "{outcome:?}"
    );
    assert_eq!(config_text(&kv).unwrap(), zone(60).as_bytes());
    let entry = history_entry(&kv, 4).unwrap();
    assert_eq!(entry.what, "rollback to 2");
    assert!(
        entry.changes.iter().any(|c| c.contains("ttl 90 → 60")),
        "{:?}",
        entry.changes
    );
    let versions: Vec<u64> = history_of(&kv).iter().map(|e| e.version).collect();
    assert_eq!(versions, [3, 4]);
}

#[test]
fn the_configuration_applied_is_handed_on_parsed_only_for_its_own_text() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    run(
        &machine,
        &mut kv,
        1,
        3,
        Action::ApplyConfig { text: zone(30) },
    );
    let committed = config_value(&kv).cloned().unwrap();
    let (parsed, compiled) = machine
        .parsed(text_hash(&committed))
        .expect("the text just committed");
    let text = String::from_utf8(config_text(&kv).unwrap()).unwrap();
    assert_eq!(*parsed, gtm_model::parse(&text).unwrap());
    assert_eq!(text_hash(&committed), id_of_text(text.as_bytes()));
    // Compiled, once: the engine takes it.
    let compiled = compiled.expect("compiled with the command");
    assert_eq!(compiled.compiled.zones[0].apex.to_string(), "h.test.");
    let (again, none) = machine.parsed(text_hash(&committed)).unwrap();
    assert_eq!(*again, *parsed);
    assert!(none.is_none(), "the compiled form is handed on once");
    // Another text (the one before, a later one) is the engine's to parse.
    assert!(machine.parsed(id_of_text(zone(60).as_bytes())).is_none());
    run(
        &machine,
        &mut kv,
        2,
        3,
        Action::ApplyConfig { text: zone(60) },
    );
    assert!(machine.parsed(id_of_text(text.as_bytes())).is_none());
}

/// A history entry of `version` with `text`, as the machine makes one.
fn entry_with(version: u64, text: String) -> HistoryEntry {
    HistoryEntry {
        version,
        time_ms: version,
        actor: Actor {
            user: "admin".into(),
            device: "gtm1".into(),
        },
        command: format!("{version:032x}"),
        what: "apply".into(),
        changes: vec![format!("change {version}")],
        changes_in_all: None,
        text: Some(text),
        text_bytes: None,
    }
}

/// What a version with `entry`'s text writes to history: its parts, as
/// the machine keeps the committed text, then its entry.
fn writes_for(kv: &Map, mut entry: HistoryEntry, keep: usize, budget: usize) -> Vec<Write> {
    let text = entry.text.take().unwrap_or_default();
    entry.text_bytes = Some(text.len());
    let whole = gtm_cluster::parts::Splice::whole(text.into_bytes());
    let (list, mut writes) = parts::keep(kv, whole, &[], None).unwrap();
    writes.extend(history_writes(kv, entry, list, keep, budget));
    writes
}

/// A letter of its own per version (`b` for 1, `c` for 2, ...).
fn letter(version: u64) -> String {
    char::from(b'a' + version as u8).to_string()
}

#[test]
fn older_texts_beyond_the_text_budget_drop_out_newest_kept_first() {
    // A text of its own per version: equal texts share their part.
    let entry = |version: u64, size: usize| entry_with(version, letter(version).repeat(size));
    let mut kv = Map::new();
    let apply = |kv: &mut Map, e: HistoryEntry, keep: usize| {
        for w in writes_for(kv, e, keep, 100) {
            w.apply_to(kv);
        }
    };
    // 40 + 40 fit the budget of 100; a third of 40 pushes the first out.
    for v in 1..=3 {
        apply(&mut kv, entry(v, 40), 10);
    }
    let kept = |kv: &Map| -> Vec<(u64, Option<usize>)> {
        history_of(kv)
            .iter()
            .map(|e| (e.version, e.text_size()))
            .collect()
    };
    assert_eq!(kept(&kv), vec![(1, None), (2, Some(40)), (3, Some(40))]);
    // The entry that lost its text keeps everything else.
    let first = history_entry(&kv, 1).expect("version 1 is listed");
    assert_eq!(
        (first.text, first.changes),
        (None, vec!["change 1".to_string()])
    );
    // A new text over the whole budget is kept; every older one drops out.
    apply(&mut kv, entry(4, 150), 10);
    assert_eq!(
        kept(&kv),
        vec![(1, None), (2, None), (3, None), (4, Some(150))]
    );
    // Entries beyond `keep` go, texts or not; the one over the budget
    // keeps its text only while it is the newest.
    apply(&mut kv, entry(5, 10), 2);
    assert_eq!(kept(&kv), vec![(4, None), (5, Some(10))]);
    // Texts live as parts under keys of their own, only while kept.
    let lists: Vec<&String> = kv
        .keys()
        .filter(|k| k.starts_with(parts::PARTS_PREFIX))
        .collect();
    assert_eq!(lists, [&parts::parts_key(5)]);
    assert_eq!(
        kv.keys()
            .filter(|k| k.starts_with(parts::PART_PREFIX))
            .count(),
        1
    );
    assert_eq!(history_entry(&kv, 5).unwrap().text.unwrap(), "f".repeat(10));

    // An entry of the layout before, its text inside, reads the same and
    // loses its text the same way.
    let mut before = entry(6, 30);
    before.text = Some("y".repeat(30));
    kv.insert(history_key(6), serde_json::to_vec(&before).unwrap().into());
    assert_eq!(kept(&kv), vec![(4, None), (5, Some(10)), (6, Some(30))]);
    assert_eq!(history_entry(&kv, 6).unwrap().text.unwrap(), "y".repeat(30));
    apply(&mut kv, entry(7, 90), 10);
    assert_eq!(
        kept(&kv),
        vec![(4, None), (5, None), (6, None), (7, Some(90))]
    );
    assert_eq!(history_entry(&kv, 6).unwrap().text, None);
}

fn domains(changed_ttl: u32) -> String {
    [("a.test", 30), ("b.test", changed_ttl), ("c.test", 30)]
        .iter()
        .map(|(name, ttl)| {
            format!(
                "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\nttl = {ttl}\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n\n"
            )
        })
        .collect()
}

#[test]
fn versions_share_the_parts_they_did_not_change_and_each_text_comes_back_whole() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    let ttls = [30, 60, 90, 120, 150];
    for (i, ttl) in ttls.into_iter().enumerate() {
        let outcome = run(
            &machine,
            &mut kv,
            i as u64 + 1,
            10,
            Action::ApplyConfig { text: domains(ttl) },
        );
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
    }
    // Every version's text, byte for byte, from its parts.
    for (i, ttl) in ttls.into_iter().enumerate() {
        let entry = history_entry(&kv, i as u64 + 1).unwrap();
        assert_eq!(entry.text.as_deref(), Some(domains(ttl).as_str()));
    }
    // a.test and c.test are kept once; b.test once per version.
    let parts_kept = |kv: &Map| {
        kv.keys()
            .filter(|k| k.starts_with(parts::PART_PREFIX))
            .count()
    };
    assert_eq!(parts_kept(&kv), 2 + ttls.len());
    // A rollback gives the old text back, and is itself a version of parts.
    run(&machine, &mut kv, 6, 10, Action::Rollback { version: 2 });
    assert_eq!(config_text(&kv).unwrap(), domains(60).as_bytes());
    assert_eq!(history_entry(&kv, 6).unwrap().text.unwrap(), domains(60));
    assert_eq!(parts_kept(&kv), 2 + ttls.len());
    // Versions pruned take the parts only they named with them.
    run(
        &machine,
        &mut kv,
        7,
        2,
        Action::ApplyConfig { text: domains(180) },
    );
    let versions: Vec<u64> = history_of(&kv).iter().map(|e| e.version).collect();
    assert_eq!(versions, [6, 7]);
    assert_eq!(parts_kept(&kv), 2 + 2);
    assert_eq!(history_entry(&kv, 6).unwrap().text.unwrap(), domains(60));
}

#[test]
fn the_text_budget_counts_a_shared_part_once() {
    // 60 bytes every version shares, then 20 of its own.
    let entry = |version: u64| {
        entry_with(
            version,
            format!(
                "{}\n[[domain]]\n{}\n",
                "s".repeat(59),
                letter(version).repeat(8)
            ),
        )
    };
    let mut kv = Map::new();
    for v in 1..=4 {
        for w in writes_for(&kv, entry(v), 10, 120) {
            w.apply_to(&mut kv);
        }
    }
    // The newest costs 80 bytes; each older one 20 more: two fit in 120.
    let kept: Vec<(u64, bool)> = history_of(&kv)
        .iter()
        .map(|e| (e.version, e.text_size().is_some()))
        .collect();
    assert_eq!(kept, vec![(1, false), (2, true), (3, true), (4, true)]);
    assert_eq!(
        history_entry(&kv, 2).unwrap().text,
        entry(2).text,
        "a kept version reads whole"
    );
    // The shared part, and one part per version with its text.
    assert_eq!(
        kv.keys()
            .filter(|k| k.starts_with(parts::PART_PREFIX))
            .count(),
        4
    );
}

/// A version's text size is read without parsing an entry that holds no
/// text (its JSON ends with its `changes` list): the entries as the
/// machine writes them, with and without a text, read as parsing them
/// would.
#[test]
fn a_text_size_is_read_from_an_entry_as_parsing_it_would() {
    let mut kv: Map = BTreeMap::new();
    let mut without = entry_with(1, String::new());
    without.text = None;
    without.text_bytes = None;
    without.changes = vec!["+ record r1".into(), "+ record r2".into()];
    let mut counted = entry_with(2, String::new());
    counted.text = None;
    counted.text_bytes = Some(5_000);
    let embedded = entry_with(3, "x".repeat(300));
    for e in [&without, &counted, &embedded] {
        kv.insert(
            history_key(e.version),
            serde_json::to_vec(e).unwrap().into(),
        );
    }
    assert!(kv[&history_key(1)].ends_with(b"]}"));
    for version in 1..=3 {
        let parsed = history_summary(&kv, version)
            .and_then(|e| e.text_size())
            .unwrap_or(0);
        assert_eq!(text_size(&kv, version), parsed, "version {version}");
    }
    assert_eq!(
        (text_size(&kv, 1), text_size(&kv, 2), text_size(&kv, 3)),
        (0, 5_000, 300)
    );
}

/// An apply that changes more than [`LINES_KEPT`] things keeps the first
/// of its change lines in history and in its outcome (the answer, and what
/// the map keeps for a command delivered again) and says how many more
/// there are.
#[test]
fn a_large_apply_keeps_the_first_change_lines_and_counts_the_rest() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    let head = "[[domain]]\nname = \"h.test\"\nnameservers = [\"ns1.h.test\"]\n";
    run(
        &machine,
        &mut kv,
        1,
        10,
        Action::ApplyConfig { text: head.into() },
    );
    let records = LINES_KEPT + 500;
    let text: String = (0..records).fold(head.to_string(), |mut t, i| {
        t.push_str(&format!(
            "[[domain.record]]\nname = \"r{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
        ));
        t
    });
    let all = gtm_engine::diff(
        &gtm_model::parse(head).unwrap(),
        &gtm_model::parse(&text).unwrap(),
    );
    // A record added is its line and one for its address.
    let lines = 2 * records;
    assert_eq!(all.len(), lines);
    let command = admin_command(Action::ApplyConfig { text });
    let outcome = apply_for_test(&machine, &mut kv, 2, &command);
    let Outcome::Applied { changes, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(changes.len(), LINES_KEPT + 1);
    assert!(
        changes[..LINES_KEPT] == all[..LINES_KEPT],
        "the first change lines, in order"
    );
    assert_eq!(
        changes.last().unwrap(),
        &format!(
            "… and {} more changes ({lines} in all; `gtm config diff 1 2` lists them while history keeps both texts)",
            lines - LINES_KEPT
        )
    );
    let kept = outcome_of(&kv, &command.id).unwrap();
    assert_eq!(
        kept.encode(),
        outcome.encode(),
        "the map keeps the outcome answered"
    );
    let entry = history_entry(&kv, 2).unwrap();
    assert!(&entry.changes == changes, "history keeps the same lines");
    let listed = history_of(&kv);
    let listed = listed.iter().find(|e| e.version == 2).unwrap();
    assert!(
        listed.changes == entry.changes,
        "history lists what the entry keeps"
    );
    // How many there are in all, for the config event and history's list.
    assert_eq!(entry.change_count(), lines);
    assert_eq!(history_summary(&kv, 2).unwrap().change_count(), lines);
    assert_eq!(history_summary(&kv, 1).unwrap().change_count(), 1);
}

/// A configuration with more than [`gtm_model::ERRORS_LISTED`] errors
/// is refused with the first of them and a line counting the rest, the
/// same in the answer and in the outcome the map keeps.
#[test]
fn a_rejected_apply_keeps_the_first_errors_and_counts_the_rest() {
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    let listed = gtm_model::ERRORS_LISTED;
    let bad = listed + 20;
    let text: String = (0..bad).fold(
        "[[domain]]\nname = \"h.test\"\nnameservers = [\"ns1.h.test\"]\n".to_string(),
        |mut t, i| {
            t.push_str(&format!(
                "[[domain.record]]\nname = \"r{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\", hc = \"check:none{i}\" }}]\n"
            ));
            t
        },
    );
    let all = gtm_model::compile(&gtm_model::parse(&text).unwrap())
        .err()
        .unwrap();
    assert_eq!(all.listed.len(), listed);
    assert!(all.total() >= bad, "{} errors", all.total());
    let command = admin_command(Action::ApplyConfig { text });
    let outcome = apply_for_test(&machine, &mut kv, 1, &command);
    let Outcome::Rejected(error) = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(error.errors.len(), listed + 1);
    assert_eq!(
        error.errors[..listed],
        all.listed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()[..]
    );
    assert_eq!(
        error.errors.last().unwrap(),
        &format!(
            "… and {} more errors ({} in all)",
            all.total() - listed,
            all.total()
        )
    );
    assert!(
        error.message.contains(&all.total().to_string()),
        "{}",
        error.message
    );
    assert_eq!(
        outcome_of(&kv, &command.id).unwrap().encode(),
        outcome.encode()
    );
}

/// History names an object's first put a create, a later one an update,
/// and a delete a delete; records and addresses alike.
#[test]
fn history_says_create_update_and_delete() {
    use crate::command::{Edit, Kind};
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    run(
        &machine,
        &mut kv,
        1,
        10,
        Action::ApplyConfig { text: zone(30) },
    );
    let check = |interval: &str| {
        Action::Edit(Edit::Put {
            kind: Kind::Check,
            name: "web".into(),
            json: format!(r#"{{"name":"web","type":"http","interval":"{interval}"}}"#),
            keep_children: false,
        })
    };
    let address = |ip: &str| {
        Action::Edit(Edit::PutAddress {
            domain: "h.test".into(),
            name: "www".into(),
            rtype: "A".into(),
            key: ip.into(),
            json: format!(r#"{{"ip":"{ip}","hc":"disabled"}}"#),
        })
    };
    let steps = [
        (check("10s"), "create check web"),
        (check("20s"), "update check web"),
        (
            address("192.0.2.1"),
            "update address 192.0.2.1 of www A in h.test",
        ),
        (
            address("192.0.2.2"),
            "create address 192.0.2.2 of www A in h.test",
        ),
        (
            Action::Edit(Edit::Delete {
                kind: Kind::Check,
                name: "web".into(),
            }),
            "delete check web",
        ),
    ];
    for (i, (action, what)) in steps.into_iter().enumerate() {
        let index = i as u64 + 2;
        let outcome = run(&machine, &mut kv, index, 10, action);
        let Outcome::Applied { version, .. } = outcome else {
            panic!("{what}: {outcome:?}");
        };
        assert_eq!(history_entry(&kv, version).unwrap().what, what);
    }
}
