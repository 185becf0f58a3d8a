//! How the CLI prints for people: tables, times, the result of a
//! configuration write.

use gtm_api::ApplyResult;

/// What a configuration write changed, and its version.
pub(super) fn print_apply(result: &ApplyResult) {
    if result.changes.is_empty() {
        println!("no changes");
    }
    for line in &result.changes {
        println!("{line}");
    }
    if result.applied {
        println!("applied as version {}", result.version);
        if !result.installed {
            println!(
                "note: committed by the cluster, but not installed on this device yet (gtm status and gtm logs say why)"
            );
        }
    } else if !result.changes.is_empty() {
        println!("dry run: nothing applied");
    }
    if let Some(j) = &result.devices {
        println!("answers on every device:");
        super::drain::print_devices(j, "an apply needs --force");
    }
}

/// A table with as many columns as `head`, each as wide as its widest cell.
pub(super) fn print_rows(head: &[String], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = head.iter().map(String::len).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(head);
    for row in rows {
        line(row);
    }
}

pub(super) fn print_checks(checks: &[gtm_engine::CheckStatus]) {
    let rows: Vec<[String; 3]> = checks
        .iter()
        .map(|c| {
            let state = c.state.to_string();
            [
                c.check.clone(),
                if c.restored {
                    format!("{state} (restored)")
                } else {
                    state
                },
                c.reason.clone(),
            ]
        })
        .collect();
    table(&["CHECK", "STATE", "LAST REASON"], &rows);
}

pub(super) fn table<const N: usize>(head: &[&str; N], rows: &[[String; N]]) {
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec()).collect();
    print_rows(&head, &rows);
}

pub(super) fn format_ms(ms: u64) -> String {
    gtm_model::when::iso_ms(ms)
}
