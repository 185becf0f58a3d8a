//! A configuration text cut into parts, so that a text which changes in
//! one place is kept by writing that place only.
//!
//! A text is cut before lines that open a TOML array of tables (`[[`):
//! before every `[[domain]]` line, so an edit of one domain changes that
//! domain's parts only, and, inside a long run of tables, before those
//! whose first bytes hash to a chosen value, about one table in
//! [`AVERAGE_TABLES`]. The second cut depends only on the bytes at the
//! cut, so inserting or removing a table moves no cut but its own
//! neighbours': a one-record edit of a large domain changes one part or
//! two. The cut is a storage matter only: the parts joined give the text
//! back byte for byte, whatever it holds. Both the replicated map's
//! history and a device's own copy of its configuration keep texts so.

/// About one `[[` table in this many starts a part inside a run.
pub const AVERAGE_TABLES: u64 = 256;
/// The bytes from a table's first line that decide whether a part starts
/// there: its header and the first fields that tell it from its neighbours.
const WINDOW: usize = 64;

/// `text` cut into parts, in order (none for an empty text).
pub fn cut(text: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut line = 0;
    while line < text.len() {
        if line > start && starts_part(&text[line..]) {
            parts.push(&text[start..line]);
            start = line;
        }
        line = match memchr(b'\n', &text[line..]) {
            Some(end) => line + end + 1,
            None => text.len(),
        };
    }
    if start < text.len() {
        parts.push(&text[start..]);
    }
    parts
}

fn memchr(byte: u8, bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == byte)
}

/// Whether a part starts at this line (`rest`: the text from the line on).
fn starts_part(rest: &[u8]) -> bool {
    if !rest.starts_with(b"[[") {
        return false;
    }
    if rest.starts_with(b"[[domain]]") {
        return true;
    }
    fnv1a(&rest[..rest.len().min(WINDOW)]).is_multiple_of(AVERAGE_TABLES)
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

    fn records(names: impl Iterator<Item = usize>) -> String {
        let mut text = String::from("[[domain]]\nname = \"big.test\"\n");
        for i in names {
            text.push_str(&format!(
                "\n[[domain.record]]\nname = \"host{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
            ));
        }
        text
    }

    #[test]
    fn a_large_domain_is_cut_inside_and_one_edit_changes_one_part_or_two() {
        let before = records(0..20_000);
        let parts = cut(before.as_bytes());
        assert_eq!(parts.concat(), before.as_bytes());
        // About one record in AVERAGE_TABLES starts a part.
        assert!((20..200).contains(&parts.len()), "{} parts", parts.len());
        let kept: std::collections::HashSet<&[u8]> = parts.iter().copied().collect();
        // A record inserted in the middle: the parts away from it stay.
        let after = records((0..10_000).chain([99_999]).chain(10_000..20_000));
        let changed = cut(after.as_bytes())
            .into_iter()
            .filter(|p| !kept.contains(p))
            .count();
        assert!((1..=2).contains(&changed), "{changed} parts changed");
    }

    #[test]
    fn a_part_is_named_by_its_bytes() {
        assert_eq!(part_hash(b"abc"), part_hash(b"abc"));
        assert_ne!(part_hash(b"abc"), part_hash(b"abd"));
        // SHA-256 of "abc" begins ba7816bf 8f01cfea 414140de 5dae2223.
        assert_eq!(part_hash(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf]);
    }
}
