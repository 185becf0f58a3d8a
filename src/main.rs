//! The `gtm` binary: parse the command line, set up logging, run.

use clap::Parser;

use gtm::model::node::{LogFormat, NodeSettings};

fn main() {
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("starting the async runtime");
    if let Err(e) = runtime.block_on(gtm::cli::run(cli)) {
        eprintln!("error: {e:#}");
        std::process::exit(gtm::cli::exit_code(&e));
    }
}
