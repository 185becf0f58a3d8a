//! The harness as an API client: unique object writes and how their
//! answers are classified, and the leader as the devices see it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};

/// A client gives up on a write after this long: its outcome is unknown.
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// What a client needs to talk to a device's API.
#[derive(Clone)]
pub(super) struct Target {
    pub(super) name: String,
    pub(super) api: String,
    pub(super) token: String,
}

/// How a write ended, as the client saw it.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    /// 2xx, `applied: true`, with the version it made.
    Acknowledged(u64),
    /// An answer that means it will never apply (the error label).
    Rejected(String),
    /// A timeout, a broken connection, `outcome-unknown`, anything else.
    Unknown(String),
}

/// One write of one writer, in the order the writer made them.
#[derive(Debug)]
pub(super) struct Write {
    pub(super) name: String,
    pub(super) writer: usize,
    pub(super) device: String,
    pub(super) outcome: Outcome,
}

/// Answers that promise the write will never apply: a 4xx, or a refusal
/// before anything was proposed (no quorum, a store that cannot write).
fn never_applies(status: u16, label: &str) -> bool {
    label != "outcome-unknown"
        && ((400..500).contains(&status) || matches!(label, "no-quorum" | "storage"))
}

/// One unique object write, classified.
async fn put_datacenter(http: &reqwest::Client, t: &Target, name: &str) -> Outcome {
    let sent = http
        .put(format!("{}/api/v1/datacenters/{name}", t.api))
        .bearer_auth(&t.token)
        .json(&json!({ "name": name }))
        .timeout(WRITE_TIMEOUT)
        .send()
        .await;
    let response = match sent {
        Ok(r) => r,
        Err(e) => return Outcome::Unknown(format!("{e}")),
    };
    let status = response.status().as_u16();
    let body: Value = match response.json().await {
        Ok(b) => b,
        Err(e) => return Outcome::Unknown(format!("{status}: body: {e}")),
    };
    if (200..300).contains(&status) {
        return match (body["applied"].as_bool(), body["version"].as_u64()) {
            (Some(true), Some(v)) => Outcome::Acknowledged(v),
            _ => Outcome::Unknown(format!("{status}: {body}")),
        };
    }
    let label = body["error"].as_str().unwrap_or("").to_string();
    if never_applies(status, &label) {
        Outcome::Rejected(label)
    } else {
        Outcome::Unknown(format!("{status}: {body}"))
    }
}

/// Writer `w`: `w<w>-<i>` through device `(w + i) % n`, one at a time,
/// until told to stop.
pub(super) async fn writer(
    w: usize,
    http: reqwest::Client,
    targets: Arc<Vec<Target>>,
    stop: Arc<AtomicBool>,
) -> Vec<Write> {
    let mut writes = Vec::new();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let t = &targets[(w + i) % targets.len()];
        let name = format!("w{w}-{i}");
        let outcome = put_datacenter(&http, t, &name).await;
        // A dead device refuses at once: do not spin on it.
        if !matches!(outcome, Outcome::Acknowledged(_)) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        writes.push(Write {
            name,
            writer: w,
            device: t.name.clone(),
            outcome,
        });
        i += 1;
    }
    writes
}

pub(super) async fn get_json(
    http: &reqwest::Client,
    t: &Target,
    path: &str,
    wait: Duration,
) -> Option<Value> {
    let r = http
        .get(format!("{}{path}", t.api))
        .bearer_auth(&t.token)
        .timeout(wait)
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json().await.ok()
}

pub(super) async fn get_text(http: &reqwest::Client, t: &Target, path: &str) -> Option<String> {
    let r = http
        .get(format!("{}{path}", t.api))
        .bearer_auth(&t.token)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.text().await.ok()
}

/// The leader's name as `t` sees it, with the term.
pub(super) async fn leader_seen_by(http: &reqwest::Client, t: &Target) -> Option<(u64, String)> {
    let s = get_json(http, t, "/api/v1/cluster/status", Duration::from_secs(1)).await?;
    let name = s["leader"][1]["name"].as_str()?.to_string();
    Some((s["term"].as_u64().unwrap_or(0), name))
}

/// The leader as the devices in `asked` see it (the highest term wins).
pub(super) async fn leader(
    http: &reqwest::Client,
    targets: &[Target],
    asked: &[usize],
) -> Option<usize> {
    let mut best: Option<(u64, String)> = None;
    for &i in asked {
        if let Some(seen) = leader_seen_by(http, &targets[i]).await
            && best.as_ref().is_none_or(|b| seen.0 > b.0)
        {
            best = Some(seen);
        }
    }
    let (_, name) = best?;
    targets.iter().position(|t| t.name == name)
}

/// Waits (bounded) until the device's API answers.
pub(super) async fn until_up(http: &reqwest::Client, t: &Target, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if get_json(http, t, "/api/v1/cluster/status", Duration::from_secs(1))
            .await
            .is_some()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits (bounded) until some device names a leader.
pub(super) async fn until_leader(http: &reqwest::Client, targets: &[Target]) -> Option<usize> {
    let all: Vec<usize> = (0..targets.len()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(l) = leader(http, targets, &all).await {
            return Some(l);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
