//! `gtm config history|show|diff|rollback` and `gtm command status`: the
//! configuration history kept in the replicated state, and the fate of a
//! command (after an `outcome unknown` answer).

use anyhow::Result;
use clap::Subcommand;

use super::{
    client::Client,
    output::{format_ms, print_apply, table},
};
use gtm_api::{ApplyResult, CommandStatus, ConfigDiff, Fate, HistoryItem, RollbackRequest};

#[derive(Debug, Subcommand)]
pub enum CommandCmd {
    /// What became of a command: applied (with its version), rejected (with
    /// the error) or unknown (not applied here, yet or at all).
    #[command(after_help = "Example:\n  gtm command status 5f0c2e7a9b1d4c3e8f6a0b2c4d6e8f01")]
    Status {
        /// The 32 hex digits an `outcome unknown` answer named.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `gtm config history`: newest first; `--changes`: each version with its
/// field-level changes under it.
pub(super) async fn history(client: &Client, changes: bool, json: bool) -> Result<()> {
    let items: Vec<HistoryItem> = client
        .send(client.http.get(client.url("/api/v1/config/history")))
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if changes {
        for i in &items {
            println!(
                "version {}  {}  {}  {}",
                i.version,
                format_ms(i.time_ms),
                i.actor,
                i.what
            );
            i.changes.iter().for_each(|c| println!("  {c}"));
        }
        return Ok(());
    }
    let rows: Vec<[String; 5]> = items
        .iter()
        .map(|i| {
            [
                i.version.to_string(),
                format_ms(i.time_ms),
                i.actor.to_string(),
                i.what.clone(),
                i.change_count.to_string(),
            ]
        })
        .collect();
    table(&["VERSION", "TIME", "WHO", "WHAT", "CHANGES"], &rows);
    Ok(())
}

/// `gtm config show [--version N]`: a version's TOML (the applied one
/// without `--version`).
pub(super) async fn show(client: &Client, version: Option<u64>) -> Result<()> {
    let mut req = client.http.get(client.url("/api/v1/config"));
    if let Some(v) = version {
        req = req.query(&[("version", v)]);
    }
    print!("{}", client.text(req).await?);
    Ok(())
}

/// `gtm config diff A B`: field-level, from A to B.
pub(super) async fn diff(client: &Client, from: u64, to: u64, json: bool) -> Result<()> {
    let diff: ConfigDiff = client
        .send(
            client
                .http
                .get(client.url("/api/v1/config/diff"))
                .query(&[("from", from), ("to", to)]),
        )
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&diff)?);
    } else if diff.changes.is_empty() {
        println!("no changes from version {from} to {to}");
    } else {
        diff.changes.iter().for_each(|c| println!("{c}"));
    }
    Ok(())
}

/// `gtm config rollback N [--dry-run]`.
pub(super) async fn rollback(
    client: &Client,
    version: u64,
    dry_run: bool,
    force: bool,
) -> Result<()> {
    let mut req = client
        .http
        .post(client.url("/api/v1/config/rollback"))
        .json(&RollbackRequest { version });
    if dry_run {
        req = req.query(&[("dry_run", "true")]);
    }
    if force {
        req = req.query(&[("force", "true")]);
    }
    let result: ApplyResult = client.send(req).await?;
    print_apply(&result);
    Ok(())
}

pub(super) async fn command(client: &Client, cmd: &CommandCmd) -> Result<()> {
    let CommandCmd::Status { id, json } = cmd;
    let path = format!("/api/v1/commands/{}", id.trim());
    let status: CommandStatus = client.send(client.http.get(client.url(&path))).await?;
    if *json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(());
    }
    match status.status {
        Fate::Applied => {
            let version = status.version.unwrap_or_default();
            if status.changed == Some(false) {
                println!(
                    "command {}: applied, changed nothing (configuration version {version})",
                    status.id
                );
            } else {
                println!("command {}: applied as version {version}", status.id);
            }
            status.changes.iter().for_each(|c| println!("{c}"));
        }
        Fate::Rejected => {
            let why = status.error.map_or_else(String::new, |e| {
                std::iter::once(e.message)
                    .chain(e.errors)
                    .collect::<Vec<_>>()
                    .join("\n  ")
            });
            println!(
                "command {}: rejected, nothing was applied: {why}",
                status.id
            );
        }
        Fate::Unknown => println!(
            "command {}: unknown on this device: not applied here (yet); if it was proposed long ago, it never committed or is older than the outcomes kept",
            status.id
        ),
    }
    Ok(())
}
