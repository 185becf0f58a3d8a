//! Authentication and roles for the API and the console (docs/access.md).
//!
//! A request's credential is a bearer token (the device's `api-token` file,
//! or a named token) or a console session cookie. The layer resolves it to
//! a [`Principal`], refuses a principal whose role is below what the route
//! needs (403 `forbidden`), and refuses a state-changing request of a
//! session that does not carry the session's CSRF token. Bearer tokens need
//! no CSRF token: a browser never sends them by itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{HeaderMap, Method, header},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};

use super::{API_TOKEN_NAME, ApiState};

use gtm_model::error::ErrorKind;

use gtm_model::error::ApiError;
use gtm_node::access::{Principal, Role, SessionRef, accounts::Accounts, password, sessions};

/// The header a session's script sends its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The header a console page's script sends with its live updates: they
/// do not renew the session's idle timeout.
pub const BACKGROUND_HEADER: &str = "x-gtm-background";
/// The form field a session's HTML forms send their CSRF token in.
pub const CSRF_FIELD: &str = "csrf";
/// Form bodies read whole to find the CSRF field.
const FORM_LIMIT: usize = 1 << 20;
/// A form with a file (`multipart/form-data`: the console's GeoIP import)
/// is read whole too, up to this: a country database is some MiB.
pub const UPLOAD_LIMIT: usize = 64 << 20;

/// The API's layer: the route needs at least `needed`.
pub async fn api(
    State((state, needed)): State<(ApiState, Role)>,
    request: Request,
    next: Next,
) -> Response {
    let principal = match resolve(&state, request.headers()).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    guarded(principal, needed, request, next).await
}

/// The console's layer: a page needs a live session (else the browser is
/// sent to the login page) and at least `needed`.
pub async fn console(
    State((state, needed)): State<(ApiState, Role)>,
    request: Request,
    next: Next,
) -> Response {
    let accounts = state.accounts().await;
    let Some(principal) = session_principal(&state, &accounts, request.headers()) else {
        let back = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let to = if request.method() == Method::GET && back.starts_with("/ui") {
            format!("/ui/login?next={}", urlencode(&back))
        } else {
            "/ui/login".to_string()
        };
        return Redirect::to(&to).into_response();
    };
    guarded(principal, needed, request, next).await
}

async fn guarded(principal: Principal, needed: Role, request: Request, next: Next) -> Response {
    let request = match csrf_checked(&principal, request).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    if !principal.allows(needed) {
        return ApiError::new(
            ErrorKind::Forbidden,
            format!(
                "{} has the role {}; this needs {needed}",
                principal.name, principal.role
            ),
        )
        .into_response();
    }
    let mut request = request;
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// Who a request's credential names: a bearer token first, else a session.
pub async fn resolve(state: &ApiState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // The device's own token (the CLI's) needs no look-up of the accounts.
    if let Some(p) = bearer.and_then(|t| device_principal(state, t)) {
        return Ok(p);
    }
    let accounts = state.accounts().await;
    if let Some(token) = bearer {
        return token_principal(state, &accounts, token)
            .ok_or_else(|| ApiError::new(ErrorKind::Unauthorized, "the bearer token is wrong"));
    }
    if sessions::cookie_of(headers).is_some() {
        return session_principal(state, &accounts, headers).ok_or_else(|| {
            ApiError::new(
                ErrorKind::Unauthorized,
                "the console session has ended: log in again",
            )
        });
    }
    Err(ApiError::new(
        ErrorKind::Unauthorized,
        "send Authorization: Bearer <token> (the token is in the data directory's api-token file, or made by `gtm token create`)",
    ))
}

/// The principal of the device's own token (the `api-token` file).
fn device_principal(state: &ApiState, token: &str) -> Option<Principal> {
    gtm_cluster::constant_time_eq(token.as_bytes(), state.token.as_bytes()).then(|| Principal {
        name: API_TOKEN_NAME.into(),
        role: Role::Admin,
        session: None,
    })
}

/// The principal of a bearer token: the device's own, or a named one.
fn token_principal(state: &ApiState, accounts: &Accounts, token: &str) -> Option<Principal> {
    device_principal(state, token).or_else(|| {
        let (name, role) = accounts.token(token)?;
        Some(Principal {
            name,
            role,
            session: None,
        })
    })
}

/// The principal of a request's live session cookie, if any: the account
/// must still exist, and acts with the lower of its current role and the
/// one it logged in with.
fn session_principal(
    state: &ApiState,
    accounts: &Accounts,
    headers: &HeaderMap,
) -> Option<Principal> {
    let id = sessions::cookie_of(headers)?;
    // A page's own live updates do not count as the user's activity.
    let background = headers
        .get(BACKGROUND_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1");
    let session = if background {
        state.sessions.peek(&id)?
    } else {
        state.sessions.get(&id)?
    };
    let role = if session.name == API_TOKEN_NAME {
        Role::Admin
    } else {
        match accounts.role_of(&session.name) {
            Some(r) => r.min(session.role),
            None => {
                state.sessions.close(&id);
                return None;
            }
        }
    };
    Some(Principal {
        name: session.name,
        role,
        session: Some(SessionRef {
            id,
            csrf: session.csrf,
        }),
    })
}

/// A session's state-changing request must carry its CSRF token, in the
/// header or (an HTML form) the `csrf` field. The form body is read to find
/// it and put back for the handler.
async fn csrf_checked(principal: &Principal, request: Request) -> Result<Request, ApiError> {
    let Some(session) = &principal.session else {
        return Ok(request);
    };
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return Ok(request);
    }
    let refused = || {
        ApiError::new(
            ErrorKind::Forbidden,
            "this request does not carry the session's CSRF token (X-CSRF-Token header or csrf form field); reload the page",
        )
    };
    let given = request
        .headers()
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok());
    if let Some(given) = given {
        return if gtm_cluster::constant_time_eq(given.as_bytes(), session.csrf.as_bytes()) {
            Ok(request)
        } else {
            Err(refused())
        };
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Some(boundary) = form_boundary(content_type) {
        let boundary = boundary.map_err(|e| ApiError::new(ErrorKind::BadRequest, e))?;
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, UPLOAD_LIMIT)
            .await
            .map_err(|_| {
                ApiError::new(
                    ErrorKind::TooLarge,
                    format!("the form is over {} MiB", UPLOAD_LIMIT >> 20),
                )
            })?;
        let field = form_field(bytes.clone(), &boundary, CSRF_FIELD)
            .await
            .map_err(|e| {
                ApiError::new(
                    ErrorKind::BadRequest,
                    format!("reading the form for its {CSRF_FIELD} field: {e}"),
                )
            })?;
        return match field {
            Some(f) if gtm_cluster::constant_time_eq(&f, session.csrf.as_bytes()) => {
                Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
            }
            _ => Err(refused()),
        };
    }
    if !content_type.starts_with("application/x-www-form-urlencoded") {
        return Err(refused());
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, FORM_LIMIT)
        .await
        .map_err(|_| ApiError::new(ErrorKind::TooLarge, "the form is over 1 MiB"))?;
    let field = form_urlencoded::parse(&bytes)
        .find(|(k, _)| k == CSRF_FIELD)
        .map(|(_, v)| v.into_owned());
    match field {
        Some(f) if gtm_cluster::constant_time_eq(f.as_bytes(), session.csrf.as_bytes()) => {
            Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
        }
        _ => Err(refused()),
    }
}

/// The boundary of a `multipart/form-data` Content-Type (RFC 7578: a
/// browser's form with a file), read by multer; `None` for any other type.
pub(crate) fn form_boundary(content_type: &str) -> Option<Result<String, String>> {
    let kind = content_type.split(';').next().unwrap_or_default().trim();
    if !kind.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    Some(match multer::parse_boundary(content_type) {
        Ok(b) if !b.is_empty() => Ok(b),
        Ok(_) | Err(multer::Error::NoBoundary) => {
            Err("the Content-Type multipart/form-data names no boundary".to_string())
        }
        Err(e) => Err(format!(
            "the Content-Type multipart/form-data: {}",
            multipart_error(&e)
        )),
    })
}

/// A multer error in words a form's sender can act on: its cause too (the
/// header that did not parse), and a hint where the form ends too soon.
fn multipart_error(e: &multer::Error) -> String {
    let cause = std::error::Error::source(e)
        .map(|c| format!(": {c}"))
        .unwrap_or_default();
    let hint = match e {
        multer::Error::IncompleteFieldData { .. }
        | multer::Error::IncompleteHeaders
        | multer::Error::IncompleteStream => " (the upload was cut short?)",
        _ => "",
    };
    format!("{e}{cause}{hint}")
}

/// The first field named `name` of a `multipart/form-data` body, parsed by
/// multer. The whole form is read (it is in memory already, bounded by
/// [`UPLOAD_LIMIT`]), so a malformed one is refused even past that field,
/// as is a part without a field name; the error names the part.
pub(crate) async fn form_field(
    body: axum::body::Bytes,
    boundary: &str,
    name: &str,
) -> Result<Option<axum::body::Bytes>, String> {
    let body = futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(body) });
    let mut form = multer::Multipart::new(body, boundary);
    let mut found = None;
    for n in 1_u64.. {
        let broken = |e: multer::Error| format!("part {n} of the form: {}", multipart_error(&e));
        let Some(mut field) = form.next_field().await.map_err(broken)? else {
            break;
        };
        if field.name().is_none() {
            return Err(format!(
                "part {n} of the form has no field name (Content-Disposition: form-data; name=...)"
            ));
        }
        // Each part is read to its end here, so that one cut short is named.
        let wanted = found.is_none() && field.name() == Some(name);
        let mut chunks = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(broken)? {
            if wanted {
                chunks.push(chunk);
            }
        }
        if wanted {
            // The body is one chunk, so a part is too: a slice of multer's
            // buffer, no copy of a 64 MiB file.
            found = Some(match chunks.len() {
                1 => chunks.swap_remove(0),
                _ => axum::body::Bytes::from(chunks.concat()),
            });
        }
    }
    Ok(found)
}

/// Checks a login's credentials and opens a session: `secret` is the
/// user's password, or an API token (then `name` may be empty). Failed
/// logins count against the client's address (docs/access.md).
pub async fn login(
    state: &ApiState,
    name: &str,
    secret: &str,
    client: IpAddr,
) -> Result<(SessionRef, Principal), ApiError> {
    if let Err(wait) = state.sessions.check_address(client) {
        return Err(ApiError::new(
            ErrorKind::TooManyAttempts,
            format!(
                "too many failed logins from {client}: try again in {} s",
                wait.retry_after.as_secs().max(1)
            ),
        ));
    }
    let accounts = state.accounts().await;
    let by_token =
        token_principal(state, &accounts, secret).filter(|p| name.is_empty() || name == p.name);
    let found = match (by_token, accounts.users.get(name)) {
        (Some(p), _) => Some(p),
        (None, Some(user)) => {
            let (secret, stored) = (secret.to_string(), user.password.clone());
            let matches = tokio::task::spawn_blocking(move || password::verify(&secret, &stored))
                .await
                .unwrap_or(false);
            matches.then(|| Principal {
                name: name.to_string(),
                role: user.role,
                session: None,
            })
        }
        // No such user: the same work as a wrong password, so the time
        // taken does not tell which names exist.
        (None, None) => {
            let secret = secret.to_string();
            let _ = tokio::task::spawn_blocking(move || password::verify_nothing(&secret)).await;
            None
        }
    };
    let Some(principal) = found else {
        state.sessions.record_failure(client);
        return Err(ApiError::new(
            ErrorKind::Unauthorized,
            "wrong user name or password",
        ));
    };
    state.sessions.record_success(client);
    let session = state
        .sessions
        .open(&principal.name, principal.role)
        .map_err(ApiError::internal)?;
    Ok((
        session.clone(),
        Principal {
            session: Some(session),
            ..principal
        },
    ))
}

/// The client's address: the connection's peer (both listeners record it).
pub fn client_of(request_extensions: &axum::http::Extensions) -> IpAddr {
    request_extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;

    const FORM: &[u8] = b"--XyZ\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\ntok\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.mmdb\"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\x01\r\n--X\xff\r\n--XyZ--\r\n";

    async fn field(body: &'static [u8], name: &str) -> Result<Option<Bytes>, String> {
        form_field(Bytes::from_static(body), "XyZ", name).await
    }

    #[tokio::test]
    async fn a_form_with_a_file_gives_its_fields() {
        let b = form_boundary("multipart/form-data; boundary=XyZ");
        assert_eq!(b, Some(Ok("XyZ".to_string())));
        let quoted = form_boundary("Multipart/Form-Data; boundary=\"XyZ\"");
        assert_eq!(quoted, Some(Ok("XyZ".to_string())));
        assert_eq!(field(FORM, "csrf").await, Ok(Some(Bytes::from("tok"))));
        // A file's bytes may hold CRLF and a boundary's start.
        let file = field(FORM, "file").await;
        assert_eq!(file, Ok(Some(Bytes::from_static(b"\x00\x01\r\n--X\xff"))));
        assert_eq!(field(FORM, "other").await, Ok(None));
    }

    #[tokio::test]
    async fn other_types_and_broken_forms_are_told_apart() {
        assert_eq!(form_boundary("application/x-www-form-urlencoded"), None);
        assert_eq!(form_boundary(""), None);
        for no_boundary in [
            "multipart/form-data",
            "multipart/form-data; boundary=\"\"",
            "multipart/form-data; boundary=",
        ] {
            let got = form_boundary(no_boundary);
            assert!(matches!(got, Some(Err(_))), "{no_boundary}: {got:?}");
        }
        let bad = form_boundary("multipart/form-data; boundary=a b");
        assert!(
            matches!(&bad, Some(Err(e)) if e.starts_with("the Content-Type multipart/form-data: failed to decode Content-Type: ")),
            "{bad:?}"
        );
        let refused = |got: Result<Option<Bytes>, String>, says: &str| match got {
            Err(e) => assert!(e.contains(says), "{e:?} does not say {says:?}"),
            Ok(f) => panic!("taken: {f:?}"),
        };
        refused(field(b"nothing", "csrf").await, "part 1");
        // Cut short in the file, after the field sought.
        let cut: &'static [u8] = &FORM[..FORM.len() - 12];
        refused(field(cut, "csrf").await, "part 2 of the form");
        refused(field(cut, "file").await, "cut short");
        refused(
            field(b"--XyZ\r\nBad Header\r\n\r\nx\r\n--XyZ--", "csrf").await,
            "part 1 of the form: failed to read headers: ",
        );
        refused(
            field(
                b"--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--",
                "csrf",
            )
            .await,
            "part 1 of the form has no field name",
        );
        refused(field(b"--XyZ\r\nno end", "csrf").await, "part 1");
        refused(field(b"", "csrf").await, "part 1");
    }
}
