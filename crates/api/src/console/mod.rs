//! The web console (docs/console.md): server-rendered pages under `/ui/`,
//! served by every device on its API listener and working against that
//! device's state, so an operator can point a browser at any device of a
//! cluster.
//!
//! Every page but the login page and the assets needs a console session
//! with at least the role the page names ([`auth::console`]); every
//! response carries a strict Content-Security-Policy ([`headers`]). The
//! pages reuse the API's handlers (preview, resume) rather than their own
//! copies, so the console shows and does exactly what the API does.

mod accounts;
mod alerts;
mod assets;
mod checks;
mod cluster;
mod dashboard;
mod drains;
mod explain;
mod fields;
mod form;
mod geoip;
mod headers;
mod history;
mod layout;
mod login;
mod logs;
mod objects;
mod preview;
mod records;
mod schedules;
mod stream;
mod topology;

use axum::{
    Router,
    extract::DefaultBodyLimit,
    middleware,
    response::Redirect,
    routing::{get, post},
};

use crate::{ApiState, auth};
use gtm_node::access::Role;

/// The console's routes, each guarded by the least role it needs.
pub fn router(state: ApiState) -> Router {
    let guard = |role: Role| middleware::from_fn_with_state((state.clone(), role), auth::console);
    let viewer = Router::new()
        .route("/ui/", get(dashboard::page))
        .route("/ui/records", get(records::page))
        .route("/ui/records/table", get(records::table))
        .route("/ui/stream", get(stream::stream))
        .route("/ui/records/{name}/{rtype}", get(preview::page))
        .route("/ui/records/{name}/{rtype}/explain", get(explain::page))
        .route("/ui/logs", get(logs::page))
        .route("/ui/logs/table", get(logs::table))
        .route("/ui/cluster", get(cluster::page))
        .route("/ui/checks", get(checks::page))
        .route("/ui/geoip", get(geoip::page))
        .route("/ui/drains", get(drains::page))
        .route("/ui/alerts", get(alerts::page))
        .route("/ui/schedules", get(schedules::page))
        .route("/ui/history", get(history::page))
        .route("/ui/topology", get(topology::page))
        .route("/ui/topology/map", get(topology::fragment))
        .route("/ui/objects/{kind}", get(objects::list))
        .route("/ui/condition-terms", get(objects::terms))
        .route("/ui/logout", post(login::logout))
        .route_layer(guard(Role::Viewer));
    let admin = Router::new()
        .route("/ui/cluster/token", post(cluster::token))
        .route("/ui/cluster/init", post(cluster::init))
        .route("/ui/cluster/join", post(cluster::join))
        .route("/ui/cluster/leave", post(cluster::leave))
        .route("/ui/records/edit", get(form::page).post(form::submit))
        .route(
            "/ui/objects/{kind}/edit",
            get(objects::edit).post(objects::submit),
        )
        .route(
            "/ui/objects/{kind}/{name}/delete",
            get(objects::delete_page).post(objects::delete_submit),
        )
        .route("/ui/accounts", get(accounts::page))
        .route("/ui/accounts/users", post(accounts::user))
        .route(
            "/ui/accounts/users/{name}/remove",
            post(accounts::remove_user),
        )
        .route("/ui/accounts/tokens", post(accounts::token))
        .route("/ui/accounts/tokens/{name}/revoke", post(accounts::revoke))
        .route("/ui/history/rollback", post(history::roll_back))
        .route("/ui/geoip/update", post(geoip::update))
        .route(
            "/ui/geoip/import",
            post(geoip::import).layer(DefaultBodyLimit::max(auth::UPLOAD_LIMIT)),
        )
        .route_layer(guard(Role::Admin));
    let operator = Router::new()
        .route("/ui/records/{name}/{rtype}/resume", post(preview::resume))
        .route("/ui/checks/{name}/test", post(checks::test))
        .route("/ui/checks/test", post(checks::test_unsaved))
        .route("/ui/checks/{name}/state", post(checks::set_state))
        .route("/ui/drains", post(drains::submit))
        .route("/ui/alerts/{name}/test", post(alerts::test))
        .route("/ui/schedules", post(schedules::add))
        .route("/ui/schedules/{id}/cancel", post(schedules::cancel))
        .route("/ui/geoip/download", post(geoip::download))
        .route_layer(guard(Role::Operator));
    let open = Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/login", get(login::form).post(login::submit))
        .route(assets::CSS_PATH, get(assets::css))
        .route(assets::JS_PATH, get(assets::js))
        .route(assets::ICON_PATH, get(assets::icon));
    Router::new()
        .merge(viewer)
        .merge(operator)
        .merge(admin)
        .merge(open)
        .layer(middleware::from_fn(headers::secure))
        .with_state(state)
}
