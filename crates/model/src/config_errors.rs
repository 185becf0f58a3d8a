//! The errors of a configuration that does not validate, as each step
//! (parsing, listing every error of a text that does not parse, compiling)
//! gives them: the first [`ERRORS_LISTED`] and how many more there are.
//!
//! A text with an error on every line has as many errors as lines: 40 MB
//! of them is two million messages, gigabytes to hold and an answer no one
//! reads past its first screens. So a step keeps the first ones and counts
//! the rest, and the memory the errors take does not grow with the text.

use std::fmt;

/// The errors a step lists; the others are counted (docs/configuration.md,
/// "Errors").
pub const ERRORS_LISTED: usize = 1000;

/// One thing wrong with a configuration, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// The errors of a configuration that did not validate: the first ones
/// found (in the order of the file for those with a line), at most
/// [`ERRORS_LISTED`], and how many more were found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors {
    pub listed: Vec<ConfigError>,
    /// Errors found and not listed.
    pub more: usize,
}

impl ConfigErrors {
    /// Every error found, listed or not.
    pub fn total(&self) -> usize {
        self.listed.len().saturating_add(self.more)
    }

    /// One line per error listed, then, when there are more, one saying
    /// how many: what the API answers in `errors` and the CLI prints.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.listed.iter().map(ToString::to_string).collect();
        if self.more > 0 {
            lines.push(format!(
                "… and {} more errors ({} in all)",
                self.more,
                self.total()
            ));
        }
        lines
    }
}

/// The errors of `errors`, the first [`ERRORS_LISTED`] listed.
impl From<Vec<ConfigError>> for ConfigErrors {
    fn from(errors: Vec<ConfigError>) -> Self {
        let mut listing = Listing::default();
        for e in errors {
            listing.push(e);
        }
        listing.finish()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        Self {
            listed: vec![error],
            more: 0,
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.lines().join("\n"))
    }
}

/// Errors as a step finds them, in its order: the first [`ERRORS_LISTED`]
/// kept, the others counted.
#[derive(Debug, Default)]
pub struct Listing {
    listed: Vec<ConfigError>,
    more: usize,
}

impl Listing {
    pub fn push(&mut self, error: ConfigError) {
        if self.listed.len() < ERRORS_LISTED {
            self.listed.push(error);
        } else {
            self.more = self.more.saturating_add(1);
        }
    }

    /// Forgets the listed errors said before (the same path and message).
    pub fn dedup(&mut self) {
        let mut seen = std::collections::HashSet::new();
        self.listed
            .retain(|e| seen.insert((e.path.clone(), e.message.clone())));
    }

    /// The errors found so far, listed or not.
    pub fn len(&self) -> usize {
        self.listed.len().saturating_add(self.more)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the errors found after the first `len` (a step that starts
    /// a part again).
    pub fn truncate(&mut self, len: usize) {
        match len.checked_sub(self.listed.len()) {
            Some(more) => self.more = self.more.min(more),
            None => {
                self.listed.truncate(len);
                self.more = 0;
            }
        }
    }

    pub fn finish(self) -> ConfigErrors {
        ConfigErrors {
            listed: self.listed,
            more: self.more,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(n: usize) -> ConfigError {
        ConfigError {
            path: format!("check c{n}"),
            message: "is wrong".into(),
        }
    }

    #[test]
    fn the_first_errors_are_listed_and_the_rest_counted() {
        let mut listing = Listing::default();
        for n in 0..ERRORS_LISTED + 5 {
            listing.push(error(n));
        }
        assert_eq!(listing.len(), ERRORS_LISTED + 5);
        let errors = listing.finish();
        assert_eq!(errors.listed.len(), ERRORS_LISTED);
        assert_eq!(errors.listed[0], error(0));
        assert_eq!(errors.more, 5);
        assert_eq!(errors.total(), ERRORS_LISTED + 5);
        let lines = errors.lines();
        assert_eq!(lines.len(), ERRORS_LISTED + 1);
        assert_eq!(lines[0], "check c0: is wrong");
        assert_eq!(
            lines[ERRORS_LISTED],
            format!("… and 5 more errors ({} in all)", ERRORS_LISTED + 5)
        );
        // A short list says nothing more.
        let one = ConfigErrors::from(vec![error(1)]);
        assert_eq!(one.lines(), ["check c1: is wrong"]);
        assert_eq!(one.to_string(), "check c1: is wrong");
    }

    #[test]
    fn truncating_forgets_the_errors_after() {
        let mut listing = Listing::default();
        for n in 0..ERRORS_LISTED + 10 {
            listing.push(error(n));
        }
        listing.truncate(ERRORS_LISTED + 3);
        assert_eq!(listing.len(), ERRORS_LISTED + 3);
        listing.truncate(2);
        assert_eq!(listing.len(), 2);
        listing.push(error(7));
        let errors = listing.finish();
        assert_eq!(errors.listed, [error(0), error(1), error(7)]);
        assert_eq!(errors.more, 0);
    }
}
