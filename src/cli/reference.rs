//! The CLI reference (docs/cli-reference.md), generated from the command
//! line's own definition so it cannot drift from it: every command path,
//! what it does, its arguments with their help, and its example. A test
//! fails when the committed file differs (`GTM_WRITE_CLI_REFERENCE=1 cargo
//! test --lib cli_reference` rewrites it).

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command};

/// Where the generated reference is committed, from the repository root.
pub const PATH: &str = "docs/cli-reference.md";

/// The whole reference, as Markdown.
pub fn markdown() -> String {
    let mut root = <super::Cli as clap::CommandFactory>::command();
    root.build();
    let mut out = String::from(
        "# `gtm` command reference\n\n\
         Generated from the command line's definition (`src/cli/args.rs` and the\n\
         noun modules beside it); do not edit: `GTM_WRITE_CLI_REFERENCE=1 cargo test\n\
         --lib cli_reference` rewrites it. The guide is [cli.md](cli.md).\n\n",
    );
    let _ = writeln!(out, "{}\n", text(root.get_about()));
    out.push_str("## Options of every command\n\n");
    args_table(&mut out, root.get_arguments().filter(|a| listed(a)));
    out.push_str("## Exit status\n\n| code | meaning |\n|---|---|\n");
    for (code, meaning) in super::client::EXIT_STATUS {
        let _ = writeln!(out, "| {code} | {} |", cell(meaning));
    }
    out.push('\n');
    for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
        command(&mut out, sub, "gtm");
    }
    out
}

/// One command's section, then its subcommands'.
fn command(out: &mut String, cmd: &Command, parent: &str) {
    let path = format!("{parent} {}", cmd.get_name());
    let _ = writeln!(out, "## `{path}`\n");
    if cmd.is_hide_set() {
        out.push_str("Hidden from `gtm --help`.\n\n");
    }
    let about = cmd.get_long_about().or(cmd.get_about());
    let _ = writeln!(out, "{}\n", text(about));
    let mut usage = cmd.clone().render_usage().to_string();
    // Built, a subcommand's usage names its path; the prefix is clap's.
    if let Some(rest) = usage.strip_prefix("Usage: ") {
        usage = rest.to_string();
    }
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let own: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| listed(a) && !a.is_global_set())
        .collect();
    if !own.is_empty() {
        args_table(out, own.into_iter());
    }
    let subs: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        out.push_str("| subcommand | what it does |\n|---|---|\n");
        for s in &subs {
            let _ = writeln!(
                out,
                "| `{}` | {} |",
                s.get_name(),
                cell(&text(s.get_about()))
            );
        }
        out.push('\n');
    }
    let example = cmd.get_after_long_help().or(cmd.get_after_help());
    if let Some(example) = example {
        // "Example:" and the command lines under it, as a code block.
        let example = example.to_string();
        let mut lines = example.trim_end().lines();
        if let Some(title) = lines.next() {
            let body: Vec<&str> = lines.map(|l| l.strip_prefix("  ").unwrap_or(l)).collect();
            let _ = writeln!(out, "{title}\n\n```sh\n{}\n```\n", body.join("\n"));
        }
    }
    for s in subs {
        command(out, s, &path);
    }
}

/// A table of arguments: how each is written, its help, default,
/// environment variable and possible values.
fn args_table<'a>(out: &mut String, args: impl Iterator<Item = &'a Arg>) {
    out.push_str("| argument | meaning |\n|---|---|\n");
    for arg in args {
        let mut meaning = sentence(&text(arg.get_long_help().or(arg.get_help())));
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect();
        if !values.is_empty() && takes_value(arg) {
            let _ = write!(meaning, " Values: {}.", values.join(", "));
        }
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() && takes_value(arg) {
            let _ = write!(meaning, " Default: {}.", defaults.join(", "));
        }
        if let Some(env) = arg.get_env() {
            let _ = write!(meaning, " Environment: `{}`.", env.to_string_lossy());
        }
        let _ = writeln!(out, "| `{}` | {} |", spelling(arg), cell(meaning.trim()));
    }
    out.push('\n');
}

/// `--record <RECORD>`, `-n, --limit <N>`, `<ADDRESS>`.
fn spelling(arg: &Arg) -> String {
    let value = arg.get_value_names().and_then(|v| v.first()).map_or_else(
        || arg.get_id().as_str().to_ascii_uppercase(),
        |v| v.to_string(),
    );
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("--{l}"));
    }
    if names.is_empty() {
        return format!("<{value}>");
    }
    let names = names.join(", ");
    if takes_value(arg) {
        format!("{names} <{value}>")
    } else {
        names
    }
}

fn takes_value(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Set | ArgAction::Append)
}

/// clap's own `--help` and `--version` are left out.
fn listed(arg: &Arg) -> bool {
    !matches!(
        arg.get_action(),
        ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
    )
}

/// Help as a sentence, so that what the table adds after it reads apart.
fn sentence(s: &str) -> String {
    if s.is_empty() || s.ends_with('.') {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

fn text(s: Option<&clap::builder::StyledStr>) -> String {
    s.map(|s| s.to_string().trim().to_string())
        .unwrap_or_default()
}

/// A table cell: one line, pipes escaped.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// docs/cli-reference.md is what the code generates; a change to the
    /// command line regenerates it with `GTM_WRITE_CLI_REFERENCE=1 cargo
    /// test --lib cli_reference`.
    #[test]
    fn cli_reference_is_up_to_date() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(super::PATH);
        let generated = super::markdown();
        if std::env::var_os("GTM_WRITE_CLI_REFERENCE").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is out of date: run GTM_WRITE_CLI_REFERENCE=1 cargo test --lib cli_reference",
            super::PATH
        );
    }

    #[test]
    fn the_reference_names_every_command_with_its_example() {
        let md = super::markdown();
        for path in [
            "## `gtm record drain`",
            "## `gtm check test`",
            "## `gtm schedule add dc drain`",
        ] {
            assert!(md.contains(path), "{path} missing");
        }
        assert!(md.contains("Example:"), "examples are included");
        assert!(
            md.contains("`--data-dir <DATA_DIR>`"),
            "global options listed"
        );
    }
}
