//! API errors as HTTP responses: an [`ApiError`] (plain data, in the model)
//! answered with its kind's status and JSON body, and axum's own errors
//! given the same shape.

use axum::{
    extract::Request,
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use gtm_model::error::{ApiError, ErrorKind};

/// The HTTP status of an error kind.
pub fn status(kind: ErrorKind) -> StatusCode {
    StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Errors that axum itself answers (a body that does not parse, an unknown
/// route, a wrong method, a body over the limit) come as plain text: give
/// them the same JSON shape and stable labels as every other error.
pub(super) async fn json_errors(request: Request, next: Next) -> Response {
    // Kept for a query-string rejection, which names the parameter only.
    let query = request.uri().query().unwrap_or_default().to_string();
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
    if let Some(reason) = text.strip_prefix(QUERY_REJECTION) {
        return query_error(&query, reason).into_response();
    }
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
    ApiError::new(ErrorKind::of_status(status.as_u16()), message).into_response()
}

/// How axum's `Query` extractor starts the text of its rejection; the
/// rest is `PARAMETER: REASON` (the parameter's path, then serde's reason).
const QUERY_REJECTION: &str = "Failed to deserialize query string: ";

/// A query string that does not fit its route, as one of our errors: the
/// parameter, the value given and serde's reason, which says what the
/// parameter takes (for an enum, the code's list of its values: `GET
/// /api/v1/events?kind=wrong` lists every event kind).
fn query_error(query: &str, reason: &str) -> ApiError {
    let reason = reason.trim();
    let named = reason.split_once(": ").and_then(|(parameter, why)| {
        // The last one given is the one that counts.
        let (_, value) = form_urlencoded::parse(query.as_bytes())
            .filter(|(k, _)| k == parameter)
            .last()?;
        Some(format!("query parameter {parameter}={value:?}: {why}"))
    });
    // A parameter the route needs but the request lacks: serde names it.
    let message = named.unwrap_or_else(|| format!("query string {query:?}: {reason}"));
    ApiError::new(ErrorKind::BadRequest, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of docs/api.md's error table: each label of a row's first
    /// cell with the row's status.
    fn documented() -> Vec<(String, u16)> {
        let docs = include_str!("../../../docs/api.md");
        let table = docs
            .split("\n## Errors\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("docs/api.md has an Errors section");
        let mut rows = Vec::new();
        for line in table.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (labels, status) = (cells[1], cells[2]);
            let status: u16 = status
                .parse()
                .unwrap_or_else(|_| panic!("not a status in docs/api.md: {line}"));
            for label in labels.split(',') {
                rows.push((label.trim().trim_matches('`').to_string(), status));
            }
        }
        rows
    }

    #[test]
    fn labels_are_the_serialized_kinds_and_the_docs_list_them_all() {
        let rows = documented();
        for kind in ErrorKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, kind.label(), "{kind:?}");
            let back: ErrorKind = serde_json::from_value(json).unwrap();
            assert_eq!(back, kind);
            let documented: Vec<u16> = rows
                .iter()
                .filter(|(label, _)| label == kind.label())
                .map(|(_, status)| *status)
                .collect();
            assert_eq!(
                documented,
                [kind.status()],
                "docs/api.md's error table must list {} once, with status {}",
                kind.label(),
                kind.status()
            );
        }
        for (label, _) in &rows {
            assert!(
                ErrorKind::ALL.iter().any(|k| k.label() == label),
                "docs/api.md's error table lists {label}, which the code does not answer"
            );
        }
        let unknown: ErrorKind = serde_json::from_str("\"from-the-future\"").unwrap();
        assert_eq!(unknown, ErrorKind::Unknown);
    }

    /// What axum answers for `uri` when `T` is the route's query.
    fn rejected<T: serde::de::DeserializeOwned>(uri: &str) -> ApiError {
        let uri: axum::http::Uri = uri.parse().unwrap();
        let Err(rejection) = axum::extract::Query::<T>::try_from_uri(&uri) else {
            panic!("{uri} deserializes");
        };
        let text = rejection.body_text();
        let reason = text
            .strip_prefix(QUERY_REJECTION)
            .unwrap_or_else(|| panic!("axum's rejection text changed: {text}"));
        query_error(uri.query().unwrap_or_default(), reason)
    }

    #[test]
    fn query_errors_name_the_parameter_the_value_and_what_it_takes() {
        use crate::EventFilter;
        let e = rejected::<EventFilter>("/api/v1/events?follow=true&kind=wrong");
        assert_eq!(e.error, ErrorKind::BadRequest);
        assert!(
            e.message.starts_with(
                "query parameter kind=\"wrong\": unknown variant `wrong`, expected one of "
            ),
            "{}",
            e.message
        );
        for kind in [
            "record",
            "check",
            "scenario",
            "operator",
            "config",
            "datacenter",
            "geoip",
            "device",
        ] {
            assert!(
                e.message.contains(&format!("`{kind}`")),
                "{kind}: {}",
                e.message
            );
        }
        let e = rejected::<EventFilter>("/api/v1/events?follow=yes");
        assert!(
            e.message.starts_with("query parameter follow=\"yes\": "),
            "{}",
            e.message
        );
        let e = rejected::<EventFilter>("/api/v1/events?limit=x");
        assert!(
            e.message.starts_with("query parameter limit=\"x\": "),
            "{}",
            e.message
        );
        let e = rejected::<EventFilter>("/api/v1/events?kind=caf%C3%A9");
        assert!(
            e.message.starts_with("query parameter kind=\"café\": "),
            "{}",
            e.message
        );
        // A parameter the route needs and the request lacks.
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Needs {
            from: u64,
        }
        let e = rejected::<Needs>("/api/v1/config/diff?to=3");
        assert_eq!(e.error, ErrorKind::BadRequest);
        assert!(e.message.contains("missing field `from`"), "{}", e.message);
        assert!(
            !e.message.contains("Failed to deserialize"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_docs_table_is_read_whole() {
        // Guards the reader above: a table it could not find would pass
        // the checks vacuously.
        let rows = documented();
        assert!(rows.contains(&("unreachable".to_string(), 502)), "{rows:?}");
        assert!(rows.contains(&("io".to_string(), 500)), "{rows:?}");
        assert_eq!(rows.len(), ErrorKind::ALL.len(), "{rows:?}");
    }
}
