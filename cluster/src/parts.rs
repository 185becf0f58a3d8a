//! A configuration text cut into parts, so that a text which changes in
//! one place is kept by writing that place only.
//!
//! A text is cut at line starts: before every `[[domain]]` line, so an
//! edit of one domain changes that domain's parts only, and, once a part
//! holds [`MIN_PART`] bytes, before a line whose first bytes hash to a
//! chosen value (about one line in [`AVERAGE_LINES`]). That cut depends
//! only on the bytes at it (content-defined), so inserting or removing a
//! record moves no cut but its neighbours': a one-record edit of a large
//! domain changes a part or two, whether the records are `[[` tables or
//! inline tables a line. The cut is a storage matter only: the parts
//! joined give the text back byte for byte, whatever it holds. Both the
//! replicated map (the committed text and its history) and a device's own
//! copy of its configuration keep texts so.

/// About one line in this many starts a part, past [`MIN_PART`].
pub const AVERAGE_LINES: u64 = 512;
/// No part but a domain's last is shorter than this many bytes: a text of
/// many alike lines is not cut into parts of a line each.
pub const MIN_PART: usize = 8 << 10;
/// The bytes from a line's start that decide whether a part starts there:
/// enough to hold what tells a record from its neighbours.
const WINDOW: usize = 64;

/// `text` cut into parts, in order (none for an empty text).
pub fn cut(text: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut line = 0;
    while line < text.len() {
        if line > start && starts_part(&text[line..], line - start) {
            parts.push(&text[start..line]);
            start = line;
        }
        line = match text[line..].iter().position(|&b| b == b'\n') {
            Some(end) => line + end + 1,
            None => text.len(),
        };
    }
    if start < text.len() {
        parts.push(&text[start..]);
    }
    parts
}

/// Whether a part starts at this line (`rest`: the text from the line on;
/// `held`: the bytes of the part so far).
fn starts_part(rest: &[u8], held: usize) -> bool {
    rest.starts_with(b"[[domain]]")
        || (held >= MIN_PART
            && fnv1a(&rest[..rest.len().min(WINDOW)]).is_multiple_of(AVERAGE_LINES))
}

/// FNV-1a, 64 bits: the same on every device and with every build.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The name of a part: the first 16 bytes of the SHA-256 of its bytes.
pub fn part_hash(part: &[u8]) -> [u8; 16] {
    let digest = ring::digest::digest(&ring::digest::SHA256, part);
    let mut hash = [0; 16];
    hash.copy_from_slice(&digest.as_ref()[..16]);
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_cut_before_each_domain_and_joins_back_whole() {
        let text = b"[[check]]\nname = \"a\"\n\n[[domain]]\nname = \"x\"\n# [[domain]] in a comment\n[[domain.record]]\nname = \"w\"\n\n[[domain]]\nname = \"y\"\n";
        let parts = cut(text);
        assert_eq!(parts.len(), 3);
        assert!(parts[1].starts_with(b"[[domain]]\nname = \"x\""));
        assert!(parts[2].starts_with(b"[[domain]]\nname = \"y\""));
        assert_eq!(parts.concat(), text);
        assert_eq!(cut(b"[[domain]]\nname = \"x\"").len(), 1);
        assert!(cut(b"").is_empty());
        assert_eq!(
            cut(b"no domain, no end of line"),
            vec![&b"no domain, no end of line"[..]]
        );
    }

    /// A domain of records as `[[domain.record]]` tables, or as inline
    /// tables a line.
    fn records(inline: bool, names: impl Iterator<Item = usize>) -> String {
        let mut text = String::from("[[domain]]\nname = \"big.test\"\n");
        if inline {
            text.push_str("records = [\n");
        }
        for i in names {
            text.push_str(&if inline {
                format!("{{name=\"host{i}\",type=\"A\",addresses=[{{ip=\"192.0.2.1\"}}]}},\n")
            } else {
                format!(
                    "\n[[domain.record]]\nname = \"host{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
                )
            });
        }
        if inline {
            text.push_str("]\n");
        }
        text
    }

    #[test]
    fn a_large_domain_is_cut_inside_and_one_edit_changes_a_part_or_two() {
        for inline in [false, true] {
            let before = records(inline, 0..20_000);
            let parts = cut(before.as_bytes());
            assert_eq!(parts.concat(), before.as_bytes());
            assert!(
                parts.iter().rev().skip(1).all(|p| p.len() >= MIN_PART),
                "no part is short but the last"
            );
            assert!((20..200).contains(&parts.len()), "{} parts", parts.len());
            let kept: std::collections::HashSet<&[u8]> = parts.iter().copied().collect();
            // A record inserted in the middle, one removed further on:
            // the parts away from them stay.
            let after = records(
                inline,
                (0..10_000)
                    .chain([99_999])
                    .chain((10_000..20_000).filter(|&i| i != 15_000)),
            );
            let changed = cut(after.as_bytes())
                .into_iter()
                .filter(|p| !kept.contains(p))
                .count();
            assert!((2..=4).contains(&changed), "{changed} parts changed");
        }
    }

    #[test]
    fn a_part_is_named_by_its_bytes() {
        assert_eq!(part_hash(b"abc"), part_hash(b"abc"));
        assert_ne!(part_hash(b"abc"), part_hash(b"abd"));
        // SHA-256 of "abc" begins ba7816bf 8f01cfea 414140de 5dae2223.
        assert_eq!(part_hash(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf]);
    }
}
