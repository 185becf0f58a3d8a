//! The Cluster screen (docs/console.md), the appliance's "Remote Devices":
//! every member with its datacenter, role, reachability, last contact and
//! the configuration version it serves; the datacenters, up or down as
//! this device judges them; and, for admins, the join token.

use std::collections::BTreeMap;

use axum::{
    Extension, Json,
    extract::State,
    response::{IntoResponse, Response},
};
use gtm_cluster::{ClusterStatus, NodeState};
use maud::{Markup, html};

use super::layout::{self, csrf_field};
use crate::ApiState;
use gtm_model::error::ApiError;
use gtm_node::access::{Principal, Role};
use gtm_node::peers::PeerStatus;

/// One member as the table shows it.
pub(super) struct Member {
    name: String,
    datacenter: String,
    api: String,
    role: &'static str,
    /// `None` for this device.
    peer: Option<PeerStatus>,
    last_contact_ms: Option<u64>,
    version: Option<u64>,
}

pub(super) fn members(state: &ApiState, status: &ClusterStatus) -> Vec<Member> {
    let peers = state.peers.devices(&state.replication);
    let leader = status.leader.as_ref().map(|(id, _)| *id);
    status
        .members
        .iter()
        .map(|m| {
            let me = m.id == status.id;
            let role = match (leader == Some(m.id), m.voter) {
                (true, _) => "leader",
                (false, true) => "follower",
                (false, false) => "learner",
            };
            let peer = (!me)
                .then(|| peers.iter().find(|p| p.device == m.info.name).cloned())
                .flatten();
            Member {
                name: m.info.name.clone(),
                datacenter: m.info.datacenter.clone(),
                api: m.info.api_addr.clone(),
                role,
                version: if me {
                    Some(state.engine.version())
                } else {
                    peer.as_ref().and_then(|p| p.version)
                },
                peer,
                last_contact_ms: m.last_contact_ms,
            }
        })
        .collect()
}

pub async fn page(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    render(&state, &who, None).await
}

/// What a membership action of the page came to.
pub enum Done {
    Token(Result<String, ApiError>),
    Membership(Result<String, ApiError>),
}

/// Make this device the first member of a cluster (admins; the API's
/// own handler).
pub async fn init(State(state): State<ApiState>, Extension(who): Extension<Principal>) -> Response {
    let done = crate::cluster::cluster_init(State(state.clone()), Extension(who.clone()))
        .await
        .map(|Json(m)| m.message);
    render(&state, &who, Some(Done::Membership(done))).await
}

/// Join this device to a cluster through a member (admins).
pub async fn join(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: axum::body::Bytes,
) -> Response {
    let f = super::fields::Fields::parse(&form);
    let request = crate::JoinCommand {
        address: f.get("address").to_string(),
        token: f.get("token").to_string(),
        learner: f.get("learner") == "true",
    };
    let done = if request.address.is_empty() || request.token.is_empty() {
        Err(ApiError::new(
            gtm_model::error::ErrorKind::BadRequest,
            "give the API address of a member and the join token it gave",
        ))
    } else {
        crate::cluster::cluster_join(State(state.clone()), Json(request))
            .await
            .map(|_| "this device joined the cluster".to_string())
    };
    render(&state, &who, Some(Done::Membership(done))).await
}

/// This device leaves its cluster (admins; the form asks to confirm).
pub async fn leave(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    form: axum::body::Bytes,
) -> Response {
    let f = super::fields::Fields::parse(&form);
    let done = if f.get("confirm") != state.engine.device() {
        Err(ApiError::new(
            gtm_model::error::ErrorKind::BadRequest,
            format!(
                "confirm: type this device's name, {}, to leave the cluster",
                state.engine.device()
            ),
        ))
    } else {
        crate::cluster::cluster_leave(State(state.clone()))
            .await
            .map(|_| "this device left the cluster: it answers on its own".to_string())
    };
    render(&state, &who, Some(Done::Membership(done))).await
}

/// Shows the join token (admins; a POST, so it is never in a URL).
pub async fn token(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
) -> Response {
    let shown = crate::cluster_token(State(state.clone()))
        .await
        .map(|Json(t)| t.token);
    render(&state, &who, Some(Done::Token(shown))).await
}

async fn render(state: &ApiState, who: &Principal, done: Option<Done>) -> Response {
    let (token, membership) = match done {
        Some(Done::Token(t)) => (Some(t), None),
        Some(Done::Membership(m)) => (None, Some(m)),
        None => (None, None),
    };
    let status = state.replication.status();
    let clustered = !status.members.is_empty();
    let members = members(state, &status);
    let engine = state.engine.clone();
    let configured: Vec<String> = tokio::task::spawn_blocking(move || {
        engine.with_config(|c| c.datacenters.iter().map(|d| d.name.clone()).collect())
    })
    .await
    .unwrap_or_default();
    let failed_workers = crate::failed_workers(&state.workers.list());
    let body = html! {
        h1 { "Cluster" }
        @match &membership {
            Some(Ok(text)) => p.notice #membership role="status" { (text) },
            Some(Err(why)) => p.error #membership role="alert" { (why.message) },
            None => {},
        }
        @if let Some(why) = &status.failure {
            p.error role="alert" {
                "This device is degraded: " (why) ". It refuses writes and installs nothing "
                "the cluster commits until it is restarted (docs/operations.md, \"Degraded\")."
            }
        }
        @for worker in &failed_workers {
            p.error role="alert" { "Worker failed: " (worker) }
        }
        @if !clustered {
            p { "This device belongs to no cluster: it answers on its own. "
                "Make it the first member with " code { "gtm cluster init" } "." }
        } @else {
            p.summary {
                "This device: " strong { (state_name(status.state)) }
                @if status.state == NodeState::Leader && !status.quorum { " (no quorum)" }
                ", term " (status.term)
                ", applied index " (status.applied_index.map_or("-".into(), |i| i.to_string()))
                "."
            }
            div.scroll tabindex="0" role="region" aria-label="Members" {
                table.members {
                    caption { "Devices of the cluster" }
                    thead { tr {
                        th scope="col" { "Device" }
                        th scope="col" { "Datacenter" }
                        th scope="col" { "Role" }
                        th scope="col" { "Reachable" }
                        th scope="col" { "Last report" }
                        th scope="col" { "Last Raft contact" }
                        th scope="col" { "Configuration version" }
                        th scope="col" { "API" }
                    } }
                    tbody {
                        @for m in &members {
                            @let reachable = m.peer.as_ref().is_none_or(|p| p.reachable);
                            tr data-device=(m.name) .stale[!reachable] {
                                th scope="row" { (m.name) @if m.peer.is_none() { " (this device)" } }
                                td { (m.datacenter) }
                                td { (m.role) }
                                td.reach { @if reachable { "yes" } @else { "no" } }
                                td { @match &m.peer {
                                    None => "-",
                                    Some(p) => (p.age_ms.map_or("never".into(), |a| format!("{} ago", gtm_model::when::age(a)))),
                                } }
                                td { (m.last_contact_ms.map_or("-".into(), |a| format!("{} ago", gtm_model::when::age(a)))) }
                                td { (m.version.map_or("-".into(), |v| v.to_string())) }
                                td.api { (m.api) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Datacenters" }
        (datacenters(state, &members, &configured))
        @if !clustered && who.allows(Role::Admin) {
            (membership_forms(who))
        }
        @if clustered && who.allows(Role::Admin) {
            h2 { "Leave the cluster" }
            p { "This device stops being a member: the others keep the configuration and go on without it;                  it answers on its own with what it has. With a pair, the one left cannot write until                  another device joins." }
            form.filters method="post" action="/ui/cluster/leave" {
                (csrf_field(who))
                div.field {
                    label for="confirm" { "Type this device's name, " (state.engine.device()) ", to confirm" }
                    input #confirm name="confirm" type="text" autocomplete="off";
                }
                div.actions { button type="submit" #leave { "Leave the cluster" } }
            }
        }
        @if clustered && who.allows(Role::Admin) {
            h2 { "Join token" }
            p { "A new device joins with " code { "gtm cluster join ADDRESS --token TOKEN" } "." }
            @match &token {
                Some(Ok(t)) => p { code #join-token { (t) } },
                Some(Err(why)) => p.error role="alert" { (why.message) },
                None => form method="post" action="/ui/cluster/token" {
                    (csrf_field(who))
                    button type="submit" { "Show the join token" }
                },
            }
        }
    };
    layout::page("Cluster", state.engine.device(), Some(who), body).into_response()
}

/// Each datacenter with its devices: up when this device is in it or one
/// of its devices reports; no device: nothing to judge it by.
pub(super) fn datacenters(state: &ApiState, members: &[Member], configured: &[String]) -> Markup {
    let mut dcs: BTreeMap<String, Vec<&Member>> =
        configured.iter().map(|d| (d.clone(), Vec::new())).collect();
    dcs.entry(state.datacenter.clone()).or_default();
    for m in members {
        dcs.entry(m.datacenter.clone()).or_default().push(m);
    }
    html! {
        ul.dcs {
            @for (dc, devices) in &dcs {
                @let here = *dc == state.datacenter;
                @let up = here || devices.iter().any(|m| m.peer.as_ref().is_some_and(|p| p.reachable));
                @let (class, text) = if devices.is_empty() && !here {
                    ("none", "no device")
                } else if up {
                    ("ok", "up")
                } else {
                    ("down", "down")
                };
                li data-dc=(dc) class={ "dc " (class) } {
                    strong { (dc) } ": " span.state { (text) }
                    @if !devices.is_empty() {
                        " (" (devices.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")) ")"
                    }
                }
            }
        }
    }
}

/// Make a cluster of this device, or join one (a device of no cluster).
fn membership_forms(who: &Principal) -> Markup {
    html! {
        h2 { "Make a cluster" }
        p { "This device becomes the first member; the others join it with its join token." }
        form method="post" action="/ui/cluster/init" {
            (csrf_field(who))
            button type="submit" #init { "Make this device the first member" }
        }
        h2 { "Join a cluster" }
        p { "On a device of the cluster, an admin shows the join token on this page; give it here with              the API address of that device. This device's configuration is replaced by the cluster's." }
        form.filters method="post" action="/ui/cluster/join" {
            (csrf_field(who))
            div.field {
                label for="address" { "API address of a member" }
                input #address name="address" type="text" placeholder="http://192.0.2.11:8053";
            }
            div.field {
                label for="token" { "Join token" }
                input #token name="token" type="text" autocomplete="off";
            }
            div.field {
                label for="learner" { "Membership" }
                select #learner name="learner" {
                    option value="false" { "voter" }
                    option value="true" { "learner (replicates, does not vote)" }
                }
            }
            div.actions { button type="submit" #join { "Join" } }
        }
    }
}

fn state_name(state: NodeState) -> &'static str {
    match state {
        NodeState::Leader => "Leader",
        NodeState::Follower => "Follower",
        NodeState::Candidate => "Candidate",
        NodeState::Learner => "Learner",
        NodeState::Shutdown => "Shutdown",
    }
}
