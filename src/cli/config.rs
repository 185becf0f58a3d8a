//! `gtm config ...`: the replicated configuration whole: check a file,
//! apply, export, and its kept versions (history, show, diff, rollback).

use anyhow::Result;

use super::{
    args::ConfigCmd,
    client::{Client, Connect, bad_file, read},
    history,
    output::print_apply,
};
use gtm_api::ApplyResult;
use gtm_model as model;

pub(super) async fn run(cli: &Connect, cmd: &ConfigCmd) -> Result<()> {
    match cmd {
        ConfigCmd::Check { file } => {
            let text = read(file)?;
            let config = model::parse(&text).map_err(|e| bad_file(file, &e))?;
            model::compile(&config).map_err(|e| bad_file(file, &e))?;
            println!("{}: valid", file.display());
            Ok(())
        }
        ConfigCmd::Apply {
            file,
            dry_run,
            allow_empty,
            force,
        } => {
            let text = read(file)?;
            let client = Client::new(cli)?;
            let mut request = client.http.put(client.url("/api/v1/config"));
            if *dry_run {
                request = request.query(&[("dry_run", "true")]);
            }
            if *allow_empty {
                request = request.query(&[("allow_empty", "true")]);
            }
            if *force {
                request = request.query(&[("force", "true")]);
            }
            let result: ApplyResult = client.send(request.body(text)).await?;
            print_apply(&result);
            Ok(())
        }
        ConfigCmd::Export => {
            let client = Client::new(cli)?;
            let text = client
                .text(client.http.get(client.url("/api/v1/config")))
                .await?;
            print!("{text}");
            Ok(())
        }
        ConfigCmd::History { changes, json } => {
            history::history(&Client::new(cli)?, *changes, *json).await
        }
        ConfigCmd::Show { version } => history::show(&Client::new(cli)?, *version).await,
        ConfigCmd::Diff { from, to, json } => {
            history::diff(&Client::new(cli)?, *from, *to, *json).await
        }
        ConfigCmd::Rollback {
            version,
            dry_run,
            force,
        } => history::rollback(&Client::new(cli)?, *version, *dry_run, *force).await,
    }
}
