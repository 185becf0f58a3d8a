//! How much an event of the GTM Logs asks of an operator.

use serde::{Deserialize, Serialize};

/// An event's severity, in rising order: `info` (a change that needs
/// nothing: a record back to OK, a configuration applied), `warning`
/// (service is reduced or at risk: DR is on, an address or a datacenter
/// is down, a check failed) and `error` (a record answers only its
/// fail-safe records or nothing healthy, a configuration cannot be
/// installed). An event kept before severities were recorded reads as
/// `info`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn is_info(&self) -> bool {
        *self == Self::Info
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A severity's name that is none of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("severity {0:?} is not one of info, warning, error")]
pub struct UnknownSeverity(pub String);

impl std::str::FromStr for Severity {
    type Err = UnknownSeverity;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "info" => Ok(Self::Info),
            "warning" => Ok(Self::Warning),
            "error" => Ok(Self::Error),
            other => Err(UnknownSeverity(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_rise_and_read_back_by_name() {
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Error);
        for s in [Severity::Info, Severity::Warning, Severity::Error] {
            assert_eq!(s.as_str().parse::<Severity>(), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(
            "notice".parse::<Severity>().unwrap_err().to_string(),
            "severity \"notice\" is not one of info, warning, error"
        );
    }
}
