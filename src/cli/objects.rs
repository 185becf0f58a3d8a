//! `list`, `show`, `put` and `delete` of configuration objects: datacenters,
//! checks, scenarios, services, domains, records and their addresses, over
//! the API's object routes (docs/api.md).
//!
//! An object is written as it appears in the configuration file: `gtm check
//! put web --file web.toml` takes the keys of one `[[check]]` table. A put
//! changes the keys it is given and keeps the others (the API's `PATCH`);
//! `--replace` writes the whole object, every key not given taking its
//! default (`PUT`).

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;
use serde_json::{Map, Value};

use super::{
    client::{CliError, Client, Connect, read},
    output::{print_apply, print_rows},
};
use gtm_api::ApplyResult;

/// The verbs every named object has.
/// The look before a configuration write: its dry run, and its force.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Look {
    /// Show the changes (the fields, and each record's answers now and
    /// after on every device); apply nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Write even if a device would answer a record with nothing.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Subcommand)]
pub enum ObjectCmd {
    /// Print the object as configured (TOML; --json for JSON).
    #[command(
        after_help = "Examples:\n  gtm check show web\n  gtm dc show dc1 --json\n  gtm service show shop"
    )]
    Show {
        /// The object's name.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Create it, or change the keys the file gives and keep the others.
    #[command(
        after_help = "Examples:\n  gtm check put web --file web.toml   (web.toml: interval = \"5s\")\n  printf 'country = \"FR\"\\ncontinent = \"EU\"\\n' | gtm dc put dc3 --file -\n  echo 'domains = [\"example.test\"]' | gtm service put shop --file -"
    )]
    Put {
        /// The object's name.
        name: String,
        /// A TOML file of the object's keys, as in a configuration table;
        /// - for stdin.
        #[arg(long, short, value_name = "FILE")]
        file: PathBuf,
        /// Replace the whole object: keys the file leaves out take their
        /// defaults.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        look: Look,
    },
    /// Remove it from the configuration.
    #[command(
        after_help = "Examples:\n  gtm dc delete dc3 --dry-run\n  gtm scenario delete dc1-up"
    )]
    Delete {
        /// The object's name.
        name: String,
        #[command(flatten)]
        look: Look,
    },
}

/// `gtm record` verbs on the configuration; NAME is the owner name
/// (`www.example.test`), and the domain is found from it.
#[derive(Debug, Subcommand)]
pub enum RecordObjectCmd {
    /// Every record of a domain (of every domain without one).
    #[command(after_help = "Examples:\n  gtm record list\n  gtm record list example.test")]
    List {
        /// Only the records of this domain.
        domain: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a record as configured.
    #[command(after_help = "Example:\n  gtm record show www.example.test A")]
    Show {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Create a record, or change the keys the file gives and keep the
    /// others (its addresses stay unless the file lists them).
    #[command(
        after_help = "Examples:\n  gtm record put www.example.test A --file ttl.toml   (ttl.toml: ttl = 60)\n  gtm record put api.example.test A --file api.toml   (addresses = [{ ip = \"192.0.2.30\" }])"
    )]
    Put {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// A TOML file of the record's keys; - for stdin.
        #[arg(long, short, value_name = "FILE")]
        file: PathBuf,
        /// Replace the whole record: keys the file leaves out take their
        /// defaults (addresses stay unless the file lists them).
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        look: Look,
    },
    /// Remove a record.
    #[command(after_help = "Example:\n  gtm record delete api.example.test A")]
    Delete {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        #[command(flatten)]
        look: Look,
    },
    /// Add, replace or remove one address of a record.
    #[command(subcommand)]
    Address(AddressCmd),
}

#[derive(Debug, Subcommand)]
pub enum AddressCmd {
    /// Add an address, or change the settings given of the one with this
    /// IP (or CNAME target) and keep the others.
    #[command(
        after_help = "Examples:\n  gtm record address put www.example.test A 192.0.2.10 --weight 2\n  gtm record address put www.example.test A 192.0.2.12 --dc dc1 --hc check:web"
    )]
    Put {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// The IP, or the target name of a CNAME.
        address: String,
        /// The datacenter the address is in.
        #[arg(long)]
        dc: Option<String>,
        /// static, disabled, scenario:NAME or check:NAME.
        #[arg(long)]
        hc: Option<String>,
        /// Its weight in a weighted record.
        #[arg(long)]
        weight: Option<u32>,
        /// Replace the whole address: settings not given take their
        /// defaults.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        look: Look,
    },
    /// Remove an address from a record.
    #[command(after_help = "Example:\n  gtm record address delete www.example.test A 192.0.2.12")]
    Delete {
        /// The record's owner name, e.g. www.example.test.
        name: String,
        /// The record type: A, AAAA, CNAME, ...
        #[arg(value_name = "TYPE")]
        rtype: String,
        /// The IP, or the target name of a CNAME.
        address: String,
        #[command(flatten)]
        look: Look,
    },
}

/// `gtm domain|scenario|service ...`: `list`, and the verbs of one object
/// of `collection`.
pub(super) async fn listed(cli: &Connect, collection: &str, cmd: &ListedCmd) -> Result<()> {
    let client = Client::new(cli)?;
    match cmd {
        ListedCmd::List { json } => list(&client, collection, *json).await,
        ListedCmd::Object(cmd) => object(&client, collection, cmd).await,
    }
}

/// A collection's path under /api/v1, e.g. `checks`.
pub async fn object(client: &Client, collection: &str, cmd: &ObjectCmd) -> Result<()> {
    match cmd {
        ObjectCmd::Show { name, json } => {
            let path = format!("/api/v1/{collection}/{}", segment(name));
            show(
                &client.send(client.http.get(client.url(&path))).await?,
                *json,
            )
        }
        ObjectCmd::Put {
            name,
            file,
            replace,
            look,
        } => {
            let body = read_object(file)?;
            let path = format!("/api/v1/{collection}/{}", segment(name));
            write(
                client,
                put_or_patch(client, &path, *replace).json(&body),
                look,
            )
            .await
        }
        ObjectCmd::Delete { name, look } => {
            let path = format!("/api/v1/{collection}/{}", segment(name));
            write(client, client.http.delete(client.url(&path)), look).await
        }
    }
}

/// `gtm dc list`, `gtm domain list`, ...: one line per object.
pub async fn list(client: &Client, collection: &str, json: bool) -> Result<()> {
    let items: Vec<Value> = client
        .send(
            client
                .http
                .get(client.url(&format!("/api/v1/{collection}"))),
        )
        .await?;
    print_list(&items, json, &["name"])
}

pub async fn record(client: &Client, cmd: &RecordObjectCmd) -> Result<()> {
    match cmd {
        RecordObjectCmd::List { domain, json } => {
            let domains = match domain {
                Some(d) => vec![d.clone()],
                None => domain_names(client).await?,
            };
            let mut rows = Vec::new();
            for d in domains {
                let path = format!("/api/v1/domains/{}/records", segment(&d));
                let records: Vec<Value> = client.send(client.http.get(client.url(&path))).await?;
                rows.extend(records.into_iter().map(|mut r| {
                    if let Some(o) = r.as_object_mut() {
                        o.insert("domain".into(), d.clone().into());
                    }
                    r
                }));
            }
            print_list(&rows, *json, &["domain", "name", "type"])
        }
        RecordObjectCmd::Show { name, rtype, json } => {
            let path = record_path(client, name, rtype).await?;
            show(
                &client.send(client.http.get(client.url(&path))).await?,
                *json,
            )
        }
        RecordObjectCmd::Put {
            name,
            rtype,
            file,
            replace,
            look,
        } => {
            let body = read_object(file)?;
            let path = record_path(client, name, rtype).await?;
            write(
                client,
                put_or_patch(client, &path, *replace).json(&body),
                look,
            )
            .await
        }
        RecordObjectCmd::Delete { name, rtype, look } => {
            let path = record_path(client, name, rtype).await?;
            write(client, client.http.delete(client.url(&path)), look).await
        }
        RecordObjectCmd::Address(AddressCmd::Put {
            name,
            rtype,
            address,
            dc,
            hc,
            weight,
            replace,
            look,
        }) => {
            let path = format!(
                "{}/addresses/{}",
                record_path(client, name, rtype).await?,
                segment(address)
            );
            let mut body = Map::new();
            for (key, value) in [
                ("dc", dc.clone().map(Value::from)),
                ("hc", hc.clone().map(Value::from)),
                ("weight", weight.map(Value::from)),
            ] {
                if let Some(v) = value {
                    body.insert(key.into(), v);
                }
            }
            write(
                client,
                put_or_patch(client, &path, *replace).json(&body),
                look,
            )
            .await
        }
        RecordObjectCmd::Address(AddressCmd::Delete {
            name,
            rtype,
            address,
            look,
        }) => {
            let path = format!(
                "{}/addresses/{}",
                record_path(client, name, rtype).await?,
                segment(address)
            );
            write(client, client.http.delete(client.url(&path)), look).await
        }
    }
}

/// The configured domains' names, without their records (a listing of the
/// domains themselves would carry every record).
async fn domain_names(client: &Client) -> Result<Vec<String>> {
    let names: gtm_api::objects::Names = client
        .send(client.http.get(client.url("/api/v1/names")))
        .await?;
    Ok(names.domains)
}

/// The API path of record `www.example.test` TYPE: the domain is the
/// longest configured one the name ends in.
async fn record_path(client: &Client, name: &str, rtype: &str) -> Result<String> {
    let owner = name.trim_end_matches('.').to_ascii_lowercase();
    let domain = domain_names(client)
        .await?
        .into_iter()
        .filter(|d| {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            owner == d || owner.ends_with(&format!(".{d}"))
        })
        .max_by_key(String::len)
        .ok_or_else(|| {
            CliError::NotFound(format!(
                "{name} is in no configured domain (gtm domain list shows them)"
            ))
        })?;
    let apex = domain.trim_end_matches('.').to_ascii_lowercase();
    let relative = if owner == apex {
        "@".to_string()
    } else {
        owner[..owner.len() - apex.len() - 1].to_string()
    };
    Ok(format!(
        "/api/v1/domains/{}/records/{}/{}",
        segment(&domain),
        segment(&relative),
        segment(rtype)
    ))
}

/// A path segment, percent-encoded where it must be.
pub(super) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~@:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `PUT` replaces the whole object; `PATCH` changes the keys given.
fn put_or_patch(client: &Client, path: &str, replace: bool) -> reqwest::RequestBuilder {
    if replace {
        client.http.put(client.url(path))
    } else {
        client.http.patch(client.url(path))
    }
}

/// An object's keys from a TOML file (`-` = stdin), as JSON for the API.
fn read_object(file: &PathBuf) -> Result<Value> {
    Ok(Value::Object(read_table(file)?))
}

/// The keys of a TOML file (`-` = stdin) as a JSON object.
pub(super) fn read_table(file: &PathBuf) -> Result<Map<String, Value>> {
    let text = read(file)?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| CliError::BadInput(format!("{}: {}", file.display(), e.message())))?;
    match serde_json::to_value(table)? {
        Value::Object(map) => Ok(map),
        _ => Err(CliError::BadInput(format!("{}: not a table of keys", file.display())).into()),
    }
}

pub(super) async fn write(
    client: &Client,
    request: reqwest::RequestBuilder,
    look: &Look,
) -> Result<()> {
    let mut request = request;
    if look.dry_run {
        request = request.query(&[("dry_run", "true")]);
    }
    if look.force {
        request = request.query(&[("force", "true")]);
    }
    let result: ApplyResult = client.send(request).await?;
    print_apply(&result);
    Ok(())
}

fn show(value: &Value, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{}", toml::to_string_pretty(value)?);
    }
    Ok(())
}

/// Objects as a table: the `first` keys, then the other plain values as
/// `key=value`.
fn print_list(items: &[Value], json: bool, first: &[&str]) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(items)?);
        return Ok(());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for item in items {
        let Some(o) = item.as_object() else { continue };
        let mut row: Vec<String> = first
            .iter()
            .map(|k| o.get(*k).map_or("-".into(), plain))
            .collect();
        let rest: Vec<String> = o
            .iter()
            .filter(|(k, _)| !first.contains(&k.as_str()))
            .map(|(k, v)| match v {
                Value::Array(a) => format!("{k}: {}", a.len()),
                Value::Object(_) => format!("{k}: {{..}}"),
                v => format!("{k}={}", plain(v)),
            })
            .collect();
        row.push(rest.join(" "));
        rows.push(row);
    }
    let mut head: Vec<String> = first.iter().map(|k| k.to_ascii_uppercase()).collect();
    head.push(String::new());
    print_rows(&head, &rows);
    Ok(())
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}
/// `list`, and the verbs of one named object.
#[derive(Debug, Subcommand)]
pub enum ListedCmd {
    /// Every one, as configured.
    #[command(
        after_help = "Examples:\n  gtm domain list\n  gtm scenario list --json\n  gtm service list"
    )]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Object(ObjectCmd),
}
