//! `--dry-run` and `--force` of `gtm record drain`/`undrain` and `gtm dc
//! drain`/`undrain`: the look before a drain (docs/cli.md).

use anyhow::Result;

use super::client::Client;
use gtm_engine::RecordView;
use gtm_node::judge::{Basis, Judgement};

#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Look {
    /// Only print what would change (each record's answers now and after)
    /// and the records that would be left with no answer; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Drain even if a record would be left with no answer.
    #[arg(long)]
    pub force: bool,
}

/// Sends the drain (`/api/v1/drain/<kind>`), or its dry run, and prints
/// the result.
pub(super) async fn run(
    client: &Client,
    kind: &str,
    body: &impl serde::Serialize,
    what: &str,
    drained: bool,
    look: &Look,
) -> Result<()> {
    let request = client
        .http
        .put(client.url(&format!("/api/v1/drain/{kind}")))
        .json(body);
    if look.dry_run {
        let j: Judgement = client.send(request).await?;
        print_judgement(&j, "a drain needs --force");
        return Ok(());
    }
    let _: Vec<RecordView> = client.send(request).await?;
    println!(
        "{what} {}",
        if drained {
            "drained"
        } else {
            "back in answers"
        }
    );
    Ok(())
}

/// A judgement as people read it: per device, how it was judged and each
/// record's answers now → after; then the records some device would
/// answer with nothing (`needs`: what that takes).
pub(super) fn print_judgement(j: &Judgement, needs: &str) {
    println!("dry run: {} (nothing changed)", j.action);
    print_devices(j, needs);
}

/// Per device: how it was judged, and each record's answers now → after;
/// then the records some device would answer with nothing (`needs`: what
/// that takes).
pub(super) fn print_devices(j: &Judgement, needs: &str) {
    for d in &j.devices {
        let how = match d.basis {
            Basis::Now => String::new(),
            Basis::Report => format!(
                " (did not answer; judged from its report {} old)",
                gtm_model::when::age(d.age_ms.unwrap_or(0))
            ),
            Basis::None => format!(" (not judged: {})", d.why.as_deref().unwrap_or("no answer")),
        };
        if d.basis == Basis::None {
            println!("{}{how}", d.device);
            continue;
        }
        if d.changes.is_empty() {
            println!("{}{how}: no record's answers would change", d.device);
            continue;
        }
        println!("{}{how}:", d.device);
        for c in &d.changes {
            println!("  {}: {} → {}", c.record, c.before, c.after);
        }
    }
    let lines = j.emptied_lines();
    if !lines.is_empty() {
        println!("would leave with no answer: {} ({needs})", lines.join("; "));
    }
}

/// `--record NAME/TYPE` of a drain: the form is checked here, so that a
/// name without its type is not sent on to be reported "not found".
pub(super) fn record_ref(s: &str) -> Result<String, String> {
    match s.rsplit_once('/') {
        Some((name, rtype))
            if !name.is_empty()
                && !rtype.is_empty()
                && rtype.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            Ok(s.to_string())
        }
        _ => Err(format!(
            "expected NAME/TYPE, e.g. www.example.test/A, not \"{s}\""
        )),
    }
}
