//! TSIG (RFC 8945): the cluster's transaction keys, and the signing and
//! verification of DNS messages with them (docs/transfer.md).
//!
//! Keys are replicated state (key `tsig` of the replicated map, JSON
//! [`TsigKeys`]), made by `gtm tsig add` through the Raft log: the device
//! that received the request generates the secret and carries it in the
//! command, so every device holds the same bytes. A secret is never logged,
//! never in `Debug` output, and shown once, when it is made.
//!
//! A query carrying a TSIG record takes the general path (the fast path
//! declines any message with more than an OPT in its additional section);
//! [`verify`] checks it before the handler decides the answer, and
//! [`Signing::sign`] signs the encoded response. An AXFR's later messages
//! are signed with [`Signing::sign_next`] (RFC 8945 §5.3.1: each MAC covers
//! the previous one), which hickory does not do.

use std::collections::BTreeMap;

use hickory_proto::{
    rr::{
        Name, Record, TSigResponseContext, TSigner,
        rdata::tsig::{TSIG, TsigAlgorithm, TsigError, make_tsig_record},
    },
    serialize::binary::{BinEncodable, BinEncoder},
};
use serde::{Deserialize, Serialize};

use gtm_model::actor::Actor;

/// The replicated map's key.
pub const TSIG_KEY: &str = "tsig";
/// The one algorithm keys are made with.
pub const ALGORITHM: &str = "hmac-sha256";
/// Seconds a signature's time may differ from ours (RFC 8945 §10: 300).
pub const FUDGE: u16 = 300;
/// Bytes of a new secret: the HMAC-SHA256 output length (RFC 8945 §6).
pub const SECRET_LEN: usize = 32;

/// A key's secret bytes. Its `Debug` never shows them; they are cleared
/// when dropped.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// A new random secret of [`SECRET_LEN`] bytes, or why the system gave
    /// no randomness.
    pub fn generate() -> std::io::Result<Self> {
        gtm_model::random::bytes::<SECRET_LEN>().map(|b| Self(b.to_vec()))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The secret in base64, as `dig -y`, NSD and BIND take it.
    pub fn base64(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&self.0)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

/// One key as the cluster keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredKey {
    /// `hmac-sha256`.
    pub algorithm: String,
    pub secret: Secret,
    pub time_ms: u64,
    pub by: Actor,
}

/// A key as the API lists it: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TsigKeyInfo {
    pub name: String,
    pub algorithm: String,
    /// When it was made (ms since the epoch), and by whom.
    pub time_ms: u64,
    pub by: Actor,
}

/// A key just made: `secret` (base64) is shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NewTsigKey {
    pub name: String,
    pub algorithm: String,
    pub secret: String,
}

/// The cluster's TSIG keys by name (lower case, no final dot).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TsigKeys {
    #[serde(default)]
    pub keys: BTreeMap<String, StoredKey>,
}

impl TsigKeys {
    /// The keys of a replicated map (none when it has none).
    pub fn of(kv: &gtm_cluster::Map) -> Self {
        kv.get(TSIG_KEY)
            .and_then(|v| serde_json::from_slice(v).ok())
            .unwrap_or_default()
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn list(&self) -> Vec<TsigKeyInfo> {
        self.keys
            .iter()
            .map(|(name, k)| TsigKeyInfo {
                name: name.clone(),
                algorithm: k.algorithm.clone(),
                time_ms: k.time_ms,
                by: k.by.clone(),
            })
            .collect()
    }

    /// The signer of a key by its name as it comes in a message.
    pub fn signer(&self, name: &Name) -> Option<TSigner> {
        let key = self.keys.get(&key_name(name))?;
        signer(&key_name(name), key.secret.bytes())
    }
}

/// The signer of a key by the name the cluster keeps it under.
pub fn signer_for(keys: &TsigKeys, name: &str) -> Option<TSigner> {
    signer(name, keys.keys.get(name)?.secret.bytes())
}

/// A key's name as the cluster keeps it: lower case, no final dot.
pub fn key_name(name: &Name) -> String {
    name.to_ascii().trim_end_matches('.').to_ascii_lowercase()
}

/// The signer for a key.
pub fn signer(name: &str, secret: &[u8]) -> Option<TSigner> {
    let name = Name::from_ascii(name).ok()?;
    TSigner::new(secret.to_vec(), TsigAlgorithm::HmacSha256, name, FUDGE).ok()
}

/// Seconds since the epoch, as TSIG times are.
pub fn now_secs() -> u64 {
    gtm_model::clock::now_ms() / 1000
}

/// What a signed query's check found.
#[derive(Debug)]
pub enum Verified {
    /// Signed with a key we hold, in time: answer, and sign the answer.
    Good(Signing),
    /// RFC 8945 §5.2: NOTAUTH, with this unsigned TSIG record appended
    /// (BADKEY: unknown key or algorithm; BADSIG: the MAC is wrong).
    Unsigned { tsig: Vec<u8>, error: TsigError },
    /// RFC 8945 §5.2.3: a good MAC outside the fudge. NOTAUTH, signed with
    /// [`Signing::sign_badtime`].
    BadTime { signing: Signing, request_time: u64 },
}

/// How to sign the responses to one verified query.
pub struct Signing {
    signer: TSigner,
    /// The query's ID, carried as the TSIG's original ID.
    id: u16,
    /// The query's MAC: the first response's MAC covers it.
    request_mac: Vec<u8>,
    /// The key's name, as the cluster keeps it.
    pub key: String,
}

impl std::fmt::Debug for Signing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signing").field("key", &self.key).finish()
    }
}

/// Checks the TSIG of a query (`bytes`, whose last additional record is
/// `tsig`) at time `now` (seconds since the epoch).
pub fn verify(keys: &TsigKeys, bytes: &[u8], tsig: &Record<TSIG>, now: u64) -> Verified {
    let id = tsig.data.oid;
    let Some(signer) = keys
        .signer(&tsig.name)
        .filter(|_| tsig.data.algorithm == TsigAlgorithm::HmacSha256)
    else {
        // Unknown key or algorithm: unsigned, naming the key asked for.
        let tsig = TSigResponseContext::unknown_key(id, now, tsig.name.clone())
            .sign(&[])
            .ok()
            .and_then(|r| record_bytes(&r))
            .unwrap_or_default();
        return Verified::Unsigned {
            tsig,
            error: TsigError::BadKey,
        };
    };
    let key = key_name(&tsig.name);
    let Ok((mac, time, _)) = signer.verify_message_byte(bytes, None, true) else {
        let tsig = TSigResponseContext::bad_signature(id, now, signer)
            .sign(&[])
            .ok()
            .and_then(|r| record_bytes(&r))
            .unwrap_or_default();
        return Verified::Unsigned {
            tsig,
            error: TsigError::BadSig,
        };
    };
    let signing = Signing {
        signer,
        id,
        request_mac: mac,
        key,
    };
    if now.abs_diff(time) > u64::from(tsig.data.fudge) {
        return Verified::BadTime {
            signing,
            request_time: time,
        };
    }
    Verified::Good(signing)
}

impl Signing {
    /// The MAC of the request this signs the responses to.
    pub fn request_mac(&self) -> &[u8] {
        &self.request_mac
    }

    /// Signs an encoded response (the first, or only, message): appends
    /// its TSIG record and counts it in ARCOUNT. Returns the MAC, which the
    /// next message of a transfer covers.
    pub fn sign(&self, response: &mut Vec<u8>, now: u64) -> Option<Vec<u8>> {
        let record = TSigResponseContext::new(
            self.id,
            now,
            self.signer.clone(),
            self.request_mac.clone(),
            None,
        )
        .sign(response)
        .ok()?;
        let mac = record.data.mac.clone();
        append(response, &record_bytes(&record)?)?;
        Some(mac)
    }

    /// Signs a later message of a transfer (RFC 8945 §5.3.1): the MAC
    /// covers the previous message's MAC, this message and the TSIG timers
    /// (time and fudge) only. Returns this message's MAC.
    pub fn sign_next(
        &self,
        response: &mut Vec<u8>,
        previous_mac: &[u8],
        now: u64,
    ) -> Option<Vec<u8>> {
        let mut tbs = Vec::with_capacity(previous_mac.len() + response.len() + 10);
        tbs.extend_from_slice(&u16::try_from(previous_mac.len()).ok()?.to_be_bytes());
        tbs.extend_from_slice(previous_mac);
        tbs.extend_from_slice(response);
        tbs.extend_from_slice(&time48(now));
        tbs.extend_from_slice(&FUDGE.to_be_bytes());
        let mac = self.signer.sign(&tbs).ok()?;
        let tsig = TSIG::new(
            TsigAlgorithm::HmacSha256,
            now,
            FUDGE,
            mac.clone(),
            self.id,
            None,
            Vec::new(),
        );
        let record = make_tsig_record(self.signer.signer_name().clone(), tsig);
        append(response, &record_bytes(&record)?)?;
        Some(mac)
    }

    /// Signs a BADTIME error response (RFC 8945 §5.2.3): Time Signed is the
    /// request's, Other Data our time, so the client can see the skew.
    pub fn sign_badtime(&self, response: &mut Vec<u8>, request_time: u64, now: u64) -> Option<()> {
        let stub = TSIG::new(
            TsigAlgorithm::HmacSha256,
            request_time,
            FUDGE,
            Vec::new(),
            self.id,
            Some(TsigError::BadTime),
            time48(now).to_vec(),
        );
        let tbs = self
            .signer
            .encode_response_tbs(&self.request_mac, response, &stub)
            .ok()?;
        let mac = self.signer.sign(&tbs).ok()?;
        let record = make_tsig_record(self.signer.signer_name().clone(), stub.set_mac(mac));
        append(response, &record_bytes(&record)?)
    }
}

/// Bytes a TSIG record signed with key `key` takes at most: its name, the
/// fixed fields, the algorithm name, a 32-byte MAC and a BADTIME's 6 bytes
/// of Other Data.
pub fn record_room(key: &str) -> usize {
    key.len() + 2 + 10 + 13 + 6 + 2 + 2 + 32 + 2 + 2 + 2 + 6
}

/// A time as TSIG writes it: 48 bits, network order.
fn time48(t: u64) -> [u8; 6] {
    let b = t.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// A TSIG record's wire form (uncompressed names).
fn record_bytes(record: &Record<TSIG>) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(128);
    let mut encoder = BinEncoder::new(&mut buf);
    record.emit(&mut encoder).ok()?;
    Some(buf)
}

/// Appends a record to an encoded message's additional section.
pub fn append(message: &mut Vec<u8>, record: &[u8]) -> Option<()> {
    let count = u16::from_be_bytes([*message.get(10)?, *message.get(11)?]);
    let count = count.checked_add(1)?.to_be_bytes();
    message[10] = count[0];
    message[11] = count[1];
    message.extend_from_slice(record);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_shown_in_padded_standard_base64() {
        assert_eq!(Secret::new(b"foobar".to_vec()).base64(), "Zm9vYmFy");
        assert_eq!(Secret::new(b"fo".to_vec()).base64(), "Zm8=");
        assert_eq!(Secret::new(vec![0xfb, 0xff]).base64(), "+/8=");
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let key = StoredKey {
            algorithm: ALGORITHM.into(),
            secret: Secret::new(b"very secret bytes".to_vec()),
            time_ms: 0,
            by: Actor::default(),
        };
        let shown = format!("{key:?}");
        assert!(!shown.contains("118"), "{shown}");
        assert!(shown.contains("Secret(..)"));
    }
}
