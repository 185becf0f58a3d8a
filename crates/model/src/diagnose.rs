//! Every syntax and type error of a configuration text, listed in one run.
//!
//! [`super::parse`] deserializes in one go, which stops at the first error.
//! When it fails, this module looks at the text again to list all of them:
//!
//! - The text is cut before each top-level header (`[[domain]]`, `[[check]]`,
//!   `[geoip]`, ...) and each piece is parsed on its own, so a syntax error
//!   (an unclosed array, a missing quote) cannot swallow the rest of the
//!   file. A piece with syntax errors lists them, one per line, looking at
//!   each of its sections (a header and its keys) on its own; the parser's
//!   recovery inside a section would otherwise add follow-on errors. Its
//!   sections without one (the element's own, its records) are still
//!   type-checked.
//! - A piece that parses has every element (datacenter, check, scenario,
//!   service, domain, record, address, value) deserialized on its own, and
//!   when one fails, each of its keys on its own: every type error is found,
//!   not only the first of the file. `serde_path_to_error` names the key
//!   inside an element (`soa.serial`, `countries[1]`).
//!
//! Each error names its line, the object in `compile`'s path format
//! (`domain example.test / record www A / address 2`), the key and the
//! value. This runs only on a text that did not parse, so it may be slower
//! than the parse; it still holds one piece at a time.
//!
//! The work is linear in the text however many errors it has: lines are
//! counted as the walk goes forward, each byte once ([`LineCount`]), and
//! only the first [`ERRORS_LISTED`] errors in the order of the file are
//! kept (an error past them is counted, its message never made).
//!
//! Its memory does not grow with the text either where that has errors on
//! every line: a piece of more than [`LARGE_PIECE`] is read in parts of
//! about [`PART_BYTES`] (a domain's inline records in batches, as `parse`
//! reads them; anything else section by section for its syntax, a large
//! section cut where a line starts a key). A piece without a syntax error
//! is then read in parts once more for the statements whose key their
//! element's table does not take ([`super::keys`]: `kN = N` on every line
//! of a domain): each is listed, in its element's place, as the element's
//! check lists it, and the rest of the piece is parsed whole and
//! type-checked (the domain of two million such lines is parsed as its
//! first three). They are left out only where that cannot change what
//! the piece lists: no key given twice or named by a header, no quoted
//! key in an element's table. Otherwise, and for a piece whose tables
//! take their keys (a type error on every line is then a table of its
//! own on every few lines: `[[domain.record]]`), the piece is parsed
//! whole for its types, as a valid one is.

use std::{
    collections::{BinaryHeap, HashMap, HashSet},
    ops::Range,
};

use toml::{
    Spanned,
    de::{DeTable, DeValue},
};
use toml_parser::{Source, lexer::TokenKind};

use super::{
    cancel::{Cancel, Cancelled},
    config_errors::{ConfigError, ConfigErrors, ERRORS_LISTED},
    keys::{Keys, Places, Unknown, read_parts},
    kind::{DeError, Kind},
    layout::{RecordList, record_list},
    lines::{one_comma, part_cuts},
};

/// The longest value quoted in a message; longer ones are cut.
const QUOTED_CHARS: usize = 80;
/// A piece larger than this is read in parts: a domain's inline records in
/// batches, anything else first for its syntax, a large section in parts
/// of about [`PART_BYTES`]. The parser holds 50 times the text it parses:
/// a piece of 40 MB with an error on every line is never parsed whole.
const LARGE_PIECE: usize = 256 * 1024;
/// The size of such a part, and of a batch of records.
const PART_BYTES: usize = 64 * 1024;
/// Tokens kept of a line to recognise a header; a header has few.
const HEADER_TOKENS: usize = 64;

/// The errors found in `text`: the first [`ERRORS_LISTED`] in the order
/// of the file, and how many more. None when none is found, e.g. an error
/// that spans pieces (a table defined twice in two places): the caller
/// then reports the parser's own. Stopped when `cancel` is set.
pub(super) fn errors(text: &str, cancel: &Cancel) -> Result<ConfigErrors, Cancelled> {
    let mut walk = Walk::new(text, cancel);
    walk.run();
    cancel.check()?;
    Ok(walk.finish())
}

/// A header line: where it starts, and whether it names a top-level key.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Header {
    start: usize,
    top: bool,
}

/// The header lines of `text`, in order: `[a]`, `[[a]]`, `[a.b]`, `[[a.b]]` of bare
/// keys, alone on their line but for a comment.
///
/// Brackets inside values are not counted: in a broken file an unclosed
/// array must not hide the headers after it, and in a valid one a line that
/// starts with `[name]` cannot be inside a value (a bare word is not a
/// value). Keys must start with a letter or `_`, so a line `[1]` of a nested
/// array is not taken for a header.
fn headers(text: &str) -> Vec<Header> {
    let source = Source::new(text);
    let mut found = Vec::new();
    let mut line: Vec<(TokenKind, usize, usize)> = Vec::new();
    let mut long = false;
    for token in source.lex() {
        let kind = token.kind();
        match kind {
            TokenKind::Whitespace => {}
            TokenKind::Newline | TokenKind::Eof => {
                if !long && let Some(h) = header_line(text, &line) {
                    found.push(h);
                }
                line.clear();
                long = false;
            }
            _ if line.len() >= HEADER_TOKENS => long = true,
            _ => line.push((kind, token.span().start(), token.span().end())),
        }
    }
    found
}

/// Whether the tokens of one line (whitespace left out) are a header.
fn header_line(text: &str, line: &[(TokenKind, usize, usize)]) -> Option<Header> {
    let mut tokens = line.iter().peekable();
    let &(first, start, _) = tokens.next()?;
    if first != TokenKind::LeftSquareBracket {
        return None;
    }
    let array = tokens
        .next_if(|t| t.0 == TokenKind::LeftSquareBracket)
        .is_some();
    let mut keys = 0;
    loop {
        let &(kind, from, to) = tokens.next()?;
        match kind {
            TokenKind::Atom => {
                let key = text.get(from..to)?;
                if !key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                    return None;
                }
                keys += 1;
            }
            TokenKind::Dot => {}
            TokenKind::RightSquareBracket => break,
            _ => return None,
        }
    }
    if array && tokens.next()?.0 != TokenKind::RightSquareBracket {
        return None;
    }
    match tokens.next() {
        None => {}
        Some(t) if t.0 == TokenKind::Comment => {}
        Some(_) => return None,
    }
    (keys > 0).then_some(Header {
        start,
        top: keys == 1,
    })
}

/// An error kept: where it is in the text, the how-manieth found, its
/// object path and message. Ordered by place, then by when found.
#[derive(Debug)]
struct Kept {
    at: usize,
    seq: usize,
    path: String,
    message: String,
}

impl PartialEq for Kept {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Kept {}

impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kept {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The errors found, in any order: the [`ERRORS_LISTED`] first in the
/// text kept, the others counted.
#[derive(Debug, Default)]
struct Found {
    /// The error furthest in the text on top: the one an earlier error
    /// takes the place of.
    kept: BinaryHeap<Kept>,
    /// Errors found so far, kept or not.
    seq: usize,
}

impl Found {
    /// Adds what `other` found in a text of its own, each error at the
    /// place `place` gives it in this one. Those `other` did not keep are
    /// not among the first here either.
    fn merge(&mut self, other: Found, place: impl Fn(usize) -> usize) {
        let unkept = other.seq.saturating_sub(other.kept.len());
        for Kept {
            at, path, message, ..
        } in other.kept.into_sorted_vec()
        {
            self.add(place(at), || (path, message));
        }
        self.seq = self.seq.saturating_add(unkept);
    }

    /// Counts an error at byte `at`, and keeps it (with the path and
    /// message `make` gives, made only then) while it is among the first.
    fn add(&mut self, at: usize, make: impl FnOnce() -> (String, String)) {
        let seq = self.seq;
        self.seq = self.seq.saturating_add(1);
        let first = self.kept.len() < ERRORS_LISTED || self.kept.peek().is_some_and(|k| at < k.at);
        if !first {
            return;
        }
        let (path, message) = make();
        self.kept.push(Kept {
            at,
            seq,
            path,
            message,
        });
        if self.kept.len() > ERRORS_LISTED {
            self.kept.pop();
        }
    }
}

/// Line numbers of a text read forward: each byte is looked at once
/// whatever the number of lines asked for.
#[derive(Debug)]
struct LineCount<'t> {
    bytes: &'t [u8],
    /// Where the count has reached, and the line there (from 0).
    at: usize,
    line: usize,
}

impl<'t> LineCount<'t> {
    fn new(text: &'t str, from: usize) -> Self {
        Self {
            bytes: text.as_bytes(),
            at: from.min(text.len()),
            line: 0,
        }
    }

    /// The newlines from the start to byte `at`, which must not be before
    /// the last one asked for (the count does not go back); `scanned`
    /// counts the bytes looked at.
    fn to(&mut self, at: usize, scanned: &mut usize) -> usize {
        let to = at.min(self.bytes.len());
        if let Some(bytes) = self.bytes.get(self.at..to) {
            self.line += memchr::memchr_iter(b'\n', bytes).count();
            *scanned += bytes.len();
            self.at = to;
        }
        self.line
    }
}

struct Walk<'t> {
    text: &'t str,
    found: Found,
    /// Top-level elements seen so far, by kind: their `#n` across pieces.
    counts: HashMap<Kind, usize>,
    cancel: &'t Cancel,
    /// Bytes looked at to count lines: no more than a few times the text.
    scanned: usize,
    /// The path of the last top-level element named (`domain a.test`).
    last_path: String,
    /// [`LARGE_PIECE`] and [`PART_BYTES`] (smaller in tests).
    large_piece: usize,
    part_bytes: usize,
    /// The most bytes handed to the parser at once.
    largest_parse: usize,
    /// The statements left out of the text walked, which is what is left
    /// of another ([`Self::without_unknown_keys`]).
    left_out: Option<LeftOut<'t>>,
}

/// Statements with keys their tables do not take, left out of the text a
/// walk reads: the text they are in, where they are, where each byte of
/// what is left was taken from, and their errors, by their bytes there.
struct LeftOut<'t> {
    text: &'t str,
    unknown: Unknown,
    places: Places,
    found: Found,
}

impl<'t> Walk<'t> {
    fn new(text: &'t str, cancel: &'t Cancel) -> Self {
        Self {
            text,
            found: Found::default(),
            counts: HashMap::new(),
            cancel,
            scanned: 0,
            last_path: String::new(),
            large_piece: LARGE_PIECE,
            part_bytes: PART_BYTES,
            largest_parse: 0,
            left_out: None,
        }
    }

    /// `DeTable::parse_recoverable`, noting the size parsed.
    fn parse<'d>(&mut self, text: &'d str) -> (Spanned<DeTable<'d>>, Vec<toml::de::Error>) {
        self.largest_parse = self.largest_parse.max(text.len());
        DeTable::parse_recoverable(text)
    }

    /// Lists the errors of every piece, until cancelled.
    fn run(&mut self) {
        let text = self.text;
        let heads = headers(text);
        let mut bounds = vec![0];
        bounds.extend(
            heads
                .iter()
                .filter(|h| h.top && h.start > 0)
                .map(|h| h.start),
        );
        bounds.push(text.len());
        for pair in bounds.windows(2) {
            if self.cancel.is_cancelled() {
                return;
            }
            if let [start, end] = *pair
                && start < end
            {
                self.piece(start, end, &heads);
            }
        }
    }

    /// Lists the errors of the piece `text[start..end]`.
    fn piece(&mut self, start: usize, end: usize, heads: &[Header]) {
        let Some(piece) = self.text.get(start..end) else {
            return;
        };
        if piece.len() > self.large_piece {
            let done = match record_list(piece, 0) {
                Some(list) if list.elements.len() > 1 => self.batched(start, piece, &list),
                _ => self.in_parts(start, end, heads),
            };
            if done || self.without_unknown_keys(start, piece) {
                return;
            }
        }
        let owner = {
            let (root, syntax) = self.parse(piece);
            let root = Spanned::new(root.span(), DeValue::Table(root.into_inner()));
            if syntax.is_empty() {
                self.element(Kind::Root, &root, String::new(), start);
                return;
            }
            self.owner(&root)
            // The piece's tree and errors are let go before its sections
            // are parsed: one parse of its text is held at a time.
        };
        // Each section on its own: follow-on errors stay in their section.
        let cuts = sections(start, end, heads);
        let mut listed = false;
        let mut records = 0;
        for pair in cuts.windows(2) {
            if self.cancel.is_cancelled() {
                return;
            }
            if let [from, to] = *pair
                && let Some(section) = self.text.get(from..to)
            {
                let (root, errors) = self.parse(section);
                listed |= !errors.is_empty();
                let clean = errors.is_empty();
                self.syntax(errors, from, &owner);
                self.section(root.get_ref(), clean, from, &owner, &mut records);
            }
        }
        // An error only the whole piece shows (a key defined in two
        // sections): the piece is parsed again for it, which is rare.
        if !listed {
            let (_, syntax) = self.parse(piece);
            self.syntax(syntax, start, &owner);
        }
    }

    /// The object of a piece with syntax errors, named from what the
    /// parser recovered of it; each element named counts for the `#n` of
    /// its kind.
    fn owner(&mut self, root: &Spanned<DeValue<'_>>) -> String {
        let (owner, kinds, _) = self.name(root.get_ref());
        for kind in kinds {
            self.next(kind);
        }
        self.last_path.clone_from(&owner);
        owner
    }

    /// The name of the last top-level element `root` holds, the kind of
    /// each (to count them once they are known to be named so), and
    /// whether that name is the element's own rather than its `#n`.
    fn name(&self, root: &DeValue<'_>) -> (String, Vec<Kind>, bool) {
        let mut owner = String::new();
        let mut kinds = Vec::new();
        let mut named = false;
        for (key, value) in root.as_table().into_iter().flatten() {
            if let Some((kind, list)) = Kind::Root.child(key.get_ref()) {
                let elements = match value.get_ref() {
                    DeValue::Array(a) if list => a.iter().collect(),
                    DeValue::Table(_) if !list => vec![value],
                    _ => Vec::new(),
                };
                for e in elements {
                    kinds.push(kind);
                    let n = self.counts.get(&kind).copied().unwrap_or_default()
                        + kinds.iter().filter(|k| **k == kind).count();
                    owner = kind.name(e.get_ref(), n);
                    named = kind == Kind::Geoip || e.get_ref().get("name").is_some();
                }
            }
        }
        (owner, kinds, named)
    }

    /// A large piece read section by section for its syntax, a large
    /// section in parts of about [`PART_BYTES`] cut where a line starts a
    /// key outside any value (keys of one table: a part has no error its
    /// section lacks). When some part has a syntax error, the sections
    /// without one are type-checked as [`Self::piece`] does; when none
    /// has, `false`: the piece is parsed whole for its types, as a valid
    /// one is.
    fn in_parts(&mut self, start: usize, end: usize, heads: &[Header]) -> bool {
        let cuts = sections(start, end, heads);
        let text = self.text;
        // The object is named from its own section, the first; its name
        // is looked for there part by part.
        let (mut owner, mut kinds, mut named) = (String::new(), Vec::new(), true);
        if let [from, to, ..] = cuts[..] {
            for (i, (a, b)) in parts(text, from, to, self.part_bytes)
                .into_iter()
                .enumerate()
            {
                let (root, _) = self.parse(text.get(a..b).unwrap_or_default());
                let root = DeValue::Table(root.into_inner());
                if i == 0 {
                    (owner, kinds, named) = self.name(&root);
                } else if let [kind] = kinds[..]
                    && root.get("name").is_some()
                {
                    // A later part holds the element's keys at its top.
                    let n = self.counts.get(&kind).copied().unwrap_or_default() + 1;
                    owner = kind.name(&root, n);
                    named = true;
                }
                if named {
                    break;
                }
            }
        }
        let mut listed = false;
        let mut clean = Vec::new();
        let mut records = 0;
        for pair in cuts.windows(2) {
            let [from, to] = *pair else { continue };
            // The records before the section, for its `#n`.
            let before = records;
            let mut section_clean = true;
            for (i, (a, b)) in parts(text, from, to, self.part_bytes)
                .into_iter()
                .enumerate()
            {
                if self.cancel.is_cancelled() {
                    return true;
                }
                let (root, errors) = self.parse(text.get(a..b).unwrap_or_default());
                if i == 0 {
                    // Counted only: its header is in the first part.
                    self.section(root.get_ref(), false, a, &owner, &mut records);
                }
                if !errors.is_empty() {
                    section_clean = false;
                    listed = true;
                    self.syntax(errors, a, &owner);
                }
            }
            if section_clean {
                clean.push((from, to, before));
            }
        }
        if !listed {
            return false;
        }
        for kind in kinds {
            self.next(kind);
        }
        self.last_path.clone_from(&owner);
        for (from, to, mut records) in clean {
            if self.cancel.is_cancelled() {
                return true;
            }
            let (root, _) = self.parse(text.get(from..to).unwrap_or_default());
            self.section(root.get_ref(), true, from, &owner, &mut records);
        }
        true
    }

    /// A large piece without a syntax error, at byte `start`, whose
    /// elements' tables have keys they do not take ([`Keys`]): each is
    /// listed, and the rest of the piece, without their statements, is
    /// parsed whole and type-checked as a piece without them is, but that
    /// an element with one has each of its other keys checked on its own,
    /// as when they are there. `false` when the piece has none, or when
    /// leaving them out could change what it lists (then nothing is
    /// listed of it here).
    fn without_unknown_keys(&mut self, start: usize, piece: &'t str) -> bool {
        let mut keys = Keys::collect(piece);
        match read_parts(piece, self.part_bytes, Some(&mut keys), self.cancel) {
            Ok(None) => {}
            Ok(Some(_)) => return false,
            Err(Cancelled) => return true,
        }
        let Some(unknown) = keys.unknown() else {
            return false;
        };
        let Some((rest, places)) = unknown.rest(piece) else {
            return false;
        };
        let mut walk = Walk::new(&rest, self.cancel);
        walk.counts.clone_from(&self.counts);
        walk.last_path.clone_from(&self.last_path);
        (walk.large_piece, walk.part_bytes) = (self.large_piece, self.part_bytes);
        walk.left_out = Some(LeftOut {
            text: piece,
            unknown,
            places,
            found: Found::default(),
        });
        self.largest_parse = self.largest_parse.max(rest.len());
        let (root, syntax) = DeTable::parse_recoverable(&rest);
        if !syntax.is_empty() {
            return false;
        }
        let root = Spanned::new(root.span(), DeValue::Table(root.into_inner()));
        walk.element(Kind::Root, &root, String::new(), 0);
        let Some(left_out) = walk.left_out.take() else {
            return false;
        };
        // A table left out of what was checked: its keys are not listed
        // as the whole piece's check would.
        if !left_out.unknown.is_empty() {
            return self.cancel.is_cancelled();
        }
        self.counts = std::mem::take(&mut walk.counts);
        self.last_path = std::mem::take(&mut walk.last_path);
        self.scanned += walk.scanned;
        let places = &left_out.places;
        self.found.merge(walk.found, |at| start + places.at(at));
        self.found.merge(left_out.found, |at| start + at);
        true
    }

    /// A large domain whose records are a list of inline tables (`list`),
    /// read as `parse` reads it: the domain without the list, then the
    /// list in batches of about [`PART_BYTES`] of records, each parsed as
    /// an array of its own (a batch ends where one comma stands between
    /// its last record and the next, as in the whole list). A batch with
    /// a syntax error lists it; the records of the others are
    /// type-checked.
    fn batched(&mut self, start: usize, piece: &str, list: &RecordList) -> bool {
        let (Some(before), Some(after)) = (piece.get(..list.open), piece.get(list.close..)) else {
            return false;
        };
        // The domain without its records, walked as a text of its own.
        let head = [before, after].concat();
        let mut domain = Walk::new(&head, self.cancel);
        domain.counts = std::mem::take(&mut self.counts);
        (domain.large_piece, domain.part_bytes) = (self.large_piece, self.part_bytes);
        domain.piece(0, head.len(), &headers(&head));
        self.counts = std::mem::take(&mut domain.counts);
        self.scanned += domain.scanned;
        self.largest_parse = self.largest_parse.max(domain.largest_parse);
        let (open, close) = (list.open, list.close);
        self.found.merge(domain.found, |at| {
            start + if at < open { at } else { at - open + close }
        });
        let owner = if domain.last_path.is_empty() {
            "domain".to_string()
        } else {
            domain.last_path
        };
        self.last_path.clone_from(&owner);
        let elements = &list.elements;
        let (mut first, mut from) = (0, list.open);
        while let Some(begin) = elements.get(first).map(|e| e.start) {
            if self.cancel.is_cancelled() {
                return true;
            }
            let mut next = first + 1;
            while let (Some(last), Some(e)) = (elements.get(next - 1), elements.get(next)) {
                if e.start - begin >= self.part_bytes
                    && one_comma(piece.get(last.end..e.start).unwrap_or_default())
                {
                    break;
                }
                next += 1;
            }
            let to = elements.get(next).map_or(list.close, |e| e.start);
            let doc = format!("[{}]", piece.get(from..to).unwrap_or_default());
            // The text's byte of the batch's first: `[` stands before it.
            let base = start + from - 1;
            self.largest_parse = self.largest_parse.max(doc.len());
            let (value, errors) = DeValue::parse_recoverable(&doc);
            if errors.is_empty() {
                if let DeValue::Array(records) = value.get_ref() {
                    for (i, r) in records.iter().enumerate() {
                        let name = Kind::Record.name(r.get_ref(), first + i + 1);
                        self.element(Kind::Record, r, format!("{owner} / {name}"), base);
                    }
                }
            } else {
                self.syntax(errors, base, &owner);
            }
            (first, from) = (next, to);
        }
        true
    }

    /// Type-checks a section of a piece with syntax errors, when it has
    /// none itself and is the element's own (`[[domain]]` and its keys) or
    /// a `[[domain.record]]`; `records` counts the records of the piece so
    /// far, for the `#n` of one without a name. Other sections (`[domain.soa]`)
    /// are only complete with the rest of their element.
    fn section(
        &mut self,
        root: &DeTable<'_>,
        clean: bool,
        from: usize,
        owner: &str,
        records: &mut usize,
    ) {
        for (key, value) in root.iter() {
            let Some((kind, _)) = Kind::Root.child(key.get_ref()) else {
                continue;
            };
            match value.get_ref() {
                DeValue::Array(elements) if clean => {
                    for e in elements.iter() {
                        self.element(kind, e, owner.to_string(), from);
                    }
                }
                DeValue::Table(_) if kind == Kind::Geoip && clean => {
                    self.element(kind, value, owner.to_string(), from);
                }
                DeValue::Table(table) => {
                    for (key, value) in table.iter() {
                        let (Some((child, true)), DeValue::Array(elements)) =
                            (kind.child(key.get_ref()), value.get_ref())
                        else {
                            continue;
                        };
                        for e in elements.iter() {
                            *records += 1;
                            if clean {
                                let name = child.name(e.get_ref(), *records);
                                self.element(child, e, format!("{owner} / {name}"), from);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The `#n` of the next top-level element of `kind`.
    fn next(&mut self, kind: Kind) -> usize {
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        *n
    }

    /// Records the syntax errors of a text starting at `offset`: the first
    /// of each line, or only the first when the parser ran past an unclosed
    /// array, table or string (what follows it is its consequence).
    fn syntax(&mut self, mut errors: Vec<toml::de::Error>, offset: usize, owner: &str) {
        errors.sort_by_key(|e| e.span().map(|s| s.start).unwrap_or_default());
        let unclosed = errors.iter().any(|e| e.message().contains("unclosed"));
        if unclosed {
            errors.truncate(1);
        }
        // Counted forward from the text's start, as the errors are in
        // order: each byte once.
        let mut lines = LineCount::new(self.text, offset);
        let mut last_line = None;
        for e in errors {
            let at = offset + e.span().map(|s| s.start).unwrap_or_default();
            let line = lines.to(at, &mut self.scanned);
            if last_line == Some(line) {
                continue;
            }
            last_line = Some(line);
            self.found
                .add(at, || (owner.to_string(), e.message().to_string()));
        }
    }

    /// Checks one element of `kind` whose text starts at `offset`; `path`
    /// is its object path.
    fn element(&mut self, kind: Kind, value: &Spanned<DeValue<'_>>, path: String, offset: usize) {
        let DeValue::Table(table) = value.get_ref() else {
            if let Err(e) = kind.check(value.clone()) {
                self.fail(&path, &e, value, offset);
            }
            return;
        };
        // The element without its children, which are checked on their own.
        let mut own = DeTable::new();
        let mut children = Vec::new();
        for (key, v) in table.iter() {
            match (kind.child(key.get_ref()), v.get_ref()) {
                (Some((child, true)), DeValue::Array(a)) => {
                    children.extend(a.iter().enumerate().map(|(i, e)| (child, e, i + 1)))
                }
                (Some((child, false)), DeValue::Table(_)) => children.push((child, v, 1)),
                _ => {
                    own.insert(key.clone(), v.clone());
                }
            }
        }
        // The keys of its table left out of the text, each an error. The
        // root's table starts with the text, a table of an element at its
        // header.
        let mut left_out = false;
        if let Some(left) = &mut self.left_out
            && let at = match kind {
                Kind::Root => 0,
                _ => left.places.at(offset + value.span().start),
            }
            && let Some(statements) = left.unknown.take(at, kind)
        {
            left_out = true;
            for key in left.unknown.keys(statements) {
                unknown_key(&mut left.found, kind, &path, left.text, key);
            }
        }
        let whole = Spanned::new(value.span(), DeValue::Table(own.clone()));
        if left_out || kind.check(whole).is_err() {
            // Each key on its own, then what is missing once they are left
            // out: a missing field is only reported when the rest is right.
            let mut right = DeTable::new();
            let mut wrong = Vec::new();
            for (key, v) in own.iter() {
                let mut one = DeTable::new();
                one.insert(key.clone(), v.clone());
                match kind.check(Spanned::new(value.span(), DeValue::Table(one))) {
                    Err(e) if missing(&e).is_none() => {
                        self.fail(&path, &e, value, offset);
                        wrong.push(key.get_ref().to_string());
                    }
                    _ => {
                        right.insert(key.clone(), v.clone());
                    }
                }
            }
            // A key given with a wrong value is not also missing.
            if let Err(e) = kind.check(Spanned::new(value.span(), DeValue::Table(right)))
                && !missing(&e).is_some_and(|field| wrong.iter().any(|w| w == field))
            {
                self.fail(&path, &e, value, offset);
            }
        }
        for (child, v, i) in children {
            if self.cancel.is_cancelled() {
                return;
            }
            let n = if kind == Kind::Root {
                self.next(child)
            } else {
                i
            };
            let name = child.name(v.get_ref(), n);
            let child_path = if path.is_empty() {
                self.last_path.clone_from(&name);
                name
            } else {
                format!("{path} / {name}")
            };
            self.element(child, v, child_path, offset);
        }
    }

    /// Records a deserialization error of the element `value` at `path`,
    /// with its key and value.
    fn fail(&mut self, path: &str, e: &DeError, value: &Spanned<DeValue<'_>>, offset: usize) {
        let inner = e.inner();
        let span = inner
            .span()
            .filter(|s| s.end > s.start)
            .unwrap_or_else(|| value.span());
        let at = offset + span.start;
        let text = self.text;
        self.found.add(at, || {
            let raw = text.get(at..offset + span.end).unwrap_or_default().trim();
            // Cut without counting the characters of a long value.
            let raw = match raw.char_indices().nth(QUOTED_CHARS) {
                Some((cut, _)) => format!("{}…", raw.get(..cut).unwrap_or_default()),
                None => raw.to_string(),
            };
            let key = e.path().to_string();
            let key = if key == "." { String::new() } else { key };
            (path.to_string(), message(&key, &raw, inner.message()))
        });
    }

    /// The errors kept, in the order of the file, each with its line, and
    /// how many more were found.
    fn finish(&mut self) -> ConfigErrors {
        let found = self.found.seq;
        let kept = std::mem::take(&mut self.found.kept).into_sorted_vec();
        let more = found.saturating_sub(kept.len());
        let mut lines = LineCount::new(self.text, 0);
        let mut listed: Vec<ConfigError> = Vec::with_capacity(kept.len());
        let mut seen = HashSet::new();
        for Kept {
            at, path, message, ..
        } in kept
        {
            let line = lines.to(at, &mut self.scanned) + 1;
            let error = ConfigError {
                path: if path.is_empty() {
                    format!("line {line}")
                } else {
                    format!("line {line}: {path}")
                },
                message,
            };
            if seen.insert((error.path.clone(), error.message.clone())) {
                listed.push(error);
            }
        }
        ConfigErrors { listed, more }
    }
}

/// The bounds of the sections of the piece `start..end`: its start, each
/// header in it, its end.
fn sections(start: usize, end: usize, heads: &[Header]) -> Vec<usize> {
    let first = heads.partition_point(|h| h.start <= start);
    let mut cuts: Vec<usize> = heads
        .iter()
        .skip(first)
        .map(|h| h.start)
        .take_while(|&s| s < end)
        .collect();
    cuts.insert(0, start);
    cuts.push(end);
    cuts
}

/// The parts of about `bytes` of the section `text[from..to]`, cut where
/// a line starts a key outside any value; one for a small section.
fn parts(text: &str, from: usize, to: usize, bytes: usize) -> Vec<(usize, usize)> {
    let section = text.get(from..to).unwrap_or_default();
    let mut bounds = vec![from];
    if section.len() > bytes {
        bounds.extend(part_cuts(section, bytes).into_iter().map(|c| from + c));
    }
    bounds.push(to);
    bounds.windows(2).map(|w| (w[0], w[1])).collect()
}

/// Records in `found` the error of a key `text[key]` that the element of
/// `kind` at `path` does not take, as [`Walk::fail`] says it.
fn unknown_key(found: &mut Found, kind: Kind, path: &str, text: &str, key: Range<usize>) {
    found.add(key.start, || {
        let name = text.get(key).unwrap_or_default();
        let message = match kind.unknown_key(name) {
            Some(e) => message(&e.path().to_string(), name, e.inner().message()),
            None => String::new(),
        };
        (path.to_string(), message)
    });
}

/// The field a "missing field" error names.
fn missing(e: &DeError) -> Option<&str> {
    e.inner()
        .message()
        .strip_prefix("missing field `")?
        .split('`')
        .next()
}

/// The message of a type error at `key` (empty for the element itself)
/// whose value is `raw`: the key first, and the value when the
/// deserializer's own message does not quote it.
fn message(key: &str, raw: &str, message: &str) -> String {
    if message.starts_with("unknown field") {
        // The key is the value at fault; name the table it is in, if any.
        return match key.rsplit_once('.') {
            Some((table, _)) => format!("{table}: {message}"),
            None => message.to_string(),
        };
    }
    let described = if message == "invalid IP address syntax" {
        format!("{raw} is not an IP address")
    } else if raw.is_empty()
        // serde's own messages quote the value (or name its kind: map).
        || message.starts_with("invalid type")
        || message.starts_with("invalid value")
        || message.contains(raw)
        || message.contains(raw.trim_matches(['"', '\'']))
        || message.starts_with("missing field")
    {
        message.to_string()
    } else {
        format!("{raw}: {message}")
    };
    if key.is_empty() {
        described
    } else {
        format!("{key}: {described}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(text: &str) -> Vec<String> {
        errors(text, &Cancel::default())
            .expect("not cancelled")
            .lines()
    }

    const HEAD: &str = "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n";

    #[test]
    fn every_type_error_names_its_line_object_key_and_value() {
        let text = format!(
            "{HEAD}\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [\n  {{ ip = \"192.0.2.1\" }},\n  {{ ip = \"192.0.2.300\", weight = -1 }},\n]\n\n\
             [[check]]\nname = \"web\"\ntype = \"tcpp\"\ninterval = \"5x\"\n\n\
             [[domain]]\nname = \"b.test\"\nnameservers = [\"ns1.b.test\", 3]\nsoa = {{ serial = \"x\" }}\n\n\
             [[domain.record]]\nname = \"mail\"\ntype = \"MX\"\nvalues = [\"10 mx.b.test.\", 7]\n\n\
             [[domain.record]]\nttl = 5\nnaem = \"x\"\n"
        );
        assert_eq!(
            listed(&text),
            [
                "line 10: domain a.test / record www A / address 2: ip: \"192.0.2.300\" is not an IP address",
                "line 10: domain a.test / record www A / address 2: weight: invalid value: integer `-1`, expected u32",
                "line 15: check web: type: unknown variant `tcpp`, expected one of `http`, `https`, `http2`, `tcp`, `tls`, `dns`, `icmp`, `grpc`, `exec`, `manual`, `prometheus`, `push`, `alertmanager`",
                "line 16: check web: interval: \"5x\": unknown unit \"x\" (use ms, s, m or h)",
                "line 20: domain b.test: nameservers[1]: invalid type: integer `3`, expected a string",
                "line 21: domain b.test: soa.serial: invalid type: string \"x\", expected u32",
                "line 26: domain b.test / record mail MX / value 2: invalid type: integer `7`, expected a string",
                "line 28: domain b.test / record #2: missing field `name`",
                "line 30: domain b.test / record #2: unknown field `naem`, expected one of `name`, `type`, `ttl`, `mode`, `balance`, `max_answers`, `dr_condition`, `dr_on_no_healthy`, `failback`, `fail_safe`, `on_no_healthy`, `topology`, `nearest`, `topology_rules`, `addresses`, `values`, `view`, `alias`, `transferred`",
            ]
        );
    }

    #[test]
    fn syntax_errors_of_each_piece_are_listed_and_other_pieces_type_checked() {
        let text = format!(
            // An unclosed array: the parser would run to the end of the file.
            "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\",\n\n\
             [[domain]]\nname = \"b.test\nnameservers = [\"ns1.b.test\"]\n\n\
             [[domain]]\nname = \"c.test\"\nnameservers = [\"ns1.c.test\"]\nttl = \"long\"\n\n\
             [[domain.record]]\nname = \"x\"\ntype = \"A\"\nbad = = 1\n\n\
             [[domain.record]]\nname = \"y\"\ntype = \"A\"\nttl = = 2\n\n\
             {HEAD}mode = \"sideways\"\n"
        );
        let got = listed(&text);
        assert_eq!(got.len(), 6, "{got:#?}");
        assert!(got[0].starts_with("line 3: domain a.test: "), "{got:#?}");
        assert!(got[1].starts_with("line 6: domain b.test: "), "{got:#?}");
        // The sections without a syntax error are type-checked.
        assert_eq!(
            got[2],
            "line 12: domain c.test: ttl: invalid type: string \"long\", expected u32"
        );
        assert!(got[3].starts_with("line 17: domain c.test: "), "{got:#?}");
        assert!(got[4].starts_with("line 22: domain c.test: "), "{got:#?}");
        assert!(
            got[5].starts_with("line 27: domain a.test: mode: unknown variant `sideways`"),
            "{got:#?}"
        );
        // A record of a domain with a syntax error, numbered in its domain.
        let text = format!(
            "{HEAD}ttl = = 1\n[[domain.record]]\nname = \"x\"\ntype = \"A\"\nbad = = 1\n\
             [[domain.record]]\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.256\" }}]\n\
             [domain.soa]\nserial = \"x\"\n"
        );
        assert_eq!(
            listed(&text),
            [
                "line 4: domain a.test: extra `=`, expected nothing",
                "line 8: domain a.test: extra `=`, expected nothing",
                "line 9: domain a.test / record #2: missing field `name`",
                "line 11: domain a.test / record #2 / address 1: ip: \"192.0.2.256\" is not an IP address",
            ]
        );
    }

    #[test]
    fn unnamed_elements_are_numbered_across_pieces_and_root_keys_named() {
        let text = "x = 1\n[[datacenter]]\nname = \"dc1\"\n[[datacenter]]\ncountry = 3\n";
        assert_eq!(
            listed(text),
            [
                "line 1: unknown field `x`, expected one of `geoip`, `datacenter`, `region`, `view`, `check`, `scenario`, `service`, `domain`, `notifier`, `rate_limit`, `cookies`, `catalog`",
                "line 4: datacenter #2: missing field `name`",
                "line 5: datacenter #2: country: invalid type: integer `3`, expected a string",
            ]
        );
        assert_eq!(
            listed("[geoip]\nupdate = \"weekly\"\n"),
            ["line 2: geoip: update: unknown variant `weekly`, expected `monthly` or `off`"]
        );
        assert_eq!(
            listed("[domain]\nname = \"a\"\n"),
            ["line 1: domain: invalid type: map, expected a sequence"]
        );
    }

    #[test]
    fn headers_are_found_past_unclosed_values_but_not_in_strings() {
        let text = "a = [1,\n[[domain]]\nb = '''\n[[check]]\n'''\n  [domain.soa] # c\nc = [\n[1]\n]\n[geoip]\n";
        let starts: Vec<(usize, bool)> = headers(text).iter().map(|h| (h.start, h.top)).collect();
        let at = |s: &str| text.find(s).unwrap_or_default();
        assert_eq!(
            starts,
            [
                (at("[[domain]]"), true),
                (at("[domain.soa]"), false),
                (at("[geoip]"), true)
            ]
        );
    }

    /// A text of `n` lines after [`HEAD`], each a syntax error.
    fn syntax_errors(n: usize) -> String {
        (0..n).fold(HEAD.to_string(), |mut t, i| {
            t.push_str(&format!("k{i} = = {i}\n"));
            t
        })
    }

    /// Lines are counted forward, each byte once: not again from the start
    /// of its section for each error, which made a section with an error
    /// on every line take time in the square of its length.
    #[test]
    fn lines_are_counted_in_one_pass_however_many_errors() {
        for n in [100, 4000] {
            let text = syntax_errors(n);
            let cancel = Cancel::default();
            let mut walk = Walk::new(&text, &cancel);
            walk.run();
            let errors = walk.finish();
            assert_eq!(errors.total(), n);
            assert_eq!(
                errors.listed[0].to_string(),
                "line 4: domain a.test: extra `=`, expected nothing"
            );
            assert!(
                walk.scanned <= 2 * text.len(),
                "{n} errors: {} bytes looked at for lines in a text of {}",
                walk.scanned,
                text.len()
            );
        }
    }

    /// The errors kept are the first of the file whatever the order they
    /// are found in: a record's missing key is found after its other keys
    /// but is said at its start.
    #[test]
    fn the_first_errors_of_the_file_are_listed_and_the_rest_counted() {
        let records = ERRORS_LISTED;
        let text = (0..records).fold(HEAD.to_string(), |mut t, i| {
            t.push_str(&format!(
                "[[domain.record]]\ntype = \"A\"\nttl = \"t{i}\"\n"
            ));
            t
        });
        let errors = errors(&text, &Cancel::default()).expect("not cancelled");
        assert_eq!(errors.listed.len(), ERRORS_LISTED);
        assert_eq!(errors.total(), 2 * records);
        let lines = errors.lines();
        assert_eq!(
            lines[..3],
            [
                "line 4: domain a.test / record #1: missing field `name`",
                "line 6: domain a.test / record #1: ttl: invalid type: string \"t0\", expected u32",
                "line 7: domain a.test / record #2: missing field `name`",
            ]
        );
        assert_eq!(
            lines[ERRORS_LISTED - 1],
            format!(
                "line {}: domain a.test / record #{}: ttl: invalid type: string \"t{}\", expected u32",
                3 + 3 * (ERRORS_LISTED / 2),
                ERRORS_LISTED / 2,
                ERRORS_LISTED / 2 - 1
            )
        );
        assert_eq!(
            lines[ERRORS_LISTED],
            format!("… and {records} more errors ({} in all)", 2 * records)
        );
    }

    #[test]
    fn found_keeps_the_first_places_in_any_order() {
        let mut found = Found::default();
        let places = 3 * ERRORS_LISTED;
        for at in (0..places).rev() {
            found.add(at, || (String::new(), format!("at {at}")));
        }
        assert_eq!(found.seq, places);
        let kept: Vec<usize> = found.kept.into_sorted_vec().iter().map(|k| k.at).collect();
        assert_eq!(kept, (0..ERRORS_LISTED).collect::<Vec<_>>());
    }

    #[test]
    fn a_cancelled_listing_stops_before_its_first_piece() {
        let text = syntax_errors(10);
        let cancel = Cancel::new();
        cancel.cancel();
        let mut walk = Walk::new(&text, &cancel);
        walk.run();
        assert_eq!(walk.found.seq, 0);
        assert_eq!(errors(&text, &cancel), Err(Cancelled));
    }

    /// What a walk lists of `text` when it reads pieces above `large`
    /// bytes in parts of about `part`, and the most bytes it parsed at once.
    fn walked(text: &str, large: usize, part: usize) -> (Vec<String>, usize) {
        let cancel = Cancel::default();
        let mut walk = Walk::new(text, &cancel);
        (walk.large_piece, walk.part_bytes) = (large, part);
        walk.run();
        (walk.finish().lines(), walk.largest_parse)
    }

    /// A domain whose records are a list of inline tables, one with an
    /// error of each kind; `broken` adds a record with a syntax error.
    fn inline_records(broken: bool) -> String {
        let mut text = String::from(
            "[[datacenter]]\nname = \"dc1\"\n\n[[domain]]\nname = \"i.test\"\nnameservers = [\"ns1.i.test\"]\nttl = \"x\"\nrecord = [ # the list\n",
        );
        text += "{ name = \"a\", type = \"A\", addresses = [{ ip = \"192.0.2.300\" }] },\n";
        text += "{ name = \"b\", type = \"A\", naem = 1 },\n\n  # a comment\n";
        text += "{ type = \"A\", addresses = [{ ip = \"192.0.2.1\" }] }\n,";
        if broken {
            text += "{ name = \"d\", type = \"A\", ttl = = 1 },\n";
        }
        text += "{ name = \"c\", type = \"A\", addresses = [{ ip = \"192.0.2.1\", weight = -1 },\n  { ip = \"x\" }] },\n";
        text += "]\nmode = \"sideways\"\n\n[domain.soa]\nserial = \"s\"\n\n[[check]]\nname = \"c\"\ntype = \"tcpp\"\n";
        text
    }

    /// Read in parts (sections in parts, inline records in batches), a
    /// text lists what it lists read whole.
    #[test]
    fn large_pieces_read_in_parts_list_what_whole_ones_do() {
        let texts = [
            format!(
                "{HEAD}\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [\n  {{ ip = \"192.0.2.1\" }},\n  {{ ip = \"192.0.2.300\", weight = -1 }},\n]\n\n\
                 [[check]]\nname = \"web\"\ntype = \"tcpp\"\ninterval = \"5x\"\n\n\
                 [[domain]]\nname = \"b.test\"\nnameservers = [\"ns1.b.test\", 3]\nsoa = {{ serial = \"x\" }}\n\n\
                 [[domain.record]]\nttl = 5\nnaem = \"x\"\n"
            ),
            format!(
                "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\",\n\n\
                 [[domain]]\nname = \"b.test\nnameservers = [\"ns1.b.test\"]\n\n\
                 [[domain]]\nname = \"c.test\"\nnameservers = [\"ns1.c.test\"]\nttl = \"long\"\n\n\
                 [[domain.record]]\nname = \"x\"\ntype = \"A\"\nbad = = 1\n\n\
                 [[domain.record]]\nname = \"y\"\ntype = \"A\"\nttl = = 2\n\n\
                 {HEAD}mode = \"sideways\"\n"
            ),
            format!(
                "{HEAD}ttl = = 1\n[[domain.record]]\nname = \"x\"\ntype = \"A\"\nbad = = 1\n\
                 [[domain.record]]\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.256\" }}]\n\
                 [domain.soa]\nserial = \"x\"\n"
            ),
            // The name after the keys with errors.
            "[[domain]]\nttl = = 1\nmode = = 2\nname = \"late.test\"\n".to_string(),
            "x = 1\n[[datacenter]]\nname = \"dc1\"\n[[datacenter]]\ncountry = 3\n".to_string(),
            syntax_errors(40),
            inline_records(false),
        ];
        for text in &texts {
            let (whole, _) = walked(text, usize::MAX, usize::MAX);
            assert!(!whole.is_empty(), "{text}");
            for part in [1, 30, 100] {
                let (parts, _) = walked(text, 1, part);
                assert_eq!(parts, whole, "parts of {part} bytes:\n{text}");
            }
        }
        // A record with a syntax error is listed on its own: the records
        // of the other batches, and the domain, are still type-checked.
        let (batched, _) = walked(&inline_records(true), 1, 1);
        assert_eq!(
            batched,
            [
                "line 7: domain i.test: ttl: invalid type: string \"x\", expected u32",
                "line 9: domain i.test / record a A / address 1: ip: \"192.0.2.300\" is not an IP address",
                "line 10: domain i.test / record b A: unknown field `naem`, expected one of `name`, `type`, `ttl`, `mode`, `balance`, `max_answers`, `dr_condition`, `dr_on_no_healthy`, `failback`, `fail_safe`, `on_no_healthy`, `topology`, `nearest`, `topology_rules`, `addresses`, `values`, `view`, `alias`, `transferred`",
                "line 13: domain i.test / record #3: missing field `name`",
                "line 14: domain i.test: extra assignment between key-value pairs, expected value",
                "line 15: domain i.test / record c A / address 1: weight: invalid value: integer `-1`, expected u32",
                "line 16: domain i.test / record c A / address 2: ip: \"x\" is not an IP address",
                "line 18: domain i.test: mode: unknown variant `sideways`, expected one of `standalone`, `disaster-recovery`, `datacenter`",
                "line 21: domain i.test: soa.serial: invalid type: string \"s\", expected u32",
                "line 25: check c: type: unknown variant `tcpp`, expected one of `http`, `https`, `http2`, `tcp`, `tls`, `dns`, `icmp`, `grpc`, `exec`, `manual`, `prometheus`, `push`, `alertmanager`",
            ]
        );
    }

    /// A large piece with an error on every line is never parsed whole:
    /// a section in parts, inline records in batches.
    #[test]
    fn a_large_piece_is_parsed_in_parts_of_bounded_size() {
        let records = (0..20_000).fold(format!("{HEAD}record = [\n"), |mut t, i| {
            t.push_str(&format!(
                "{{ name = \"r{i}\", type = \"A\", addresses = [{{ ip = \"192.0.2.300\" }}] }},\n"
            ));
            t
        }) + "]\n";
        for text in [syntax_errors(70_000), records] {
            assert!(text.len() > 10 * PART_BYTES, "{} bytes", text.len());
            let (lines, largest) = walked(&text, LARGE_PIECE, PART_BYTES);
            assert_eq!(lines.len(), ERRORS_LISTED + 1);
            assert!(
                largest < 2 * PART_BYTES,
                "{largest} bytes parsed at once of {}",
                text.len()
            );
        }
    }

    #[test]
    fn a_valid_text_lists_nothing() {
        let demo = include_str!("../../../config/demo.toml");
        assert!(listed(demo).is_empty());
        assert!(listed(HEAD).is_empty());
    }

    /// Tables with keys they do not take, among everything else a table
    /// may hold: each text lists, read in parts with those statements
    /// left out, what it lists read whole.
    fn unknown_keys() -> Vec<String> {
        let domain = format!(
            "{HEAD}k0 = 0\nttl = \"x\"\n  k1 = \"one\" # a comment\n\n# a line of its own\nk2 = [\n  1,\n  {{ a = 2 }},\n]\n\
             u.x = 1\nk3 = {{ a = 1, b = [2] }}\nmode = \"sideways\"\nk-4 = '''\n[[domain]]\n'''\nk5 = 5\n\n\
             [domain.soa]\nserial = \"s\"\nk6 = 6\n\n\
             [[domain.record]]\ntype = \"A\"\nk7 = 7\nttl = \"t\"\n\n\
             [[domain.record]]\nname = \"www\"\ntype = \"A\"\nk8 = 8\n\
             [[domain.record.addresses]]\nip = \"192.0.2.300\"\nk9 = 9\n\
             [[domain.record]]\nname = \"v\"\ntype = \"TXT\"\n\
             [[domain.record.values]]\nk10 = 10\n"
        );
        let mut texts = vec![
            domain.clone(),
            // Only unknown keys in the element's table, one of them last.
            format!("{HEAD}k0 = 0\nk1 = 1\n[domain.soa]\nserial = 1\n"),
            format!("{HEAD}k0 = 0\nk1 = 1\n"),
            // Root keys, and a table of the root.
            "x = 1\ny.z = 2\nk = [\n1]\n".to_string(),
            format!(
                "x = 1\ny.z = 2\n[rate_limit]\nslip = 1\nk = 2\n[geoip]\nk = 1\nupdate = \"weekly\"\n\n{domain}"
            ),
            // Checks, one without its name.
            "[[check]]\nname = \"c\"\ntype = \"tcp\"\nk0 = 1\nk1 = 2\n[[check]]\ntype = \"tcpp\"\nk2 = 3\n"
                .to_string(),
            // A domain whose records are a list of inline tables, with
            // unknown keys before and after the list.
            format!(
                "{HEAD}k0 = 0\nrecord = [\n{{ name = \"a\", type = \"A\", naem = 1 }},\n{{ name = \"b\", type = \"A\" }},\n]\nk1 = 1\nttl = \"x\"\n"
            ),
            // The name after the keys.
            "[[domain]]\nk0 = 0\nttl = \"x\"\nk1 = 1\nname = \"late.test\"\n".to_string(),
        ];
        // What leaving a statement out would change: a key given twice,
        // a dotted key's table given in two statements, a header naming
        // a key left out, a quoted key or header naming one.
        for more in [
            "k0 = 1\n",
            "u.y = 2\n",
            "[domain.k5]\na = 1\n",
            "\"k1\" = 1\n",
            "[domain.\"k5\"]\na = 1\n",
        ] {
            texts.push(format!("{}{more}", domain.replace("k10 = 10\n", "")));
            let at = domain.find("mode = ").unwrap_or_default();
            texts.push(format!("{}{more}{}", &domain[..at], &domain[at..]));
        }
        texts
    }

    #[test]
    fn unknown_keys_left_out_list_what_the_whole_lists() {
        for text in unknown_keys() {
            let (whole, _) = walked(&text, usize::MAX, usize::MAX);
            assert!(!whole.is_empty(), "{text}");
            for part in [1, 30, 100, usize::MAX] {
                let (parts, _) = walked(&text, 1, part);
                assert_eq!(parts, whole, "parts of {part} bytes:\n{text}");
            }
        }
        // Each listed in its element's place.
        let (lines, _) = walked(&unknown_keys()[0], 1, 30);
        let unknown = |line: usize, path: &str, key: &str, expected: &str| {
            format!(
                "line {line}: domain a.test{path}: unknown field `{key}`, expected one of `{expected}`"
            )
        };
        let domain = "name`, `ttl`, `mode`, `main_dc`, `dr_dc`, `dc_order`, `dcs_to_select`, `nameservers`, `soa`, `topology_rules`, `record`, `dnssec`, `dnssec_algorithm`, `secondaries`, `view`, `catalog_group`, `catalog_coo`, `updates`, `primary";
        let record = "name`, `type`, `ttl`, `mode`, `balance`, `max_answers`, `dr_condition`, `dr_on_no_healthy`, `failback`, `fail_safe`, `on_no_healthy`, `topology`, `nearest`, `topology_rules`, `addresses`, `values`, `view`, `alias`, `transferred";
        let address =
            "ip`, `target`, `value`, `dc`, `hc`, `weight`, `countries`, `continents`, `group";
        assert_eq!(
            lines,
            [
                unknown(4, "", "k0", domain),
                "line 5: domain a.test: ttl: invalid type: string \"x\", expected u32".to_string(),
                unknown(6, "", "k1", domain),
                unknown(9, "", "k2", domain),
                unknown(13, "", "u", domain),
                unknown(14, "", "k3", domain),
                "line 15: domain a.test: mode: unknown variant `sideways`, expected one of `standalone`, `disaster-recovery`, `datacenter`".to_string(),
                unknown(16, "", "k-4", domain),
                unknown(19, "", "k5", domain),
                "line 22: domain a.test: soa.serial: invalid type: string \"s\", expected u32".to_string(),
                "line 25: domain a.test / record #1: missing field `name`".to_string(),
                unknown(27, " / record #1", "k7", record),
                "line 28: domain a.test / record #1: ttl: invalid type: string \"t\", expected u32".to_string(),
                unknown(33, " / record www A", "k8", record),
                "line 35: domain a.test / record www A / address 1: ip: \"192.0.2.300\" is not an IP address".to_string(),
                unknown(36, " / record www A / address 1", "k9", address),
                "line 40: domain a.test / record v TXT / value 1: invalid type: map, expected a string".to_string(),
            ]
        );
        // Read in parts, what is parsed at once is less than the piece.
        for text in &unknown_keys()[..4] {
            let (_, largest) = walked(text, 1, 1);
            assert!(largest < text.len(), "{largest} of {}:\n{text}", text.len());
        }
    }

    /// `kN = N` on every line of a domain (`scripts/bench-config-errors.sh`,
    /// `keys`) is listed without the piece parsed whole: what is parsed
    /// at once is a part, or the domain without those lines.
    #[test]
    fn a_large_table_of_unknown_keys_is_never_parsed_whole() {
        let text = (0..30_000).fold(HEAD.to_string(), |mut t, i| {
            t.push_str(&format!("k{i} = {i}\n"));
            t
        });
        assert!(text.len() > 4 * PART_BYTES, "{} bytes", text.len());
        let (lines, largest) = walked(&text, LARGE_PIECE, PART_BYTES);
        assert!(
            largest < 2 * PART_BYTES,
            "{largest} bytes parsed at once of {}",
            text.len()
        );
        let (whole, _) = walked(&text, usize::MAX, usize::MAX);
        assert_eq!(lines, whole);
        assert_eq!(lines.len(), ERRORS_LISTED + 1);
        assert_eq!(
            lines[ERRORS_LISTED],
            "… and 29000 more errors (30000 in all)"
        );
    }
}
