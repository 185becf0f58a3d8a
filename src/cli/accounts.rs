//! `gtm user ...`, `gtm token ...` and `gtm whoami`: the cluster's accounts
//! (docs/access.md). Passwords are read from standard input, never from the
//! command line (where `ps` and shell history would keep them).

use std::io::BufRead;

use anyhow::Result;
use clap::Subcommand;

use super::{
    client::{CliError, Client},
    output::{format_ms, table},
};
use gtm_api::{NewToken, TokenRequest, UserRequest, WhoAmI};
use gtm_node::access::{Role, accounts::AccountInfo};

#[derive(Debug, Subcommand)]
pub enum UserCmd {
    /// The users, with their roles and who last changed them.
    #[command(after_help = "Example:\n  gtm user list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Add a user; its password is read from standard input (one line).
    #[command(after_help = "Example:\n  gtm user add ann --role operator < ann.pw")]
    Add {
        /// The user's login name.
        name: String,
        /// viewer (read only), operator (drains, check states, failback,
        /// Test now) or admin (everything).
        #[arg(long)]
        role: Role,
    },
    /// Change a user's role, or (with --password, read from standard
    /// input) its password.
    #[command(
        after_help = "Examples:\n  gtm user set ann --role viewer\n  gtm user set ann --password < new.pw"
    )]
    Set {
        /// The user's login name.
        name: String,
        /// The new role: reporter, viewer, operator or admin.
        #[arg(long)]
        role: Option<Role>,
        /// Set a new password, read from standard input (one line).
        #[arg(long)]
        password: bool,
    },
    /// Remove a user; its console sessions end.
    #[command(after_help = "Example:\n  gtm user remove ann")]
    Remove {
        /// The user's login name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCmd {
    /// The named tokens, with their roles (never the secrets).
    #[command(after_help = "Example:\n  gtm token list")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Create a named token; it is printed once and kept nowhere.
    #[command(after_help = "Example:\n  gtm token create ci --role operator")]
    Create {
        /// The token's name (it names the actor of its writes).
        name: String,
        /// reporter (only reports push checks' states and Alertmanager
        /// alerts), viewer (read only), operator (drains, check states,
        /// failback, Test now) or admin (everything).
        #[arg(long)]
        role: Role,
    },
    /// Revoke a named token.
    #[command(after_help = "Example:\n  gtm token revoke ci")]
    Revoke {
        /// The token's name.
        name: String,
    },
}

pub(super) async fn user(client: &Client, cmd: &UserCmd) -> Result<()> {
    match cmd {
        UserCmd::List { json } => list(client, "user", *json).await,
        UserCmd::Add { name, role } => {
            let password = Some(read_password()?);
            put_user(client, name, *role, password).await?;
            println!("user {name} added ({role})");
            Ok(())
        }
        UserCmd::Set {
            name,
            role,
            password,
        } => {
            let role = match role {
                Some(r) => *r,
                None => accounts(client)
                    .await?
                    .into_iter()
                    .find(|a| a.kind == "user" && &a.name == name)
                    .map(|a| a.role)
                    .ok_or_else(|| CliError::NotFound(format!("no user named \"{name}\"")))?,
            };
            let password = if *password {
                Some(read_password()?)
            } else {
                None
            };
            put_user(client, name, role, password).await?;
            println!("user {name} changed ({role})");
            Ok(())
        }
        UserCmd::Remove { name } => {
            let _: Vec<AccountInfo> = client
                .send(
                    client
                        .http
                        .delete(client.url(&format!("/api/v1/users/{name}"))),
                )
                .await?;
            println!("user {name} removed");
            Ok(())
        }
    }
}

pub(super) async fn token(client: &Client, cmd: &TokenCmd) -> Result<()> {
    match cmd {
        TokenCmd::List { json } => list(client, "token", *json).await,
        TokenCmd::Create { name, role } => {
            let made: NewToken = client
                .send(
                    client
                        .http
                        .post(client.url("/api/v1/tokens"))
                        .json(&TokenRequest {
                            name: name.clone(),
                            role: *role,
                        }),
                )
                .await?;
            println!("{}", made.token);
            eprintln!("token {name} created ({role}); it is shown this once");
            Ok(())
        }
        TokenCmd::Revoke { name } => {
            let _: Vec<AccountInfo> = client
                .send(
                    client
                        .http
                        .delete(client.url(&format!("/api/v1/tokens/{name}"))),
                )
                .await?;
            println!("token {name} revoked");
            Ok(())
        }
    }
}

pub(super) async fn whoami(client: &Client) -> Result<()> {
    let me: WhoAmI = client
        .send(client.http.get(client.url("/api/v1/whoami")))
        .await?;
    println!("{} ({}) on {}", me.name, me.role, me.device);
    Ok(())
}

async fn accounts(client: &Client) -> Result<Vec<AccountInfo>> {
    client
        .send(client.http.get(client.url("/api/v1/accounts")))
        .await
}

async fn list(client: &Client, kind: &str, json: bool) -> Result<()> {
    let listed: Vec<AccountInfo> = accounts(client)
        .await?
        .into_iter()
        .filter(|a| a.kind == kind)
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(());
    }
    let rows: Vec<[String; 4]> = listed
        .iter()
        .map(|a| {
            [
                a.name.clone(),
                a.role.to_string(),
                format_ms(a.time_ms),
                a.by.to_string(),
            ]
        })
        .collect();
    table(&["NAME", "ROLE", "CHANGED", "BY"], &rows);
    Ok(())
}

async fn put_user(client: &Client, name: &str, role: Role, password: Option<String>) -> Result<()> {
    let _: AccountInfo = client
        .send(
            client
                .http
                .put(client.url(&format!("/api/v1/users/{name}")))
                .json(&UserRequest { role, password }),
        )
        .await?;
    Ok(())
}

/// One line of standard input, without its line end.
fn read_password() -> Result<String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| {
        CliError::BadInput(format!("cannot read the password from standard input: {e}"))
    })?;
    let password = line.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        return Err(CliError::BadInput(
            "give the password on standard input (one line), e.g. from a file: < password.txt"
                .into(),
        )
        .into());
    }
    Ok(password)
}
