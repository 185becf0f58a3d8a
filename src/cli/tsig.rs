//! `gtm tsig ...`: the cluster's TSIG keys (docs/transfer.md). A new key's
//! secret is made by the device and printed once, on standard output.

use anyhow::Result;
use clap::Subcommand;

use super::{
    client::Client,
    output::{format_ms, table},
};
use gtm_api::tsig::TsigKeyRequest;
use gtm_dns::tsig::{NewTsigKey, TsigKeyInfo};

#[derive(Debug, Subcommand)]
pub enum TsigCmd {
    /// The TSIG keys, with their algorithms (never the secrets).
    #[command(after_help = "Example:\n  gtm tsig list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Add a TSIG key (HMAC-SHA256); its secret (base64) is printed once
    /// and kept only in the cluster.
    #[command(after_help = "Example:\n  gtm tsig add xfr-ns2")]
    Add {
        /// The key's name, as the secondary's configuration names it (a
        /// domain name: a-z, 0-9, '-', '_', dots).
        name: String,
    },
    /// Delete a TSIG key; refused while secondaries (a domain's or the
    /// catalog's) or a domain's update grants name it.
    #[command(after_help = "Example:\n  gtm tsig delete xfr-ns2")]
    Delete {
        /// The key's name.
        name: String,
    },
}

pub(super) async fn run(client: &Client, cmd: &TsigCmd) -> Result<()> {
    match cmd {
        TsigCmd::List { json } => {
            let keys: Vec<TsigKeyInfo> = client
                .send(client.http.get(client.url("/api/v1/tsig")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&keys)?);
                return Ok(());
            }
            let rows: Vec<[String; 4]> = keys
                .iter()
                .map(|k| {
                    [
                        k.name.clone(),
                        k.algorithm.clone(),
                        format_ms(k.time_ms),
                        k.by.to_string(),
                    ]
                })
                .collect();
            table(&["NAME", "ALGORITHM", "ADDED", "BY"], &rows);
            Ok(())
        }
        TsigCmd::Add { name } => {
            let made: NewTsigKey = client
                .send(
                    client
                        .http
                        .post(client.url("/api/v1/tsig"))
                        .json(&TsigKeyRequest { name: name.clone() }),
                )
                .await?;
            println!("{}", made.secret);
            eprintln!(
                "TSIG key {name} added ({}); its secret is shown this once. For dig: -y hmac-sha256:{name}:<secret>",
                made.algorithm
            );
            Ok(())
        }
        TsigCmd::Delete { name } => {
            let _: Vec<TsigKeyInfo> = client
                .send(
                    client
                        .http
                        .delete(client.url(&format!("/api/v1/tsig/{name}"))),
                )
                .await?;
            println!("TSIG key {name} deleted");
            Ok(())
        }
    }
}
