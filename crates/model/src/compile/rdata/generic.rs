//! RFC 3597 §5: any type's data written generically, `\# LENGTH HEX`.

/// Whether `value` is written in the generic form (it starts with the
/// token `\#`).
pub(super) fn is_generic(value: &str) -> bool {
    let mut words = value.split_ascii_whitespace();
    words.next() == Some("\\#")
}

/// The bytes of a value in the generic form: `\#`, the length in decimal,
/// then that many bytes in hexadecimal, in one or more words.
pub(super) fn bytes(value: &str) -> Result<Vec<u8>, String> {
    let mut words = value.split_ascii_whitespace();
    if words.next() != Some("\\#") {
        return Err("the generic form starts with \\#".into());
    }
    let length: usize = match words.next() {
        Some(l) if l.bytes().all(|b| b.is_ascii_digit()) => l
            .parse()
            .ok()
            .filter(|n| *n <= usize::from(u16::MAX))
            .ok_or_else(|| format!("length {l} is over 65535"))?,
        Some(l) => return Err(format!("\"{l}\" is not a length in decimal")),
        None => return Err("\\# needs a length (\\# 0 for no data)".into()),
    };
    let hex: String = words.collect();
    if !hex.len().is_multiple_of(2) {
        return Err(format!("\"{hex}\" has an odd number of hexadecimal digits"));
    }
    let data = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("\"{hex}\" is not hexadecimal"))
        })
        .collect::<Result<Vec<u8>, String>>()?;
    if data.len() != length {
        return Err(format!(
            "the length says {length} bytes and the data has {}",
            data.len()
        ));
    }
    Ok(data)
}

/// `data` in the generic form.
pub fn write(data: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = format!("\\# {}", data.len());
    if !data.is_empty() {
        out.push(' ');
        for b in data {
            let _ = write!(out, "{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rfc_3597_data() {
        assert_eq!(bytes("\\# 4 0A000001").unwrap(), vec![10, 0, 0, 1]);
        assert_eq!(bytes("\\# 4 0a00 0001").unwrap(), vec![10, 0, 0, 1]);
        assert_eq!(bytes("\\# 0").unwrap(), Vec::<u8>::new());
        assert_eq!(write(&[10, 0, 0, 1]), "\\# 4 0A000001");
        assert_eq!(write(&[]), "\\# 0");
        for (bad, why) in [
            ("\\# 3 0A000001", "says 3 bytes and the data has 4"),
            ("\\# 4 0A00001", "odd number"),
            ("\\# 2 zz00", "not hexadecimal"),
            ("\\# x 00", "not a length"),
            ("\\#", "needs a length"),
            ("\\# 70000 00", "over 65535"),
        ] {
            let e = bytes(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
