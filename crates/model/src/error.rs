//! What went wrong, as plain data: one [`ErrorKind`] per stable label
//! (which fixes its HTTP status and the CLI's exit code), and the
//! [`ApiError`] the API answers and the state machine keeps as a rejected
//! command's outcome. The HTTP response is made in the API.

use serde::{Deserialize, Serialize};

use super::ConfigErrors;

/// What went wrong, as a stable label (the `error` field of every error
/// body); each kind has one HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    AlreadyClustered,
    NotClustered,
    NotManual,
    NotProbed,
    TooLarge,
    InvalidConfig,
    InvalidGeoip,
    Unreachable,
    NoQuorum,
    OutcomeUnknown,
    Cluster,
    Storage,
    StoreFailed,
    Io,
    Internal,
    TooManyAttempts,
    /// A change that would take away much more than it seems to (e.g. a
    /// configuration with no domain) needs its explicit flag.
    ConfirmationNeeded,
    /// A label this version does not know (from a newer device).
    #[serde(other)]
    Unknown,
}

impl ErrorKind {
    /// Every kind a device answers (not [`ErrorKind::Unknown`]).
    pub const ALL: [ErrorKind; 23] = [
        Self::BadRequest,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::Conflict,
        Self::AlreadyClustered,
        Self::NotClustered,
        Self::NotManual,
        Self::NotProbed,
        Self::TooLarge,
        Self::InvalidConfig,
        Self::InvalidGeoip,
        Self::Unreachable,
        Self::NoQuorum,
        Self::OutcomeUnknown,
        Self::Cluster,
        Self::Storage,
        Self::StoreFailed,
        Self::Io,
        Self::Internal,
        Self::TooManyAttempts,
        Self::ConfirmationNeeded,
    ];

    /// The HTTP status of this kind.
    pub fn status(self) -> u16 {
        match self {
            Self::BadRequest => 400,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::TooManyAttempts => 429,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::Conflict
            | Self::AlreadyClustered
            | Self::NotClustered
            | Self::NotManual
            | Self::NotProbed
            | Self::ConfirmationNeeded => 409,
            Self::TooLarge => 413,
            Self::InvalidConfig | Self::InvalidGeoip => 422,
            Self::Unreachable => 502,
            Self::NoQuorum | Self::Cluster | Self::Storage => 503,
            Self::OutcomeUnknown => 504,
            Self::StoreFailed | Self::Io | Self::Internal | Self::Unknown => 500,
        }
    }

    /// The stable label, as it appears in error bodies.
    pub fn label(self) -> &'static str {
        match self {
            Self::BadRequest => "bad-request",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::TooManyAttempts => "too-many-attempts",
            Self::ConfirmationNeeded => "confirmation-needed",
            Self::NotFound => "not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::Conflict => "conflict",
            Self::AlreadyClustered => "already-clustered",
            Self::NotClustered => "not-clustered",
            Self::NotManual => "not-manual",
            Self::NotProbed => "not-probed",
            Self::TooLarge => "too-large",
            Self::InvalidConfig => "invalid-config",
            Self::InvalidGeoip => "invalid-geoip",
            Self::Unreachable => "unreachable",
            Self::NoQuorum => "no-quorum",
            Self::OutcomeUnknown => "outcome-unknown",
            Self::Cluster => "cluster",
            Self::Storage => "storage",
            Self::StoreFailed => "store-failed",
            Self::Io => "io",
            Self::Internal => "internal",
            Self::Unknown => "unknown",
        }
    }

    /// The kind of an error status that axum answered by itself.
    pub fn of_status(status: u16) -> Self {
        match status {
            404 => Self::NotFound,
            405 => Self::MethodNotAllowed,
            413 => Self::TooLarge,
            401 => Self::Unauthorized,
            403 => Self::Forbidden,
            429 => Self::TooManyAttempts,
            400..=499 => Self::BadRequest,
            _ => Self::Internal,
        }
    }
}

/// An API error: its kind (status and stable label), and what to fix.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApiError {
    pub error: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// The message, then each listed error after "; ".
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        for e in &self.errors {
            write!(f, "; {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            error: kind,
            message: message.into(),
            errors: Vec::new(),
        }
    }

    pub fn invalid(errors: ConfigErrors) -> Self {
        let mut e = Self::new(
            ErrorKind::InvalidConfig,
            format!(
                "the configuration has {} error(s); nothing was applied",
                errors.total()
            ),
        );
        e.errors = errors.lines();
        e
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, what)
    }

    pub fn internal(what: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Internal, what.to_string())
    }
}

/// The API answers an error with its kind's status and the error as its
/// JSON body. With the `axum` feature (gtm-api turns it on): the orphan
/// rule puts the impl beside the type, and the model stays free of HTTP
/// otherwise.
#[cfg(feature = "axum")]
impl axum_core::response::IntoResponse for ApiError {
    fn into_response(self) -> axum_core::response::Response {
        let status = http::StatusCode::from_u16(self.error.status())
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let json = http::HeaderValue::from_static("application/json");
        (status, [(http::header::CONTENT_TYPE, json)], body).into_response()
    }
}
