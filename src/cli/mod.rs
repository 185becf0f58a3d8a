#![allow(clippy::print_stdout)] // the CLI prints for people
//! The `gtm` command line: `serve` runs a device; every other command is a
//! client of a device's API.
//!
//! `args` is the command line's shape, `client` the API client and the
//! exit codes, `output` the printing helpers; each noun (`config`,
//! `record`, `check`, ...) has a module with what its commands do.

mod accounts;
mod alert;
mod args;
mod check;
mod client;
mod cluster;
mod completions;
mod config;
mod dc;
mod device;
pub mod domain;
mod drain;
mod geoip;
mod history;
mod logs;
mod manpages;
mod node;
mod objects;
mod output;
mod record;
pub mod reference;
mod roff;
mod schedule;
mod serve;
mod status;
mod tsig;
mod zone;

use anyhow::Result;

pub use args::{
    CheckCmd, Cli, ClusterCmd, Command, ConfigCmd, DcCmd, DeviceCmd, NodeCmd, RecordCmd,
};
pub use client::{CliError, Connect, api_exit_code, exit_code};

/// Runs one command line: each noun's module does its commands.
pub async fn run(cli: Cli) -> Result<()> {
    let connect = &cli.connect;
    let client = || client::Client::new(connect);
    match &cli.command {
        Command::Serve { config } => serve::run(config.clone(), connect.data_dir.clone()).await,
        Command::Config(cmd) => config::run(connect, cmd).await,
        Command::Status { json } => status::run(connect, *json).await,
        Command::Logs(args) => logs::run(connect, args).await,
        Command::Record(cmd) => record::run(connect, cmd).await,
        Command::Check(cmd) => check::run(connect, cmd).await,
        Command::Alert(cmd) => alert::run(connect, cmd).await,
        Command::Dc(cmd) => dc::run(connect, cmd).await,
        Command::Domain(cmd) => domain::run(connect, cmd).await,
        Command::Scenario(cmd) => objects::listed(connect, "scenarios", cmd).await,
        Command::Region(cmd) => objects::listed(connect, "regions", cmd).await,
        Command::Notifier(cmd) => objects::listed(connect, "notifiers", cmd).await,
        Command::View(cmd) => objects::listed(connect, "views", cmd).await,
        Command::Service(cmd) => objects::listed(connect, "services", cmd).await,
        Command::Completions { shell } => completions::run(*shell),
        Command::Manpages { dir } => manpages::run(dir),
        Command::Node(NodeCmd::Check { file }) => node::check(file.as_deref()),
        Command::Geoip(cmd) => geoip::run(&client()?, cmd).await,
        Command::Cluster(cmd) => cluster::run(connect, cmd).await,
        Command::Device(cmd) => device::run(connect, cmd).await,
        Command::Command(cmd) => history::command(&client()?, cmd).await,
        Command::User(cmd) => accounts::user(&client()?, cmd).await,
        Command::Token(cmd) => accounts::token(&client()?, cmd).await,
        Command::Whoami => accounts::whoami(&client()?).await,
        Command::Schedule(cmd) => schedule::schedule(&client()?, cmd).await,
        Command::Tsig(cmd) => tsig::run(&client()?, cmd).await,
        Command::Zone(cmd) => zone::run(connect, cmd).await,
    }
}
