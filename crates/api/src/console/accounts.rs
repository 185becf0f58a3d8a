//! Users and tokens (docs/console.md, docs/access.md), for admins: every
//! account with its role and who last changed it; add a user or change its
//! role or password, remove it; create a token (shown once) or revoke one.
//! Each form calls the API's own handler, so the console changes accounts
//! exactly as `gtm user` and `gtm token` do (replicated commands).

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};

use super::layout::{self, csrf_field, segment};
use crate::{
    ApiState, TokenRequest, UserRequest,
    accounts::{create_token, delete_token, delete_user, put_user},
};
use gtm_node::access::{Principal, Role};

/// The roles a form offers, the least that reads first (its default).
const ROLES: [Role; 4] = [Role::Viewer, Role::Operator, Role::Admin, Role::Reporter];

/// What the last form did: a notice, an error, or a token to show once.
enum Outcome {
    Done(String),
    Failed(String),
    Token { name: String, token: String },
}

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    render(&state, &who, None).await
}

fn field(form: &[u8], name: &str) -> String {
    form_urlencoded::parse(form)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

fn role_of(text: &str) -> Result<Role, gtm_node::access::UnknownRole> {
    text.parse()
}

pub async fn user(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let (name, password) = (field(&form, "name"), field(&form, "password"));
    let outcome = match role_of(&field(&form, "role")) {
        Err(why) => Outcome::Failed(why.to_string()),
        Ok(role) => {
            let request = UserRequest {
                role,
                password: (!password.is_empty()).then_some(password),
            };
            match put_user(
                State(state.clone()),
                Extension(who.clone()),
                Path(name.clone()),
                Json(request),
            )
            .await
            {
                Ok(_) => Outcome::Done(format!("user {name} saved ({role})")),
                Err(e) => Outcome::Failed(e.message),
            }
        }
    };
    render(&state, &who, Some(outcome)).await
}

pub async fn remove_user(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Response {
    let outcome = match delete_user(
        State(state.clone()),
        Extension(who.clone()),
        Path(name.clone()),
    )
    .await
    {
        Ok(_) => Outcome::Done(format!("user {name} removed")),
        Err(e) => Outcome::Failed(e.message),
    };
    render(&state, &who, Some(outcome)).await
}

pub async fn token(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let name = field(&form, "name");
    let outcome = match role_of(&field(&form, "role")) {
        Err(why) => Outcome::Failed(why.to_string()),
        Ok(role) => match create_token(
            State(state.clone()),
            Extension(who.clone()),
            Json(TokenRequest {
                name: name.clone(),
                role,
            }),
        )
        .await
        {
            Ok(Json(made)) => Outcome::Token {
                name: made.name,
                token: made.token,
            },
            Err(e) => Outcome::Failed(e.message),
        },
    };
    render(&state, &who, Some(outcome)).await
}

pub async fn revoke(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Response {
    let outcome = match delete_token(
        State(state.clone()),
        Extension(who.clone()),
        Path(name.clone()),
    )
    .await
    {
        Ok(_) => Outcome::Done(format!("token {name} revoked")),
        Err(e) => Outcome::Failed(e.message),
    };
    render(&state, &who, Some(outcome)).await
}

fn role_select(id: &str) -> Markup {
    html! {
        select id=(id) name="role" {
            @for r in ROLES { option value=(r.as_str()) { (r.as_str()) } }
        }
    }
}

async fn render(state: &ApiState, who: &Principal, outcome: Option<Outcome>) -> Response {
    let accounts = state.accounts().await.list();
    let body = html! {
        h1 { "Users and tokens" }
        p { "Roles: " strong { "viewer" } " reads everything; " strong { "operator" }
            " also drains, sets manual checks, resumes failbacks and runs Test now; "
            strong { "admin" } " does everything. Accounts are the same on every device of the cluster." }
        @match &outcome {
            None => {},
            Some(Outcome::Done(text)) => p.notice role="status" #account-done { (text) },
            Some(Outcome::Failed(why)) => p.error role="alert" #account-error { (why) },
            Some(Outcome::Token { name, token }) => div.notice role="status" {
                p { "Token " strong { (name) } " created. Copy it now: it is shown this once and kept nowhere." }
                p { code #new-token { (token) } }
            },
        }
        div.scroll tabindex="0" role="region" aria-label="Accounts" {
            table.accounts {
                caption { "Users and tokens" }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Kind" } th scope="col" { "Role" }
                    th scope="col" { "Changed" } th scope="col" { "By" } th scope="col" { "" }
                } }
                tbody {
                    @for a in &accounts {
                        tr data-account=(a.name) {
                            th scope="row" { (a.name) }
                            td { (a.kind) }
                            td.role { (a.role) }
                            td { (gtm_model::when::utc(a.time_ms)) }
                            td { (a.by.to_string()) }
                            td {
                                @let action = if a.kind == "user" {
                                    format!("/ui/accounts/users/{}/remove", segment(&a.name))
                                } else {
                                    format!("/ui/accounts/tokens/{}/revoke", segment(&a.name))
                                };
                                form method="post" action=(action) {
                                    (csrf_field(who))
                                    button type="submit" data-remove=(a.name) {
                                        @if a.kind == "user" { "Remove" } @else { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Add a user, or change one" }
        form.filters method="post" action="/ui/accounts/users" {
            (csrf_field(who))
            div.field { label for="u-name" { "Name" } input #u-name name="name" type="text" required autocomplete="off"; }
            div.field { label for="u-role" { "Role" } (role_select("u-role")) }
            div.field {
                label for="u-password" { "Password (at least 10 characters; empty keeps a user's)" }
                input #u-password name="password" type="password" autocomplete="new-password";
            }
            div.actions { button type="submit" #save-user { "Save user" } }
        }
        h2 { "Create a token" }
        form.filters method="post" action="/ui/accounts/tokens" {
            (csrf_field(who))
            div.field { label for="t-name" { "Name" } input #t-name name="name" type="text" required autocomplete="off"; }
            div.field { label for="t-role" { "Role" } (role_select("t-role")) }
            div.actions { button type="submit" #create-token { "Create token" } }
        }
    };
    layout::page("Accounts", state.engine.device(), Some(who), body).into_response()
}
