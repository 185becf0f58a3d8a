//! Committed state installed: every state Raft applies (or a device in no
//! cluster applied to its local map) handed to the engine on the install
//! thread, and how far that got, for a write that waits to answer.

use gtm_engine::Severity;
use std::{sync::Arc, time::Duration};

use super::Replication;
use crate::machine::{self, GtmMachine};
use gtm_cluster::Map;
use gtm_engine::{Engine, EventKind};

impl Replication {
    /// Installs every state Raft applies on this device, until `stop` is
    /// cancelled or Raft goes: the device's `raft-install` worker.
    pub async fn install_committed(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        tokio::select! {
            _ = install_committed(self.clone()) => {}
            _ = stop.cancelled() => {}
        }
    }

    /// Has the install thread free what the last install replaced, after
    /// the jobs it was given (the writes waiting for the install are
    /// answered meanwhile).
    pub(super) fn retire_replaced(&self) {
        let engine = self.engine.clone();
        if !self.install_thread.submit(move || engine.retire_replaced()) {
            // The thread is gone: freed here rather than kept.
            self.engine.retire_replaced();
        }
    }

    /// Hands `kv` to the engine on the install thread.
    pub(super) async fn install_blocking(&self, kv: Arc<Map>) {
        let (engine, handled) = (self.engine.clone(), self.handled_snapshot());
        let machine = self.machine.clone();
        let done = self
            .install_thread
            .run(move || install(&engine, &machine, &kv, handled))
            .await;
        match done {
            Some(Some(now)) => *self.handled.lock().unwrap_or_else(|p| p.into_inner()) = Some(now),
            Some(None) => {}
            None => tracing::error!(
                "installing the committed state stopped: the install thread is gone"
            ),
        }
    }

    fn handled_snapshot(&self) -> Option<Handled> {
        self.handled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits (bounded, longer for a larger command of `bytes`) until this
    /// device installed the state up to `index`. False when it did not in
    /// time (or its Raft failed meanwhile).
    pub(super) async fn wait_installed(&self, index: u64, bytes: usize) -> bool {
        let mut installed = self.installed.subscribe();
        let bound = Duration::from_secs(5) + gtm_cluster::apply_allowance(bytes);
        matches!(
            tokio::time::timeout(bound, installed.wait_for(|i| *i >= index)).await,
            Ok(Ok(_))
        )
    }

    /// Reports a committed command this device did not install within its
    /// deadline, or whose configuration it could not install: logged, and
    /// an event, besides the answer's `installed`.
    pub(super) fn not_installed(&self, command: &str, version: u64, index: u64) {
        let failed = self
            .engine
            .install_failure()
            .filter(|f| f.version >= version);
        let why = match (self.fault(), failed) {
            (Some(fault), _) => format!(": {fault}"),
            (None, Some(f)) => format!(
                ": configuration version {} cannot be installed here, it serves version {}: {}",
                f.version, f.serving, f.reason
            ),
            (None, None) => " within its deadline; it installs it when it can".to_string(),
        };
        let text = format!(
            "command {command} was committed (configuration version {version}, log index {index}) but this device has not installed it{why}"
        );
        self.engine.record_event(
            EventKind::Config,
            Severity::Warning,
            format!("version {version}"),
            text,
        );
    }
}

/// Installs every state Raft applies on this device, and publishes how far
/// it got. A configuration that cannot be installed here leaves the device
/// serving its last good one, degraded (see `Engine::apply_committed`); it
/// is not retried until another commits.
async fn install_committed(r: Arc<Replication>) {
    let mut applied = r.node.applied();
    loop {
        // Cloned out: a borrow held across the install would hold back
        // Raft's next apply.
        let state = applied.borrow_and_update().clone();
        // Not `>`: a device that left and started or joined another
        // cluster counts that cluster's log from the start again.
        if r.clustered() && state.index != *r.installed.borrow() {
            r.install_blocking(state.kv.clone()).await;
            r.installed.send_replace(state.index);
            r.retire_replaced();
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = r.stop.cancelled() => return,
        }
    }
}

/// The configuration last handed to the engine: its version, the hash of
/// the map's value for it ([`machine::config_value`]), and that value as
/// the replicated map holds it, so that the same value is known again
/// without hashing after every command; and the zone versions it was
/// handed with (the SOA serials).
#[derive(Debug, Clone)]
pub(super) struct Handled {
    pub(super) version: u64,
    pub(super) hash: u64,
    pub(super) value: Option<gtm_cluster::Value>,
    pub(super) zone_versions: std::collections::HashMap<String, u64>,
}

impl Handled {
    /// Whether `value` at `version` is this very value of the map.
    fn is(&self, version: u64, value: &gtm_cluster::Value) -> bool {
        self.version == version
            && self
                .value
                .as_ref()
                .is_some_and(|v| v.as_ptr() == value.as_ptr() && v.len() == value.len())
    }
}

/// Hands the configuration of `kv` to the engine unless it is the one last
/// handed (`handled`, by version and text). Returns what it handed.
fn install(
    engine: &Engine,
    machine: &GtmMachine,
    kv: &Map,
    handled: Option<Handled>,
) -> Option<Handled> {
    // The TSIG keys first: a configuration naming one finds it.
    engine
        .dns()
        .tsig
        .store(std::sync::Arc::new(gtm_dns::tsig::TsigKeys::of(kv)));
    // The DNSSEC keys before the configuration: a version that signs a
    // domain and the key made with it are built into one set of answers,
    // signed from the first.
    let new_keys = engine.hold_keys(gtm_dns::dnssec::keys::keyring_of(kv));
    let (installed, built) = install_config(engine, machine, kv, handled);
    if new_keys && !built {
        engine.resign();
    }
    engine
        .dns()
        .cookies
        .install(machine::cookies::secrets_of(kv));
    // After the configuration, which the operator state is checked against.
    if machine::has_config(kv) {
        engine.set_operator(&machine::operator::state_of(kv));
    }
    set_inputs(engine, kv);
    installed
}

/// Hands the committed health inputs of `kv` to the engine's probers.
pub(super) fn set_inputs(engine: &Engine, kv: &Map) {
    use machine::inputs::{ALERTS_KEY, PUSHES_KEY};
    engine.set_inputs([kv.get(PUSHES_KEY), kv.get(ALERTS_KEY)], || {
        machine::inputs::state_of(kv)
    });
}

/// Hands the configuration of `kv` to the engine, as [`install`] does;
/// and whether the engine built its answers from it.
fn install_config(
    engine: &Engine,
    machine: &GtmMachine,
    kv: &Map,
    handled: Option<Handled>,
) -> (Option<Handled>, bool) {
    let Some(value) = machine::config_value(kv) else {
        return (None, false);
    };
    let version = machine::version_of(kv);
    if handled.as_ref().is_some_and(|h| h.is(version, value)) {
        return (None, false);
    }
    let now = Handled {
        version,
        hash: machine::text_hash(value),
        value: Some(value.clone()),
        zone_versions: machine::zone_versions(kv),
    };
    // The state machine parsed and compiled this text when it applied the
    // command: the engine takes that, not a parse of its own (taken even
    // when handled, so the compiled form is not kept for nothing).
    let parsed = machine.parsed(now.hash);
    if handled.is_some_and(|h| {
        (h.version, h.hash, &h.zone_versions) == (now.version, now.hash, &now.zone_versions)
    }) {
        // Handled before this device kept the value (a restart). Kept by
        // a gtm before zone versions, it is installed again with them.
        return (Some(now), false);
    }
    let Some(parts) = machine::config_parts(kv) else {
        // Never so in a map the machine wrote; said rather than served
        // short.
        engine.install_failed(
            version,
            "a part of its text is missing from the replicated map",
        );
        return (Some(now), false);
    };
    let kept = gtm_cluster::KeptConfig {
        version,
        parts,
        zone_versions: now.zone_versions.clone().into_iter().collect(),
    };
    // Installed or not (degraded), this version is handled: a later state
    // with the same configuration does not report it again.
    let built = engine.apply_committed(kept, parsed).is_ok();
    if built {
        let text = match machine::history_summary(kv, version) {
            Some(e) => format!(
                "configuration version {version} applied: {} by {} ({} changes)",
                e.what,
                e.actor,
                e.change_count()
            ),
            None => format!("configuration version {version} installed"),
        };
        engine.record_event(
            EventKind::Config,
            Severity::Info,
            format!("version {version}"),
            text,
        );
        // Durable before the version counts as installed (and a write that
        // waits for it is answered): a crash right after keeps its event.
        engine.flush_storage();
    }
    (Some(now), built)
}
