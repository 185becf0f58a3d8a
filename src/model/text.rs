//! The configuration as the text edits write: TOML, made of parts that the
//! next edit can copy instead of writing again.
//!
//! The text is the tables before the domains, each domain, and the tables
//! after them (`[rate_limit]`, `[cookies]`), each written alone by
//! `toml::to_string_pretty` and joined by a newline: the same text that
//! function gives for the whole configuration (a test keeps it so), made
//! of parts. An edit changes one object, so the next text copies every
//! other domain's part from the text before ([`Layout`]).

use std::ops::Range;

use super::config::{Config, same_name};

/// Where each domain's part lies in a text [`write`] made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// Per domain, in order: its name as written and its part's bytes.
    domains: Vec<(String, Range<usize>)>,
}

/// A text made before, to copy parts from.
#[derive(Debug, Clone, Copy)]
pub struct Before<'a> {
    /// Its bytes, in pieces that follow one another (the parts it is
    /// kept in: it is not joined to be copied from).
    pub text: &'a [&'a [u8]],
    pub layout: &'a Layout,
    /// The domain the change touched (written again whatever the text
    /// before holds), or `None` when it touched no domain.
    pub touched: Option<&'a str>,
}

/// Writes `config` as TOML, copying from `before` the part of every domain
/// other than the touched one that it holds (by name).
pub fn write(
    config: &Config,
    before: Option<Before>,
) -> Result<(String, Layout), toml::ser::Error> {
    let head = Config {
        domains: Vec::new(),
        rate_limit: None,
        cookies: None,
        ..config.clone_globals()
    };
    let tail = Config {
        rate_limit: config.rate_limit.clone(),
        cookies: config.cookies.clone(),
        ..Config::default()
    };
    let copied: std::collections::HashMap<&str, Range<usize>> = before
        .map(|b| {
            b.layout
                .domains
                .iter()
                .filter(|(name, _)| b.touched.is_none_or(|t| !same_name(name, t)))
                .map(|(name, range)| (name.as_str(), range.clone()))
                .collect()
        })
        .unwrap_or_default();
    let pieces = before.map_or(&[][..], |b| b.text);
    let size: usize = pieces.iter().map(|p| p.len()).sum();
    // About the size of the text before (an edit changes one object):
    // grown from nothing, a large text is copied again at every doubling.
    let mut text = String::with_capacity(size + size / 64);
    let mut layout = Layout::default();
    let push = |text: &mut String, part: &str| {
        if part.is_empty() {
            return;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(part);
    };
    push(&mut text, &toml::to_string_pretty(&head)?);
    for domain in &config.domains {
        let start = text.len();
        let copy = copied.get(domain.name.as_str()).cloned();
        if !copy.is_some_and(|range| copy_range(pieces, range, &mut text)) {
            text.truncate(start);
            let part = toml::to_string_pretty(&Config {
                domains: vec![domain.clone()],
                ..Config::default()
            })?;
            push(&mut text, &part);
        }
        // Its part, without the newline that joins it to the one before.
        let end = text.len();
        let joined = usize::from(start > 0 && end > start);
        layout
            .domains
            .push((domain.name.clone(), start + joined..end));
    }
    push(&mut text, &toml::to_string_pretty(&tail)?);
    Ok((text, layout))
}

/// Appends the bytes `range` of the text `pieces` make to `text`, after a
/// newline when `text` has some (as `write` joins parts). False, with
/// `text` partly written, when the range is not in the pieces or not text.
fn copy_range(pieces: &[&[u8]], range: Range<usize>, text: &mut String) -> bool {
    if range.is_empty() {
        return true;
    }
    if !text.is_empty() {
        text.push('\n');
    }
    let mut at = 0;
    for piece in pieces {
        let next = at + piece.len();
        if next > range.start && at < range.end {
            let from = range.start.max(at) - at;
            let to = range.end.min(next) - at;
            // Pieces are cut before a line: each piece of a range is text.
            match piece.get(from..to).map(std::str::from_utf8) {
                Some(Ok(s)) => text.push_str(s),
                _ => return false,
            }
        }
        if next >= range.end {
            return true;
        }
        at = next;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        crate::model::parse(text).unwrap()
    }

    fn domain(name: &str, txt: &str) -> String {
        format!(
            "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n"
        )
    }

    #[test]
    fn the_text_is_the_whole_configuration_written_at_once() {
        let texts = [
            include_str!("../../config/demo.toml").to_string(),
            include_str!("../../config/example.toml").to_string(),
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
            assert_eq!(text, toml::to_string_pretty(&config).unwrap());
        }
    }

    #[test]
    fn an_edit_copies_the_parts_it_did_not_touch() {
        let first = parse(&format!(
            "[rate_limit]\nenabled = false\n{}{}",
            domain("a.test", "1"),
            domain("b.test", "1")
        ));
        let (text, layout) = write(&first, None).unwrap();
        // b.test changes; a.test's part in the text before is marked (same
        // length), so that a copy shows.
        let a = layout.domains[0].1.clone();
        let mut marked = text.clone();
        marked.replace_range(a.clone(), &text[a].replace("[\"1\"]", "[\"X\"]"));
        let mut second = first.clone();
        std::sync::Arc::make_mut(&mut second.domains[1]).records[0].values = ["2".into()].into();
        // The text before in pieces, a line each (as it is kept in parts).
        let pieces: Vec<&[u8]> = marked.as_bytes().split_inclusive(|&b| b == b'\n').collect();
        assert!(pieces.len() > 10);
        let touched = Before {
            text: &pieces,
            layout: &layout,
            touched: Some("B.test."),
        };
        let (next, _) = write(&second, Some(touched)).unwrap();
        let expected = toml::to_string_pretty(&second)
            .unwrap()
            .replacen("[\"1\"]", "[\"X\"]", 1);
        assert_eq!(next, expected);
        assert!(next.contains("[\"2\"]"), "{next}");

        // An edit of no domain copies every domain's part.
        let untouched = Before {
            touched: None,
            ..touched
        };
        let (copied, next_layout) = write(&first, Some(untouched)).unwrap();
        assert!(copied.contains("[\"X\"]"), "{copied}");
        assert_eq!(next_layout, layout);
    }
}
