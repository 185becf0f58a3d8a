//! TSIG key commands in the state machine (docs/transfer.md): keys are
//! made and removed here, on every device, each change a GTM Logs line
//! naming who made it (never the secret).
//!
//! Key `tsig`: JSON [`TsigKeys`]. Key commands do not move the
//! configuration version. A key named by a domain's secondaries cannot be
//! removed, and a configuration naming a key the cluster lacks is refused
//! ([`unknown_keys`]), so the secondaries always have their keys.

use gtm_cluster::Map;

use super::{Change, operator, rejected};
use crate::command::{Action, Command, Outcome, TsigChange};
use gtm_cluster::Write;
use gtm_dns::tsig::{ALGORITHM, SECRET_LEN, StoredKey, TSIG_KEY, TsigKeys};
use gtm_model::{Config, ConfigError, ConfigErrors, error::ErrorKind, names::check_tsig_key_name};

/// Applies a TSIG key command; `None` for other commands.
pub(super) fn run(
    kv: &Map,
    index: u64,
    version: u64,
    config: &Config,
    command: &Command,
) -> Option<Change> {
    let Action::Tsig(change) = &command.action else {
        return None;
    };
    let mut keys = TsigKeys::of(kv);
    let who = &command.actor;
    let (name, line) = match change {
        TsigChange::Add {
            name,
            algorithm,
            secret,
        } => {
            if let Err(e) = check_tsig_key_name(name) {
                return Some(rejected(ErrorKind::BadRequest, e.to_string()));
            }
            if algorithm != ALGORITHM {
                return Some(rejected(
                    ErrorKind::BadRequest,
                    format!("TSIG algorithm {algorithm:?} is not supported: {ALGORITHM} only"),
                ));
            }
            if secret.bytes().len() < SECRET_LEN {
                return Some(rejected(
                    ErrorKind::BadRequest,
                    format!("a TSIG secret needs at least {SECRET_LEN} bytes"),
                ));
            }
            if keys.keys.contains_key(name) {
                return Some(rejected(
                    ErrorKind::Conflict,
                    format!(
                        "a TSIG key is named \"{name}\" already; delete it first or pick another name"
                    ),
                ));
            }
            keys.keys.insert(
                name.clone(),
                StoredKey {
                    algorithm: algorithm.clone(),
                    secret: secret.clone(),
                    time_ms: command.time_ms,
                    by: who.clone(),
                },
            );
            (name, format!("TSIG key {name} added ({algorithm})"))
        }
        TsigChange::Delete { name } => {
            let users: Vec<&str> = config
                .domains
                .iter()
                .filter(|d| {
                    d.secondaries.iter().any(|s| s.key == *name)
                        || d.updates.iter().any(|g| g.key == *name)
                })
                .map(|d| d.name.as_str())
                .chain(
                    config
                        .catalog
                        .iter()
                        .filter(|c| c.secondaries.iter().any(|s| s.key == *name))
                        .map(|c| c.name.as_str()),
                )
                .collect();
            if !users.is_empty() {
                return Some(rejected(
                    ErrorKind::Conflict,
                    format!(
                        "TSIG key \"{name}\" is used by the secondaries or update grants of domain {}: change them first",
                        users.join(", ")
                    ),
                ));
            }
            if keys.keys.remove(name).is_none() {
                return Some(rejected(
                    ErrorKind::NotFound,
                    format!("no TSIG key named \"{name}\""),
                ));
            }
            (name, format!("TSIG key {name} deleted"))
        }
    };
    let mut notes = operator::state_of(kv);
    operator::note(
        &mut notes,
        &format!("tsig {name}"),
        format!("{line} ({who})"),
    );
    Some(Change {
        writes: vec![
            Write::Put {
                key: TSIG_KEY.into(),
                value: keys.encode(),
            },
            operator::put(&notes),
        ],
        outcome: Outcome::Applied {
            version,
            index,
            changed: true,
            changes: vec![line],
        },
    })
}

/// The secondaries of `config` naming a key the cluster does not hold, as
/// configuration errors naming each one's path.
pub(super) fn unknown_keys(kv: &Map, config: &Config) -> Option<ConfigErrors> {
    let keys = TsigKeys::of(kv);
    // Every key the configuration names, with the path of its place: the
    // domains' secondaries, update grants and primaries, the catalog's
    // secondaries.
    let named = config
        .domains
        .iter()
        .flat_map(|d| {
            let secondaries = d
                .secondaries
                .iter()
                .enumerate()
                .map(move |(i, s)| (format!("domain {} / secondaries[{i}]", d.name), &s.key));
            let grants = d
                .updates
                .iter()
                .enumerate()
                .map(move |(i, g)| (format!("domain {} / updates[{i}]", d.name), &g.key));
            let primary = d.primary.iter().filter_map(move |p| {
                Some((format!("domain {} / primary", d.name), p.key.as_ref()?))
            });
            secondaries.chain(grants).chain(primary)
        })
        .chain(config.catalog.iter().flat_map(|c| {
            c.secondaries
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("catalog / secondaries[{i}]"), &s.key))
        }));
    let errors: Vec<ConfigError> = named
        .filter(|(_, key)| !keys.keys.contains_key(*key))
        .map(|(path, key)| ConfigError {
            path,
            message: format!(
                "key: unknown TSIG key \"{key}\" (gtm tsig list shows the cluster's keys; gtm tsig add makes one)"
            ),
        })
        .collect();
    (!errors.is_empty()).then(|| ConfigErrors::from(errors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{command::Command, machine::GtmMachine};
    use gtm_dns::tsig::Secret;
    use gtm_model::actor::Actor;

    fn apply(kv: &mut Map, index: u64, action: Action) -> Outcome {
        let command = Command::new(Actor::default(), None, action);
        crate::machine::apply_for_test(&GtmMachine::default(), kv, index, &command)
    }

    fn add(name: &str) -> Action {
        Action::Tsig(TsigChange::Add {
            name: name.into(),
            algorithm: ALGORITHM.into(),
            secret: Secret::new(vec![7; SECRET_LEN]),
        })
    }

    const CONFIG: &str = r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
secondaries = [{ address = "127.0.0.1:5300", key = "xfr" }]
"#;

    #[test]
    fn keys_are_added_once_and_kept_while_secondaries_use_them() {
        let mut kv = Map::new();
        let apply_config = Action::ApplyConfig {
            text: CONFIG.into(),
        };
        let Outcome::Rejected(e) = apply(&mut kv, 1, apply_config.clone()) else {
            panic!("a configuration naming an unknown key was applied");
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(
            text.contains("domain example.test / secondaries[0]"),
            "{text}"
        );
        assert!(text.contains("unknown TSIG key \\\"xfr\\\""), "{text}");

        assert!(matches!(
            apply(&mut kv, 2, add("xfr")),
            Outcome::Applied { .. }
        ));
        assert!(matches!(
            apply(&mut kv, 3, add("xfr")),
            Outcome::Rejected(_)
        ));
        assert!(matches!(
            apply(&mut kv, 4, apply_config),
            Outcome::Applied { .. }
        ));
        let delete = Action::Tsig(TsigChange::Delete { name: "xfr".into() });
        let Outcome::Rejected(e) = apply(&mut kv, 5, delete.clone()) else {
            panic!("a key in use was deleted");
        };
        assert!(e.message.contains("example.test"), "{}", e.message);
        apply(
            &mut kv,
            6,
            Action::ApplyConfig {
                text: "[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n"
                    .into(),
            },
        );
        assert!(matches!(apply(&mut kv, 7, delete), Outcome::Applied { .. }));
        assert!(TsigKeys::of(&kv).keys.is_empty());
    }

    #[test]
    fn the_secret_is_kept_but_never_in_the_log_line() {
        let mut kv = Map::new();
        let Outcome::Applied { changes, .. } = apply(&mut kv, 1, add("xfr")) else {
            panic!("not applied");
        };
        assert_eq!(
            changes,
            vec!["TSIG key xfr added (hmac-sha256)".to_string()]
        );
        assert_eq!(
            TsigKeys::of(&kv).keys["xfr"].secret.bytes(),
            &[7; SECRET_LEN]
        );
        let mut command = Command::new(Actor::default(), None, add("xfr"));
        // A random id could print "7, 7" itself.
        command.id = crate::command::CommandId([0; 16]);
        assert!(!format!("{command:?}").contains("7, 7"));
    }
}
