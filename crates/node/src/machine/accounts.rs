//! Account commands in the state machine (docs/access.md): users and
//! tokens are made, changed and removed here, on every device, and each
//! change is a GTM Logs line naming who made it.
//!
//! Key `accounts`: JSON [`Accounts`]. Account commands do not move the
//! configuration version and do not depend on the configuration.

use gtm_cluster::Map;

use super::{Change, operator, rejected};
use crate::{
    access::{
        accounts::{ACCOUNTS_KEY, Accounts, Token, User, check_name},
        password,
    },
    command::{AccountChange, Action, Command, Outcome},
};
use gtm_cluster::Write;
use gtm_model::error::ErrorKind;

/// Applies an account command; `None` for other commands.
pub(super) fn run(kv: &Map, index: u64, version: u64, command: &Command) -> Option<Change> {
    let Action::Account(change) = &command.action else {
        return None;
    };
    let mut accounts = Accounts::of(kv);
    let who = &command.actor;
    let (object, line) = match change {
        AccountChange::PutUser {
            name,
            role,
            password: hash,
        } => {
            if let Err(e) = check_name(name) {
                return Some(rejected(ErrorKind::BadRequest, e.to_string()));
            }
            if accounts.tokens.contains_key(name) {
                return Some(rejected(
                    ErrorKind::Conflict,
                    format!("a token is named \"{name}\"; users and tokens share one set of names"),
                ));
            }
            let kept = accounts.users.get(name).map(|u| u.password.clone());
            let password = match (hash, kept) {
                (Some(h), _) if password::is_phc(h) => h.clone(),
                (Some(_), _) => {
                    return Some(rejected(
                        ErrorKind::BadRequest,
                        "the password digest is not an argon2id PHC string",
                    ));
                }
                (None, Some(kept)) => kept,
                (None, None) => {
                    return Some(rejected(
                        ErrorKind::BadRequest,
                        format!("user \"{name}\" does not exist: give a password to create it"),
                    ));
                }
            };
            let verb = if accounts.users.contains_key(name) {
                "changed"
            } else {
                "added"
            };
            accounts.users.insert(
                name.clone(),
                User {
                    role: *role,
                    password,
                    time_ms: command.time_ms,
                    by: who.clone(),
                },
            );
            (
                format!("user {name}"),
                format!("user {name} {verb} (role {role})"),
            )
        }
        AccountChange::DeleteUser { name } => {
            if accounts.users.remove(name).is_none() {
                return Some(rejected(
                    ErrorKind::NotFound,
                    format!("no user named \"{name}\""),
                ));
            }
            (format!("user {name}"), format!("user {name} removed"))
        }
        AccountChange::PutToken { name, role, digest } => {
            if let Err(e) = check_name(name) {
                return Some(rejected(ErrorKind::BadRequest, e.to_string()));
            }
            if accounts.users.contains_key(name) || accounts.tokens.contains_key(name) {
                return Some(rejected(
                    ErrorKind::Conflict,
                    format!(
                        "an account is named \"{name}\" already; revoke it first or pick another name"
                    ),
                ));
            }
            if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Some(rejected(
                    ErrorKind::BadRequest,
                    "the token digest is not 64 hex digits",
                ));
            }
            accounts.tokens.insert(
                name.clone(),
                Token {
                    role: *role,
                    digest: digest.to_ascii_lowercase(),
                    time_ms: command.time_ms,
                    by: who.clone(),
                },
            );
            (
                format!("token {name}"),
                format!("token {name} created (role {role})"),
            )
        }
        AccountChange::DeleteToken { name } => {
            if accounts.tokens.remove(name).is_none() {
                return Some(rejected(
                    ErrorKind::NotFound,
                    format!("no token named \"{name}\""),
                ));
            }
            (format!("token {name}"), format!("token {name} revoked"))
        }
    };
    let mut notes = operator::state_of(kv);
    operator::note(&mut notes, &object, format!("{line} ({who})"));
    Some(Change {
        writes: vec![
            Write::Put {
                key: ACCOUNTS_KEY.into(),
                value: accounts.encode(),
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
