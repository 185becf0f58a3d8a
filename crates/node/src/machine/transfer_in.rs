//! A domain transferred in from a primary, as the state machine changes
//! the committed configuration (docs/transfer.md, "Transfer in"): a
//! transfer's zone replaces the domain's transferred records and gives
//! its SOA fields, TTL and apex NS set; a promotion keeps what the domain
//! serves as its own. Both go the way of every configuration change
//! (proven servable whole, or refused whole).

use std::sync::Arc;

use super::{Change, rejected};
use crate::command::Transferred;
use gtm_model::{
    Config,
    config::{Domain, RecordFields, Soa},
    error::ErrorKind,
};

/// The domain (in no view) named `name`, by its place in `config`.
fn domain_at(config: &Config, name: &str) -> Result<usize, Change> {
    config
        .domain_index(name)
        .ok_or_else(|| rejected(ErrorKind::NotFound, format!("no domain {name}")))
}

/// The configuration `t` makes of `config`, or its refusal.
pub(super) fn transferred(config: &Config, t: &Transferred) -> Result<Config, Change> {
    let i = domain_at(config, &t.domain)?;
    let domain = &config.domains[i];
    match &domain.primary {
        Some(p) if p.address == t.primary => {}
        Some(p) => {
            return Err(rejected(
                ErrorKind::Conflict,
                format!(
                    "domain {}: its primary is now {}, not {}: the transfer is not applied",
                    domain.name, p.address, t.primary
                ),
            ));
        }
        None => {
            return Err(rejected(
                ErrorKind::Conflict,
                format!(
                    "domain {} has no primary now: the transfer is not applied",
                    domain.name
                ),
            ));
        }
    }
    // A transfer of a serial that is not newer than the one held (two
    // devices told by the same NOTIFY, or one that took long) changes
    // nothing: the zone never goes back (RFC 1982).
    let held = domain
        .primary
        .as_ref()
        .and_then(|p| p.serial)
        .filter(|_| domain.records.iter().any(|r| r.is_transferred()));
    if let Some(held) = held {
        use hickory_proto::rr::SerialNumber;
        if SerialNumber::new(t.serial) <= SerialNumber::new(held) {
            return Ok(config.clone());
        }
    }
    let label = format!("the transfer from {}", t.primary);
    let imported = gtm_model::zonefile::read(&t.zone, &label, Some(&domain.name))
        .map_err(|errors| rejected(ErrorKind::InvalidConfig, errors.join("\n")))?;
    let body = serde_json::Value::Object(imported.body);
    let field = |key: &str| body.get(key).cloned().unwrap_or(serde_json::Value::Null);
    let bad = |what: &str, e: serde_json::Error| {
        rejected(
            ErrorKind::InvalidConfig,
            format!("{label}: its {what} does not read: {e}"),
        )
    };
    let records: Vec<RecordFields> =
        serde_json::from_value(field("record")).map_err(|e| bad("records", e))?;
    let soa: Option<Soa> = serde_json::from_value(field("soa")).map_err(|e| bad("SOA", e))?;
    let nameservers: Vec<String> =
        serde_json::from_value(field("nameservers")).map_err(|e| bad("NS set", e))?;
    let ttl: Option<u32> = serde_json::from_value(field("ttl")).map_err(|e| bad("TTL", e))?;

    let mut d = Domain::clone(domain);
    d.records.retain(|r| !r.is_transferred());
    d.records.extend(records.into_iter().map(|mut r| {
        r.transferred = Some(true);
        Arc::new(r.into())
    }));
    // The zone's own fields are the primary's; gtm numbers the serial.
    d.soa = soa.map(|s| Soa {
        serial: domain.soa.as_ref().and_then(|own| own.serial),
        ..s
    });
    d.nameservers = nameservers;
    d.ttl = ttl.or(d.ttl);
    if let Some(p) = &mut d.primary {
        p.serial = Some(t.serial);
    }
    let mut new = config.clone();
    new.domains[i] = Arc::new(d);
    Ok(new)
}

/// The configuration in which the domain `name` keeps what it serves as
/// its own records and has no primary, or its refusal.
pub(super) fn promoted(config: &Config, name: &str) -> Result<Config, Change> {
    let i = domain_at(config, name)?;
    let domain = &config.domains[i];
    if domain.primary.is_none() {
        return Err(rejected(
            ErrorKind::Conflict,
            format!(
                "domain {} has no primary: its records are its own already",
                domain.name
            ),
        ));
    }
    let served = gtm_model::compile::layered(domain);
    let mut d = Domain::clone(&served);
    d.primary = None;
    for r in &mut d.records {
        if r.is_transferred() {
            let mut fields = r.fields();
            fields.transferred = None;
            *r = Arc::new(fields.into());
        }
    }
    let mut new = config.clone();
    new.domains[i] = Arc::new(d);
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[[domain]]
name = "legacy.test"
nameservers = ["ns1.legacy.test"]
primary = { address = "127.0.0.1:5300" }

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.80", hc = "static" }, { ip = "192.0.2.81" }]
"#;

    const ZONE: &str = "legacy.test. 300 IN SOA ns.old.test. admin.legacy.test. 7 1200 300 86400 60\n\
        legacy.test. 300 IN NS ns.old.test.\n\
        legacy.test. 300 IN MX 10 mail.legacy.test.\n\
        www.legacy.test. 300 IN A 198.51.100.1\n\
        www.legacy.test. 300 IN TXT \"old www\"\n\
        mail.legacy.test. 300 IN A 198.51.100.25\n";

    fn transfer(serial: u32) -> Transferred {
        Transferred {
            domain: "legacy.test".into(),
            primary: "127.0.0.1:5300".into(),
            serial,
            zone: ZONE.into(),
        }
    }

    #[test]
    fn a_transfer_layers_under_the_own_records_and_a_promotion_keeps_what_is_served() {
        let config = gtm_model::parse(CONFIG).unwrap();
        let after =
            transferred(&config, &transfer(7)).unwrap_or_else(|c| panic!("{:?}", c.outcome));
        let d = &after.domains[0];
        assert_eq!(d.primary.as_ref().unwrap().serial, Some(7));
        assert_eq!(d.nameservers, ["ns.old.test"]);
        assert_eq!(d.soa.as_ref().unwrap().refresh, Some(1200));
        let transferred_kinds: Vec<String> = d
            .records
            .iter()
            .filter(|r| r.is_transferred())
            .map(|r| format!("{} {}", r.name, r.kind))
            .collect();
        assert_eq!(transferred_kinds, ["@ MX", "www A", "www TXT", "mail A"]);
        // It compiles: the own www A hides the transferred one.
        let compiled = gtm_model::compile(&after).unwrap();
        assert_eq!(compiled.zones[0].records.len(), 4);

        let promoted =
            promoted(&after, "legacy.test").unwrap_or_else(|c| panic!("{:?}", c.outcome));
        let d = &promoted.domains[0];
        assert!(d.primary.is_none());
        assert!(d.records.iter().all(|r| !r.is_transferred()));
        let www: Vec<_> = d.records.iter().filter(|r| &*r.name == "www").collect();
        assert_eq!(www.len(), 2, "the own A and the transferred TXT");
        assert_eq!(www[0].addresses.len(), 2, "the own A kept");

        // The same serial again, or an older one, changes nothing.
        assert_eq!(
            transferred(&after, &transfer(7)).ok().as_ref(),
            Some(&after)
        );
        assert_eq!(
            transferred(&after, &transfer(6)).ok().as_ref(),
            Some(&after)
        );
        let newer = transferred(&after, &transfer(8)).ok().unwrap();
        assert_eq!(newer.domains[0].primary.as_ref().unwrap().serial, Some(8));

        // A transfer for another primary, or a domain without one, is refused.
        let mut other = transfer(8);
        other.primary = "127.0.0.2".into();
        assert!(transferred(&after, &other).is_err());
        assert!(transferred(&promoted, &transfer(8)).is_err());
        assert!(super::promoted(&promoted, "legacy.test").is_err());
    }
}
