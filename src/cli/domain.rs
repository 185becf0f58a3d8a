//! `gtm domain ...`: the domain objects, and their DNSSEC (docs/dnssec.md).

use std::time::Duration;

use anyhow::Result;
use clap::Subcommand;
use serde_json::json;

use super::{
    client::{CliError, Client, Connect},
    objects::{self, segment},
    output::format_ms,
};
use gtm_engine::dnssec::DomainDnssec;

#[derive(Debug, Subcommand)]
pub enum DomainCmd {
    /// Every domain, as configured.
    #[command(after_help = "Examples:\n  gtm domain list\n  gtm domain list --json")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Object(objects::ObjectCmd),
    /// DNSSEC: sign a domain online, stop, see its keys and signatures.
    #[command(subcommand)]
    Dnssec(DnssecCmd),
    /// A domain transferred in from a primary keeps what it serves as its
    /// own records, and no longer has a primary: the end of a migration
    /// (docs/transfer.md, "Transfer in").
    #[command(after_help = "Example:\n  gtm domain promote legacy.example.com")]
    Promote {
        /// The domain, e.g. legacy.example.com.
        name: String,
    },
    /// The DS records of a signed domain, for its parent zone.
    #[command(after_help = "Example:\n  gtm domain ds example.test")]
    Ds {
        /// The domain, e.g. example.test.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DnssecCmd {
    /// Sign the domain (sets dnssec = true); its key is made once, for the
    /// whole cluster. Prints the DS records for the parent.
    #[command(
        after_help = "Examples:\n  gtm domain dnssec enable example.test\n  gtm domain dnssec enable example.test --algorithm ed25519"
    )]
    Enable {
        /// The domain, e.g. example.test.
        name: String,
        /// The algorithm of the key, when one is made (default ecdsap256sha256).
        #[arg(long, value_parser = ["ecdsap256sha256", "ed25519"])]
        algorithm: Option<String>,
    },
    /// Stop signing (sets dnssec off). Remove the DS at the parent first
    /// and wait its TTL: a zone whose parent has a DS fails validation
    /// when answered unsigned. The key is kept.
    #[command(after_help = "Example:\n  gtm domain dnssec disable example.test --confirm")]
    Disable {
        /// The domain, e.g. example.test.
        name: String,
        /// Required: the DS is gone from the parent.
        #[arg(long)]
        confirm: bool,
    },
    /// One step of a key rollover: `publish` a new key (not signing yet),
    /// `swap` to it once its DS is at the parent, `retire` the old key once
    /// its DS is gone. Each step is refused before its wait is over, and
    /// says until when.
    #[command(
        after_help = "Example (the whole procedure):\n  gtm domain dnssec rollover example.test publish\n  gtm domain ds example.test        # give both DS to the parent\n  gtm domain dnssec rollover example.test swap\n  gtm domain ds example.test        # the new DS only, at the parent\n  gtm domain dnssec rollover example.test retire"
    )]
    Rollover {
        /// The domain, e.g. example.test.
        name: String,
        /// publish, swap or retire.
        #[arg(value_parser = ["publish", "swap", "retire"])]
        step: String,
        /// The new key's algorithm (publish; default the domain's).
        #[arg(long, value_parser = ["ecdsap256sha256", "ed25519"])]
        algorithm: Option<String>,
    },
    /// Whether the domain is signed, its keys (tag, algorithm, state,
    /// DNSKEY, DS), when the signatures served expire, and the next step
    /// of a rollover under way.
    #[command(after_help = "Example:\n  gtm domain dnssec status example.test")]
    Status {
        /// The domain, e.g. example.test.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn run(cli: &Connect, cmd: &DomainCmd) -> Result<()> {
    let client = Client::new(cli)?;
    match cmd {
        DomainCmd::List { json } => objects::list(&client, "domains", *json).await,
        DomainCmd::Object(cmd) => objects::object(&client, "domains", cmd).await,
        DomainCmd::Dnssec(DnssecCmd::Enable { name, algorithm }) => {
            let mut body = json!({ "dnssec": true });
            if let Some(a) = algorithm {
                body["dnssec_algorithm"] = json!(a);
            }
            let path = format!("/api/v1/domains/{}", segment(name));
            objects::write(
                &client,
                client.http.patch(client.url(&path)).json(&body),
                &objects::Look::default(),
            )
            .await?;
            // The key is made by the leader just after: wait for it (bounded).
            let Some(state) = key_in_force(&client, name).await? else {
                return Err(CliError::Api {
                    kind: gtm_model::error::ErrorKind::Cluster,
                    message: no_key(name),
                }
                .into());
            };
            print_ds(&state);
            Ok(())
        }
        DomainCmd::Dnssec(DnssecCmd::Disable { name, confirm }) => {
            if !*confirm {
                return Err(CliError::BadInput(format!(
                    "stopping signing breaks validation while the parent has a DS for {name}: remove the DS at the parent, wait its TTL, then run this again with --confirm"
                ))
                .into());
            }
            let body = json!({ "dnssec": null });
            let path = format!("/api/v1/domains/{}", segment(name));
            objects::write(
                &client,
                client.http.patch(client.url(&path)).json(&body),
                &objects::Look::default(),
            )
            .await
        }
        DomainCmd::Dnssec(DnssecCmd::Rollover {
            name,
            step,
            algorithm,
        }) => {
            let mut body = json!({ "step": step });
            if let Some(a) = algorithm {
                body["algorithm"] = json!(a);
            }
            let path = format!("/api/v1/domains/{}/dnssec/rollover", segment(name));
            let state: DomainDnssec = client
                .send(client.http.post(client.url(&path)).json(&body))
                .await?;
            print_status(&state);
            Ok(())
        }
        DomainCmd::Dnssec(DnssecCmd::Status { name, json }) => {
            let state = status(&client, name).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&state)?);
            } else {
                print_status(&state);
            }
            Ok(())
        }
        DomainCmd::Promote { name } => {
            let request = client
                .http
                .post(client.url(&format!("/api/v1/domains/{}/promote", segment(name))));
            let result: gtm_api::ApplyResult = client.send(request).await?;
            super::output::print_apply(&result);
            Ok(())
        }
        DomainCmd::Ds { name } => {
            let state = status(&client, name).await?;
            if state.keys.is_empty() && !state.signed {
                return Err(CliError::NotFound(format!(
                    "{} is not signed (gtm domain dnssec enable {} signs it and prints its DS)",
                    state.domain, state.domain
                ))
                .into());
            }
            // Signed in the configuration: its key may be moments from
            // being made (just after an apply). Wait for it, bounded.
            let state = if state.keys.is_empty() || !state.signing {
                key_in_force(&client, name)
                    .await?
                    .ok_or_else(|| CliError::NotFound(no_key(name)))?
            } else {
                state
            };
            print_ds(&state);
            Ok(())
        }
    }
}

/// The domain's DNSSEC state once a key is in force: the leader makes it
/// just after the configuration signs the domain. Waits up to 10 s;
/// `None` when none came.
async fn key_in_force(client: &Client, name: &str) -> Result<Option<DomainDnssec>> {
    for _ in 0..40 {
        let state = status(client, name).await?;
        if !state.keys.is_empty() && state.signing {
            return Ok(Some(state));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(None)
}

/// What is said when a signed domain has no key in force.
fn no_key(name: &str) -> String {
    format!(
        "{name} is signed in the configuration, but no key is in force yet; `gtm logs --kind config` says why, `gtm domain dnssec status {name}` shows it once there"
    )
}

async fn status(client: &Client, name: &str) -> Result<DomainDnssec> {
    let path = format!("/api/v1/domains/{}/dnssec", segment(name));
    client.send(client.http.get(client.url(&path))).await
}

/// The DS records the parent should hold: the active key's, and a
/// published key's during a rollover (not a retired key's).
fn print_ds(state: &DomainDnssec) {
    for k in state.keys.iter().filter(|k| k.state != "retired") {
        println!("{}", k.ds);
    }
}

fn print_status(state: &DomainDnssec) {
    println!(
        "{}: {}",
        state.domain,
        match (state.signed, state.signing) {
            (true, true) => "signed",
            (true, false) => "signed in the configuration, no key in force yet",
            (false, true) => "unsigned in the configuration, still signed here",
            (false, false) => "unsigned",
        }
    );
    if let Some(ms) = state.expires_ms {
        println!(
            "signatures expire {} (made again a week before)",
            format_ms(ms)
        );
    }
    for k in &state.keys {
        println!(
            "key {} algorithm {} {} made {}",
            k.tag,
            k.algorithm,
            k.state,
            format_ms(k.created_ms)
        );
        println!("  {}", k.dnskey);
        println!("  {}", k.ds);
    }
    if let Some(next) = &state.next_step {
        println!(
            "next: {} from {}; first {}",
            next.step,
            format_ms(next.from_ms),
            next.parent
        );
    }
}
