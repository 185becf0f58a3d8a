//! The console's stylesheet, script and icon, embedded in the binary: nothing is
//! fetched from elsewhere, and `cargo build` stays the only build step.
//! Their paths carry the binary's version, so a browser may cache them
//! for a day and still loads the new ones after an upgrade.

use axum::{
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};

pub const CSS_PATH: &str = concat!("/ui/assets/console-", env!("CARGO_PKG_VERSION"), ".css");
pub const JS_PATH: &str = concat!("/ui/assets/console-", env!("CARGO_PKG_VERSION"), ".js");
pub const ICON_PATH: &str = concat!("/ui/assets/gtm-", env!("CARGO_PKG_VERSION"), ".svg");

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");
const ICON: &str = include_str!("assets/icon.svg");

pub async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

pub async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

/// The tab's icon.
pub async fn icon() -> Response {
    asset("image/svg+xml", ICON)
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=86400"),
    );
    response
}
