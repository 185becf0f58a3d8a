//! "Test now" from where the check runs. A check that runs in another
//! datacenter (`run_on`) is probed by a device of that datacenter, and an
//! address this device's `probe_networks` fences out by another device
//! that may probe it: the request goes to that device over
//! `/cluster/v1/probe` (with the cluster secret), which probes once, here
//! and nowhere else. The result names the device that probed, the address
//! probed and why it was not this device; when no device can probe, the
//! error says which were asked and what each said. Nothing is ever probed
//! silently from a place the check does not run in.

use std::{collections::HashSet, net::IpAddr, time::Duration};

use axum::{Json, extract::State};
use serde::{Deserialize, Serialize};

use super::{TestResult, compile_unsaved, instance_of};
use crate::ApiState;
use gtm_cluster::{MemberStatus, SECRET_HEADER};
use gtm_health::{Instance, probe::Host};
use gtm_model::{
    compile::CheckSpec,
    config::CheckType,
    error::{ApiError, ErrorKind},
};

/// A Test now as one device asks another to run it: a saved check by its
/// name, or a check not saved, whole (with its name); and the address for
/// a template check.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
}

/// Time for the asked device's answer beyond the check's own timeout.
const ANSWER_MARGIN: Duration = Duration::from_secs(3);

/// The check `ask` names (saved) or carries (not saved), compiled.
pub(crate) async fn spec_of(state: &ApiState, ask: &Probe) -> Result<CheckSpec, ApiError> {
    match (&ask.name, &ask.check) {
        (Some(name), None) => {
            let (engine, wanted) = (state.engine.clone(), name.clone());
            crate::blocking(move || engine.compiled_check(&wanted))
                .await?
                .ok_or_else(|| crate::not_found(format!("no check named \"{name}\"")))
        }
        (None, Some(check)) => compile_unsaved(state, check.clone()).await,
        _ => Err(ApiError::new(
            ErrorKind::BadRequest,
            "a probe names a saved check (name) or gives one (check), not both or neither",
        )),
    }
}

/// Test now as an operator asks it of this device: probed here when the
/// check may run here and the address is inside this device's fence, else
/// by a device where both hold.
pub(crate) async fn test_now(
    state: &ApiState,
    spec: CheckSpec,
    ask: Probe,
) -> Result<TestResult, ApiError> {
    let instance = instance_of(state, spec, ask.address)?;
    let asked = Asked {
        state,
        ask: &ask,
        timeout: instance.spec.timeout.saturating_add(ANSWER_MARGIN),
    };
    if let Some(dc) = runs_elsewhere(state, &instance) {
        return asked.in_datacenter(&instance.spec.name, dc).await;
    }
    if let Some(ip) = fenced_ip(&instance)
        && let Err(fenced) = state.prober.admits(ip)
    {
        return asked.past_the_fence(ip, runs_in(&instance), &fenced).await;
    }
    Ok(probe_here(state, &instance).await)
}

/// `/cluster/v1/probe`: another device's Test now, probed on this device
/// only. Refused when the check does not run here or the fence keeps the
/// address out (the asking device then asks another).
pub(crate) async fn peer_probe(
    State(state): State<ApiState>,
    Json(ask): Json<Probe>,
) -> Result<Json<TestResult>, ApiError> {
    let spec = spec_of(&state, &ask).await?;
    let instance = instance_of(&state, spec, ask.address)?;
    if let Some(dc) = runs_elsewhere(&state, &instance) {
        return Err(ApiError::new(
            ErrorKind::NotProbed,
            format!(
                "check {} runs in {dc}, and this device is in {}",
                instance.spec.name, state.datacenter
            ),
        ));
    }
    if let Some(ip) = fenced_ip(&instance)
        && let Err(fenced) = state.prober.admits(ip)
    {
        return Err(ApiError::new(ErrorKind::NotProbed, fenced.to_string()));
    }
    Ok(Json(probe_here(&state, &instance).await))
}

/// The datacenter the check runs in, when its `run_on` names one.
fn runs_in(instance: &Instance) -> Option<&str> {
    instance.spec.run_on?;
    instance.spec.raw.run_on.as_deref()
}

/// The datacenter the check runs in, when that is not this device's.
fn runs_elsewhere<'a>(state: &ApiState, instance: &'a Instance) -> Option<&'a str> {
    runs_in(instance).filter(|dc| *dc != state.datacenter)
}

/// The address the fence judges before the probe: the target's when it is
/// an address (a name is resolved, and fenced, as the probe runs); none
/// for a check that does not contact it: an exec check runs a command
/// here, push and alertmanager checks read reports, a prometheus check
/// asks its server (fenced as the probe runs).
fn fenced_ip(instance: &Instance) -> Option<IpAddr> {
    if matches!(
        instance.spec.kind,
        CheckType::Exec | CheckType::Prometheus | CheckType::Push | CheckType::Alertmanager
    ) {
        return None;
    }
    match gtm_health::target_of(instance).host {
        Host::Ip(ip) => Some(ip),
        Host::Name(_) | Host::Resolved(..) => None,
    }
}

/// One probe of `instance` from this device.
async fn probe_here(state: &ApiState, instance: &Instance) -> TestResult {
    let target = gtm_health::target_of(instance);
    let outcome = state
        .prober
        .probe(&gtm_health::probe_spec(instance), &target)
        .await;
    TestResult {
        check: instance.check.to_string(),
        ok: outcome.ok,
        reason: outcome.reason,
        elapsed_ms: outcome.elapsed.as_secs_f64() * 1000.0,
        device: state.engine.device().to_string(),
        datacenter: state.datacenter.clone(),
        address: if instance.spec.kind == CheckType::Exec {
            String::new()
        } else {
            target.host.to_string()
        },
        forwarded: None,
    }
}

/// What a device asked to probe said, when it did not.
enum Failed {
    /// It answered, refusing (the check does not run there, its fence).
    Refused(String),
    /// It could not be reached, or answered nonsense.
    Unreachable(String),
}

/// A Test now this device hands to others.
struct Asked<'a> {
    state: &'a ApiState,
    ask: &'a Probe,
    timeout: Duration,
}

impl Asked<'_> {
    /// A check that runs in datacenter `dc`: probed by a device there.
    async fn in_datacenter(&self, check: &str, dc: &str) -> Result<TestResult, ApiError> {
        let devices = self.members(Some(dc));
        let why = format!("check {check} runs in {dc}");
        if devices.is_empty() {
            return Err(ApiError::new(
                ErrorKind::Unreachable,
                format!(
                    "{why}, and {}: it is probed only there, never from {}",
                    no_device_there(self.state, dc),
                    self.state.engine.device()
                ),
            ));
        }
        let (result, failures) = self.first_of(&devices, &why).await;
        result.ok_or_else(|| {
            let refused_all = failures
                .iter()
                .all(|(_, f)| matches!(f, Failed::Refused(_)));
            ApiError::new(
                if refused_all {
                    ErrorKind::NotProbed
                } else {
                    ErrorKind::Unreachable
                },
                format!(
                    "{why}, and no device of {dc} could probe it: {}",
                    said(&failures)
                ),
            )
        })
    }

    /// An address this device's fence keeps out: probed by another device
    /// where the check may run (of datacenter `dc`, when it names one)
    /// whose fence lets it through.
    async fn past_the_fence(
        &self,
        ip: IpAddr,
        dc: Option<&str>,
        fenced: &gtm_health::probe::Fenced,
    ) -> Result<TestResult, ApiError> {
        let here = self.state.engine.device().to_string();
        let why = format!("on {here}, {fenced}");
        let devices = self.members(dc);
        let (result, mut failures) = self.first_of(&devices, &why).await;
        if let Some(result) = result {
            return Ok(result);
        }
        failures.insert(0, (here, Failed::Refused(fenced.to_string())));
        let others = match dc {
            Some(dc) => format!("no other device of {dc}"),
            None => "no other device".to_string(),
        };
        let unreachable = failures
            .iter()
            .any(|(_, f)| matches!(f, Failed::Unreachable(_)));
        let message = if devices.is_empty() {
            format!(
                "{ip} cannot be probed from anywhere: {}, and {others} is in the cluster",
                said(&failures)
            )
        } else if unreachable {
            format!(
                "{ip} could not be probed from any device: {}",
                said(&failures)
            )
        } else {
            format!("{ip} cannot be probed from anywhere: {}", said(&failures))
        };
        Err(ApiError::new(
            if unreachable {
                ErrorKind::Unreachable
            } else {
                ErrorKind::NotProbed
            },
            message,
        ))
    }

    /// The other members (of datacenter `dc`, when given), those this
    /// device heard from lately first.
    fn members(&self, dc: Option<&str>) -> Vec<MemberStatus> {
        let state = self.state;
        let status = state.replication.status();
        let heard: HashSet<String> = state
            .peers
            .devices(&state.replication)
            .into_iter()
            .filter(|p| p.reachable)
            .map(|p| p.device)
            .collect();
        let mut devices: Vec<MemberStatus> = status
            .members
            .into_iter()
            .filter(|m| m.id != status.id)
            .filter(|m| dc.is_none_or(|dc| m.info.datacenter == dc))
            .collect();
        devices.sort_by_key(|m| !heard.contains(&m.info.name));
        devices
    }

    /// Asks `devices` in turn until one probes; the result (saying `why`
    /// it was not this device), or what each said.
    async fn first_of(
        &self,
        devices: &[MemberStatus],
        why: &str,
    ) -> (Option<TestResult>, Vec<(String, Failed)>) {
        let mut failures = Vec::new();
        for m in devices {
            match self.ask(m).await {
                Ok(mut result) => {
                    if result.device.is_empty() {
                        result.device = m.info.name.clone();
                        result.datacenter = m.info.datacenter.clone();
                    }
                    result.forwarded = Some(why.to_string());
                    return (Some(result), failures);
                }
                Err(failed) => failures.push((m.info.name.clone(), failed)),
            }
        }
        (None, failures)
    }

    /// Asks one device to probe.
    async fn ask(&self, m: &MemberStatus) -> Result<TestResult, Failed> {
        let url = format!("{}/cluster/v1/probe", m.info.api_addr.trim_end_matches('/'));
        let response = self
            .state
            .peer_http
            .post(url)
            .header(SECRET_HEADER, self.state.replication.secret_value())
            .json(self.ask)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| Failed::Unreachable(format!("cannot reach it: {e}")))?;
        let code = response.status();
        if code.is_success() {
            return response
                .json::<TestResult>()
                .await
                .map_err(|e| Failed::Unreachable(format!("its answer does not read: {e}")));
        }
        match response.json::<ApiError>().await {
            Ok(e) if e.error == ErrorKind::NotProbed => Err(Failed::Refused(e.to_string())),
            // A device of an earlier version has no such route.
            Ok(e) if e.message.starts_with("no such route") => Err(Failed::Unreachable(
                "it cannot probe for another device (a device of an earlier version)".into(),
            )),
            Ok(e) => Err(Failed::Unreachable(e.to_string())),
            Err(_) => Err(Failed::Unreachable(format!("it answered {code}"))),
        }
    }
}

/// Why no device of `dc` can be asked: this device is in no cluster, or
/// none of its members is there.
fn no_device_there(state: &ApiState, dc: &str) -> String {
    if state.replication.status().members.is_empty() {
        format!("this device is in no cluster, so no device of {dc} can be asked")
    } else {
        format!("no device of {dc} is a member of the cluster (gtm device list)")
    }
}

/// What each device said, in the order asked.
fn said(failures: &[(String, Failed)]) -> String {
    failures
        .iter()
        .map(|(device, f)| match f {
            Failed::Refused(why) | Failed::Unreachable(why) => format!("{device}: {why}"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}
