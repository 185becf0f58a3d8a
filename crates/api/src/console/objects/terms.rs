//! A condition as it is typed: parsed by the configuration's own parser,
//! each check it names with its truth on every device of the cluster
//! (this device's own, and each peer's as its last report said), and what
//! the whole condition is on each device now.

use std::collections::{BTreeMap, BTreeSet};

use axum::{
    extract::{Query, State},
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;

use crate::ApiState;
use gtm_model::condition::{self, CheckRef};

/// Conditions longer than this are not parsed as they are typed (the
/// configuration's own limits apply on save).
const MAX_TEXT: usize = 4096;

#[derive(Debug, Default, Deserialize)]
pub struct TermsQuery {
    #[serde(default)]
    pub condition: String,
    /// The id the box has on its page.
    #[serde(default)]
    pub id: Option<String>,
}

/// The box alone, for the script that refreshes it as the text changes.
pub async fn fragment(State(state): State<ApiState>, Query(q): Query<TermsQuery>) -> Response {
    let id =
        q.id.filter(|i| i.len() <= 64 && i.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
            .unwrap_or_else(|| "terms-condition".to_string());
    let url = "/ui/condition-terms";
    terms_box(&state, &id, url, &q.condition).into_response()
}

/// Each device's truth of each check instance, by the instance's name.
fn truths(state: &ApiState) -> Vec<(String, bool, BTreeMap<String, Option<bool>>)> {
    let mut devices = vec![(
        state.engine.device().to_string(),
        true,
        state
            .engine
            .checks()
            .into_iter()
            .map(|c| (c.check, c.state.truth()))
            .collect(),
    )];
    devices.extend(
        state
            .peers
            .devices(&state.replication)
            .into_iter()
            .map(|p| {
                (
                    p.device,
                    p.reachable,
                    p.checks
                        .into_iter()
                        .map(|c| (c.check, c.state.truth()))
                        .collect(),
                )
            }),
    );
    devices
}

fn word(truth: Option<bool>) -> (&'static str, &'static str) {
    match truth {
        Some(true) => ("true", "st-ok"),
        Some(false) => ("false", "st-down"),
        None => ("unknown", "stale"),
    }
}

/// The box: what is wrong with the text, or its terms by device.
pub fn terms_box(state: &ApiState, id: &str, url: &str, text: &str) -> Markup {
    let text = text.trim();
    let parsed = (text.len() <= MAX_TEXT).then(|| condition::parse(text));
    let checks: BTreeSet<String> = state
        .engine
        .with_config(|c| c.checks.iter().map(|k| k.name.clone()).collect());
    html! {
        div.terms-box id=(id) data-terms-url=(url) aria-live="polite" {
            @match (text.is_empty(), parsed) {
                (true, _) => {},
                (false, None) => p.error { "The condition is longer than " (MAX_TEXT) " characters." },
                (false, Some(Err(e))) => p.error.condition-error { (e) },
                (false, Some(Ok(expr))) => {
                    @let devices = truths(state);
                    @let refs: BTreeSet<CheckRef> = expr.refs().into_iter().cloned().collect();
                    table.terms-table {
                        caption { "Each check the condition names, on every device now" }
                        thead { tr {
                            th scope="col" { "Check" }
                            @for (d, reachable, _) in &devices {
                                th scope="col" .stale[!reachable] { (d) }
                            }
                        } }
                        tbody {
                            @for r in &refs {
                                tr data-term=(r.to_string()) {
                                    th scope="row" {
                                        (r.to_string())
                                        @if !checks.contains(&r.name) {
                                            " " span.error { "(no check is named " (r.name) ")" }
                                        }
                                    }
                                    @for (_, _, m) in &devices {
                                        @let (w, class) = word(m.get(&r.to_string()).copied().flatten());
                                        td class={ "st " (class) } { (w) }
                                    }
                                }
                            }
                        }
                        tfoot { tr data-term="" {
                            th scope="row" { "The condition" }
                            @for (_, _, m) in &devices {
                                @let (w, class) = word(expr.eval(&|r: &CheckRef| m.get(&r.to_string()).copied().flatten()));
                                td class={ "st " (class) } { strong { (w) } }
                            }
                        } }
                    }
                },
            }
        }
    }
}
