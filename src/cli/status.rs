//! `gtm status`: records with their status and the addresses answered
//! now, side by side with every peer's, then checks and scenarios.

use anyhow::Result;

use super::{
    client::{Client, Connect},
    geoip,
    output::{print_checks, print_rows, table},
};
use gtm_api::StatusReport;
use gtm_model::when;
use gtm_node::peers::PeerStatus;

pub(super) async fn run(cli: &Connect, json: bool) -> Result<()> {
    let client = Client::new(cli)?;
    let report: StatusReport = client
        .send(client.http.get(client.url("/api/v1/status")))
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "device {} (configuration version {})",
        report.device, report.version
    );
    if let Some(f) = &report.degraded {
        println!(
            "DEGRADED: configuration version {} cannot be installed on this device: {}",
            f.version, f.reason
        );
    }
    if let Some(fault) = &report.storage_degraded {
        println!("DEGRADED storage: {fault}");
    }
    if let Some(why) = &report.cluster_degraded {
        println!(
            "DEGRADED cluster: {why}; this device refuses writes and installs nothing the cluster commits until it is restarted"
        );
    }
    for worker in gtm_api::failed_workers(&report.workers) {
        println!("DEGRADED worker {worker}");
    }
    for n in report.alerts.iter().filter(|n| n.counts.failing) {
        println!(
            "DEGRADED alerts: notifier {} cannot deliver ({} queued): {}",
            n.name,
            n.queued,
            n.counts.last_error.as_deref().unwrap_or_default()
        );
    }
    if let Some(warning) = &report.geoip_warning {
        println!("WARNING: {warning}");
    }
    if let Some(geoip) = &report.geoip {
        print!("{}", geoip::describe(geoip));
    }
    let rows: Vec<[String; 3]> = report
        .records
        .iter()
        .map(|r| {
            [
                r.record.clone(),
                r.status.map_or("-".into(), |s| s.to_string()),
                if r.active.is_empty() {
                    "-".into()
                } else {
                    gtm_engine::active_texts(&r.active).join(", ")
                },
            ]
        })
        .collect();
    table(&["RECORD", "STATUS", "ACTIVE RECORDS"], &rows);
    if !report.rules.is_empty() {
        println!();
        let rows: Vec<[String; 4]> = report
            .rules
            .iter()
            .map(|r| {
                let now = if r.rule.skipped {
                    "skipped (no candidate)".to_string()
                } else {
                    gtm_engine::active_texts(&r.rule.active).join(", ")
                };
                [
                    r.record.clone(),
                    format!("{}: {} → {}", r.rule.rule, r.rule.client, r.rule.target),
                    now,
                    r.decided.to_string(),
                ]
            })
            .collect();
        table(
            &["RECORD", "TOPOLOGY RULE", "ANSWERS NOW", "DECIDED"],
            &rows,
        );
    }
    if !report.peers.is_empty() {
        println!();
        print_side_by_side(&report);
    }
    if !report.checks.is_empty() {
        println!();
        print_checks(&report.checks);
    }
    if !report.scenarios.is_empty() {
        println!();
        let rows: Vec<[String; 2]> = report
            .scenarios
            .iter()
            .map(|s| {
                let mut state = if s.active { "active" } else { "passive" }.to_string();
                if let Some(p) = s.pending {
                    state.push_str(if p {
                        " (activation waits for verify)"
                    } else {
                        " (deactivation waits for verify)"
                    });
                }
                [s.scenario.clone(), state]
            })
            .collect();
        table(&["SCENARIO", "STATE"], &rows);
    }
    if !report.notify.is_empty() {
        println!();
        let rows: Vec<[String; 5]> = report
            .notify
            .iter()
            .map(|n| {
                let mut state = n.state.clone();
                if let Some(e) = &n.error {
                    state.push_str(&format!(" ({e})"));
                }
                [
                    n.domain.clone(),
                    n.secondary.clone(),
                    n.serial.to_string(),
                    state,
                    n.attempts.to_string(),
                ]
            })
            .collect();
        table(
            &["DOMAIN", "SECONDARY (notify)", "SERIAL", "STATE", "SENT"],
            &rows,
        );
    }
    if !report.transfers_in.is_empty() {
        println!();
        let now = gtm_model::clock::now_ms();
        let ago = |ms: Option<u64>| {
            ms.map_or("-".into(), |ms| {
                format!("{} ago", when::age(now.saturating_sub(ms)))
            })
        };
        let rows: Vec<[String; 6]> = report
            .transfers_in
            .iter()
            .map(|t| {
                let transferred = match (&t.how, t.transferred_ms) {
                    (Some(how), Some(_)) => format!("{how}, {}", ago(t.transferred_ms)),
                    _ => "-".into(),
                };
                [
                    t.domain.clone(),
                    t.primary.clone(),
                    t.serial.map_or("-".into(), |s| s.to_string()),
                    transferred,
                    ago(t.asked_ms),
                    t.error.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        table(
            &[
                "DOMAIN",
                "PRIMARY (transfer in)",
                "SERIAL",
                "TRANSFERRED HERE",
                "ASKED",
                "ERROR",
            ],
            &rows,
        );
    }
    if !report.alerts.is_empty() {
        println!();
        let rows: Vec<[String; 5]> = report
            .alerts
            .iter()
            .map(|n| {
                [
                    n.name.clone(),
                    n.state.clone(),
                    n.counts.delivered.to_string(),
                    n.queued.to_string(),
                    n.counts.last_error.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        table(
            &["NOTIFIER", "STATE", "DELIVERED", "QUEUED", "LAST ERROR"],
            &rows,
        );
    }
    if !report.workers.is_empty() {
        println!();
        let rows: Vec<[String; 4]> = report
            .workers
            .iter()
            .map(|w| {
                [
                    w.name.clone(),
                    w.state.to_string(),
                    w.restarts.to_string(),
                    w.last_error.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        table(&["WORKER", "STATE", "RESTARTS", "LAST ERROR"], &rows);
    }
    Ok(())
}

/// Each record's status on every device, side by side (spec §4).
fn print_side_by_side(report: &StatusReport) {
    let mut head = vec!["RECORD".to_string(), report.device.clone()];
    head.extend(report.peers.iter().map(peer_heading));
    let mut records: Vec<String> = report.records.iter().map(|r| r.record.clone()).collect();
    for p in &report.peers {
        for r in &p.records {
            if !records.contains(&r.record) {
                records.push(r.record.clone());
            }
        }
    }
    let cell = |list: &[gtm_engine::RecordView], record: &str| -> String {
        list.iter()
            .find(|r| r.record == record)
            .and_then(|r| r.status)
            .map_or("-".into(), |s| s.to_string())
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|record| {
            let mut row = vec![record.clone(), cell(&report.records, record)];
            row.extend(report.peers.iter().map(|p| {
                let status = cell(&p.records, record);
                if p.reachable || status == "-" {
                    status
                } else {
                    format!("({status})")
                }
            }));
            row
        })
        .collect();
    print_rows(&head, &rows);
    for p in report.peers.iter().filter(|p| !p.reachable) {
        if let Some(age) = p.age_ms {
            println!(
                "{} has not reported for {}: its column, in parentheses, is what it said then",
                p.device,
                when::age(age)
            );
        }
    }
}

/// A peer's column heading: its name, and how stale its column is when it
/// has stopped reporting.
fn peer_heading(p: &PeerStatus) -> String {
    match (p.reachable, p.age_ms) {
        (true, _) => p.device.clone(),
        (false, Some(age)) => format!("{} (silent {})", p.device, when::age(age)),
        (false, None) => format!("{} (never reported)", p.device),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(reachable: bool, age_ms: Option<u64>) -> PeerStatus {
        PeerStatus {
            device: "gtm2".into(),
            datacenter: "dc2".into(),
            age_ms,
            reachable,
            version: None,
            geoip: None,
            geoip_info: None,
            records: Vec::new(),
            checks: Vec::new(),
        }
    }

    #[test]
    fn a_silent_peer_is_headed_with_its_age() {
        assert_eq!(peer_heading(&peer(true, Some(900))), "gtm2");
        assert_eq!(
            peer_heading(&peer(false, Some(42_000))),
            "gtm2 (silent 42 s)"
        );
        assert_eq!(peer_heading(&peer(false, None)), "gtm2 (never reported)");
    }
}
