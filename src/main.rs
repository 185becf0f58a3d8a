//! The `gtm` binary: parse the command line, set up logging, run.

use clap::Parser;

/// mimalloc, not glibc's malloc: applying a large configuration frees and
/// makes millions of small objects, which glibc spends its time
/// consolidating and keeps as resident memory (docs/decisions.md,
/// "Allocator"). A build for heap profiles (`RUSTFLAGS='--cfg
/// gtm_heaptrack'`) keeps the system's, which heaptrack sees.
#[cfg(not(gtm_heaptrack))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its `mimalloc.h`, v2 and v3 alike;
/// the crate's bindings do not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

use gtm_model::node::{LogFormat, NodeSettings};

fn main() {
    // Freed pages go back to the system 1 ms after they are freed, not
    // mimalloc's 10 ms: a configuration swap frees hundreds of MiB that a
    // longer delay keeps resident. Not at once (0): a build that frees
    // and makes pages by the million then spends a third of its time in
    // madvise and page faults (docs/decisions.md, "Allocator"). An
    // operator's MIMALLOC_PURGE_DELAY is left to mimalloc.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an option of the allocator; valid at any time.
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1);
        }
    }
    let cli = gtm::cli::Cli::parse();
    if !matches!(cli.command, gtm::cli::Command::Serve { .. }) {
        // A client command piped into `head` ends quietly, like other tools.
        // SAFETY: restoring the default disposition of SIGPIPE before any
        // thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // The node file's log settings, when it reads; one that does not is
    // reported by `serve` itself.
    let settings = match &cli.command {
        gtm::cli::Command::Serve {
            config: Some(path), ..
        } => std::fs::read_to_string(path)
            .ok()
            .and_then(|text| NodeSettings::parse(&text).ok()),
        _ => None,
    };
    gtm::service::logging::init(
        settings.as_ref().and_then(|s| s.log_level.as_deref()),
        settings.as_ref().map_or(LogFormat::Text, |s| s.log_format),
    );
    // With `dns_cpus`, every thread but the UDP DNS workers runs on the
    // CPUs left: set here, before any thread starts, so that all inherit
    // it. A split that cannot be made is reported by `serve` itself.
    if let Some(Ok(Some(split))) = settings
        .as_ref()
        .map(|s| gtm_dns::cpus::Split::new(&s.dns_cpus))
        && let Err(e) = gtm_dns::cpus::pin_current_thread(&split.rest)
    {
        tracing::warn!(error = %e, "cannot keep gtm's threads off the DNS CPUs");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("starting the async runtime");
    if let Err(e) = runtime.block_on(gtm::cli::run(cli)) {
        eprintln!("error: {e:#}");
        std::process::exit(gtm::cli::exit_code(&e));
    }
}
