//! `GET /metrics`: the device in Prometheus text format. Open like
//! `/health`; it says nothing an operator's dashboard should not see.

use axum::{extract::State, http::header, response::IntoResponse};

use gtm_model::error::ApiError;

use super::ApiState;
use gtm_model::metrics::Text;

pub async fn metrics(State(state): State<ApiState>) -> Result<impl IntoResponse, ApiError> {
    // Off the async workers: a line per record, read under the engine's
    // lock, which an install holds for seconds.
    let text = super::blocking(move || render(&state)).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    ))
}

fn render(state: &ApiState) -> String {
    let mut out = Text::default();
    let engine = &state.engine;
    let device = engine.device().to_string();
    engine.write_dns_metrics(&mut out);

    out.family(
        "gtm_storage_degraded",
        "gauge",
        "1 while this device cannot write its store (full or read-only disk): DNS is served, writes are refused",
    );
    let fault = engine.storage_fault();
    out.sample(
        "gtm_storage_degraded",
        &[("device", &device)],
        if fault.is_some() { 1.0 } else { 0.0 },
    );
    let geo = engine.geoip();
    out.family(
        "gtm_geoip_build_timestamp_seconds",
        "gauge",
        "Build time of the GeoIP database this device answers with (absent without one)",
    );
    if let Some(info) = geo.info() {
        out.sample(
            "gtm_geoip_build_timestamp_seconds",
            &[("device", &device), ("database", &info.name)],
            info.build_epoch as f64,
        );
    }
    out.family(
        "gtm_geoip_loaded",
        "gauge",
        "1 while this device has a GeoIP database; 0 when every client gets the default records",
    );
    out.sample(
        "gtm_geoip_loaded",
        &[("device", &device)],
        if geo.is_loaded() { 1.0 } else { 0.0 },
    );
    out.family(
        "gtm_storage_pending_writes",
        "gauge",
        "Events and health decisions kept in memory until the store can be written",
    );
    out.sample(
        "gtm_storage_pending_writes",
        &[("device", &device)],
        fault.map_or(0, |f| f.pending) as f64,
    );

    let notifiers = state.alerts.statuses();
    out.family(
        "gtm_alert_messages_total",
        "counter",
        "Alert messages of each notifier on this device: delivered, failed (attempts, each retry counts) and dropped (the queue was full)",
    );
    for n in &notifiers {
        for (result, count) in [
            ("delivered", n.counts.delivered),
            ("failed", n.counts.failures),
            ("dropped", n.counts.dropped),
        ] {
            out.sample(
                "gtm_alert_messages_total",
                &[
                    ("device", &device),
                    ("notifier", &n.name),
                    ("result", result),
                ],
                count as f64,
            );
        }
    }
    out.family(
        "gtm_alert_queued",
        "gauge",
        "Alert messages waiting to be delivered, per notifier",
    );
    for n in &notifiers {
        out.sample(
            "gtm_alert_queued",
            &[("device", &device), ("notifier", &n.name)],
            n.queued as f64,
        );
    }
    out.family(
        "gtm_alert_failing",
        "gauge",
        "1 while a notifier's last delivery attempt failed (its messages wait and are retried)",
    );
    for n in &notifiers {
        out.sample(
            "gtm_alert_failing",
            &[("device", &device), ("notifier", &n.name)],
            if n.counts.failing { 1.0 } else { 0.0 },
        );
    }

    out.family(
        "gtm_record_answers_total",
        "counter",
        "Responses whose answer section held this record (records answered at least once)",
    );
    for (record, n) in engine.answer_counts() {
        out.sample("gtm_record_answers_total", &[("record", &record)], n as f64);
    }
    out.family(
        "gtm_address_answers_total",
        "counter",
        "Responses that carried this address of a steered record (addresses answered at least once; fail-safe values too)",
    );
    for (record, address, n) in engine.address_counts() {
        out.sample(
            "gtm_address_answers_total",
            &[("record", &record), ("address", &address)],
            n as f64,
        );
    }

    out.family(
        "gtm_topology_rule_answers_total",
        "counter",
        "Responses whose answer a topology rule of a record decided, per rule (`1: region:branch → datacenter east`; rules that decided at least once)",
    );
    for (record, rule, n) in engine.rule_counts() {
        out.sample(
            "gtm_topology_rule_answers_total",
            &[("record", &record), ("rule", &rule)],
            n as f64,
        );
    }

    let (peers, peer_records): (Vec<_>, Vec<_>) =
        state.peers.reported(&state.replication).into_iter().unzip();
    out.family(
        "gtm_record_status",
        "gauge",
        "1 for the status of each record on each device (the peers' as their last report said)",
    );
    let own = engine.status();
    let all_records = std::iter::once((device.as_str(), &own)).chain(
        peers
            .iter()
            .zip(&peer_records)
            .map(|(p, records)| (p.device.as_str(), records)),
    );
    for (dev, records) in all_records {
        for r in records {
            let status = r.status.map_or("-".to_string(), |s| s.to_string());
            out.sample(
                "gtm_record_status",
                &[("device", dev), ("record", &r.record), ("status", &status)],
                1.0,
            );
        }
    }

    out.family(
        "gtm_check_state",
        "gauge",
        "1 for the state of each check instance on each device",
    );
    let own = engine.checks();
    let all_checks = std::iter::once((device.as_str(), &own))
        .chain(peers.iter().map(|p| (p.device.as_str(), &p.checks)));
    for (dev, checks) in all_checks {
        for c in checks {
            out.sample(
                "gtm_check_state",
                &[
                    ("device", dev),
                    ("check", &c.check),
                    ("state", c.state.as_str()),
                ],
                1.0,
            );
        }
    }
    engine.probe_metrics().write(&mut out);

    let failure = engine.install_failure();
    out.family(
        "gtm_degraded",
        "gauge",
        "1 while a committed configuration cannot be installed on this device (it serves its last good one)",
    );
    out.sample(
        "gtm_degraded",
        &[],
        if failure.is_some() { 1.0 } else { 0.0 },
    );
    out.family(
        "gtm_config_install_failed",
        "gauge",
        "1 for the committed configuration version this device could not install",
    );
    if let Some(f) = &failure {
        out.sample(
            "gtm_config_install_failed",
            &[("version", &f.version.to_string())],
            1.0,
        );
    }

    let cluster = state.replication.status();
    out.family(
        "gtm_raft_role",
        "gauge",
        "1 for this device's Raft role (none when it is not in a cluster)",
    );
    let role = if state.replication.clustered() {
        format!("{:?}", cluster.state).to_ascii_lowercase()
    } else {
        "none".to_string()
    };
    out.sample("gtm_raft_role", &[("role", &role)], 1.0);
    out.family(
        "gtm_raft_quorum",
        "gauge",
        "1 when this device sees a working quorum (as leader: a majority of voters answered within an election timeout); 0 for a leader cut off from it (`Leader (no quorum)`)",
    );
    if state.replication.clustered() {
        out.sample(
            "gtm_raft_quorum",
            &[],
            if cluster.quorum { 1.0 } else { 0.0 },
        );
    }
    out.family(
        "gtm_raft_failed",
        "gauge",
        "1 while this device's Raft is stopped by a failure (its storage failed): it refuses writes and installs nothing",
    );
    out.sample(
        "gtm_raft_failed",
        &[("device", &device)],
        if cluster.failure.is_some() { 1.0 } else { 0.0 },
    );
    out.family("gtm_raft_term", "gauge", "The current Raft term");
    out.sample("gtm_raft_term", &[], cluster.term as f64);
    out.family(
        "gtm_raft_applied_index",
        "gauge",
        "The last Raft log index applied on this device",
    );
    out.sample(
        "gtm_raft_applied_index",
        &[],
        cluster.applied_index.unwrap_or(0) as f64,
    );
    out.family(
        "gtm_config_version",
        "gauge",
        "The configuration version this device serves",
    );
    out.sample("gtm_config_version", &[], engine.version() as f64);
    out.family(
        "gtm_config_validations_running",
        "gauge",
        "Checks of a client's configuration (validate, apply, dry runs) running now",
    );
    out.sample(
        "gtm_config_validations_running",
        &[],
        state.validations.running() as f64,
    );
    out.family(
        "gtm_config_validations_cancelled_total",
        "counter",
        "Checks of a client's configuration whose client went away before they ended; each stopped at its next piece, section or record",
    );
    out.sample(
        "gtm_config_validations_cancelled_total",
        &[],
        state.validations.cancelled() as f64,
    );

    out.family(
        "gtm_peer_report_age_seconds",
        "gauge",
        "Seconds since each peer's last report (peers never heard from are left out)",
    );
    for p in &peers {
        if let Some(ms) = p.age_ms {
            out.sample(
                "gtm_peer_report_age_seconds",
                &[("device", &p.device), ("datacenter", &p.datacenter)],
                ms as f64 / 1000.0,
            );
        }
    }
    out.family(
        "gtm_peer_reachable",
        "gauge",
        "1 when the peer's reports are fresh, else 0",
    );
    for p in &peers {
        out.sample(
            "gtm_peer_reachable",
            &[("device", &p.device), ("datacenter", &p.datacenter)],
            f64::from(u8::from(p.reachable)),
        );
    }
    let workers = state.workers.list();
    out.family(
        "gtm_worker_up",
        "gauge",
        "1 while the worker runs (or is idle by design), 0 when it failed or stopped",
    );
    for w in &workers {
        let up = matches!(
            w.state,
            gtm_node::workers::WorkerState::Running | gtm_node::workers::WorkerState::Idle
        );
        out.sample(
            "gtm_worker_up",
            &[("device", &device), ("worker", &w.name)],
            f64::from(u8::from(up)),
        );
    }
    out.family(
        "gtm_worker_restarts_total",
        "counter",
        "Times the worker was started again after it failed, since the device started",
    );
    for w in &workers {
        out.sample(
            "gtm_worker_restarts_total",
            &[("device", &device), ("worker", &w.name)],
            w.restarts as f64,
        );
    }
    out.family(
        "gtm_worker_errors_total",
        "counter",
        "Times the worker failed, since the device started",
    );
    for w in &workers {
        out.sample(
            "gtm_worker_errors_total",
            &[("device", &device), ("worker", &w.name)],
            w.errors as f64,
        );
    }
    out.finish()
}
