//! DNS names as keys: the lower-case wire form a snapshot finds a name by,
//! shared by the compiled configuration (owner hashes) and the DNS layer.

use hickory_proto::rr::Name;

/// The lower-case wire form of a name: the key a snapshot finds
/// its nodes by, and the compiled configuration's owners are hashed by.
pub fn wire_key(name: &Name) -> Box<[u8]> {
    let mut out = Vec::with_capacity(name.len() + 1);
    for label in name.to_lowercase().iter() {
        out.push(label.len() as u8);
        out.extend_from_slice(label);
    }
    out.push(0);
    out.into_boxed_slice()
}

/// A record type as a record's label writes it, and its view when it is
/// a view's record: `A@internal` is `("A", Some("internal"))`
/// (docs/views.md).
pub fn type_and_view(text: &str) -> (&str, Option<&str>) {
    match text.split_once('@') {
        Some((rtype, view)) => (rtype, Some(view)),
        None => (text, None),
    }
}

/// The name of a key [`wire_key`] made (the root for bytes that are not
/// one, which no key is).
pub fn key_name(key: &[u8]) -> Name {
    let mut labels = Vec::new();
    let mut at = 0;
    while let Some(&len) = key.get(at) {
        let len = usize::from(len);
        if len == 0 {
            break;
        }
        match key.get(at + 1..at + 1 + len) {
            Some(label) => labels.push(label),
            None => return Name::root(),
        }
        at += 1 + len;
    }
    Name::from_labels(labels).unwrap_or_else(|_| Name::root())
}

/// What is wrong with a DNS name as written.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    /// Not a DNS name at all (an empty label, a label over 63 bytes, ...).
    #[error("\"{name}\" is not a valid DNS name: {reason}")]
    Invalid {
        name: String,
        reason: hickory_proto::ProtoError,
    },
    /// Over 255 bytes once made absolute under its origin.
    #[error("\"{name}\" is too long: {reason}")]
    TooLong {
        name: String,
        reason: hickory_proto::ProtoError,
    },
    /// Not a TSIG key name as [`check_tsig_key_name`] reads one.
    #[error(
        "TSIG key name {name:?} is not valid: a domain name (labels of 1 to 63 of a-z, 0-9, '-' and '_', separated by dots, no final dot)"
    )]
    TsigKey { name: String },
}

/// Checks a TSIG key name: a domain name of 1 to 253 characters, labels of 1 to
/// 63 of `a-z 0-9 - _`, given in lower case.
pub fn check_tsig_key_name(name: &str) -> Result<(), NameError> {
    let labels_ok = name.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    });
    if name.is_empty() || name.len() > 253 || !labels_ok {
        return Err(NameError::TsigKey {
            name: name.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsig_key_names_are_checked() {
        assert!(check_tsig_key_name("xfr-key").is_ok());
        assert!(check_tsig_key_name("transfer.example.test").is_ok());
        for bad in ["", "Key", "a..b", "a.", "a b", &"a".repeat(64)] {
            assert!(check_tsig_key_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_key_gives_its_name_back() {
        let name = Name::from_ascii("WWW.Example.test.").unwrap();
        let key = wire_key(&name);
        assert_eq!(&key[..4], b"\x03www");
        assert_eq!(
            key_name(&key),
            Name::from_ascii("www.example.test.").unwrap()
        );
    }
}
