//! The configuration as the text edits write: TOML, made of parts that the
//! next edit can copy instead of writing again.
//!
//! The text is the tables before the domains, each domain, and the tables
//! after them (`[rate_limit]`, `[cookies]`, `[catalog]`), each written alone by
//! `toml::to_string_pretty` and joined by a newline: the same text that
//! function gives for the whole configuration (a test keeps it so), made
//! of parts. An edit changes one object, so the next text is given as an
//! edit of the text before ([`Splice`]): every other domain is taken from
//! it, and so are the records of the touched domain that the edit left as
//! they were. Only the changed records are written, and the text is never
//! joined whole.

use std::ops::Range;
use std::sync::Arc;

use gtm_cluster::parts::{Part, Pieces, Splice};

use super::config::{Config, Domain, Record, same_name};
pub use super::layout::Layout;
use super::layout::{RecordSpans, Spans, to_spans};

/// A text made before, to take parts from.
#[derive(Debug, Clone, Copy)]
pub struct Before<'a> {
    /// Its bytes, in pieces that follow one another, each starting a line
    /// (the parts it is kept in: it is not joined to be taken from).
    pub text: &'a [Part<'a>],
    pub layout: &'a Layout,
    /// The configuration it is.
    pub config: &'a Config,
    /// The domain the change touched (written again, but for the records
    /// the change left as they were), or `None` when it touched no domain.
    pub touched: Option<&'a str>,
}

/// Writes `config` as TOML: the text as an edit of the text `before`
/// (taking from it the part of every domain other than the touched one,
/// by name, and the touched domain's unchanged records), or whole when
/// there is none.
pub fn write(
    config: &Config,
    before: Option<Before>,
) -> Result<(Splice, Layout), toml::ser::Error> {
    let head = Config {
        domains: Vec::new(),
        rate_limit: None,
        cookies: None,
        catalog: None,
        ..config.clone_globals()
    };
    let tail = Config {
        rate_limit: config.rate_limit.clone(),
        cookies: config.cookies.clone(),
        catalog: config.catalog.clone(),
        ..Config::default()
    };
    let old = Pieces::new(before.map_or(&[][..], |b| b.text));
    let taken: std::collections::HashMap<&str, Range<usize>> = before
        .map(|b| {
            b.layout
                .domains
                .iter()
                .filter(|(_, range)| range.end <= old.len())
                .map(|(name, range)| (name.as_str(), range.clone()))
                .collect()
        })
        .unwrap_or_default();
    let touched = before.and_then(|b| b.touched);
    let was = |name: &str| {
        before.and_then(|b| b.config.domains.iter().find(|d| same_name(&d.name, name)))
    };
    // The text before's own head and tail, when the edit left what they
    // hold as it was.
    let kept = before
        .filter(|b| b.config.same_globals(config))
        .map(|b| (b.layout.head.clone(), b.layout.tail.clone()))
        .filter(|(head, tail)| head.end <= old.len() && tail.end <= old.len());
    let cached = |name: &str| before.and_then(|b| b.layout.spans.0.get(name));
    let mut text = Written::default();
    let mut layout = Layout::default();
    text.part(match &kept {
        Some((head, _)) => vec![Segment::Old(head.clone())],
        None => vec![Segment::New(toml::to_string_pretty(&head)?)],
    });
    layout.head = 0..text.len;
    for domain in &config.domains {
        let start = text.len;
        let range = taken.get(domain.name.as_str()).cloned();
        let (part, spans) = match range {
            Some(range) if touched.is_none_or(|t| !same_name(&domain.name, t)) => {
                (vec![Segment::Old(range)], cached(&domain.name).cloned())
            }
            Some(range) => match was(&domain.name) {
                Some(was) => spliced_domain(&old, range, was, domain, cached(&domain.name))?,
                None => None,
            }
            .map_or_else(|| whole_domain(domain).map(|part| (part, None)), Ok)?,
            None => (whole_domain(domain)?, None),
        };
        if let Some(spans) = spans {
            layout.spans.0.insert(domain.name.clone(), spans);
        }
        text.part(part);
        // Its part, without the newline that joins it to the one before.
        let end = text.len;
        let joined = usize::from(start > 0 && end > start);
        layout
            .domains
            .push((domain.name.clone(), start + joined..end));
    }
    let end = text.len;
    text.part(match kept {
        Some((_, tail)) => vec![Segment::Old(tail)],
        None => vec![Segment::New(toml::to_string_pretty(&tail)?)],
    });
    // The tail, without the newline that joins it.
    layout.tail = if text.len > end {
        end + 1..text.len
    } else {
        end..end
    };
    if layout.domains.is_empty() {
        // Without a domain a text is its head ([`Layout::of`]).
        layout = Layout {
            head: 0..text.len,
            domains: Vec::new(),
            tail: text.len..text.len,
            spans: RecordSpans::default(),
        };
    }
    Ok((text.splice(&old), layout))
}

/// A domain's part written whole.
fn whole_domain(domain: &Arc<Domain>) -> Result<Vec<Segment>, toml::ser::Error> {
    let part = toml::to_string_pretty(&Config {
        domains: vec![domain.clone()],
        ..Config::default()
    })?;
    Ok(vec![Segment::New(part)])
}

/// A domain's part as segments, and where its records lie in it when they
/// are a list of inline tables.
type SplicedPart = (Vec<Segment>, Option<Spans>);

/// A piece of the text being written: bytes of the text before, or new.
#[derive(Debug)]
enum Segment {
    Old(Range<usize>),
    New(String),
}

impl Segment {
    fn len(&self) -> usize {
        match self {
            Segment::Old(range) => range.len(),
            Segment::New(text) => text.len(),
        }
    }
}

/// The text being written, as segments.
#[derive(Debug, Default)]
struct Written {
    segments: Vec<Segment>,
    len: usize,
}

impl Written {
    /// Appends a part, after a newline when the text has some (an empty
    /// part adds nothing).
    fn part(&mut self, part: Vec<Segment>) {
        let len: usize = part.iter().map(Segment::len).sum();
        if len == 0 {
            return;
        }
        if self.len > 0 {
            self.segments.push(Segment::New("\n".into()));
            self.len += 1;
        }
        self.segments.extend(part);
        self.len += len;
    }

    /// The text as an edit of `old`: the bytes it shares with it from its
    /// start and from its end, found segment by segment (a segment of
    /// `old` where it was is the same without a look at its bytes), and
    /// the bytes between them.
    fn splice(self, old: &Pieces) -> Splice {
        let mut front = 0;
        for segment in &self.segments {
            let same = match segment {
                Segment::Old(range) if range.start == front => range.len(),
                Segment::Old(_) => 0,
                Segment::New(text) => old.same_from(front, text.as_bytes()),
            };
            front += same;
            if same < segment.len() {
                break;
            }
        }
        let mut back = 0;
        for segment in self.segments.iter().rev() {
            let Some(end) = old.len().checked_sub(back) else {
                break;
            };
            let same = match segment {
                Segment::Old(range) if range.end == end => range.len(),
                Segment::Old(_) => 0,
                Segment::New(text) => old.same_to(end, text.as_bytes()),
            };
            back += same;
            if same < segment.len() {
                break;
            }
        }
        let back = back.min(self.len - front).min(old.len() - front);
        let middle = front..self.len - back;
        let mut bytes = Vec::with_capacity(middle.len());
        let mut at = 0;
        for segment in &self.segments {
            let here = at..at + segment.len();
            at = here.end;
            let from = middle.start.max(here.start);
            let to = middle.end.min(here.end);
            if from >= to {
                continue;
            }
            let inner = from - here.start..to - here.start;
            match segment {
                Segment::Old(range) => old.copy(
                    range.start + inner.start..range.start + inner.end,
                    &mut bytes,
                ),
                Segment::New(text) => bytes.extend_from_slice(&text.as_bytes()[inner]),
            }
        }
        Splice {
            front,
            middle: bytes,
            back,
        }
    }
}

/// The touched domain's part as an edit of its part before (`range` in
/// `old`; the domain was `was`): the text before up to the first record
/// the edit changed, the changed records written, and the text before
/// from the first record after them. `None` when the part cannot be told
/// apart so: the domain changed beyond its records, it had no records or
/// has none, or its text holds a multi-line string (which could hold what
/// reads as a table). With the part, where its records lie when they are
/// a list of inline tables (`cached`: where they lay before, if known).
fn spliced_domain(
    old: &Pieces,
    range: Range<usize>,
    was: &Domain,
    now: &Arc<Domain>,
    cached: Option<&Spans>,
) -> Result<Option<SplicedPart>, toml::ser::Error> {
    if !was.same_but_records(now) || was.records.is_empty() || now.records.is_empty() {
        return Ok(None);
    }
    let (same_start, same_end) = crate::ends::same_ends(&was.records, &now.records, |a, b| a == b);
    // Where its records lie is known only for a list of inline tables:
    // that list is edited without a look at the domain's text, whose
    // parts the map keeps deflated.
    if cached.is_some_and(|spans| spans.len() == was.records.len()) {
        return inline_spliced(old, range, was, now, (same_start, same_end), cached);
    }
    let Some(before) = Records::find(old, range.clone(), was.records.len()) else {
        return inline_spliced(old, range, was, now, (same_start, same_end), cached);
    };
    let (Some(first), Some(rest)) = (
        before.start_of(old, same_start),
        before.start_of(old, was.records.len() - same_end),
    ) else {
        return Ok(None);
    };
    let changed = &now.records[same_start..now.records.len() - same_end];
    let mut part = vec![Segment::Old(range.start..first)];
    if !changed.is_empty() {
        // The changed records in a domain of their own, written as the
        // whole would be: their text is the same in it.
        let alone = toml::to_string_pretty(&Config {
            domains: vec![Arc::new(Domain {
                records: changed.to_vec(),
                ..now.without_records()
            })],
            ..Config::default()
        })?;
        let pieces = [Part::plain(alone.as_bytes())];
        let text = Pieces::new(&pieces);
        let Some(written) = Records::find(&text, 0..alone.len(), changed.len()) else {
            return Ok(None);
        };
        let records = written
            .start_of(&text, 0)
            .zip(written.start_of(&text, changed.len()))
            .and_then(|(from, to)| alone.get(from..to));
        match records {
            Some(records) => part.push(Segment::New(records.to_string())),
            None => return Ok(None),
        }
    }
    part.push(Segment::Old(rest..range.end));
    Ok(Some((part, None)))
}

/// The touched domain's part as an edit of its part before, when its
/// records are a list of inline tables (`record = [ {...}, ... ]`, as an
/// operator may write them): the records the edit left are taken from the
/// text before, and the changed ones written as inline tables in their
/// place, `,` and a newline between them. `same` is how many records at
/// the start and at the end the edit left; `cached`, where the records lay
/// in the part before, if known (else the part is read with the lexer).
/// With the part, where its records lie now. `None` when the records are
/// not such a list.
fn inline_spliced(
    old: &Pieces,
    range: Range<usize>,
    was: &Domain,
    now: &Domain,
    same: (usize, usize),
    cached: Option<&Spans>,
) -> Result<Option<SplicedPart>, toml::ser::Error> {
    let n = was.records.len();
    let spans = match cached.filter(|spans| spans.len() == n) {
        Some(spans) => spans.clone(),
        None => {
            let mut part = Vec::with_capacity(range.len());
            old.copy(range.clone(), &mut part);
            let Ok(part) = std::str::from_utf8(&part) else {
                return Ok(None);
            };
            match super::layout::inline_records(part, n)
                .as_deref()
                .and_then(to_spans)
            {
                Some(spans) => spans,
                None => return Ok(None),
            }
        }
    };
    let span = |i: usize| spans[i].start as usize..spans[i].end as usize;
    let at = |i: usize| range.start + i;
    let (start, end) = same;
    let changed = &now.records[start..now.records.len() - end];
    // The changed records as inline tables, and where each lies in them.
    let mut written = String::new();
    let mut written_spans = Vec::with_capacity(changed.len());
    for (i, record) in changed.iter().enumerate() {
        if i > 0 {
            written.push_str(",\n");
        }
        let from = written.len();
        written.push_str(&inline(record)?);
        written_spans.push(from..written.len());
    }
    // The records the edit replaced or removed: from the first one's `{`
    // to the last one's `}`. `lead`: bytes before the first written record.
    let gone = start..n - end;
    let (keep_to, new, keep_from, lead) = match (gone.is_empty(), changed.is_empty()) {
        (true, true) => return Ok(Some((vec![Segment::Old(range)], Some(spans)))),
        (false, false) => (span(gone.start).start, written, span(gone.end - 1).end, 0),
        // Removed with the separator after them, or before the last ones.
        (false, true) if gone.end < n => (span(gone.start).start, written, span(gone.end).start, 0),
        (false, true) => (span(gone.start - 1).end, written, span(n - 1).end, 0),
        // Inserted before a record, or after the last.
        (true, false) if start < n => (span(start).start, written + ",\n", span(start).start, 0),
        (true, false) => (span(n - 1).end, format!(",\n{written}"), span(n - 1).end, 2),
    };
    // Now: the records before the change where they were, the written
    // ones after `keep_to`, the ones after the change moved by what the
    // edit added or took.
    let moved = |r: &Range<u32>| -> Option<Range<usize>> {
        let by = |x: u32| (x as usize + keep_to + new.len()).checked_sub(keep_from);
        Some(by(r.start)?..by(r.end)?)
    };
    let now_spans: Option<Vec<Range<usize>>> = spans[..start]
        .iter()
        .map(|r| Some(r.start as usize..r.end as usize))
        .chain(
            written_spans
                .iter()
                .map(|r| Some(keep_to + lead + r.start..keep_to + lead + r.end)),
        )
        .chain(spans[n - end..].iter().map(moved))
        .collect();
    Ok(Some((
        vec![
            Segment::Old(range.start..at(keep_to)),
            Segment::New(new),
            Segment::Old(at(keep_from)..range.end),
        ],
        now_spans.as_deref().and_then(to_spans),
    )))
}

/// A record as an inline table.
fn inline(record: &Record) -> Result<String, toml::ser::Error> {
    let mut text = String::new();
    serde::Serialize::serialize(record, toml::ser::ValueSerializer::new(&mut text))?;
    Ok(text)
}

/// Where a domain's records lie in its part as `toml::to_string_pretty`
/// writes it: each record's text is a blank line, its
/// `[[domain.record]]` header and its lines (its own tables included);
/// the records end where the domain's next table after them begins (its
/// blank line), or at the part's end.
struct Records {
    headers: Vec<usize>,
    end: usize,
    part_end: usize,
}

const RECORD_HEADER: &[u8] = b"[[domain.record]]\n";

impl Records {
    /// The records of the part `range` of `text`, when it holds `count`
    /// of them laid out as above and no multi-line string.
    fn find(text: &Pieces, range: Range<usize>, count: usize) -> Option<Records> {
        let mut headers = Vec::with_capacity(count);
        for (at, slice) in text.slices(range.clone()) {
            if memchr::memmem::find(slice, b"\"\"\"").is_some()
                || memchr::memmem::find(slice, b"'''").is_some()
            {
                return None;
            }
            // A slice starts a line (the part, and each piece of the text).
            headers.extend(
                memchr::memmem::find_iter(slice, RECORD_HEADER)
                    .filter(|&i| i == 0 || slice[i - 1] == b'\n')
                    .map(|i| at + i),
            );
        }
        if headers.len() != count {
            return None;
        }
        let last = *headers.last()?;
        // The first table after the last record's own.
        let mut end = range.end;
        'lines: for (at, slice) in text.slices(last + RECORD_HEADER.len()..range.end) {
            let mut line = 0;
            while line < slice.len() {
                let rest = &slice[line..];
                if rest.starts_with(b"[")
                    && !rest.starts_with(b"[domain.record.")
                    && !rest.starts_with(b"[[domain.record.")
                {
                    end = at + line - 1;
                    break 'lines;
                }
                line += memchr::memchr(b'\n', rest).map_or(rest.len(), |n| n + 1);
            }
        }
        Some(Records {
            headers,
            end,
            part_end: range.end,
        })
    }

    /// Where record `k`'s text starts; past the last, where the records
    /// end. `None` when it is not after a blank line there.
    fn start_of(&self, text: &Pieces, k: usize) -> Option<usize> {
        let at = match self.headers.get(k) {
            Some(header) => header.checked_sub(1)?,
            None if self.end == self.part_end => return Some(self.end),
            None => self.end,
        };
        let blank = at >= 1 && text.byte(at) == Some(b'\n') && text.byte(at - 1) == Some(b'\n');
        blank.then_some(at)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        crate::parse(text).unwrap()
    }

    fn domain(name: &str, txt: &str) -> String {
        format!(
            "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n"
        )
    }

    /// The text a splice makes of the text `pieces` make.
    fn spliced(pieces: &[Part], splice: &Splice) -> String {
        let old = gtm_cluster::parts::joined(pieces);
        let mut text = old[..splice.front].to_vec();
        text.extend_from_slice(&splice.middle);
        text.extend_from_slice(&old[old.len() - splice.back..]);
        String::from_utf8(text).unwrap()
    }

    /// A text in pieces of a line each (as it is kept in parts).
    fn lines(text: &str) -> Vec<Part<'_>> {
        text.as_bytes()
            .split_inclusive(|&b| b == b'\n')
            .map(Part::plain)
            .collect()
    }

    #[test]
    fn the_text_is_the_whole_configuration_written_at_once() {
        let texts = [
            include_str!("../../../config/demo.toml").to_string(),
            include_str!("../../../config/example.toml").to_string(),
            "[rate_limit]\nenabled = false\n".to_string(),
            format!(
                "{}{}[cookies]\nrotate = \"24h\"\n",
                domain("a.test", "1"),
                domain("b.test", "1")
            ),
            String::new(),
        ];
        for t in texts {
            let config = parse(&t);
            let (text, _) = write(&config, None).unwrap();
            assert_eq!((text.front, text.back), (0, 0));
            assert_eq!(
                text.middle,
                toml::to_string_pretty(&config).unwrap().as_bytes()
            );
        }
    }

    #[test]
    fn an_edit_takes_the_parts_it_did_not_touch() {
        let first = parse(&format!(
            "[rate_limit]\nenabled = false\n{}{}",
            domain("a.test", "1"),
            domain("b.test", "1")
        ));
        let (text, layout) = write(&first, None).unwrap();
        let text = String::from_utf8(text.middle).unwrap();
        // b.test changes; a.test's part in the text before is marked (same
        // length), so that taking it shows.
        let a = layout.domains[0].1.clone();
        let mut marked = text.clone();
        marked.replace_range(a.clone(), &text[a].replace("[\"1\"]", "[\"X\"]"));
        let mut second = first.clone();
        let record = &mut Arc::make_mut(&mut second.domains[1]).records[0];
        let mut fields = record.fields();
        fields.values = ["2".into()].into();
        *record = Arc::new(fields.into());
        let pieces = lines(&marked);
        assert!(pieces.len() > 10);
        let touched = Before {
            text: &pieces,
            layout: &layout,
            config: &first,
            touched: Some("B.test."),
        };
        let (next, _) = write(&second, Some(touched)).unwrap();
        let expected = toml::to_string_pretty(&second)
            .unwrap()
            .replacen("[\"1\"]", "[\"X\"]", 1);
        assert_eq!(spliced(&pieces, &next), expected);
        assert_eq!(next.middle, b"2", "only the changed bytes are new");

        // An edit of no domain takes every domain's part.
        let untouched = Before {
            touched: None,
            ..touched
        };
        let (taken, next_layout) = write(&first, Some(untouched)).unwrap();
        assert!(spliced(&pieces, &taken).contains("[\"X\"]"));
        assert_eq!(next_layout, layout);
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

    /// A record of one of several shapes: addresses, values, a value of
    /// several lines (written as a multi-line string), options.
    fn record(rng: &mut Lcg, i: usize) -> Arc<Record> {
        let text = match rng.below(12) {
            0 => format!(
                "name = \"t{i}\"\ntype = \"TXT\"\nvalues = [\"a\\n[[domain.record]]\\nb\"]\n"
            ),
            1 => format!(
                "name = \"m{i}\"\ntype = \"MX\"\nvalues = [\"10 mx{i}.b.test.\"]\nttl = 60\n"
            ),
            2 => format!(
                "name = \"w{i}\"\ntype = \"A\"\nmode = \"datacenter\"\naddresses = [{{ ip = \"192.0.2.{}\", dc = \"dc1\" }}, {{ ip = \"192.0.2.9\" }}]\n",
                i % 250
            ),
            _ => format!(
                "name = \"h{i}\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.{}\" }}]\n",
                i % 250
            ),
        };
        let config = parse(&format!(
            "[[domain]]\nname = \"x.test\"\nnameservers = [\"ns1.x.test\"]\n[[domain.record]]\n{text}"
        ));
        config.domains[0].records[0].clone()
    }

    /// Edits of a domain's records of every kind at every place (replaced,
    /// inserted, removed, at the start, inside, at the end; the domain's
    /// own fields; a domain with tables after its records): the text as an
    /// edit of the text before is the whole configuration written at
    /// once, and for an edit of its records alone, the records the edit
    /// left are taken from the text before.
    #[test]
    fn an_edit_of_records_writes_the_records_it_changed() {
        let mut rng = Lcg(11);
        let dc = "[[datacenter]]\nname = \"dc1\"\n";
        let mut taken = 0;
        for round in 0..200 {
            // Tables of the domain's own before its records, and after.
            let tables = match round % 3 {
                0 => {
                    "[domain.soa]\nrefresh = 60\n[[domain.secondaries]]\naddress = \"127.0.0.1\"\nkey = \"k\"\n"
                }
                1 => "[domain.soa]\nrefresh = 60\n",
                _ => "",
            };
            let mut config = parse(&format!(
                "{dc}{}[[domain]]\nname = \"b.test\"\nnameservers = [\"ns1.b.test\"]\n{tables}{}",
                domain("a.test", "1"),
                domain("c.test", "1")
            ));
            let count = [1, 3, 40][round % 3];
            let plain = round % 4 != 1;
            let make = |rng: &mut Lcg, i: usize| loop {
                let r = record(rng, i);
                if !plain || !r.values().iter().any(|v| v.contains('\n')) {
                    return r;
                }
            };
            let records: Vec<_> = (0..count).map(|i| make(&mut rng, i)).collect();
            Arc::make_mut(&mut config.domains[1]).records = records;
            let (first, layout) = write(&config, None).unwrap();
            let first = String::from_utf8(first.middle).unwrap();
            let pieces = lines(&first);
            let mut next = config.clone();
            let domain = Arc::make_mut(&mut next.domains[1]);
            let n = domain.records.len();
            let at = match rng.below(3) {
                0 => 0,
                1 => n - 1,
                _ => rng.below(n),
            };
            let mut records_only = true;
            match rng.below(6) {
                0 | 1 => domain.records[at] = make(&mut rng, 1000 + round),
                2 => domain.records.insert(at, make(&mut rng, 1000 + round)),
                3 => domain.records.push(make(&mut rng, 1000 + round)),
                4 => {
                    domain.records.remove(at);
                }
                _ => {
                    domain.ttl = Some(60);
                    records_only = false;
                }
            }
            let before = Before {
                text: &pieces,
                layout: &layout,
                config: &config,
                touched: Some("b.test"),
            };
            let (text, _) = write(&next, Some(before)).unwrap();
            let whole = toml::to_string_pretty(&next).unwrap();
            assert_eq!(spliced(&pieces, &text), whole, "round {round}");
            // The records the edit left, marked in the text before (their
            // names' first letter capitalized: the same length): the text
            // keeps the marks when it takes those records from there.
            let (start, end) = crate::ends::same_ends(
                &config.domains[1].records,
                &next.domains[1].records,
                |a, b| a == b,
            );
            let marked = |config: &Config| {
                let mut config = config.clone();
                let records = &mut Arc::make_mut(&mut config.domains[1]).records;
                let n = records.len();
                for (i, r) in records.iter_mut().enumerate() {
                    if i < start || i >= n - end {
                        Arc::make_mut(r).name = r.name.to_uppercase().into();
                    }
                }
                toml::to_string_pretty(&config).unwrap()
            };
            let marked_before = marked(&config);
            assert_eq!(marked_before.len(), first.len());
            let marked_pieces = lines(&marked_before);
            let (text, _) = write(
                &next,
                Some(Before {
                    text: &marked_pieces,
                    ..before
                }),
            )
            .unwrap();
            let lines_in = |c: &Config| {
                c.domains[1]
                    .records
                    .iter()
                    .any(|r| r.values().iter().any(|v| v.contains('\n')))
            };
            let takes = records_only && start + end > 0 && !lines_in(&config) && !lines_in(&next);
            let expected = if takes { marked(&next) } else { whole };
            assert_eq!(spliced(&marked_pieces, &text), expected, "round {round}");
            taken += usize::from(takes);
        }
        assert!(taken > 20, "{taken} edits took records from before");
    }

    /// An operator's text: comments, records as inline tables a line (or
    /// several on a line), a domain of `[[domain.record]]` tables, tables
    /// after the domains.
    fn operators_text(rng: &mut Lcg) -> String {
        let mut text =
            String::from("# the operator's own words\n[[datacenter]]\nname = \"dc1\"\n\n");
        for d in 0..3 {
            text += &format!(
                "[[domain]] # zone {d}\nname = \"d{d}.test\"\nnameservers = [\"ns1.d{d}.test\"]\n"
            );
            let count = 1 + rng.below(6);
            if d == 2 {
                for i in 0..count {
                    text += &format!(
                        "\n[[domain.record]]\nname = \"t{i}\"\ntype = \"TXT\"\nvalues = [\"v{i}\"]\n"
                    );
                }
                continue;
            }
            text += "record = [ # the list\n";
            for i in 0..count {
                let sep = if rng.below(3) == 0 { ", " } else { ",\n" };
                text += &format!(
                    "  {{ name = \"h{i}\", type = \"A\", addresses = [{{ ip = \"192.0.2.{i}\" }}] }}{sep}"
                );
                if rng.below(4) == 0 {
                    text += "# between\n";
                }
            }
            text += "]\n";
            if d == 0 {
                text += "\n[domain.soa]\nrefresh = 60\n";
            }
            text += "\n";
        }
        text + "# after the zones\n[rate_limit]\nenabled = false\n"
    }

    /// Edits of every kind, one after another, of an operator's text: the
    /// text each makes parses to the configuration edited, its layout read
    /// from it is the one the write gave (so every device, having written
    /// it or not, takes the same parts next), and an edit of records in
    /// an operator's list of inline tables keeps the operator's words
    /// and writes only the records it changed.
    #[test]
    fn an_edit_of_an_operators_text_keeps_it() {
        let mut rng = Lcg(5);
        let (mut kept, mut spans_checked) = (0, 0);
        for round in 0..60 {
            let mut text = operators_text(&mut rng);
            let mut config = parse(&text);
            let mut layout = Layout::of(&text, &config).expect("an operator's text has a layout");
            // The domains whose records are still the operator's list.
            let mut lists = vec!["d0.test".to_string(), "d1.test".to_string()];
            for step in 0..8 {
                let mut next = config.clone();
                let d = rng.below(next.domains.len().max(1));
                let what = rng.below(10);
                let mut records_only = false;
                let touched = next.domains.get(d).map(|dom| dom.name.clone());
                match (what, next.domains.get_mut(d)) {
                    (0..=5, Some(domain)) => {
                        let domain = Arc::make_mut(domain);
                        let n = domain.records.len();
                        let new = record(&mut rng, 100 + step);
                        records_only = !new.values().iter().any(|v| v.contains('\n'));
                        match rng.below(4) {
                            0 if n > 1 => {
                                domain.records.remove(rng.below(n));
                            }
                            1 => domain.records.insert(rng.below(n + 1), new),
                            2 => domain.records.push(new),
                            _ => domain.records[rng.below(n)] = new,
                        }
                    }
                    (6, Some(domain)) => Arc::make_mut(domain).ttl = Some(60 + step as u32),
                    (7, Some(_)) => {
                        next.domains.remove(d);
                    }
                    (8, _) => next.domains.push(Arc::new(
                        parse(&domain(&format!("n{step}.test"), "1")).domains[0]
                            .as_ref()
                            .clone(),
                    )),
                    _ => next.datacenters.push(Arc::new(crate::config::Datacenter {
                        name: format!("dc{}", 2 + step),
                        country: None,
                        continent: None,
                        latitude: None,
                        longitude: None,
                        bias: None,
                    })),
                }
                let touched = match what {
                    0..=7 => touched,
                    8 => Some(format!("n{step}.test")),
                    _ => None,
                };
                let pieces = lines(&text);
                let (splice, written) = write(
                    &next,
                    Some(Before {
                        text: &pieces,
                        layout: &layout,
                        config: &config,
                        touched: touched.as_deref(),
                    }),
                )
                .unwrap();
                let new_text = spliced(&pieces, &splice);
                let context =
                    format!("round {round} step {step} edit {what}\n{text}\n---\n{new_text}");
                assert_eq!(parse(&new_text), next, "{context}");
                assert_eq!(
                    Layout::of(&new_text, &next),
                    Some(written.clone()),
                    "{context}"
                );
                // Where the records lie, as the write carried it on, is
                // what reading the new text gives; and the text written
                // is the one a layout without it gives.
                for (name, range) in &written.domains {
                    let Some(spans) = written.spans.0.get(name) else {
                        continue;
                    };
                    let n = next
                        .domains
                        .iter()
                        .find(|d| &d.name == name)
                        .unwrap()
                        .records
                        .len();
                    let read = crate::layout::inline_records(&new_text[range.clone()], n);
                    assert_eq!(
                        read.as_deref().and_then(to_spans).as_ref(),
                        Some(spans),
                        "{context}: {name}"
                    );
                    spans_checked += 1;
                }
                // Read again from the text, and without the spans.
                let mut fresh = Layout::of(&text, &config).unwrap();
                fresh.spans = RecordSpans::default();
                let (uncached, _) = write(
                    &next,
                    Some(Before {
                        text: &pieces,
                        layout: &fresh,
                        config: &config,
                        touched: touched.as_deref(),
                    }),
                )
                .unwrap();
                assert_eq!(spliced(&pieces, &uncached), new_text, "{context}");
                let inline = what <= 5 && touched.as_ref().is_some_and(|t| lists.contains(t));
                if what == 6 {
                    lists.retain(|l| Some(l) != touched.as_ref());
                }
                if records_only && inline && text.contains("# the operator's own words") {
                    assert!(new_text.contains("# the operator's own words"), "{context}");
                    assert!(
                        splice.middle.len() < 400,
                        "{context}: {} bytes new: {}",
                        splice.middle.len(),
                        String::from_utf8_lossy(&splice.middle)
                    );
                    kept += 1;
                }
                (text, config, layout) = (new_text, next, written);
            }
        }
        assert!(kept > 50, "{kept} edits kept the operator's text");
        assert!(spans_checked > 100, "{spans_checked} cached spans checked");
    }
}
