//! The `gtm` binary: parse the command line, set up logging, run.

use clap::Parser;

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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GTM_LOG")
                .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
                // hickory_proto warns once per malformed EDNS option it
                // decodes (TCP): a log flood anyone could trigger. gtm
                // counts malformed queries and logs them rate-limited.
                .unwrap_or_else(|_| "info,hickory_server=warn,hickory_proto=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("starting the async runtime");
    if let Err(e) = runtime.block_on(gtm::cli::run(cli)) {
        eprintln!("error: {e:#}");
        std::process::exit(gtm::cli::exit_code(&e));
    }
}
