//! `gtm device list`: every device of the cluster.

use anyhow::Result;
use gtm_cluster::ClusterStatus;

use super::{
    args::DeviceCmd,
    client::{Client, Connect},
    cluster::print_members,
};

pub(super) async fn run(cli: &Connect, cmd: &DeviceCmd) -> Result<()> {
    match cmd {
        DeviceCmd::List { json } => {
            let client = Client::new(cli)?;
            let status: ClusterStatus = client
                .send(client.http.get(client.url("/api/v1/cluster/status")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&status.members)?);
                return Ok(());
            }
            print_members(&status);
            Ok(())
        }
    }
}
