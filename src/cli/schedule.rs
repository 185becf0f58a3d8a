//! `gtm schedule ...`: operator actions at a time (docs/cli.md, "Scheduled
//! changes"): `add --at TIME [--until TIME] <action>`, `list`, `cancel`.
//! The action is written as its own command: `gtm schedule add --at +30m dc
//! drain dc1`.

use anyhow::Result;
use clap::Subcommand;

use super::{
    client::Client,
    output::{format_ms, table},
};
use gtm_api::schedules::{ScheduleDryRun, ScheduleRequest, ScheduledAction};
use gtm_node::machine::schedule::{Schedule, ScheduleState};

#[derive(Debug, Subcommand)]
pub enum ScheduleCmd {
    /// Schedule an operator action. TIME: RFC 3339 with its offset
    /// (2026-12-01T02:00:00Z, 2026-12-01T03:00:00+01:00) or relative to the
    /// device's clock (+30m, +2h, +1h30m, +45s, +1d).
    Add {
        /// When the action fires.
        #[arg(long, value_name = "TIME")]
        at: String,
        /// Fire the reverse at this time: an undrain for a drain (and the
        /// reverse), the check's previous state for a check set.
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Only print the schedule it would be and what its action would
        /// change if it fired now (each record's answers, the records left
        /// with no answer, a check's or a hold's state); add nothing.
        #[arg(long)]
        dry_run: bool,
        /// Add it even if its action would leave a record with no answer on
        /// some device now, and fire it even so at its time. Without it
        /// such an add is refused, and such a firing is skipped (a warning
        /// on every device, shown by `gtm schedule list`).
        #[arg(long)]
        force: bool,
        #[command(subcommand)]
        action: Scheduled,
    },
    /// The schedules: pending, fired, failed and cancelled (the same on
    /// every device).
    #[command(after_help = "Example:\n  gtm schedule list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a schedule before it (or its reverse) fires.
    #[command(after_help = "Example:\n  gtm schedule cancel 3")]
    Cancel {
        /// The schedule's id, as `gtm schedule list` shows it.
        id: u64,
    },
}

/// The actions a schedule can take, written as their own commands.
#[derive(Debug, Subcommand)]
pub enum Scheduled {
    /// record drain ADDRESS [--record R], record undrain ..., record resume NAME TYPE.
    #[command(subcommand)]
    Record(ScheduledRecord),
    /// dc drain NAME, dc undrain NAME.
    #[command(subcommand)]
    Dc(ScheduledDc),
    /// check set NAME ok|error.
    #[command(subcommand)]
    Check(ScheduledCheck),
}

#[derive(Debug, Subcommand)]
pub enum ScheduledRecord {
    /// Take an address out of answers, for one record or all.
    #[command(
        after_help = "Example:\n  gtm schedule add --at +30m --until +2h record drain 192.0.2.10 --record www.example.test/A"
    )]
    Drain {
        /// The address (IP, or a CNAME's target name).
        address: String,
        /// Only this record, as NAME/TYPE, e.g. www.example.test/A.
        #[arg(long, value_name = "NAME/TYPE", value_parser = super::drain::record_ref)]
        record: Option<String>,
    },
    /// Put a drained address back.
    #[command(after_help = "Example:\n  gtm schedule add --at +2h record undrain 192.0.2.10")]
    Undrain {
        /// The drained address.
        address: String,
        /// The record of the drain, as NAME/TYPE (none for a drain of
        /// every record).
        #[arg(long, value_name = "NAME/TYPE", value_parser = super::drain::record_ref)]
        record: Option<String>,
    },
    /// End a manual-failback DR: back to the Main DC.
    #[command(
        after_help = "Example:\n  gtm schedule add --at +5m record resume www.example.test A"
    )]
    Resume {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScheduledDc {
    /// Take every address of a datacenter out of answers.
    #[command(
        after_help = "Example:\n  gtm schedule add --at 2026-12-01T02:00:00Z --until 2026-12-01T04:00:00Z dc drain dc1"
    )]
    Drain {
        /// The datacenter.
        name: String,
    },
    /// Put a drained datacenter back.
    #[command(after_help = "Example:\n  gtm schedule add --at +2h dc undrain dc1")]
    Undrain {
        /// The datacenter.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScheduledCheck {
    /// Set a manual check: ok or error.
    #[command(after_help = "Example:\n  gtm schedule add --at +30m check set maint error")]
    Set {
        /// The manual check.
        name: String,
        /// Its new state: ok or error.
        state: String,
    },
}

impl Scheduled {
    fn action(&self) -> ScheduledAction {
        match self {
            Self::Record(ScheduledRecord::Drain { address, record }) => {
                ScheduledAction::DrainAddress {
                    address: address.clone(),
                    record: record.clone(),
                    drained: true,
                }
            }
            Self::Record(ScheduledRecord::Undrain { address, record }) => {
                ScheduledAction::DrainAddress {
                    address: address.clone(),
                    record: record.clone(),
                    drained: false,
                }
            }
            Self::Record(ScheduledRecord::Resume { name, rtype }) => ScheduledAction::Resume {
                record: format!("{name}/{rtype}"),
            },
            Self::Dc(ScheduledDc::Drain { name }) => ScheduledAction::DrainDatacenter {
                datacenter: name.clone(),
                drained: true,
            },
            Self::Dc(ScheduledDc::Undrain { name }) => ScheduledAction::DrainDatacenter {
                datacenter: name.clone(),
                drained: false,
            },
            Self::Check(ScheduledCheck::Set { name, state }) => ScheduledAction::CheckSet {
                check: name.clone(),
                state: state.clone(),
            },
        }
    }
}

pub(super) async fn schedule(client: &Client, cmd: &ScheduleCmd) -> Result<()> {
    match cmd {
        ScheduleCmd::Add {
            at,
            until,
            dry_run,
            force,
            action,
        } => {
            let body = ScheduleRequest {
                at: at.clone(),
                until: until.clone(),
                action: action.action(),
                dry_run: *dry_run,
                force: *force,
            };
            if *dry_run {
                let d: ScheduleDryRun = client
                    .ask(
                        client
                            .http
                            .post(client.url("/api/v1/schedules"))
                            .json(&body),
                    )
                    .await?;
                print_dry_run(&d);
                return Ok(());
            }
            let s: Schedule = client
                .send(
                    client
                        .http
                        .post(client.url("/api/v1/schedules"))
                        .json(&body),
                )
                .await?;
            println!(
                "schedule {}: {} at {}{}",
                s.id,
                s.what,
                format_ms(s.at_ms),
                s.until_ms
                    .map_or(String::new(), |u| format!(", reversed at {}", format_ms(u)))
            );
            Ok(())
        }
        ScheduleCmd::List { json } => {
            let list: Vec<Schedule> = client
                .send(client.http.get(client.url("/api/v1/schedules")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(());
            }
            let rows: Vec<[String; 7]> = list.iter().map(row).collect();
            table(
                &["ID", "AT", "UNTIL", "ACTION", "BY", "STATE", "FIRED"],
                &rows,
            );
            Ok(())
        }
        ScheduleCmd::Cancel { id } => {
            let s: Schedule = client
                .send(
                    client
                        .http
                        .delete(client.url(&format!("/api/v1/schedules/{id}"))),
                )
                .await?;
            println!("schedule {}: {} cancelled", s.id, s.what);
            Ok(())
        }
    }
}

/// A schedule's dry run as `gtm drain --dry-run` prints a drain's.
fn print_dry_run(d: &ScheduleDryRun) {
    let reverse = match (&d.reverse, &d.until) {
        (Some(r), Some(u)) => format!(", then {r} at {u}"),
        (None, Some(u)) => format!(", reversed at {u}"),
        _ => String::new(),
    };
    println!(
        "dry run: {} at {}{reverse} (nothing scheduled)",
        d.what, d.at
    );
    if let Some(now) = &d.now {
        if let Some(c) = &now.check {
            println!(
                "check {}: {} now → {}",
                c.check,
                c.before.as_str(),
                c.after.as_str()
            );
        }
        if let Some(h) = &now.hold {
            println!(
                "{}: {} ({})",
                h.record,
                if h.held {
                    "held by manual failback now"
                } else {
                    "not held now"
                },
                h.decision
            );
        }
    }
    if let Some(j) = &d.devices {
        println!("if it fired now:");
        super::drain::print_devices(j, "an add needs --force");
    }
    for w in &d.warnings {
        println!("warning: {w}");
    }
}

fn row(s: &Schedule) -> [String; 7] {
    let state = match s.state {
        ScheduleState::Pending => "pending",
        ScheduleState::Fired => "fired",
        ScheduleState::Failed if s.fired.as_ref().is_some_and(|f| f.skipped) => "skipped",
        ScheduleState::Failed => "failed",
        ScheduleState::Cancelled => "cancelled",
    };
    let firing = |f: &gtm_node::machine::schedule::Firing| {
        format!(
            "{} on {}{}",
            format_ms(f.time_ms),
            f.device,
            if f.ok { "" } else { " (skipped)" }
        )
    };
    let mut fired = s.fired.as_ref().map(firing).unwrap_or_default();
    if let Some(r) = &s.reversed {
        fired = format!("{fired}; reversed {}", firing(r));
    }
    [
        s.id.to_string(),
        format_ms(s.at_ms),
        s.until_ms.map(format_ms).unwrap_or_default(),
        s.what.clone(),
        s.actor.to_string(),
        state.into(),
        fired,
    ]
}
