//! The engine's side of DNSSEC: the keys it signs with, signing again when
//! they change or a new signing window begins, and what `gtm domain dnssec
//! status` shows.

use std::sync::Arc;

use hickory_proto::{
    dnssec::rdata::DNSSECRData,
    rr::{RData, Record},
};
use serde::{Deserialize, Serialize};

use super::Engine;
use gtm_dns::{
    dnssec::{
        keys::{KeyState, Keyring, Published},
        signer::signers,
    },
    snapshot::Snapshot,
};
use gtm_model::clock::now_ms;
use gtm_model::config::KeyAlgorithm;

/// A signed domain's DNSSEC state on this device.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DomainDnssec {
    pub domain: String,
    /// `dnssec = true` in the configuration.
    pub signed: bool,
    /// Signatures are served now (signed, and its key is here).
    pub signing: bool,
    pub keys: Vec<KeyView>,
    /// When the signatures served now expire (ms since the epoch); they are
    /// made again a week before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
    /// During a rollover: the next step and from when it is allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step: Option<NextStep>,
}

/// The next step of a rollover under way.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NextStep {
    /// `swap` or `retire`.
    pub step: String,
    /// Allowed from (ms since the epoch).
    pub from_ms: u64,
    /// What to do at the parent first.
    pub parent: String,
}

/// A key as operators see it: never its private part.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KeyView {
    pub tag: u16,
    /// IANA number: 13 (ECDSA P-256) or 15 (Ed25519).
    pub algorithm: u8,
    pub created_ms: u64,
    /// `active` (signs the zone), `published` (in the DNSKEY set, not
    /// signing yet) or `retired` (no longer signing, leaving).
    pub state: String,
    /// The DNSKEY record, in zone-file form.
    pub dnskey: String,
    /// The DS record (SHA-256) for the parent zone, in zone-file form.
    pub ds: String,
}

impl Engine {
    /// The keys installed last.
    pub(super) fn keys(&self) -> Keyring {
        self.keys.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Installs the replicated keys; the answers are signed again when
    /// they changed.
    pub fn set_keys(&self, keys: Keyring) {
        if self.hold_keys(keys) {
            self.resign();
        }
    }

    /// Holds the replicated keys for the next build of the answers (an
    /// install of a configuration signs with them) without signing the
    /// answers served again; false when they are the keys held already.
    pub fn hold_keys(&self, keys: Keyring) -> bool {
        let mut held = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if *held == keys {
            return false;
        }
        *held = keys;
        true
    }

    /// Builds the answers again with the keys installed and the signing
    /// window of now, keeping every record's current answer. DNS answers
    /// from the previous snapshot meanwhile.
    pub fn resign(&self) {
        self.resign_at(now_ms() / 1000);
    }

    /// [`Engine::resign`] for the signing window of `now_secs` (seconds
    /// since the epoch): what the `dnssec` worker does when a week begins.
    pub fn resign_at(&self, now_secs: u64) {
        let _applying = self.applying.lock().unwrap_or_else(|e| e.into_inner());
        let compiled = self.lock().compiled.clone();
        let signers = signers(&compiled, &self.keys(), now_secs);
        let serving = self.dns.snapshot.load();
        let snapshot = match Snapshot::build(
            &compiled,
            &serving,
            None,
            &signers,
            &serving.serials(),
        ) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot sign the answers again; the previous ones stay");
                return;
            }
        };
        let inner = self.lock();
        // An answer made with the same signer (an unsigned zone's) stays.
        let records = snapshot.steered_slots().zip(inner.records.iter());
        super::store_steered(
            records.map(|(slot, r)| ((slot, &**r), super::Kept::Answer)),
            &self.dns.snapshot.load(),
        );
        self.dns.snapshot.store(Arc::new(snapshot));
        drop(inner);
        tracing::info!(zones = signers.iter().flatten().count(), "answers signed");
    }

    /// The signing window of the answers served, when a zone is signed.
    pub fn signing_window(&self) -> Option<u64> {
        self.dns
            .snapshot
            .load()
            .zones
            .iter()
            .find_map(|z| z.signer.as_ref().map(|s| s.window))
    }

    /// The signed domains of the configuration (lower-case, no final dot)
    /// with the algorithm of a key made for them.
    pub fn signed_zones(&self) -> Vec<(String, KeyAlgorithm)> {
        self.lock()
            .compiled
            .zones
            .iter()
            .filter_map(|z| {
                let name = z.apex.to_string();
                Some((name.trim_end_matches('.').to_string(), z.dnssec?))
            })
            .collect()
    }

    /// The DNSSEC state of a domain; `None` when there is no such domain.
    pub fn domain_dnssec(&self, domain: &str) -> Option<DomainDnssec> {
        let wanted = domain.trim_end_matches('.').to_ascii_lowercase();
        let (apex, signed, dnskey_ttl, longest_ttl) = {
            let inner = self.lock();
            let zone = inner.compiled.zones.iter().find(|z| {
                z.apex
                    .to_string()
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(&wanted)
            })?;
            let longest = zone
                .records
                .iter()
                .map(|r| r.ttl)
                .chain([zone.soa_ttl, zone.ns_ttl])
                .max()
                .unwrap_or(0);
            (
                zone.apex.clone(),
                zone.dnssec.is_some(),
                u64::from(zone.soa_ttl),
                u64::from(longest),
            )
        };
        let snapshot = self.dns.snapshot.load();
        let signer = snapshot
            .zones
            .iter()
            .find(|z| z.apex == apex)
            .and_then(|z| z.signer.clone());
        let zone_keys = self.keys().get(&wanted).cloned().unwrap_or_default();
        let next_step = if let Some(k) = zone_keys.in_state(KeyState::Published) {
            Some(NextStep {
                step: "swap".into(),
                from_ms: k.since_ms + dnskey_ttl * 1000,
                parent: "add the new key's DS at the parent, and wait the parent's DS TTL".into(),
            })
        } else {
            zone_keys.in_state(KeyState::Retired).map(|k| NextStep {
                step: "retire".into(),
                from_ms: k.since_ms + longest_ttl * 1000,
                parent: "remove the old key's DS from the parent".into(),
            })
        };
        let keys = zone_keys
            .keys
            .iter()
            .filter_map(|zk| {
                let key = &zk.key;
                let p = Published::of(key, &apex).ok()?;
                let line = |data: DNSSECRData| {
                    Record::from_rdata(apex.clone(), 3600, RData::DNSSEC(data)).to_string()
                };
                Some(KeyView {
                    tag: p.tag,
                    algorithm: key.algorithm.number(),
                    created_ms: key.created_ms,
                    state: zk.state.as_str().into(),
                    dnskey: line(DNSSECRData::DNSKEY(p.dnskey.clone())),
                    ds: line(DNSSECRData::DS(p.ds.clone())),
                })
            })
            .collect();
        Some(DomainDnssec {
            domain: wanted,
            signed,
            signing: signer.is_some(),
            keys,
            expires_ms: signer.map(|s| s.expires_secs() * 1000),
            next_step,
        })
    }
}
