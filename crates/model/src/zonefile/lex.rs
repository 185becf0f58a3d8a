//! An RFC 1035 §5.1 master file cut into its entries: comments dropped,
//! parentheses joining lines, quoted strings and escapes kept as written.

/// One entry: a directive or a record, with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub line: usize,
    /// The line starts with a blank: the owner is the previous entry's.
    pub blank_owner: bool,
    /// Its words as written (a quoted string with its quotes).
    pub words: Vec<String>,
}

/// The entries of `text`, or the line and reason of what does not read.
pub(super) fn entries(text: &str) -> Result<Vec<Entry>, (usize, String)> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut depth = 0usize;
    let (mut line, mut start, mut open_line) = (1usize, 1usize, 0usize);
    let mut blank_owner = false;
    let mut at_line_start = true;
    let mut chars = text.chars().peekable();
    let flush = |word: &mut String, words: &mut Vec<String>| {
        if !word.is_empty() {
            words.push(std::mem::take(word));
        }
    };
    while let Some(c) = chars.next() {
        if at_line_start && depth == 0 && words.is_empty() && word.is_empty() {
            start = line;
            blank_owner = c == ' ' || c == '\t';
        }
        at_line_start = false;
        match c {
            '"' => {
                word.push('"');
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => {
                            word.push('\\');
                            match chars.next() {
                                Some('\n') | None => {
                                    return Err((
                                        line,
                                        "a quoted string is not closed on its line".into(),
                                    ));
                                }
                                Some(e) => word.push(e),
                            }
                        }
                        Some('\n') | None => {
                            return Err((line, "a quoted string is not closed on its line".into()));
                        }
                        Some(other) => word.push(other),
                    }
                }
                word.push('"');
            }
            '\\' => {
                word.push('\\');
                match chars.next() {
                    Some('\n') | None => return Err((line, "a line ends with a lone \\".into())),
                    Some(e) => word.push(e),
                }
            }
            ';' => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            '(' => {
                flush(&mut word, &mut words);
                if depth == 0 {
                    open_line = line;
                }
                depth += 1;
                if depth > 1 {
                    return Err((line, "parentheses do not nest in a zone file".into()));
                }
            }
            ')' => {
                flush(&mut word, &mut words);
                if depth == 0 {
                    return Err((line, "\")\" closes no \"(\"".into()));
                }
                depth -= 1;
            }
            '\n' => {
                flush(&mut word, &mut words);
                line += 1;
                at_line_start = true;
                if depth == 0 && !words.is_empty() {
                    out.push(Entry {
                        line: start,
                        blank_owner,
                        words: std::mem::take(&mut words),
                    });
                }
            }
            ' ' | '\t' | '\r' => flush(&mut word, &mut words),
            other => word.push(other),
        }
    }
    flush(&mut word, &mut words);
    if depth > 0 {
        return Err((open_line, "\"(\" is never closed".into()));
    }
    if !words.is_empty() {
        out.push(Entry {
            line: start,
            blank_owner,
            words,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_parentheses_quotes_and_blank_owners() {
        let text = "$TTL 60 ; default\n@ IN SOA ns1 host (\n  1 ; serial\n  2 3 4 5 )\n\twww A 192.0.2.1\n  TXT \"a ; b\" \"c\\\"d\"\n";
        let e = entries(text).unwrap();
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].words, ["$TTL", "60"]);
        assert_eq!(e[1].line, 2);
        assert_eq!(
            e[1].words,
            ["@", "IN", "SOA", "ns1", "host", "1", "2", "3", "4", "5"]
        );
        assert!(e[2].blank_owner && e[2].line == 5);
        assert_eq!(e[3].words, ["TXT", "\"a ; b\"", "\"c\\\"d\""]);
    }

    #[test]
    fn what_does_not_read_names_its_line() {
        assert_eq!(entries("a A 1\nb TXT \"open\n").unwrap_err().0, 2);
        assert_eq!(
            entries("a A 1\n\nb SOA ( 1 2\n3").unwrap_err(),
            (3, "\"(\" is never closed".into())
        );
        assert_eq!(entries("a ) A").unwrap_err().0, 1);
    }
}
