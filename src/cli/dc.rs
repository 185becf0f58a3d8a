//! `gtm dc ...`: datacenters' configuration, and draining one out of
//! answers and back.

use anyhow::Result;

use super::{
    args::DcCmd,
    client::{Client, Connect},
    drain, objects,
};

pub(super) async fn run(cli: &Connect, cmd: &DcCmd) -> Result<()> {
    match cmd {
        DcCmd::List { json } => objects::list(&Client::new(cli)?, "datacenters", *json).await,
        DcCmd::Object(cmd) => objects::object(&Client::new(cli)?, "datacenters", cmd).await,
        DcCmd::Drain { name, look } | DcCmd::Undrain { name, look } => {
            let drained = matches!(cmd, DcCmd::Drain { .. });
            let body = gtm_api::DrainDatacenter {
                datacenter: name.clone(),
                drained,
                dry_run: look.dry_run,
                force: look.force,
            };
            let what = format!("datacenter {name}");
            drain::run(
                &Client::new(cli)?,
                "datacenter",
                &body,
                &what,
                drained,
                look,
            )
            .await
        }
    }
}
