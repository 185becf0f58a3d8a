//! The cluster's accounts: named users (with a password) and named API
//! tokens, each with a role. Replicated state (key `accounts` of the
//! replicated map, JSON), changed only by account commands through the Raft
//! log, so every device knows every account and a restart keeps them.
//!
//! Only digests are kept: a user's password as an argon2id PHC string
//! ([`super::password`]), a token's secret as its SHA-256 (the secret is
//! 256 random bits, so a fast digest is enough). A token reads
//! `gtm1.<name>.<64 hex digits>`: the name finds the entry, the digest
//! checks the secret.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Role;
use gtm_model::actor::Actor;

/// The replicated map's key.
pub const ACCOUNTS_KEY: &str = "accounts";
/// What the device's own `api-token` file acts as; no account may take it.
pub const DEVICE_TOKEN_NAME: &str = "admin";
/// The prefix of every named token.
const TOKEN_PREFIX: &str = "gtm1.";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounts {
    #[serde(default)]
    pub users: BTreeMap<String, User>,
    #[serde(default)]
    pub tokens: BTreeMap<String, Token>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub role: Role,
    /// argon2id, PHC string format.
    pub password: String,
    pub time_ms: u64,
    pub by: Actor,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    pub role: Role,
    /// SHA-256 of the secret part, hex.
    pub digest: String,
    pub time_ms: u64,
    pub by: Actor,
}

/// An account as the API lists it: never a digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AccountInfo {
    pub name: String,
    /// `user` or `token`.
    pub kind: String,
    pub role: Role,
    /// When it was made or last changed (ms since the epoch), and by whom.
    pub time_ms: u64,
    pub by: Actor,
}

impl Accounts {
    /// The accounts of a replicated map (none when it has none).
    pub fn of(kv: &gtm_cluster::Map) -> Self {
        kv.get(ACCOUNTS_KEY)
            .and_then(|v| serde_json::from_slice(v).ok())
            .unwrap_or_default()
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Every account, users first, each by name.
    pub fn list(&self) -> Vec<AccountInfo> {
        let users = self.users.iter().map(|(name, u)| AccountInfo {
            name: name.clone(),
            kind: "user".into(),
            role: u.role,
            time_ms: u.time_ms,
            by: u.by.clone(),
        });
        let tokens = self.tokens.iter().map(|(name, t)| AccountInfo {
            name: name.clone(),
            kind: "token".into(),
            role: t.role,
            time_ms: t.time_ms,
            by: t.by.clone(),
        });
        users.chain(tokens).collect()
    }

    /// The name and role a bearer token stands for, if it is a live one.
    pub fn token(&self, given: &str) -> Option<(String, Role)> {
        let (name, secret) = given.strip_prefix(TOKEN_PREFIX)?.rsplit_once('.')?;
        let entry = self.tokens.get(name)?;
        let digest = digest_hex(secret);
        gtm_cluster::constant_time_eq(digest.as_bytes(), entry.digest.as_bytes())
            .then(|| (name.to_string(), entry.role))
    }

    /// The current role of an account by name (for a session, looked up on
    /// every request).
    pub fn role_of(&self, name: &str) -> Option<Role> {
        self.users
            .get(name)
            .map(|u| u.role)
            .or_else(|| self.tokens.get(name).map(|t| t.role))
    }
}

/// A new token for `name`: the text to hand to its holder (shown once) and
/// the digest to keep.
pub fn new_token(name: &str) -> std::io::Result<(String, String)> {
    let secret = gtm_model::random::hex(&gtm_model::random::bytes::<32>()?);
    Ok((
        format!("{TOKEN_PREFIX}{name}.{secret}"),
        digest_hex(&secret),
    ))
}

fn digest_hex(secret: &str) -> String {
    gtm_model::random::hex(ring::digest::digest(&ring::digest::SHA256, secret.as_bytes()).as_ref())
}

/// Why a name cannot be an account's ([`check_name`]).
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    #[error(
        "account name {name:?} is not valid: 1 to 32 of a-z, 0-9, '-' and '_', starting with a letter"
    )]
    Invalid { name: String },
    /// The name of the token in each device's own api-token file.
    #[error("account name {name:?} is taken by each device's own api-token file")]
    Taken { name: String },
}

/// Checks an account name: 1 to 32 of `a-z 0-9 - _`, starting with a
/// letter, and not the device token's name.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        return Err(NameError::Invalid { name: name.into() });
    }
    if name == DEVICE_TOKEN_NAME {
        return Err(NameError::Taken { name: name.into() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_found_by_its_name_and_checked_by_its_digest() {
        let (text, digest) = new_token("ci").expect("token");
        let mut accounts = Accounts::default();
        accounts.tokens.insert(
            "ci".into(),
            Token {
                role: Role::Operator,
                digest,
                time_ms: 0,
                by: Actor::default(),
            },
        );
        assert_eq!(accounts.token(&text), Some(("ci".into(), Role::Operator)));
        let mut wrong = text.clone();
        wrong.pop();
        wrong.push(if text.ends_with('0') { '1' } else { '0' });
        assert_eq!(accounts.token(&wrong), None);
        assert_eq!(accounts.token("gtm1.other.00"), None);
        assert_eq!(accounts.token("not a token"), None);
        assert_eq!(accounts.role_of("ci"), Some(Role::Operator));
        assert!(accounts.list().iter().all(|a| a.kind == "token"));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("ann").is_ok());
        assert!(check_name("ci-bot_2").is_ok());
        for bad in ["", "Ann", "1ann", "a.b", "admin", &"a".repeat(33)] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
