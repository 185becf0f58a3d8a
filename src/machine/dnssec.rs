//! DNSSEC key commands in the state machine (docs/dnssec.md). A key
//! command does not move the configuration version; its GTM Logs line
//! names the key by its tag, never its bytes.

use std::collections::BTreeMap;

use super::{Change, operator, rejected};
use crate::{
    api::ErrorKind,
    command::{Action, Command, DnssecChange, Outcome},
    dnssec::keys::{Published, ZoneKeys, keyring_of, map_key},
    model::Config,
};
use gtm_cluster::Write;

/// Applies a DNSSEC command; `None` for other commands.
pub(super) fn run(
    kv: &BTreeMap<String, Vec<u8>>,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
) -> Option<Change> {
    let Action::Dnssec(change) = &command.action else {
        return None;
    };
    let DnssecChange::AddKeys { keys } = change;
    let kept = keyring_of(kv);
    let mut writes = Vec::new();
    let mut lines = Vec::new();
    let mut notes = operator::state_of(kv);
    for (domain, key) in keys {
        let wanted = domain.trim_end_matches('.').to_ascii_lowercase();
        let Some(d) = current
            .domains
            .iter()
            .find(|d| d.name.trim_end_matches('.').eq_ignore_ascii_case(&wanted))
        else {
            return Some(rejected(
                ErrorKind::NotFound,
                format!("no domain named \"{wanted}\""),
            ));
        };
        if d.dnssec != Some(true) {
            return Some(rejected(
                ErrorKind::BadRequest,
                format!("domain \"{wanted}\" is not signed (dnssec = true makes it so)"),
            ));
        }
        if kept.contains_key(&wanted)
            || writes
                .iter()
                .any(|w: &Write| matches!(w, Write::Put { key, .. } if *key == map_key(&wanted)))
        {
            return Some(rejected(
                ErrorKind::Conflict,
                format!("domain \"{wanted}\" has a key already"),
            ));
        }
        let apex = match hickory_proto::rr::Name::from_ascii(format!("{wanted}.")) {
            Ok(n) => n,
            Err(e) => return Some(rejected(ErrorKind::BadRequest, e.to_string())),
        };
        // A key that does not sign here would not sign anywhere.
        let tag = match Published::of(key, &apex) {
            Ok(p) => p.tag,
            Err(e) => return Some(rejected(ErrorKind::BadRequest, e.to_string())),
        };
        let line = format!(
            "DNSSEC key {tag} (algorithm {}) made for {wanted}",
            key.algorithm.number()
        );
        operator::note(
            &mut notes,
            &format!("domain {wanted}"),
            format!("{line} ({})", command.actor),
        );
        lines.push(line);
        writes.push(Write::Put {
            key: map_key(&wanted),
            value: serde_json::to_vec(&ZoneKeys {
                keys: vec![key.clone()],
            })
            .unwrap_or_default(),
        });
    }
    if writes.is_empty() {
        return Some(rejected(ErrorKind::BadRequest, "no key to add"));
    }
    writes.push(operator::put(&notes));
    Some(Change {
        writes,
        outcome: Outcome::Applied {
            version,
            index,
            changed: true,
            changes: lines,
        },
    })
}

#[cfg(test)]
mod tests {
    use gtm_cluster::Machine;

    use super::*;
    use crate::{
        command::{Actor, Command},
        dnssec::keys::KeyMaterial,
        machine::{CONFIG_KEY, GtmMachine},
        model::config::KeyAlgorithm,
    };

    fn apply(machine: &GtmMachine, kv: &mut BTreeMap<String, Vec<u8>>, action: Action) -> Outcome {
        let command = Command::new(Actor::default(), None, action);
        let effect = machine.apply(kv, 1, &command.encode().unwrap());
        for w in effect.writes {
            match w {
                Write::Put { key, value } => {
                    kv.insert(key, value);
                }
                Write::Delete { key } => {
                    kv.remove(&key);
                }
            }
        }
        Outcome::decode(&effect.outcome).unwrap()
    }

    #[test]
    fn a_signed_domain_gets_one_key_and_the_key_stays_out_of_the_configuration() {
        let machine = GtmMachine::default();
        let mut kv = BTreeMap::new();
        kv.insert(
            CONFIG_KEY.to_string(),
            b"[[domain]]\nname = \"example.test\"\ndnssec = true\n\n[[domain]]\nname = \"plain.test\"\n\n[[domain]]\nname = \"new.test\"\ndnssec = true\n"
                .to_vec(),
        );
        let add = |domain: &str| {
            Action::Dnssec(DnssecChange::AddKeys {
                keys: vec![(
                    domain.into(),
                    KeyMaterial::generate(KeyAlgorithm::Ecdsap256sha256, 1).unwrap(),
                )],
            })
        };
        assert!(matches!(
            apply(&machine, &mut kv, add("Example.Test.")),
            Outcome::Applied { changed: true, .. }
        ));
        let keys = keyring_of(&kv);
        assert_eq!(keys.len(), 1);
        assert!(keys.contains_key("example.test"));
        // A second key is refused: the first one's DS may be at the parent.
        let Outcome::Rejected(e) = apply(&machine, &mut kv, add("example.test")) else {
            panic!("a second key was taken");
        };
        assert_eq!(e.error, ErrorKind::Conflict);
        let Outcome::Rejected(e) = apply(&machine, &mut kv, add("plain.test")) else {
            panic!("an unsigned domain took a key");
        };
        assert_eq!(e.error, ErrorKind::BadRequest);
        let Outcome::Rejected(e) = apply(&machine, &mut kv, add("other.test")) else {
            panic!("an unknown domain took a key");
        };
        assert_eq!(e.error, ErrorKind::NotFound);
        // One refused key refuses the whole command.
        let mut both = add("new.test");
        if let (
            Action::Dnssec(DnssecChange::AddKeys { keys }),
            Action::Dnssec(DnssecChange::AddKeys { keys: more }),
        ) = (&mut both, add("plain.test"))
        {
            keys.extend(more);
        }
        assert!(matches!(
            apply(&machine, &mut kv, both),
            Outcome::Rejected(_)
        ));
        assert_eq!(keyring_of(&kv).len(), 1);
        // The configuration text never holds the key.
        let text = String::from_utf8(kv[CONFIG_KEY].clone()).unwrap();
        assert!(!text.contains("pkcs8"));
    }
}
