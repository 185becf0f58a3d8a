//! The device's side of RFC 2136 dynamic update (docs/transfer.md,
//! "Dynamic update"): the DNS layer hands a verified update to
//! [`DnsUpdates`], which proposes it as one [`Action::Update`] command,
//! like any write of this device (a follower's goes through the leader),
//! and answers once the command is committed and installed here, or with
//! the response code of its refusal.

use std::sync::{Arc, Weak};

use crate::{
    command::{Action, CommandId, with_client_id},
    replication::{ApplyError, Replication},
};
use gtm_dns::update::{Decision, ResponseCode, Update, Updater, code_of};
use gtm_model::{actor::Actor, error::ErrorKind};

/// Decides the updates this device receives through its replication.
#[derive(Debug)]
pub struct DnsUpdates {
    /// Weak: the DNS state that holds this is held by the engine, which
    /// replication holds; a strong one would keep the store open after
    /// the device stops.
    replication: Weak<Replication>,
    /// The device's name, as history shows the actor.
    device: String,
}

impl DnsUpdates {
    pub fn new(replication: &Arc<Replication>, device: &str) -> Self {
        Self {
            replication: Arc::downgrade(replication),
            device: device.to_string(),
        }
    }
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
        let replication = self.replication.upgrade();
        let actor = actor(&update.key, &self.device);
        Box::pin(async move {
            // The device is stopping.
            let Some(replication) = replication else {
                return ResponseCode::ServFail;
            };
            let (key, zone) = (update.key.clone(), update.zone.clone());
            let proposed = replication.propose(actor, None, Action::Update(Box::new(update)));
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
