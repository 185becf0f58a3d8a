//! `gtm logs`: the event log (GTM Logs) of every device of the cluster,
//! filtered, once or followed.

use anyhow::Result;
use serde_json::Value;

use super::{
    client::{Client, Connect},
    output::format_ms,
};
use gtm_api::StatusReport;
use gtm_engine::{Event, EventKind, Severity};

/// The event kinds as the API names them.
pub(super) fn kinds() -> Vec<String> {
    EventKind::names()
}

/// The help of `gtm logs --kind`.
pub(super) fn kind_help() -> String {
    format!("Only events of this kind: {}", kinds().join(", "))
}

/// `--kind`, checked here: a wrong kind is named with the right ones.
pub(super) fn parse_kind(s: &str) -> Result<EventKind, String> {
    serde_json::from_value(Value::String(s.to_ascii_lowercase()))
        .map_err(|_| format!("no event kind \"{s}\": one of {}", kinds().join(", ")))
}

/// `--severity`, checked here: a wrong one is named with the right ones.
fn parse_severity(s: &str) -> Result<Severity, String> {
    s.to_ascii_lowercase()
        .parse()
        .map_err(|e: gtm_model::severity::UnknownSeverity| e.to_string())
}

/// A kind as the API's query names it.
fn kind_name(kind: EventKind) -> String {
    match serde_json::to_value(kind) {
        Ok(Value::String(s)) => s,
        _ => format!("{kind:?}").to_ascii_lowercase(),
    }
}

pub(super) async fn run(cli: &Connect, args: &LogsArgs) -> Result<()> {
    let LogsArgs {
        record,
        kind,
        severity,
        device,
        since,
        follow,
        limit,
        json,
    } = args;
    let client = Client::new(cli)?;
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(r) = record {
        let label = match r.rsplit_once('/') {
            Some((n, t)) => gtm_api::record_label(n, t),
            None => r.clone(),
        };
        query.push(("record", label));
    }
    if let Some(k) = kind {
        query.push(("kind", kind_name(*k)));
    }
    if let Some(s) = severity {
        query.push(("severity", s.to_string()));
    }
    if let Some(d) = device {
        query.push(("device", d.clone()));
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
                    "last report {} ago",
                    gtm_model::when::age(ms)
                ))
            );
        }
    }
    let req = client.http.get(client.url("/api/v1/events")).query(&query);
    let print = |e: &Event| {
        if *json {
            println!("{}", serde_json::to_string(e).unwrap_or_default());
        } else {
            println!(
                "{}  {}  {:<7}  {}",
                format_ms(e.time_ms),
                e.device,
                e.severity,
                e.text
            );
        }
    };
    if !*follow {
        let events: Vec<Event> = client.send(req).await?;
        events.iter().for_each(print);
        return Ok(());
    }
    let mut resp = client.stream(req).await?;
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

/// What `gtm logs` prints: filters, and whether to follow.
#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    /// Only this record, e.g. www.example.test/A.
    #[arg(long, value_name = "NAME/TYPE")]
    pub record: Option<String>,
    // The help lists the kinds of the code's own list (logs::kinds).
    #[arg(long, value_parser = parse_kind, help = kind_help())]
    pub kind: Option<EventKind>,
    /// Only events of this severity or higher: info (every event), warning
    /// or error.
    #[arg(long, value_parser = parse_severity)]
    pub severity: Option<Severity>,
    /// Only the events of this device of the cluster, e.g. gtm2.
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// Only events newer than this, e.g. 10m or 2h.
    #[arg(long)]
    pub since: Option<String>,
    /// Keep printing new events as they happen.
    #[arg(long, short)]
    pub follow: bool,
    /// Only the newest N events.
    #[arg(long, short = 'n')]
    pub limit: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use crate::cli::Cli;
    use gtm_engine::EventKind;

    /// The help of `--kind` is the code's list: every kind is in it, and a
    /// wrong kind is refused naming them.
    #[test]
    fn kind_help_lists_every_kind_of_the_code() {
        let kinds = super::kinds();
        for k in [EventKind::Record, EventKind::Datacenter, EventKind::Device] {
            assert!(kinds.contains(&super::kind_name(k)), "{kinds:?}");
        }
        assert!(kinds.len() >= 8, "{kinds:?}");
        let mut cli = Cli::command();
        cli.build();
        let logs = cli.find_subcommand("logs").unwrap();
        let kind = logs.get_arguments().find(|a| a.get_id() == "kind").unwrap();
        let help = kind.get_help().unwrap().to_string();
        for k in &kinds {
            assert!(help.contains(k.as_str()), "{k} missing from: {help}");
        }
        assert!(help.contains("datacenter"), "{help}");
        for k in &kinds {
            assert!(super::parse_kind(k).is_ok(), "{k}");
        }
        assert_eq!(super::parse_kind("Check"), Ok(EventKind::Check));
        let err = Cli::try_parse_from(["gtm", "logs", "--kind", "nope"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string()
                .contains("no event kind \"nope\": one of record, check"),
            "{err}"
        );
    }
}
