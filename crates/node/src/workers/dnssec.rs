//! The `dnssec` worker: makes the key of a signed domain that has none
//! (on the leader, or a device in no cluster), and has the answers signed
//! again when a new signing window begins (on every device).

use std::{sync::Arc, time::Duration};

use crate::{
    command::{Action, DnssecChange},
    replication::Replication,
};
use gtm_dns::dnssec::{
    keys::{KeyMaterial, keyring_of},
    signer::window_of,
};
use gtm_engine::Engine;
use gtm_model::{actor::Actor, clock::now_ms, config::KeyAlgorithm};

/// How often the worker looks.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The name key proposals act as, with the proposing device.
pub const KEYS_USER: &str = "dnssec";

/// Runs until `stop`. A clustered device makes no key without mutual TLS
/// between devices, since keys travel in the Raft log
/// ([`Replication::makes_keys`]). Most keys come with the command that
/// signs their domain ([`crate::command::Command::keys`]); this makes
/// those that did not (a device without mutual TLS proposed it, or a
/// configuration from before).
pub async fn run(
    replication: Arc<Replication>,
    engine: Arc<Engine>,
    device: String,
    stop: tokio_util::sync::CancellationToken,
) {
    // What was last logged about a domain: logged again only on change.
    let mut said: std::collections::HashMap<String, String> = Default::default();
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stop.cancelled() => return,
        }
        let now_secs = now_ms() / 1000;
        if engine
            .signing_window()
            .is_some_and(|w| w != window_of(now_secs))
        {
            let engine = engine.clone();
            let _ = tokio::task::spawn_blocking(move || engine.resign_at(now_secs)).await;
        }
        if !replication.proposes_for_cluster() {
            continue;
        }
        let keys = keyring_of(&*replication.state().await);
        // Off the async workers: read under the engine's lock, which an
        // install holds for seconds.
        let reader = engine.clone();
        let Ok(signed) = tokio::task::spawn_blocking(move || reader.signed_zones()).await else {
            continue;
        };
        let missing: Vec<(String, KeyAlgorithm)> = signed
            .into_iter()
            .filter(|(domain, _)| !keys.contains_key(domain))
            .collect();
        said.retain(|domain, _| missing.iter().any(|(d, _)| d == domain));
        if missing.is_empty() {
            continue;
        }
        let why = if !replication.makes_keys() {
            "not made: keys travel between devices, and device-to-device traffic is not mutual TLS here (set tls_cert and tls_key on every device, docs/cluster.md)".to_string()
        } else {
            // Every missing key in one command: the answers are signed
            // again once, not once per domain.
            let made: Result<Vec<_>, _> = missing
                .iter()
                .map(|(domain, algorithm)| {
                    KeyMaterial::generate(*algorithm, now_ms()).map(|k| (domain.clone(), k))
                })
                .collect();
            match made {
                Ok(keys) => {
                    let actor = Actor {
                        user: KEYS_USER.into(),
                        device: device.clone(),
                    };
                    let action = Action::Dnssec(DnssecChange::AddKeys { keys });
                    match replication.propose(actor, None, action).await {
                        Ok(_) => continue,
                        Err(e) => format!("not made yet: {e}"),
                    }
                }
                Err(e) => e.to_string(),
            }
        };
        for (domain, _) in missing {
            if said.get(&domain) != Some(&why) {
                engine.record_event(
                    gtm_engine::EventKind::Config,
                    gtm_engine::Severity::Warning,
                    format!("domain {domain}"),
                    format!("DNSSEC key of {domain} {why}"),
                );
                said.insert(domain, why.clone());
            }
        }
    }
}
