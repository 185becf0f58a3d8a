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
    recut(text, &[]).into_iter().map(|(part, _)| part).collect()
}

/// `text` cut into parts as [`cut`] cuts it, for a text edited from one
/// whose parts were `before`: what `text` shares with `before` from its
/// start, and from its end once the cut meets a part of it there, is not
/// cut again. Each part comes with the index in `before` of the part it
/// is, when it was taken from there. The cut decides at each line start
/// from the bytes since the last cut and the [`WINDOW`] bytes on, so a
/// part of the start is kept when those bytes lie within what `text`
/// shares; and the cut from a place where both cut is the same whatever
/// came before, so once it cuts where a shared part of the end starts, the
/// rest is those parts.
pub fn recut<'a>(text: &'a [u8], before: &[&[u8]]) -> Vec<(&'a [u8], Option<usize>)> {
    // The bytes `text` shares with `before`, from the start, by parts.
    let mut shared = 0;
    for part in before {
        if part.is_empty() || !text[shared..].starts_with(part) {
            break;
        }
        shared += part.len();
    }
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, part) in before.iter().enumerate() {
        let end = start + part.len();
        if end + WINDOW > shared {
            break;
        }
        parts.push((&text[start..end], Some(i)));
        start = end;
    }
    // The parts `text` ends with, by where each starts in it, last first.
    let mut tails: Vec<(usize, usize)> = Vec::new();
    let mut end = text.len();
    for (i, part) in before.iter().enumerate().skip(parts.len()).rev() {
        if part.is_empty() || end < start + part.len() || !text[..end].ends_with(part) {
            break;
        }
        end -= part.len();
        tails.push((end, i));
    }
    let mut line = start;
    while line < text.len() {
        if line > start && starts_part(&text[line..], line - start) {
            parts.push((&text[start..line], None));
            start = line;
            if let Ok(t) = tails.binary_search_by(|(at, _)| line.cmp(at))
                && let Some(&(_, first)) = tails.get(t)
            {
                for (i, part) in before.iter().enumerate().skip(first) {
                    parts.push((&text[start..start + part.len()], Some(i)));
                    start += part.len();
                }
                return parts;
            }
        }
        line = match memchr::memchr(b'\n', &text[line..]) {
            Some(end) => line + end + 1,
            None => text.len(),
        };
    }
    if start < text.len() {
        parts.push((&text[start..], None));
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

    /// A small generator of numbers, the same every run.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n.max(1)
        }
    }

    /// Edits of every kind at every place (a line changed, inserted or
    /// removed, near the start, inside, at a cut, near the end; a domain added; the
    /// text unchanged): the cut of the edited text against the parts before
    /// is the text's cut, and every part said to be taken from before is
    /// that part.
    #[test]
    fn a_text_recut_against_its_parts_before_is_cut_as_a_whole_text_is() {
        let mut rng = Lcg(7);
        for round in 0..300 {
            let inline = round % 2 == 0;
            let count = [5, 300, 3_000][round % 3];
            let mut lines: Vec<String> = records(inline, 0..count)
                .lines()
                .map(|l| format!("{l}\n"))
                .collect();
            if round % 5 == 0 {
                lines.extend(
                    records(inline, 0..count / 2)
                        .lines()
                        .map(|l| format!("{l}\n")),
                );
            }
            let before: String = lines.concat();
            let parts = cut(before.as_bytes());
            for _ in 0..1 + rng.below(3) {
                // The line a part of before starts with: where a cut was.
                let at_cut = {
                    let i = 1 + rng.below(parts.len().saturating_sub(1));
                    parts[..i.min(parts.len())]
                        .iter()
                        .map(|p| p.iter().filter(|&&b| b == b'\n').count())
                        .sum()
                };
                let at = match rng.below(5) {
                    0 => rng.below(4),
                    1 => lines.len().saturating_sub(1 + rng.below(4)),
                    2 => at_cut,
                    _ => rng.below(lines.len()),
                }
                .min(lines.len());
                match rng.below(5) {
                    0 if at < lines.len() => {
                        lines.remove(at);
                    }
                    1 => lines.insert(
                        at,
                        format!("{{name=\"new{}\",type=\"A\"}},\n", rng.below(1_000)),
                    ),
                    2 if at < lines.len() => {
                        lines[at] = format!("# changed {}\n", rng.below(1_000))
                    }
                    3 => lines.insert(at, "[[domain]]\nname = \"added.test\"\n".into()),
                    _ => {}
                }
            }
            let after: String = lines.concat();
            let recut = recut(after.as_bytes(), &parts);
            let whole = cut(after.as_bytes());
            assert_eq!(
                recut.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
                whole,
                "round {round}"
            );
            for (part, was) in &recut {
                if let Some(i) = was {
                    assert_eq!(*part, parts[*i], "round {round}");
                }
            }
            if after == before && parts.len() > 2 {
                assert!(recut.iter().filter(|(_, was)| was.is_none()).count() <= 1);
            }
        }
    }

    /// A one-line edit in a large domain cuts only near the edit.
    #[test]
    fn a_recut_takes_the_parts_away_from_an_edit_from_before() {
        let before = records(true, 0..20_000);
        let parts = cut(before.as_bytes());
        let after = before.replacen("host10000\"", "host10000x\"", 1);
        let recut = recut(after.as_bytes(), &parts);
        let new = recut.iter().filter(|(_, was)| was.is_none()).count();
        assert!((1..=3).contains(&new), "{new} parts cut again");
        assert_eq!(recut.len(), parts.len());
    }

    #[test]
    fn a_part_is_named_by_its_bytes() {
        assert_eq!(part_hash(b"abc"), part_hash(b"abc"));
        assert_ne!(part_hash(b"abc"), part_hash(b"abd"));
        // SHA-256 of "abc" begins ba7816bf 8f01cfea 414140de 5dae2223.
        assert_eq!(part_hash(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf]);
    }
}
