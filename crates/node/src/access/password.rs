//! Users' passwords: argon2id (memory-hard) in the PHC string format, from
//! the RustCrypto `argon2` crate with its default parameters (19 MiB, 2
//! passes). Hashing and checking take tens of milliseconds: callers run
//! them on the blocking pool.

use argon2::{
    Argon2,
    password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash},
};

/// Passwords shorter than this are refused.
pub const MIN_LENGTH: usize = 10;
/// Longer passwords are refused (hashing is bounded work).
pub const MAX_LENGTH: usize = 1024;

/// Why a new password was not hashed.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("the password has {chars} characters; give at least {MIN_LENGTH}")]
    TooShort { chars: usize },
    #[error("the password is over {MAX_LENGTH} bytes")]
    TooLong,
    #[error("hashing the password failed: {0}")]
    Hashing(argon2::password_hash::Error),
}

/// Hashes a new password, after checking its length.
pub fn hash(password: &str) -> Result<String, PasswordError> {
    let chars = password.chars().count();
    if chars < MIN_LENGTH {
        return Err(PasswordError::TooShort { chars });
    }
    if password.len() > MAX_LENGTH {
        return Err(PasswordError::TooLong);
    }
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(PasswordError::Hashing)
}

/// Whether `password` matches a stored PHC string. A stored string that
/// does not parse matches nothing.
pub fn verify(password: &str, stored: &str) -> bool {
    if password.len() > MAX_LENGTH {
        return false;
    }
    match PasswordHash::new(stored) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// The work of [`verify`] against a password no one has, for a user name
/// that does not exist.
pub fn verify_nothing(password: &str) {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let stored = DUMMY.get_or_init(|| hash("no user has this password").unwrap_or_default());
    let _ = verify(password, stored);
}

/// Whether a stored string is an argon2id PHC string this device can check
/// (what the state machine accepts in a user command).
pub fn is_phc(stored: &str) -> bool {
    stored.starts_with("$argon2id$") && PasswordHash::new(stored).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_matches_its_hash_only() {
        let h = hash("correct horse battery").expect("hash");
        assert!(is_phc(&h));
        assert!(verify("correct horse battery", &h));
        assert!(!verify("correct horse batterz", &h));
        assert!(!verify("correct horse battery", "not a hash"));
        assert!(hash("short").is_err());
        assert_ne!(h, hash("correct horse battery").expect("hash"), "salted");
    }
}
