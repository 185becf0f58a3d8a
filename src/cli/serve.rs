//! `gtm serve`: run a device until SIGTERM; SIGHUP reloads what can be
//! reloaded; the service manager is told READY and fed its watchdog.

use std::path::PathBuf;

use anyhow::Result;

use crate::device::Device;
use gtm_model::node::{NodeSettings, default_data_dir};

pub(super) async fn run(config: Option<PathBuf>, data_dir: Option<PathBuf>) -> Result<()> {
    let (mut settings, demo) = match &config {
        Some(path) => (super::node::load(path)?, false),
        None => (
            NodeSettings::demo(data_dir.unwrap_or_else(default_data_dir)),
            true,
        ),
    };
    let notifier = crate::service::notify::Notifier::from_env();
    let mut signals = crate::service::Signals::install()?;
    let mut device = Device::start(settings.clone(), demo).await?;
    notifier.notify("READY=1");
    let watchdog = notifier.watchdog_interval();
    let mut starved = false;
    let mut ticks = tokio::time::interval(watchdog.unwrap_or(std::time::Duration::from_secs(3600)));
    // For a person at a terminal; JSON logs stay JSON lines only.
    let banner = settings.log_format == gtm_model::node::LogFormat::Text;
    if banner {
        eprintln!(
            "gtm serving DNS on {} and the API on {}://{} (data directory has the token)",
            device
                .dns_addrs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            if settings.tls_cert.is_some() {
                "https"
            } else {
                "http"
            },
            device.api_addr
        );
    }
    if demo && let Some(addr) = device.dns_addrs.first() {
        eprintln!(
            "try: dig @{} -p {} www.example.test A",
            addr.ip(),
            addr.port()
        );
    }
    loop {
        tokio::select! {
            request = signals.next() => match request {
                crate::service::Request::Stop => break,
                crate::service::Request::Reload => {
                    if let Some(new) = crate::service::reload(&device, &settings, config.as_deref(), &notifier) {
                        settings = new;
                    }
                }
            },
            _ = ticks.tick(), if watchdog.is_some() => {
                // Fed only while the device serves: a stuck or dead worker
                // lets the manager restart it.
                if device.alive() {
                    notifier.notify("WATCHDOG=1");
                } else if !starved {
                    // Said once: the manager's restart follows.
                    starved = true;
                    tracing::error!("a DNS worker or the API listener has ended: the watchdog is no longer fed");
                }
            }
            () = device.reopened() => {
                // Started on a copy of its store (read-only data directory),
                // and the directory can be written again: start on the store.
                device.stop().await;
                device = Device::start(settings.clone(), demo).await?;
                tracing::warn!("restarted on the data directory's store: writes are accepted again");
            }
        }
    }
    notifier.notify("STOPPING=1");
    tracing::info!("stopping: requests in flight finish, the store is flushed");
    device.stop().await;
    tracing::info!("stopped");
    Ok(())
}
