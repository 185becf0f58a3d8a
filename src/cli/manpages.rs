//! `gtm manpages DIR` (hidden): the man pages, for the package
//! (scripts/package.sh gzips them into /usr/share/man).
//!
//! - `DIR/man1`: one page per command and subcommand, generated from the
//!   command line's own definition, each with EXIT STATUS (from
//!   [`EXIT_STATUS`], which `exit_code` returns), ENVIRONMENT (every
//!   variable clap reads, found by walking the command, and the few the
//!   code reads itself, by their constants) and FILES.
//! - `DIR/man5`: gtm.toml(5), the replicated configuration, and
//!   gtm-node.toml(5), the node file, made from docs/configuration.md by
//!   [`super::roff`]: the pages and the document are one text.

use std::{collections::BTreeMap, fmt::Write as _, path::Path};

use anyhow::{Context, Result};

use super::client::{DEFAULT_NODE_FILE, EXIT_STATUS, NODE_FILE_ENV};
use super::roff;
use crate::device::{API_FILE, TOKEN_FILE};
use crate::service::logging::{FILTER_ENV, NO_COLOR_ENV};

/// The configuration reference both section-5 pages are made from.
const CONFIGURATION_MD: &str = include_str!("../../docs/configuration.md");

/// The heading of docs/configuration.md's node file section: gtm-node.toml(5).
const NODE_SECTION: &str = "## Node file";

/// `gtm manpages DIR`: writes the pages and says how many.
pub(super) fn run(dir: &Path) -> Result<()> {
    let n = write(dir)?;
    eprintln!("{n} man pages written to {}", dir.display());
    Ok(())
}

/// Writes `man1/gtm.1`, `man1/gtm-serve.1`, ..., `man5/gtm.toml.5` and
/// `man5/gtm-node.toml.5` under `dir`; returns how many.
pub fn write(dir: &Path) -> Result<usize> {
    let man1 = dir.join("man1");
    let man5 = dir.join("man5");
    for d in [&man1, &man5] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let mut command = <super::Cli as clap::CommandFactory>::command();
    command.build();
    let common = common_sections(&command);
    let mut written = write_page(&man1, &command, &common)?;
    let version = command.get_version().unwrap_or_default();
    for (name, text) in file_pages(version)? {
        let file = man5.join(format!("{name}.5"));
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
        written += 1;
    }
    Ok(written)
}

/// Built, each subcommand's display name is its page's name, e.g.
/// `gtm-record-drain`, and its synopsis says `gtm record drain`.
fn write_page(dir: &Path, command: &clap::Command, common: &str) -> Result<usize> {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name());
    let mut text = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut text)
        .with_context(|| format!("rendering the man page of {name}"))?;
    let text = with_sections(&String::from_utf8_lossy(&text), common);
    let file = dir.join(format!("{name}.1"));
    std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    let mut written = 1;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        written += write_page(dir, sub, common)?;
    }
    Ok(written)
}

/// `page` with `sections` put before its VERSION (or AUTHORS) section,
/// where man pages keep them, or at its end.
fn with_sections(page: &str, sections: &str) -> String {
    let at = [".SH VERSION", ".SH AUTHORS", ".SH AUTHOR"]
        .iter()
        .filter_map(|h| page.find(&format!("\n{h}")).map(|i| i + 1))
        .min();
    match at {
        Some(at) => format!(
            "{}{sections}{}",
            page.get(..at).unwrap_or(page),
            page.get(at..).unwrap_or("")
        ),
        None => format!("{page}{sections}"),
    }
}

/// EXIT STATUS, ENVIRONMENT, FILES and SEE ALSO: the same on every
/// section-1 page (every command takes the global options, and reads the
/// same files).
fn common_sections(root: &clap::Command) -> String {
    let mut out = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in EXIT_STATUS {
        let _ = writeln!(out, ".TP\n\\fB{code}\\fR\n{}", roff::escape(meaning));
    }
    out.push_str(".SH ENVIRONMENT\n");
    for (var, text) in environment(root) {
        let _ = writeln!(out, ".TP\n\\fB{}\\fR\n{text}", roff::escape(&var));
    }
    out.push_str(".SH FILES\n");
    for (path, text) in files() {
        let _ = writeln!(
            out,
            ".TP\n\\fI{}\\fR\n{}",
            roff::escape(&path),
            roff::escape(&text)
        );
    }
    out.push_str(
        ".SH \"SEE ALSO\"\n\\fBgtm\\fR(1), \\fBgtm\\-node.toml\\fR(5), \\fBgtm.toml\\fR(5), \
         \\fBsystemctl\\fR(1), \\fBjournalctl\\fR(1)\n",
    );
    out
}

/// Every environment variable the CLI and the service read, with what it
/// does (roff): those clap reads (an option's default), found in the
/// command tree, then those the code reads itself.
fn environment(root: &clap::Command) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    clap_env(root, &mut vars);
    vars.insert(
        NODE_FILE_ENV.to_string(),
        roff::escape(&format!(
            "The node file read when none is given (default {DEFAULT_NODE_FILE}): by gtm node \
             check without FILE, and by every client command for the node file's data_dir, \
             where it finds the local device."
        )),
    );
    for var in FILTER_ENV {
        vars.insert(
            var.to_string(),
            roff::escape(&format!(
                "gtm serve: which log lines are written, e.g. info,gtm::health=debug; wins over \
                 the node file's log_level ({} wins over {}). A filter that does not parse is \
                 reported and ignored.",
                FILTER_ENV[0], FILTER_ENV[1]
            )),
        );
    }
    vars.insert(
        NO_COLOR_ENV.to_string(),
        roff::escape("Set to anything, gtm serve logs without colour even on a terminal."),
    );
    vars
}

/// The variables clap reads for options (`#[arg(env = ...)]`), anywhere in
/// the command tree, each with the option it stands for and its help.
fn clap_env(command: &clap::Command, vars: &mut BTreeMap<String, String>) {
    for arg in command.get_arguments() {
        let Some(var) = arg.get_env() else { continue };
        let option = arg
            .get_long()
            .map_or_else(|| arg.get_id().to_string(), |l| format!("--{l}"));
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        vars.insert(
            var.to_string_lossy().into_owned(),
            format!(
                "The default of \\fB{}\\fR: {}",
                roff::escape(&option),
                roff::escape(&help)
            ),
        );
    }
    for sub in command.get_subcommands() {
        clap_env(sub, vars);
    }
}

/// The files the service and the CLI read or write, with what they are.
fn files() -> Vec<(String, String)> {
    vec![
        (
            DEFAULT_NODE_FILE.to_string(),
            format!(
                "The node file of the packaged service (gtm serve --config {DEFAULT_NODE_FILE}), \
                 checked by gtm node check before every start, described in gtm-node.toml(5). \
                 The CLI reads its data_dir to find the local device ({NODE_FILE_ENV} names \
                 another)."
            ),
        ),
        (
            "/var/lib/gtm".to_string(),
            "The packaged service's data directory (its data_dir; the unit's StateDirectory, \
             owned by gtm, mode 0700): the store, the cluster identity, the imported GeoIP \
             database. A backup of it holds the zones' DNSSEC keys."
                .to_string(),
        ),
        (
            format!(
                "DATA_DIR/{API_FILE}, DATA_DIR/{TOKEN_FILE}, DATA_DIR/{}",
                gtm_node::tls::CA_FILE
            ),
            "Where the CLI finds the local device: its API address, its API token (which acts \
             as admin: secret) and the certificates it trusts for an https API."
                .to_string(),
        ),
        (
            "~/.local/share/gtm".to_string(),
            "The data directory of gtm serve without --config (the demo), and the CLI's when no \
             node file exists and neither --data-dir nor GTM_DATA_DIR is given."
                .to_string(),
        ),
        (
            "/lib/systemd/system/gtm.service".to_string(),
            "The packaged unit: runs gtm node check, then gtm serve, as user gtm. Change it \
             with a drop-in (systemctl edit gtm)."
                .to_string(),
        ),
        (
            "/usr/share/doc/gtm/".to_string(),
            "The operator's documentation: operations.md (install, upgrade, backup), the \
             configuration, the CLI, the cluster, health checks and the API."
                .to_string(),
        ),
    ]
}

/// gtm.toml(5) and gtm-node.toml(5): docs/configuration.md, its node file
/// section on the second page and the rest on the first.
fn file_pages(version: &str) -> Result<[(&'static str, String); 2]> {
    let start = CONFIGURATION_MD
        .find(&format!("\n{NODE_SECTION}\n"))
        .map(|i| i + 1)
        .context("docs/configuration.md has no node file section")?;
    let after = CONFIGURATION_MD.get(start..).unwrap_or("");
    // The node section runs to the next `## ` heading.
    let len = after
        .get(NODE_SECTION.len()..)
        .and_then(|rest| rest.find("\n## "))
        .map_or(after.len(), |i| NODE_SECTION.len() + i + 1);
    let node = after.get(..len).unwrap_or("");
    let config = format!(
        "{}{}",
        CONFIGURATION_MD.get(..start).unwrap_or(""),
        after.get(len..).unwrap_or("")
    );
    let node_body = node.get(NODE_SECTION.len()..).unwrap_or("");
    let header = |name: &str| {
        format!(
            ".TH {} 5 \"\" {} \"File Formats\"\n",
            roff::quoted(&name.to_uppercase()),
            roff::quoted(&format!("gtm {version}"))
        )
    };
    let see_also = ".SH \"SEE ALSO\"\n\\fBgtm\\fR(1), \\fBgtm\\-config\\fR(1), \\fBgtm\\-node\\fR(1), \
                    \\fBgtm\\-serve\\fR(1), \\fBgtm\\-node.toml\\fR(5), \\fBgtm.toml\\fR(5); \
                    /usr/share/doc/gtm/configuration.md.gz, of which these pages are made\n";
    let gtm_toml = format!(
        "{}.SH NAME\ngtm.toml \\- the replicated configuration of gtm: datacenters, checks, \
         scenarios, services, domains and records\n.SH SYNOPSIS\n\\fBgtm config check\\fR \
         \\fIFILE\\fR\n.br\n\\fBgtm config apply\\fR \\fIFILE\\fR\n.SH DESCRIPTION\n{}{see_also}",
        header("gtm.toml"),
        roff::blocks(&config),
    );
    let gtm_node_toml = format!(
        "{}.SH NAME\ngtm\\-node.toml \\- a gtm device's own settings (the node file)\n\
         .SH SYNOPSIS\n\\fI{}\\fR\n.br\n\\fBgtm serve \\-\\-config\\fR \\fIFILE\\fR\n.br\n\
         \\fBgtm node check\\fR [\\fIFILE\\fR]\n.SH DESCRIPTION\n.PP\nThe node file is \
         TOML: one key per line, never replicated; the replicated configuration is in \
         \\fBgtm.toml\\fR(5). Its keys:\n{}.SH FILES\n.TP\n\\fI{}\\fR\nThe node file of the \
         packaged service; \\fB{}\\fR names another for gtm node check and the CLI.\n{see_also}",
        header("gtm-node.toml"),
        roff::escape(DEFAULT_NODE_FILE),
        roff::blocks(node_body),
        roff::escape(DEFAULT_NODE_FILE),
        roff::escape(NODE_FILE_ENV),
    );
    Ok([("gtm.toml", gtm_toml), ("gtm-node.toml", gtm_node_toml)])
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_page_per_command_and_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let n = super::write(dir.path()).unwrap();
        assert!(n > 20, "{n} pages");
        let man1 = dir.path().join("man1");
        let serve = std::fs::read_to_string(man1.join("gtm-serve.1")).unwrap();
        assert!(serve.contains("gtm\\-serve"), "{serve}");
        assert!(serve.contains("config"), "{serve}");
        assert!(man1.join("gtm-cluster-init.1").exists());
        assert!(!man1.join("gtm-manpages.1").exists());
    }

    /// Every page says every exit code, every variable clap reads and the
    /// node file, before its VERSION section.
    #[test]
    fn every_page_has_exit_status_environment_and_files() {
        let dir = tempfile::tempdir().unwrap();
        super::write(dir.path()).unwrap();
        let mut root = <crate::cli::Cli as clap::CommandFactory>::command();
        root.build();
        let mut clap_vars = Vec::new();
        for arg in root.get_arguments() {
            if let Some(var) = arg.get_env() {
                clap_vars.push(var.to_string_lossy().into_owned());
            }
        }
        for var in [
            "GTM_DATA_DIR",
            "GTM_API",
            "GTM_TOKEN",
            "GTM_CA",
            "GTM_TIMEOUT",
        ] {
            assert!(clap_vars.iter().any(|v| v == var), "{var} in {clap_vars:?}");
        }
        for page in ["gtm.1", "gtm-status.1", "gtm-record-drain.1", "gtm-serve.1"] {
            let text = std::fs::read_to_string(dir.path().join("man1").join(page)).unwrap();
            let exit = text.find(".SH \"EXIT STATUS\"").expect(page);
            let env = text.find(".SH ENVIRONMENT").expect(page);
            let files = text.find(".SH FILES").expect(page);
            assert!(exit < env && env < files, "{page}");
            if let Some(version) = text.find(".SH VERSION") {
                assert!(files < version, "{page}");
            }
            for (code, _) in super::EXIT_STATUS {
                assert!(
                    text.contains(&format!(".TP\n\\fB{code}\\fR\n")),
                    "{page}: {code}"
                );
            }
            for var in clap_vars.iter().map(String::as_str).chain([
                "GTM_NODE_FILE",
                "GTM_LOG",
                "RUST_LOG",
                "NO_COLOR",
            ]) {
                let var = var.replace('-', "\\-");
                assert!(
                    text.contains(&format!(".TP\n\\fB{var}\\fR\n")),
                    "{page}: {var}"
                );
            }
            assert!(text.contains("/etc/gtm/node.toml"), "{page}");
            assert!(text.contains("/var/lib/gtm"), "{page}");
        }
    }

    /// The exit codes the CLI returns are the ones its pages list.
    #[test]
    fn the_exit_codes_listed_are_those_returned() {
        use crate::cli::CliError;
        let listed: Vec<i32> = super::EXIT_STATUS.iter().map(|(c, _)| *c).collect();
        assert_eq!(listed, (0..=6).collect::<Vec<_>>());
        let errors = [
            (CliError::BadInput(String::new()), 2),
            (CliError::Unreachable(String::new()), 3),
            (CliError::NoQuorum(String::new()), 4),
            (CliError::NotFound(String::new()), 5),
            (CliError::OutcomeUnknown(String::new()), 6),
        ];
        for (e, code) in errors {
            assert_eq!(crate::cli::exit_code(&e.into()), code);
        }
        assert_eq!(crate::cli::exit_code(&anyhow::anyhow!("x")), 1);
    }

    /// The section-5 pages are docs/configuration.md: the node file's keys
    /// on gtm-node.toml(5), the rest on gtm.toml(5), none on both.
    #[test]
    fn the_file_pages_are_made_from_the_configuration_reference() {
        let dir = tempfile::tempdir().unwrap();
        super::write(dir.path()).unwrap();
        let man5 = dir.path().join("man5");
        let node = std::fs::read_to_string(man5.join("gtm-node.toml.5")).unwrap();
        let config = std::fs::read_to_string(man5.join("gtm.toml.5")).unwrap();
        assert!(
            node.starts_with(".TH GTM\\-NODE.TOML 5 ") || node.starts_with(".TH GTM-NODE.TOML 5 "),
            "{node}"
        );
        for key in [
            "data_dir",
            "dns_listen",
            "tls_ca",
            "log_format",
            "probe_networks",
            "dnstap.sample",
        ] {
            let tag = format!(".TP\n\\fB{key}\\fR\n");
            assert!(node.contains(&tag), "{key} in gtm-node.toml(5)");
            assert!(!config.contains(&tag), "{key} in gtm.toml(5)");
        }
        assert!(node.contains("gtm node check"), "{node}");
        for heading in [
            ".SH [GEOIP]",
            ".SH [[DOMAIN.RECORD]]",
            ".SH \"DECISIONS WHERE",
        ] {
            assert!(config.contains(heading), "{heading} in gtm.toml(5)");
            assert!(!node.contains(heading), "{heading} in gtm-node.toml(5)");
        }
        for key in [
            "responses_per_second",
            "expect_status",
            "dcs_to_select",
            "fail_safe",
        ] {
            assert!(config.contains(&format!(".TP\n\\fB{key}\\fR\n")), "{key}");
        }
    }
}
