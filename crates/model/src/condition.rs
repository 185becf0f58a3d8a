//! Health-scenario condition language.
//!
//! A *condition* decides whether a scenario (for example "serve the primary
//! pool") is healthy, by combining the results of individual health checks.
//! Operators write conditions as short text such as
//! `web1 AND (db1 OR db2) UNLESS maint`; this module turns that text into an
//! [`Expr`] tree, evaluates the tree against the current check results with
//! three-valued (Kleene) logic, lists the referenced checks so configuration
//! can be validated, and prints a tree back as canonical text.
//!
//! # Grammar
//!
//! Keywords are case-insensitive; check names are case-sensitive.
//!
//! ```text
//! expr    := unless
//! unless  := or ( "UNLESS" or )*        -- `a UNLESS b` means `a AND NOT b`
//! or      := and ( "OR" and )*
//! and     := not ( "AND" not )*
//! not     := "NOT" not | primary
//! primary := "(" expr ")"
//!          | "AT" "LEAST" INT "OF" "(" expr ( "," expr )* ")"
//!          | ref
//! ref     := NAME [ "@" ADDRESS ]
//! NAME    := [A-Za-z0-9_][A-Za-z0-9_.-]*   (not one of the keywords)
//! ADDRESS := an IPv4 or IPv6 address, written directly after "@"
//! ```
//!
//! Precedence, tightest first: `NOT`, `AND`, `OR`, `UNLESS`. All binary
//! operators are left-associative. The keywords `AND OR NOT UNLESS AT LEAST OF`
//! cannot be used as check names.
//!
//! `UNLESS` has no node of its own: `a UNLESS b` is parsed as
//! `And([a, Not(b)])`, so evaluation and display only deal with the four
//! basic operators plus `AT LEAST`.
//!
//! Examples:
//!
//! ```text
//! web1 AND (db1 OR db2) UNLESS maint
//! NOT (web@192.0.2.10 OR web@192.0.2.11) UNLESS maintenance
//! AT LEAST 2 OF (a, b, c@2001:db8::1)
//! ```

use std::fmt;
use std::net::IpAddr;

/// Deepest nesting of parentheses, `NOT`, `AT LEAST` and `UNLESS` accepted
/// by [`parse`].
///
/// The parser, [`Expr::eval`] and `Display` are recursive; bounding the depth
/// keeps a hostile or mistaken condition from overflowing the stack.
pub const MAX_DEPTH: usize = 100;

/// A parsed condition.
///
/// Sequences produced by [`parse`] always hold at least two operands for
/// `And`/`Or` and at least one for `AtLeast`; `a AND b AND c` becomes a
/// single `And` with three operands, while explicit parentheses
/// (`(a AND b) AND c`) keep their nesting so that the tree mirrors the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// The result of one health check.
    Ref(CheckRef),
    /// Negation; unknown stays unknown.
    Not(Box<Expr>),
    /// True when every operand is true. `a UNLESS b` is `And([a, Not(b)])`.
    And(Vec<Expr>),
    /// True when any operand is true.
    Or(Vec<Expr>),
    /// True when at least the given number of operands are true.
    AtLeast(usize, Vec<Expr>),
}

/// A reference to a health check, optionally pinned to one target address.
///
/// A check usually probes several addresses; `web@192.0.2.10` names the result
/// of check `web` for that one address, while plain `web` names the check's
/// overall result. Ordered and hashable so callers can collect and
/// deduplicate references when validating configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CheckRef {
    /// The check's name as written (case-sensitive).
    pub name: String,
    /// The target address, when the reference is pinned to one.
    pub address: Option<IpAddr>,
}

impl fmt::Display for CheckRef {
    /// Writes `name` or `name@address`, the same form [`parse`] accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.address {
            Some(addr) => write!(f, "{}@{}", self.name, addr),
            None => f.write_str(&self.name),
        }
    }
}

/// Why a condition could not be parsed, and where.
///
/// Carries the whole input and a 1-based character column so that the message
/// can be shown to an operator as-is (for example in a configuration error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    /// The condition text that failed to parse.
    pub input: String,
    /// 1-based character (not byte) column of the problem; one past the last
    /// character when the condition ended too early.
    pub position: usize,
    /// What is wrong, without the location.
    pub message: String,
}

/// Conditions longer than this are quoted around the error only.
const QUOTE_CHARS: usize = 120;

impl fmt::Display for ParseError {
    /// `message at position N in "input"`; a long input (a generated
    /// condition can be megabytes) is quoted only around the position.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at position {} in \"", self.message, self.position)?;
        let len = self.input.chars().count();
        if len <= QUOTE_CHARS {
            f.write_str(&self.input)?;
        } else {
            let start = self.position.saturating_sub(QUOTE_CHARS / 2 + 1);
            let end = (start + QUOTE_CHARS).min(len);
            if start > 0 {
                f.write_str("…")?;
            }
            let excerpt: String = self.input.chars().skip(start).take(end - start).collect();
            f.write_str(&excerpt)?;
            if end < len {
                f.write_str("…")?;
            }
        }
        f.write_str("\"")
    }
}

/// Parses condition text into an [`Expr`].
///
/// This is the only way text enters the condition language, so it rejects
/// everything the grammar in the module docs does not allow, including
/// `AT LEAST` counts that can never be met and nesting deeper than
/// [`MAX_DEPTH`].
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    let chars: Vec<char> = input.chars().collect();
    let tokens = lex(input, &chars)?;
    let end_pos = chars.len() + 1;
    if tokens.is_empty() {
        return Err(error(input, 1, "empty condition"));
    }
    let mut parser = Parser {
        input,
        tokens,
        idx: 0,
        end_pos,
        depth: 0,
    };
    let expr = parser.parse_expr()?;
    match parser.peek() {
        None if expr.text_depth() > MAX_DEPTH => Err(error(
            input,
            1,
            format!(
                "condition is nested more than {MAX_DEPTH} levels deep once written out (each UNLESS nests everything before it)"
            ),
        )),
        None => Ok(expr),
        Some(t) if t.tok == Tok::RParen => Err(parser.err_at(t.pos, "unmatched \")\"")),
        Some(t) => Err(parser.err_at(
            t.pos,
            format!(
                "expected \"AND\", \"OR\", \"UNLESS\" or end of condition, found \"{}\"",
                t.text
            ),
        )),
    }
}

impl Expr {
    /// Evaluates the condition with three-valued (Kleene) logic.
    ///
    /// `state` gives each check's result: `Some(true)` = OK,
    /// `Some(false)` = Error, `None` = unknown (Preparing / No Data).
    /// Unknown results propagate only when they could change the outcome,
    /// so a scenario is not held back by a check that does not matter:
    ///
    /// * `AND`: false if any operand is false, true if all are true, else unknown.
    /// * `OR`: true if any operand is true, false if all are false, else unknown.
    /// * `NOT`: swaps true and false; unknown stays unknown.
    /// * `AT LEAST n`: true if at least `n` operands are true, false if even
    ///   counting every unknown operand as true fewer than `n` would be,
    ///   else unknown.
    pub fn eval(&self, state: &impl Fn(&CheckRef) -> Option<bool>) -> Option<bool> {
        match self {
            Expr::Ref(r) => state(r),
            Expr::Not(e) => e.eval(state).map(|v| !v),
            Expr::And(items) => {
                let mut unknown = false;
                for item in items {
                    match item.eval(state) {
                        Some(false) => return Some(false),
                        Some(true) => {}
                        None => unknown = true,
                    }
                }
                if unknown { None } else { Some(true) }
            }
            Expr::Or(items) => {
                let mut unknown = false;
                for item in items {
                    match item.eval(state) {
                        Some(true) => return Some(true),
                        Some(false) => {}
                        None => unknown = true,
                    }
                }
                if unknown { None } else { Some(false) }
            }
            Expr::AtLeast(n, items) => {
                let (mut yes, mut unknown) = (0usize, 0usize);
                for item in items {
                    match item.eval(state) {
                        Some(true) => yes += 1,
                        Some(false) => {}
                        None => unknown += 1,
                    }
                }
                if yes >= *n {
                    Some(true)
                } else if yes + unknown < *n {
                    Some(false)
                } else {
                    None
                }
            }
        }
    }

    /// Every check referenced by the condition, in order of appearance.
    ///
    /// Used to validate a configuration (does every referenced check exist,
    /// does it probe the named address?). Duplicates are kept so each
    /// occurrence can be reported; sort and dedup if only the set is needed.
    pub fn refs(&self) -> Vec<&CheckRef> {
        let mut out = Vec::new();
        self.collect_refs(&mut out);
        out
    }

    fn collect_refs<'a>(&'a self, out: &mut Vec<&'a CheckRef>) {
        match self {
            Expr::Ref(r) => out.push(r),
            Expr::Not(e) => e.collect_refs(out),
            Expr::And(items) | Expr::Or(items) | Expr::AtLeast(_, items) => {
                for item in items {
                    item.collect_refs(out);
                }
            }
        }
    }

    /// Binding strength used by `Display` to decide where parentheses go.
    fn precedence(&self) -> u8 {
        match self {
            Expr::Or(_) => 1,
            Expr::And(_) => 2,
            Expr::Not(_) => 3,
            Expr::Ref(_) | Expr::AtLeast(..) => 4,
        }
    }

    /// How deeply the canonical text (`Display`) nests, as the parser counts
    /// it: each parenthesis, `NOT` and `AT LEAST`. A parsed condition within
    /// [`MAX_DEPTH`] can still print deeper (`UNLESS` prints as
    /// `AND NOT (…)` inside parentheses), so [`parse`] refuses one whose
    /// text would not parse back.
    fn text_depth(&self) -> usize {
        let operand = |e: &Expr, parent: u8| usize::from(e.precedence() <= parent) + e.text_depth();
        match self {
            Expr::Ref(_) => 0,
            Expr::Not(e) => 1 + usize::from(e.precedence() < 3) + e.text_depth(),
            Expr::And(items) => items.iter().map(|e| operand(e, 2)).max().unwrap_or(0),
            Expr::Or(items) => items.iter().map(|e| operand(e, 1)).max().unwrap_or(0),
            Expr::AtLeast(_, items) => 1 + items.iter().map(Expr::text_depth).max().unwrap_or(0),
        }
    }

    /// Writes `self` as an operand of an operator with precedence `parent`,
    /// adding parentheses when `self` binds no tighter than the parent (equal
    /// precedence is parenthesised too, to preserve explicit nesting).
    fn fmt_operand(&self, f: &mut fmt::Formatter<'_>, parent: u8) -> fmt::Result {
        if self.precedence() <= parent {
            write!(f, "({self})")
        } else {
            write!(f, "{self}")
        }
    }

    fn fmt_joined(items: &[Expr], f: &mut fmt::Formatter<'_>, op: &str, prec: u8) -> fmt::Result {
        if items.is_empty() {
            // Not produced by `parse`; printed as an obviously incomplete condition.
            return f.write_str("()");
        }
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                write!(f, " {op} ")?;
            }
            item.fmt_operand(f, prec)?;
        }
        Ok(())
    }
}

impl fmt::Display for Expr {
    /// Writes canonical text: upper-case keywords, single spaces, and only the
    /// parentheses needed. Any `Expr` returned by [`parse`] prints to text
    /// that parses back to an equal `Expr` (`UNLESS` comes back as
    /// `AND NOT`). Hand-built `And`/`Or` with fewer than two operands cannot
    /// round-trip, since the text has no way to express them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Ref(r) => write!(f, "{r}"),
            Expr::Not(e) => {
                f.write_str("NOT ")?;
                // A nested NOT needs no parentheses: `NOT NOT a`.
                if e.precedence() < 3 {
                    write!(f, "({e})")
                } else {
                    write!(f, "{e}")
                }
            }
            Expr::And(items) => Expr::fmt_joined(items, f, "AND", 2),
            Expr::Or(items) => Expr::fmt_joined(items, f, "OR", 1),
            Expr::AtLeast(n, items) => {
                write!(f, "AT LEAST {n} OF (")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str(")")
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    LParen,
    RParen,
    Comma,
    At,
    /// A name, keyword or count; classified by the parser.
    Word,
    /// The text following "@".
    Address,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// 1-based character column of the first character.
    pos: usize,
    text: String,
}

fn error(input: &str, position: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        input: input.to_string(),
        position,
        message: message.into(),
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_name_char(c: char) -> bool {
    is_name_start(c) || c == '.' || c == '-'
}

fn is_address_char(c: char) -> bool {
    c.is_ascii_hexdigit() || c == ':' || c == '.'
}

fn lex(input: &str, chars: &[char]) -> Result<Vec<Token>, ParseError> {
    let mut tokens = Vec::new();
    let mut i = 0;
    let run = |start: usize, pred: fn(char) -> bool| {
        let mut end = start;
        while end < chars.len() && pred(chars[end]) {
            end += 1;
        }
        end
    };
    while i < chars.len() {
        let c = chars[i];
        let pos = i + 1;
        let single = |tok| Token {
            tok,
            pos,
            text: c.to_string(),
        };
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                tokens.push(single(Tok::LParen));
                i += 1;
            }
            ')' => {
                tokens.push(single(Tok::RParen));
                i += 1;
            }
            ',' => {
                tokens.push(single(Tok::Comma));
                i += 1;
            }
            '@' => {
                tokens.push(single(Tok::At));
                // IPv6 addresses contain ':', which is not a name character,
                // so the address is lexed here, as part of the "@".
                let start = i + 1;
                let end = run(start, is_address_char);
                if end == start {
                    return Err(error(
                        input,
                        start + 1,
                        "expected an IP address after \"@\"",
                    ));
                }
                tokens.push(Token {
                    tok: Tok::Address,
                    pos: start + 1,
                    text: chars[start..end].iter().collect(),
                });
                i = end;
            }
            c if is_name_start(c) => {
                let end = run(i, is_name_char);
                tokens.push(Token {
                    tok: Tok::Word,
                    pos,
                    text: chars[i..end].iter().collect(),
                });
                i = end;
            }
            other => {
                return Err(error(
                    input,
                    pos,
                    format!("unexpected character \"{other}\""),
                ));
            }
        }
    }
    Ok(tokens)
}

// ---------------------------------------------------------------------------
// Parser

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kw {
    And,
    Or,
    Not,
    Unless,
    At,
    Least,
    Of,
}

fn keyword(word: &str) -> Option<Kw> {
    const KEYWORDS: [(&str, Kw); 7] = [
        ("AND", Kw::And),
        ("OR", Kw::Or),
        ("NOT", Kw::Not),
        ("UNLESS", Kw::Unless),
        ("AT", Kw::At),
        ("LEAST", Kw::Least),
        ("OF", Kw::Of),
    ];
    KEYWORDS
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(word))
        .map(|(_, kw)| *kw)
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<Token>,
    idx: usize,
    /// Position reported when the input ends too early.
    end_pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.idx)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.idx).cloned();
        if t.is_some() {
            self.idx += 1;
        }
        t
    }

    fn err_at(&self, position: usize, message: impl Into<String>) -> ParseError {
        error(self.input, position, message)
    }

    fn peek_kw(&self) -> Option<Kw> {
        self.peek()
            .filter(|t| t.tok == Tok::Word)
            .and_then(|t| keyword(&t.text))
    }

    fn eat_kw(&mut self, kw: Kw) -> bool {
        if self.peek_kw() == Some(kw) {
            self.idx += 1;
            true
        } else {
            false
        }
    }

    /// Consumes the next token if it is `want`; otherwise reports `what` as
    /// expected at that token, or the premature end.
    fn expect(&mut self, want: impl Fn(&Token) -> bool, what: &str) -> Result<Token, ParseError> {
        match self.next() {
            Some(t) if want(&t) => Ok(t),
            Some(t) => Err(self.err_at(t.pos, format!("expected {what}"))),
            None => Err(self.err_at(
                self.end_pos,
                format!("unexpected end of condition, expected {what}"),
            )),
        }
    }

    fn enter(&mut self, pos: usize) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err_at(
                pos,
                format!("condition is nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn parse_expr(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.parse_or()?;
        let mut levels = 0;
        while self.peek_kw() == Some(Kw::Unless) {
            let pos = self.peek().map_or(self.end_pos, |t| t.pos);
            self.idx += 1;
            // Each UNLESS wraps everything before it one level deeper
            // (`And([left, Not(right)])`), so a long chain is as deep as a
            // long nesting of parentheses and counts the same.
            self.enter(pos)?;
            levels += 1;
            let right = self.parse_or()?;
            left = Expr::And(vec![left, Expr::Not(Box::new(right))]);
        }
        for _ in 0..levels {
            self.leave();
        }
        Ok(left)
    }

    fn parse_or(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.parse_and()?];
        while self.eat_kw(Kw::Or) {
            items.push(self.parse_and()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Or(items)
        })
    }

    fn parse_and(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.parse_not()?];
        while self.eat_kw(Kw::And) {
            items.push(self.parse_not()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::And(items)
        })
    }

    fn parse_not(&mut self) -> Result<Expr, ParseError> {
        if self.peek_kw() == Some(Kw::Not) {
            let pos = self.peek().map_or(self.end_pos, |t| t.pos);
            self.idx += 1;
            self.enter(pos)?;
            let inner = self.parse_not()?;
            self.leave();
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.parse_primary()
    }

    fn parse_primary(&mut self) -> Result<Expr, ParseError> {
        let Some(t) = self.next() else {
            return Err(self.err_at(self.end_pos, "unexpected end of condition"));
        };
        match t.tok {
            Tok::LParen => {
                self.enter(t.pos)?;
                let e = self.parse_expr()?;
                self.expect(|t| t.tok == Tok::RParen, "\")\"")?;
                self.leave();
                Ok(e)
            }
            Tok::Word => match keyword(&t.text) {
                Some(Kw::At) => {
                    self.enter(t.pos)?;
                    let e = self.parse_at_least()?;
                    self.leave();
                    Ok(e)
                }
                Some(_) => Err(self.err_at(
                    t.pos,
                    format!("\"{}\" is a keyword, not a check name", t.text),
                )),
                None => self.parse_ref(t.text),
            },
            Tok::RParen | Tok::Comma | Tok::At | Tok::Address => Err(self.err_at(
                t.pos,
                format!(
                    "expected a check name, \"NOT\", \"AT LEAST\" or \"(\", found \"{}\"",
                    t.text
                ),
            )),
        }
    }

    /// Parses the optional `@ADDRESS` after a check name.
    fn parse_ref(&mut self, name: String) -> Result<Expr, ParseError> {
        let mut address = None;
        if self.peek().is_some_and(|t| t.tok == Tok::At) {
            self.idx += 1;
            // The lexer always follows "@" with an address token.
            let a = self.expect(|t| t.tok == Tok::Address, "an IP address after \"@\"")?;
            match a.text.parse::<IpAddr>() {
                Ok(ip) => address = Some(ip),
                Err(_) => {
                    return Err(self.err_at(a.pos, format!("\"{}\" is not an IP address", a.text)));
                }
            }
        }
        Ok(Expr::Ref(CheckRef { name, address }))
    }

    /// Parses the rest of `AT LEAST n OF (e, ...)` after "AT".
    fn parse_at_least(&mut self) -> Result<Expr, ParseError> {
        let is_kw = |kw: Kw| move |t: &Token| t.tok == Tok::Word && keyword(&t.text) == Some(kw);
        self.expect(is_kw(Kw::Least), "\"LEAST\" after \"AT\"")?;
        let count_tok = match self.next() {
            Some(t) if t.tok == Tok::Word && t.text.chars().all(|c| c.is_ascii_digit()) => t,
            Some(t) => {
                return Err(self.err_at(
                    t.pos,
                    format!("expected a count after \"AT LEAST\", found \"{}\"", t.text),
                ));
            }
            None => {
                return Err(self.err_at(
                    self.end_pos,
                    "unexpected end of condition, expected a count after \"AT LEAST\"",
                ));
            }
        };
        let count: usize = count_tok.text.parse().map_err(|_| {
            self.err_at(
                count_tok.pos,
                format!("\"{}\" is not a valid count", count_tok.text),
            )
        })?;
        if count == 0 {
            return Err(self.err_at(count_tok.pos, "AT LEAST needs a count of 1 or more"));
        }
        self.expect(is_kw(Kw::Of), "\"OF\"")?;
        self.expect(|t| t.tok == Tok::LParen, "\"(\"")?;
        let mut items = vec![self.parse_expr()?];
        loop {
            let t = self.expect(
                |t| matches!(t.tok, Tok::Comma | Tok::RParen),
                "\",\" or \")\"",
            )?;
            if t.tok == Tok::RParen {
                break;
            }
            items.push(self.parse_expr()?);
        }
        if count > items.len() {
            return Err(self.err_at(
                count_tok.pos,
                format!(
                    "AT LEAST {count} OF a list of {} can never be true",
                    items.len()
                ),
            ));
        }
        Ok(Expr::AtLeast(count, items))
    }
}

// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str) -> Expr {
        Expr::Ref(CheckRef {
            name: name.to_string(),
            address: None,
        })
    }

    fn ra(name: &str, addr: &str) -> Expr {
        Expr::Ref(CheckRef {
            name: name.to_string(),
            address: Some(addr.parse().expect("test address")),
        })
    }

    fn not(e: Expr) -> Expr {
        Expr::Not(Box::new(e))
    }

    fn and(items: Vec<Expr>) -> Expr {
        Expr::And(items)
    }

    fn or(items: Vec<Expr>) -> Expr {
        Expr::Or(items)
    }

    fn p(input: &str) -> Expr {
        match parse(input) {
            Ok(e) => e,
            Err(err) => panic!("{input:?} should parse: {err}"),
        }
    }

    /// Builds a state function from (name, value) pairs; unlisted checks are unknown.
    fn state<'a>(values: &'a [(&'a str, Option<bool>)]) -> impl Fn(&CheckRef) -> Option<bool> + 'a {
        move |c: &CheckRef| {
            let key = c.to_string();
            values.iter().find(|(k, _)| *k == key).and_then(|(_, v)| *v)
        }
    }

    const T: Option<bool> = Some(true);
    const F: Option<bool> = Some(false);
    const U: Option<bool> = None;

    #[test]
    fn parse_structure() {
        let cases: Vec<(&str, Expr)> = vec![
            ("a", r("a")),
            ("web-1.example_x", r("web-1.example_x")),
            ("1st", r("1st")),
            // precedence: NOT > AND > OR > UNLESS
            ("NOT a AND b", and(vec![not(r("a")), r("b")])),
            ("a AND b OR c", or(vec![and(vec![r("a"), r("b")]), r("c")])),
            ("a OR b AND c", or(vec![r("a"), and(vec![r("b"), r("c")])])),
            (
                "a OR b UNLESS c",
                and(vec![or(vec![r("a"), r("b")]), not(r("c"))]),
            ),
            (
                "a UNLESS b OR c",
                and(vec![r("a"), not(or(vec![r("b"), r("c")]))]),
            ),
            (
                "a UNLESS b AND c",
                and(vec![r("a"), not(and(vec![r("b"), r("c")]))]),
            ),
            ("NOT a OR NOT b", or(vec![not(r("a")), not(r("b"))])),
            ("NOT NOT a", not(not(r("a")))),
            // chains flatten, parentheses nest
            ("a AND b AND c", and(vec![r("a"), r("b"), r("c")])),
            ("a OR b OR c", or(vec![r("a"), r("b"), r("c")])),
            (
                "(a AND b) AND c",
                and(vec![and(vec![r("a"), r("b")]), r("c")]),
            ),
            (
                "a AND (b OR c)",
                and(vec![r("a"), or(vec![r("b"), r("c")])]),
            ),
            (
                "(a OR b) AND c",
                and(vec![or(vec![r("a"), r("b")]), r("c")]),
            ),
            ("NOT (a AND b)", not(and(vec![r("a"), r("b")]))),
            ("((a))", r("a")),
            // UNLESS desugaring, left-associative
            ("a UNLESS b", and(vec![r("a"), not(r("b"))])),
            (
                "a UNLESS b UNLESS c",
                and(vec![and(vec![r("a"), not(r("b"))]), not(r("c"))]),
            ),
            (
                "web1 AND (db1 OR db2) UNLESS maint",
                and(vec![
                    and(vec![r("web1"), or(vec![r("db1"), r("db2")])]),
                    not(r("maint")),
                ]),
            ),
            (
                "NOT (web@192.0.2.10 OR web@192.0.2.11) UNLESS maintenance",
                and(vec![
                    not(or(vec![ra("web", "192.0.2.10"), ra("web", "192.0.2.11")])),
                    not(r("maintenance")),
                ]),
            ),
            // addresses
            ("web@192.0.2.10", ra("web", "192.0.2.10")),
            ("web@2001:db8::1", ra("web", "2001:db8::1")),
            ("web@::1", ra("web", "::1")),
            ("web@fe80::AB:1", ra("web", "fe80::ab:1")),
            ("web@::ffff:192.0.2.1", ra("web", "::ffff:192.0.2.1")),
            ("(a@2001:db8::1)", ra("a", "2001:db8::1")),
            // AT LEAST
            (
                "AT LEAST 2 OF (a, b, c@2001:db8::1)",
                Expr::AtLeast(2, vec![r("a"), r("b"), ra("c", "2001:db8::1")]),
            ),
            ("AT LEAST 1 OF (a)", Expr::AtLeast(1, vec![r("a")])),
            (
                "AT LEAST 1 OF (a OR b, c UNLESS d)",
                Expr::AtLeast(
                    1,
                    vec![or(vec![r("a"), r("b")]), and(vec![r("c"), not(r("d"))])],
                ),
            ),
            (
                "NOT AT LEAST 2 OF (a, b) AND c",
                and(vec![not(Expr::AtLeast(2, vec![r("a"), r("b")])), r("c")]),
            ),
            // keyword case-insensitivity, whitespace
            ("a and b", and(vec![r("a"), r("b")])),
            ("a Or b", or(vec![r("a"), r("b")])),
            ("not a unless B", and(vec![not(r("a")), not(r("B"))])),
            (
                "at least 1 of (x,y)",
                Expr::AtLeast(1, vec![r("x"), r("y")]),
            ),
            ("At LeAsT 1 Of(x)", Expr::AtLeast(1, vec![r("x")])),
            ("  a\tAND\n b  ", and(vec![r("a"), r("b")])),
            ("a\u{00A0}AND b", and(vec![r("a"), r("b")])),
            // names are case-sensitive and may contain keywords as substrings
            ("Web", r("Web")),
            ("ANDROID OR notify", or(vec![r("ANDROID"), r("notify")])),
            ("atleast", r("atleast")),
        ];
        for (input, want) in cases {
            assert_eq!(p(input), want, "parsing {input:?}");
        }
    }

    #[test]
    fn errors() {
        let deep_parens = format!(
            "{}a{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        );
        let deep_nots = format!("{}a", "NOT ".repeat(MAX_DEPTH + 1));
        let ok_depth = format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert_eq!(p(&ok_depth), r("a"));
        let cases: Vec<(&str, usize, &str)> = vec![
            ("", 1, "empty condition"),
            ("   ", 1, "empty condition"),
            ("(a OR b c) AND d", 9, "expected \")\""),
            ("(a OR b", 8, "unexpected end of condition, expected \")\""),
            ("a AND", 6, "unexpected end of condition"),
            ("NOT", 4, "unexpected end of condition"),
            ("a UNLESS ", 10, "unexpected end of condition"),
            ("a AND AND b", 7, "\"AND\" is a keyword, not a check name"),
            ("or", 1, "\"or\" is a keyword, not a check name"),
            ("a AND of", 7, "\"of\" is a keyword, not a check name"),
            ("LEAST", 1, "\"LEAST\" is a keyword, not a check name"),
            ("web@300.1.1.1", 5, "\"300.1.1.1\" is not an IP address"),
            (
                "web@2001:db8:::1",
                5,
                "\"2001:db8:::1\" is not an IP address",
            ),
            ("web@", 5, "expected an IP address after \"@\""),
            ("web@ 1.2.3.4", 5, "expected an IP address after \"@\""),
            (
                "@1.2.3.4",
                1,
                "expected a check name, \"NOT\", \"AT LEAST\" or \"(\", found \"@\"",
            ),
            (
                "AT LEAST 0 OF (a, b)",
                10,
                "AT LEAST needs a count of 1 or more",
            ),
            (
                "AT LEAST 4 OF (a, b, c)",
                10,
                "AT LEAST 4 OF a list of 3 can never be true",
            ),
            ("AT MOST 2 OF (a)", 4, "expected \"LEAST\" after \"AT\""),
            (
                "AT LEAST x OF (a)",
                10,
                "expected a count after \"AT LEAST\", found \"x\"",
            ),
            (
                "AT LEAST",
                9,
                "unexpected end of condition, expected a count after \"AT LEAST\"",
            ),
            (
                "AT LEAST 99999999999999999999999 OF (a)",
                10,
                "\"99999999999999999999999\" is not a valid count",
            ),
            ("AT LEAST 1 (a)", 12, "expected \"OF\""),
            ("AT LEAST 1 OF a", 15, "expected \"(\""),
            ("AT LEAST 1 OF (a b)", 18, "expected \",\" or \")\""),
            ("AT LEAST 1 OF (a,", 18, "unexpected end of condition"),
            (
                "AT LEAST 1 OF ()",
                16,
                "expected a check name, \"NOT\", \"AT LEAST\" or \"(\", found \")\"",
            ),
            (
                "()",
                2,
                "expected a check name, \"NOT\", \"AT LEAST\" or \"(\", found \")\"",
            ),
            (
                "a b",
                3,
                "expected \"AND\", \"OR\", \"UNLESS\" or end of condition, found \"b\"",
            ),
            (
                "a, b",
                2,
                "expected \"AND\", \"OR\", \"UNLESS\" or end of condition, found \",\"",
            ),
            ("a)", 2, "unmatched \")\""),
            ("a & b", 3, "unexpected character \"&\""),
            ("-a", 1, "unexpected character \"-\""),
            // positions count characters, not bytes
            ("a\u{00A0}AND &", 7, "unexpected character \"&\""),
            ("é", 1, "unexpected character \"é\""),
            (
                &deep_parens,
                MAX_DEPTH + 1,
                "condition is nested more than 100 levels deep",
            ),
            (
                &deep_nots,
                4 * MAX_DEPTH + 1,
                "condition is nested more than 100 levels deep",
            ),
        ];
        for (input, position, message) in cases {
            let err = parse(input).expect_err(input);
            assert_eq!(
                (err.position, err.message.as_str(), err.input.as_str()),
                (position, message, input),
                "error for {input:?}"
            );
        }
    }

    #[test]
    fn a_long_unless_chain_is_refused_like_deep_nesting() {
        // 100 UNLESS nest 100 levels: the most accepted.
        let names: Vec<String> = (0..=MAX_DEPTH).map(|i| format!("c{i}")).collect();
        let ok = names.join(" UNLESS ");
        let expr = p(&ok);
        assert_eq!(expr.refs().len(), MAX_DEPTH + 1);
        assert_eq!(p(&expr.to_string()), expr, "prints back");
        assert_eq!(expr.eval(&|_| Some(true)), Some(false));
        let one_more = format!("{ok} UNLESS last");
        let err = parse(&one_more).expect_err("101 UNLESS");
        assert_eq!(err.message, "condition is nested more than 100 levels deep");
        assert_eq!(err.position, one_more.find(" UNLESS last").unwrap_or(0) + 2);

        // A generated chain of 100,000 (about 1.1 MB) is refused with a
        // short message quoting only around the position, without
        // overflowing the stack while parsing or dropping.
        let huge: String = (0..100_000)
            .map(|i| format!("check{i}"))
            .collect::<Vec<_>>()
            .join(" UNLESS ");
        assert!(huge.len() > 1_000_000);
        let err = parse(&huge).expect_err("100,000 UNLESS");
        assert_eq!(err.message, "condition is nested more than 100 levels deep");
        let text = err.to_string();
        assert!(text.len() < 400, "{text}");
        assert!(text.contains("check100 UNLESS"), "{text}");
        assert!(text.starts_with("condition is nested more than 100 levels deep at position"));
        // Inside parentheses too: both count towards one limit.
        let nested = format!(
            "{}a UNLESS b{}",
            "(".repeat(MAX_DEPTH),
            ")".repeat(MAX_DEPTH)
        );
        assert!(parse(&nested).is_err());
    }

    /// Found by the `condition` fuzz target: a chain whose right-hand sides
    /// are ORs parses within the limit, but prints as nested parentheses and
    /// `NOT (…)` one level deeper than the limit, so it did not parse back.
    /// What is accepted always prints to text that parses to the same tree.
    #[test]
    fn what_parses_prints_back_within_the_depth_limit() {
        let chain = |k: usize| {
            let mut text = "a".to_string();
            for i in 0..k {
                text.push_str(&format!(" UNLESS b{i} OR c{i}"));
            }
            text
        };
        let deep_left = format!(
            "{}a{} UNLESS b UNLESS c OR d",
            "(".repeat(98),
            ")".repeat(98)
        );
        for text in [chain(99), chain(98), deep_left.clone()] {
            if let Ok(expr) = parse(&text) {
                let printed = expr.to_string();
                assert_eq!(p(&printed), expr, "{text} printed as {printed}");
            }
        }
        assert!(
            parse(&chain(99)).is_ok(),
            "99 levels print within the limit"
        );
        let err = parse(&chain(100)).expect_err("prints 101 levels deep");
        assert_eq!(err.position, 1);
        assert!(err.message.contains("once written out"), "{}", err.message);
    }

    #[test]
    fn error_display() {
        let err = parse("(a OR b c) AND d").expect_err("must fail");
        assert_eq!(
            err.to_string(),
            "expected \")\" at position 9 in \"(a OR b c) AND d\""
        );
        let err = parse("a AND").expect_err("must fail");
        assert_eq!(
            err.to_string(),
            "unexpected end of condition at position 6 in \"a AND\""
        );
    }

    #[test]
    fn display_round_trip() {
        let cases: Vec<(&str, &str)> = vec![
            ("a", "a"),
            ("web@192.0.2.10", "web@192.0.2.10"),
            ("web@2001:DB8:0::1", "web@2001:db8::1"),
            ("a and b and c", "a AND b AND c"),
            ("(a AND b) AND c", "(a AND b) AND c"),
            ("a AND (b AND c)", "a AND (b AND c)"),
            ("(a OR b) OR c", "(a OR b) OR c"),
            ("a AND b OR c", "a AND b OR c"),
            ("(a AND b) OR c", "a AND b OR c"),
            ("a AND (b OR c)", "a AND (b OR c)"),
            ("NOT a", "NOT a"),
            ("NOT NOT a", "NOT NOT a"),
            ("NOT (a OR b)", "NOT (a OR b)"),
            ("NOT (a AND b)", "NOT (a AND b)"),
            ("NOT (NOT a)", "NOT NOT a"),
            ("a UNLESS b", "a AND NOT b"),
            ("a OR b UNLESS c", "(a OR b) AND NOT c"),
            ("a AND b UNLESS c", "(a AND b) AND NOT c"),
            ("a UNLESS b OR c", "a AND NOT (b OR c)"),
            ("a UNLESS b UNLESS c", "(a AND NOT b) AND NOT c"),
            (
                "web1 AND (db1 OR db2) UNLESS maint",
                "(web1 AND (db1 OR db2)) AND NOT maint",
            ),
            (
                "NOT (web@192.0.2.10 OR web@192.0.2.11) UNLESS maintenance",
                "NOT (web@192.0.2.10 OR web@192.0.2.11) AND NOT maintenance",
            ),
            (
                "at least 2 of (a,b,c@2001:db8::1)",
                "AT LEAST 2 OF (a, b, c@2001:db8::1)",
            ),
            (
                "AT LEAST 1 OF (a OR b, c UNLESS d)",
                "AT LEAST 1 OF (a OR b, c AND NOT d)",
            ),
            (
                "NOT AT LEAST 2 OF (a, b) OR c",
                "NOT AT LEAST 2 OF (a, b) OR c",
            ),
            (
                "AT LEAST 1 OF (AT LEAST 1 OF (x), (y))",
                "AT LEAST 1 OF (AT LEAST 1 OF (x), y)",
            ),
        ];
        for (input, canonical) in cases {
            let e = p(input);
            let text = e.to_string();
            assert_eq!(text, canonical, "display of {input:?}");
            assert_eq!(p(&text), e, "round trip of {input:?} via {text:?}");
        }
    }

    #[test]
    fn display_round_trip_hand_built() {
        let cases = vec![
            and(vec![
                or(vec![r("a"), r("b")]),
                or(vec![r("c"), and(vec![r("d"), r("e")])]),
            ]),
            or(vec![
                or(vec![r("a"), r("b")]),
                and(vec![and(vec![r("c"), r("d")]), r("e")]),
            ]),
            not(not(not(Expr::AtLeast(1, vec![not(r("a"))])))),
            not(and(vec![not(r("a")), or(vec![r("b"), not(r("c"))])])),
        ];
        for e in cases {
            let text = e.to_string();
            assert_eq!(p(&text), e, "round trip via {text:?}");
        }
    }

    #[test]
    fn check_ref_display() {
        let cases = [
            (
                CheckRef {
                    name: "web".into(),
                    address: None,
                },
                "web",
            ),
            (
                CheckRef {
                    name: "web".into(),
                    address: "192.0.2.10".parse().ok(),
                },
                "web@192.0.2.10",
            ),
            (
                CheckRef {
                    name: "web".into(),
                    address: "2001:db8::1".parse().ok(),
                },
                "web@2001:db8::1",
            ),
        ];
        for (c, want) in cases {
            assert_eq!(c.to_string(), want);
        }
    }

    #[test]
    fn refs_in_order() {
        let e = p("NOT (web@192.0.2.10 OR b) UNLESS AT LEAST 1 OF (c, web@192.0.2.10, a)");
        let got: Vec<String> = e.refs().iter().map(|c| c.to_string()).collect();
        assert_eq!(got, ["web@192.0.2.10", "b", "c", "web@192.0.2.10", "a"]);
        assert_eq!(
            p("x").refs(),
            vec![&CheckRef {
                name: "x".into(),
                address: None
            }]
        );
    }

    #[test]
    fn truth_tables_binary() {
        let vals = [T, F, U];
        // Expected results indexed [a][b] with order T, F, U.
        let tables: [(&str, [[Option<bool>; 3]; 3]); 4] = [
            ("a AND b", [[T, F, U], [F, F, F], [U, F, U]]),
            ("a OR b", [[T, T, T], [T, F, U], [T, U, U]]),
            ("a UNLESS b", [[F, T, U], [F, F, F], [F, U, U]]),
            ("AT LEAST 2 OF (a, b)", [[T, F, U], [F, F, F], [U, F, U]]),
        ];
        for (input, table) in tables {
            let e = p(input);
            for (i, a) in vals.iter().enumerate() {
                for (j, b) in vals.iter().enumerate() {
                    let s = [("a", *a), ("b", *b)];
                    assert_eq!(
                        e.eval(&state(&s)),
                        table[i][j],
                        "{input} with a={a:?} b={b:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn truth_table_not() {
        let e = p("NOT a");
        for (a, want) in [(T, F), (F, T), (U, U)] {
            assert_eq!(e.eval(&state(&[("a", a)])), want, "NOT {a:?}");
        }
    }

    #[test]
    fn eval_cases() {
        type Case<'a> = (&'a str, Vec<(&'a str, Option<bool>)>, Option<bool>);
        let cases: Vec<Case> = vec![
            // named examples
            ("a OR b", vec![("a", T), ("b", U)], T),
            ("a AND b", vec![("a", T), ("b", U)], U),
            ("a UNLESS m", vec![("a", F), ("m", U)], F),
            ("a UNLESS m", vec![("a", T), ("m", T)], F),
            ("a UNLESS m", vec![("a", T), ("m", F)], T),
            // precedence shows in results
            ("a OR b AND c", vec![("a", T), ("b", F), ("c", F)], T),
            ("(a OR b) AND c", vec![("a", T), ("b", F), ("c", F)], F),
            ("NOT a AND b", vec![("a", F), ("b", F)], F),
            ("NOT (a AND b)", vec![("a", F), ("b", F)], T),
            ("a OR b UNLESS c", vec![("a", T), ("c", T)], F),
            // AT LEAST counting with unknowns
            (
                "AT LEAST 2 OF (a, b, c)",
                vec![("a", T), ("b", T), ("c", F)],
                T,
            ),
            (
                "AT LEAST 2 OF (a, b, c)",
                vec![("a", T), ("b", T), ("c", U)],
                T,
            ),
            (
                "AT LEAST 2 OF (a, b, c)",
                vec![("a", T), ("b", F), ("c", F)],
                F,
            ),
            (
                "AT LEAST 2 OF (a, b, c)",
                vec![("a", T), ("b", F), ("c", U)],
                U,
            ),
            (
                "AT LEAST 2 OF (a, b, c)",
                vec![("a", F), ("b", F), ("c", U)],
                F,
            ),
            (
                "AT LEAST 2 OF (a, b, c)",
                vec![("a", U), ("b", U), ("c", U)],
                U,
            ),
            (
                "AT LEAST 2 OF (a, b, c)",
                vec![("a", F), ("b", U), ("c", U)],
                U,
            ),
            (
                "AT LEAST 3 OF (a, b, c)",
                vec![("a", T), ("b", T), ("c", T)],
                T,
            ),
            (
                "AT LEAST 1 OF (a, b, c)",
                vec![("a", F), ("b", F), ("c", F)],
                F,
            ),
            (
                "AT LEAST 1 OF (a, b, c)",
                vec![("a", F), ("b", U), ("c", F)],
                U,
            ),
            (
                "AT LEAST 1 OF (a AND b, c)",
                vec![("a", T), ("b", T), ("c", F)],
                T,
            ),
            // address-pinned references are looked up separately from the bare check
            (
                "web@192.0.2.10 AND web",
                vec![("web@192.0.2.10", T), ("web", F)],
                F,
            ),
            ("web@2001:db8::1", vec![("web@2001:db8::1", T)], T),
            ("web@2001:db8::1", vec![("web", T)], U),
        ];
        for (input, values, want) in cases {
            assert_eq!(
                p(input).eval(&state(&values)),
                want,
                "{input} with {values:?}"
            );
        }
    }

    #[test]
    fn eval_empty_hand_built() {
        let s = state(&[]);
        assert_eq!(Expr::And(vec![]).eval(&s), T);
        assert_eq!(Expr::Or(vec![]).eval(&s), F);
    }
}
