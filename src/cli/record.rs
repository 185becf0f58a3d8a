//! `gtm record ...`: a record's configuration, its preview, its
//! resolution for one client (explain), failback resume, and drains of
//! addresses.

use anyhow::Result;

use super::{
    args::RecordCmd,
    client::{Client, Connect},
    drain, objects,
    output::{format_ms, table},
};
use gtm_api::DeviceRecordStats;
use gtm_engine::{Explain, Preview};

pub(super) async fn run(cli: &Connect, cmd: &RecordCmd) -> Result<()> {
    match cmd {
        RecordCmd::Object(cmd) => objects::record(&Client::new(cli)?, cmd).await,
        RecordCmd::Preview {
            name,
            rtype,
            device,
            json,
        } => {
            let client = Client::new(cli)?;
            let mut request = client
                .http
                .get(client.url(&format!("/api/v1/records/{name}/{rtype}/preview")));
            if let Some(d) = device {
                request = request.query(&[("device", d)]);
            }
            let p: Preview = client.send(request).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&p)?);
                return Ok(());
            }
            println!("record          {}  (device {})", p.record, p.device);
            println!("mode            {}", p.mode);
            println!("balance         {}", p.balance);
            println!(
                "status          {}",
                p.status.map_or("-".into(), |s| s.to_string())
            );
            println!(
                "active records  {}",
                if p.active.is_empty() {
                    "-".into()
                } else {
                    gtm_engine::active_texts(&p.active).join(", ")
                }
            );
            for place in &p.places {
                let shown = if place.active.is_empty() {
                    "-".into()
                } else {
                    gtm_engine::active_texts(&place.active).join(", ")
                };
                println!("  clients in {:<4}{shown}", place.place);
            }
            for rule in &p.rules {
                let shown = if rule.skipped {
                    "skipped (no candidate)".into()
                } else {
                    gtm_engine::active_texts(&rule.active).join(", ")
                };
                println!(
                    "  rule {} {} → {} (weight {}): {shown}",
                    rule.rule, rule.client, rule.target, rule.weight
                );
            }
            for near in &p.nearest {
                let shown = if near.skipped {
                    "skipped (no candidate)".into()
                } else {
                    gtm_engine::active_texts(&near.active).join(", ")
                };
                println!(
                    "  nearest {}{}: {shown}",
                    near.datacenter,
                    bias_text(near.bias)
                );
            }
            println!("decision        {}", p.decision);
            println!();
            let rows: Vec<[String; 5]> = p
                .addresses
                .iter()
                .map(|a| {
                    let health = if a.drained {
                        "drained"
                    } else {
                        a.health.as_str()
                    };
                    [
                        a.ip.clone(),
                        a.datacenter.clone().unwrap_or_else(|| "-".into()),
                        a.hc.clone(),
                        health.into(),
                        a.reason.clone(),
                    ]
                })
                .collect();
            table(&["ADDRESS", "DC", "HC", "HEALTH", "WHY"], &rows);
            if !p.switchovers.is_empty() {
                println!();
                println!("latest switchovers");
                for e in &p.switchovers {
                    println!("  {}  {}", format_ms(e.time_ms), e.text);
                }
            }
            Ok(())
        }
        RecordCmd::Explain {
            name,
            rtype,
            client: who,
            ecs,
            device,
            json,
        } => {
            let client = Client::new(cli)?;
            let mut request = client
                .http
                .get(client.url(&format!("/api/v1/records/{name}/{rtype}/explain")));
            let query: Vec<(&str, &String)> = [("client", who), ("ecs", ecs), ("device", device)]
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_ref()?)))
                .collect();
            if !query.is_empty() {
                request = request.query(&query);
            }
            let x: Explain = client.send(request).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&x)?);
            } else {
                print_explain(&x);
            }
            Ok(())
        }
        RecordCmd::Resume { name, rtype } => {
            let client = Client::new(cli)?;
            let p: Preview = client
                .send(
                    client
                        .http
                        .post(client.url(&format!("/api/v1/records/{name}/{rtype}/resume"))),
                )
                .await?;
            println!("{}: {}", p.record, p.decision);
            Ok(())
        }
        RecordCmd::Drain {
            address,
            record,
            look,
        }
        | RecordCmd::Undrain {
            address,
            record,
            look,
        } => {
            let drained = matches!(cmd, RecordCmd::Drain { .. });
            let body = gtm_api::DrainAddress {
                address: address.clone(),
                record: record.clone(),
                drained,
                dry_run: look.dry_run,
                force: look.force,
            };
            drain::run(&Client::new(cli)?, "address", &body, address, drained, look).await
        }
        RecordCmd::Stats { name, rtype, json } => {
            let client = Client::new(cli)?;
            let stats: DeviceRecordStats = client
                .send(
                    client
                        .http
                        .get(client.url(&format!("/api/v1/records/{name}/{rtype}/stats"))),
                )
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&stats)?);
                return Ok(());
            }
            let s = &stats.stats;
            println!(
                "{}: {} responses on {} since it started",
                s.record, s.answers, stats.device
            );
            if !s.addresses.is_empty() {
                let rows: Vec<[String; 2]> = s
                    .addresses
                    .iter()
                    .map(|a| [a.address.clone(), a.answers.to_string()])
                    .collect();
                table(&["ADDRESS", "ANSWERS"], &rows);
            }
            if !s.rules.is_empty() {
                println!();
                let rows: Vec<[String; 2]> = s
                    .rules
                    .iter()
                    .map(|r| [format!("{}: {}", r.rule, r.text), r.answers.to_string()])
                    .collect();
                table(&["TOPOLOGY RULE", "ANSWERS"], &rows);
            }
            Ok(())
        }
        RecordCmd::Drains { json } => {
            let client = Client::new(cli)?;
            let drains: Vec<gtm_model::operator::Drain> = client
                .send(client.http.get(client.url("/api/v1/drains")))
                .await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&drains)?);
            } else {
                let rows: Vec<[String; 4]> = drains
                    .iter()
                    .map(|d| {
                        let (what, scope) = match (&d.address, &d.datacenter) {
                            (Some(a), _) => (
                                a.clone(),
                                d.record.clone().unwrap_or_else(|| "every record".into()),
                            ),
                            (None, Some(dc)) => {
                                (format!("datacenter {dc}"), "its addresses".into())
                            }
                            (None, None) => ("?".into(), String::new()),
                        };
                        [what, scope, d.actor.to_string(), format_ms(d.time_ms)]
                    })
                    .collect();
                table(&["DRAINED", "SCOPE", "BY", "SINCE"], &rows);
            }
            Ok(())
        }
    }
}

/// The steps, numbered, then the answer.
fn print_explain(x: &Explain) {
    print!(
        "{} on {}, for a query from {}",
        x.record, x.device, x.client
    );
    match &x.ecs {
        Some(ecs) => println!(" with ECS {ecs}"),
        None => println!(),
    }
    println!();
    for (n, s) in x.steps.iter().enumerate() {
        let of = if s.subject.is_empty() {
            String::new()
        } else {
            format!(" {}", s.subject)
        };
        println!("{:>2}. {}{of}: {}", n + 1, s.step, s.outcome);
        println!("    {}", s.reason);
    }
    println!();
    let a = &x.answer;
    let ttl = a.ttl.map_or("-".into(), |t| t.to_string());
    let scope = a
        .ecs_scope
        .map_or(String::new(), |s| format!(", ECS scope /{s}"));
    println!("answer  {} ({}, TTL {ttl}{scope})", a.kind, a.rcode);
    if a.possible.is_empty() {
        println!("  (no record)");
    }
    for p in &a.possible {
        let weight = if p.weight == 1 {
            String::new()
        } else {
            format!("  (weight {})", p.weight)
        };
        println!("  {}{weight}", p.records.join(", "));
    }
    if a.omitted > 0 {
        println!("  ... and {} more", a.omitted);
    }
    println!("rotation  {}", a.rotation);
}

/// ` (bias +20)`, or nothing for no bias.
fn bias_text(bias: i32) -> String {
    if bias == 0 {
        String::new()
    } else {
        format!(" (bias {bias:+})")
    }
}
