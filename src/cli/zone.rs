//! `gtm zone import|export`: RFC 1035 master files into a domain's
//! configuration, and a served zone out as one (docs/cli.md, "Zone files").

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;
use serde_json::Value;

use super::{
    client::{CliError, Client, Connect, read},
    objects::{Look, segment, write},
};
use gtm_model as model;

#[derive(Debug, Subcommand)]
pub enum ZoneCmd {
    /// Read an RFC 1035 master file into a domain: its SOA (not the
    /// serial), its apex NS set and every record, A, AAAA and CNAME as
    /// records with addresses (static health), the rest as values. The
    /// domain's other keys are kept. DNSSEC records are left out;
    /// $INCLUDE is refused. Errors name the file's line; --dry-run shows
    /// the changes field by field.
    #[command(
        after_help = "Examples:\n  gtm zone import example.com.zone --dry-run\n  gtm zone import example.com.zone\n  gtm zone import db.internal --domain internal.example.com"
    )]
    Import {
        /// The master file; - for stdin.
        file: PathBuf,
        /// The zone's name (default: the owner of the file's SOA).
        #[arg(long)]
        domain: Option<String>,
        #[command(flatten)]
        look: Look,
    },
    /// Write a served zone as an RFC 1035 master file, as this device
    /// answers it now: static records whole, steered records as their
    /// default answer (--steered comment: as comments only). DNSSEC
    /// records are left out.
    #[command(
        after_help = "Examples:\n  gtm zone export example.com > example.com.zone\n  gtm zone export example.com --view internal --steered comment"
    )]
    Export {
        /// The zone, e.g. example.com.
        name: String,
        /// The view whose zone to write (default: every client's).
        #[arg(long)]
        view: Option<String>,
        /// How steered records are written.
        #[arg(long, default_value = "answer", value_parser = ["answer", "comment"])]
        steered: String,
    },
}

pub(super) async fn run(cli: &Connect, cmd: &ZoneCmd) -> Result<()> {
    match cmd {
        ZoneCmd::Import { file, domain, look } => {
            let text = read(file)?;
            let label = file.display().to_string();
            let imported = model::zonefile::read(&text, &label, domain.as_deref())
                .map_err(|errors| CliError::BadInput(errors.join("\n")))?;
            check(&imported, &label)?;
            for note in &imported.notes {
                eprintln!("{label}: {note}");
            }
            let client = Client::new(cli)?;
            let path = format!("/api/v1/domains/{}", segment(&imported.domain));
            let request = client
                .http
                .patch(client.url(&path))
                .json(&Value::Object(imported.body.clone()));
            write(&client, request, look).await
        }
        ZoneCmd::Export {
            name,
            view,
            steered,
        } => {
            let client = Client::new(cli)?;
            let mut query = vec![("steered", steered.clone())];
            if let Some(v) = view {
                query.push(("view", v.clone()));
            }
            let path = format!("/api/v1/zones/{}/file", segment(name));
            let text = client
                .text(client.http.get(client.url(&path)).query(&query))
                .await?;
            print!("{text}");
            Ok(())
        }
    }
}

/// The imported domain compiled alone, each error of a record named by the
/// line the record starts on, before anything is sent.
fn check(imported: &model::zonefile::Imported, label: &str) -> Result<()> {
    let mut domain = imported.body.clone();
    domain.insert("name".into(), Value::String(imported.domain.clone()));
    let text = toml::to_string(&serde_json::json!({ "domain": [domain] }))
        .map_err(|e| CliError::BadInput(format!("{label}: {e}")))?;
    let errors = match model::parse(&text).map(|c| model::compile(&c).map(|_| ())) {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) | Err(e) => e.lines(),
    };
    let prefix = format!("domain {} / record ", imported.domain);
    let lines: Vec<String> = errors
        .iter()
        .map(|e| {
            let line = e.strip_prefix(&prefix).and_then(|rest| {
                let mut words = rest.split([' ', ':']);
                let key = (words.next()?.to_string(), words.next()?.to_string());
                imported.lines.get(&key)
            });
            match line {
                Some(n) => format!("{label}: line {n}: {e}"),
                None => format!("{label}: {e}"),
            }
        })
        .collect();
    Err(CliError::BadInput(lines.join("\n")).into())
}
