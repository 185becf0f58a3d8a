//! Making and rotating the cluster's DNS cookie secret (docs/operations.md,
//! "Abuse resistance").
//!
//! The leader, or a device in no cluster, looks once a second: when the
//! replicated state has no secret, or the current one is older than
//! `[cookies] rotate`, it makes 16 random bytes and proposes them in an
//! [`Action::RotateCookieSecret`], which every device applies alike
//! ([`crate::machine::cookies`]). A leader without quorum proposes nothing;
//! a proposal that fails is tried on the next look.

use std::{sync::Arc, time::Duration};

use crate::{command::Action, machine::cookies::secrets_of, replication::Replication};
use gtm_dns::cookies::Secret;
use gtm_engine::Engine;
use gtm_model::{actor::Actor, clock::now_ms};

/// How often the proposing device looks whether a rotation is due.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The name rotations act as (with the proposing device).
pub const ROTATING_USER: &str = "cookie-rotation";

/// Rotates the secret when due while this device leads (or is alone),
/// until `stop`.
pub async fn run(
    replication: Arc<Replication>,
    engine: Arc<Engine>,
    stop: tokio_util::sync::CancellationToken,
) {
    // The last failure, logged again only when it changes.
    let mut failing: Option<String> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stop.cancelled() => return,
        }
        if !replication.proposes_for_cluster() {
            failing = None;
            continue;
        }
        let rotation = engine.with_config(|c| {
            gtm_model::abuse::cookie_rotation(&mut Default::default(), c.cookies.as_ref())
        });
        let current = secrets_of(&*replication.state().await);
        let rotation_ms = u64::try_from(rotation.as_millis()).unwrap_or(u64::MAX);
        if current
            .as_ref()
            .is_some_and(|s| now_ms() < s.created_ms.saturating_add(rotation_ms))
        {
            continue;
        }
        let result = match Secret::generate() {
            Ok(secret) => {
                let actor = Actor {
                    user: ROTATING_USER.into(),
                    device: engine.device().to_string(),
                };
                let action = Action::RotateCookieSecret {
                    secret,
                    replaces: current.as_ref().map(|s| s.created_ms),
                };
                replication
                    .propose(actor, None, action)
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(e) => Err(format!("no randomness for a secret: {e}")),
        };
        match result {
            Ok(applied) => {
                failing = None;
                if applied.changed {
                    tracing::info!(
                        first = current.is_none(),
                        "DNS cookie secret {}",
                        if current.is_none() { "made" } else { "rotated" }
                    );
                }
            }
            Err(why) => {
                if failing.as_ref() != Some(&why) {
                    tracing::warn!(error = %why, "the DNS cookie secret could not be rotated yet; trying again");
                    failing = Some(why);
                }
            }
        }
    }
}
