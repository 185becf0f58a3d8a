//! The GTM Logs: `GET /api/v1/events`, a page of the event log as JSON or
//! CSV or, with `follow`, a stream of NDJSON lines; the page reader is
//! shared with the console's logs page.

use axum::{
    Json,
    extract::{Query, State},
    http::header,
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::ApiState;

use gtm_engine::{Event, EventKind, Severity};
use gtm_model::error::ErrorKind;

/// Filters of the event log.
#[derive(Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventFilter {
    /// A record label, e.g. `www.example.test/A`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// record, check, scenario, operator, config, datacenter, geoip or
    /// device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<EventKind>,
    /// Only events of this severity or higher: info (all), warning or
    /// error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Only events newer than this long ago, e.g. `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Keep the response open and stream new events as NDJSON.
    #[serde(default)]
    pub follow: bool,
    /// Every device's events (from the peer reports), not only this one's.
    #[serde(default)]
    pub all: bool,
    /// Only the events of this device (with `all`, any device's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Only events older than this (ms since the epoch): the `time_ms` of
    /// the oldest event of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    /// At most this many events, the newest of those that match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `json` (the default) or `csv`: the page as a CSV file, a header
    /// line and an event a line, oldest first (not with `follow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<EventFormat>,
}

/// What a page of the event log is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EventFormat {
    Json,
    Csv,
}

/// Events in one page of `GET /events` (without `limit`, or above it).
const MAX_EVENTS: usize = 10_000;

/// One page of the GTM Logs as `filter` selects it (newest last), and the
/// filter as a predicate for what follows. Shared by `GET /events` and the
/// console's logs page.
pub async fn event_page(
    state: &ApiState,
    filter: &EventFilter,
) -> Result<
    (
        Vec<Event>,
        impl Fn(&Event) -> bool + Clone + Send + Sync + 'static,
    ),
    ApiError,
> {
    let since_ms = match &filter.since {
        Some(text) => {
            let age = text
                .parse::<gtm_model::duration::Interval>()
                .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("since: {e}")))?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            now.saturating_sub(age.0.as_millis() as u64)
        }
        None => 0,
    };
    let (before, limit) = (
        filter.before,
        filter.limit.unwrap_or(MAX_EVENTS).min(MAX_EVENTS),
    );
    let (record, kind, device) = (filter.record.clone(), filter.kind, filter.device.clone());
    let severity = filter.severity.unwrap_or_default();
    let matches = move |e: &Event| {
        e.time_ms >= since_ms
            && record.as_ref().is_none_or(|r| e.object == *r)
            && kind.is_none_or(|k| e.kind == k)
            && e.severity >= severity
            && device.as_ref().is_none_or(|d| e.device == *d)
    };
    // A page read from the time index: only what it returns (and what the
    // filters skip on the way), off the async workers.
    let (engine, page_filter) = (state.engine.clone(), matches.clone());
    let mut backlog = tokio::task::spawn_blocking(move || {
        engine.events_page(before, since_ms, limit, page_filter)
    })
    .await
    .map_err(|e| ApiError::new(ErrorKind::Internal, e.to_string()))?
    .map_err(|e| {
        ApiError::new(
            ErrorKind::Storage,
            format!("cannot read the event log: {e}"),
        )
    })?;
    if filter.all {
        backlog.extend(
            state
                .peers
                .events()
                .into_iter()
                .filter(|e| matches(e) && before.is_none_or(|b| e.time_ms < b)),
        );
        backlog.sort_by_key(|e| e.time_ms);
        backlog.drain(..backlog.len().saturating_sub(limit));
    }
    Ok((backlog, matches))
}

pub(super) async fn events(
    State(state): State<ApiState>,
    Query(filter): Query<EventFilter>,
) -> Result<Response, ApiError> {
    // Subscribe before reading the backlog so nothing falls in between.
    let live = state.engine.subscribe_events();
    if filter.follow && filter.format == Some(EventFormat::Csv) {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            "format=csv is a page of the log, not a stream: give follow or csv, not both",
        ));
    }
    let (backlog, matches) = event_page(&state, &filter).await?;
    if !filter.follow {
        return Ok(match filter.format {
            Some(EventFormat::Csv) => (
                [
                    (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
                    (
                        header::CONTENT_DISPOSITION,
                        "attachment; filename=\"gtm-logs.csv\"",
                    ),
                ],
                csv(&backlog),
            )
                .into_response(),
            None | Some(EventFormat::Json) => Json(backlog).into_response(),
        });
    }
    let last = backlog.last().map_or(0, |e| e.seq);
    let lines = backlog.into_iter().map(|e| ndjson(&e)).collect::<Vec<_>>();
    let head = futures_util::stream::iter(lines.into_iter().map(Ok::<_, std::convert::Infallible>));
    let tail = futures_util::stream::unfold(
        (live, matches, last),
        |(mut rx, matches, last)| async move {
            loop {
                match rx.recv().await {
                    Ok(e) if e.seq > last && matches(&e) => {
                        return Some((Ok(ndjson(&e)), (rx, matches, last)));
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    let body = axum::body::Body::from_stream(futures_util::StreamExt::chain(head, tail));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// The events as CSV (RFC 4180): a header line, then an event a line;
/// the time in UTC to the millisecond.
fn csv(events: &[Event]) -> String {
    let mut out = String::from("time,device,severity,kind,object,text\r\n");
    for e in events {
        let fields = [
            gtm_model::when::iso_ms(e.time_ms),
            e.device.clone(),
            e.severity.to_string(),
            e.kind.as_str().to_string(),
            e.object.clone(),
            e.text.clone(),
        ];
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_field(&mut out, field);
        }
        out.push_str("\r\n");
    }
    out
}

/// One CSV field: quoted, with its quotes doubled, when it holds a comma,
/// a quote or a line break. A field that a spreadsheet would read as a
/// formula (`=`, `+`, `-`, `@` first) is quoted after a `'`.
fn csv_field(out: &mut String, field: &str) {
    let formula = field.starts_with(['=', '+', '-', '@']);
    if formula || field.contains([',', '"', '\r', '\n']) {
        out.push('"');
        if formula {
            out.push('\'');
        }
        out.push_str(&field.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(field);
    }
}

fn ndjson(e: &Event) -> String {
    let mut line = serde_json::to_string(e).unwrap_or_default();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_field_is_quoted_only_when_it_must_be() {
        let field = |f: &str| {
            let mut out = String::new();
            csv_field(&mut out, f);
            out
        };
        assert_eq!(
            field("www.example.test/A: DR is on"),
            "www.example.test/A: DR is on"
        );
        assert_eq!(field("a, b"), "\"a, b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        // Read as text, not as a formula, by a spreadsheet.
        assert_eq!(field("=1+1"), "\"'=1+1\"");
        assert_eq!(field("-x"), "\"'-x\"");
    }
}
