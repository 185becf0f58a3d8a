//! What a type's data must hold beyond its syntax: lengths its parameters
//! imply, and RFC 9460's rules for SVCB and HTTPS. Judged on the wire
//! bytes, which are what a client reads.

use hickory_server::proto::rr::{
    RData,
    rdata::svcb::{SVCB, SvcParamKey, SvcParamValue},
};

use crate::config::RecordType;

/// Puts `data` in the form it is served in (SVCB parameters in key order)
/// and checks what its typed form shows.
pub(super) fn settle(data: &mut RData) -> Result<(), String> {
    match data {
        RData::SVCB(svcb) => svcb_rules(svcb),
        RData::HTTPS(https) => svcb_rules(&mut https.0),
        _ => Ok(()),
    }
}

/// Checks the encoded data `wire` of type `kind`; the reason when it breaks
/// a rule of its type.
pub(super) fn judge(kind: RecordType, wire: &[u8]) -> Result<(), String> {
    match kind {
        RecordType::TLSA => tlsa(wire, "TLSA"),
        RecordType::DS => ds(wire),
        RecordType::SSHFP => sshfp(wire),
        k if k.code() == 53 => tlsa(wire, "SMIMEA"),
        _ => Ok(()),
    }
}

/// RFC 6698 §2.1 (and RFC 8162 for SMIMEA): usage 0–3, selector 0–1,
/// matching type 0–2, and a digest of the matching type's length.
fn tlsa(wire: &[u8], ty: &str) -> Result<(), String> {
    let [usage, selector, matching, data @ ..] = wire else {
        return Err(format!(
            "{ty} data is usage, selector, matching type and data"
        ));
    };
    if *usage > 3 {
        return Err(format!("certificate usage {usage} is not 0 to 3"));
    }
    if *selector > 1 {
        return Err(format!("selector {selector} is not 0 or 1"));
    }
    digest_length(
        "matching type",
        *matching,
        data.len(),
        &[(1, 32, "SHA-256"), (2, 64, "SHA-512")],
    )?;
    if *matching > 2 {
        return Err(format!("matching type {matching} is not 0, 1 or 2"));
    }
    if data.is_empty() {
        return Err(format!("{ty} needs certificate association data"));
    }
    Ok(())
}

/// RFC 4034 §5.1 with the digests of RFC 4509 and RFC 6605.
fn ds(wire: &[u8]) -> Result<(), String> {
    let [_, _, _, digest_type, digest @ ..] = wire else {
        return Err("DS data is key tag, algorithm, digest type and digest".into());
    };
    digest_length(
        "digest type",
        *digest_type,
        digest.len(),
        &[(1, 20, "SHA-1"), (2, 32, "SHA-256"), (4, 48, "SHA-384")],
    )?;
    if digest.is_empty() {
        return Err("DS needs a digest".into());
    }
    Ok(())
}

/// RFC 4255 with RFC 6594's SHA-256.
fn sshfp(wire: &[u8]) -> Result<(), String> {
    let [_, fp_type, fingerprint @ ..] = wire else {
        return Err("SSHFP data is algorithm, fingerprint type and fingerprint".into());
    };
    digest_length(
        "fingerprint type",
        *fp_type,
        fingerprint.len(),
        &[(1, 20, "SHA-1"), (2, 32, "SHA-256")],
    )?;
    if fingerprint.is_empty() {
        return Err("SSHFP needs a fingerprint".into());
    }
    Ok(())
}

fn digest_length(
    what: &str,
    ty: u8,
    len: usize,
    known: &[(u8, usize, &str)],
) -> Result<(), String> {
    match known.iter().find(|(t, _, _)| *t == ty) {
        Some((_, want, name)) if *want != len => Err(format!(
            "{what} {ty} ({name}) takes a {want}-byte digest, not {len} bytes ({} hexadecimal digits are needed)",
            want * 2
        )),
        _ => Ok(()),
    }
}

/// RFC 9460: each key once, in key order on the wire (§2.2); AliasMode
/// with no parameters (§2.4.2); `mandatory` listing present keys, not
/// itself (§8); `no-default-alpn` only with `alpn` (§7.1.1).
fn svcb_rules(svcb: &mut SVCB) -> Result<(), String> {
    svcb.svc_params.sort_by_key(|(k, _)| u16::from(*k));
    if let Some(pair) = svcb
        .svc_params
        .windows(2)
        .find(|w| u16::from(w[0].0) == u16::from(w[1].0))
    {
        return Err(format!("SvcParam {} is given twice", pair[0].0));
    }
    if svcb.svc_priority == 0 && !svcb.svc_params.is_empty() {
        return Err(
            "AliasMode (SvcPriority 0) takes no SvcParams; give a priority of 1 or more for ServiceMode"
                .into(),
        );
    }
    let has = |key: SvcParamKey| svcb.svc_params.iter().any(|(k, _)| *k == key);
    for (_, value) in &svcb.svc_params {
        if let SvcParamValue::Mandatory(m) = value {
            for key in &m.0 {
                if *key == SvcParamKey::Mandatory {
                    return Err("mandatory cannot list mandatory itself".into());
                }
                if !has(*key) {
                    return Err(format!("mandatory lists {key}, which is not given"));
                }
            }
            let mut keys: Vec<u16> = m.0.iter().map(|k| u16::from(*k)).collect();
            keys.sort_unstable();
            if keys.windows(2).any(|w| w[0] == w[1]) {
                return Err("mandatory lists a key twice".into());
            }
        }
    }
    if has(SvcParamKey::NoDefaultAlpn) && !has(SvcParamKey::Alpn) {
        return Err("no-default-alpn needs alpn".into());
    }
    Ok(())
}
