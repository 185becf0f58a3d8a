//! Logging in and out (docs/console.md). The login form takes a user name
//! and password, or an API token; the credentials are checked by the same
//! function as every login ([`auth::login`]), which also limits failed
//! attempts per address.

use axum::{
    Extension,
    extract::{Query, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use maud::html;
use serde::Deserialize;

use super::layout;
use crate::{ApiState, auth};
use gtm_node::access::{Principal, sessions};

/// A login form is small; anything larger is not one.
const FORM_LIMIT: usize = 64 << 10;

#[derive(Debug, Default, Deserialize)]
pub struct LoginQuery {
    #[serde(default)]
    next: Option<String>,
}

pub async fn form(State(state): State<ApiState>, Query(q): Query<LoginQuery>) -> Response {
    login_page(&state, "", q.next.as_deref(), None, StatusCode::OK)
}

pub async fn submit(State(state): State<ApiState>, request: Request) -> Response {
    let client = auth::client_of(request.extensions());
    let authority = request.uri().authority().map(|a| a.as_str().to_string());
    if !same_origin(request.headers(), authority.as_deref()) {
        let why =
            "this login form was posted from another site; open the login page of this device";
        return login_page(&state, "", None, Some(why), StatusCode::FORBIDDEN);
    }
    let bytes = match axum::body::to_bytes(request.into_body(), FORM_LIMIT).await {
        Ok(b) => b,
        Err(_) => {
            let why = "the login form is over 64 KiB";
            return login_page(&state, "", None, Some(why), StatusCode::PAYLOAD_TOO_LARGE);
        }
    };
    let (mut name, mut secret, mut next) = (String::new(), String::new(), None);
    for (key, value) in form_urlencoded::parse(&bytes) {
        match &*key {
            "name" => name = value.trim().to_string(),
            "secret" => secret = value.into_owned(),
            "next" => next = Some(value.into_owned()),
            _ => {}
        }
    }
    match auth::login(&state, &name, &secret, client).await {
        Ok((session, _)) => {
            let to = local_next(next.as_deref()).unwrap_or("/ui/");
            let mut response = StatusCode::SEE_OTHER.into_response();
            let h = response.headers_mut();
            if let Ok(v) = HeaderValue::from_str(to) {
                h.insert(header::LOCATION, v);
            }
            if let Ok(v) =
                HeaderValue::from_str(&sessions::set_cookie(&session.id, state.mutual_tls))
            {
                h.insert(header::SET_COOKIE, v);
            }
            response
        }
        Err(e) => login_page(
            &state,
            &name,
            next.as_deref(),
            Some(&e.message),
            crate::error::status(e.error),
        ),
    }
}

/// Ends the session and sends the browser to the login page.
pub async fn logout(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
) -> Response {
    if let Some(session) = &who.session {
        state.sessions.close(&session.id);
    }
    let mut response = StatusCode::SEE_OTHER.into_response();
    let h = response.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/ui/login"));
    if let Ok(v) = HeaderValue::from_str(&sessions::clear_cookie(state.mutual_tls)) {
        h.insert(header::SET_COOKIE, v);
    }
    response
}

fn login_page(
    state: &ApiState,
    name: &str,
    next: Option<&str>,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let next = local_next(next);
    let body = html! {
        section.login aria-labelledby="login-title" {
            h1 #login-title { "Log in" }
            @if let Some(error) = error {
                p.error #login-error role="alert" { (error) }
            }
            form method="post" action="/ui/login" {
                @if let Some(next) = next {
                    input type="hidden" name="next" value=(next);
                }
                div.field {
                    label for="name" { "User name" }
                    input #name type="text" name="name" value=(name) autocomplete="username" autocapitalize="none" spellcheck="false";
                    p.hint { "Leave empty when you log in with an API token." }
                }
                div.field {
                    label for="secret" { "Password or API token" }
                    input #secret type="password" name="secret" autocomplete="current-password" required;
                }
                button type="submit" #login { "Log in" }
            }
        }
    };
    let markup = layout::page("Log in", state.engine.device(), None, body);
    (status, markup).into_response()
}

/// `next` if it is a path of this console (never another site: `//host`
/// or `/\host` would leave it).
fn local_next(next: Option<&str>) -> Option<&str> {
    next.filter(|n| {
        (*n == "/ui" || n.starts_with("/ui/") || n.starts_with("/ui?"))
            && !n.contains(['\\', '\r', '\n'])
            && !n.contains("//")
    })
}

/// A browser names the page a form was posted from in `Origin`: a login
/// posted from another site's page is refused, so no site can log a
/// browser in under an account of its choosing. A request without
/// `Origin` (not a browser's form post) is let through. The device's own
/// name is the `Host` header (HTTP/1.1) or the URI's authority (HTTP/2).
fn same_origin(headers: &HeaderMap, authority: Option<&str>) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or(authority);
    origin
        .split_once("://")
        .is_some_and(|(_, o)| Some(o) == host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_console_paths_are_followed_after_login() {
        for ok in [
            "/ui",
            "/ui/",
            "/ui/records?status=dr",
            "/ui/records/www.example.test/A",
        ] {
            assert_eq!(local_next(Some(ok)), Some(ok));
        }
        for bad in [
            "https://evil.test/ui/",
            "//evil.test/ui",
            "/ui//evil",
            "/uix",
            "/ui/\\evil",
            "/api/v1/status",
            "",
        ] {
            assert_eq!(local_next(Some(bad)), None, "{bad}");
        }
        assert_eq!(local_next(None), None);
    }

    #[test]
    fn a_login_posted_from_another_site_is_refused() {
        let mut h = HeaderMap::new();
        assert!(same_origin(&h, None), "no Origin: not a cross-site form");
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://127.0.0.1:8053"),
        );
        assert!(
            same_origin(&h, Some("127.0.0.1:8053")),
            "HTTP/2: the authority"
        );
        assert!(!same_origin(&h, None));
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8053"));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8053"),
        );
        assert!(same_origin(&h, None));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.test"),
        );
        assert!(!same_origin(&h, None));
        h.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(!same_origin(&h, None));
    }
}
