//! A device's membership: a cluster initialized from this device's state,
//! joined (with the token, the cluster secret) or left, members admitted
//! and removed on the leader (a follower forwards to it), and recovery as
//! the only voter.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Replication;
use super::error::{ApplyError, cluster_error};
use crate::{
    command::{AccountChange, Action},
    identity, machine,
};
use gtm_cluster::{ClusterError, NodeInfo, SECRET_HEADER};
use gtm_model::actor::Actor;

const TOKEN_PREFIX: &str = "gtm1.";

/// What a device asks of the leader to join.
#[derive(Debug, Serialize, Deserialize)]
pub struct JoinRequest {
    pub id: u64,
    pub info: NodeInfo,
    pub voter: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LeaveRequest {
    pub id: u64,
}

/// The answer of a forwarded join or leave.
#[derive(Debug, Serialize, Deserialize)]
pub struct Written {
    pub version: u64,
}

/// An error from another device, forwarded as it said it.
#[derive(Debug, Serialize, Deserialize)]
pub struct RemoteError {
    pub error: String,
    pub message: String,
}

impl Replication {
    /// The cluster secret, for device-to-device requests.
    pub fn secret_value(&self) -> String {
        self.secret()
    }

    /// The secret held in memory: the one on disk, except while a join is
    /// in flight (then the joined cluster's, kept only once accepted).
    fn secret(&self) -> String {
        self.node.secret().to_string()
    }

    /// Makes this device the first member of a new cluster, whose state
    /// starts as this device's: its configuration, at its version.
    pub async fn init(&self, actor: Actor) -> Result<(), ApplyError> {
        let _changing = self.membership.lock().await;
        let local = self.local.lock().await.clone();
        let text = match machine::config_text(&local) {
            Some(text) => String::from_utf8_lossy(&text).into_owned(),
            None => toml::to_string_pretty(&self.engine.config())
                .map_err(|e| ApplyError::Cluster(e.to_string()))?,
        };
        let version = machine::version_of(&local);
        self.node.initialize().await.map_err(cluster_error)?;
        // The TSIG keys first (their secrets, as `gtm tsig add` carried them):
        // the configuration's secondaries name them.
        let keys: Vec<Action> = gtm_dns::tsig::TsigKeys::of(&local)
            .keys
            .into_iter()
            .map(|(name, k)| {
                Action::Tsig(crate::command::TsigChange::Add {
                    name,
                    algorithm: k.algorithm.clone(),
                    secret: k.secret.clone(),
                })
            })
            .collect();
        for action in keys {
            self.propose(actor.clone(), None, action).await?;
        }
        self.propose(actor.clone(), None, Action::Adopt { text, version })
            .await?;
        // The accounts made before the cluster existed come along, as the
        // commands that would make them (their digests, never secrets).
        let accounts = crate::access::accounts::Accounts::of(&local);
        let users = accounts
            .users
            .into_iter()
            .map(|(name, u)| AccountChange::PutUser {
                name,
                role: u.role,
                password: Some(u.password),
            });
        let tokens = accounts
            .tokens
            .into_iter()
            .map(|(name, t)| AccountChange::PutToken {
                name,
                role: t.role,
                digest: t.digest,
            });
        let accounts = users.chain(tokens).map(Action::Account);
        // So do the drains and the manual checks' states in force.
        let operator = machine::operator::state_of(&local);
        let drains = operator
            .drains
            .iter()
            .filter_map(|d| d.target())
            .map(|target| Action::Drain {
                target,
                drained: true,
            });
        let checks = operator.checks.iter().map(|(check, m)| Action::SetCheck {
            check: check.clone(),
            state: m.state.clone(),
        });
        // And the zones' DNSSEC keys: their DS may be at the parent already.
        let keys: Vec<_> = gtm_dns::dnssec::keys::keyring_of(&local)
            .into_iter()
            .filter_map(|(domain, keys)| Some((domain, keys.active()?.clone())))
            .collect();
        let keys = (!keys.is_empty())
            .then(|| Action::Dnssec(crate::command::DnssecChange::AddKeys { keys }));
        for action in accounts
            .chain(drains)
            .chain(checks)
            .chain(keys)
            .collect::<Vec<_>>()
        {
            self.propose(actor.clone(), None, action).await?;
        }
        Ok(())
    }

    /// The token a device needs to join: the cluster secret.
    pub fn token(&self) -> String {
        format!("{TOKEN_PREFIX}{}", self.secret())
    }

    /// Joins the cluster of the device at `address` (any member; followers
    /// forward to the leader). This device's configuration is replaced by
    /// the cluster's.
    ///
    /// The leader replicates to this device as soon as it adds it, with the
    /// joined cluster's secret, so that secret is held in memory while the
    /// request is in flight; it is written to disk only once the cluster
    /// accepted the join. A refused join puts the old secret back in memory
    /// and changes nothing on disk.
    pub async fn join(&self, address: &str, token: &str, voter: bool) -> Result<(), ApplyError> {
        let _changing = self.membership.lock().await;
        let secret = token
            .strip_prefix(TOKEN_PREFIX)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ApplyError::Cluster(
                    "the token is not a gtm join token (gtm cluster token prints one)".into(),
                )
            })?;
        let previous = self.node.secret();
        self.node.set_secret(secret).map_err(cluster_error)?;
        let asked = self.ask_to_join(address, secret, voter).await;
        if let Err(e) = asked {
            // Added although the answer failed (it was lost, or the voter
            // step failed after the learner step): this device is in the
            // cluster's membership and must keep talking to it.
            if !self.clustered() {
                if let Err(restore) = self.node.set_secret(&previous) {
                    tracing::error!(error = %restore, "cannot restore the cluster secret after a failed join");
                }
                return Err(match e {
                    ApplyError::Cluster(why) => {
                        ApplyError::Cluster(format!("{why}; nothing changed on this device"))
                    }
                    other => other,
                });
            }
            self.keep_joined_secret(secret)?;
            return Err(e);
        }
        self.keep_joined_secret(secret)?;
        // The leader replicates to us; wait until the configuration arrived.
        let mut applied = self.node.applied();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !machine::has_config(&applied.borrow().kv) || !self.clustered() {
            if tokio::time::timeout_at(deadline, applied.changed())
                .await
                .is_err()
            {
                return Err(ApplyError::Cluster(
                    "joined, but no configuration arrived within 30 s; see gtm cluster status"
                        .into(),
                ));
            }
        }
        let index = applied.borrow().index;
        let size = machine::config_pieces(&applied.borrow().kv)
            .map_or(0, |pieces| pieces.iter().map(|p| p.len()).sum());
        if !self.wait_installed(index, size).await {
            // Joined all the same: said, and installed when it can be.
            tracing::warn!(
                index,
                "joined, but the cluster's state was not installed here within its deadline"
            );
        }
        Ok(())
    }

    /// Asks the device at `address` to add this one.
    async fn ask_to_join(
        &self,
        address: &str,
        secret: &str,
        voter: bool,
    ) -> Result<(), ApplyError> {
        let request = JoinRequest {
            id: self.node.id(),
            info: self.status_info(),
            voter,
        };
        let url = format!("{}/cluster/v1/join", address.trim_end_matches('/'));
        let response = self
            .http
            .post(&url)
            .header(SECRET_HEADER, secret)
            .json(&request)
            .send()
            .await
            .map_err(|e| ApplyError::Cluster(format!("cannot reach {address}: {e}")))?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Err(ApplyError::Cluster(format!(
                "{address} refused the join: wrong token (it does not carry that cluster's \
                 secret; gtm cluster token on a member prints the right one)"
            )));
        }
        decode::<Written>(response).await.map(|_| ())
    }

    /// Keeps the secret of the cluster this device now belongs to.
    fn keep_joined_secret(&self, secret: &str) -> Result<(), ApplyError> {
        identity::keep_secret(&self.dir, secret).map_err(|e| {
            ApplyError::Cluster(format!(
                "joined, but {e}: after a restart this device cannot talk to its cluster \
                 until the file holds the cluster's secret"
            ))
        })
    }

    /// Takes this device out of its cluster (`gtm cluster leave`): the leader
    /// commits the removal, then this device forgets the cluster (Raft log,
    /// vote, state machine, snapshot), takes a new node id and a new secret,
    /// and runs on as a device in no cluster, serving the configuration it
    /// had. It can then join a cluster again, or initialize one.
    ///
    /// The only member of a cluster has no one to ask: it forgets the
    /// cluster at once (the cluster ends with it).
    pub async fn leave(&self) -> Result<(), ApplyError> {
        let _changing = self.membership.lock().await;
        let status = self.node.status();
        let id = status.id;
        if status.members.is_empty() {
            return Err(ApplyError::Cluster(
                "this device belongs to no cluster".into(),
            ));
        }
        if !status.members.iter().any(|m| m.id != id) {
            return self.forget_cluster(id).await;
        }
        self.remove(id).await?;
        self.forget_cluster(id).await
    }

    /// Resets this device's Raft state under a new node id and secret.
    ///
    /// Order matters for a crash: the Raft state is cleared first (one
    /// transaction), then the new id, then the new secret are written. A
    /// crash in between leaves a device in no cluster under its old id or
    /// secret, never the new id on the old log (a member the cluster does
    /// not know, that could neither leave nor join).
    async fn forget_cluster(&self, old_id: u64) -> Result<(), ApplyError> {
        let failed = |e: &dyn std::fmt::Display| {
            ApplyError::Cluster(format!(
                "this device is out of the cluster's membership, but forgetting the cluster \
                 failed: {e}"
            ))
        };
        // The device goes on from the cluster's state: its next local
        // command applies to what it serves now.
        let state = self.node.applied().borrow().kv.clone();
        self.set_local(&state).await.map_err(|e| failed(&e))?;
        let new_id = identity::fresh_node_id(old_id).map_err(|e| failed(&e))?;
        let secret = identity::new_secret().map_err(|e| failed(&e))?;
        self.node
            .reset(new_id, &secret)
            .await
            .map_err(|e| failed(&e))?;
        self.installed.send_replace(0);
        identity::keep_node_id(&self.dir, new_id).map_err(|e| failed(&e))?;
        identity::keep_secret(&self.dir, &secret).map_err(|e| failed(&e))?;
        tracing::info!(old_id, new_id, "left the cluster");
        Ok(())
    }

    fn status_info(&self) -> NodeInfo {
        let status = self.node.status();
        status
            .members
            .iter()
            .find(|m| m.id == status.id)
            .map(|m| m.info.clone())
            .unwrap_or_else(|| self.node.info().clone())
    }

    /// Handles a join request on the leader (a follower forwards it).
    ///
    /// During an election no leader is known, or the one known stops
    /// answering: the request waits for a leader and is tried again, until
    /// [`ADMIT_DEADLINE`] (within the time the joining device gives its
    /// request), instead of failing at once.
    pub async fn admit(&self, request: JoinRequest) -> Result<(), ApplyError> {
        let deadline = tokio::time::Instant::now() + ADMIT_DEADLINE;
        loop {
            let (error, tried_leader) = match self
                .node
                .add_member(request.id, request.info.clone(), request.voter)
                .await
            {
                Ok(()) => return Ok(()),
                Err(ClusterError::NotLeader {
                    leader: Some((_, leader)),
                }) => match self
                    .send_to_leader(&leader, "join", |r| r.json(&request))
                    .await
                {
                    // Its answer, refusal or not (a device that is leader
                    // no more waits for the next itself).
                    Ok(response) => return decode::<Written>(response).await.map(|_| ()),
                    // The leader stopped answering.
                    Err(e) => (e, Some(leader)),
                },
                Err(e @ ClusterError::NotLeader { leader: None }) => (cluster_error(e), None),
                Err(e) => return Err(cluster_error(e)),
            };
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(error);
            }
            // Until a leader other than the one that failed is known (or
            // the same one again, after a new term), at most until the
            // deadline; then once more.
            let term = self.node.status().term;
            let waited = self
                .node
                .wait_status(left.min(ADMIT_WAIT_STEP), |s| {
                    match (&s.leader, &tried_leader) {
                        (None, _) => false,
                        (Some((_, now)), Some(failed)) => now != failed || s.term != term,
                        (Some(_), None) => true,
                    }
                })
                .await;
            if waited.is_err() && tokio::time::Instant::now() >= deadline {
                return Err(error);
            }
        }
    }

    /// Removes a member (this device, for `gtm cluster leave`). On the
    /// leader, a device that is no longer a member is already removed: a
    /// device that stopped after its removal committed, before it forgot the
    /// cluster, can leave again.
    pub async fn remove(&self, id: u64) -> Result<(), ApplyError> {
        let status = self.node.status();
        if status.leader.as_ref().is_some_and(|(l, _)| *l == status.id)
            && !status.members.iter().any(|m| m.id == id)
        {
            return Ok(());
        }
        match self.node.remove_member(id).await {
            Ok(()) => Ok(()),
            Err(ClusterError::NotLeader {
                leader: Some((_, leader)),
            }) => self
                .to_leader(&leader, "leave", |r| r.json(&LeaveRequest { id }))
                .await
                .map(|_| ()),
            Err(e) => Err(cluster_error(e)),
        }
    }

    /// After the permanent loss of the peer: continue as the only voter.
    pub async fn recover_single(&self) -> Result<(), ApplyError> {
        self.node.force_single().await.map_err(cluster_error)
    }

    /// Checks a cluster RPC's secret.
    pub fn secret_ok(&self, given: Option<&str>) -> bool {
        given.is_some_and(|g| gtm_cluster::constant_time_eq(g.as_bytes(), self.secret().as_bytes()))
    }

    /// Sends a join or leave to the leader's `/cluster/v1/<route>`.
    async fn to_leader(
        &self,
        leader: &NodeInfo,
        route: &str,
        body: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Written, ApplyError> {
        let response = self.send_to_leader(leader, route, body).await?;
        decode::<Written>(response).await
    }

    /// Sends a join or leave to the leader: its answer, or why it could
    /// not be reached.
    async fn send_to_leader(
        &self,
        leader: &NodeInfo,
        route: &str,
        body: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ApplyError> {
        let url = format!(
            "{}/cluster/v1/{route}",
            leader.api_addr.trim_end_matches('/')
        );
        let secret = self.secret();
        body(self.http.post(&url).header(SECRET_HEADER, secret))
            .send()
            .await
            .map_err(|e| ApplyError::Cluster(format!("cannot reach the leader {leader}: {e}")))
    }
}

/// How long a join waits for a leader during an election
/// ([`Replication::admit`]): well within the 35 s a joining device gives
/// its request.
pub const ADMIT_DEADLINE: Duration = Duration::from_secs(25);

/// How long one wait for a leader lasts before the join is tried again.
const ADMIT_WAIT_STEP: Duration = Duration::from_secs(2);

async fn decode<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
) -> Result<T, ApplyError> {
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| ApplyError::Cluster(e.to_string()))?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map_err(|e| ApplyError::Cluster(format!("unexpected answer: {e}")));
    }
    match serde_json::from_slice::<RemoteError>(&body) {
        // The peer's message names its own unreachable devices.
        Ok(e) if e.error == "no-quorum" => Err(ApplyError::NoQuorum(e.message)),
        Ok(e) => Err(ApplyError::Cluster(e.message)),
        Err(_) => Err(ApplyError::Cluster(format!(
            "the peer answered {status}: {}",
            String::from_utf8_lossy(&body)
        ))),
    }
}
