//! The process's log output on standard error (journald under systemd):
//! plain text without colour unless stderr is a terminal (and `NO_COLOR` is
//! unset), or JSON lines; a filter a reload can change.

use std::{io::IsTerminal, sync::OnceLock};

use tracing_subscriber::{
    EnvFilter, Layer, Registry, layer::SubscriberExt, reload, util::SubscriberInitExt,
};

use gtm_model::node::{LogFormat, parse_log_filter};

/// The filter without `GTM_LOG`, `RUST_LOG` or `log_level`. hickory_proto
/// warns once per malformed EDNS option it decodes (TCP): a log flood
/// anyone could trigger (gtm counts malformed queries and logs them
/// rate-limited). openraft logs every election step and membership change
/// at INFO: useful when debugging a cluster, noise otherwise.
pub const DEFAULT_FILTER: &str = "info,hickory_server=warn,hickory_proto=error,openraft=warn";

/// The variables that set the filter, the first set winning over the
/// node's `log_level` (ENVIRONMENT in the man pages).
pub const FILTER_ENV: [&str; 2] = ["GTM_LOG", "RUST_LOG"];

/// Set (to anything), the log has no colour even on a terminal
/// (<https://no-color.org>).
pub const NO_COLOR_ENV: &str = "NO_COLOR";

static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// The filter in force: `GTM_LOG`, else `RUST_LOG`, else `log_level` (the
/// node setting), else [`DEFAULT_FILTER`]. An environment variable that
/// does not parse is reported and skipped.
fn filter(log_level: Option<&str>) -> (EnvFilter, Option<String>) {
    let mut warning = None;
    for var in FILTER_ENV {
        if let Ok(value) = std::env::var(var) {
            match parse_log_filter(&value) {
                Ok(f) => return (f, warning),
                Err(e) => warning = Some(format!("{var}=\"{value}\" ignored: {e}")),
            }
        }
    }
    let f = log_level
        .and_then(|l| parse_log_filter(l).ok())
        .unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER));
    (f, warning)
}

/// Installs the process's subscriber (once, at start).
pub fn init(log_level: Option<&str>, format: LogFormat) {
    let (env_filter, warning) = filter(log_level);
    let (filter_layer, handle) = reload::Layer::new(env_filter);
    let colour = std::io::stderr().is_terminal() && std::env::var_os(NO_COLOR_ENV).is_none();
    let output = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .boxed(),
    };
    let subscriber = tracing_subscriber::registry()
        .with(filter_layer)
        .with(output);
    // `try_init` also bridges the `log` crate's records (sled, hickory).
    if subscriber.try_init().is_ok() {
        let _ = FILTER.set(handle);
    }
    if let Some(w) = warning {
        tracing::warn!("{w}");
    }
}

/// Applies a new `log_level` (a reload). The environment variables still
/// win, as at start.
pub fn reload(log_level: Option<&str>) -> Result<(), tracing_subscriber::reload::Error> {
    let Some(handle) = FILTER.get() else {
        return Ok(());
    };
    let (f, _) = filter(log_level);
    handle.reload(f)
}
