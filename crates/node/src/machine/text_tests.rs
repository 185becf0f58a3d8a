//! The text an edit writes is the whole configuration written at once, on
//! a device that wrote the text before (and copies from it) as on one
//! that did not (a restarted device, a follower that just joined).

use std::collections::BTreeMap;

use super::*;
use crate::command::{Action, Edit, Kind, Outcome};

fn record(domain: &str, name: &str, ip: &str) -> Action {
    Action::Edit(Edit::PutRecord {
        domain: domain.into(),
        name: name.into(),
        rtype: "A".into(),
        json: format!(r#"{{"name": "{name}", "type": "A", "addresses": [{{"ip": "{ip}"}}]}}"#),
        keep_addresses: false,
    })
}

/// Applies `actions` in turn with one machine, and each also with a
/// machine that has not seen the text before (a restarted device, a
/// follower that just joined) on a copy of the map: each must be applied
/// and leave the same map. `after` is called after each with its index
/// and the map.
fn on_every_device(
    actions: impl IntoIterator<Item = Action>,
    mut after: impl FnMut(usize, &Map),
) -> Map {
    let kept = GtmMachine::default();
    let mut kv = BTreeMap::new();
    for (i, action) in actions.into_iter().enumerate() {
        let command = admin_command(action);
        let index = i as u64 + 1;
        let mut fresh_kv = kv.clone();
        let fresh = apply_for_test(&GtmMachine::default(), &mut fresh_kv, index, &command);
        let outcome = apply_for_test(&kept, &mut kv, index, &command);
        assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
        assert_eq!(format!("{fresh:?}"), format!("{outcome:?}"));
        assert_eq!(kv, fresh_kv, "after command {index}");
        after(i, &kv);
    }
    kv
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
    let kv = on_every_device(commands, |i, kv| {
        if i > 0 {
            let text = String::from_utf8(config_text(kv).unwrap()).unwrap();
            let text = text.as_str();
            let config = model::parse(text).unwrap();
            assert_eq!(text, toml::to_string_pretty(&config).unwrap());
        }
    });
    let text = String::from_utf8(config_text(&kv).unwrap()).unwrap();
    assert!(
        text.contains("192.0.2.5") && !text.contains("a.test"),
        "{text}"
    );
}

/// An operator's text (comments, records as inline tables) is kept by an
/// edit: only the records it changed are written, in the operator's
/// form; a device that did not write the text before reads where its
/// parts lie from the text and writes the same.
#[test]
fn an_edit_of_an_operators_text_keeps_it_on_every_device() {
    let start = "# our zones\n[[domain]]\nname = \"a.test\"  # the first\nnameservers = [\"ns1.a.test\"]\n\
                 record = [\n  {name = \"www\", type = \"A\", addresses = [{ip = \"192.0.2.1\"}]}, # web\n\
                 {name = \"api\", type = \"A\", addresses = [{ip = \"192.0.2.2\"}]},\n]\n\
                 [[domain]]\nname = \"b.test\"\nnameservers = [\"ns1.b.test\"]\n\
                 # limits\n[rate_limit]\nenabled = false\n";
    let commands = [
        Action::ApplyConfig { text: start.into() },
        record("a.test", "www", "192.0.2.7"),
        record("a.test", "new", "192.0.2.8"),
        record("b.test", "www", "192.0.2.9"),
        record("a.test", "api", "192.0.2.10"),
    ];
    let kv = on_every_device(commands, |_, _| {});
    // a.test keeps the operator's words, its changed records written as
    // inline tables in their places; b.test had no list, and is written
    // whole.
    let text = String::from_utf8(config_text(&kv).unwrap()).unwrap();
    let a = "# our zones\n[[domain]]\nname = \"a.test\"  # the first\nnameservers = [\"ns1.a.test\"]\n\
             record = [\n  { name = \"www\", type = \"A\", addresses = [{ ip = \"192.0.2.7\" }] }, # web\n\
             { name = \"api\", type = \"A\", addresses = [{ ip = \"192.0.2.10\" }] },\n\
             { name = \"new\", type = \"A\", addresses = [{ ip = \"192.0.2.8\" }] },\n]\n";
    assert!(text.starts_with(a), "{text}");
    assert!(text.contains("ip = \"192.0.2.9\""), "{text}");
    assert_eq!(model::parse(&text).unwrap().domains.len(), 2);
}

/// The bytes an effect puts under keys starting with `prefix`, and how
/// many such keys.
fn put_under(effect: &gtm_cluster::Effect, prefix: &str) -> (usize, usize) {
    effect
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::Put { key, value } if key.starts_with(prefix) => Some(value.len()),
            _ => None,
        })
        .fold((0, 0), |(keys, bytes), len| (keys + 1, bytes + len))
}

/// An edit writes the parts of the text it changed and the list of parts,
/// not the whole text: in a domain of thousands of records, one record's
/// part or two. A map kept before parts (the whole text under `config`)
/// is converted by its next change.
#[test]
fn an_edit_writes_the_parts_it_changed_not_the_whole_text() {
    use gtm_cluster::Machine;
    let mut text = String::from(
        "[[domain]]\nname = \"small.test\"\nnameservers = [\"ns1.small.test\"]\n\n\
         [[domain]]\nname = \"big.test\"\nnameservers = [\"ns1.big.test\"]\n",
    );
    for i in 0..5_000 {
        text.push_str(&format!(
            "\n[[domain.record]]\nname = \"host{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
        ));
    }
    let machine = GtmMachine::default();
    let mut kv = BTreeMap::new();
    kv.insert(CONFIG_KEY.to_string(), text.clone().into_bytes().into());
    kv.insert(VERSION_KEY.to_string(), b"1".to_vec().into());
    let whole = text.len();
    let apply = |kv: &mut Map, index: u64, action: Action| {
        let bytes = admin_command(action).encode().unwrap();
        let effect = machine.apply(kv, index, &bytes);
        for w in effect.writes.clone() {
            w.apply_to(kv);
        }
        assert!(
            matches!(
                Outcome::decode(&effect.outcome),
                Ok(Outcome::Applied { .. })
            ),
            "{:?}",
            Outcome::decode(&effect.outcome)
        );
        effect
    };
    // The first change converts the map: every part is written once.
    let first = apply(&mut kv, 2, record("big.test", "host10", "192.0.2.9"));
    assert!(!kv.contains_key(CONFIG_KEY), "the whole text is gone");
    let (parts, bytes) = put_under(&first, parts::PART_PREFIX);
    // Kept deflated: the parts hold the whole text in a fraction of it.
    let held: usize = first
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::Put { key, value } if key.starts_with(parts::PART_PREFIX) => {
                gtm_cluster::parts::Part::kept(value).map(|p| p.bytes().len())
            }
            _ => None,
        })
        .sum();
    assert!(parts > 3 && held >= whole, "{parts} parts, {held} bytes");
    assert!(bytes < whole / 4, "{bytes} bytes kept for {whole}");
    // The next writes the changed part (or two) and a list.
    let second = apply(&mut kv, 3, record("big.test", "host2500", "192.0.2.10"));
    let (parts, bytes) = put_under(&second, parts::PART_PREFIX);
    assert!((1..=2).contains(&parts), "{parts} parts written");
    assert!(bytes < whole / 10, "{bytes} bytes of {whole} written");
    let largest = second
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::Put { value, .. } => Some(value.len()),
            Write::Delete { .. } => None,
        })
        .max()
        .unwrap_or(0);
    assert!(largest < whole / 10, "a write of {largest} bytes");
    let now = String::from_utf8(config_text(&kv).unwrap()).unwrap();
    let config = model::parse(&now).unwrap();
    let big = config
        .domains
        .iter()
        .find(|d| d.name == "big.test")
        .unwrap();
    assert_eq!(big.records.len(), 5_000);
    assert!(now.contains("192.0.2.9") && now.contains("192.0.2.10"));
    // History reads each version whole from the same parts.
    assert_eq!(
        history_entry(&kv, 3).unwrap().text.as_deref(),
        Some(now.as_str())
    );
    assert!(
        history_entry(&kv, 2)
            .unwrap()
            .text
            .unwrap()
            .contains("192.0.2.9")
    );
}

/// A map written before parts were deflated holds them as plain text: it
/// reads the same, an edit of it takes from those parts, and the parts
/// the edit writes are deflated. A fresh machine (a restarted device)
/// writes the same map.
#[test]
fn parts_kept_plain_by_an_earlier_map_read_and_edit_the_same() {
    let mut text =
        String::from("[[domain]]\nname = \"big.test\"\nnameservers = [\"ns1.big.test\"]\n");
    for i in 0..3_000 {
        text.push_str(&format!(
            "\n[[domain.record]]\nname = \"host{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
        ));
    }
    let mut kv = BTreeMap::new();
    kv.insert(CONFIG_KEY.to_string(), text.clone().into_bytes().into());
    kv.insert(VERSION_KEY.to_string(), b"1".to_vec().into());
    let machine = GtmMachine::default();
    let first = admin_command(record("big.test", "host10", "192.0.2.9"));
    assert!(matches!(
        apply_for_test(&machine, &mut kv, 2, &first),
        Outcome::Applied { .. }
    ));
    // As an earlier map keeps them: every part as its text.
    let keys: Vec<String> = kv
        .keys()
        .filter(|k| k.starts_with(parts::PART_PREFIX))
        .cloned()
        .collect();
    assert!(keys.len() > 3);
    for key in &keys {
        let plain = gtm_cluster::parts::Part::kept(&kv[key])
            .unwrap()
            .bytes()
            .to_vec();
        assert_ne!(kv[key].len(), plain.len(), "{key} was kept deflated");
        kv.insert(key.clone(), plain.into());
    }
    let before = String::from_utf8(config_text(&kv).unwrap()).unwrap();
    assert!(before.contains("192.0.2.9"));
    let second = admin_command(record("big.test", "host2000", "192.0.2.10"));
    let mut fresh_kv = kv.clone();
    let fresh = apply_for_test(&GtmMachine::default(), &mut fresh_kv, 3, &second);
    let outcome = apply_for_test(&machine, &mut kv, 3, &second);
    assert!(matches!(outcome, Outcome::Applied { .. }), "{outcome:?}");
    assert_eq!(format!("{fresh:?}"), format!("{outcome:?}"));
    assert_eq!(kv, fresh_kv);
    let now = String::from_utf8(config_text(&kv).unwrap()).unwrap();
    let config = model::parse(&now).unwrap();
    let big = &config.domains[0];
    assert_eq!(big.records.len(), 3_000);
    let address = |name: &str| {
        let r = big.records.iter().find(|r| &*r.name == name).unwrap();
        r.addresses[0].ip.map(|ip| ip.to_string())
    };
    assert_eq!(
        (address("host10"), address("host2000")),
        (Some("192.0.2.9".into()), Some("192.0.2.10".into()))
    );
    assert_eq!(now.len(), before.len() + 1, "only the address changed");
    // The plain parts the edit did not change are still plain; the new
    // ones are deflated.
    let (plain, packed): (Vec<_>, Vec<_>) = kv
        .iter()
        .filter(|(k, _)| k.starts_with(parts::PART_PREFIX))
        .partition(|(_, v)| v.first() != Some(&0));
    assert!(plain.len() >= keys.len() - 2, "{} plain", plain.len());
    assert!((1..=2).contains(&packed.len()), "{} deflated", packed.len());
}
