//! The HTTP status codes a check expects.

/// A set of HTTP status codes: `200-399`, `200,204`, `200-299,304`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSet(pub Vec<(u16, u16)>);

impl StatusSet {
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|(lo, hi)| (*lo..=*hi).contains(&status))
    }
}

pub fn parse_status_set(text: &str) -> Result<StatusSet, String> {
    let mut ranges = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let code = |s: &str| -> Result<u16, String> {
            match s.trim().parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => Ok(c),
                _ => Err(format!(
                    "\"{s}\" in \"{text}\" is not an HTTP status (100-599)"
                )),
            }
        };
        let (lo, hi) = (code(lo)?, code(hi)?);
        if lo > hi {
            return Err(format!("range \"{part}\" runs backwards"));
        }
        ranges.push((lo, hi));
    }
    Ok(StatusSet(ranges))
}
