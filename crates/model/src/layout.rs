//! Where the parts of a configuration text lie: the tables before the
//! domains, each domain, the tables after them ([`Layout`]), and inside a
//! domain the records of a `record = [ {...}, ... ]` list
//! ([`inline_records`]). Read from the text itself with the TOML lexer, so
//! an edit can take the operator's text as it was written, comments and
//! all, and every device reads the same layout from the same text.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use toml_parser::lexer::{Token, TokenKind};

use super::{
    config::Config,
    lines::{Lines, Start},
};

/// Where each part of a text lies. The parts, joined by a newline (an
/// empty head or tail joins nothing), are the text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// Everything before the first domain: the tables of the datacenters,
    /// checks and the rest.
    pub(super) head: Range<usize>,
    /// Per domain, in order: its name as written and its part's bytes.
    pub(super) domains: Vec<(String, Range<usize>)>,
    /// Everything after the last domain.
    pub(super) tail: Range<usize>,
    /// Where the records lie in the parts of the domains edits read them
    /// in.
    pub(super) spans: RecordSpans,
}

/// Where the records of a domain's `record = [...]` list lie in its part,
/// from the part's start, each from its `{` to its `}`: what
/// [`inline_records`] reads.
pub(super) type Spans = Arc<[Range<u32>]>;

/// The [`Spans`] of the domains whose records are such a list, by name as
/// the layout gives it: read from the text by [`Layout::of`] and carried
/// on by each edit, so that an edit does not read the domain's part again
/// with the lexer (5.7 MB and some 20 ms for 100,000 records). A cache of
/// what the text holds, not a part of the layout: layouts of one text are
/// equal whatever they cache.
#[derive(Debug, Clone, Default)]
pub(super) struct RecordSpans(pub(super) HashMap<String, Spans>);

impl PartialEq for RecordSpans {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for RecordSpans {}

/// `spans` as [`Spans`], `None` when one does not fit in 32 bits (a part
/// of 4 GiB is far past any command's limit).
pub(super) fn to_spans(spans: &[Range<usize>]) -> Option<Spans> {
    spans
        .iter()
        .map(|r| Some(u32::try_from(r.start).ok()?..u32::try_from(r.end).ok()?))
        .collect()
}

impl Layout {
    /// The layout of `text`, which parses to `config`: its head, each
    /// `[[domain]]` table with everything after it up to the next table
    /// that is not the domain's own, and its tail (a text without domains
    /// is its head). `None` when the text cannot be told apart so: a table
    /// other than a domain's comes between two domains, a header's first
    /// key is quoted, its domains are not `[[domain]]` tables, or the text
    /// does not start with its head as the layout joins it.
    pub fn of(text: &str, config: &Config) -> Option<Layout> {
        let mut starts = Vec::with_capacity(config.domains.len());
        let mut tail = None;
        for (line, start) in Lines::new(text) {
            let (array, keys) = match start {
                Start::Key(_) => continue,
                Start::Malformed => return None,
                Start::Table { array, keys } => (array, keys),
            };
            // A quoted first key is not told apart.
            let first = (*keys.first()?)?;
            if first == "domain" && array && keys.len() == 1 {
                if tail.is_some() {
                    return None;
                }
                starts.push(line);
            } else if first == "domain" {
                if starts.is_empty() || tail.is_some() {
                    return None;
                }
            } else if !starts.is_empty() && tail.is_none() {
                tail = Some(line);
            }
        }
        if starts.len() != config.domains.len() {
            return None;
        }
        if starts.is_empty() {
            // No domain: the text is its head.
            return Some(Layout {
                head: 0..text.len(),
                domains: Vec::new(),
                tail: text.len()..text.len(),
                spans: RecordSpans::default(),
            });
        }
        // A part ends before the newline that ends the line before the
        // next one's: the join puts it back. A head of a lone newline
        // would not be joined: told apart only when it holds more.
        let first = starts[0];
        if first == 1 {
            return None;
        }
        let last_end = tail.map_or(text.len(), |t| t - 1);
        let ends = starts.iter().skip(1).map(|&s| s - 1).chain([last_end]);
        let domains: Vec<(String, Range<usize>)> = config
            .domains
            .iter()
            .zip(starts.iter().zip(ends))
            .map(|(d, (&start, end))| (d.name.clone(), start..end))
            .collect();
        // Where each list of inline records lies, read once here (about
        // 200 ms for a million records) rather than by each domain's
        // first edit.
        let spans = config
            .domains
            .iter()
            .zip(&domains)
            .filter_map(|(d, (name, range))| {
                let spans = inline_records(text.get(range.clone())?, d.records.len())?;
                Some((name.clone(), to_spans(&spans)?))
            })
            .collect();
        Some(Layout {
            head: 0..first.saturating_sub(1),
            domains,
            tail: tail.map_or(text.len()..text.len(), |t| t..text.len()),
            spans: RecordSpans(spans),
        })
    }
}

/// Where each record of a domain's part `text` lies, when the domain's
/// records are a list of inline tables in its own table (`record = [ {...},
/// {...} ]`) holding `count` of them: each from its `{` to its `}`.
pub(super) fn inline_records(text: &str, count: usize) -> Option<Vec<Range<usize>>> {
    record_list(text, count)
        .filter(|list| list.elements.len() == count)
        .map(|list| list.elements)
}

/// A domain's `record = [ {...}, ... ]` list, as [`record_list`] finds it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RecordList {
    /// The byte after the list's `[`.
    pub(super) open: usize,
    /// The byte of its `]`.
    pub(super) close: usize,
    /// Each inline table, from its `{` to its `}`.
    pub(super) elements: Vec<Range<usize>>,
}

/// The list of inline records of the domain whose part `text` is: its
/// `[[domain]]` table, the first and only table before a `record` key
/// whose value is a list of inline tables. `capacity`: the records
/// expected, room made for them.
pub(super) fn record_list(text: &str, capacity: usize) -> Option<RecordList> {
    let mut lines = Lines::new(text);
    let mut tables = 0;
    while let Some((_, start)) = lines.next() {
        match start {
            Start::Malformed => return None,
            // The domain's own header; a second ends its own table.
            Start::Table { array, keys } => {
                tables += 1;
                if tables > 1 || !array || keys != [Some("domain")] {
                    return None;
                }
            }
            Start::Key(key) if tables == 1 && text.get(key.clone()) == Some("record") => {
                let tokens = lines.tokens();
                if next_kind(tokens)? != TokenKind::Equals {
                    return None;
                }
                let open = tokens
                    .find(|t| t.kind() != TokenKind::Whitespace)
                    .filter(|t| t.kind() == TokenKind::LeftSquareBracket)?
                    .span()
                    .end();
                let (elements, close) = elements(tokens, capacity)?;
                return Some(RecordList {
                    open,
                    close,
                    elements,
                });
            }
            Start::Key(_) => {}
        }
    }
    None
}

/// The kind of the next token that is not whitespace.
fn next_kind(tokens: &mut impl Iterator<Item = Token>) -> Option<TokenKind> {
    tokens
        .find(|t| t.kind() != TokenKind::Whitespace)
        .map(|t| t.kind())
}

/// The inline tables of a list whose `[` was read, up to its `]`, and
/// where that `]` is.
fn elements(
    tokens: &mut impl Iterator<Item = Token>,
    capacity: usize,
) -> Option<(Vec<Range<usize>>, usize)> {
    let mut spans = Vec::with_capacity(capacity);
    let mut depth = 0usize;
    let mut start = 0;
    for token in tokens {
        let kind = token.kind();
        let span = token.span();
        match kind {
            TokenKind::LeftCurlyBracket | TokenKind::LeftSquareBracket => {
                if depth == 0 {
                    if kind != TokenKind::LeftCurlyBracket {
                        return None;
                    }
                    start = span.start();
                }
                depth += 1;
            }
            TokenKind::RightCurlyBracket | TokenKind::RightSquareBracket => {
                if depth == 0 {
                    return (kind == TokenKind::RightSquareBracket)
                        .then_some((spans, span.start()));
                }
                depth -= 1;
                if depth == 0 {
                    spans.push(start..span.end());
                }
            }
            TokenKind::Whitespace | TokenKind::Newline | TokenKind::Comment | TokenKind::Comma => {}
            TokenKind::Eof => return None,
            _ if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(text: &str) -> Option<Layout> {
        Layout::of(text, &crate::parse(text).unwrap())
    }

    /// The parts, joined as [`super::super::text`] joins them.
    fn joined(text: &str, l: &Layout) -> String {
        let mut parts = vec![&text[l.head.clone()]];
        parts.extend(l.domains.iter().map(|(_, r)| &text[r.clone()]));
        parts.push(&text[l.tail.clone()]);
        parts
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_parts_of_an_operators_text_join_to_it() {
        let texts = [
            "# my zones\n[[datacenter]]\nname = \"dc1\"\n\n[[domain]] # first\nname = \"a.test\"\nrecord = [\n  {name=\"x\",type=\"A\",addresses=[{ip=\"192.0.2.1\"}]}, # one\n]\n[domain.soa]\nrefresh = 60\n\n  [[ domain ]]\nname = \"b.test\"\n\n[rate_limit]\nenabled = false\n",
            "[[domain]]\r\nname = \"a.test\"\r\n[[domain]]\r\nname = \"b.test\"\r\n",
            "[[domain]]\nname = \"a.test\"\n[[domain.record]]\nname = \"x\"\ntype = \"TXT\"\nvalues = [\"\"\"\n[[domain]]\n\"\"\"]\n",
            "[[domain]]\nname = \"a.test\"\n[domain.\"soa\"]\nrefresh = 60\n[[domain.record]]\nname = \"x\"\ntype = \"TXT\"\nvalues = [\"[[domain]]\"]\n",
        ];
        for text in texts {
            let l = layout(text).unwrap_or_else(|| panic!("{text:?}"));
            assert_eq!(joined(text, &l), text);
            assert_eq!(l.domains[0].0, "a.test");
        }
        let l = layout(texts[0]).unwrap();
        assert!(text_of(texts[0], &l.head).starts_with("# my zones"));
        assert!(text_of(texts[0], &l.domains[0].1).ends_with("refresh = 60\n"));
        assert_eq!(
            text_of(texts[0], &l.tail),
            "[rate_limit]\nenabled = false\n"
        );
    }

    fn text_of<'t>(text: &'t str, r: &Range<usize>) -> &'t str {
        &text[r.clone()]
    }

    #[test]
    fn a_text_without_domains_is_its_head_and_one_not_told_apart_has_no_layout() {
        for text in ["", "[rate_limit]\nenabled = false\n"] {
            let l = layout(text).unwrap();
            assert_eq!(
                (l.head, l.domains.len(), l.tail),
                (0..text.len(), 0, text.len()..text.len())
            );
        }
        for text in [
            "[[domain]]\nname = \"a.test\"\n[[check]]\nname = \"c\"\ntype = \"tcp\"\nport = 1\n[[domain]]\nname = \"b.test\"\n",
            "[[\"domain\"]]\nname = \"a.test\"\n",
            "domain = [{ name = \"a.test\" }]\n",
            "\n[[domain]]\nname = \"a.test\"\n",
        ] {
            assert_eq!(layout(text), None, "{text:?}");
        }
    }

    #[test]
    fn inline_records_are_found_from_brace_to_brace() {
        let text = "[[domain]]\nname = \"a.test\"\nrecord = [ # the list\n{name=\"x\", type=\"TXT\", values=[\"}, {\"]},\n  { name = \"y\", type = \"A\", addresses = [{ ip = \"192.0.2.1\" }] }\n,]\n[domain.soa]\nrefresh = 60\n";
        let spans = inline_records(text, 2).unwrap();
        assert_eq!(
            &text[spans[0].clone()],
            "{name=\"x\", type=\"TXT\", values=[\"}, {\"]}"
        );
        assert!(text[spans[1].clone()].starts_with("{ name = \"y\""));
        assert!(text[spans[1].clone()].ends_with("}] }"));
        assert_eq!(inline_records(text, 3), None, "the count is checked");
        for other in [
            "[[domain]]\nname = \"a.test\"\n[[domain.record]]\nname = \"x\"\ntype = \"TXT\"\nvalues = [\"v\"]\n",
            "[[domain]]\nname = \"a.test\"\n[domain.soa]\nrecord = [{ a = 1 }]\n",
            "[[domain]]\nname = \"a.test\"\nrecord = [[1]]\n",
        ] {
            assert_eq!(inline_records(other, 1), None, "{other:?}");
        }
    }
}
