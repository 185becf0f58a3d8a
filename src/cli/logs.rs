//! `gtm logs`: the event log (GTM Logs) of every device of the cluster,
//! filtered, once or followed.

use anyhow::Result;

use super::{Cli, args::LogsArgs, client::Client, output::format_ms};
use crate::{api::StatusReport, engine::Event};

pub(super) async fn run(cli: &Cli, args: &LogsArgs) -> Result<()> {
    let LogsArgs {
        record,
        kind,
        since,
        follow,
        limit,
        json,
    } = args;
    let client = Client::new(cli)?;
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(r) = record {
        let label = match r.rsplit_once('/') {
            Some((n, t)) => crate::api::record_label(n, t),
            None => r.clone(),
        };
        query.push(("record", label));
    }
    if let Some(k) = kind {
        query.push(("kind", k.to_ascii_lowercase()));
    }
    if let Some(s) = since {
        query.push(("since", s.clone()));
    }
    if *follow {
        query.push(("follow", "true".into()));
    }
    if let Some(n) = limit {
        query.push(("limit", n.to_string()));
    }
    // Every device's events, and a word on those not heard from.
    query.push(("all", "true".into()));
    if let Ok(report) = client
        .send::<StatusReport>(client.http.get(client.url("/api/v1/status")))
        .await
    {
        for p in report.peers.iter().filter(|p| !p.reachable) {
            eprintln!(
                "note: device {} ({}) could not be reached: {}; its latest events may be missing",
                p.device,
                p.datacenter,
                p.age_ms.map_or("never heard from".into(), |ms| format!(
                    "last report {} s ago",
                    ms / 1000
                ))
            );
        }
    }
    let req = client.http.get(client.url("/api/v1/events")).query(&query);
    let print = |e: &Event| {
        if *json {
            println!("{}", serde_json::to_string(e).unwrap_or_default());
        } else {
            println!("{}  {}  {}", format_ms(e.time_ms), e.device, e.text);
        }
    };
    if !*follow {
        let events: Vec<Event> = client.send(req).await?;
        events.iter().for_each(print);
        return Ok(());
    }
    let mut resp = client.response(req).await?;
    let mut pending = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if let Ok(e) = serde_json::from_slice::<Event>(&line) {
                print(&e);
            }
        }
    }
    Ok(())
}
