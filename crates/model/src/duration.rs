//! Durations as operators write them in configuration: `500ms`, `5s`, `2m`, `1h`.

use std::{fmt, str::FromStr, time::Duration};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration that parses from and prints as a short human form (`30s`).
///
/// Kept as its own type so the exported configuration prints back exactly the
/// unit an operator is used to reading, not a pair of integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interval(pub Duration);

/// Text that is not a duration as [`Interval`] reads one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number first.
    #[error("\"{0}\" is not a duration (write e.g. 500ms, 5s, 2m)")]
    NotADuration(String),
    /// A unit other than ms, s, m and h.
    #[error("\"{text}\": unknown unit \"{unit}\" (use ms, s, m or h)")]
    UnknownUnit { text: String, unit: String },
    /// More milliseconds than 64 bits hold.
    #[error("\"{0}\" is too long")]
    TooLong(String),
}

impl FromStr for Interval {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (digits, unit) = s.split_at(split);
        let value: u64 = digits
            .parse()
            .map_err(|_| DurationError::NotADuration(s.to_string()))?;
        let millis = match unit.trim() {
            "ms" => Some(value),
            "s" | "" => value.checked_mul(1_000),
            "m" => value.checked_mul(60_000),
            "h" => value.checked_mul(3_600_000),
            other => {
                return Err(DurationError::UnknownUnit {
                    text: s.to_string(),
                    unit: other.to_string(),
                });
            }
        };
        millis
            .map(|ms| Interval(Duration::from_millis(ms)))
            .ok_or_else(|| DurationError::TooLong(s.to_string()))
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 {
            write!(f, "0s")
        } else if ms.is_multiple_of(3_600_000) {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms.is_multiple_of(60_000) {
            write!(f, "{}m", ms / 60_000)
        } else if ms.is_multiple_of(1_000) {
            write!(f, "{}s", ms / 1_000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl schemars::JsonSchema for Interval {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Interval".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration: a number and a unit (ms, s, m, h), e.g. 500ms, 10s, 2m",
            "examples": ["10s", "500ms"]
        })
    }
}

impl Serialize for Interval {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_each_unit() {
        for (text, ms, printed) in [
            ("500ms", 500, "500ms"),
            ("5s", 5_000, "5s"),
            ("90s", 90_000, "90s"),
            ("2m", 120_000, "2m"),
            ("1h", 3_600_000, "1h"),
            ("30", 30_000, "30s"),
        ] {
            let parsed: Interval = text.parse().unwrap();
            assert_eq!(parsed.0, Duration::from_millis(ms), "{text}");
            assert_eq!(parsed.to_string(), printed, "{text}");
        }
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        assert!(
            "5 parsecs"
                .parse::<Interval>()
                .unwrap_err()
                .to_string()
                .contains("unknown unit")
        );
        assert!(
            "fast"
                .parse::<Interval>()
                .unwrap_err()
                .to_string()
                .contains("not a duration")
        );
    }
}
