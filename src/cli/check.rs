//! `gtm check ...`: every check instance's state, operator-set states of
//! manual checks, a check's configuration, and Test now.

use anyhow::Result;

use super::{
    args::CheckCmd,
    client::{CliError, Client, Connect},
    objects,
    output::print_checks,
};
use gtm_api::StatusReport;

pub(super) async fn run(cli: &Connect, cmd: &CheckCmd) -> Result<()> {
    match cmd {
        CheckCmd::List { json } => {
            let client = Client::new(cli)?;
            let report: StatusReport = client
                .send(client.http.get(client.url("/api/v1/status")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&report.checks)?);
            } else {
                print_checks(&report.checks);
            }
            Ok(())
        }
        CheckCmd::Set { name, state } => {
            let client = Client::new(cli)?;
            let body = gtm_api::CheckStateRequest {
                state: state.clone(),
            };
            let _: Vec<gtm_engine::CheckStatus> = client
                .send(
                    client
                        .http
                        .put(client.url(&format!("/api/v1/checks/{name}/state")))
                        .json(&body),
                )
                .await?;
            println!("check {name} set to {state}");
            Ok(())
        }
        CheckCmd::Push {
            name,
            state,
            address,
            reason,
        } => {
            let client = Client::new(cli)?;
            let body = gtm_api::PushRequest {
                state: state.clone(),
                reason: reason.clone(),
                address: *address,
            };
            let _: Vec<gtm_engine::CheckStatus> = client
                .send(
                    client
                        .http
                        .post(client.url(&format!("/api/v1/checks/{name}/push")))
                        .json(&body),
                )
                .await?;
            let at = address.map_or(String::new(), |a| format!("@{a}"));
            println!("check {name}{at}: reported {state}");
            Ok(())
        }
        CheckCmd::Object(cmd) => objects::object(&Client::new(cli)?, "checks", cmd).await,
        CheckCmd::Test {
            name,
            file,
            address,
            json,
        } => {
            let client = Client::new(cli)?;
            let request = match (name, file) {
                (Some(name), _) => client
                    .http
                    .post(client.url(&format!("/api/v1/checks/{name}/test")))
                    .json(&gtm_api::TestRequest { address: *address }),
                // A check not saved: the API validates it with the
                // configuration and probes it once.
                (None, Some(file)) => {
                    let check = objects::read_table(file)?;
                    client
                        .http
                        .post(client.url("/api/v1/probe"))
                        .json(&gtm_api::ProbeRequest {
                            check,
                            address: *address,
                        })
                }
                (None, None) => {
                    return Err(
                        CliError::BadInput("give a check's NAME or --file FILE".into()).into(),
                    );
                }
            };
            let r: gtm_api::TestResult = client.ask(request).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                let whence = r.whence();
                println!(
                    "{}: {} ({}) in {:.1} ms{}{whence}",
                    r.check,
                    if r.ok { "OK" } else { "Error" },
                    r.reason,
                    r.elapsed_ms,
                    if whence.is_empty() { "" } else { "; " },
                );
            }
            if !r.ok {
                std::process::exit(super::client::exit::FAILED);
            }
            Ok(())
        }
    }
}
