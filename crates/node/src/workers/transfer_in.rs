//! The `transfer-in` worker (docs/transfer.md, "Transfer in"): keeps each
//! domain that has a `primary` as its primary serves it.
//!
//! The leader (or a device in no cluster) asks each primary for the zone's
//! SOA serial when the domain has none transferred yet, then every
//! `soa.refresh` seconds (`soa.retry` after a failure); a serial other
//! than the one the configuration keeps starts an AXFR, and the zone is
//! proposed as one [`Action::Transfer`] command, so every device serves
//! what was committed and none transfers for itself. A primary that
//! cannot be asked or transferred from is said in the device's health
//! ([`Failing`], the `zones-in` component) until it can.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::{
    command::{Action, Transferred},
    replication::{ApplyError, Replication},
    workers::Observed,
};
use gtm_dns::{tsig::TsigKeys, xfr_in};
use gtm_engine::Engine;
use gtm_model::{actor::Actor, config::Domain};

/// How often the worker looks for due domains.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// `soa.refresh` and `soa.retry` when the domain sets none (RFC 1912's
/// advice for refresh; retry a fraction of it).
const REFRESH: u32 = 3600;
const RETRY: u32 = 600;

/// The name transfers act as, with the proposing device.
pub const TRANSFER_USER: &str = "transfer-in";

/// The domains whose primary cannot be transferred from now, each with
/// why: what the device's health says.
#[derive(Debug, Default)]
pub struct Failing(Mutex<BTreeMap<String, String>>);

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
    failing: Arc<Failing>,
    stop: tokio_util::sync::CancellationToken,
) {
    // When each domain is due, for the primary it was due with.
    let mut due: HashMap<String, (String, Instant)> = HashMap::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stop.cancelled() => return,
        }
        if !replication.proposes_for_cluster() {
            due.clear();
            failing.keep(|_| false);
            continue;
        }
        let reader = engine.clone();
        let Ok(config) = tokio::task::spawn_blocking(move || reader.config()).await else {
            continue;
        };
        let domains: Vec<&Domain> = config
            .domains
            .iter()
            .filter(|d| d.primary.is_some())
            .map(|d| &**d)
            .collect();
        due.retain(|name, _| domains.iter().any(|d| d.name == *name));
        failing.keep(|name| domains.iter().any(|d| d.name == name));
        let keys = TsigKeys::of(&*replication.state().await);
        for d in domains {
            let Some(primary) = &d.primary else { continue };
            let now = Instant::now();
            if let Some((address, at)) = due.get(&d.name)
                && *address == primary.address
                && now < *at
            {
                continue;
            }
            let soa = d.soa.clone().unwrap_or_default();
            let after = match refresh(&replication, &device, d, &keys).await {
                // Asked again at once: the zone's own timers (the primary's)
                // are in the configuration the transfer made.
                Ok(true) => {
                    failing.set(&d.name, None);
                    1
                }
                Ok(false) => {
                    failing.set(&d.name, None);
                    soa.refresh.unwrap_or(REFRESH)
                }
                Err(why) => {
                    failing.set(&d.name, Some(format!("from {}: {why}", primary.address)));
                    soa.retry.unwrap_or(RETRY)
                }
            };
            let at = now + Duration::from_secs(u64::from(after.max(1)));
            due.insert(d.name.clone(), (primary.address.clone(), at));
        }
    }
}

/// Asks `d`'s primary for its serial, and transfers and proposes the zone
/// when it is not the one the configuration keeps: whether it did.
async fn refresh(
    replication: &Replication,
    device: &str,
    d: &Domain,
    keys: &TsigKeys,
) -> Result<bool, String> {
    let Some(primary) = &d.primary else {
        return Ok(false);
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
    let held = d.records.iter().any(|r| r.is_transferred());
    if primary.serial == Some(serial) && held {
        return Ok(false);
    }
    let transferred = xfr_in::axfr(address, &zone, key.as_ref())
        .await
        .map_err(|e| format!("AXFR: {e}"))?;
    let actor = Actor {
        user: TRANSFER_USER.into(),
        device: device.to_string(),
    };
    let action = Action::Transfer(Box::new(Transferred {
        domain: d.name.clone(),
        primary: primary.address.clone(),
        serial: transferred.serial,
        zone: transferred.text,
    }));
    match replication.propose(actor, None, action).await {
        Ok(_) => {
            tracing::info!(domain = %d.name, serial = transferred.serial, records = transferred.records, "transferred in");
            Ok(true)
        }
        Err(ApplyError::Rejected(e)) => {
            Err(format!("the transferred zone is refused: {}", e.message))
        }
        Err(e) => Err(format!("the transferred zone could not be committed: {e}")),
    }
}
