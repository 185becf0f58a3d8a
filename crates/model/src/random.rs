//! Random bytes from the system, and lower-case hex: command ids, secrets,
//! tokens, cookies and content hashes are made with them.

/// Lower-case hex. Without a `format!` per byte: a configuration's
/// thousands of part keys are written on every change.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        text.push(char::from(DIGITS[usize::from(b >> 4)]));
        text.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    text
}

/// `N` bytes from the system's randomness.
pub fn bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut raw = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))?;
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x09, 0xab, 0xf0, 0xff]), "0009abf0ff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn bytes_differ_between_calls() {
        assert_ne!(bytes::<16>().unwrap(), bytes::<16>().unwrap());
    }
}
