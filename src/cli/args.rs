//! The command line's shape: the clap definitions of `gtm` and of the
//! subcommands whose nouns have no file of their own. Parsing only; what
//! each command does is in its noun's module. Every argument has help and
//! every command an example (`after_help`): a test below walks the whole
//! tree, and docs/cli-reference.md is generated from it.

use std::{net::IpAddr, path::PathBuf};

use clap::{Parser, Subcommand};

use super::{accounts, client::Connect, drain, geoip, history, logs, objects, schedule, tsig};

#[derive(Debug, Parser)]
#[command(
    name = "gtm",
    version,
    about = "Global Traffic Manager: authoritative DNS whose answers follow health"
)]
pub struct Cli {
    #[command(flatten)]
    pub connect: Connect,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a device. Without --config: the embedded demo on 127.0.0.1:1053.
    #[command(after_help = "Examples:\n  gtm serve\n  gtm serve --config /etc/gtm/node.toml")]
    Serve {
        /// The node file (name, datacenter, listeners, data directory, GeoIP).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// This device's node file (the settings of `gtm serve --config`).
    #[command(subcommand)]
    Node(NodeCmd),
    /// The replicated configuration.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Records with their status and the addresses answered now.
    #[command(after_help = "Examples:\n  gtm status\n  gtm status --json")]
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The event log (GTM Logs) of the device.
    #[command(
        after_help = "Examples:\n  gtm logs --record www.example.test/A --since 1h\n  gtm logs -f --kind check\n  gtm logs -n 20"
    )]
    Logs(logs::LogsArgs),
    /// Records: configuration, preview, failback resume, drains.
    #[command(subcommand)]
    Record(RecordCmd),
    /// Checks: configuration, state of every instance, operator-set states, test now.
    #[command(subcommand)]
    Check(CheckCmd),
    /// Alerts: each notifier's delivery state on this device; a test
    /// message sent now.
    #[command(subcommand)]
    Alert(AlertCmd),
    /// Datacenters: configuration; drain one out of answers and back.
    #[command(subcommand)]
    Dc(DcCmd),
    /// Domains (zones): configuration, DNSSEC.
    #[command(subcommand)]
    Domain(super::domain::DomainCmd),
    /// Zone files: import an RFC 1035 master file into a domain, export a
    /// served zone as one.
    #[command(subcommand)]
    Zone(super::zone::ZoneCmd),
    /// Health scenarios: configuration.
    #[command(subcommand)]
    Scenario(objects::ListedCmd),
    /// Regions: named sets of client networks, countries and continents
    /// that topology rules name (docs/topology.md).
    #[command(subcommand)]
    Region(objects::ListedCmd),
    /// Notifiers: where alerts go (webhook, e-mail, syslog), with their
    /// filters, delay and repeats (docs/operations.md, "Alerts").
    #[command(subcommand)]
    Notifier(objects::ListedCmd),
    /// Views: classes of clients (by network, region, AS, subdivision,
    /// country or continent) answered from zones of their own (split
    /// horizon, docs/views.md).
    #[command(subcommand)]
    View(objects::ListedCmd),
    /// Services: configuration. A service is a named group of domains (the
    /// appliance's "GTM Service"); a domain belongs to at most one.
    #[command(subcommand)]
    Service(objects::ListedCmd),
    /// Print a shell completion script.
    #[command(after_help = "Example:\n  gtm completions bash > /etc/bash_completion.d/gtm")]
    Completions {
        /// The shell the script is for.
        shell: clap_complete::Shell,
    },
    /// Write the man pages into DIR/man1 (one per command) and DIR/man5
    /// (gtm.toml, gtm-node.toml), for packaging.
    #[command(hide = true, after_help = "Example:\n  gtm manpages out/")]
    Manpages {
        /// The directory the pages are written under (created if missing).
        dir: PathBuf,
    },
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
    #[command(after_help = "Example:\n  gtm whoami")]
    Whoami,
    /// Operator actions at a time: drains, check sets, resumes.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCmd),
    /// TSIG keys for zone transfers and NOTIFY (docs/transfer.md).
    #[command(subcommand)]
    Tsig(tsig::TsigCmd),
}

#[derive(Debug, Subcommand)]
pub enum NodeCmd {
    /// Check a node file offline: it parses as `gtm serve --config` reads
    /// it, and passes every check serve makes before it listens (data_dir,
    /// GeoIP file, dns_cpus, TLS files readable and matching). Binds
    /// nothing. Exits 2 naming each setting at fault.
    #[command(
        after_help = "Examples:\n  gtm node check\n  gtm node check /etc/gtm/node.toml\n  GTM_NODE_FILE=./node.toml gtm node check"
    )]
    Check {
        /// The node file (default: GTM_NODE_FILE, else /etc/gtm/node.toml).
        file: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Make this device the first member of a new cluster.
    #[command(after_help = "Example:\n  gtm cluster init")]
    Init,
    /// Print the token another device needs to join.
    #[command(after_help = "Example:\n  gtm cluster token")]
    Token,
    /// Join the cluster of the device at ADDRESS (its API address).
    #[command(after_help = "Example:\n  gtm cluster join http://127.0.0.11:8053 --token gtm1.…")]
    Join {
        /// The API address of a device of the cluster.
        address: String,
        /// The join token, as `gtm cluster token` prints it on that device.
        #[arg(long)]
        token: String,
        /// Join as a non-voting member.
        #[arg(long)]
        learner: bool,
    },
    /// Leave the cluster (the device keeps serving its last configuration).
    #[command(after_help = "Example:\n  gtm cluster leave")]
    Leave,
    /// Members, datacenter, voter or learner, leader, term, applied index, last contact.
    #[command(after_help = "Example:\n  gtm cluster status")]
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// After the permanent loss of the peer: continue on this device alone.
    #[command(after_help = "Example:\n  gtm cluster recover --force-single")]
    Recover {
        /// Required: make this device the only voter.
        #[arg(long)]
        force_single: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeviceCmd {
    /// Every device of the cluster.
    #[command(after_help = "Example:\n  gtm device list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Validate a file and list every error with its place; changes nothing.
    #[command(after_help = "Example:\n  gtm config check config/example.toml")]
    Check {
        /// The configuration file (TOML); - for stdin.
        file: PathBuf,
    },
    /// Validate and apply a file atomically, showing what changes.
    #[command(
        after_help = "Examples:\n  gtm config apply site.toml --dry-run\n  gtm config apply site.toml\n  gtm config export | gtm config apply -"
    )]
    Apply {
        /// The configuration file (TOML); - for stdin.
        file: PathBuf,
        /// Show the changes (the fields, and each record's answers now and
        /// after on every device) without applying them.
        #[arg(long)]
        dry_run: bool,
        /// Apply a configuration with no domain over one that has some
        /// (it stops answering for every domain).
        #[arg(long)]
        allow_empty: bool,
        /// Apply even if a device would answer a record with nothing.
        #[arg(long)]
        force: bool,
    },
    /// Print the applied configuration.
    #[command(after_help = "Example:\n  gtm config export > site.toml")]
    Export,
    /// The configuration versions kept: version, time, who, what, changes.
    #[command(after_help = "Examples:\n  gtm config history\n  gtm config history --changes")]
    History {
        /// Also print each version's field-level changes.
        #[arg(long)]
        changes: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a configuration: the applied one, or a version from history.
    #[command(after_help = "Examples:\n  gtm config show\n  gtm config show --version 6")]
    Show {
        /// The version to print (default: the applied configuration).
        #[arg(long)]
        version: Option<u64>,
    },
    /// Field-level changes from version FROM to version TO.
    #[command(after_help = "Example:\n  gtm config diff 6 9")]
    Diff {
        /// The older version.
        from: u64,
        /// The newer version.
        to: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make a kept version's configuration current again (a new version).
    #[command(after_help = "Examples:\n  gtm config rollback 6 --dry-run\n  gtm config rollback 6")]
    Rollback {
        /// The version whose configuration becomes current.
        version: u64,
        /// Show the changes from the applied configuration, and each
        /// record's answers on every device; apply nothing.
        #[arg(long)]
        dry_run: bool,
        /// Roll back even if a device would answer a record with nothing.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum RecordCmd {
    #[command(flatten)]
    Object(objects::RecordObjectCmd),
    /// What the record answers now, the mode's decision, addresses and the latest switchovers.
    #[command(
        after_help = "Examples:\n  gtm record preview www.example.test A\n  gtm record preview www.example.test A --device gtm2"
    )]
    Preview {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// The preview as another device of the cluster computes it.
        #[arg(long)]
        device: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// How the record resolves for one client, step by step, ending in the answer DNS gives it now.
    #[command(
        after_help = "Examples:\n  gtm record explain www.example.test A\n  gtm record explain geo.example.test A --ecs 81.2.69.0/24\n  gtm record explain www.example.test A --client 192.0.2.1 --device gtm2"
    )]
    Explain {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// The query's source address (default 127.0.0.1, which GeoIP places nowhere).
        #[arg(long, value_name = "IP")]
        client: Option<String>,
        /// The client subnet (ECS) the query carries, ADDRESS/PREFIX.
        #[arg(long, value_name = "NET")]
        ecs: Option<String>,
        /// As another device of the cluster computes it.
        #[arg(long)]
        device: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Return to the Main DC after a manual-failback DR (failback = "manual").
    #[command(after_help = "Example:\n  gtm record resume www.example.test A")]
    Resume {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
    },
    /// Take an address out of answers (maintenance), for one record or all.
    #[command(
        after_help = "Examples:\n  gtm record drain 192.0.2.10 --record www.example.test/A --dry-run\n  gtm record drain 192.0.2.10"
    )]
    Drain {
        /// The address (IP, or a CNAME's target name).
        address: String,
        /// Only this record, as NAME/TYPE, e.g. www.example.test/A.
        #[arg(long, value_name = "NAME/TYPE", value_parser = drain::record_ref)]
        record: Option<String>,
        #[command(flatten)]
        look: drain::Look,
    },
    /// Put a drained address back: name exactly an active drain (the same
    /// --record, or none), as `gtm record drains` lists them.
    #[command(after_help = "Example:\n  gtm record undrain 192.0.2.10 --record www.example.test/A")]
    Undrain {
        /// The drained address.
        address: String,
        /// The record of the drain, as NAME/TYPE (none for a drain of
        /// every record).
        #[arg(long, value_name = "NAME/TYPE", value_parser = drain::record_ref)]
        record: Option<String>,
        #[command(flatten)]
        look: drain::Look,
    },
    /// The active drains (addresses and datacenters), with who made them
    /// and when; the same on every device.
    #[command(after_help = "Example:\n  gtm record drains")]
    Drains {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// How many responses of this device carried the record, and each of
    /// its addresses (per device, counted since the device started).
    #[command(after_help = "Example:\n  gtm record stats www.example.test A")]
    Stats {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum AlertCmd {
    /// Each notifier's delivery state on this device: delivered, failed
    /// attempts, dropped, queued, open alerts, the last error.
    #[command(after_help = "Example:\n  gtm alert list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Send a test message through a notifier now, from this device. Exit
    /// 1 when it is not delivered.
    #[command(after_help = "Example:\n  gtm alert test ops-webhook")]
    Test {
        /// The notifier.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum CheckCmd {
    /// Every check instance with its state and last reason.
    #[command(after_help = "Example:\n  gtm check list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set a manual check: ok or error.
    #[command(after_help = "Example:\n  gtm check set maintenance ok")]
    Set {
        /// The manual check.
        name: String,
        /// Its new state: ok or error.
        state: String,
    },
    /// Report a push check's state: ok or error (a token of any role; a
    /// reporter token may do only this and Alertmanager's notifications).
    #[command(
        after_help = "Examples:\n  gtm check push beat ok --address 192.0.2.10\n  gtm check push nightly error --reason \"backup failed\""
    )]
    Push {
        /// The push check.
        name: String,
        /// The state reported: ok or error.
        state: String,
        /// The address the report is for (a template check's).
        #[arg(long)]
        address: Option<std::net::IpAddr>,
        /// Why, as the check's reason shows it.
        #[arg(long)]
        reason: Option<String>,
    },
    #[command(flatten)]
    Object(objects::ObjectCmd),
    /// Test now: run one probe without saving; prints the result, the reason, the time it took and the device that probed.
    ///
    /// The check is a saved one (NAME) or one not saved, given whole in a
    /// file (--file) as the keys of a [[check]] table: it is validated with
    /// the applied configuration and saved nowhere. It is probed from
    /// where it runs: a check with run_on by a device of that datacenter,
    /// an address outside this device's probe_networks by a device that
    /// may probe it; the result names the device and the address. Exit 1
    /// when the probe fails.
    #[command(
        after_help = "Examples:\n  gtm check test web --address 192.0.2.10\n  gtm check test --file check.toml --address 192.0.2.10\n  printf 'type = \"tcp\"\\nport = 443\\n' | gtm check test --file - --address 192.0.2.10"
    )]
    Test {
        /// The saved check to probe.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        name: Option<String>,
        /// A check not saved: a TOML file of its keys, as in a [[check]]
        /// table of the configuration; - for stdin.
        #[arg(long, short, value_name = "FILE")]
        file: Option<PathBuf>,
        /// The address to probe a template check against.
        #[arg(long)]
        address: Option<IpAddr>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DcCmd {
    /// Every datacenter, as configured.
    #[command(after_help = "Example:\n  gtm dc list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Object(objects::ObjectCmd),
    /// Take every address of a datacenter out of answers.
    #[command(after_help = "Examples:\n  gtm dc drain dc1 --dry-run\n  gtm dc drain dc1")]
    Drain {
        /// The datacenter.
        name: String,
        #[command(flatten)]
        look: drain::Look,
    },
    /// Put a drained datacenter back.
    #[command(after_help = "Example:\n  gtm dc undrain dc1")]
    Undrain {
        /// The datacenter.
        name: String,
        #[command(flatten)]
        look: drain::Look,
    },
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{CheckCmd, Cli, Command, RecordCmd};

    /// Every argument of every command has help, every command an about,
    /// and every leaf command an example: walked over the whole tree so
    /// that a new one without them fails here.
    #[test]
    fn every_argument_has_help_and_every_command_an_example() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                if matches!(
                    arg.get_action(),
                    clap::ArgAction::Help
                        | clap::ArgAction::HelpShort
                        | clap::ArgAction::HelpLong
                        | clap::ArgAction::Version
                ) {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path}: argument {} has no help", arg.get_id()));
                }
            }
            if cmd.get_about().is_none() {
                missing.push(format!("{path}: no about"));
            }
            let subs: Vec<&clap::Command> = cmd
                .get_subcommands()
                .filter(|s| s.get_name() != "help")
                .collect();
            let example = cmd
                .get_after_help()
                .or(cmd.get_after_long_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            if subs.is_empty() && !example.contains("Example") {
                missing.push(format!("{path}: no example"));
            }
            for s in subs {
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut root = Cli::command();
        root.build();
        let mut missing = Vec::new();
        walk(&root, "gtm", &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    #[test]
    fn service_help_says_what_a_service_is() {
        let root = Cli::command();
        let service = root.find_subcommand("service").unwrap();
        let about = service.get_about().unwrap().to_string();
        assert!(about.contains("named group of domains"), "{about}");
        assert!(!about.contains("ports"), "{about}");
    }

    /// `[env: GTM_DATA_DIR=]` with nothing after `=` read as a bug.
    #[test]
    fn help_shows_no_dangling_env_value() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("[env: GTM_DATA_DIR]"), "{help}");
        assert!(!help.contains("=]"), "{help}");
    }

    #[test]
    fn a_drain_record_must_be_name_slash_type() {
        for form in ["api.example.test", "api.example.test/", "/A", "a/b c"] {
            let err =
                Cli::try_parse_from(["gtm", "record", "drain", "192.0.2.1", "--record", form])
                    .unwrap_err();
            assert_eq!(err.exit_code(), 2, "{form}");
            assert!(err.to_string().contains("expected NAME/TYPE"), "{err}");
        }
        let cli = Cli::try_parse_from([
            "gtm",
            "record",
            "undrain",
            "192.0.2.1",
            "--record",
            "api.example.test/A",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Command::Record(RecordCmd::Undrain { record: Some(r), .. }) if r == "api.example.test/A"
        ));
        assert!(
            Cli::try_parse_from([
                "gtm",
                "schedule",
                "add",
                "--at",
                "+1h",
                "record",
                "drain",
                "192.0.2.1",
                "--record",
                "www"
            ])
            .is_err()
        );
    }

    #[test]
    fn check_test_takes_a_name_or_a_file() {
        let by_file = Cli::try_parse_from([
            "gtm",
            "check",
            "test",
            "--file",
            "-",
            "--address",
            "127.0.0.2",
        ])
        .unwrap();
        assert!(matches!(
            by_file.command,
            Command::Check(CheckCmd::Test {
                name: None,
                file: Some(_),
                address: Some(_),
                ..
            })
        ));
        let both = Cli::try_parse_from(["gtm", "check", "test", "web", "--file", "c.toml"]);
        assert_eq!(both.unwrap_err().exit_code(), 2);
        let neither = Cli::try_parse_from(["gtm", "check", "test"]);
        assert_eq!(neither.unwrap_err().exit_code(), 2);
    }
}
