//! Running `gtm serve` as a system service: the signals it obeys, a reload
//! of the node settings, telling the service manager where the device
//! stands (sd_notify), and the process-wide log setup a reload changes.

pub mod logging;
pub mod notify;

use std::path::Path;

use anyhow::{Context, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::device::Device;
use gtm_model::node::NodeSettings;

/// What a signal asks of `gtm serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// SIGHUP: re-read the node settings and apply what can change live.
    Reload,
    /// SIGTERM or SIGINT: stop gracefully.
    Stop,
}

/// The signals `gtm serve` handles, installed once at start.
#[derive(Debug)]
pub struct Signals {
    hangup: Signal,
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    pub fn install() -> Result<Self> {
        let install = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("cannot install a {name} handler"))
        };
        Ok(Self {
            hangup: install(SignalKind::hangup(), "SIGHUP")?,
            terminate: install(SignalKind::terminate(), "SIGTERM")?,
            interrupt: install(SignalKind::interrupt(), "SIGINT")?,
        })
    }

    /// The next request.
    pub async fn next(&mut self) -> Request {
        tokio::select! {
            _ = self.hangup.recv() => Request::Reload,
            _ = self.terminate.recv() => Request::Stop,
            _ = self.interrupt.recv() => Request::Stop,
        }
    }
}

/// Re-reads the node file at `path` and applies what can change without a
/// restart: the log filter (`log_level`), the TLS certificate, key and CA
/// (the API's and the peer clients'), the probe fences. A file that does
/// not read or parse, or TLS files that do not load, change nothing: the
/// error is logged naming the file, and the device goes on as it was.
/// Returns the settings read when they were applied (a later restart of
/// the device uses them).
pub fn reload(
    device: &Device,
    current: &NodeSettings,
    path: Option<&Path>,
    notifier: &notify::Notifier,
) -> Option<NodeSettings> {
    notifier.reloading();
    let applied = match path {
        Some(path) => apply(device, current, path)
            .inspect(|_| tracing::info!(file = %path.display(), "node settings reloaded"))
            .map_err(|e| {
                tracing::error!(file = %path.display(), error = %format!("{e:#}"), "reload failed: the device keeps its previous settings");
            })
            .ok(),
        None => {
            // The demo has no node file: the environment's filter only.
            if let Err(e) = logging::reload(None) {
                tracing::error!(error = %e, "reloading the log filter failed");
            }
            tracing::info!("reloaded (no node file: the log filter only)");
            None
        }
    };
    notifier.notify("READY=1");
    applied
}

fn apply(device: &Device, current: &NodeSettings, path: &Path) -> Result<NodeSettings> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let settings = NodeSettings::parse(&text).map_err(|e| anyhow::anyhow!("{e}"))?;
    device.reload(&settings)?;
    logging::reload(settings.log_level.as_deref())?;
    if settings.log_format != current.log_format {
        tracing::warn!("log_format changes at the next start; the reload kept the current format");
    }
    Ok(settings)
}
