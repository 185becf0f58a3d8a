//! The integrations in `integrations/`, each run by its own test script
//! against real devices of this build: the octoDNS provider and the
//! Ansible collection (from a venv of the pinned PyPI packages,
//! `target/venv-integrations`, which `.ci/run` makes) against a real pair,
//! and the Grafana dashboard and Prometheus rules checked by promtool and
//! against the metrics a real pair exports.

use std::{path::PathBuf, process::Command};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `python3 SCRIPT` with this build's gtm; fails with its output
/// unless it exits 0. The scripts fail by themselves when CI is set and a
/// tool they need is missing.
fn run(script: &str) {
    let out = Command::new("python3")
        .arg(repo().join(script))
        .env("GTM_BIN", env!("CARGO_BIN_EXE_gtm"))
        .current_dir(repo())
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script} failed:\n{text}");
}

#[test]
fn the_octodns_provider_syncs_and_dumps_a_pair() {
    run("integrations/octodns/tests/test_provider.py");
}

#[test]
fn the_ansible_modules_are_idempotent_against_a_pair() {
    run("integrations/ansible/tests/test_collection.py");
}

#[test]
fn the_dashboard_and_alert_rules_name_metrics_a_pair_exports() {
    run("integrations/monitoring/check.py");
}
