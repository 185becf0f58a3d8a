//! `gtm completions SHELL`: a completion script generated from the command
//! line's own definition.

use anyhow::Result;

use super::Cli;

pub(super) fn run(shell: clap_complete::Shell) -> Result<()> {
    clap_complete::generate(
        shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "gtm",
        &mut std::io::stdout(),
    );
    Ok(())
}
