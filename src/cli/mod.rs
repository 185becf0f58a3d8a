#![allow(clippy::print_stdout)] // the CLI prints for people
//! The `gtm` command line: `serve` runs a device; every other command is a
//! client of a device's API.

use std::{net::IpAddr, path::PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use crate::{
    api::{ApiError, ApplyResult, GeoLookup, StatusReport},
    device::{API_FILE, Device, TOKEN_FILE},
    engine::Event,
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
    pub token: Option<String>,
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
        #[arg(long)]
        json: bool,
    },
    /// GeoIP: where an address is, and the database.
    #[command(subcommand)]
    Geoip(GeoipCmd),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Validate a file and list every error with its place; changes nothing.
    Check { file: PathBuf },
    /// Validate and apply a file atomically, showing what changes.
    Apply {
        file: PathBuf,
        /// Show the changes without applying them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the applied configuration.
    Export,
}

#[derive(Debug, Subcommand)]
pub enum GeoipCmd {
    /// Where an address is, as the DNS path sees it.
    Lookup {
        ip: IpAddr,
        #[arg(long)]
        json: bool,
    },
    /// Validate a country .mmdb and install it on the device.
    Import { file: PathBuf },
}

/// Exit codes: 0 ok, 1 error, 2 bad input (clap's too), 3 unreachable.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Unreachable(String),
}

pub fn exit_code(e: &anyhow::Error) -> i32 {
    match e.downcast_ref::<CliError>() {
        Some(CliError::BadInput(_)) => 2,
        Some(CliError::Unreachable(_)) => 3,
        None => 1,
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
        Command::Config(ConfigCmd::Apply { file, dry_run }) => {
            let text = read(file)?;
            let client = Client::new(&cli)?;
            let path = if *dry_run {
                "/api/v1/config?dry_run=true"
            } else {
                "/api/v1/config"
            };
            let result: ApplyResult = client
                .send(client.http.put(client.url(path)).body(text))
                .await?;
            if result.changes.is_empty() {
                println!("no changes");
            }
            for line in &result.changes {
                println!("{line}");
            }
            if result.applied {
                println!("applied as version {}", result.version);
            } else {
                println!("dry run: nothing applied");
            }
            Ok(())
        }
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
            Ok(())
        }
        Command::Logs { json } => {
            let client = Client::new(&cli)?;
            let events: Vec<Event> = client
                .send(client.http.get(client.url("/api/v1/events")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&events)?);
            } else {
                for e in events {
                    println!("{}  {}  {}", format_ms(e.time_ms), e.device, e.text);
                }
            }
            Ok(())
        }
        Command::Geoip(GeoipCmd::Lookup { ip, json }) => {
            let client = Client::new(&cli)?;
            let found: GeoLookup = client
                .send(
                    client
                        .http
                        .get(client.url(&format!("/api/v1/geoip/lookup/{ip}"))),
                )
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&found)?);
            } else {
                println!("address    {}", found.ip);
                println!("country    {}", found.country.as_deref().unwrap_or("-"));
                println!("continent  {}", found.continent.as_deref().unwrap_or("-"));
                println!("network    /{}", found.prefix);
                println!("database   {}", found.database);
                if let Some(note) = found.note {
                    println!("note       {note}");
                }
            }
            Ok(())
        }
        Command::Geoip(GeoipCmd::Import { file }) => {
            let bytes = std::fs::read(file)
                .map_err(|e| CliError::BadInput(format!("cannot read {}: {e}", file.display())))?;
            let client = Client::new(&cli)?;
            let _: GeoLookup = client
                .send(client.http.put(client.url("/api/v1/geoip")).body(bytes))
                .await?;
            println!("installed {}", file.display());
            Ok(())
        }
    }
}

async fn serve(config: Option<PathBuf>, data_dir: Option<PathBuf>) -> Result<()> {
    let (settings, demo) = match config {
        Some(path) => {
            let text = read(&path)?;
            let settings = NodeSettings::parse(&text)
                .map_err(|e| CliError::BadInput(format!("{}: {e}", path.display())))?;
            (settings, false)
        }
        None => (
            NodeSettings::demo(data_dir.unwrap_or_else(default_data_dir)),
            true,
        ),
    };
    let device = Device::start(settings, demo).await?;
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
    if demo
        && let Some(addr) = device.dns_addrs.first() {
            eprintln!(
                "try: dig @{} -p {} www.example.test A",
                addr.ip(),
                addr.port()
            );
        }
    shutdown_signal().await;
    device.stop().await;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn read(file: &PathBuf) -> Result<String> {
    std::fs::read_to_string(file)
        .map_err(|e| CliError::BadInput(format!("cannot read {}: {e}", file.display())).into())
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
        let token = match &cli.token {
            Some(t) => t.clone(),
            None => std::fs::read_to_string(dir.join(TOKEN_FILE))
                .map(|s| s.trim().to_string())
                .map_err(|_| {
                    CliError::BadInput(format!(
                        "no API token: {} has no {TOKEN_FILE} (give --token or GTM_TOKEN)",
                        dir.display()
                    ))
                })?,
        };
        let http = reqwest::Client::builder()
            .build()
            .context("building the HTTP client")?;
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
                if status.is_client_error() {
                    bail!(CliError::BadInput(msg))
                }
                bail!("{msg}")
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

fn table<const N: usize>(head: &[&str; N], rows: &[[String; N]]) {
    let mut widths = head.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(head.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn format_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}
