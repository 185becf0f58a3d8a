//! The keys of a large text's tables that the table does not take (`kN =
//! N` on every line of a domain), found by reading the text in parts with
//! the TOML parser's events: neither the tokens of the whole text nor its
//! tree are held.
//!
//! A table is an element's own when it is checked key by key ([`Kind`]):
//! the root's keys before any header, `[[datacenter]]` ... `[[domain]]`,
//! `[geoip]`, `[[domain.record]]`, `[[domain.record.addresses]]`. A bare
//! key one of them does not take (its kind's `unknown_key`) is an error
//! whatever the rest of the text says, and the same error whatever its
//! value. `parse` refuses a large piece with one before the `toml` crate
//! parses it whole ([`Keys::first`]); `diagnose` lists each and
//! type-checks the rest of the text with their statements blanked out
//! ([`Keys::collect`], [`Unknown`]).

use std::{
    collections::{HashMap, HashSet},
    hash::{BuildHasher, RandomState},
    ops::Range,
};

use toml_parser::{
    ErrorSink, ParseError, Source, Span,
    decoder::Encoding,
    parser::{EventReceiver, RecursionGuard, ValidateWhitespace, parse_document},
};

use super::{
    cancel::{Cancel, Cancelled},
    kind::Kind,
    lines::part_cuts,
};

/// How deep values may nest, as the `toml` crate allows.
pub(super) const NESTING: u32 = 80;

/// The keys taken kept to look up, of all kinds: more than all their
/// fields.
const KNOWN_KEPT: usize = 64;

/// Reads `piece` for its grammar in parts of about `part_bytes`, cut
/// where a line starts a key or a table outside any value, and hands each
/// part's events to `keys` when given. A part is read as the whole text
/// would be there, so an error it finds is an error of the whole; what
/// only the whole shows (a key given twice) is not found. The first error
/// of grammar, and its byte in `piece`.
pub(super) fn read_parts(
    piece: &str,
    part_bytes: usize,
    mut keys: Option<&mut Keys<'_>>,
    cancel: &Cancel,
) -> Result<Option<(usize, ParseError)>, Cancelled> {
    let mut bounds = vec![0];
    bounds.extend(part_cuts(piece, part_bytes));
    bounds.push(piece.len());
    for pair in bounds.windows(2) {
        cancel.check()?;
        let [from, to] = *pair else { continue };
        let part = piece.get(from..to).unwrap_or_default();
        let source = Source::new(part);
        let tokens = source.lex().into_vec();
        let mut ignored = ();
        let events: &mut dyn EventReceiver = match keys.as_deref_mut() {
            Some(keys) => {
                keys.part(from);
                keys
            }
            None => &mut ignored,
        };
        let mut whitespace = ValidateWhitespace::new(events, source);
        let mut receiver = RecursionGuard::new(&mut whitespace, NESTING);
        let mut error: Option<ParseError> = None;
        parse_document(&tokens, &mut receiver, &mut error);
        if let Some(e) = error {
            let at = from + e.unexpected().map_or(0, |s| s.start());
            return Ok(Some((at, e)));
        }
    }
    if let Some(keys) = keys {
        keys.end();
    }
    Ok(None)
}

/// A statement (`kN = N`, to the next statement or header) whose key its
/// table does not take: the bytes of its key and where it ends, in the
/// text read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Statement {
    key: (u32, u32),
    end: u32,
}

/// The statements with unknown keys of a text, by table; what
/// `diagnose` lists of it, and what it leaves out.
#[derive(Debug, Default)]
pub(super) struct Unknown {
    statements: Vec<Statement>,
    /// Each table with such statements: where its header starts (0 for
    /// the root's keys), its kind, and its statements.
    tables: HashMap<(usize, Kind), Range<usize>>,
}

/// A table's statements with unknown keys, in the order of the text.
type Table = ((usize, Kind), Range<usize>);

impl Unknown {
    /// `text` without the statements, and where each of its bytes was
    /// taken from; `None` when what is left is not text (cannot be:
    /// statements start and end at tokens).
    pub(super) fn rest(&self, text: &str) -> Option<(String, Places)> {
        let mut rest = String::with_capacity(text.len() / 4);
        let mut places = Places(vec![(0, 0)]);
        let mut from = 0;
        for s in &self.statements {
            let (start, end) = (s.key.0 as usize, s.end as usize);
            if start > from {
                places.0.push((rest.len(), from));
                rest.push_str(text.get(from..start)?);
            }
            from = from.max(end);
        }
        places.0.push((rest.len(), from));
        rest.push_str(text.get(from..)?);
        Some((rest, places))
    }

    /// Takes the table of `kind` whose header starts at byte `at` of the
    /// text read (0 for the root): its statements, for [`Self::keys`].
    pub(super) fn take(&mut self, at: usize, kind: Kind) -> Option<Range<usize>> {
        self.tables.remove(&(at, kind))
    }

    /// The bytes in the text read of the keys of `statements`.
    pub(super) fn keys(&self, statements: Range<usize>) -> impl Iterator<Item = Range<usize>> {
        let keys = self.statements.get(statements).unwrap_or_default();
        keys.iter().map(|s| s.key.0 as usize..s.key.1 as usize)
    }

    /// Whether every table was taken.
    pub(super) fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

/// Where the bytes of a text without some statements ([`Unknown::rest`])
/// were taken from: runs, each where it starts in the rest and in the
/// text.
#[derive(Debug, Default)]
pub(super) struct Places(Vec<(usize, usize)>);

impl Places {
    /// The byte of the text that byte `at` of the rest was taken from (a
    /// byte right after a statement left out: the byte after it).
    pub(super) fn at(&self, at: usize) -> usize {
        let run = self.0.partition_point(|&(rest, _)| rest <= at);
        match run.checked_sub(1).and_then(|i| self.0.get(i)) {
            Some(&(rest, text)) => text + (at - rest),
            None => at,
        }
    }
}

/// What [`Keys`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Find {
    /// The first unknown key, for `parse` to refuse the piece.
    First,
    /// Every statement with one, for `diagnose` to list and leave out.
    All,
}

/// Reads a text's events part after part ([`read_parts`]) for the keys
/// its elements' tables do not take.
pub(super) struct Keys<'t> {
    text: &'t str,
    find: Find,
    /// Where the part read starts in `text`.
    base: usize,
    /// Nesting of arrays and inline tables.
    depth: usize,
    /// A key starts a statement here (a line start outside any value).
    line_start: bool,
    /// The header being read: where it starts, whether `[[...]]`, its
    /// keys (`None` for a quoted one).
    header: Option<(usize, bool, Vec<Option<&'t str>>)>,
    /// The element whose table the statements are in: where its header
    /// starts, and its kind; `None` in a table of another kind.
    table: Option<(usize, Kind)>,
    /// Keys a kind takes, as found so far: a few, looked up on every line
    /// of a valid text (at most [`KNOWN_KEPT`]: a kind may take any key).
    known: Vec<(Kind, &'t str)>,
    /// The first unknown key found, and its table's kind.
    first: Option<(Range<usize>, Kind)>,
    /// The statements found, and their tables in order.
    statements: Vec<Statement>,
    tables: Vec<Table>,
    /// The statement found last, until its end is known.
    open: Option<(usize, usize)>,
    /// The keys of the text's headers: a statement left out must not
    /// name one (`[domain.k]` after `k = 1` is an error the whole shows).
    header_keys: HashSet<&'t str>,
    /// False once the text has what it would not show alike without the
    /// statements: a quoted key in an element's table, a quoted header
    /// key; or a text of 4 GiB.
    sure: bool,
}

impl<'t> Keys<'t> {
    /// Looks for the first key of `text` its table does not take.
    pub(super) fn first(text: &'t str) -> Self {
        Self::new(text, Find::First)
    }

    /// Looks for every statement of `text` whose key its table does not
    /// take.
    pub(super) fn collect(text: &'t str) -> Self {
        Self::new(text, Find::All)
    }

    fn new(text: &'t str, find: Find) -> Self {
        Self {
            text,
            find,
            base: 0,
            depth: 0,
            line_start: true,
            header: None,
            table: Some((0, Kind::Root)),
            known: Vec::new(),
            first: None,
            statements: Vec::new(),
            tables: Vec::new(),
            open: None,
            header_keys: HashSet::new(),
            sure: u32::try_from(text.len()).is_ok(),
        }
    }

    /// The first unknown key (its bytes in the text) and the kind of its
    /// table.
    pub(super) fn first_unknown(&self) -> Option<(Range<usize>, Kind)> {
        self.first.clone()
    }

    /// Every statement with an unknown key, read to the text's end; `None`
    /// when there is none, or when leaving them out could change what
    /// the rest of the text says: two with one key in a table (one key
    /// given twice, or a dotted key's table), one naming a header's key,
    /// or what makes the reading unsure.
    pub(super) fn unknown(self) -> Option<Unknown> {
        if !self.sure || self.statements.is_empty() {
            return None;
        }
        let text = self.text;
        let hasher = RandomState::new();
        let mut hashes = Vec::with_capacity(self.statements.len());
        for ((at, _), range) in &self.tables {
            for s in self.statements.get(range.clone())? {
                let name = text.get(s.key.0 as usize..s.key.1 as usize)?;
                if self.header_keys.contains(name) {
                    return None;
                }
                hashes.push(hasher.hash_one((at, name)));
            }
        }
        hashes.sort_unstable();
        // Two equal hashes are most likely one name twice: then, or if
        // not, the text is read whole as before.
        if hashes.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        let count = self.tables.len();
        let tables: HashMap<_, _> = self.tables.into_iter().collect();
        (tables.len() == count).then_some(Unknown {
            statements: self.statements,
            tables,
        })
    }

    /// The next part starts at byte `from`, at a line start outside any
    /// value.
    fn part(&mut self, from: usize) {
        self.base = from;
        self.depth = 0;
        self.line_start = true;
        self.header = None;
    }

    /// The text is read.
    fn end(&mut self) {
        self.close(self.text.len());
    }

    /// The statement found last ends at byte `at`.
    fn close(&mut self, at: usize) {
        if let Some((key, end)) = self.open.take() {
            let (Ok(from), Ok(to), Ok(at)) = (
                u32::try_from(key),
                u32::try_from(end),
                u32::try_from(at.max(end)),
            ) else {
                self.sure = false;
                return;
            };
            self.statements.push(Statement {
                key: (from, to),
                end: at,
            });
        }
    }

    fn at(&self, span: Span) -> Range<usize> {
        self.base + span.start()..self.base + span.end()
    }

    /// A statement's first key, at `span`: looked up in its table.
    fn statement(&mut self, span: Span, encoding: Option<Encoding>) {
        let at = self.at(span);
        self.close(at.start);
        let Some((table, kind)) = self.table else {
            return;
        };
        let name = match encoding {
            None => self.text.get(at.clone()).filter(|n| bare(n)),
            Some(_) => None,
        };
        let Some(name) = name else {
            self.sure = false;
            return;
        };
        if self.find == Find::First && self.first.is_some() {
            return;
        }
        if self.known.iter().any(|&(k, n)| k == kind && n == name) {
            return;
        }
        if kind.unknown_key(name).is_none() {
            if self.known.len() < KNOWN_KEPT {
                self.known.push((kind, name));
            }
            return;
        }
        if self.first.is_none() {
            self.first = Some((at.clone(), kind));
        }
        if self.find == Find::All {
            let n = self.statements.len();
            match self.tables.last_mut() {
                Some((t, range)) if *t == (table, kind) => range.end = n + 1,
                _ => self.tables.push(((table, kind), n..n + 1)),
            }
            self.open = Some((at.start, at.end));
        }
    }

    /// A header opens at `span`.
    fn header_open(&mut self, span: Span, array: bool) {
        let at = self.at(span).start;
        self.close(at);
        self.header = Some((at, array, Vec::new()));
        self.line_start = false;
    }

    /// The header read closes: the table its keys name is an element's
    /// own when each key is the one of its kind's elements.
    fn header_close(&mut self) {
        let Some((at, array, keys)) = self.header.take() else {
            return;
        };
        let mut kind = Some((Kind::Root, false));
        for key in &keys {
            kind = match (kind, key) {
                (Some((k, _)), Some(key)) => k.child(key),
                _ => None,
            };
        }
        self.table = match kind {
            Some((kind, list)) if list == array && !keys.is_empty() => Some((at, kind)),
            _ => None,
        };
    }
}

/// Whether `name` is a bare key: its text is its name.
fn bare(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl EventReceiver for Keys<'_> {
    fn std_table_open(&mut self, span: Span, _error: &mut dyn ErrorSink) {
        self.header_open(span, false);
    }
    fn std_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.header_close();
    }
    fn array_table_open(&mut self, span: Span, _error: &mut dyn ErrorSink) {
        self.header_open(span, true);
    }
    fn array_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.header_close();
    }
    fn inline_table_open(&mut self, _span: Span, _error: &mut dyn ErrorSink) -> bool {
        self.depth += 1;
        true
    }
    fn inline_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.depth = self.depth.saturating_sub(1);
    }
    fn array_open(&mut self, _span: Span, _error: &mut dyn ErrorSink) -> bool {
        self.depth += 1;
        true
    }
    fn array_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.depth = self.depth.saturating_sub(1);
    }
    fn simple_key(&mut self, span: Span, encoding: Option<Encoding>, _error: &mut dyn ErrorSink) {
        if let Some((_, _, keys)) = &mut self.header {
            let at = self.base + span.start()..self.base + span.end();
            let key = match encoding {
                None => self.text.get(at).filter(|k| bare(k)),
                Some(_) => None,
            };
            match key {
                Some(key) if self.find == Find::All => {
                    self.header_keys.insert(key);
                }
                Some(_) => {}
                None => self.sure = false,
            }
            keys.push(key);
        } else if self.line_start && self.depth == 0 {
            self.line_start = false;
            self.statement(span, encoding);
        }
    }
    fn newline(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        if self.depth == 0 && self.header.is_none() {
            self.line_start = true;
        }
    }
}
