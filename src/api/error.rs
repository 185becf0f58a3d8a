//! API errors: one [`ErrorKind`] per stable label, which fixes its HTTP
//! status; the CLI reads the same kinds back to choose its exit code.

use axum::{
    Json,
    extract::Request,
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

use crate::{engine::ApplyError, model::ConfigErrors};

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

    pub fn status(self) -> StatusCode {
        match self {
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::TooManyAttempts => StatusCode::TOO_MANY_REQUESTS,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict
            | Self::AlreadyClustered
            | Self::NotClustered
            | Self::NotManual
            | Self::NotProbed
            | Self::ConfirmationNeeded => StatusCode::CONFLICT,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::InvalidConfig | Self::InvalidGeoip => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unreachable => StatusCode::BAD_GATEWAY,
            Self::NoQuorum | Self::Cluster | Self::Storage => StatusCode::SERVICE_UNAVAILABLE,
            Self::OutcomeUnknown => StatusCode::GATEWAY_TIMEOUT,
            Self::StoreFailed | Self::Io | Self::Internal | Self::Unknown => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
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
    pub fn of_status(status: StatusCode) -> Self {
        match status {
            StatusCode::NOT_FOUND => Self::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => Self::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => Self::TooLarge,
            StatusCode::UNAUTHORIZED => Self::Unauthorized,
            StatusCode::FORBIDDEN => Self::Forbidden,
            StatusCode::TOO_MANY_REQUESTS => Self::TooManyAttempts,
            s if s.is_client_error() => Self::BadRequest,
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
                errors.0.len()
            ),
        );
        e.errors = errors.0.iter().map(ToString::to_string).collect();
        e
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, what)
    }

    pub fn internal(what: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Internal, what.to_string())
    }
}

impl From<ApplyError> for ApiError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Invalid(errors) => ApiError::invalid(errors),
            ApplyError::Store(e) => {
                ApiError::new(ErrorKind::StoreFailed, format!("{e}; nothing was applied"))
            }
            ApplyError::NoQuorum(_) => ApiError::new(ErrorKind::NoQuorum, e.to_string()),
            ApplyError::Unknown { .. } => ApiError::new(ErrorKind::OutcomeUnknown, e.to_string()),
            ApplyError::Rejected(e) => e,
            ApplyError::Cluster(message) => ApiError::new(ErrorKind::Cluster, message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.error.status(), Json(self)).into_response()
    }
}

/// Errors that axum itself answers (a body that does not parse, an unknown
/// route, a wrong method, a body over the limit) come as plain text: give
/// them the same JSON shape and stable labels as every other error.
pub(super) async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 64 << 10).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let hint = match status {
        StatusCode::NOT_FOUND => "no such route; the routes are in /api/v1/openapi.json",
        StatusCode::METHOD_NOT_ALLOWED => "this route does not take that method",
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is over the limit",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "send the body as Content-Type: application/json",
        s if s.is_client_error() => "the request does not parse",
        _ => "the device failed to answer",
    };
    let message = if text.is_empty() {
        hint.to_string()
    } else {
        format!("{text} ({hint})")
    };
    // The route extractors' "unprocessable" means a body of the wrong shape:
    // a bad request, like any other client error axum answers.
    ApiError::new(ErrorKind::of_status(status), message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_serialized_kinds_and_the_docs_list_them_all() {
        let docs = include_str!("../../docs/api.md");
        for kind in ErrorKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, kind.label(), "{kind:?}");
            let back: ErrorKind = serde_json::from_value(json).unwrap();
            assert_eq!(back, kind);
            assert!(
                docs.contains(&format!("`{}`", kind.label())),
                "docs/api.md's error table lacks {}",
                kind.label()
            );
        }
        let unknown: ErrorKind = serde_json::from_str("\"from-the-future\"").unwrap();
        assert_eq!(unknown, ErrorKind::Unknown);
    }
}
