//! `gtm geoip ...`: where an address is, the device's database, importing
//! a file and downloading from the configured source (`[geoip]`).

use std::{net::IpAddr, path::PathBuf};

use anyhow::Result;
use clap::Subcommand;

use super::client::{CliError, Client};
use gtm_api::{GeoLookup, GeoipStatus};

#[derive(Debug, Subcommand)]
pub enum GeoipCmd {
    /// Where an address is, as the DNS path sees it.
    #[command(after_help = "Example:\n  gtm geoip lookup 81.2.69.160")]
    Lookup {
        /// The IPv4 or IPv6 address to place.
        ip: IpAddr,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Validate a country, City or ASN .mmdb whole and install it on the
    /// device.
    #[command(
        after_help = "Examples:\n  gtm geoip import GeoLite2-Country.mmdb\n  gtm geoip import --asn dbip-asn-lite-2026-12.mmdb"
    )]
    Import {
        /// The database (.mmdb) to install.
        file: PathBuf,
        /// It is an ASN database (for asn: topology rules), installed
        /// beside the country or City one.
        #[arg(long)]
        asn: bool,
    },
    /// The device downloads its database from the configured source now
    /// (operator role).
    #[command(after_help = "Examples:\n  gtm geoip download\n  gtm geoip download --asn")]
    Download {
        /// The ASN database, from `[geoip] asn_source`.
        #[arg(long)]
        asn: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The device's database: name, build date, age, source.
    #[command(after_help = "Example:\n  gtm geoip show")]
    Show {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// How to learn what became of an import or download that got no answer.
const GEOIP_LOOK: &str = "`gtm geoip show` shows the database the device has";

pub async fn run(client: &Client, cmd: &GeoipCmd) -> Result<()> {
    match cmd {
        GeoipCmd::Lookup { ip, json } => {
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
                if let Some(d) = &found.subdivision {
                    println!("subdivision {d}");
                }
                if let Some((lat, lon)) = found.latitude.zip(found.longitude) {
                    println!("location   {lat:.4}, {lon:.4}");
                }
                if let Some(asn) = found.asn {
                    println!(
                        "asn        AS{asn} ({})",
                        found.asn_network.as_deref().unwrap_or("-")
                    );
                }
                println!("network    {}", found.network);
                println!("database   {}", found.database);
                if let Some(note) = found.note {
                    println!("note       {note}");
                }
            }
            Ok(())
        }
        GeoipCmd::Import { file, asn } => {
            let bytes = std::fs::read(file)
                .map_err(|e| CliError::BadInput(format!("cannot read {}: {e}", file.display())))?;
            let _: GeoLookup = client
                .send_device(
                    client
                        .http
                        .put(client.url(&format!("/api/v1/geoip{}", kind_query(*asn))))
                        .body(bytes),
                    GEOIP_LOOK,
                )
                .await?;
            println!("installed {}", file.display());
            Ok(())
        }
        GeoipCmd::Download { asn, json } => {
            let status: GeoipStatus = client
                .send_device(
                    client
                        .http
                        .post(client.url(&format!("/api/v1/geoip/download{}", kind_query(*asn)))),
                    GEOIP_LOOK,
                )
                .await?;
            print_status(&status, *json)
        }
        GeoipCmd::Show { json } => {
            let status: GeoipStatus = client
                .send(client.http.get(client.url("/api/v1/geoip")))
                .await?;
            print_status(&status, *json)
        }
    }
}

/// `?kind=asn` for the ASN database, else nothing.
fn kind_query(asn: bool) -> &'static str {
    if asn { "?kind=asn" } else { "" }
}

fn print_status(status: &GeoipStatus, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(status)?);
        return Ok(());
    }
    print!("{}", describe(status));
    Ok(())
}

/// The lines `gtm geoip show` and `gtm status` print.
pub fn describe(status: &GeoipStatus) -> String {
    let mut out = String::new();
    match &status.database {
        Some(db) => {
            out.push_str(&format!(
                "geoip      {} (IPv{}), built {}{}, {} networks, sha256 {}\n",
                db.name,
                db.ip_version,
                db.built,
                status
                    .age_days
                    .map_or(String::new(), |d| format!(" ({d} days old)")),
                db.networks,
                db.sha256
            ));
            out.push_str(&format!("  from     {}\n", db.source));
        }
        None => out.push_str("geoip      none: every client gets the default records\n"),
    }
    match &status.source {
        Some(source) => out.push_str(&format!(
            "  source   {source} (update {})\n",
            if status.monthly { "monthly" } else { "off" }
        )),
        None => out.push_str(
            "  source   none: no [geoip] table, no device downloads a database (gtm geoip import loads one)\n",
        ),
    }
    match &status.asn_database {
        Some(db) => {
            out.push_str(&format!(
                "asn        {} (IPv{}), built {}{}, {} networks, sha256 {}\n",
                db.name,
                db.ip_version,
                db.built,
                status
                    .asn_age_days
                    .map_or(String::new(), |d| format!(" ({d} days old)")),
                db.networks,
                db.sha256
            ));
            out.push_str(&format!("  from     {}\n", db.source));
        }
        None if status.asn_source.is_some() => {
            out.push_str("asn        none yet: asn: topology rules hold no client\n")
        }
        None => {}
    }
    if let Some(source) = &status.asn_source {
        out.push_str(&format!("  source   {source}\n"));
    }
    out
}
