//! Forms for the configuration objects (docs/console.md): domains, checks,
//! scenarios, datacenters and services, each listed, created, edited and
//! deleted from the browser.
//!
//! One form per kind, built from [`kinds`]: the keys are the
//! configuration's own, so an error of the configuration lands beside the
//! field it names. **Preview** sends the object to the API's own object
//! route as a dry run and shows the changes; **Apply** sends it for real,
//! guarded by the version the preview was made against. A delete shows
//! its dry run (what it changes, or why the configuration refuses it)
//! before it is confirmed. A check form runs **Test now** on the fields as
//! typed (one probe from this device, nothing saved); a scenario form shows
//! each term of its condition with its truth on every device as it is
//! typed ([`terms`]).

mod convert;
mod kinds;
mod terms;

use axum::{
    Extension, Json,
    body::Bytes,
    extract::{Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::fields::{
    Fields, Problems, errors_of, flag_options, select_field, summary, text_field, with_default,
};
use super::layout::{self, csrf_field, query_value, segment};
use crate::objects::{Collection, WriteOptions, delete, put};
use crate::{ApiState, ApplyResult, ProbeRequest, TestResult};
use gtm_model::config::{Check, Datacenter, Domain, Notifier, Region, Scenario, Service, View};
use gtm_model::error::ApiError;
use gtm_node::access::{Principal, Role};
use kinds::{Input, Kind};

pub use terms::fragment as terms;

/// Runs `$body` with `$t` the object type of `$kind`.
macro_rules! typed {
    ($kind:expr, $t:ident => $body:expr) => {
        match $kind.path {
            "datacenters" => {
                type $t = Datacenter;
                $body
            }
            "checks" => {
                type $t = Check;
                $body
            }
            "scenarios" => {
                type $t = Scenario;
                $body
            }
            "services" => {
                type $t = Service;
                $body
            }
            "regions" => {
                type $t = Region;
                $body
            }
            "views" => {
                type $t = View;
                $body
            }
            "notifiers" => {
                type $t = Notifier;
                $body
            }
            _ => {
                type $t = Domain;
                $body
            }
        }
    };
}

#[derive(Debug, Default, Deserialize)]
pub struct EditQuery {
    /// The object to edit; absent: a new one.
    #[serde(default)]
    pub name: Option<String>,
}

/// Every object of a kind as JSON, without the lists that have forms of
/// their own (a domain's records).
fn objects<T: Collection>(state: &ApiState, children: Option<&str>) -> Vec<Map<String, Value>> {
    state.engine.with_config(|c| {
        T::items(c)
            .iter()
            .filter_map(|x| match serde_json::to_value(&**x) {
                Ok(Value::Object(mut m)) => {
                    if let Some(key) = children {
                        m.remove(key);
                    }
                    Some(m)
                }
                _ => None,
            })
            .collect()
    })
}

fn all(state: &ApiState, kind: &Kind) -> Vec<Map<String, Value>> {
    typed!(kind, T => objects::<T>(state, kind.children))
}

fn name_of(object: &Map<String, Value>) -> &str {
    object.get("name").and_then(Value::as_str).unwrap_or("")
}

fn one(state: &ApiState, kind: &Kind, name: &str) -> Option<Map<String, Value>> {
    all(state, kind)
        .into_iter()
        .find(|o| gtm_model::config::same_name(name_of(o), name))
}

fn unknown_kind(state: &ApiState, who: &Principal, path: &str) -> Response {
    problem_page(
        state,
        who,
        StatusCode::NOT_FOUND,
        "Not found",
        &format!("there is no kind of object named \"{path}\""),
    )
}

fn problem_page(
    state: &ApiState,
    who: &Principal,
    status: StatusCode,
    title: &str,
    why: &str,
) -> Response {
    let body = html! { h1 { (title) } p.error role="alert" { (why) } };
    (
        status,
        layout::page(title, state.engine.device(), Some(who), body),
    )
        .into_response()
}

fn edit_link(kind: &Kind, name: &str) -> String {
    format!("/ui/objects/{}/edit?name={}", kind.path, query_value(name))
}

/// The objects of a kind, a row each, with their fields.
pub async fn list(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(path): Path<String>,
) -> Response {
    let Some(kind) = kinds::by_path(&path) else {
        return unknown_kind(&state, &who, &path);
    };
    let items = all(&state, kind);
    let admin = who.allows(Role::Admin);
    let shown: Vec<_> = kind
        .fields
        .iter()
        .filter(|f| f.key != "name")
        .take(5)
        .collect();
    let body = html! {
        h1 { (kind.title) }
        p.hint { (kind.about) }
        @if kind.path == "checks" || kind.path == "scenarios" {
            p { "Their state on every device: " a href="/ui/checks" { "Checks and scenarios" } "." }
        }
        @if admin {
            p { a #new-object href={ "/ui/objects/" (kind.path) "/edit" } { "New " (kind.noun) } }
        }
        @if items.is_empty() {
            p { "No " (kind.noun) " is configured." }
        } @else {
            div.scroll tabindex="0" role="region" aria-label=(kind.title) {
                table.objects {
                    caption { (items.len()) " " (kind.title.to_lowercase()) }
                    thead { tr {
                        th scope="col" { "Name" }
                        @for f in &shown { th scope="col" { (f.label) } }
                        @if admin { th scope="col" { "Actions" } }
                    } }
                    tbody {
                        @for o in &items {
                            @let fields = convert::fields_of(kind, o);
                            @let name = name_of(o);
                            tr data-object=(name) {
                                th scope="row" { (name) }
                                @for f in &shown {
                                    td { @if convert::applies(f, &fields) { (fields.get(f.key)) } }
                                }
                                @if admin {
                                    td {
                                        a href=(edit_link(kind, name)) { "Edit" span.visually-hidden { " " (name) } }
                                        " · "
                                        a href={ "/ui/objects/" (kind.path) "/" (segment(name)) "/delete" } { "Delete" span.visually-hidden { " " (name) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page(kind.title, state.engine.device(), Some(&who), body).into_response()
}

/// The form of an object as the configuration has it, or of a new one.
pub async fn edit(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(path): Path<String>,
    Query(q): Query<EditQuery>,
) -> Response {
    let Some(kind) = kinds::by_path(&path) else {
        return unknown_kind(&state, &who, &path);
    };
    let mut fields = Fields::default();
    if let Some(name) = q.name.filter(|n| !n.is_empty()) {
        let Some(object) = one(&state, kind, &name) else {
            return problem_page(
                &state,
                &who,
                StatusCode::NOT_FOUND,
                "Not found",
                &format!("no {} named \"{name}\"", kind.noun),
            );
        };
        fields = convert::fields_of(kind, &object);
        fields.set("orig", name_of(&object));
    } else if kind.path == "checks" {
        fields.set("type", "http");
    }
    render(&state, &who, kind, &fields, &Problems::default(), None)
}

/// What to show above the form after a submission.
enum Outcome {
    Preview(ApplyResult),
    Applied(ApplyResult),
    Tested(Result<TestResult, ApiError>),
}

/// Preview (a dry run), apply, or (a check) test the form.
pub async fn submit(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(path): Path<String>,
    form: Bytes,
) -> Response {
    let Some(kind) = kinds::by_path(&path) else {
        return unknown_kind(&state, &who, &path);
    };
    let mut f = Fields::parse(&form);
    let mut problems = Problems::default();
    let editing = !f.get("orig").is_empty();
    let name = if editing {
        f.get("orig").to_string()
    } else {
        f.get("name").to_string()
    };
    f.set("name", name.clone());
    let current = editing.then(|| one(&state, kind, &name)).flatten();
    if editing && current.is_none() {
        problems.add(
            None,
            format!("no {} named \"{name}\" (deleted meanwhile?)", kind.noun),
        );
    }
    let action = f.get("action").to_string();
    if name.is_empty() && action != "test" {
        problems.add(
            Some("name".into()),
            format!("name: give the {}'s name", kind.noun),
        );
    } else if !editing && one(&state, kind, &name).is_some() {
        problems.add(
            Some("name".into()),
            format!(
                "name: a {} named \"{name}\" exists already; edit it instead",
                kind.noun
            ),
        );
    }
    let body = convert::object_of(kind, &f, current.unwrap_or_default(), &mut problems);
    if !problems.is_empty() {
        return render(&state, &who, kind, &f, &problems, None);
    }
    if action == "test" && kind.path == "checks" {
        let outcome = test(&state, &f, body).await;
        return render(&state, &who, kind, &f, &problems, Some(outcome));
    }
    // "force": apply even if a device would answer a record with nothing,
    // offered when the preview says one would.
    let force = action == "force";
    let apply = action == "apply" || force;
    let options = WriteOptions {
        dry_run: !apply,
        version: if apply {
            f.get("version").parse().ok()
        } else {
            None
        },
        force,
    };
    let result = typed!(kind, T => put::<T>(
        State(state.clone()),
        Extension(who.clone()),
        Path(name.clone()),
        Query(options),
        Json(body),
    )
    .await);
    match result {
        Ok(Json(r)) if apply => {
            f.set("orig", name);
            render(&state, &who, kind, &f, &problems, Some(Outcome::Applied(r)))
        }
        Ok(Json(r)) => render(&state, &who, kind, &f, &problems, Some(Outcome::Preview(r))),
        Err(e) => {
            problems.add_api_error(e, |t| convert::field_of(kind, t));
            render(&state, &who, kind, &f, &problems, None)
        }
    }
}

/// Test now of the check as typed: one probe from this device.
async fn test(state: &ApiState, f: &Fields, mut check: Map<String, Value>) -> Outcome {
    if !f.get("name").is_empty() {
        check.insert("name".into(), f.get("name").into());
    }
    let address = match f.get("test_address") {
        "" => None,
        a => match a.parse() {
            Ok(ip) => Some(ip),
            Err(_) => {
                return Outcome::Tested(Err(ApiError::new(
                    gtm_model::error::ErrorKind::BadRequest,
                    format!("test_address: \"{a}\" is not an IP address"),
                )));
            }
        },
    };
    let request = ProbeRequest { check, address };
    Outcome::Tested(
        crate::test_unsaved(State(state.clone()), Json(request))
            .await
            .map(|Json(r)| r),
    )
}

fn options_of(state: &ApiState, input: Input) -> Vec<(String, String)> {
    match input {
        Input::Choice(words) => with_default(words, "the configuration's"),
        Input::Flag => flag_options("the configuration's"),
        _ => {
            let dcs: Vec<String> = state
                .engine
                .with_config(|c| c.datacenters.iter().map(|d| d.name.clone()).collect());
            std::iter::once((String::new(), "(none)".to_string()))
                .chain(dcs.into_iter().map(|d| (d.clone(), d)))
                .collect()
        }
    }
}

fn field_markup(
    state: &ApiState,
    kind: &Kind,
    f: &Fields,
    p: &Problems,
    field: &kinds::Field,
) -> Markup {
    let when = (!field.types.is_empty()).then(|| format!("f-type:{}", field.types.join(",")));
    let key = field.key;
    let editing = !f.get("orig").is_empty();
    let inner = match field.input {
        _ if key == "name" && editing => html! {
            div.field {
                label for="f-name" { (field.label) }
                input #f-name name="name" type="text" value=(f.get("name")) readonly;
                p.hint { "A name is not changed in place: delete and create." }
            }
        },
        _ if key == "type" && kind.path == "checks" => {
            let opts: Vec<(String, String)> = match field.input {
                Input::Choice(w) => w.iter().map(|t| (t.to_string(), t.to_string())).collect(),
                _ => Vec::new(),
            };
            select_field(f, p, key, field.label, &opts)
        }
        Input::Text | Input::Number | Input::List => text_field(f, p, key, field.label, field.hint),
        Input::Choice(_) | Input::Flag | Input::Datacenter => {
            select_field(f, p, key, field.label, &options_of(state, field.input))
        }
        Input::Lines | Input::Labels => html! {
            div.field .invalid[p.has(key)] {
                label for={ "f-" (key) } { (field.label) }
                textarea id={ "f-" (key) } name=(key) rows="3" placeholder=(field.hint) { (f.get(key)) }
                (errors_of(p, key))
            }
        },
        Input::Condition => html! {
            div.field .invalid[p.has(key)] {
                label for={ "f-" (key) } { (field.label) }
                textarea id={ "f-" (key) } name=(key) rows="2" placeholder=(field.hint)
                    data-terms={ "terms-" (key) } aria-describedby={ "terms-" (key) } { (f.get(key)) }
                (errors_of(p, key))
                (terms::terms_box(state, &format!("terms-{key}"), "/ui/condition-terms", f.get(key)))
            }
        },
    };
    html! {
        @match when {
            Some(w) => div data-when=(w) { (inner) },
            None => (inner),
        }
    }
}

fn render(
    state: &ApiState,
    who: &Principal,
    kind: &Kind,
    f: &Fields,
    p: &Problems,
    outcome: Option<Outcome>,
) -> Response {
    let editing = !f.get("orig").is_empty();
    let title = if editing {
        format!("Edit {} {}", kind.noun, f.get("orig"))
    } else {
        format!("New {}", kind.noun)
    };
    let previewed = matches!(outcome, Some(Outcome::Preview(_))) && p.is_empty();
    // The preview says some device would answer a record with nothing.
    let emptying = matches!(&outcome, Some(Outcome::Preview(r))
        if r.devices.as_ref().is_some_and(|j| !j.emptied_lines().is_empty()));
    let body = html! {
        h1 { (title) }
        p { a href={ "/ui/objects/" (kind.path) } { "All " (kind.title.to_lowercase()) } }
        (summary(p))
        @match &outcome {
            None => {},
            Some(Outcome::Preview(r)) => div.notice #diff role="status" {
                p { "The changes this would make to version " (r.version) ":" }
                @if r.changes.is_empty() { p { "no changes" } }
                pre.changes tabindex="0" { @for c in &r.changes { (c) "\n" } }
                @if let Some(j) = &r.devices {
                    (super::drains::judgement_box(j, "answers-preview", "answers-emptied"))
                }
            },
            Some(Outcome::Applied(r)) => div.notice #applied role="status" {
                p {
                    "Applied as version " (r.version) " (" (r.changes.len()) " change" @if r.changes.len() != 1 { "s" } ")"
                    @if !r.installed { "; this device has not installed it yet: its events say why" }
                    "."
                }
                pre.changes tabindex="0" { @for c in &r.changes { (c) "\n" } }
            },
            Some(Outcome::Tested(Ok(t))) => div.tested #tested role="status" .ok[t.ok] .down[!t.ok] {
                p {
                    strong { @if t.ok { "OK" } @else { "Error" } }
                    " — " (t.reason) " (" (format!("{:.0}", t.elapsed_ms)) " ms; "
                    span.whence { (t.whence()) }
                    "; nothing was saved)"
                }
            },
            Some(Outcome::Tested(Err(e))) => div.error #tested role="alert" { p { "Test now could not run: " (e) } },
        }
        form.object method="post" action={ "/ui/objects/" (kind.path) "/edit" } {
            (csrf_field(who))
            input type="hidden" name="orig" value=(f.get("orig"));
            @if let Some(Outcome::Preview(r)) = &outcome {
                input type="hidden" name="version" value=(r.version);
            }
            fieldset {
                legend { (kind.noun) }
                @for field in kind.fields {
                    (field_markup(state, kind, f, p, field))
                }
            }
            @if kind.path == "checks" && who.allows(Role::Operator) {
                fieldset data-when="f-type:http,https,http2,tcp,tls,dns,icmp,grpc,exec" {
                    legend { "Test now" }
                    (text_field(f, p, "test_address", "Address to probe (a check without a target)", "192.0.2.10"))
                    button type="submit" name="action" value="test" #test-now { "Test now" }
                }
            }
            div.actions {
                button type="submit" name="action" value="preview" #preview { "Preview changes" }
                @if previewed {
                    @if emptying {
                        button type="submit" name="action" value="force" #apply-force { "Apply anyway (force)" }
                    } @else {
                        button type="submit" name="action" value="apply" #apply { "Apply" }
                    }
                }
                a href={ "/ui/objects/" (kind.path) } { "Cancel" }
            }
        }
    };
    layout::page(&title, state.engine.device(), Some(who), body).into_response()
}

/// A delete, shown as its dry run first: what it changes, or why the
/// configuration refuses it.
pub async fn delete_page(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((path, name)): Path<(String, String)>,
) -> Response {
    deletion(state, who, path, name, false, None).await
}

pub async fn delete_submit(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((path, name)): Path<(String, String)>,
    form: Bytes,
) -> Response {
    let f = Fields::parse(&form);
    deletion(state, who, path, name, true, f.get("version").parse().ok()).await
}

async fn deletion(
    state: ApiState,
    who: Principal,
    path: String,
    name: String,
    apply: bool,
    version: Option<u64>,
) -> Response {
    let Some(kind) = kinds::by_path(&path) else {
        return unknown_kind(&state, &who, &path);
    };
    let options = WriteOptions {
        dry_run: !apply,
        version,
        force: false,
    };
    let result = typed!(kind, T => delete::<T>(
        State(state.clone()),
        Extension(who.clone()),
        Path(name.clone()),
        Query(options),
    )
    .await);
    let title = format!("Delete {} {name}", kind.noun);
    let back = html! { p { a href={ "/ui/objects/" (kind.path) } { "All " (kind.title.to_lowercase()) } } };
    let body = match result {
        Ok(Json(r)) if apply => html! {
            h1 { (title) }
            div.notice #applied role="status" {
                p { "Deleted as version " (r.version) "." }
                pre.changes tabindex="0" { @for c in &r.changes { (c) "\n" } }
            }
            (back)
        },
        Ok(Json(r)) => html! {
            h1 { (title) }
            div.notice #diff role="status" {
                p { "The changes this would make to version " (r.version) ":" }
                pre.changes tabindex="0" { @for c in &r.changes { (c) "\n" } }
            }
            form method="post" action={ "/ui/objects/" (kind.path) "/" (segment(&name)) "/delete" } {
                (csrf_field(&who))
                input type="hidden" name="version" value=(r.version);
                div.actions {
                    button type="submit" #confirm-delete { "Delete " (kind.noun) " " (name) }
                    a href={ "/ui/objects/" (kind.path) } { "Cancel" }
                }
            }
        },
        Err(e) => {
            let mut p = Problems::default();
            p.add_api_error(e, |_| None);
            html! {
                h1 { (title) }
                (summary(&p))
                (back)
            }
        }
    };
    layout::page(&title, state.engine.device(), Some(&who), body).into_response()
}
