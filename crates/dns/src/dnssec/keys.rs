//! Zone keys: made once per signed domain by the device that proposes
//! them, kept in the replicated map, the same bytes on every device.
//!
//! Key `dnssec/<domain>` of the map (the domain lower-case, without its
//! final dot): JSON [`ZoneKeys`]. A key is secret: it is never logged, its
//! `Debug` shows only its tag, and its bytes are wiped when dropped.

use std::collections::BTreeMap;

use hickory_proto::{
    dnssec::{
        Algorithm, DigestType, PublicKey, SigningKey,
        crypto::{EcdsaSigningKey, Ed25519SigningKey},
        rdata::{CDNSKEY, CDS, DNSKEY, DS},
    },
    rr::Name,
};
use rustls_pki_types::PrivatePkcs8KeyDer;
use serde::{Deserialize, Serialize};

use gtm_model::config::KeyAlgorithm;

/// The prefix of the map keys holding zone keys.
pub const KEY_PREFIX: &str = "dnssec/";

/// The map key of a domain's keys.
pub fn map_key(domain: &str) -> String {
    format!(
        "{KEY_PREFIX}{}",
        domain.trim_end_matches('.').to_ascii_lowercase()
    )
}

/// A private key as the cluster keeps it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyMaterial {
    pub algorithm: KeyAlgorithm,
    /// The private key, PKCS #8 DER.
    pub pkcs8: Vec<u8>,
    /// When it was made (ms since the epoch).
    pub created_ms: u64,
}

impl std::fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tag = self.dnskey().ok().and_then(|k| k.calculate_key_tag().ok());
        f.debug_struct("KeyMaterial")
            .field("algorithm", &self.algorithm)
            .field("tag", &tag)
            .field("created_ms", &self.created_ms)
            .finish_non_exhaustive()
    }
}

impl Drop for KeyMaterial {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.pkcs8);
    }
}

/// Why a key cannot be made or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DNSSEC key: {0}")]
pub struct KeyError(String);

impl KeyMaterial {
    /// A new key of `algorithm`, made now.
    pub fn generate(algorithm: KeyAlgorithm, created_ms: u64) -> Result<Self, KeyError> {
        let der = match algorithm {
            KeyAlgorithm::Ecdsap256sha256 => {
                EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256)
            }
            KeyAlgorithm::Ed25519 => Ed25519SigningKey::generate_pkcs8(),
        }
        .map_err(|e| KeyError(format!("cannot make a key: {e}")))?;
        Ok(Self {
            algorithm,
            pkcs8: der.secret_pkcs8_der().to_vec(),
            created_ms,
        })
    }

    /// The key, ready to sign. Fails for bytes that are not a key of its
    /// algorithm (a damaged store).
    pub fn signing_key(&self) -> Result<Box<dyn SigningKey>, KeyError> {
        let der = PrivatePkcs8KeyDer::from(self.pkcs8.as_slice());
        let key: Box<dyn SigningKey> = match self.algorithm {
            KeyAlgorithm::Ecdsap256sha256 => Box::new(
                EcdsaSigningKey::from_pkcs8(&der, Algorithm::ECDSAP256SHA256)
                    .map_err(|e| KeyError(format!("the stored key does not read: {e}")))?,
            ),
            KeyAlgorithm::Ed25519 => Box::new(
                Ed25519SigningKey::from_pkcs8(&der)
                    .map_err(|e| KeyError(format!("the stored key does not read: {e}")))?,
            ),
        };
        Ok(key)
    }

    /// Its DNSKEY: flags 257 (zone key, secure entry point), as a combined
    /// key is published.
    pub fn dnskey(&self) -> Result<DNSKEY, KeyError> {
        let public = self
            .signing_key()?
            .to_public_key()
            .map_err(|e| KeyError(format!("no public key: {e}")))?;
        Ok(DNSKEY::from_key(&public))
    }
}

/// What the parent and the child's CDS/CDNSKEY publish for a key.
#[derive(Debug, Clone)]
pub struct Published {
    pub dnskey: DNSKEY,
    pub tag: u16,
    /// SHA-256 DS for the parent.
    pub ds: DS,
    pub cds: CDS,
    pub cdnskey: CDNSKEY,
}

impl Published {
    pub fn of(key: &KeyMaterial, apex: &Name) -> Result<Self, KeyError> {
        let dnskey = key.dnskey()?;
        let tag = dnskey
            .calculate_key_tag()
            .map_err(|e| KeyError(format!("no key tag: {e}")))?;
        let digest = dnskey
            .to_digest(apex, DigestType::SHA256)
            .map_err(|e| KeyError(format!("no digest: {e}")))?
            .as_ref()
            .to_vec();
        let algorithm = dnskey.public_key().algorithm();
        Ok(Self {
            ds: DS::new(tag, algorithm, DigestType::SHA256, digest.clone()),
            cds: CDS::new(tag, Some(algorithm), DigestType::SHA256, digest),
            cdnskey: CDNSKEY::new(
                dnskey.zone_key(),
                dnskey.secure_entry_point(),
                dnskey.revoke(),
                Some(algorithm),
                dnskey.public_key().public_bytes().to_vec(),
            ),
            dnskey,
            tag,
        })
    }
}

/// Where a key is in its life (docs/dnssec.md, "Key rollover").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyState {
    /// In the DNSKEY set and CDS/CDNSKEY, not signing yet: the parent can
    /// add its DS, caches learn it.
    Published,
    /// Signs the zone.
    Active,
    /// Signed until the swap; still in the DNSKEY set so signatures
    /// cached from before validate, until it is removed.
    Retired,
}

impl KeyState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Published => "published",
            Self::Active => "active",
            Self::Retired => "retired",
        }
    }
}

/// A key of a domain, and since when it is in its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneKey {
    pub key: KeyMaterial,
    pub state: KeyState,
    /// When it entered `state` (ms since the epoch, the command's time).
    pub since_ms: u64,
}

/// The keys of one domain: one active key, and during a rollover the key
/// published before it signs or the one retired after.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneKeys {
    pub keys: Vec<ZoneKey>,
}

impl ZoneKeys {
    /// A domain's first key, active.
    pub fn first(key: KeyMaterial, since_ms: u64) -> Self {
        Self {
            keys: vec![ZoneKey {
                key,
                state: KeyState::Active,
                since_ms,
            }],
        }
    }

    /// The key that signs.
    pub fn active(&self) -> Option<&KeyMaterial> {
        self.in_state(KeyState::Active).map(|k| &k.key)
    }

    pub fn in_state(&self, state: KeyState) -> Option<&ZoneKey> {
        self.keys.iter().find(|k| k.state == state)
    }

    /// The keys CDS and CDNSKEY name for the parent: the active one, and a
    /// published one (whose DS the parent should add). A retired key's DS
    /// should leave the parent, so it is not named.
    pub fn for_parent(&self) -> impl Iterator<Item = &KeyMaterial> {
        self.keys
            .iter()
            .filter(|k| k.state != KeyState::Retired)
            .map(|k| &k.key)
    }
}

/// Every domain's keys, by domain (lower-case, no final dot).
pub type Keyring = BTreeMap<String, ZoneKeys>;

/// The keys kept in a map. Entries that do not read are left out (and the
/// zone answers unsigned, which `gtm domain dnssec status` shows).
pub fn keyring_of(kv: &gtm_cluster::Map) -> Keyring {
    kv.range(KEY_PREFIX.to_string()..)
        .take_while(|(k, _)| k.starts_with(KEY_PREFIX))
        .filter_map(|(k, v)| {
            let keys: ZoneKeys = serde_json::from_slice(v).ok()?;
            Some((k[KEY_PREFIX.len()..].to_string(), keys))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_made_read_back_and_published_with_their_ds() {
        for algorithm in [KeyAlgorithm::Ecdsap256sha256, KeyAlgorithm::Ed25519] {
            let key = KeyMaterial::generate(algorithm, 1).unwrap();
            let apex = Name::from_ascii("example.test.").unwrap();
            let published = Published::of(&key, &apex).unwrap();
            assert_eq!(published.dnskey.flags(), 257);
            assert_eq!(
                u8::from(published.dnskey.public_key().algorithm()),
                algorithm.number(),
                "{algorithm:?}"
            );
            assert_eq!(published.ds.key_tag(), published.tag);
            assert!(published.ds.covers(&apex, &published.dnskey).unwrap());
            // Another key has another tag (with overwhelming likelihood)
            // and the stored bytes sign again after a round trip.
            let json = serde_json::to_vec(&ZoneKeys::first(key.clone(), 1)).unwrap();
            let back: ZoneKeys = serde_json::from_slice(&json).unwrap();
            assert_eq!(
                Published::of(back.active().unwrap(), &apex).unwrap().tag,
                published.tag
            );
            assert!(!format!("{key:?}").contains(&format!("{:?}", &key.pkcs8[..8])));
        }
    }

    #[test]
    fn damaged_key_bytes_are_an_error_not_a_panic() {
        let mut key = KeyMaterial::generate(KeyAlgorithm::Ecdsap256sha256, 1).unwrap();
        key.pkcs8.truncate(10);
        assert!(key.signing_key().is_err());
        let mut map = gtm_cluster::Map::new();
        map.insert(
            map_key("Example.Test."),
            gtm_cluster::Value::from_static(b"not json"),
        );
        assert!(keyring_of(&map).is_empty());
    }
}
