//! The lines of a TOML text that start a key or a table outside any value,
//! read with the TOML lexer: where a large text may be cut into pieces
//! (`parse`) and where a domain's records lie (`layout`).

use toml_parser::{
    Source,
    lexer::{Token, TokenKind},
};

/// What starts a line of a TOML text, outside any value.
pub(super) enum Start<'t> {
    /// A key (the span of its first token).
    Key(std::ops::Range<usize>),
    /// A table's header: `[[...]]` or not, and its keys (`None` for a
    /// quoted one).
    Table {
        array: bool,
        keys: Vec<Option<&'t str>>,
    },
    /// What does not lex as TOML there (a malformed header, more brackets
    /// closed than opened).
    Malformed,
}

/// The lines of a text that start a key or a table outside any value, each
/// with where the line starts (a cut there keeps what is before it whole).
pub(super) struct Lines<'t> {
    text: &'t str,
    tokens: std::iter::Peekable<toml_parser::lexer::Lexer<'t>>,
    /// Nesting of `[` and `{` inside values.
    depth: usize,
    line_start: bool,
    line: usize,
}

impl<'t> Lines<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Self {
            text,
            tokens: Source::new(text).lex().peekable(),
            depth: 0,
            line_start: true,
            line: 0,
        }
    }

    /// The tokens after the last line start read: a reader of a key's
    /// value goes on from there (the lines after it are not told apart
    /// any more).
    pub(super) fn tokens(&mut self) -> &mut std::iter::Peekable<toml_parser::lexer::Lexer<'t>> {
        &mut self.tokens
    }
}

impl<'t> Iterator for Lines<'t> {
    type Item = (usize, Start<'t>);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(token) = self.tokens.next() {
            let kind = token.kind();
            match kind {
                TokenKind::Newline => {
                    self.line_start = self.depth == 0;
                    self.line = token.span().end();
                    continue;
                }
                TokenKind::Whitespace | TokenKind::Comment => continue,
                TokenKind::Eof => return None,
                _ => {}
            }
            if !self.line_start {
                match kind {
                    TokenKind::LeftSquareBracket | TokenKind::LeftCurlyBracket => self.depth += 1,
                    TokenKind::RightSquareBracket | TokenKind::RightCurlyBracket => {
                        let Some(depth) = self.depth.checked_sub(1) else {
                            return Some((self.line, Start::Malformed));
                        };
                        self.depth = depth;
                    }
                    _ => {}
                }
                continue;
            }
            self.line_start = false;
            let span = token.span();
            if kind != TokenKind::LeftSquareBracket {
                return Some((self.line, Start::Key(span.start()..span.end())));
            }
            let start = header(self.text, &mut self.tokens).unwrap_or(Start::Malformed);
            return Some((self.line, start));
        }
        None
    }
}

/// Reads a header after its first `[`: whether it is `[[...]]`, and its
/// keys (bare, or `None` when quoted). `None` for a malformed header.
fn header<'t>(
    text: &'t str,
    tokens: &mut std::iter::Peekable<impl Iterator<Item = Token>>,
) -> Option<Start<'t>> {
    let array = tokens
        .next_if(|t| t.kind() == TokenKind::LeftSquareBracket)
        .is_some();
    let mut keys = Vec::new();
    loop {
        let token = tokens.next()?;
        let span = token.span();
        match token.kind() {
            TokenKind::Whitespace | TokenKind::Dot => {}
            TokenKind::Atom => keys.push(Some(text.get(span.start()..span.end())?)),
            TokenKind::BasicString | TokenKind::LiteralString => keys.push(None),
            TokenKind::RightSquareBracket => break,
            _ => return None,
        }
    }
    if array && tokens.next()?.kind() != TokenKind::RightSquareBracket {
        return None;
    }
    Some(Start::Table { array, keys })
}

/// Whether `gap`, the text between two records of a list, holds one
/// comma, outside its comments.
pub(super) fn one_comma(gap: &str) -> bool {
    Source::new(gap)
        .lex()
        .filter(|t| t.kind() == TokenKind::Comma)
        .count()
        == 1
}

/// Where to cut `text` into parts of about `bytes` that can each be read
/// on their own: only where a line starts a key or a table outside any
/// value, so that no statement is cut.
pub(super) fn part_cuts(text: &str, bytes: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut last = 0;
    for (line, start) in Lines::new(text) {
        if !matches!(start, Start::Malformed) && line >= last + bytes.max(1) {
            cuts.push(line);
            last = line;
        }
    }
    cuts
}
