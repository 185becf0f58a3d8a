//! The device's side of RFC 2136 dynamic update (docs/transfer.md,
//! "Dynamic update"): the DNS layer hands a verified update to
//! [`DnsUpdates`], which judges it on every device like an API write
//! ([`Judge::config`]: refused when some device would answer a record with
//! nothing), proposes it as one [`Action::Update`] command, like any write
//! of this device (a follower's goes through the leader), and answers once
//! the command is committed and installed here, or with the response code
//! of its refusal.

use std::sync::{Arc, Weak};

use crate::{
    command::{Action, CommandId, with_client_id},
    judge::Judge,
    replication::ApplyError,
};
use gtm_dns::update::{Decision, ResponseCode, Update, Updater, code_of};
use gtm_model::{actor::Actor, error::ErrorKind};

/// Decides the updates this device receives through its replication.
#[derive(Debug)]
pub struct DnsUpdates {
    /// Weak: the DNS state that holds this is held by the engine, which
    /// the judge holds; a strong one would keep the store open after the
    /// device stops.
    judge: Weak<Judge>,
    /// The device's name, as history shows the actor.
    device: String,
}

impl DnsUpdates {
    pub fn new(judge: &Arc<Judge>, device: &str) -> Self {
        Self {
            judge: Arc::downgrade(judge),
            device: device.to_string(),
        }
    }
}

/// Why `update` may not be proposed: the judgement of its change on every
/// device ([`Judge::config`]) leaves some device answering a record with
/// nothing. An update the state machine would refuse is not judged: its
/// proposal gets the refusal's own response code.
async fn judged(judge: &Judge, update: &Update) -> Option<String> {
    let current = judge.engine.config();
    let (now, u) = (current.clone(), update.clone());
    let new = tokio::task::spawn_blocking(move || crate::machine::updated(&now, &u))
        .await
        .ok()
        .flatten()?;
    let what = format!("dynamic update of {} (key {})", update.zone, update.key);
    let judgement = judge.config(&what, current, Arc::new(new)).await?;
    judgement.emptied_sentence()
}

/// Who made an update's version: its key, as `key:NAME`.
pub fn actor(key: &str, device: &str) -> Actor {
    Actor {
        user: format!("key:{key}"),
        device: device.to_string(),
    }
}

impl Updater for DnsUpdates {
    fn update(&self, id: [u8; 16], update: Update) -> Decision {
        let judge = self.judge.upgrade();
        let actor = actor(&update.key, &self.device);
        Box::pin(async move {
            // The device is stopping.
            let Some(judge) = judge else {
                return ResponseCode::ServFail;
            };
            let (key, zone) = (update.key.clone(), update.zone.clone());
            if let Some(why) = judged(&judge, &update).await {
                tracing::warn!(%key, %zone, %why, "a dynamic update is refused: some device would answer a record with nothing");
                return ResponseCode::Refused;
            }
            let proposed = judge
                .replication
                .propose(actor, None, Action::Update(Box::new(update)));
            // The request's MAC names the command: a retransmission is
            // applied once and gets the first outcome.
            let code = match with_client_id(CommandId(id), proposed).await {
                Ok(_) => ResponseCode::NoError,
                Err(ApplyError::Rejected(e)) => {
                    code_of(&e.message).unwrap_or(match e.error {
                        // The change would make an invalid configuration.
                        ErrorKind::InvalidConfig => ResponseCode::Refused,
                        _ => ResponseCode::ServFail,
                    })
                }
                Err(e) => {
                    tracing::warn!(%key, %zone, error = %e, "a dynamic update could not be committed");
                    ResponseCode::ServFail
                }
            };
            tracing::debug!(%key, %zone, code = %code, "dynamic update");
            code
        })
    }
}
