//! The cluster's DNS cookie secret in the state machine (RFC 9018 server
//! cookies, [`gtm_dns::cookies`]): replaced by a
//! [`Action::RotateCookieSecret`] command that carries the new secret, so
//! every device holds the same bytes and validates every device's cookies.
//! Rotations do not move the configuration version and are not history;
//! the secret is never in an outcome, a log line or `Debug` output.
//!
//! Key `cookie-secret`: JSON [`Stored`].

use gtm_cluster::Map;

use serde::{Deserialize, Serialize};

use super::Change;
use crate::command::{Action, Command, Outcome};
use gtm_cluster::Write;
use gtm_dns::cookies::{Secret, Secrets};

pub const COOKIE_SECRET_KEY: &str = "cookie-secret";

/// The secrets as the map keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    pub current: Secret,
    #[serde(default)]
    pub previous: Option<Secret>,
    /// When the current one became current (the rotation's `time_ms`).
    pub created_ms: u64,
}

/// The secrets of a map, if the cluster has made one.
pub fn secrets_of(kv: &Map) -> Option<Secrets> {
    let stored: Stored = serde_json::from_slice(kv.get(COOKIE_SECRET_KEY)?).ok()?;
    Some(Secrets {
        current: stored.current,
        previous: stored.previous,
        created_ms: stored.created_ms,
    })
}

/// Applies a rotation; `None` for other commands.
pub(super) fn run(kv: &Map, index: u64, version: u64, command: &Command) -> Option<Change> {
    let Action::RotateCookieSecret { secret, replaces } = &command.action else {
        return None;
    };
    let now = secrets_of(kv);
    let unchanged = || Change {
        writes: Vec::new(),
        outcome: Outcome::Applied {
            version,
            index,
            changed: false,
            changes: Vec::new(),
        },
    };
    // Another rotation came first (a second leader proposed too): that one
    // stands.
    if now.as_ref().map(|s| s.created_ms) != *replaces {
        return Some(unchanged());
    }
    let stored = Stored {
        current: *secret,
        previous: now.map(|s| s.current),
        created_ms: command.time_ms,
    };
    let Ok(value) = serde_json::to_vec(&stored) else {
        return Some(unchanged());
    };
    Some(Change {
        writes: vec![Write::Put {
            key: COOKIE_SECRET_KEY.into(),
            value,
        }],
        outcome: Outcome::Applied {
            version,
            index,
            changed: true,
            changes: vec!["~ DNS cookie secret rotated".into()],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_cluster::Machine;
    use gtm_model::actor::Actor;

    fn rotate(
        machine: &super::super::GtmMachine,
        kv: &mut Map,
        index: u64,
        secret: u8,
        replaces: Option<u64>,
        time_ms: u64,
    ) -> Outcome {
        let mut command = Command::new(
            Actor::default(),
            None,
            Action::RotateCookieSecret {
                secret: Secret([secret; 16]),
                replaces,
            },
        );
        command.time_ms = time_ms;
        let effect = machine.apply(kv, index, &command.encode().unwrap());
        for w in effect.writes {
            w.apply_to(kv);
        }
        Outcome::decode(&effect.outcome).unwrap()
    }

    #[test]
    fn a_rotation_keeps_the_previous_secret_and_only_the_first_of_two_applies() {
        let machine = super::super::GtmMachine::default();
        let mut kv = Map::new();
        assert!(matches!(
            rotate(&machine, &mut kv, 1, 1, None, 100),
            Outcome::Applied {
                changed: true,
                version: 0,
                ..
            }
        ));
        let s = secrets_of(&kv).unwrap();
        assert_eq!(
            (s.current, s.previous, s.created_ms),
            (Secret([1; 16]), None, 100)
        );
        // Two leaders both saw the secret of 100: the second changes nothing.
        rotate(&machine, &mut kv, 2, 2, Some(100), 200);
        assert!(matches!(
            rotate(&machine, &mut kv, 3, 3, Some(100), 201),
            Outcome::Applied { changed: false, .. }
        ));
        assert!(matches!(
            rotate(&machine, &mut kv, 4, 4, None, 202),
            Outcome::Applied { changed: false, .. }
        ));
        let s = secrets_of(&kv).unwrap();
        assert_eq!(
            (s.current, s.previous, s.created_ms),
            (Secret([2; 16]), Some(Secret([1; 16])), 200)
        );
        // Not configuration: no version, no history.
        assert_eq!(super::super::version_of(&kv), 0);
        assert!(super::super::history_of(&kv).is_empty());
        let shown = format!(
            "{:?}",
            Action::RotateCookieSecret {
                secret: Secret([0xAB; 16]),
                replaces: None
            }
        );
        assert!(
            !shown.contains("171") && !shown.to_lowercase().contains("ab, "),
            "{shown}"
        );
    }
}
