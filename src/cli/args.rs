//! The command line's shape: the clap definitions of `gtm` and of the
//! subcommands whose nouns have no file of their own. Parsing only; what
//! each command does is in its noun's module.

use std::{net::IpAddr, path::PathBuf};

use clap::{Parser, Subcommand};

use super::{accounts, drain, geoip, history, objects, schedule};

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
    Logs(LogsArgs),
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

/// What `gtm logs` prints: filters, and whether to follow.
#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// Only this record, e.g. www.example.test/A.
    #[arg(long)]
    pub record: Option<String>,
    /// Only events of this kind: record, check, scenario, operator, config,
    /// datacenter, geoip, device.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only events newer than this, e.g. 10m or 2h.
    #[arg(long)]
    pub since: Option<String>,
    /// Keep printing new events as they happen.
    #[arg(long, short)]
    pub follow: bool,
    /// Only the newest N events.
    #[arg(long, short = 'n')]
    pub limit: Option<usize>,
    #[arg(long)]
    pub json: bool,
}
