//! Markdown to man-page roff, for the subset docs/*.md are written in:
//! headings (`##` a section, `###` a subsection), paragraphs, `-` and `1.`
//! lists (an indented paragraph or code block continues an item), fenced
//! code blocks, tables and the inline `code`, **bold** and *emphasis*;
//! an HTML comment (`<!-- ... -->`) is left out.
//! The section-5 pages are made from docs/configuration.md with it, so the
//! page and the document are one text (`manpages`).
//!
//! A table becomes a tagged list, as man pages write them: the first cell
//! of each row is the tag, then its `meaning` column, then each other
//! column as `Header: value`.

use std::fmt::Write as _;

/// The roff of `markdown`'s blocks (no `.TH`: the caller writes the page's
/// header). A first-level heading (`# Title`) is left out: the page's
/// name says it.
pub fn blocks(markdown: &str) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = markdown.lines().collect();
    // Whether an indented paragraph continues a list item.
    let mut in_list = false;
    let mut i = 0;
    while let Some(line) = lines.get(i) {
        let trimmed = line.trim_start();
        let indented = line.len() > trimmed.len();
        if trimmed.is_empty() {
            i += 1;
        } else if trimmed.starts_with("<!--") {
            // A comment for the document's editors, not its readers.
            while lines.get(i).is_some_and(|l| !l.contains("-->")) {
                i += 1;
            }
            i += 1;
        } else if let Some(fence) = trimmed.strip_prefix("```") {
            let _ = fence; // the language tag says nothing to a man page
            let indent = line.len() - trimmed.len();
            out.push_str(".RS 4\n.nf\n");
            i += 1;
            while let Some(code) = lines.get(i) {
                i += 1;
                if code.trim_start().starts_with("```") {
                    break;
                }
                let code = code.get(indent..).unwrap_or(code.trim_start());
                out.push_str(&line_start(&escape(code)));
                out.push('\n');
            }
            out.push_str(".fi\n.RE\n");
            if !indented {
                in_list = false;
            }
        } else if let Some(title) = trimmed.strip_prefix("### ") {
            let _ = writeln!(out, ".SS {}", quoted(&plain(title)));
            in_list = false;
            i += 1;
        } else if let Some(title) = trimmed.strip_prefix("## ") {
            let _ = writeln!(out, ".SH {}", quoted(&plain(title).to_uppercase()));
            in_list = false;
            i += 1;
        } else if trimmed.starts_with("# ") {
            i += 1;
        } else if trimmed.starts_with('|') {
            let start = i;
            while lines
                .get(i)
                .is_some_and(|l| l.trim_start().starts_with('|'))
            {
                i += 1;
            }
            table(&mut out, lines.get(start..i).unwrap_or_default());
            in_list = false;
        } else if let Some((mark, first)) = list_item(trimmed) {
            let mut text = vec![first];
            i += 1;
            while let Some(next) = lines.get(i) {
                let t = next.trim_start();
                if t.is_empty() || next.len() == t.len() || t.starts_with("```") {
                    break;
                }
                text.push(t);
                i += 1;
            }
            let width = if mark == "\\(bu" { 2 } else { 4 };
            let _ = writeln!(out, ".IP {mark} {width}");
            out.push_str(&line_start(&inline(&text.join(" "))));
            out.push('\n');
            in_list = true;
        } else {
            let mut text = vec![trimmed];
            i += 1;
            while let Some(next) = lines.get(i) {
                let t = next.trim_start();
                if t.is_empty()
                    || t.starts_with('#')
                    || t.starts_with('|')
                    || t.starts_with("```")
                    || list_item(t).is_some()
                {
                    break;
                }
                text.push(t);
                i += 1;
            }
            if indented && in_list {
                out.push_str(".IP \"\" 4\n");
            } else {
                out.push_str(".PP\n");
                in_list = false;
            }
            out.push_str(&line_start(&inline(&text.join(" "))));
            out.push('\n');
        }
    }
    out
}

/// `- text` or `12. text`: the item's mark and its first line.
fn list_item(line: &str) -> Option<(String, &str)> {
    if let Some(rest) = line.strip_prefix("- ") {
        return Some(("\\(bu".to_string(), rest));
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    let rest = line.get(digits..)?.strip_prefix(". ")?;
    (digits > 0).then(|| (format!("{}.", line.get(..digits).unwrap_or("")), rest))
}

/// A table as a tagged list (`.TP`): the first cell is the tag.
fn table(out: &mut String, rows: &[&str]) {
    let mut rows = rows.iter().map(|r| cells(r));
    let Some(header) = rows.next() else { return };
    for row in rows {
        // The `|---|---|` line under the header.
        if row
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| "-: ".contains(ch)))
        {
            continue;
        }
        let mut cells = row.iter();
        let Some(tag) = cells.next() else { continue };
        let _ = writeln!(out, ".TP\n{}", line_start(&inline(tag)));
        let mut body = Vec::new();
        let mut others = Vec::new();
        for (title, cell) in header.iter().skip(1).zip(cells) {
            if cell.is_empty() {
                continue;
            }
            if title.eq_ignore_ascii_case("meaning") || title.eq_ignore_ascii_case("what") {
                body.push(inline(cell));
            } else {
                others.push(format!("{}: {}", capitalised(title), inline(cell)));
            }
        }
        body.extend(others);
        out.push_str(
            &body
                .iter()
                .map(|l| line_start(l))
                .collect::<Vec<_>>()
                .join("\n.br\n"),
        );
        if !body.is_empty() {
            out.push('\n');
        }
    }
}

/// A table row's cells, trimmed; `\|` is a `|` inside a cell.
fn cells(row: &str) -> Vec<String> {
    let row = row.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = row.strip_suffix('|').unwrap_or(row);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = row.chars().peekable();
    let mut in_code = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cell.push('|');
            }
            '|' if !in_code => cells.push(std::mem::take(&mut cell)),
            _ => {
                in_code ^= c == '`';
                cell.push(c);
            }
        }
    }
    cells.push(cell);
    cells.iter().map(|c| c.trim().to_string()).collect()
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Inline Markdown to roff: `code` and **bold** in bold, *emphasis* in
/// italics, everything else escaped.
pub fn inline(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            let ticks = rest.chars().take_while(|&c| c == '`').count();
            let fence = "`".repeat(ticks);
            let after = rest.get(ticks..).unwrap_or("");
            if let Some(end) = closing_ticks(after, ticks) {
                let code = after.get(..end).unwrap_or("");
                let code = if code.len() > 1 && code.starts_with(' ') && code.ends_with(' ') {
                    code.get(1..code.len() - 1).unwrap_or(code)
                } else {
                    code
                };
                let _ = write!(out, "\\fB{}\\fR", escape(code));
                rest = after.get(end + ticks..).unwrap_or("");
            } else {
                out.push_str(&escape(&fence));
                rest = after;
            }
        } else if let Some(after) = rest.strip_prefix("**")
            && let Some(end) = after.find("**")
            && end > 0
        {
            let _ = write!(out, "\\fB{}\\fR", inline(after.get(..end).unwrap_or("")));
            rest = after.get(end + 2..).unwrap_or("");
        } else if let Some(after) = rest.strip_prefix('*')
            && let Some(end) = emphasis_end(after)
        {
            let _ = write!(out, "\\fI{}\\fR", escape(after.get(..end).unwrap_or("")));
            rest = after.get(end + 1..).unwrap_or("");
        } else {
            out.push_str(&escape(&c.to_string()));
            rest = rest.get(c.len_utf8()..).unwrap_or("");
        }
    }
    out
}

/// Where a code span opened by `ticks` backticks ends: the next run of
/// exactly that many.
fn closing_ticks(text: &str, ticks: usize) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text.get(from..)?.find('`') {
        let start = from + at;
        let run = text.get(start..)?.chars().take_while(|&c| c == '`').count();
        if run == ticks {
            return Some(start);
        }
        from = start + run;
    }
    None
}

/// `*word*`: the closing `*` of an emphasis that starts and ends on a
/// non-space within the line; a lone `*` is literal.
fn emphasis_end(after: &str) -> Option<usize> {
    if after.starts_with(char::is_whitespace) || after.starts_with('*') {
        return None;
    }
    let end = after.find('*')?;
    let inner = after.get(..end)?;
    (!inner.is_empty() && !inner.ends_with(char::is_whitespace) && !inner.contains('`'))
        .then_some(end)
}

/// Inline Markdown without its marks, escaped (for headings).
fn plain(text: &str) -> String {
    escape(&text.replace('`', "").replace("**", ""))
}

/// Text escaped for roff: a backslash is `\e`, a hyphen `\-` (a minus
/// sign that copies as `-`, as clap_mangen writes them).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            _ => out.push(c),
        }
    }
    out
}

/// A text line that starts with `.` or `'` would be a request: `\&` first.
fn line_start(line: &str) -> String {
    if line.starts_with('.') || line.starts_with('\'') {
        format!("\\&{line}")
    } else {
        line.to_string()
    }
}

/// A macro argument, quoted when it has a space (a `"` inside is `\(dq`).
pub fn quoted(arg: &str) -> String {
    if arg.contains([' ', '"']) {
        format!("\"{}\"", arg.replace('"', "\\(dq"))
    } else {
        arg.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{blocks, inline};

    #[test]
    fn inline_marks_become_fonts_and_text_is_escaped() {
        assert_eq!(inline("a `b-c` d"), "a \\fBb\\-c\\fR d");
        assert_eq!(
            inline("**Syntax** and *i*th"),
            "\\fBSyntax\\fR and \\fIi\\fRth"
        );
        assert_eq!(inline("``x `y` z``"), "\\fBx `y` z\\fR");
        assert_eq!(inline("a * b, `*.label`"), "a * b, \\fB*.label\\fR");
        assert_eq!(inline("C:\\dir"), "C:\\edir");
        assert_eq!(inline("an ` alone"), "an ` alone");
    }

    #[test]
    fn headings_paragraphs_and_lists() {
        let md = "# Title\n<!-- for editors\nonly -->\n\nIntro line one\nline two.\n\n## `[geoip]`\n### Errors\n\
                  - first item\n  goes on\n- second\n\n1. **One** x\n   ```\n   .dot -a\n   ```\n\n   \
                  more of one\n2. two\n\nafter\n";
        let roff = blocks(md);
        assert_eq!(
            roff,
            ".PP\nIntro line one line two.\n.SH [GEOIP]\n.SS Errors\n\
             .IP \\(bu 2\nfirst item goes on\n.IP \\(bu 2\nsecond\n\
             .IP 1. 4\n\\fBOne\\fR x\n.RS 4\n.nf\n\\&.dot \\-a\n.fi\n.RE\n\
             .IP \"\" 4\nmore of one\n.IP 2. 4\ntwo\n.PP\nafter\n"
        );
    }

    #[test]
    fn a_table_is_a_tagged_list_with_its_meaning_first() {
        let md = "| key | default | meaning |\n|---|---|---|\n| `name` | required | unique |\n\
                  | `a\\|b` | | either |\n";
        assert_eq!(
            blocks(md),
            ".TP\n\\fBname\\fR\nunique\n.br\nDefault: required\n.TP\n\\fBa|b\\fR\neither\n"
        );
    }

    /// docs/configuration.md converts whole: its node table is a tagged
    /// list, and no Markdown is left. (That groff reads every page without
    /// a warning is checked by scripts/package-test.sh, with `man
    /// --warnings` as lintian reads pages.)
    #[test]
    fn the_configuration_converts_whole() {
        let roff = blocks(include_str!("../../docs/configuration.md"));
        assert!(roff.contains(".SH \"NODE FILE\""), "{roff}");
        assert!(roff.contains(".TP\n\\fBdata_dir\\fR\n"), "{roff}");
        for line in roff.lines().filter(|l| !l.starts_with('.')) {
            assert!(!line.starts_with('|') && !line.contains("**"), "{line}");
            assert!(!line.contains("\\fB`"), "{line}");
        }
    }
}
