//! `gtm manpages DIR` (hidden): one man page per command and subcommand,
//! generated from the command line's own definition, for the package
//! (scripts/package.sh gzips them into /usr/share/man/man1).

use std::path::Path;

use anyhow::{Context, Result};

/// `gtm manpages DIR`: writes the pages and says how many.
pub(super) fn run(dir: &Path) -> Result<()> {
    let n = write(dir)?;
    eprintln!("{n} man pages written to {}", dir.display());
    Ok(())
}

/// Writes `gtm.1`, `gtm-serve.1`, `gtm-record-drain.1`, ... into `dir`;
/// returns how many.
pub fn write(dir: &Path) -> Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut command = <super::Cli as clap::CommandFactory>::command();
    command.build();
    write_page(dir, &command)
}

/// Built, each subcommand's display name is its page's name, e.g.
/// `gtm-record-drain`, and its synopsis says `gtm record drain`.
fn write_page(dir: &Path, command: &clap::Command) -> Result<usize> {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name());
    let mut text = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut text)
        .with_context(|| format!("rendering the man page of {name}"))?;
    let file = dir.join(format!("{name}.1"));
    std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    let mut written = 1;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        written += write_page(dir, sub)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_page_per_command_and_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let n = super::write(dir.path()).unwrap();
        assert!(n > 20, "{n} pages");
        let serve = std::fs::read_to_string(dir.path().join("gtm-serve.1")).unwrap();
        assert!(serve.contains("gtm\\-serve"), "{serve}");
        assert!(serve.contains("config"), "{serve}");
        assert!(dir.path().join("gtm-cluster-init.1").exists());
        assert!(!dir.path().join("gtm-manpages.1").exists());
    }
}
