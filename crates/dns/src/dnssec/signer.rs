//! Online signing of one zone: RRSIGs over exactly the records answered,
//! and compact denial of existence (RFC 9824).
//!
//! Signatures are made where answers are built (with the snapshot, and
//! when a health change rebuilds one record's answer), never on a DNS
//! thread, except for what cannot be known in advance: the NSEC of a name
//! that does not exist, and a wildcard's expansion.
//!
//! Validity windows are the same on every device: time is cut in weeks
//! since the epoch, and a signature made in week `w` is valid from an hour
//! before the week starts (clock skew) to two weeks after it starts. The
//! re-sign worker rebuilds the answers when a week begins, so every
//! signature served has at least a week left.

use std::sync::Arc;

use hickory_proto::{
    dnssec::{
        SigningKey, TBS,
        rdata::{DNSKEY, DNSSECRData, NSEC, RRSIG, SigInput},
    },
    rr::{DNSClass, Name, RData, Record, RecordType, SerialNumber, domain::Label},
};

use super::keys::{KeyError, Keyring, Published, ZoneKeys};
use gtm_model::compile::Compiled;

/// The length of a signing window (a week), in seconds.
pub const WINDOW_SECS: u64 = 7 * 24 * 3600;
/// How long before a window starts its signatures are valid.
const SKEW_SECS: u64 = 3600;
/// How long after a window starts its signatures are valid.
const VALIDITY_SECS: u64 = 2 * WINDOW_SECS;

/// NXNAME (RFC 9824): in the type bitmap of the NSEC that denies a name.
pub const NXNAME: RecordType = RecordType::Unknown(128);

/// The signing window of a time (seconds since the epoch).
pub fn window_of(now_secs: u64) -> u64 {
    now_secs / WINDOW_SECS
}

/// Signs the records of one zone with its active key.
pub struct ZoneSigner {
    apex: Name,
    key: Box<dyn SigningKey>,
    /// The active key's records.
    published: Published,
    /// Every key in the DNSKEY set (active, published, retired).
    dnskeys: Vec<DNSKEY>,
    /// The keys CDS/CDNSKEY name for the parent.
    parent: Vec<Published>,
    /// The window the signatures are made for.
    pub window: u64,
}

impl std::fmt::Debug for ZoneSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneSigner")
            .field("apex", &self.apex)
            .field("tag", &self.published.tag)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// Why an answer cannot be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signing {what}: {message}")]
pub struct SignError {
    pub what: String,
    pub message: String,
}

impl SignError {
    fn new(owner: &Name, rtype: RecordType, message: impl std::fmt::Display) -> Self {
        Self {
            what: format!("{}/{rtype}", owner.to_string().trim_end_matches('.')),
            message: message.to_string(),
        }
    }
}

impl ZoneSigner {
    /// The signer of zone `apex` with its active key, for the window of
    /// `now_secs`; `None` without an active key.
    pub fn new(apex: &Name, keys: &ZoneKeys, now_secs: u64) -> Result<Option<Self>, KeyError> {
        let Some(key) = keys.active() else {
            return Ok(None);
        };
        let dnskeys = keys
            .keys
            .iter()
            .map(|k| k.key.dnskey())
            .collect::<Result<_, _>>()?;
        let parent = keys
            .for_parent()
            .map(|k| Published::of(k, apex))
            .collect::<Result<_, _>>()?;
        Ok(Some(Self {
            apex: apex.clone(),
            key: key.signing_key()?,
            published: Published::of(key, apex)?,
            dnskeys,
            parent,
            window: window_of(now_secs),
        }))
    }

    /// The keys CDS and CDNSKEY name.
    pub fn for_parent(&self) -> &[Published] {
        &self.parent
    }

    /// When the signatures of this window expire (seconds since the epoch).
    pub fn expires_secs(&self) -> u64 {
        self.window * WINDOW_SECS + VALIDITY_SECS
    }

    pub fn published(&self) -> &Published {
        &self.published
    }

    /// The zone's DNSKEY RRset data.
    pub fn dnskeys(&self) -> Vec<DNSKEY> {
        self.dnskeys.clone()
    }

    /// The RRSIG over `records` (one RRset: the same owner, type and TTL;
    /// in any order), valid for this signer's window. `owner` is the name
    /// the records are answered under.
    pub fn sign(&self, records: &[Record]) -> Result<Record, SignError> {
        let Some(first) = records.first() else {
            return Err(SignError {
                what: "an empty RRset".into(),
                message: "nothing to sign".into(),
            });
        };
        let (owner, rtype, ttl) = (first.name.clone(), first.record_type(), first.ttl);
        let start = self.window * WINDOW_SECS;
        let input = SigInput {
            type_covered: rtype,
            algorithm: self.key.algorithm(),
            num_labels: owner.num_labels(),
            original_ttl: ttl,
            // RFC 4034 §3.1.5: 32-bit serial arithmetic on seconds.
            sig_expiration: SerialNumber::new((start + VALIDITY_SECS) as u32),
            sig_inception: SerialNumber::new(start.saturating_sub(SKEW_SECS) as u32),
            key_tag: self.published.tag,
            signer_name: self.apex.clone(),
        };
        let tbs = TBS::from_input(&owner, DNSClass::IN, &input, records.iter())
            .map_err(|e| SignError::new(&owner, rtype, e))?;
        let sig = self
            .key
            .sign(&tbs)
            .map_err(|e| SignError::new(&owner, rtype, e))?;
        Ok(Record::from_rdata(
            owner,
            ttl,
            RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(input, sig))),
        ))
    }

    /// The NSEC of compact denial for `owner` (RFC 9824): next name
    /// `\000.owner`, so it covers no other name; `types` are the types the
    /// name has (for a name that does not exist: only NXNAME). RRSIG and
    /// NSEC are added. `ttl`: the zone's negative TTL.
    pub fn nsec(&self, owner: &Name, types: &[RecordType], ttl: u32) -> Result<Record, SignError> {
        let next = Label::from_raw_bytes(b"\0")
            .and_then(|l| owner.prepend_label(l))
            .map_err(|e| SignError::new(owner, RecordType::NSEC, e))?;
        let nsec = NSEC::new_cover_self(next, types.iter().copied());
        Ok(Record::from_rdata(
            owner.clone(),
            ttl,
            RData::DNSSEC(DNSSECRData::NSEC(nsec)),
        ))
    }

    /// The authority section of a signed negative answer for `owner`: the
    /// zone's negative SOA with its RRSIG, and the NSEC denying `types`
    /// beyond those the name has (`has`) with its RRSIG.
    pub fn denial(
        &self,
        negative_soa: &Record,
        soa_sig: &Record,
        owner: &Name,
        has: &[RecordType],
    ) -> Result<[Record; 4], SignError> {
        let nsec = self.nsec(owner, has, negative_soa.ttl)?;
        let nsec_sig = self.sign(std::slice::from_ref(&nsec))?;
        Ok([negative_soa.clone(), soa_sig.clone(), nsec, nsec_sig])
    }
}

/// The signer of each zone of `compiled` that is signed and has a key, in
/// zone order, for the window of `now_secs`. A key that does not read
/// leaves its zone unsigned (logged).
pub fn signers(compiled: &Compiled, keys: &Keyring, now_secs: u64) -> Vec<Option<Arc<ZoneSigner>>> {
    compiled
        .zones
        .iter()
        .map(|zone| {
            zone.dnssec?;
            let domain = zone.apex.to_string();
            let domain = domain.trim_end_matches('.');
            match ZoneSigner::new(&zone.apex, keys.get(domain)?, now_secs) {
                Ok(s) => s.map(Arc::new),
                Err(e) => {
                    tracing::error!(domain, error = %e, "the zone's key cannot sign: the zone is answered unsigned");
                    None
                }
            }
        })
        .collect()
}

/// The apex record sets a signed zone adds: DNSKEY, and CDS and CDNSKEY
/// for the parent (RFC 7344); the zone gives them its SOA TTL.
pub fn apex_records(signer: &ZoneSigner) -> Vec<(RecordType, Vec<RData>)> {
    let record = RData::DNSSEC;
    vec![
        (
            RecordType::DNSKEY,
            signer
                .dnskeys()
                .into_iter()
                .map(|k| record(DNSSECRData::DNSKEY(k)))
                .collect(),
        ),
        (
            RecordType::CDS,
            signer
                .for_parent()
                .iter()
                .map(|p| record(DNSSECRData::CDS(p.cds.clone())))
                .collect(),
        ),
        (
            RecordType::CDNSKEY,
            signer
                .for_parent()
                .iter()
                .map(|p| record(DNSSECRData::CDNSKEY(p.cdnskey.clone())))
                .collect(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_model::config::KeyAlgorithm;
    use hickory_proto::{dnssec::PublicKey, rr::rdata::A};

    fn signer(algorithm: KeyAlgorithm) -> ZoneSigner {
        let key = crate::dnssec::keys::KeyMaterial::generate(algorithm, 0).unwrap();
        ZoneSigner::new(
            &Name::from_ascii("example.test.").unwrap(),
            &ZoneKeys::first(key, 0),
            20_000 * 86_400,
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn signatures_verify_whatever_the_order_of_the_rrset() {
        for algorithm in [KeyAlgorithm::Ecdsap256sha256, KeyAlgorithm::Ed25519] {
            let s = signer(algorithm);
            let owner = Name::from_ascii("www.example.test.").unwrap();
            let a = |last| Record::from_rdata(owner.clone(), 30, RData::A(A::new(192, 0, 2, last)));
            let sig = s.sign(&[a(2), a(1)]).unwrap();
            let RData::DNSSEC(DNSSECRData::RRSIG(rrsig)) = &sig.data else {
                panic!("not an RRSIG");
            };
            assert_eq!(rrsig.input().key_tag, s.published().tag);
            // The other rotation has the same canonical form: one signature
            // serves both.
            let tbs =
                TBS::from_input(&owner, DNSClass::IN, rrsig.input(), [a(1), a(2)].iter()).unwrap();
            let public = s.published().dnskey.public_key();
            public.verify(tbs.as_ref(), rrsig.sig()).unwrap();
            // A changed record does not verify.
            let tbs =
                TBS::from_input(&owner, DNSClass::IN, rrsig.input(), [a(1), a(3)].iter()).unwrap();
            assert!(public.verify(tbs.as_ref(), rrsig.sig()).is_err());
        }
    }

    #[test]
    fn windows_overlap_so_a_signature_is_valid_for_a_week_at_least() {
        let s = signer(KeyAlgorithm::Ecdsap256sha256);
        let owner = Name::from_ascii("example.test.").unwrap();
        let nsec = s
            .nsec(&owner, &[RecordType::SOA, RecordType::NS], 30)
            .unwrap();
        let sig = s.sign(std::slice::from_ref(&nsec)).unwrap();
        let RData::DNSSEC(DNSSECRData::RRSIG(rrsig)) = &sig.data else {
            panic!("not an RRSIG");
        };
        let input = rrsig.input();
        let start = s.window * WINDOW_SECS;
        assert!(u64::from(input.sig_inception.get()) < start);
        assert_eq!(
            u64::from(input.sig_expiration.get()),
            start + 2 * WINDOW_SECS
        );
        let RData::DNSSEC(DNSSECRData::NSEC(n)) = &nsec.data else {
            panic!("not an NSEC");
        };
        assert_eq!(n.next_domain_name().to_string(), "\\000.example.test.");
        let types: Vec<RecordType> = n.type_bit_maps().collect();
        assert!(types.contains(&RecordType::RRSIG) && types.contains(&RecordType::NSEC));
    }
}
