//! A change proposed to the cluster on behalf of an actor, with its real
//! outcome; and, for a device in no cluster, the same command applied by
//! the machine to the local map in the store.

use std::sync::Arc;

use super::Replication;
use super::error::{ApplyError, StartError, cluster_error};
use crate::{
    command::{Action, Command, Outcome},
    machine::{self, CONFIG_KEY},
};
use gtm_cluster::{ClusterError, MAX_COMMAND_BYTES, Map, Store, Write};
use gtm_engine::Engine;
use gtm_model::{
    actor::Actor,
    error::{ApiError, ErrorKind},
};

/// The local map's count of applied commands (a device in no cluster).
const LOCAL_INDEX_KEY: &str = "local-index";

/// An applied command, as its proposer reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub version: u64,
    /// False when the command changed nothing (already so).
    pub changed: bool,
    pub changes: Vec<String>,
    /// Whether this device installed it before answering. A committed
    /// change this device has not installed within its deadline is still
    /// applied (the cluster has it, and this device installs it when it
    /// can); the answer says so instead of waiting on.
    pub installed: bool,
}

impl Replication {
    /// Proposes `text` as the configuration, as [`Replication::propose`]
    /// does, with its parse (`config`) offered to this device's machine:
    /// the text is not parsed a second time here. With `expect_version`,
    /// refused (conflict) unless the committed configuration is still at
    /// that version.
    pub async fn apply_config(
        &self,
        actor: Actor,
        expect_version: Option<u64>,
        text: String,
        config: gtm_model::Config,
    ) -> Result<Applied, ApplyError> {
        let _offer = self.machine.offer(&text, config);
        self.propose(actor, expect_version, Action::ApplyConfig { text })
            .await
    }

    /// Keys for the domains the configuration `action` makes would sign
    /// with none (docs/dnssec.md): made here, so that the command that
    /// signs a domain carries its key and every device serves it signed
    /// from its first answer. None when this device makes no keys
    /// ([`Replication::makes_keys`]): the leader's `dnssec` worker says
    /// why then.
    async fn first_keys(
        &self,
        action: &Action,
    ) -> Vec<(String, gtm_dns::dnssec::keys::KeyMaterial)> {
        if !matches!(
            action,
            Action::ApplyConfig { .. }
                | Action::Adopt { .. }
                | Action::Edit(_)
                | Action::Rollback { .. }
        ) || !self.makes_keys()
        {
            return Vec::new();
        }
        let kv = self.state().await;
        let wanted = match action {
            // Its parse is offered: a look at its domains.
            Action::ApplyConfig { .. } => self.machine.keyless_after(&kv, action),
            // A copy of the configuration, or a parse: off the async workers.
            _ => {
                let (machine, action) = (self.machine.clone(), action.clone());
                tokio::task::spawn_blocking(move || machine.keyless_after(&kv, &action))
                    .await
                    .unwrap_or_default()
            }
        };
        let now = gtm_model::clock::now_ms();
        wanted
            .into_iter()
            .filter_map(|(domain, algorithm)| {
                let key = gtm_dns::dnssec::keys::KeyMaterial::generate(algorithm, now).ok()?;
                Some((domain, key))
            })
            .collect()
    }

    /// Proposes a change on behalf of `actor` and returns its real outcome:
    /// applied (installed on this device before this returns), rejected
    /// (nothing changed anywhere), no quorum (refused before it was
    /// proposed), or outcome unknown (with the command's id).
    pub async fn propose(
        &self,
        actor: Actor,
        expect_version: Option<u64>,
        action: Action,
    ) -> Result<Applied, ApplyError> {
        let mut command = Command::new(actor, expect_version, action);
        command.history_keep = self.history_keep.load(std::sync::atomic::Ordering::Relaxed);
        command.keys = self.first_keys(&command.action).await;
        let bytes = command
            .encode()
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        let size = bytes.len();
        // Refused before anything is proposed: an entry this large would
        // stall replication for every device (docs/cluster.md, "Bounded
        // entries"). The same limit holds in no cluster, so a configuration
        // a single device accepts can later be clustered.
        if bytes.len() > MAX_COMMAND_BYTES {
            return Err(ApplyError::Rejected(ApiError::new(
                ErrorKind::TooLarge,
                format!(
                    "the configuration is {} MiB; the limit is {} MiB",
                    bytes.len().div_ceil(1 << 20),
                    MAX_COMMAND_BYTES >> 20
                ),
            )));
        }
        let clustered = self.clustered();
        // Refused before it is proposed or forwarded: this device could
        // neither commit it nor install it.
        if clustered && let Some(why) = self.fault() {
            return Err(ApplyError::RaftFailed(why));
        }
        let outcome = if clustered {
            self.node.propose(bytes).await.map_err(|e| match e {
                ClusterError::Unknown(why) => ApplyError::Unknown {
                    command: command.id.to_string(),
                    why,
                },
                other => cluster_error(other),
            })?
        } else {
            self.apply_local(bytes).await?
        };
        match Outcome::decode(&outcome).map_err(|e| ApplyError::Cluster(e.to_string()))? {
            Outcome::Applied {
                version,
                index,
                changed,
                changes,
            } => {
                let reached = !clustered || self.wait_installed(index, size).await;
                // Reached, but the configuration it made did not install
                // here (the device serves its last good one, degraded).
                let installed = reached && self.engine.version() >= version;
                if !installed {
                    self.not_installed(&command.id.to_string(), version, index);
                }
                Ok(Applied {
                    version,
                    changed,
                    changes,
                    installed,
                })
            }
            Outcome::Rejected(e) => Err(ApplyError::Rejected(e)),
        }
    }

    /// A device in no cluster: the machine applies the command to the local
    /// map, the store keeps the result (flushed), the engine installs it.
    async fn apply_local(&self, bytes: Vec<u8>) -> Result<Vec<u8>, ApplyError> {
        let mut local = self.local.lock().await;
        let index = local
            .get(LOCAL_INDEX_KEY)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            + 1;
        let (machine, kv) = (self.machine.clone(), local.clone());
        let effect = self
            .install_thread
            .run(move || gtm_cluster::Machine::apply(&*machine, &kv, index, &bytes))
            .await
            .ok_or_else(|| ApplyError::Cluster("the install thread stopped".into()))?;
        let mut writes = effect.writes;
        writes.push(Write::Put {
            key: LOCAL_INDEX_KEY.into(),
            value: index.to_string().into_bytes(),
        });
        self.write_local(&mut local, writes)
            .await
            .map_err(ApplyError::Store)?;
        let state = local.clone();
        self.install_blocking(state).await;
        self.retire_replaced();
        Ok(effect.outcome)
    }

    /// Replaces the local map with `state` (a device leaving its cluster
    /// goes on from the cluster's state), keeping the local command count.
    pub(super) async fn set_local(&self, state: &Map) -> Result<(), gtm_cluster::StoreError> {
        let mut local = self.local.lock().await;
        let mut writes: Vec<Write> = local
            .keys()
            .filter(|k| *k != LOCAL_INDEX_KEY && !state.contains_key(*k))
            .map(|k| Write::Delete { key: k.clone() })
            .collect();
        writes.extend(state.iter().map(|(k, v)| Write::Put {
            key: k.clone(),
            value: v.to_vec(),
        }));
        self.write_local(&mut local, writes).await
    }

    /// Keeps `writes` in the store's local map (flushed), then in memory.
    async fn write_local(
        &self,
        local: &mut Arc<Map>,
        writes: Vec<Write>,
    ) -> Result<(), gtm_cluster::StoreError> {
        let store = self.store.clone();
        let kept = tokio::task::spawn_blocking(move || store.apply_local(writes))
            .await
            .map_err(|e| gtm_cluster::StoreError::Corrupt {
                what: "local state",
                why: e.to_string(),
            })??;
        let map = Arc::make_mut(local);
        for write in kept {
            write.apply_to(map);
        }
        Ok(())
    }
}

/// The local map of a device in no cluster. A device that kept only a
/// configuration (an older gtm) starts its map from it; a device that kept
/// none starts from what it serves (the demo configuration), so its first
/// write edits that, not an empty one.
pub(super) fn local_map(store: &Store, engine: &Engine) -> Result<Map, StartError> {
    let mut map = store.local_map()?;
    if machine::has_config(&map) {
        return Ok(map);
    }
    let (version, text) = match store.load_config()? {
        Some(stored) => (stored.version, stored.text),
        None => {
            let serving = engine.config();
            if *serving == gtm_model::Config::default() {
                return Ok(map);
            }
            (
                engine.version(),
                toml::to_string_pretty(&serving).map_err(StartError::ServedConfig)?,
            )
        }
    };
    let writes = vec![
        Write::Put {
            key: CONFIG_KEY.into(),
            value: text.into_bytes(),
        },
        Write::Put {
            key: machine::VERSION_KEY.into(),
            value: version.to_string().into_bytes(),
        },
    ];
    store.apply_local(writes)?;
    map = store.local_map()?;
    Ok(map)
}
