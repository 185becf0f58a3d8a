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
    let mut source = text;
    let (cuts, _) = scan(&mut source, |_| None);
    cuts.into_iter().map(|range| &text[range]).collect()
}

/// `text` cut into parts, each with its name ([`part_hash`]).
pub fn named(text: &[u8]) -> Vec<([u8; 16], Part<'_>)> {
    cut(text)
        .into_iter()
        .map(|part| (part_hash(part), Part::plain(part)))
        .collect()
}

/// A text given as an edit of another: the other's first `front` bytes,
/// then `middle`, then the other's last `back` bytes. A whole new text is
/// `front` and `back` 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Splice {
    pub front: usize,
    pub middle: Vec<u8>,
    pub back: usize,
}

impl Splice {
    /// A text that takes nothing from the one before.
    pub fn whole(text: Vec<u8>) -> Self {
        Self {
            front: 0,
            middle: text,
            back: 0,
        }
    }

    /// The length of the text.
    pub fn len(&self) -> usize {
        self.front + self.middle.len() + self.back
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The first byte of a part kept deflated ([`pack`]). A part of a
/// configuration's text never starts with it: the text is TOML, which
/// has no NUL.
const PACKED: u8 = 0;
/// The bytes before a deflated part's stream: [`PACKED`], then its length
/// (u64, little-endian).
const PACKED_HEAD: usize = 9;
/// Deflate makes at most about this many bytes of one: what a stored
/// length is believed up to when room is made for a part's bytes.
const MOST_INFLATED: usize = 1032;

/// `part` as the replicated map keeps it: [`PACKED`], its length, then
/// its bytes deflated (the fast level). A configuration's text deflates
/// to a fraction of itself, and the map holds every part in memory
/// (docs/decisions.md, "The replicated map's parts deflated").
pub fn pack(part: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = Vec::with_capacity(PACKED_HEAD + part.len() / 4);
    out.push(PACKED);
    out.extend_from_slice(&(part.len() as u64).to_le_bytes());
    let mut encoder = flate2::write::DeflateEncoder::new(out, flate2::Compression::fast());
    match encoder.write_all(part).and_then(|()| encoder.finish()) {
        Ok(packed) => packed,
        // Writing into a `Vec` does not fail; were it to, the part is
        // kept as it is, which reads back the same.
        Err(_) => part.to_vec(),
    }
}

/// One part of a text as it is kept: its bytes, or its bytes deflated
/// ([`pack`]), inflated when first read. A text is read by place
/// ([`Pieces`]), so an edit of a large text inflates the parts about
/// the edit only.
#[derive(Debug, Clone)]
pub struct Part<'a> {
    kept: &'a [u8],
    len: usize,
    packed: bool,
    inflated: std::sync::OnceLock<Vec<u8>>,
}

impl<'a> Part<'a> {
    /// Bytes kept as they are.
    pub fn plain(bytes: &'a [u8]) -> Self {
        Self {
            kept: bytes,
            len: bytes.len(),
            packed: false,
            inflated: std::sync::OnceLock::new(),
        }
    }

    /// A part as [`pack`] made it, or as it is. `None` when a deflated
    /// one is cut short of its length.
    pub fn kept(kept: &'a [u8]) -> Option<Self> {
        match kept.split_first() {
            Some((&PACKED, rest)) => {
                let (len, _) = rest.split_first_chunk::<8>()?;
                Some(Self {
                    kept,
                    len: usize::try_from(u64::from_le_bytes(*len)).ok()?,
                    packed: true,
                    inflated: std::sync::OnceLock::new(),
                })
            }
            _ => Some(Self::plain(kept)),
        }
    }

    /// The length of its bytes (not inflated to be known).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The room its bytes can take: its length, unless a stored length
    /// says more than its deflated bytes can make (a damaged store must
    /// not make a device reserve what it says).
    fn room(&self) -> usize {
        self.len.min(self.kept.len().saturating_mul(MOST_INFLATED))
    }

    /// Its bytes. A deflated part that does not inflate to its length (a
    /// store damaged under sled's checksums) reads as no bytes, which no
    /// text of its length is: its readers find it short, never other
    /// bytes.
    pub fn bytes(&self) -> &[u8] {
        if !self.packed {
            return self.kept;
        }
        self.inflated.get_or_init(|| {
            use std::io::Read as _;
            let stream = self.kept.get(PACKED_HEAD..).unwrap_or_default();
            let mut out = Vec::with_capacity(self.room());
            let read = flate2::read::DeflateDecoder::new(stream)
                .take((self.room() as u64).saturating_add(1))
                .read_to_end(&mut out);
            match read {
                Ok(n) if n == self.len => out,
                _ => Vec::new(),
            }
        })
    }
}

impl PartialEq for Part<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.bytes() == other.bytes()
    }
}

impl Eq for Part<'_> {}

/// The text `parts` make, joined.
pub fn joined(parts: &[Part]) -> Vec<u8> {
    let room = parts
        .iter()
        .fold(0usize, |room, p| room.saturating_add(p.room()));
    let mut text = Vec::with_capacity(room);
    for part in parts {
        text.extend_from_slice(part.bytes());
    }
    text
}

/// One part of a text [`recut`] cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// The part of the text before at this index, the same bytes.
    Before(usize),
    /// A part of bytes the text before does not have there: these bytes
    /// of [`Recut::bytes`].
    New(std::ops::Range<usize>),
}

/// What [`recut`] gives: the parts, and the bytes its new parts are of.
#[derive(Debug)]
pub struct Recut {
    pub parts: Vec<Cut>,
    pub bytes: Vec<u8>,
}

impl Recut {
    /// The bytes of part `cut`, `before` being the text's parts before.
    pub fn of<'s>(&'s self, cut: &Cut, before: &'s [Part<'_>]) -> Option<&'s [u8]> {
        match cut {
            Cut::Before(i) => before.get(*i).map(Part::bytes),
            Cut::New(range) => self.bytes.get(range.clone()),
        }
    }
}

/// A text in the pieces it is kept in (its parts), read by place without
/// joining it.
#[derive(Debug)]
pub struct Pieces<'a> {
    pieces: &'a [Part<'a>],
    /// Where each piece starts, and the text's end.
    starts: Vec<usize>,
}

impl<'a> Pieces<'a> {
    pub fn new(pieces: &'a [Part<'a>]) -> Self {
        let starts = std::iter::once(0)
            .chain(pieces.iter().scan(0, |at, p| {
                *at += p.len();
                Some(*at)
            }))
            .collect();
        Self { pieces, starts }
    }

    /// The text's length.
    pub fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text's bytes in `range` (within the text), piece by piece,
    /// each with where it starts.
    pub fn slices(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl DoubleEndedIterator<Item = (usize, &'a [u8])> {
        // The pieces from the last that starts at or before the range to
        // the last that starts before its end.
        let first = self
            .starts
            .partition_point(|&s| s <= range.start)
            .saturating_sub(1);
        let last = self
            .starts
            .partition_point(|&s| s < range.end)
            .min(self.pieces.len());
        let first = first.min(last);
        self.pieces[first..last]
            .iter()
            .zip(&self.starts[first..last])
            .filter_map(move |(piece, &at)| {
                let from = range.start.max(at) - at;
                let to = range.end.min(at + piece.len()) - at;
                piece
                    .bytes()
                    .get(from..to)
                    .filter(|s| !s.is_empty())
                    .map(|s| (at + from, s))
            })
    }

    /// How many of `bytes` the text holds from `at` on.
    pub fn same_from(&self, at: usize, bytes: &[u8]) -> usize {
        let mut same = 0;
        for (_, slice) in self.slices(at..at + bytes.len()) {
            let n = common_prefix(slice, &bytes[same..]);
            same += n;
            if n < slice.len() {
                break;
            }
        }
        same
    }

    /// How many of `bytes`, from their end, the text holds before `end`.
    pub fn same_to(&self, end: usize, bytes: &[u8]) -> usize {
        let mut same = 0;
        for (_, slice) in self.slices(end.saturating_sub(bytes.len())..end).rev() {
            let rest = &bytes[..bytes.len() - same];
            let n = slice
                .iter()
                .rev()
                .zip(rest.iter().rev())
                .take_while(|(a, b)| a == b)
                .count();
            same += n;
            if n < slice.len() {
                break;
            }
        }
        same
    }

    /// Appends the text's bytes in `range` to `into`.
    pub fn copy(&self, range: std::ops::Range<usize>, into: &mut Vec<u8>) {
        for (_, slice) in self.slices(range) {
            into.extend_from_slice(slice);
        }
    }

    /// The byte at `at`, if the text has one there.
    pub fn byte(&self, at: usize) -> Option<u8> {
        self.slices(at..at + 1)
            .next()
            .and_then(|(_, s)| s.first().copied())
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The text `splice` makes of the text whose parts are `before`, cut as
/// [`cut`] cuts it, without making the text: the parts before are taken
/// where the cut is theirs, and only the bytes about the edit are cut.
///
/// The cut decides at each line start from the bytes since the last cut
/// and the [`WINDOW`] bytes on. So a part of the front is the text's when
/// it ends [`WINDOW`] bytes before the edit; and once the cut of the
/// edited bytes meets a place where a part of the back started before,
/// the rest is those parts (from a place where both cut, the same bytes
/// are cut the same). The bytes cut are those from the first part not
/// kept to that place: a part or two about a small edit.
/// `splice.front` and `splice.back` beyond the text before are taken as
/// its whole.
pub fn recut(before: &[Part], splice: Splice) -> Recut {
    let text = Pieces::new(before);
    let total = text.len();
    let front = splice.front.min(total);
    let back = splice.back.min(total - front);
    let kept = before
        .iter()
        .zip(&text.starts[1..])
        .take_while(|(part, end)| !part.is_empty() && *end + WINDOW <= front)
        .count();
    let from = text.starts[kept];
    // Where a new text starts (a whole apply), its bytes as they are, not
    // a copy of a text of megabytes.
    let middle = splice.middle.len();
    let bytes = if from == front {
        splice.middle
    } else {
        let mut bytes = Vec::with_capacity(front - from + middle);
        text.copy(from..front, &mut bytes);
        bytes.extend_from_slice(&splice.middle);
        bytes
    };
    let mut source = Edited {
        bytes,
        text: &text,
        next: total - back,
    };
    // Where the back starts in the bytes cut, and in the text before.
    let back_at = front - from + middle;
    let back_from = total - back;
    let (cuts, resumed) = scan(&mut source, |at| {
        let was = at.checked_sub(back_at)? + back_from;
        let i = text.starts.binary_search(&was).ok()?;
        (i < before.len()).then_some(i)
    });
    let mut parts: Vec<Cut> = (0..kept).map(Cut::Before).collect();
    parts.extend(cuts.into_iter().map(Cut::New));
    if let Some(first) = resumed {
        parts.extend((first..before.len()).map(Cut::Before));
    }
    Recut {
        parts,
        bytes: source.bytes,
    }
}

/// Bytes to cut, which may grow (by the parts of the back of an edit)
/// when the cut needs more of them.
trait Source {
    fn bytes(&self) -> &[u8];
    /// Appends more of the text; false at its end.
    fn grow(&mut self) -> bool;
}

impl Source for &[u8] {
    fn bytes(&self) -> &[u8] {
        self
    }

    fn grow(&mut self) -> bool {
        false
    }
}

/// The edited bytes, then the back of the text before, a part at a time.
struct Edited<'a> {
    bytes: Vec<u8>,
    text: &'a Pieces<'a>,
    /// Where in the text before the bytes not yet appended start.
    next: usize,
}

impl Source for Edited<'_> {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn grow(&mut self) -> bool {
        // The part holding `next`: the last that starts at or before it.
        let i = self.text.starts.partition_point(|&s| s <= self.next);
        let Some((part, at)) = i
            .checked_sub(1)
            .and_then(|i| Some((self.text.pieces.get(i)?, self.text.starts[i])))
        else {
            return false;
        };
        let Some(rest) = part.bytes().get(self.next - at..).filter(|r| !r.is_empty()) else {
            return false;
        };
        self.bytes.extend_from_slice(rest);
        self.next = at + part.len();
        true
    }
}

/// Cuts the text `source` gives into parts (as ranges of its bytes), from
/// its start, where a part starts. Stops at the first cut for which
/// `resume` says where the parts before resume (returned with the cuts
/// up to it).
fn scan(
    source: &mut impl Source,
    resume: impl Fn(usize) -> Option<usize>,
) -> (Vec<std::ops::Range<usize>>, Option<usize>) {
    let mut cuts = Vec::new();
    let mut start = 0;
    let mut line = 0;
    loop {
        // The line's window whole, unless the text ends first.
        while source.bytes().len() < line + WINDOW && source.grow() {}
        let bytes = source.bytes();
        if line >= bytes.len() {
            break;
        }
        if line > start && starts_part(&bytes[line..], line - start) {
            cuts.push(start..line);
            start = line;
            if let Some(first) = resume(line) {
                return (cuts, Some(first));
            }
        }
        // The next line's start.
        loop {
            let bytes = source.bytes();
            if let Some(end) = memchr::memchr(b'\n', &bytes[line..]) {
                line += end + 1;
                break;
            }
            if !source.grow() {
                line = source.bytes().len();
                break;
            }
        }
    }
    let end = source.bytes().len();
    if start < end {
        cuts.push(start..end);
    }
    (cuts, None)
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
            let whole = cut(after.as_bytes());
            // The edit as the bytes shared from both ends, and as less of
            // them (a writer need not find all it shares).
            let (front, back) = shared_ends(before.as_bytes(), after.as_bytes());
            let short = (
                front.saturating_sub(rng.below(500)),
                back.saturating_sub(rng.below(500)),
            );
            for (front, back) in [(front, back), short, (0, 0)] {
                let splice = Splice {
                    front,
                    middle: after.as_bytes()[front..after.len() - back].to_vec(),
                    back,
                };
                // Half the rounds read the text before from parts kept
                // deflated.
                let kept: Vec<Vec<u8>> = parts
                    .iter()
                    .map(|p| if round % 2 == 0 { pack(p) } else { p.to_vec() })
                    .collect();
                let kept: Vec<Part> = kept.iter().map(|k| Part::kept(k).unwrap()).collect();
                let recut = recut(&kept, splice);
                assert_eq!(recut_bytes(&recut, &kept), whole, "round {round}");
                if after == before && parts.len() > 2 && (front, back) == (before.len(), 0) {
                    let new = recut
                        .parts
                        .iter()
                        .filter(|c| matches!(c, Cut::New(_)))
                        .count();
                    assert!(new <= 1, "round {round}: {new} parts cut again");
                }
            }
        }
    }

    /// How many bytes `a` and `b` share from their start, then from
    /// their end among the rest.
    fn shared_ends(a: &[u8], b: &[u8]) -> (usize, usize) {
        let front = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let most = a.len().min(b.len()) - front;
        let back = a
            .iter()
            .rev()
            .zip(b.iter().rev())
            .take(most)
            .take_while(|(x, y)| x == y)
            .count();
        (front, back)
    }

    /// The parts a recut gives, as bytes.
    fn recut_bytes<'a>(recut: &'a Recut, before: &'a [Part]) -> Vec<&'a [u8]> {
        recut
            .parts
            .iter()
            .map(|c| recut.of(c, before).expect("a part"))
            .collect()
    }

    /// A one-line edit in a large domain cuts only near the edit.
    #[test]
    fn a_recut_takes_the_parts_away_from_an_edit_from_before() {
        let before = records(true, 0..20_000);
        let parts = cut(before.as_bytes());
        let after = before.replacen("host10000\"", "host10000x\"", 1);
        let (front, back) = shared_ends(before.as_bytes(), after.as_bytes());
        let splice = Splice {
            front,
            middle: after.as_bytes()[front..after.len() - back].to_vec(),
            back,
        };
        assert_eq!(splice.middle, b"x");
        let packed: Vec<Vec<u8>> = parts.iter().map(|p| pack(p)).collect();
        let kept: Vec<Part> = packed.iter().map(|k| Part::kept(k).unwrap()).collect();
        let recut = recut(&kept, splice);
        // Only the parts about the edit were inflated to be read.
        let read = kept.iter().filter(|p| p.inflated.get().is_some()).count();
        assert!((1..=4).contains(&read), "{read} parts inflated");
        assert_eq!(recut_bytes(&recut, &kept), cut(after.as_bytes()));
        let new = recut
            .parts
            .iter()
            .filter(|c| matches!(c, Cut::New(_)))
            .count();
        assert!((1..=3).contains(&new), "{new} parts cut again");
        assert_eq!(recut.parts.len(), parts.len());
    }

    #[test]
    fn a_packed_part_reads_back_its_bytes_and_a_damaged_one_none() {
        let text = records(true, 0..500);
        let part = text.as_bytes();
        let packed = pack(part);
        assert!(
            packed.len() * 4 < part.len(),
            "{} of {}",
            packed.len(),
            part.len()
        );
        let kept = Part::kept(&packed).unwrap();
        assert_eq!((kept.len(), kept.bytes()), (part.len(), part));
        assert_eq!(kept, Part::plain(part));
        assert_eq!(Part::kept(part).unwrap().bytes(), part);
        assert_eq!(Part::kept(&pack(b"")).unwrap().bytes(), b"");
        assert!(Part::kept(&packed[..5]).is_none());
        let mut cut_short = packed.clone();
        cut_short.truncate(packed.len() / 2);
        let mut flipped = packed.clone();
        flipped[20] ^= 0xff;
        let mut longer_than_said = packed.clone();
        longer_than_said[1] = longer_than_said[1].wrapping_sub(1);
        let mut said_huge = packed.clone();
        said_huge[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        for damaged in [cut_short, flipped, longer_than_said, said_huge.clone()] {
            let part = Part::kept(&damaged).unwrap();
            assert!(part.bytes().is_empty() || part.bytes().len() == part.len());
            assert_ne!(part.bytes(), text.as_bytes());
        }
        let pieces = [Part::kept(&packed).unwrap(), Part::plain(b"tail")];
        assert_eq!(joined(&pieces), [part, b"tail"].concat());
        let huge = Part::kept(&said_huge).unwrap();
        assert!(joined(&[huge.clone(), huge]).is_empty());
    }

    #[test]
    fn a_part_is_named_by_its_bytes() {
        assert_eq!(part_hash(b"abc"), part_hash(b"abc"));
        assert_ne!(part_hash(b"abc"), part_hash(b"abd"));
        // SHA-256 of "abc" begins ba7816bf 8f01cfea 414140de 5dae2223.
        assert_eq!(part_hash(b"abc")[..4], [0xba, 0x78, 0x16, 0xbf]);
    }
}
