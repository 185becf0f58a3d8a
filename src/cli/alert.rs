//! `gtm alert ...`: each notifier's delivery state on the device, and a
//! test message sent now (docs/operations.md, "Alerts").

use anyhow::Result;

use super::{
    args::AlertCmd,
    client::{Client, Connect},
};
use gtm_alerts::NotifierStatus;
use gtm_model::when::iso_ms;

pub(super) async fn run(cli: &Connect, cmd: &AlertCmd) -> Result<()> {
    let client = Client::new(cli)?;
    match cmd {
        AlertCmd::List { json } => {
            let list: Vec<NotifierStatus> = client
                .send(client.http.get(client.url("/api/v1/alerts")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(());
            }
            if list.is_empty() {
                println!("no notifiers ([[notifier]] in the configuration)");
            }
            for n in &list {
                let c = &n.counts;
                println!(
                    "{} ({} {}): {}; {} delivered, {} failed attempts, {} dropped, {} queued, {} open",
                    n.name,
                    n.kind,
                    n.target,
                    n.state,
                    c.delivered,
                    c.failures,
                    c.dropped,
                    n.queued,
                    n.open
                );
                if let Some(ms) = c.last_delivered_ms {
                    println!("  last delivered {}", iso_ms(ms));
                }
                if let (Some(e), Some(ms)) = (&c.last_error, c.last_error_ms) {
                    println!("  last error {}: {e}", iso_ms(ms));
                }
            }
            Ok(())
        }
        AlertCmd::Test { name, json } => {
            let r: gtm_api::AlertTest = client
                .send(
                    client
                        .http
                        .post(client.url(&format!("/api/v1/alerts/{name}/test"))),
                )
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else if r.delivered {
                println!(
                    "notifier {name}: test message {} delivered from {}",
                    r.id.as_deref().unwrap_or_default(),
                    r.device
                );
            } else {
                println!(
                    "notifier {name}: not delivered from {}: {}",
                    r.device,
                    r.error.as_deref().unwrap_or_default()
                );
            }
            if !r.delivered {
                std::process::exit(super::client::exit::FAILED);
            }
            Ok(())
        }
    }
}
