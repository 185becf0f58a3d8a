//! Parsing the configuration text, in bounded memory.
//!
//! The `toml` crate lexes a whole document into a token vector and builds a
//! table tree of it before deserializing: for a 100,000-record file (8 MiB)
//! that is over 400 MiB at once, while the device still serves the old
//! configuration. So a large file is cut into pieces at top-level
//! array-of-tables headers (`[[domain]]`, `[[check]]`, ...) and each piece is
//! parsed on its own; their lists are joined in order.
//!
//! A cut is only made where it cannot change the meaning: the piece must not
//! refer to a table that started in an earlier piece. Where that cannot be
//! shown (a root key, a quoted header, a `[domain.x]` with no `[[domain]]`
//! before it in the piece), the whole text is parsed in one go, so the result
//! and the errors are always those of parsing the whole file.
//!
//! A large domain is one piece, and its records are most of it: when they
//! are a list of inline tables (`record = [ {...}, ... ]`), the domain is
//! parsed without them and the list in batches of about [`BATCH_BYTES`],
//! each batch the list's own text between two of its records, so a
//! missing or doubled comma is an error as in the whole list.
//!
//! A piece of more than [`CHECK_FIRST_BYTES`] parsed whole (or a domain
//! without its records) is first read in parts of about [`BATCH_BYTES`]
//! with the TOML parser's events alone, holding neither the tokens nor
//! the tree of the whole piece: an error of grammar, or a key that an
//! element's table does not take ([`super::keys`]: `kN = N` on every line
//! of a domain), fails it there. The errors said are then, as for any
//! text that does not parse, every error [`super::diagnose`] lists.

use std::{collections::HashSet, sync::Arc};

use toml_parser::{Expected, ParseError};

use serde::de::DeserializeOwned;

use super::{
    alike::{Like, share_domain, share_records},
    cancel::{Cancel, Cancelled, CheckError},
    config::{Config, Record},
    config_errors::{ConfigError, ConfigErrors},
    diagnose,
    keys::{Keys, read_parts},
    layout::{RecordList, record_list},
    lines::{Lines, Start, one_comma},
};

/// The top-level tables that are not lists: a piece may hold one whole.
const SINGLE_TABLES: [&str; 4] = ["geoip", "rate_limit", "cookies", "catalog"];

/// The size of text below which a piece is not cut further.
const PIECE_BYTES: usize = 256 * 1024;

/// The size of a batch of a large domain's inline records (about a
/// thousand records of a line each).
const BATCH_BYTES: usize = 64 * 1024;

/// A piece larger than this that is parsed whole (not a domain whose
/// records are read in batches, but the domain without them) is first
/// read in parts of about [`BATCH_BYTES`] for its grammar and for keys its
/// tables do not take ([`super::keys`]): a text with an error on every
/// line fails there, without the parser's tokens and tree of the whole
/// piece (50 times its size).
const CHECK_FIRST_BYTES: usize = 1 << 20;

/// The sizes a text is cut and read at.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Pieces of about [`PIECE_BYTES`].
    piece: usize,
    /// Batches of a domain's inline records of about [`BATCH_BYTES`], and
    /// the parts a large piece is first read in.
    batch: usize,
    /// A piece larger than [`CHECK_FIRST_BYTES`] is first read in parts.
    check_first: usize,
}

impl Sizes {
    const PRODUCT: Sizes = Sizes {
        piece: PIECE_BYTES,
        batch: BATCH_BYTES,
        check_first: CHECK_FIRST_BYTES,
    };
}

/// Parses a configuration file. When it does not parse, every syntax and
/// type error that can be found is listed (see [`super::diagnose`]).
pub fn parse(text: &str) -> Result<Config, ConfigErrors> {
    parse_like(text, None)
}

/// [`parse`], taking from `like` (the configuration the device holds)
/// each object the text gives again, as it parses ([`super::alike`]): a
/// text applied again, or changed in a few lines, is not held twice.
pub fn parse_like(text: &str, like: Option<&Config>) -> Result<Config, ConfigErrors> {
    parse_until(text, like, &Cancel::default()).map_err(CheckError::uncancelled)
}

/// [`parse_like`], stopped when `cancel` is set: between pieces, batches
/// and, listing the errors, sections and elements.
pub fn parse_until(
    text: &str,
    like: Option<&Config>,
    cancel: &Cancel,
) -> Result<Config, CheckError> {
    let like = like.map(Like::new);
    let parsed = pieces_until(text, Sizes::PRODUCT, parse_threads(), like.as_ref(), cancel);
    match parsed {
        Ok(mut config) => {
            if let Some(like) = &like {
                like.share_lists(&mut config);
            }
            Ok(config)
        }
        Err(CheckError::Invalid(first)) => {
            let all = diagnose::errors(text, cancel)?;
            Err(if all.listed.is_empty() { first } else { all }.into())
        }
        Err(cancelled) => Err(cancelled),
    }
}

/// For the fuzzer (`fuzz/fuzz_targets/config.rs`): `text` parsed in the
/// smallest pieces and batches, on two threads, each piece first read in
/// the smallest parts, and parsed whole, which must agree.
#[doc(hidden)]
pub fn parse_finely_and_whole(text: &str) -> [Result<Config, ConfigErrors>; 2] {
    let finely = Sizes {
        piece: 1,
        batch: 1,
        check_first: 0,
    };
    let cancel = Cancel::default();
    [
        pieces_until(text, finely, 2, None, &cancel).map_err(CheckError::uncancelled),
        parse_whole(text, 0, text),
    ]
}

/// The threads a large text's pieces are parsed on: the cores this thread
/// may run on (a device's DNS cores are not among them, docs/node.md), at
/// most four.
fn parse_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// [`pieces_until`], never cancelled.
#[cfg(test)]
fn parse_in_pieces(
    text: &str,
    piece_bytes: usize,
    batch_bytes: usize,
    threads: usize,
    like: Option<&Like>,
) -> Result<Config, ConfigErrors> {
    let sizes = Sizes {
        piece: piece_bytes,
        batch: batch_bytes,
        ..Sizes::PRODUCT
    };
    let cancel = Cancel::default();
    pieces_until(text, sizes, threads, like, &cancel).map_err(CheckError::uncancelled)
}

/// Parses `text` cut into pieces of about `sizes.piece`, on `threads`
/// threads, each parsing a run of pieces in order; their lists are joined
/// in text order, and the error is that of the first piece that fails,
/// as parsing them one after the other gives. A domain's inline records
/// are parsed in batches of about `sizes.batch`; domains and records
/// equal to `like`'s are taken from it. Stopped when `cancel` is set,
/// between pieces and batches.
fn pieces_until(
    text: &str,
    sizes: Sizes,
    threads: usize,
    like: Option<&Like>,
    cancel: &Cancel,
) -> Result<Config, CheckError> {
    let Some(cuts) = cuts(text, sizes.piece) else {
        return parse_piece(text, 0, text, sizes, like, cancel);
    };
    let bounds: Vec<usize> = [0].into_iter().chain(cuts).chain([text.len()]).collect();
    let pieces: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let runs = runs(&pieces, threads);
    let parse_run = |run: &[(usize, usize)]| -> Result<Config, CheckError> {
        let mut config = Config::default();
        for &(start, end) in run {
            cancel.check()?;
            let piece = parse_piece(&text[start..end], start, text, sizes, like, cancel)?;
            join(&mut config, piece);
        }
        Ok(config)
    };
    let parsed: Vec<Result<Config, CheckError>> = match runs.as_slice() {
        [one] => vec![parse_run(one)],
        runs => std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .iter()
                .map(|run| scope.spawn(|| parse_run(run)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        }),
    };
    let mut config = Config::default();
    for run in parsed {
        join(&mut config, run?);
    }
    Ok(config)
}

/// `pieces` (byte ranges, in order) as at most `threads` runs of
/// consecutive pieces, each about as many bytes as the others.
fn runs(pieces: &[(usize, usize)], threads: usize) -> Vec<&[(usize, usize)]> {
    let total = pieces.last().map_or(0, |p| p.1);
    let share = total.div_ceil(threads.max(1)).max(1);
    let mut runs = Vec::new();
    let mut from = 0;
    for (i, &(_, end)) in pieces.iter().enumerate() {
        // A run ends where the bytes so far reach its share of the text.
        if end >= share * (runs.len() + 1) || i + 1 == pieces.len() {
            runs.push(pieces.get(from..=i).unwrap_or_default());
            from = i + 1;
        }
    }
    runs
}

/// Adds what a later piece of the text holds to `config`. Each field is
/// named, so that a new one is not left out.
fn join(config: &mut Config, piece: Config) {
    let Config {
        geoip,
        datacenters,
        regions,
        views,
        checks,
        scenarios,
        services,
        domains,
        notifiers,
        rate_limit,
        cookies,
        catalog,
    } = piece;
    config.datacenters.extend(datacenters);
    config.regions.extend(regions);
    config.views.extend(views);
    config.checks.extend(checks);
    config.scenarios.extend(scenarios);
    config.services.extend(services);
    config.domains.extend(domains);
    config.notifiers.extend(notifiers);
    // Each at most once in the text (see `cuts`).
    if geoip.is_some() {
        config.geoip = geoip;
    }
    if rate_limit.is_some() {
        config.rate_limit = rate_limit;
    }
    if cookies.is_some() {
        config.cookies = cookies;
    }
    if catalog.is_some() {
        config.catalog = catalog;
    }
}

/// Parses `piece`, which starts at byte `offset` of `text`: a domain of
/// more than `sizes.batch` whose records are a list of inline tables
/// without them, then its records in batches; anything else whole, a
/// piece of more than `sizes.check_first` once read in parts without an
/// error ([`first_error`]).
fn parse_piece(
    piece: &str,
    offset: usize,
    text: &str,
    sizes: Sizes,
    like: Option<&Like>,
    cancel: &Cancel,
) -> Result<Config, CheckError> {
    if piece.len() > sizes.batch
        && let Some(list) = record_list(piece, 0)
        && list.elements.len() > 1
    {
        return parse_batched(piece, offset, text, &list, sizes, like, cancel);
    }
    if piece.len() > sizes.check_first
        && let Some(error) = first_error(piece, &|at| offset + at, text, sizes.batch, cancel)?
    {
        return Err(error.into());
    }
    let mut config = parse_whole(piece, offset, text)?;
    if let Some(like) = like {
        like.share_domains(&mut config);
    }
    Ok(config)
}

/// What a batch of a domain's inline records parses to.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Batch {
    record: Vec<Arc<Record>>,
}

/// Parses the domain `piece` with its record list `list` empty (read in
/// parts first when larger than `sizes.check_first`), then the list's
/// records in batches of about `sizes.batch`, each batch parsed as
/// `record = [` and the list's text from its first record to the next
/// batch's first (to the list's `]` for the last), then `]`. Each batch's
/// records equal to `like`'s are taken from it as the batch is read.
fn parse_batched(
    piece: &str,
    offset: usize,
    text: &str,
    list: &RecordList,
    sizes: Sizes,
    like: Option<&Like>,
    cancel: &Cancel,
) -> Result<Config, CheckError> {
    let batch_bytes = sizes.batch;
    let (Some(before), Some(after)) = (piece.get(..list.open), piece.get(list.close..)) else {
        return Ok(parse_whole(piece, offset, text)?);
    };
    let head = [before, after].concat();
    let at = |at: usize| {
        offset
            + if at < before.len() {
                at
            } else {
                at - before.len() + list.close
            }
    };
    if head.len() > sizes.check_first
        && let Some(error) = first_error(&head, &at, text, sizes.batch, cancel)?
    {
        return Err(error.into());
    }
    let mut config: Config = parse_text(&head, text, at)?;
    let held = match config.domains.as_slice() {
        [domain] => like.and_then(|l| l.domain(&domain.name)),
        _ => None,
    };
    let total = list.elements.len();
    let mut records = Vec::with_capacity(total);
    let mut from = list.open;
    let mut first = 0;
    while let Some(start) = list.elements.get(first).map(|e| e.start) {
        cancel.check()?;
        let next = list
            .elements
            .iter()
            .skip(first + 1)
            .position(|e| e.start.saturating_sub(start) >= batch_bytes)
            .map_or(list.elements.len(), |i| first + 1 + i);
        let to = list.elements.get(next).map_or(list.close, |e| e.start);
        let Some(body) = piece.get(from..to) else {
            return Ok(parse_whole(piece, offset, text)?);
        };
        // Between this batch's last record and the next batch's first,
        // one comma, as the whole list would require; a batch would take
        // none as the list's end.
        if let Some(last) = list.elements.get(next.wrapping_sub(1))
            && next < list.elements.len()
            && !one_comma(piece.get(last.end..to).unwrap_or_default())
        {
            return Ok(parse_whole(piece, offset, text)?);
        }
        const HEAD: &str = "record = [\n";
        let batch: Batch = parse_text(&[HEAD, body, "\n]\n"].concat(), text, |at| {
            offset + from + at.saturating_sub(HEAD.len()).min(body.len())
        })?;
        let mut batch = batch.record;
        if let Some(held) = held {
            share_records(&mut batch, records.len(), total, &held.records);
        }
        records.extend(batch);
        from = to;
        first = next;
    }
    match config.domains.as_mut_slice() {
        [domain] if domain.records.is_empty() => {
            match Arc::get_mut(domain) {
                Some(d) => d.records = records,
                None => return Ok(parse_whole(piece, offset, text)?),
            }
            if let Some(held) = held {
                share_domain(domain, held);
            }
        }
        _ => return Ok(parse_whole(piece, offset, text)?),
    }
    Ok(config)
}

/// The first error of `piece` (its byte `at` is byte `at(at)` of
/// `text`) found reading it in parts of about `part_bytes`
/// ([`read_parts`]): the first error of grammar, else the first key a
/// table of an element does not take ([`Keys`]), which the whole piece's
/// parse would fail at (or at an error before it). What only the whole
/// shows (a key given twice, a type error) is left to the whole's parse.
fn first_error(
    piece: &str,
    at: &dyn Fn(usize) -> usize,
    text: &str,
    part_bytes: usize,
    cancel: &Cancel,
) -> Result<Option<ConfigErrors>, Cancelled> {
    let mut keys = Keys::first(piece);
    if let Some((p, e)) = read_parts(piece, part_bytes, Some(&mut keys), cancel)? {
        return Ok(Some(error_at(text, at(p), grammar_message(&e))));
    }
    Ok(keys.first_unknown().and_then(|(key, kind)| {
        let e = kind.unknown_key(piece.get(key.clone())?)?;
        Some(error_at(
            text,
            at(key.start),
            e.inner().message().to_string(),
        ))
    }))
}

/// The first error of grammar of `piece` (at byte `offset` of `text`),
/// read in parts of about `part_bytes` ([`read_parts`]).
#[cfg(test)]
fn first_grammar_error(
    piece: &str,
    offset: usize,
    text: &str,
    part_bytes: usize,
    cancel: &Cancel,
) -> Result<Option<ConfigErrors>, Cancelled> {
    Ok(read_parts(piece, part_bytes, None, cancel)?
        .map(|(p, e)| error_at(text, offset + p, grammar_message(&e))))
}

/// An error at byte `at` of `text`, named by its line.
fn error_at(text: &str, at: usize, message: String) -> ConfigErrors {
    let before = text.as_bytes().get(..at).unwrap_or_default();
    let line = memchr::memchr_iter(b'\n', before).count() + 1;
    ConfigErrors::from(ConfigError {
        path: format!("line {line}"),
        message,
    })
}

/// A grammar error's message, as the `toml` crate words it.
fn grammar_message(e: &ParseError) -> String {
    let mut message = e.description().to_string();
    if let Some(expected) = e.expected() {
        message.push_str(", expected ");
        if expected.is_empty() {
            message.push_str("nothing");
        }
        for (i, expected) in expected.iter().enumerate() {
            if i > 0 {
                message.push_str(", ");
            }
            match expected {
                Expected::Literal("\n") => message.push_str("newline"),
                Expected::Literal(literal) => message.push_str(&format!("`{literal}`")),
                Expected::Description(description) => message.push_str(description),
                _ => message.push_str("etc"),
            }
        }
    }
    message
}

/// Parses `piece`, which starts at byte `offset` of `text`; errors name the
/// line in `text`.
fn parse_whole(piece: &str, offset: usize, text: &str) -> Result<Config, ConfigErrors> {
    parse_text(piece, text, |at| offset + at)
}

/// Parses `doc`, made of parts of `text`: `at` gives the byte of `text` a
/// byte of `doc` was taken from, for the line an error names.
fn parse_text<T: DeserializeOwned>(
    doc: &str,
    text: &str,
    at: impl Fn(usize) -> usize,
) -> Result<T, ConfigErrors> {
    toml::from_str(doc).map_err(|e| {
        let path = match e.span() {
            Some(span) => {
                // Counted over bytes, so a span that is not on a character
                // boundary (or past the end) cannot panic.
                let before = text.as_bytes().get(..at(span.start)).unwrap_or_default();
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                format!("line {line}")
            }
            None => String::new(),
        };
        ConfigErrors::from(ConfigError {
            path,
            message: e.message().to_string(),
        })
    })
}

/// Where to cut `text` (byte offsets of header lines), or `None` when it
/// should be parsed whole: it is small, or a cut could change its meaning.
fn cuts(text: &str, piece_bytes: usize) -> Option<Vec<usize>> {
    if text.len() <= piece_bytes {
        return None;
    }
    let mut cuts = Vec::new();
    let mut piece_start = 0;
    // Top-level tables given an `[[element]]` in the current piece.
    let mut started: HashSet<&str> = HashSet::new();
    // The single top-level tables met so far (a second one is an error the
    // whole text must report).
    let mut single: HashSet<&str> = HashSet::new();
    for (line, start) in Lines::new(text) {
        let (array, keys) = match start {
            Start::Malformed => return None,
            // A key at the root, or inside a table before any header.
            Start::Key(_) if started.is_empty() => return None,
            Start::Key(_) => continue,
            // Quoted keys: the whole text is parsed as one.
            Start::Table { array, keys } => (array, keys.into_iter().collect::<Option<Vec<_>>>()?),
        };
        let first = *keys.first()?;
        if array && keys.len() == 1 {
            // A piece reaches its size; and a domain after other tables
            // starts a piece of its own, which its records may then be
            // read in batches in (the first domain of a file comes after
            // its datacenters).
            let first_domain = first == "domain" && !started.is_empty() && !started.contains(first);
            if line - piece_start >= piece_bytes || first_domain {
                cuts.push(line);
                piece_start = line;
                started.clear();
            }
            started.insert(first);
        } else if !array && keys.len() == 1 && SINGLE_TABLES.contains(&first) {
            // A whole table of its own: its keys follow it in this piece.
            if !single.insert(first) {
                return None;
            }
            started.insert(first);
        } else if !started.contains(first) {
            return None;
        }
    }
    Some(cuts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeply_nested_values_are_refused_not_a_stack_overflow() {
        for (open, close) in [("[", "]"), ("{a=", "}")] {
            let depth = 100_000;
            let text = format!(
                "[[domain]]\nname = \"x.test\"\nnote = {}1{}\n",
                open.repeat(depth),
                close.repeat(depth)
            );
            assert!(parse(&text).is_err(), "{open} nested {depth} deep");
            // The same in one of many pieces, parsed on other threads.
            let text = tricky() + &text;
            assert!(cuts(&text, 64).is_some());
            assert!(
                parse_in_pieces(&text, 64, BATCH_BYTES, 3, None).is_err(),
                "{open} nested {depth} deep in a piece"
            );
            // And in a record of a list read in batches.
            let text = format!(
                "[[domain]]\nname = \"x.test\"\nrecord = [\n{{name=\"a\",type=\"TXT\",values=[\"v\"]}},\n\
                 {{name=\"b\",type=\"TXT\",values=[\"v\"],note={}1{}}},\n]\n",
                open.repeat(depth),
                close.repeat(depth)
            );
            assert!(record_list(&text, 0).is_some_and(|l| l.elements.len() == 2));
            assert!(
                parse_in_pieces(&text, 64, 1, 1, None).is_err(),
                "{open} nested {depth} deep in a batch"
            );
        }
    }

    /// Decoded lists hold no spare places: what is decoded lives as long
    /// as its version of the configuration (shared between versions).
    #[test]
    fn decoded_lists_keep_no_spare_capacity() {
        let text = "[[domain]]\nname = \"x.test\"\nnameservers = [\"ns1.x.test\"]\n\
                    record = [{name=\"a\",type=\"A\",addresses=[{ip=\"192.0.2.1\"}]},\n\
                    {name=\"t\",type=\"TXT\",values=[\"v\"]},\n\
                    {name=\"b\",type=\"A\",addresses=[{ip=\"192.0.2.2\"}],fail_safe=[\"192.0.2.9\"]}]\n";
        let json = r#"{"name":"x.test","record":[{"name":"a","type":"A","addresses":[{"ip":"192.0.2.1"}]}]}"#;
        let toml = parse(text).unwrap();
        let from_json: crate::config::Domain = serde_json::from_str(json).unwrap();
        for domain in [&*toml.domains[0], &from_json] {
            assert_eq!(domain.records.capacity(), domain.records.len());
        }
    }

    #[test]
    fn errors_after_multibyte_text_name_the_line() {
        for text in [
            "# ünïcödé €€€\n[[domain]]\nname = \"é.test\"\n€ = 2\n",
            "[[domain]]\nname = \"x\"\nnote = \"€\n",
            "€",
        ] {
            let Err(e) = parse(text) else {
                panic!("{text:?} must not parse");
            };
            assert!(e.to_string().contains("line "), "{e}");
        }
    }

    /// Every configuration in config/, and a generated one with everything a cut
    /// must not break, parse the same in pieces as whole.
    #[test]
    fn pieces_parse_like_the_whole_file() {
        let mut texts: Vec<String> =
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config"))
                .expect("config/")
                .map(|e| e.expect("entry").path())
                // The device's own settings are another kind of file.
                .filter(|p| !p.ends_with("node.toml"))
                .map(|p| std::fs::read_to_string(p).expect("read"))
                .collect();
        let tricky = tricky();
        // Before each of its 20 domains, 20 checks and 20 regions.
        assert_eq!(cuts(&tricky, 1).map(|c| c.len()), Some(60));
        texts.push(tricky);
        texts.push(inline_lists());
        for text in &texts {
            let whole = parse_whole(text, 0, text).expect("parses whole");
            for piece_bytes in [1, 64, 300, 5000] {
                if text.len() > piece_bytes {
                    assert!(
                        cuts(text, piece_bytes).is_some(),
                        "the file should be safe to cut at {piece_bytes} bytes:\n{text}"
                    );
                }
                for batch_bytes in [1, 100, BATCH_BYTES] {
                    assert_eq!(
                        parse_in_pieces(text, piece_bytes, batch_bytes, 1, None).expect("parses"),
                        whole,
                        "pieces of {piece_bytes} bytes, batches of {batch_bytes}"
                    );
                }
                for threads in [2, 3, 7] {
                    assert_eq!(
                        parse_in_pieces(text, piece_bytes, 100, threads, None).expect("parses"),
                        whole,
                        "{threads} threads, pieces of {piece_bytes} bytes"
                    );
                }
            }
        }
    }

    /// Domains whose records are lists of inline tables, written as an
    /// operator might: comments and blank lines between records, a
    /// trailing comma or none, a record over several lines, a table of
    /// the domain after its list, the list not the domain's first key.
    fn inline_lists() -> String {
        let mut t = String::from("[[datacenter]]\nname = \"dc1\"\n\n");
        for d in 0..6 {
            t += &format!("[[domain]]\nname = \"i{d}.test\"\nrecord = [ # the list\n");
            for r in 0..12 {
                t += &match r % 4 {
                    0 => format!(
                        "{{name=\"a{r}\",type=\"A\",addresses=[{{ip=\"192.0.2.{r}\"}}]}},\n"
                    ),
                    1 => format!(
                        "\n  # record {r}\n{{ name = \"t{r}\", type = \"TXT\", values = [\"}}, {{\", \"]\"] }} ,\n"
                    ),
                    2 => format!(
                        "{{name=\"m{r}\",type=\"A\",\n addresses=[{{ip=\"198.51.100.{r}\"}},\n {{ip=\"198.51.100.{}\"}}]}},",
                        r + 1
                    ),
                    _ => format!(
                        "{{name=\"w{r}\",type=\"A\",addresses=[{{ip=\"203.0.113.{r}\"}}]}}\n,"
                    ),
                };
            }
            // Every other list ends without a trailing comma.
            if d % 2 == 1 {
                t.truncate(t.trim_end_matches([',', '\n']).len());
            }
            t += "\n]\nttl = 60\n";
            if d % 3 == 0 {
                t += "\n[domain.soa]\nrefresh = 600\n";
            }
            t += "\n";
        }
        t
    }

    /// A text read in batches beside the configuration held takes what
    /// is equal from it: the domains the text gives again, and the
    /// records of a changed one but the changed record.
    #[test]
    fn batches_take_equal_records_from_the_configuration_held() {
        let text = inline_lists();
        let third = text.find("name = \"i3.test\"").expect("a fourth domain");
        let held_text = format!(
            "{}{}",
            &text[..third],
            text[third..].replacen("198.51.100.6", "198.51.100.99", 1)
        );
        let held = parse_whole(&held_text, 0, &held_text).expect("parses");
        let like = Like::new(&held);
        let whole = parse_whole(&text, 0, &text).expect("parses");
        for batch_bytes in [1, 100, BATCH_BYTES] {
            let parsed = parse_in_pieces(&text, 64, batch_bytes, 2, Some(&like)).expect("parses");
            assert_eq!(parsed, whole);
            for (new, old) in parsed.domains.iter().zip(&held.domains) {
                let shared: Vec<bool> = new
                    .records
                    .iter()
                    .zip(&old.records)
                    .map(|(n, o)| Arc::ptr_eq(n, o))
                    .collect();
                if new.name == "i3.test" {
                    assert!(!Arc::ptr_eq(new, old));
                    assert_eq!(shared.iter().filter(|s| !**s).count(), 1, "{shared:?}");
                } else {
                    assert!(Arc::ptr_eq(new, old), "{} ({batch_bytes})", new.name);
                }
            }
        }
    }

    /// A record list read in batches is read as one: what is malformed
    /// between two records or inside one is an error wherever the batches
    /// fall, and the line is the whole file's.
    #[test]
    fn record_batches_keep_the_lists_errors() {
        let good = inline_lists();
        // In the first domain (after the datacenter, in a piece of its
        // own) and in the third.
        let in_domain = |domain: &str, from: &str, to: &str| {
            let at = good
                .find(&format!("name = \"{domain}\""))
                .expect("the domain");
            let (head, tail) = good.split_at(at);
            format!("{head}{}", tail.replacen(from, to, 1))
        };
        let mut bad = Vec::new();
        for domain in ["i0.test", "i2.test"] {
            // A comma missing between two records (but in a comment), or
            // one too many.
            bad.push(in_domain(domain, "192.0.2.4\"}]},\n", "192.0.2.4\"}]}\n"));
            bad.push(in_domain(
                domain,
                "192.0.2.4\"}]},\n",
                "192.0.2.4\"}]} # ,\n",
            ));
            bad.push(in_domain(domain, "192.0.2.4\"}]},\n", "192.0.2.4\"}]},,\n"));
            // A field the record does not have.
            bad.push(in_domain(
                domain,
                "{name=\"a8\",",
                "{name=\"a8\",naem=\"x\",",
            ));
        }
        // A list that is not closed.
        bad.push(good.replacen(
            "\n]\nttl = 60\n\n[[domain]]\nname = \"i2.test\"",
            "\nttl = 60\n\n[[domain]]\nname = \"i2.test\"",
            1,
        ));
        // In pieces as small as can be, and as large: then the only cut
        // is before the first domain, after the datacenter.
        let large = good.len() - 1;
        let first_domain = good.find("[[domain]]").expect("a domain");
        assert_eq!(cuts(&good, large), Some(vec![first_domain]));
        for text in &bad {
            assert_ne!(text, &good);
            let whole = parse_whole(text, 0, text).expect_err("invalid");
            for (piece_bytes, batch_bytes) in [(64, 1), (64, 100), (64, 300), (large, 100)] {
                let batched =
                    parse_in_pieces(text, piece_bytes, batch_bytes, 2, None).expect_err("invalid");
                assert_eq!(batched.listed.len(), 1, "{batched}");
                assert_eq!(
                    batched.listed[0].path, whole.listed[0].path,
                    "pieces of {piece_bytes}, batches of {batch_bytes}: {batched} against {whole}"
                );
            }
        }
    }

    /// The configurations in config/ and the generated ones, each piece
    /// first read in parts however small: nothing is refused, and they
    /// parse as whole.
    #[test]
    fn valid_texts_read_in_parts_first_parse_as_whole() {
        let mut texts: Vec<String> = ["demo.toml", "example.toml", "cluster-demo.toml"]
            .iter()
            .map(|name| {
                let path = format!("{}/../../config/{name}", env!("CARGO_MANIFEST_DIR"));
                std::fs::read_to_string(path).expect("read")
            })
            .collect();
        texts.push(tricky());
        texts.push(inline_lists());
        texts.push(tricky() + &inline_lists());
        let none = Cancel::default();
        for text in &texts {
            let whole = parse_whole(text, 0, text).expect("parses whole");
            for part_bytes in [1, 64, 5000] {
                assert_eq!(
                    first_error(text, &|at| at, text, part_bytes, &none),
                    Ok(None)
                );
            }
            for (piece, batch) in [(1, 1), (64, 100), (5000, BATCH_BYTES)] {
                let sizes = Sizes {
                    piece,
                    batch,
                    check_first: 0,
                };
                assert_eq!(
                    pieces_until(text, sizes, 2, None, &none).expect("parses"),
                    whole,
                    "pieces of {piece}, batches of {batch}"
                );
            }
        }
    }

    /// A key that a table of an element does not take, found in parts,
    /// is the error the whole text's parse gives (when it is the text's
    /// first); one in another table is left to the whole's parse.
    #[test]
    fn unknown_keys_found_in_parts_are_the_whole_texts() {
        let good = tricky() + &inline_lists();
        let none = Cancel::default();
        for (from, to) in [
            // A domain's own key, a record's, a check's, an address's.
            ("name = \"d3.test\"\n", "name = \"d3.test\"\nnaem = 1\n"),
            (
                "name = \"www\"\ntype = \"A\"\n",
                "name = \"www\"\ntype = \"A\"\nk.x = 2\n",
            ),
            ("name = \"c7\"\n", "name = \"c7\"\nk-1 = []\n"),
            (
                "[[check]]\nname = \"c5\"",
                "[[domain.record]]\nname = \"x\"\ntype = \"A\"\n[[domain.record.addresses]]\nip = \"192.0.2.5\"\nk = 1\n\n[[check]]\nname = \"c5\"",
            ),
            // The datacenter's, and the domain's after its inline records.
            ("name = \"dc1\"\n", "name = \"dc1\"\nk = 1\n"),
            ("ttl = 60\n", "ttl = 60\nk = [1,\n2]\n"),
        ] {
            assert!(good.contains(from), "{from}");
            let text = good.replacen(from, to, 1);
            let whole = parse_whole(&text, 0, &text).expect_err("invalid");
            assert!(
                whole.listed[0].message.starts_with("unknown field"),
                "{whole}"
            );
            for part_bytes in [1, 64, 5000] {
                let found = first_error(&text, &|at| at, &text, part_bytes, &none)
                    .expect("not cancelled")
                    .unwrap_or_else(|| panic!("no error found in parts of {part_bytes}: {to}"));
                assert_eq!(found, whole, "parts of {part_bytes}: {to}");
            }
            // In pieces, each read in parts first: the same error.
            let sizes = Sizes {
                piece: 64,
                batch: 100,
                check_first: 0,
            };
            assert_eq!(
                pieces_until(&text, sizes, 2, None, &none),
                Err(CheckError::Invalid(whole))
            );
        }
        // A root key; keys of tables that are not an element's own.
        for text in [
            format!("x = 1\n{good}"),
            good.replacen(
                "[[check]]\nname = \"c7\"",
                "[[check]]\nname = \"c7\"\ntls = { k = 1 }",
                1,
            ),
            format!("{good}\n[domain.soa]\nk = 1\n"),
            format!("{good}\n[rate_limit]\nk = 1\n"),
        ] {
            let whole = parse_whole(&text, 0, &text).expect_err("invalid");
            let found = first_error(&text, &|at| at, &text, 64, &none).expect("not cancelled");
            if text.starts_with('x') {
                assert_eq!(found, Some(whole));
            } else {
                assert_eq!(found, None, "{whole}");
            }
        }
    }

    /// A large piece's first grammar error, found in parts, is the error
    /// the whole text's parse gives; a valid text has none.
    #[test]
    fn grammar_errors_found_in_parts_are_the_whole_texts() {
        let good = tricky() + &inline_lists();
        let none = Cancel::default();
        for part_bytes in [1, 64, 5000] {
            assert_eq!(
                first_grammar_error(&good, 0, &good, part_bytes, &none),
                Ok(None)
            );
        }
        for (from, to) in [
            ("name = \"c3\"", "name = = \"c3\""),
            (
                "name = \"c5\"\ntype = \"tcp\"",
                "name = \"c5\"\ntype \"tcp\"",
            ),
            ("[[check]]\nname = \"c7\"", "[[check]\nname = \"c7\""),
            ("\"ns1.d9.test\",\n]", "\"ns1.d9.test\",\n"),
            ("{name=\"a8\",", "{name=\"a8\" x,"),
        ] {
            assert!(good.contains(from), "{from}");
            let text = good.replacen(from, to, 1);
            let whole = parse_whole(&text, 0, &text).expect_err("invalid");
            for part_bytes in [1, 64, 5000] {
                let found = first_grammar_error(&text, 0, &text, part_bytes, &none)
                    .expect("not cancelled")
                    .unwrap_or_else(|| panic!("no error found in parts of {part_bytes}: {to}"));
                assert_eq!(found, whole, "parts of {part_bytes}: {to}");
            }
        }
        let cancelled = Cancel::new();
        cancelled.cancel();
        assert_eq!(
            first_grammar_error(&good, 0, &good, 64, &cancelled),
            Err(Cancelled)
        );
    }

    /// Runs take every piece once, in order, at most one run a thread.
    #[test]
    fn runs_cover_the_pieces_in_order() {
        let sizes = [5, 1, 1, 30, 2, 2, 2, 9];
        let mut pieces = Vec::new();
        let mut at = 0;
        for size in sizes {
            pieces.push((at, at + size));
            at += size;
        }
        for threads in 1..=10 {
            let runs = runs(&pieces, threads);
            assert!(
                runs.len() <= threads && !runs.is_empty(),
                "{threads}: {runs:?}"
            );
            assert!(runs.iter().all(|r| !r.is_empty()), "{threads}: {runs:?}");
            assert_eq!(runs.concat(), pieces, "{threads}");
        }
        assert_eq!(runs(&pieces, 2).len(), 2);
    }

    fn tricky() -> String {
        let mut t = String::from("[[datacenter]]\nname = \"dc1\"\n\n");
        for d in 0..20 {
            t += &format!(
                "# [[domain]] in a comment\n[[domain]]\nname = \"d{d}.test\"\nnameservers = [\n\"ns1.d{d}.test\",\n]\n\n\
                 [[domain.record]]\nname = \"t\"\ntype = \"TXT\"\nvalues = [\"\"\"\n[[domain]]\nname = \"x\"\n\"\"\"]\n\n\
                 [[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [\n{{ ip = \"192.0.2.{d}\" }},\n]\n\n\
                 [[check]]\nname = \"c{d}\"\ntype = \"tcp\"\n\n\
                 [[region]]\nname = \"r{d}\"\nnetworks = [\"10.{d}.0.0/16\"]\n\n"
            );
        }
        t
    }

    /// The single tables may stand between lists: pieces parse like the
    /// whole; one given twice is the whole text's error.
    #[test]
    fn single_tables_between_pieces() {
        let mut text = tricky();
        let middle = text.find("[[domain]]\nname = \"d10.test\"").unwrap();
        text.insert_str(
            middle,
            "[rate_limit]\nslip = 1\nexempt = [\n\"10.0.0.0/8\",\n]\n\n[cookies]\nrotate = \"1h\"\n\n[geoip]\nupdate = \"off\"\n\n",
        );
        let whole = parse_whole(&text, 0, &text).expect("parses whole");
        assert!(whole.rate_limit.is_some() && whole.cookies.is_some() && whole.geoip.is_some());
        assert!(cuts(&text, 64).is_some());
        assert_eq!(
            parse_in_pieces(&text, 64, BATCH_BYTES, 3, None).expect("parses"),
            whole
        );
        text += "\n[cookies]\nrotate = \"2h\"\n";
        assert_eq!(cuts(&text, 64), None);
        assert_eq!(
            parse_in_pieces(&text, 64, BATCH_BYTES, 3, None).expect_err("twice"),
            parse_whole(&text, 0, &text).expect_err("twice")
        );
    }

    /// Errors name the line in the whole file, whichever piece they are in.
    #[test]
    fn errors_name_the_line_in_the_whole_file() {
        let mut text = tricky();
        // The misspelt key is on the third line of what is appended.
        let line = text.matches('\n').count() + 3;
        text += "\n[[domain]]\nnaem = \"late.test\"\n";
        let whole = parse_whole(&text, 0, &text).expect_err("invalid");
        let pieces = parse_in_pieces(&text, 64, BATCH_BYTES, 3, None).expect_err("invalid");
        assert_eq!(pieces, whole);
        assert_eq!(pieces.listed[0].path, format!("line {line}"));
    }

    /// A file read in pieces lists the errors of every piece, with the
    /// line in the whole file.
    #[test]
    fn every_error_of_a_file_in_pieces_is_listed() {
        let mut text = tricky();
        let header = text.matches('\n').count() + 2;
        text += "\n[[domain]]\nnaem = \"late.test\"\n";
        let address = text.matches('\n').count()
            + 1
            + tricky()
                .lines()
                .position(|l| l.contains("192.0.2.7\""))
                .unwrap_or_default();
        text += &tricky().replace("{ ip = \"192.0.2.7\" }", "{ ip = \"192.0.2.700\" }");
        // A file large enough to be cut gives the same list.
        let small = parse(&text).expect_err("invalid");
        let cut = parse_in_pieces(&text, 64, BATCH_BYTES, 3, None).expect_err("invalid");
        assert!(cuts(&text, 64).is_some());
        assert_eq!(parse_whole(&text, 0, &text).expect_err("invalid"), cut);
        let mut errors: Vec<String> = small.listed.iter().map(ToString::to_string).collect();
        // The list of a domain's keys grows with the product: the message
        // is checked up to it.
        if let Some(e) = errors.get_mut(1)
            && let Some(at) = e.find(", expected one of `name`, `ttl`, ")
        {
            e.truncate(at);
        }
        assert_eq!(
            errors,
            [
                format!("line {header}: domain #21: missing field `name`"),
                format!("line {}: domain #21: unknown field `naem`", header + 1),
                format!(
                    "line {address}: domain d7.test / record www A / address 1: ip: \"192.0.2.700\" is not an IP address"
                ),
            ]
        );
    }

    /// An error that no piece shows on its own is still reported: the
    /// parser's own.
    #[test]
    fn an_error_across_pieces_is_the_parsers() {
        let text =
            "[geoip]\nupdate = \"off\"\n[[domain]]\nname = \"a.test\"\n[geoip]\nupdate = \"off\"\n";
        let errors = parse(text).expect_err("a table defined twice");
        assert_eq!(errors.listed.len(), 1, "{errors}");
        assert_eq!(errors.listed[0].path, "line 5", "{errors}");
    }

    /// No text makes the listing of errors panic: prefixes of the
    /// configurations in config/, and each with a character put in.
    #[test]
    fn broken_texts_list_errors_without_panicking() {
        for name in ["demo.toml", "example.toml"] {
            let path = format!("{}/../../config/{name}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).expect("read");
            for (cut, _) in text.char_indices().step_by(61) {
                let (head, tail) = text.split_at(cut);
                assert!(parse(head).is_ok() || !parse(head).expect_err("").listed.is_empty());
                for junk in ["\"", "[", "]", "=", "{", "\n", "'''", "x", "[[domain]]\n"] {
                    let changed = format!("{head}{junk}{tail}");
                    if let Err(e) = parse(&changed) {
                        assert!(!e.listed.is_empty(), "{changed}");
                    }
                }
            }
        }
    }

    /// What the fuzzer asserts of `parse_finely_and_whole`, on prefixes
    /// of the configurations in config/ and each with a character put in:
    /// a text parses in the smallest pieces, each first read in the
    /// smallest parts for its grammar and keys, as it does whole.
    #[test]
    fn texts_parse_finely_as_whole() {
        for name in ["demo.toml", "example.toml"] {
            let path = format!("{}/../../config/{name}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).expect("read");
            for (cut, _) in text.char_indices().step_by(97) {
                let (head, tail) = text.split_at(cut);
                for junk in [
                    "",
                    "\"",
                    "[",
                    "=",
                    "\n",
                    "x = 1\n",
                    "[[domain]]\n",
                    "k = 1\n",
                ] {
                    let changed = format!("{head}{junk}{tail}");
                    match parse_finely_and_whole(&changed) {
                        [Ok(fine), Ok(whole)] => assert_eq!(fine, whole, "{changed}"),
                        [Err(_), Err(_)] => {}
                        [fine, whole] => panic!(
                            "finely {}, whole {}: {changed}",
                            fine.is_ok(),
                            whole.is_ok()
                        ),
                    }
                }
            }
        }
    }

    /// What cannot be cut safely is parsed whole, errors and all.
    #[test]
    fn unsafe_cuts_fall_back_to_the_whole_file() {
        let cases = [
            // A later piece extends a domain started in an earlier one.
            "[[domain]]\nname = \"a.test\"\n[[check]]\nname = \"c\"\ntype = \"tcp\"\n[[domain.record]]\nname = \"w\"\ntype = \"A\"\n",
            // A quoted header.
            "[[domain]]\nname = \"a.test\"\n[[\"domain\"]]\nname = \"b.test\"\n",
            // A root key.
            "x = 1\n[[domain]]\nname = \"a.test\"\n[[domain]]\nname = \"b.test\"\n",
        ];
        for text in cases {
            assert_eq!(cuts(text, 1), None, "{text}");
        }
    }
}
