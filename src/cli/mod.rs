#![allow(clippy::print_stdout)] // the CLI prints for people
//! The `gtm` command line: `serve` runs a device; every other command is a
//! client of a device's API.

mod accounts;
mod drain;
mod geoip;
mod history;
mod manpages;
mod objects;
mod schedule;

use std::{net::IpAddr, path::PathBuf};

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};

use gtm_cluster::{ClusterStatus, NodeState};

use crate::{
    api::{ApiError, ApplyResult, ErrorKind, StatusReport},
    device::{API_FILE, Device, TOKEN_FILE},
    engine::{Event, Preview},
    model::{
        self,
        node::{NodeSettings, default_data_dir},
    },
};

#[derive(Debug, Parser)]
#[command(
    name = "gtm",
    version,
    about = "Global Traffic Manager: authoritative DNS whose answers follow health"
)]
pub struct Cli {
    /// Data directory of the local device (where the CLI finds its API
    /// address and token).
    #[arg(long, global = true, env = "GTM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// API base URL of the device to talk to, e.g. http://127.0.0.1:8053.
    #[arg(long, global = true, env = "GTM_API")]
    pub api: Option<String>,
    /// API bearer token.
    #[arg(long, global = true, env = "GTM_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// PEM certificate(s) to trust for an https API (default: the local
    /// device's api-ca.pem in the data directory).
    #[arg(long, global = true, env = "GTM_CA")]
    pub ca_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a device. Without --config: the embedded demo on 127.0.0.1:1053.
    Serve {
        /// The node file (name, datacenter, listeners, data directory, GeoIP).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// The replicated configuration.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Records with their status and the addresses answered now.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// The event log (GTM Logs) of the device.
    Logs {
        /// Only this record, e.g. www.example.test/A.
        #[arg(long)]
        record: Option<String>,
        /// Only events of this kind: record, check, scenario, operator, config,
        /// datacenter, geoip, device.
        #[arg(long)]
        kind: Option<String>,
        /// Only events newer than this, e.g. 10m or 2h.
        #[arg(long)]
        since: Option<String>,
        /// Keep printing new events as they happen.
        #[arg(long, short)]
        follow: bool,
        /// Only the newest N events.
        #[arg(long, short = 'n')]
        limit: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Records: configuration, preview, failback resume, drains.
    #[command(subcommand)]
    Record(RecordCmd),
    /// Checks: configuration, state of every instance, operator-set states, test now.
    #[command(subcommand)]
    Check(CheckCmd),
    /// Datacenters: configuration; drain one out of answers and back.
    #[command(subcommand)]
    Dc(DcCmd),
    /// Domains (zones): configuration.
    #[command(subcommand)]
    Domain(ListedCmd),
    /// Health scenarios: configuration.
    #[command(subcommand)]
    Scenario(ListedCmd),
    /// Services (named ports checks can use): configuration.
    #[command(subcommand)]
    Service(ListedCmd),
    /// Print a shell completion script: gtm completions bash > /etc/bash_completion.d/gtm
    Completions { shell: clap_complete::Shell },
    /// Write one man page per command into DIR (for packaging).
    #[command(hide = true)]
    Manpages { dir: PathBuf },
    /// GeoIP: where an address is, and the database.
    #[command(subcommand)]
    Geoip(geoip::GeoipCmd),
    /// The cluster: init, join, leave, status, recovery.
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Devices of the cluster.
    #[command(subcommand)]
    Device(DeviceCmd),
    /// Commands (writes): what became of one.
    #[command(subcommand)]
    Command(history::CommandCmd),
    /// Users of the console and the API, each with a role.
    #[command(subcommand)]
    User(accounts::UserCmd),
    /// Named API tokens, each with a role.
    #[command(subcommand)]
    Token(accounts::TokenCmd),
    /// The user or token the CLI acts as, and its role.
    Whoami,
    /// Operator actions at a time: drains, check sets, resumes.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCmd),
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Make this device the first member of a new cluster.
    Init,
    /// Print the token another device needs to join.
    Token,
    /// Join the cluster of the device at ADDRESS (its API address).
    Join {
        address: String,
        #[arg(long)]
        token: String,
        /// Join as a non-voting member.
        #[arg(long)]
        learner: bool,
    },
    /// Leave the cluster (the device keeps serving its last configuration).
    Leave,
    /// Members, datacenter, voter or learner, leader, term, applied index, last contact.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// After the permanent loss of the peer: continue on this device alone.
    Recover {
        /// Required: make this device the only voter.
        #[arg(long)]
        force_single: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeviceCmd {
    /// Every device of the cluster.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Validate a file and list every error with its place; changes nothing.
    Check { file: PathBuf },
    /// Validate and apply a file atomically, showing what changes.
    Apply {
        /// The configuration file (TOML); - for stdin.
        file: PathBuf,
        /// Show the changes without applying them.
        #[arg(long)]
        dry_run: bool,
        /// Apply a configuration with no domain over one that has some
        /// (it stops answering for every domain).
        #[arg(long)]
        allow_empty: bool,
    },
    /// Print the applied configuration.
    Export,
    /// The configuration versions kept: version, time, who, what, changes.
    History {
        /// Also print each version's field-level changes.
        #[arg(long)]
        changes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Print a configuration: the applied one, or a version from history.
    Show {
        #[arg(long)]
        version: Option<u64>,
    },
    /// Field-level changes from version FROM to version TO.
    Diff {
        from: u64,
        to: u64,
        #[arg(long)]
        json: bool,
    },
    /// Make a kept version's configuration current again (a new version).
    Rollback {
        version: u64,
        /// Show the changes from the applied configuration; apply nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `list`, and the verbs of one named object.
#[derive(Debug, Subcommand)]
pub enum ListedCmd {
    /// Every one, as configured.
    List {
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Object(objects::ObjectCmd),
}

#[derive(Debug, Subcommand)]
pub enum RecordCmd {
    #[command(flatten)]
    Object(objects::RecordObjectCmd),
    /// What the record answers now, the mode's decision, addresses and the latest switchovers.
    Preview {
        name: String,
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// The preview as another device of the cluster computes it.
        #[arg(long)]
        device: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Return to the Main DC after a manual-failback DR (failback = "manual").
    Resume {
        name: String,
        #[arg(value_name = "TYPE")]
        rtype: String,
    },
    /// Take an address out of answers (maintenance), for one record or all.
    Drain {
        address: String,
        /// Only this record, e.g. www.example.test/A.
        #[arg(long)]
        record: Option<String>,
        #[command(flatten)]
        look: drain::Look,
    },
    /// Put a drained address back: name exactly an active drain (the same
    /// --record, or none), as `gtm record drains` lists them.
    Undrain {
        address: String,
        #[arg(long)]
        record: Option<String>,
        #[command(flatten)]
        look: drain::Look,
    },
    /// The active drains (addresses and datacenters), with who made them
    /// and when; the same on every device.
    Drains {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum CheckCmd {
    /// Every check instance with its state and last reason.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Set a manual check: ok or error.
    Set { name: String, state: String },
    #[command(flatten)]
    Object(objects::ObjectCmd),
    /// Test now: run one probe without saving; prints the result, the reason and the time it took.
    Test {
        name: String,
        /// The address to probe a template check against.
        #[arg(long)]
        address: Option<IpAddr>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DcCmd {
    /// Every datacenter, as configured.
    List {
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Object(objects::ObjectCmd),
    /// Take every address of a datacenter out of answers.
    Drain {
        name: String,
        #[command(flatten)]
        look: drain::Look,
    },
    /// Put a drained datacenter back.
    Undrain {
        name: String,
        #[command(flatten)]
        look: drain::Look,
    },
}

/// Exit codes: 0 ok, 1 error, 2 bad input (clap's too), 3 unreachable,
/// 4 no quorum, 5 not found.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("{0}")]
    NoQuorum(String),
    #[error("{0}")]
    NotFound(String),
    /// An error the device answered, with its kind.
    #[error("{message}")]
    Api { kind: ErrorKind, message: String },
}

pub fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<CliError>() {
        Some(CliError::BadInput(_)) => 2,
        Some(CliError::Unreachable(_)) => 3,
        Some(CliError::NoQuorum(_)) => 4,
        Some(CliError::NotFound(_)) => 5,
        Some(CliError::Api { kind, .. }) => api_exit_code(*kind),
        None => 1,
    }
}

/// The exit code of each kind of API error: the one place the CLI maps them.
pub fn api_exit_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::Unreachable => 3,
        ErrorKind::NoQuorum => 4,
        ErrorKind::NotFound => 5,
        ErrorKind::OutcomeUnknown => 6,
        k if k.status().is_client_error() => 2,
        _ => 1,
    }
}

pub async fn run(cli: Cli) -> Result<()> {
    match &cli.command {
        Command::Serve { config } => serve(config.clone(), cli.data_dir.clone()).await,
        Command::Config(ConfigCmd::Check { file }) => {
            let text = read(file)?;
            let config = model::parse(&text).map_err(|e| bad_file(file, &e))?;
            model::compile(&config).map_err(|e| bad_file(file, &e))?;
            println!("{}: valid", file.display());
            Ok(())
        }
        Command::Config(ConfigCmd::Apply {
            file,
            dry_run,
            allow_empty,
        }) => {
            let text = read(file)?;
            let client = Client::new(&cli)?;
            let mut request = client.http.put(client.url("/api/v1/config"));
            if *dry_run {
                request = request.query(&[("dry_run", "true")]);
            }
            if *allow_empty {
                request = request.query(&[("allow_empty", "true")]);
            }
            let result: ApplyResult = client.send(request.body(text)).await?;
            print_apply(&result);
            Ok(())
        }
        Command::Config(ConfigCmd::History { changes, json }) => {
            history::history(&Client::new(&cli)?, *changes, *json).await
        }
        Command::Config(ConfigCmd::Show { version }) => {
            history::show(&Client::new(&cli)?, *version).await
        }
        Command::Config(ConfigCmd::Diff { from, to, json }) => {
            history::diff(&Client::new(&cli)?, *from, *to, *json).await
        }
        Command::Config(ConfigCmd::Rollback { version, dry_run }) => {
            history::rollback(&Client::new(&cli)?, *version, *dry_run).await
        }
        Command::Command(cmd) => history::command(&Client::new(&cli)?, cmd).await,
        Command::User(cmd) => accounts::user(&Client::new(&cli)?, cmd).await,
        Command::Token(cmd) => accounts::token(&Client::new(&cli)?, cmd).await,
        Command::Whoami => accounts::whoami(&Client::new(&cli)?).await,
        Command::Schedule(cmd) => schedule::schedule(&Client::new(&cli)?, cmd).await,
        Command::Config(ConfigCmd::Export) => {
            let client = Client::new(&cli)?;
            let text = client
                .text(client.http.get(client.url("/api/v1/config")))
                .await?;
            print!("{text}");
            Ok(())
        }
        Command::Status { json } => {
            let client = Client::new(&cli)?;
            let report: StatusReport = client
                .send(client.http.get(client.url("/api/v1/status")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(());
            }
            println!(
                "device {} (configuration version {})",
                report.device, report.version
            );
            if let Some(f) = &report.degraded {
                println!(
                    "DEGRADED: configuration version {} cannot be installed on this device: {}",
                    f.version, f.reason
                );
            }
            if let Some(fault) = &report.storage_degraded {
                println!("DEGRADED storage: {fault}");
            }
            if let Some(warning) = &report.geoip_warning {
                println!("WARNING: {warning}");
            }
            if let Some(geoip) = &report.geoip {
                print!("{}", geoip::describe(geoip));
            }
            let rows: Vec<[String; 3]> = report
                .records
                .iter()
                .map(|r| {
                    [
                        r.record.clone(),
                        r.status.map_or("-".into(), |s| s.to_string()),
                        if r.active.is_empty() {
                            "-".into()
                        } else {
                            r.active.join(", ")
                        },
                    ]
                })
                .collect();
            table(&["RECORD", "STATUS", "ACTIVE RECORDS"], &rows);
            if !report.peers.is_empty() {
                println!();
                print_side_by_side(&report);
            }
            if !report.checks.is_empty() {
                println!();
                print_checks(&report.checks);
            }
            if !report.scenarios.is_empty() {
                println!();
                let rows: Vec<[String; 2]> = report
                    .scenarios
                    .iter()
                    .map(|s| {
                        let mut state = if s.active { "active" } else { "passive" }.to_string();
                        if let Some(p) = s.pending {
                            state.push_str(if p {
                                " (activation waits for verify)"
                            } else {
                                " (deactivation waits for verify)"
                            });
                        }
                        [s.scenario.clone(), state]
                    })
                    .collect();
                table(&["SCENARIO", "STATE"], &rows);
            }
            Ok(())
        }
        Command::Logs {
            record,
            kind,
            since,
            follow,
            limit,
            json,
        } => {
            let client = Client::new(&cli)?;
            let mut query: Vec<(&str, String)> = Vec::new();
            if let Some(r) = record {
                let label = match r.rsplit_once('/') {
                    Some((n, t)) => crate::api::record_label(n, t),
                    None => r.clone(),
                };
                query.push(("record", label));
            }
            if let Some(k) = kind {
                query.push(("kind", k.to_ascii_lowercase()));
            }
            if let Some(s) = since {
                query.push(("since", s.clone()));
            }
            if *follow {
                query.push(("follow", "true".into()));
            }
            if let Some(n) = limit {
                query.push(("limit", n.to_string()));
            }
            // Every device's events, and a word on those not heard from.
            query.push(("all", "true".into()));
            if let Ok(report) = client
                .send::<StatusReport>(client.http.get(client.url("/api/v1/status")))
                .await
            {
                for p in report.peers.iter().filter(|p| !p.reachable) {
                    eprintln!(
                        "note: device {} ({}) could not be reached: {}; its latest events may be missing",
                        p.device,
                        p.datacenter,
                        p.age_ms.map_or("never heard from".into(), |ms| format!(
                            "last report {} s ago",
                            ms / 1000
                        ))
                    );
                }
            }
            let req = client.http.get(client.url("/api/v1/events")).query(&query);
            let print = |e: &Event| {
                if *json {
                    println!("{}", serde_json::to_string(e).unwrap_or_default());
                } else {
                    println!("{}  {}  {}", format_ms(e.time_ms), e.device, e.text);
                }
            };
            if !*follow {
                let events: Vec<Event> = client.send(req).await?;
                events.iter().for_each(print);
                return Ok(());
            }
            let mut resp = client.response(req).await?;
            let mut pending = Vec::new();
            while let Some(chunk) = resp.chunk().await? {
                pending.extend_from_slice(&chunk);
                while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    if let Ok(e) = serde_json::from_slice::<Event>(&line) {
                        print(&e);
                    }
                }
            }
            Ok(())
        }
        Command::Record(RecordCmd::Preview {
            name,
            rtype,
            device,
            json,
        }) => {
            let client = Client::new(&cli)?;
            let mut request = client
                .http
                .get(client.url(&format!("/api/v1/records/{name}/{rtype}/preview")));
            if let Some(d) = device {
                request = request.query(&[("device", d)]);
            }
            let p: Preview = client.send(request).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&p)?);
                return Ok(());
            }
            println!("record          {}  (device {})", p.record, p.device);
            println!("mode            {}", p.mode);
            println!(
                "status          {}",
                p.status.map_or("-".into(), |s| s.to_string())
            );
            println!(
                "active records  {}",
                if p.active.is_empty() {
                    "-".into()
                } else {
                    p.active.join(", ")
                }
            );
            println!("decision        {}", p.decision);
            println!();
            let rows: Vec<[String; 4]> = p
                .addresses
                .iter()
                .map(|a| {
                    let health = if a.drained {
                        "drained"
                    } else if a.healthy {
                        "healthy"
                    } else {
                        "unhealthy"
                    };
                    [
                        a.address.clone(),
                        a.dc.clone().unwrap_or_else(|| "-".into()),
                        a.hc.clone(),
                        health.into(),
                    ]
                })
                .collect();
            table(&["ADDRESS", "DC", "HC", "HEALTH"], &rows);
            if !p.switchovers.is_empty() {
                println!();
                println!("latest switchovers");
                for e in &p.switchovers {
                    println!("  {}  {}", format_ms(e.time_ms), e.text);
                }
            }
            Ok(())
        }
        Command::Record(RecordCmd::Object(cmd)) => objects::record(&Client::new(&cli)?, cmd).await,
        Command::Check(CheckCmd::Object(cmd)) => {
            objects::object(&Client::new(&cli)?, "checks", cmd).await
        }
        Command::Dc(DcCmd::List { json }) => {
            objects::list(&Client::new(&cli)?, "datacenters", *json).await
        }
        Command::Dc(DcCmd::Object(cmd)) => {
            objects::object(&Client::new(&cli)?, "datacenters", cmd).await
        }
        Command::Domain(cmd) => listed(&cli, "domains", cmd).await,
        Command::Scenario(cmd) => listed(&cli, "scenarios", cmd).await,
        Command::Service(cmd) => listed(&cli, "services", cmd).await,
        Command::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "gtm",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::Manpages { dir } => {
            let n = manpages::write(dir)?;
            eprintln!("{n} man pages written to {}", dir.display());
            Ok(())
        }
        Command::Record(RecordCmd::Resume { name, rtype }) => {
            let client = Client::new(&cli)?;
            let p: Preview = client
                .send(
                    client
                        .http
                        .post(client.url(&format!("/api/v1/records/{name}/{rtype}/resume"))),
                )
                .await?;
            println!("{}: {}", p.record, p.decision);
            Ok(())
        }
        Command::Record(
            RecordCmd::Drain {
                address,
                record,
                look,
            }
            | RecordCmd::Undrain {
                address,
                record,
                look,
            },
        ) => {
            let drained = matches!(&cli.command, Command::Record(RecordCmd::Drain { .. }));
            let body = crate::api::DrainAddress {
                address: address.clone(),
                record: record.clone(),
                drained,
                dry_run: look.dry_run,
                force: look.force,
            };
            drain::run(
                &Client::new(&cli)?,
                "address",
                &body,
                address,
                drained,
                look,
            )
            .await
        }
        Command::Record(RecordCmd::Drains { json }) => {
            let client = Client::new(&cli)?;
            let drains: Vec<crate::operator::Drain> = client
                .send(client.http.get(client.url("/api/v1/drains")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&drains)?);
            } else {
                let rows: Vec<[String; 4]> = drains
                    .iter()
                    .map(|d| {
                        let (what, scope) = match (&d.address, &d.datacenter) {
                            (Some(a), _) => (
                                a.clone(),
                                d.record.clone().unwrap_or_else(|| "every record".into()),
                            ),
                            (None, Some(dc)) => {
                                (format!("datacenter {dc}"), "its addresses".into())
                            }
                            (None, None) => ("?".into(), String::new()),
                        };
                        [what, scope, d.actor.to_string(), format_ms(d.time_ms)]
                    })
                    .collect();
                table(&["DRAINED", "SCOPE", "BY", "SINCE"], &rows);
            }
            Ok(())
        }
        Command::Check(CheckCmd::List { json }) => {
            let client = Client::new(&cli)?;
            let report: StatusReport = client
                .send(client.http.get(client.url("/api/v1/status")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&report.checks)?);
            } else {
                print_checks(&report.checks);
            }
            Ok(())
        }
        Command::Check(CheckCmd::Set { name, state }) => {
            let client = Client::new(&cli)?;
            let body = crate::api::CheckStateRequest {
                state: state.clone(),
            };
            let _: Vec<crate::engine::CheckStatus> = client
                .send(
                    client
                        .http
                        .put(client.url(&format!("/api/v1/checks/{name}/state")))
                        .json(&body),
                )
                .await?;
            println!("check {name} set to {state}");
            Ok(())
        }
        Command::Check(CheckCmd::Test {
            name,
            address,
            json,
        }) => {
            let client = Client::new(&cli)?;
            let body = crate::api::TestRequest { address: *address };
            let r: crate::api::TestResult = client
                .send(
                    client
                        .http
                        .post(client.url(&format!("/api/v1/checks/{name}/test")))
                        .json(&body),
                )
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "{}: {} ({}) in {:.1} ms",
                    r.check,
                    if r.ok { "OK" } else { "Error" },
                    r.reason,
                    r.elapsed_ms
                );
            }
            if !r.ok {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Dc(DcCmd::Drain { name, look } | DcCmd::Undrain { name, look }) => {
            let drained = matches!(&cli.command, Command::Dc(DcCmd::Drain { .. }));
            let body = crate::api::DrainDatacenter {
                datacenter: name.clone(),
                drained,
                dry_run: look.dry_run,
                force: look.force,
            };
            let what = format!("datacenter {name}");
            drain::run(
                &Client::new(&cli)?,
                "datacenter",
                &body,
                &what,
                drained,
                look,
            )
            .await
        }
        Command::Cluster(cmd) => cluster(&cli, cmd).await,
        Command::Device(DeviceCmd::List { json }) => {
            let client = Client::new(&cli)?;
            let status: ClusterStatus = client
                .send(client.http.get(client.url("/api/v1/cluster/status")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&status.members)?);
                return Ok(());
            }
            print_members(&status);
            Ok(())
        }
        Command::Geoip(cmd) => geoip::run(&Client::new(&cli)?, cmd).await,
    }
}

async fn listed(cli: &Cli, collection: &str, cmd: &ListedCmd) -> Result<()> {
    let client = Client::new(cli)?;
    match cmd {
        ListedCmd::List { json } => objects::list(&client, collection, *json).await,
        ListedCmd::Object(cmd) => objects::object(&client, collection, cmd).await,
    }
}

/// What a configuration write changed, and its version.
fn print_apply(result: &ApplyResult) {
    if result.changes.is_empty() {
        println!("no changes");
    }
    for line in &result.changes {
        println!("{line}");
    }
    if result.applied {
        println!("applied as version {}", result.version);
    } else if !result.changes.is_empty() {
        println!("dry run: nothing applied");
    }
}

async fn cluster(cli: &Cli, cmd: &ClusterCmd) -> Result<()> {
    let client = Client::new(cli)?;
    match cmd {
        ClusterCmd::Init => {
            let r: crate::api::ClusterMessage = client
                .send(client.http.post(client.url("/api/v1/cluster/init")))
                .await?;
            println!("{}", r.message);
        }
        ClusterCmd::Token => {
            let r: crate::api::TokenResponse = client
                .send(client.http.get(client.url("/api/v1/cluster/token")))
                .await?;
            println!("{}", r.token);
        }
        ClusterCmd::Join {
            address,
            token,
            learner,
        } => {
            let body = crate::api::JoinCommand {
                address: address.clone(),
                token: token.clone(),
                learner: *learner,
            };
            let status: ClusterStatus = client
                .send(
                    client
                        .http
                        .post(client.url("/api/v1/cluster/join"))
                        .json(&body),
                )
                .await?;
            println!("joined; the cluster's configuration is applied here");
            print_members(&status);
        }
        ClusterCmd::Leave => {
            let _: ClusterStatus = client
                .send(client.http.post(client.url("/api/v1/cluster/leave")))
                .await?;
            println!("left the cluster; this device keeps serving its last configuration");
        }
        ClusterCmd::Status { json } => {
            let status: ClusterStatus = client
                .send(client.http.get(client.url("/api/v1/cluster/status")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&status)?);
                return Ok(());
            }
            if status.members.is_empty() {
                println!(
                    "this device (id {}) belongs to no cluster yet: `gtm cluster init` makes it the first member, \
                     `gtm cluster join ADDRESS --token T` joins an existing cluster",
                    status.id
                );
                return Ok(());
            }
            let role = match status.state {
                NodeState::Leader if !status.quorum => "Leader (no quorum)".to_string(),
                state => format!("{state:?}"),
            };
            println!("this device  id {} ({role})", status.id);
            println!(
                "leader       {}",
                status
                    .leader
                    .as_ref()
                    .map_or("none".to_string(), |(id, info)| format!(
                        "{} (id {id})",
                        info.name
                    ))
            );
            println!("term         {}", status.term);
            println!(
                "applied      {}",
                status.applied_index.map_or("-".into(), |i| i.to_string())
            );
            println!();
            print_members(&status);
        }
        ClusterCmd::Recover { force_single } => {
            if !force_single {
                return Err(CliError::BadInput(
                    "recovery makes this device the only voter of the cluster: only for the permanent loss of the peer. \
                     Run `gtm cluster recover --force-single` to do it."
                        .into(),
                )
                .into());
            }
            let r: crate::api::ClusterMessage = client
                .send(client.http.post(client.url("/api/v1/cluster/recover")))
                .await?;
            println!("{}", r.message);
        }
    }
    Ok(())
}

fn print_members(status: &ClusterStatus) {
    let leader = status.leader.as_ref().map(|(id, _)| *id);
    let rows: Vec<[String; 6]> = status
        .members
        .iter()
        .map(|m| {
            let mut name = m.info.name.clone();
            if m.id == status.id {
                name.push_str(" (this device)");
            }
            [
                name,
                m.info.datacenter.clone(),
                if m.voter { "voter" } else { "learner" }.into(),
                if Some(m.id) == leader {
                    "leader".into()
                } else {
                    "-".into()
                },
                m.info.api_addr.clone(),
                m.last_contact_ms
                    .map_or("-".into(), |ms| format!("{ms} ms ago")),
            ]
        })
        .collect();
    table(
        &["DEVICE", "DC", "ROLE", "LEADER", "API", "LAST CONTACT"],
        &rows,
    );
}

async fn serve(config: Option<PathBuf>, data_dir: Option<PathBuf>) -> Result<()> {
    let (mut settings, demo) = match &config {
        Some(path) => {
            let text = read(path)?;
            let settings = NodeSettings::parse(&text)
                .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?;
            (settings, false)
        }
        None => (
            NodeSettings::demo(data_dir.unwrap_or_else(default_data_dir)),
            true,
        ),
    };
    let notifier = crate::service::notify::Notifier::from_env();
    let mut signals = crate::service::Signals::install()?;
    let mut device = Device::start(settings.clone(), demo).await?;
    notifier.notify("READY=1");
    let watchdog = notifier.watchdog_interval();
    let mut ticks = tokio::time::interval(watchdog.unwrap_or(std::time::Duration::from_secs(3600)));
    // For a person at a terminal; JSON logs stay JSON lines only.
    let banner = settings.log_format == crate::model::node::LogFormat::Text;
    if banner {
        eprintln!(
            "gtm serving DNS on {} and the API on http://{} (data directory has the token)",
            device
                .dns_addrs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            device.api_addr
        );
    }
    if demo && let Some(addr) = device.dns_addrs.first() {
        eprintln!(
            "try: dig @{} -p {} www.example.test A",
            addr.ip(),
            addr.port()
        );
    }
    loop {
        tokio::select! {
            request = signals.next() => match request {
                crate::service::Request::Stop => break,
                crate::service::Request::Reload => {
                    if let Some(new) = crate::service::reload(&device, &settings, config.as_deref(), &notifier) {
                        settings = new;
                    }
                }
            },
            _ = ticks.tick(), if watchdog.is_some() => {
                // Fed only while the device serves: a stuck or dead worker
                // lets the manager restart it.
                if device.alive() {
                    notifier.notify("WATCHDOG=1");
                } else {
                    tracing::error!("a DNS worker or the API listener has ended: the watchdog is no longer fed");
                }
            }
            () = device.reopened() => {
                // Started on a copy of its store (read-only data directory),
                // and the directory can be written again: start on the store.
                device.stop().await;
                device = Device::start(settings.clone(), demo).await?;
                tracing::warn!("restarted on the data directory's store: writes are accepted again");
            }
        }
    }
    notifier.notify("STOPPING=1");
    tracing::info!("stopping: requests in flight finish, the store is flushed");
    device.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// A file's text; `-` is standard input.
fn read(file: &PathBuf) -> Result<String> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    };
    text.map_err(|e| CliError::BadInput(format!("cannot read {}: {e}", file.display())).into())
}

fn bad_file(file: &std::path::Path, e: &model::ConfigErrors) -> anyhow::Error {
    let lines: Vec<String> =
        e.0.iter()
            .map(|e| format!("{}: {e}", file.display()))
            .collect();
    CliError::BadInput(lines.join("\n")).into()
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    fn new(cli: &Cli) -> Result<Self> {
        let dir = cli.data_dir.clone().unwrap_or_else(default_data_dir);
        let base = match &cli.api {
            Some(a) => a.trim_end_matches('/').to_string(),
            None => std::fs::read_to_string(dir.join(API_FILE))
                .map(|s| s.trim().to_string())
                .map_err(|_| CliError::Unreachable(format!("no local device: {} has no {API_FILE} (is `gtm serve` running? else give --api or GTM_API)", dir.display())))?,
        };
        let token = match &cli.api_token {
            Some(t) => t.clone(),
            None => std::fs::read_to_string(dir.join(TOKEN_FILE))
                .map(|s| s.trim().to_string())
                .map_err(|_| {
                    CliError::BadInput(format!(
                        "no API token: {} has no {TOKEN_FILE} (give --api-token or GTM_TOKEN)",
                        dir.display()
                    ))
                })?,
        };
        // An https device is trusted by --ca-file, else by the certificate
        // the local device keeps in its data directory.
        let trust = if base.starts_with("https://") {
            let path = cli
                .ca_file
                .clone()
                .unwrap_or_else(|| dir.join(crate::tls::CA_FILE));
            Some(std::fs::read(&path).map_err(|e| {
                CliError::BadInput(format!("{base} uses TLS: cannot read the certificate to trust, {}: {e} (give --ca-file)", path.display()))
            })?)
        } else {
            None
        };
        let http = crate::tls::http_client(trust.as_deref(), None)?;
        Ok(Self { http, base, token })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn response(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp = req.bearer_auth(&self.token).send().await.map_err(|e| {
            CliError::Unreachable(format!("cannot reach the device at {}: {e}", self.base))
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        match serde_json::from_str::<ApiError>(&body) {
            Ok(e) => {
                let mut msg = e.message;
                for line in e.errors {
                    msg.push_str("\n  ");
                    msg.push_str(&line);
                }
                // A label this version does not know: its HTTP status says
                // whose fault it was.
                let kind = match e.error {
                    ErrorKind::Unknown if status.is_client_error() => ErrorKind::BadRequest,
                    kind => kind,
                };
                bail!(CliError::Api { kind, message: msg })
            }
            Err(_) => bail!("the device answered {status}: {body}"),
        }
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T> {
        Ok(self.response(req).await?.json().await?)
    }

    async fn text(&self, req: reqwest::RequestBuilder) -> Result<String> {
        Ok(self.response(req).await?.text().await?)
    }
}

/// Each record's status on every device, side by side (spec §4).
fn print_side_by_side(report: &StatusReport) {
    let mut head = vec!["RECORD".to_string(), report.device.clone()];
    head.extend(report.peers.iter().map(|p| {
        if p.reachable {
            p.device.clone()
        } else {
            format!("{} (unreachable)", p.device)
        }
    }));
    let mut records: Vec<String> = report.records.iter().map(|r| r.record.clone()).collect();
    for p in &report.peers {
        for r in &p.records {
            if !records.contains(&r.record) {
                records.push(r.record.clone());
            }
        }
    }
    let cell = |list: &[crate::engine::RecordStatus], record: &str| -> String {
        list.iter()
            .find(|r| r.record == record)
            .and_then(|r| r.status)
            .map_or("-".into(), |s| s.to_string())
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|record| {
            let mut row = vec![record.clone(), cell(&report.records, record)];
            row.extend(report.peers.iter().map(|p| cell(&p.records, record)));
            row
        })
        .collect();
    print_rows(&head, &rows);
}

/// A table with as many columns as `head`, each as wide as its widest cell.
fn print_rows(head: &[String], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = head.iter().map(String::len).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(head);
    for row in rows {
        line(row);
    }
}

fn print_checks(checks: &[crate::engine::CheckStatus]) {
    let rows: Vec<[String; 3]> = checks
        .iter()
        .map(|c| {
            let state = c.state.to_string();
            [
                c.check.clone(),
                if c.restored {
                    format!("{state} (restored)")
                } else {
                    state
                },
                c.reason.clone(),
            ]
        })
        .collect();
    table(&["CHECK", "STATE", "LAST REASON"], &rows);
}

fn table<const N: usize>(head: &[&str; N], rows: &[[String; N]]) {
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec()).collect();
    print_rows(&head, &rows);
}

fn format_ms(ms: u64) -> String {
    crate::when::iso_ms(ms)
}
