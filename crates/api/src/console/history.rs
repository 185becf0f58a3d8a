//! Configuration history (docs/console.md): the versions kept (who, when,
//! what, their changes), the field-level diff between two of them, and
//! **Roll back to this version** (admins): first the dry run (the changes
//! from the configuration applied now), then **Apply the rollback**. Each
//! is the API's own handler ([`crate::history`]).

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Query, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, csrf_field};
use crate::{
    ApiState, RollbackRequest,
    config::Look,
    history::{DiffQuery, diff, list, rollback},
};
use gtm_model::when::utc;
use gtm_node::access::{Principal, Role};

/// The changes a version's row shows; the diff shows them all.
const CHANGES_SHOWN: usize = 8;

#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
}

/// What the page shows above the list.
enum Outcome {
    Diff {
        from: u64,
        to: u64,
        changes: Vec<String>,
    },
    /// A rollback's dry run: the changes from the applied configuration.
    Preview {
        version: u64,
        current: u64,
        changes: Vec<String>,
    },
    Applied {
        to: u64,
        version: u64,
        changes: Vec<String>,
    },
    Failed(String),
}

pub async fn page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Query(q): Query<PageQuery>,
) -> Response {
    let number = |what: &str, text: &Option<String>| -> Result<Option<u64>, String> {
        match text.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(t) => t
                .parse()
                .map(Some)
                .map_err(|_| format!("{what}: \"{t}\" is not a version number")),
        }
    };
    let outcome = match (number("from", &q.from), number("to", &q.to)) {
        (Err(why), _) | (_, Err(why)) => Some(Outcome::Failed(why)),
        (Ok(Some(from)), Ok(Some(to))) => Some(
            match diff(State(state.clone()), Query(DiffQuery { from, to })).await {
                Ok(Json(d)) => Outcome::Diff {
                    from: d.from,
                    to: d.to,
                    changes: d.changes,
                },
                Err(e) => Outcome::Failed(e.message),
            },
        ),
        (Ok(None), Ok(None)) => None,
        _ => Some(Outcome::Failed(
            "give both versions to compare (from and to)".into(),
        )),
    };
    render(&state, &who, outcome).await
}

/// A rollback: the dry run (`action=preview`), or made (`action=apply`).
pub async fn roll_back(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: Bytes,
) -> Response {
    let field = |name: &str| {
        form_urlencoded::parse(&form)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let apply = field("action") == "apply";
    let text = field("version");
    let outcome = match text.parse::<u64>() {
        Err(_) => Outcome::Failed(format!("version: \"{text}\" is not a version number")),
        Ok(version) => {
            let done = rollback(
                State(state.clone()),
                Extension(who.clone()),
                Query(Look {
                    dry_run: !apply,
                    force: false,
                }),
                Json(RollbackRequest { version }),
            )
            .await;
            match done {
                Ok(Json(r)) if apply => Outcome::Applied {
                    to: version,
                    version: r.version,
                    changes: r.changes,
                },
                Ok(Json(r)) => Outcome::Preview {
                    version,
                    current: r.version,
                    changes: r.changes,
                },
                Err(e) => Outcome::Failed(e.message),
            }
        }
    };
    render(&state, &who, Some(outcome)).await
}

fn changes_of(changes: &[String]) -> Markup {
    html! {
        @if changes.is_empty() { p { "no changes" } }
        @else { pre.changes tabindex="0" { @for c in changes { (c) "\n" } } }
    }
}

async fn render(state: &ApiState, who: &Principal, outcome: Option<Outcome>) -> Response {
    let Json(items) = list(State(state.clone())).await;
    let admin = who.allows(Role::Admin);
    let current = state.engine.version();
    let (from, to) = match &outcome {
        Some(Outcome::Diff { from, to, .. }) => (Some(*from), Some(*to)),
        _ => (
            items.get(1).map(|i| i.version),
            items.first().map(|i| i.version),
        ),
    };
    let kept: Vec<u64> = items
        .iter()
        .filter(|i| i.text_kept)
        .map(|i| i.version)
        .collect();
    let body = html! {
        h1 { "Configuration history" }
        p { "This device applies version " strong #current-version { (current) } ". Every change to the configuration is a new version, the same on every device." }
        @match &outcome {
            None => {},
            Some(Outcome::Failed(why)) => p.error role="alert" #history-error { (why) },
            Some(Outcome::Diff { from, to, changes }) => div.notice role="status" #history-diff {
                p { "From version " (from) " to version " (to) ":" }
                (changes_of(changes))
            },
            Some(Outcome::Preview { version, current, changes }) => {
                div.notice role="status" #rollback-preview {
                    p { "Dry run: rolling back to version " (version) " would make these changes to version " (current) " (nothing is applied yet):" }
                    (changes_of(changes))
                }
                form method="post" action="/ui/history/rollback" {
                    (csrf_field(who))
                    input type="hidden" name="version" value=(version);
                    div.actions {
                        button type="submit" name="action" value="apply" #rollback-apply { "Apply the rollback to version " (version) }
                        " "
                        a href="/ui/history" { "Cancel" }
                    }
                }
            },
            Some(Outcome::Applied { to, version, changes }) => div.notice role="status" #rollback-done {
                p { "Rolled back to version " (to) ": applied as version " (version) " (" (changes.len()) " change" @if changes.len() != 1 { "s" } ")." }
                (changes_of(changes))
            },
        }
        h2 { "Compare two versions" }
        form.filters method="get" action="/ui/history" {
            div.field {
                label for="h-from" { "From version" }
                select #h-from name="from" {
                    @for v in &kept { option value=(v) selected[from == Some(*v)] { (v) } }
                }
            }
            div.field {
                label for="h-to" { "To version" }
                select #h-to name="to" {
                    @for v in &kept { option value=(v) selected[to == Some(*v)] { (v) } }
                }
            }
            div.actions { button type="submit" #diff-button { "Show the changes" } }
        }
        h2 { "Versions kept" }
        div.scroll tabindex="0" role="region" aria-label="Versions" {
            table.history #history {
                caption { "The configuration versions kept, newest first (times in UTC)" }
                thead { tr {
                    th scope="col" { "Version" }
                    th scope="col" { "When" }
                    th scope="col" { "Who" }
                    th scope="col" { "What" }
                    th scope="col" { "Changes" }
                    @if admin { th scope="col" { "Roll back" } }
                } }
                tbody {
                    @for i in &items {
                        tr data-version=(i.version) {
                            th scope="row" { (i.version) }
                            td { (utc(i.time_ms)) }
                            td { (i.actor.to_string()) }
                            td { (i.what) }
                            td {
                                @for c in i.changes.iter().take(CHANGES_SHOWN) { span.change { (c) } br; }
                                @if i.change_count > CHANGES_SHOWN {
                                    span.note { "and " (i.change_count - CHANGES_SHOWN) " more" }
                                }
                            }
                            @if admin {
                                td {
                                    @if i.version == current {
                                        span.note { "applied now" }
                                    } @else if i.text_kept {
                                        form method="post" action="/ui/history/rollback" {
                                            (csrf_field(who))
                                            input type="hidden" name="version" value=(i.version);
                                            button type="submit" name="action" value="preview" data-rollback=(i.version) {
                                                "Roll back to version " (i.version)
                                            }
                                        }
                                    } @else {
                                        span.note { "its text is no longer kept" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page("History", state.engine.device(), Some(who), body).into_response()
}
