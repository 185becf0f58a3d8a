//! `gtm cluster ...`: init, join, leave, status and recovery of the
//! cluster this device belongs to.

use anyhow::Result;
use gtm_cluster::{ClusterStatus, NodeState};

use super::{
    args::ClusterCmd,
    client::{CliError, Client, Connect},
    output::table,
};

/// How to learn what became of a change of members that got no answer.
const CLUSTER_LOOK: &str = "`gtm cluster status` shows its members and leader";

pub(super) async fn run(cli: &Connect, cmd: &ClusterCmd) -> Result<()> {
    let client = Client::new(cli)?;
    match cmd {
        ClusterCmd::Init => {
            let r: gtm_api::ClusterMessage = client
                .send_device(
                    client.http.post(client.url("/api/v1/cluster/init")),
                    CLUSTER_LOOK,
                )
                .await?;
            println!("{}", r.message);
        }
        ClusterCmd::Token => {
            let r: gtm_api::TokenResponse = client
                .send(client.http.get(client.url("/api/v1/cluster/token")))
                .await?;
            println!("{}", r.token);
        }
        ClusterCmd::Join {
            address,
            token,
            learner,
        } => {
            let body = gtm_api::JoinCommand {
                address: address.clone(),
                token: token.clone(),
                learner: *learner,
            };
            let status: ClusterStatus = client
                .send_device(
                    client
                        .http
                        .post(client.url("/api/v1/cluster/join"))
                        .json(&body),
                    CLUSTER_LOOK,
                )
                .await?;
            println!("joined; the cluster's configuration is applied here");
            print_members(&status);
        }
        ClusterCmd::Leave => {
            let _: ClusterStatus = client
                .send_device(
                    client.http.post(client.url("/api/v1/cluster/leave")),
                    CLUSTER_LOOK,
                )
                .await?;
            println!("left the cluster; this device keeps serving its last configuration");
        }
        ClusterCmd::Status { json } => {
            let status: ClusterStatus = client
                .send(client.http.get(client.url("/api/v1/cluster/status")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&status)?);
                return Ok(());
            }
            if status.members.is_empty() {
                println!(
                    "this device (id {}) belongs to no cluster yet: `gtm cluster init` makes it the first member, \
                     `gtm cluster join ADDRESS --token T` joins an existing cluster",
                    status.id
                );
                return Ok(());
            }
            let role = match status.state {
                NodeState::Leader if !status.quorum => "Leader (no quorum)".to_string(),
                state => format!("{state:?}"),
            };
            println!("this device  id {} ({role})", status.id);
            println!(
                "leader       {}",
                status
                    .leader
                    .as_ref()
                    .map_or("none".to_string(), |(id, info)| format!(
                        "{} (id {id})",
                        info.name
                    ))
            );
            println!("term         {}", status.term);
            println!(
                "applied      {}",
                status.applied_index.map_or("-".into(), |i| i.to_string())
            );
            println!();
            print_members(&status);
        }
        ClusterCmd::Recover { force_single } => {
            if !force_single {
                return Err(CliError::BadInput(
                    "recovery makes this device the only voter of the cluster: only for the permanent loss of the peer. \
                     Run `gtm cluster recover --force-single` to do it."
                        .into(),
                )
                .into());
            }
            let r: gtm_api::ClusterMessage = client
                .send_device(
                    client.http.post(client.url("/api/v1/cluster/recover")),
                    CLUSTER_LOOK,
                )
                .await?;
            println!("{}", r.message);
        }
    }
    Ok(())
}

pub(super) fn print_members(status: &ClusterStatus) {
    let leader = status.leader.as_ref().map(|(id, _)| *id);
    let rows: Vec<[String; 6]> = status
        .members
        .iter()
        .map(|m| {
            let mut name = m.info.name.clone();
            if m.id == status.id {
                name.push_str(" (this device)");
            }
            [
                name,
                m.info.datacenter.clone(),
                if m.voter { "voter" } else { "learner" }.into(),
                if Some(m.id) == leader {
                    "leader".into()
                } else {
                    "-".into()
                },
                m.info.api_addr.clone(),
                m.last_contact_ms
                    .map_or("-".into(), |ms| format!("{} ago", gtm_model::when::age(ms))),
            ]
        })
        .collect();
    table(
        &["DEVICE", "DC", "ROLE", "LEADER", "API", "LAST CONTACT"],
        &rows,
    );
}
