//! The `transfer-in` worker (docs/transfer.md, "Transfer in"): keeps each
//! domain that has a `primary` as its primary serves it.
//!
//! The leader (or a device in no cluster) asks each primary for the zone's
//! SOA serial when the domain has none transferred yet, then every
//! `soa.refresh` seconds (`soa.retry` after a failure); a device of any
//! role asks at once when the primary sends it a NOTIFY ([`TransferIn`]
//! takes them from the DNS layer). A serial newer than the one the
//! configuration keeps (RFC 1982) starts a transfer: IXFR from the zone
//! this device transferred last, when it holds it at that serial, else
//! AXFR. The zone is proposed as one [`Action::Transfer`] command, so
//! every device serves what was committed. A primary that cannot be asked
//! or transferred from is said in the device's health (the `zones-in`
//! component) until it can.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
    sync::{Arc, Mutex, Weak},
    time::{Duration, Instant},
};

use crate::{
    command::{Action, Transferred},
    replication::{ApplyError, Replication},
    workers::Observed,
};
use gtm_dns::{
    notify_in::{Refusal, Secondary},
    tsig::TsigKeys,
    xfr_in::{self, How, Zone},
};
use gtm_engine::Engine;
use gtm_model::{actor::Actor, config::Domain};

/// How often the worker looks for due domains, and the least time between
/// two looks.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// `soa.refresh` and `soa.retry` when the domain sets none (RFC 1912's
/// advice for refresh; retry a fraction of it).
const REFRESH: u32 = 3600;
const RETRY: u32 = 600;

/// The name transfers act as, with the proposing device.
pub const TRANSFER_USER: &str = "transfer-in";

/// What this device last did for one domain with a primary: `gtm status`
/// (per device: a follower asks only when a NOTIFY reaches it).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct TransferInStatus {
    pub domain: String,
    /// The primary's address, as configured.
    pub primary: String,
    /// The serial the primary last answered this device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u32>,
    /// When this device last asked the primary (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_ms: Option<u64>,
    /// When this device last transferred the zone (ms since the epoch),
    /// and how: `IXFR` or `AXFR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transferred_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
    /// Why the last ask or transfer failed, while it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the worker keeps across its restarts, and what takes the NOTIFYs
/// the DNS layer receives.
#[derive(Debug)]
pub struct TransferIn {
    /// Weak: the DNS state that holds this is held by the engine.
    engine: Weak<Engine>,
    failing: Failing,
    /// What this device last did per domain.
    seen: Mutex<BTreeMap<String, TransferInStatus>>,
    /// The domains a NOTIFY named since the worker last looked.
    notified: Mutex<BTreeSet<String>>,
    wake: tokio::sync::Notify,
    /// The zone this device transferred last for each domain, with the
    /// primary it came from: what an IXFR is applied to.
    held: Mutex<HashMap<String, (String, Arc<Zone>)>>,
}

impl TransferIn {
    pub fn new(engine: &Arc<Engine>) -> Self {
        Self {
            engine: Arc::downgrade(engine),
            failing: Failing::default(),
            seen: Mutex::default(),
            notified: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            held: Mutex::default(),
        }
    }

    /// The `zones-in` component's state.
    pub fn observed(&self) -> Observed {
        self.failing.observed()
    }

    /// What this device last did for each domain with a primary.
    pub fn status(&self) -> Vec<TransferInStatus> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.values().cloned().collect()
    }

    /// Notes an ask of `d`'s primary and what came of it.
    fn note(&self, d: &Domain, primary: &str, outcome: &Result<Asked, String>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = || TransferInStatus {
            domain: d.name.clone(),
            primary: primary.to_string(),
            ..TransferInStatus::default()
        };
        let s = seen.entry(d.name.clone()).or_insert_with(fresh);
        // Another primary: nothing said of the one before holds.
        if s.primary != primary {
            *s = fresh();
        }
        let now = gtm_model::clock::now_ms();
        s.asked_ms = Some(now);
        match outcome {
            Ok(asked) => {
                s.error = None;
                s.serial = asked.serial.or(s.serial);
                if let Some((_, how)) = &asked.transferred {
                    s.transferred_ms = Some(now);
                    s.how = Some(how.as_str().to_string());
                }
            }
            Err(why) => s.error = Some(why.clone()),
        }
    }

    /// Keeps what it says of the domains `keep` names only.
    fn keep(&self, keep: impl Fn(&str) -> bool) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|d, _| keep(d));
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|d, _| keep(d));
    }

    fn take_notified(&self) -> BTreeSet<String> {
        std::mem::take(&mut *self.notified.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The zone held for `domain` at `serial` from `primary`.
    fn held(&self, domain: &str, primary: &str, serial: Option<u32>) -> Option<Arc<Zone>> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let (from, zone) = held.get(domain)?;
        (from == primary && Some(zone.serial) == serial).then(|| zone.clone())
    }

    fn hold(&self, domain: &str, primary: &str, zone: Arc<Zone>) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(domain.to_string(), (primary.to_string(), zone));
    }
}

impl Secondary for TransferIn {
    fn notified(&self, zone: &str, from: IpAddr, key: Option<&str>) -> Result<(), Refusal> {
        let engine = self.engine.upgrade().ok_or(Refusal::NotServed)?;
        let config = engine.config();
        let domain = &config.domains[config.domain_index(zone).ok_or(Refusal::NotServed)?];
        let primary = domain.primary.as_ref().ok_or(Refusal::NoPrimary)?;
        let address =
            gtm_model::compile::socket_address(&primary.address).ok_or(Refusal::NotFromPrimary)?;
        if address.ip() != from {
            return Err(Refusal::NotFromPrimary);
        }
        if let Some(wanted) = &primary.key
            && key != Some(wanted.as_str())
        {
            return Err(Refusal::NotSigned);
        }
        // At most one mark per domain with a primary: bounded.
        self.notified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(domain.name.clone());
        self.wake.notify_one();
        Ok(())
    }
}

/// The domains whose primary cannot be transferred from now, each with
/// why: what the device's health says.
#[derive(Debug, Default)]
struct Failing(Mutex<BTreeMap<String, String>>);

impl Failing {
    /// The component's state: failed while a domain's transfer is.
    pub fn observed(&self) -> Observed {
        let failing = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if failing.is_empty() {
            return Observed::running();
        }
        let said: Vec<String> = failing
            .iter()
            .map(|(domain, why)| format!("{domain}: {why}"))
            .collect();
        Observed::failed(said.join("; "))
    }

    fn set(&self, domain: &str, why: Option<String>) {
        let mut failing = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match why {
            Some(why) => {
                if failing.get(domain) != Some(&why) {
                    tracing::warn!(%domain, error = %why, "a transfer in failed; trying again after soa.retry");
                }
                failing.insert(domain.to_string(), why);
            }
            None => {
                failing.remove(domain);
            }
        }
    }

    fn keep(&self, keep: impl Fn(&str) -> bool) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|d, _| keep(d));
    }
}

/// Runs until `stop`.
pub async fn run(
    replication: Arc<Replication>,
    engine: Arc<Engine>,
    device: String,
    shared: Arc<TransferIn>,
    stop: tokio_util::sync::CancellationToken,
) {
    let failing = &shared.failing;
    // When each domain is due, for the primary and the kept serial it was
    // due with: another primary, or a configuration that went back from
    // that serial (applied without the transferred records, or rolled
    // back), is due now.
    let mut due: HashMap<String, Due> = HashMap::new();
    let mut looked = Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = shared.wake.notified() => {}
            () = stop.cancelled() => return,
        }
        // At most one look a second, however many NOTIFYs come: each asks
        // every noticed primary for its serial once.
        let early = LOOK_EVERY.saturating_sub(looked.elapsed());
        if !early.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(early) => {}
                () = stop.cancelled() => return,
            }
        }
        looked = Instant::now();
        let notified = shared.take_notified();
        let leads = replication.proposes_for_cluster();
        if !leads {
            due.clear();
            failing.keep(|_| false);
            if notified.is_empty() {
                continue;
            }
        }
        let config = engine.config();
        let domains: Vec<&Domain> = config
            .domains
            .iter()
            .filter(|d| d.primary.is_some())
            .map(|d| &**d)
            .collect();
        due.retain(|name, _| domains.iter().any(|d| d.name == *name));
        failing.keep(|name| domains.iter().any(|d| d.name == name));
        shared.keep(|name| domains.iter().any(|d| d.name == name));
        let keys = TsigKeys::of(&*replication.state().await);
        for d in domains {
            let Some(primary) = &d.primary else { continue };
            let now = Instant::now();
            let noticed = notified.contains(&d.name);
            let kept = kept_serial(d);
            if !noticed
                && (!leads
                    || due.get(&d.name).is_some_and(|due| {
                        due.address == primary.address && !behind(kept, due.kept) && now < due.at
                    }))
            {
                continue;
            }
            let soa = d.soa.clone().unwrap_or_default();
            let outcome = refresh(&replication, &shared, &device, d, &keys).await;
            shared.note(d, &primary.address, &outcome);
            let (after, kept) = match outcome {
                // Transferred: asked again at the refresh of the SOA it
                // brought (the configuration's timers are the zone's now),
                // the serial it brought kept.
                Ok(Asked {
                    transferred: Some((zone, _)),
                    ..
                }) => {
                    failing.set(&d.name, None);
                    (zone.refresh, Some(zone.serial))
                }
                Ok(Asked { .. }) => {
                    failing.set(&d.name, None);
                    (soa.refresh.unwrap_or(REFRESH), kept)
                }
                Err(why) => {
                    failing.set(&d.name, Some(format!("from {}: {why}", primary.address)));
                    (soa.retry.unwrap_or(RETRY), kept)
                }
            };
            let at = now + Duration::from_secs(u64::from(after.max(1)));
            let address = primary.address.clone();
            due.insert(d.name.clone(), Due { address, kept, at });
        }
    }
}

/// When a domain is next asked for, and what it was asked with.
struct Due {
    address: String,
    kept: Option<u32>,
    at: Instant,
}

/// The primary's serial `d`'s configuration keeps, when it holds the
/// records transferred at it.
fn kept_serial(d: &Domain) -> Option<u32> {
    d.primary
        .as_ref()
        .and_then(|p| p.serial)
        .filter(|_| d.records.iter().any(|r| r.is_transferred()))
}

/// Whether the kept serial `kept` is behind `then` (none is behind any).
/// A serial ahead was transferred by another device: nothing to do.
fn behind(kept: Option<u32>, then: Option<u32>) -> bool {
    use hickory_proto::rr::SerialNumber;
    match (kept, then) {
        (None, Some(_)) => true,
        (Some(k), Some(t)) => SerialNumber::new(k) < SerialNumber::new(t),
        _ => false,
    }
}

/// What asking a primary came to.
#[derive(Debug, Default)]
struct Asked {
    /// The serial it answered.
    serial: Option<u32>,
    /// The zone transferred and committed, and how it came.
    transferred: Option<(Arc<Zone>, How)>,
}

/// Asks `d`'s primary for its serial, and transfers and proposes the zone
/// when it is newer than the one the configuration keeps.
async fn refresh(
    replication: &Replication,
    shared: &TransferIn,
    device: &str,
    d: &Domain,
    keys: &TsigKeys,
) -> Result<Asked, String> {
    let Some(primary) = &d.primary else {
        return Ok(Asked::default());
    };
    let address = gtm_model::compile::socket_address(&primary.address)
        .ok_or_else(|| format!("address {:?} does not read", primary.address))?;
    let key = match &primary.key {
        None => None,
        Some(name) => Some(
            gtm_dns::tsig::signer_for(keys, name)
                .ok_or_else(|| format!("the cluster has no TSIG key \"{name}\""))?,
        ),
    };
    let zone = hickory_proto::rr::Name::from_ascii(format!("{}.", d.name.trim_end_matches('.')))
        .map_err(|e| format!("{}: {e}", d.name))?;
    let serial = xfr_in::serial(address, &zone, key.as_ref())
        .await
        .map_err(|e| format!("SOA query: {e}"))?;
    let kept = kept_serial(d);
    if let Some(kept) = kept {
        if serial == kept {
            return Ok(Asked {
                serial: Some(serial),
                ..Asked::default()
            });
        }
        if behind(Some(serial), Some(kept)) {
            return Err(format!(
                "its serial {serial} is older than the transferred {kept}: \
                 a secondary follows newer serials only (RFC 1982)"
            ));
        }
    }
    let held = shared.held(&d.name, &primary.address, kept);
    let (transferred, how) =
        xfr_in::transfer(address, &zone, key.as_ref(), held.as_deref()).await?;
    if how == How::Current {
        return Ok(Asked {
            serial: Some(serial),
            ..Asked::default()
        });
    }
    let transferred = Arc::new(transferred);
    let actor = Actor {
        user: TRANSFER_USER.into(),
        device: device.to_string(),
    };
    let action = Action::Transfer(Box::new(Transferred {
        domain: d.name.clone(),
        primary: primary.address.clone(),
        serial: transferred.serial,
        zone: transferred.text.clone(),
    }));
    match replication.propose(actor, None, action).await {
        Ok(_) => {
            tracing::info!(domain = %d.name, serial = transferred.serial, how = how.as_str(), records = transferred.records, "transferred in");
            shared.hold(&d.name, &primary.address, transferred.clone());
            Ok(Asked {
                serial: Some(transferred.serial),
                transferred: Some((transferred, how)),
            })
        }
        Err(ApplyError::Rejected(e)) => {
            Err(format!("the transferred zone is refused: {}", e.message))
        }
        Err(e) => Err(format!("the transferred zone could not be committed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::behind;

    #[test]
    fn a_kept_serial_is_behind_when_dropped_or_older_and_not_when_ahead() {
        assert!(behind(None, Some(3)));
        assert!(behind(Some(2), Some(3)));
        // RFC 1982: 4294967295 is before 2.
        assert!(behind(Some(u32::MAX), Some(2)));
        assert!(!behind(Some(3), Some(3)));
        assert!(
            !behind(Some(4), Some(3)),
            "another device transferred a newer one"
        );
        assert!(!behind(Some(2), Some(u32::MAX)));
        assert!(!behind(None, None));
        assert!(!behind(Some(1), None));
    }
}
