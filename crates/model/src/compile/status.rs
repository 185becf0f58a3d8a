//! The HTTP status codes a check expects.

/// A set of HTTP status codes: `200-399`, `200,204`, `200-299,304`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSet(pub Vec<(u16, u16)>);

impl StatusSet {
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|(lo, hi)| (*lo..=*hi).contains(&status))
    }
}

/// Text that is not a set of HTTP status codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusSetError {
    /// `code` (as written in `text`) is not a number from 100 to 599.
    #[error("\"{code}\" in \"{text}\" is not an HTTP status (100-599)")]
    NotAStatus { code: String, text: String },
    /// A range whose first code is above its last.
    #[error("range \"{range}\" runs backwards")]
    Backwards { range: String },
}

pub fn parse_status_set(text: &str) -> Result<StatusSet, StatusSetError> {
    let mut ranges = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let code = |s: &str| -> Result<u16, StatusSetError> {
            match s.trim().parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => Ok(c),
                _ => Err(StatusSetError::NotAStatus {
                    code: s.to_string(),
                    text: text.to_string(),
                }),
            }
        };
        let (lo, hi) = (code(lo)?, code(hi)?);
        if lo > hi {
            return Err(StatusSetError::Backwards {
                range: part.to_string(),
            });
        }
        ranges.push((lo, hi));
    }
    Ok(StatusSet(ranges))
}
