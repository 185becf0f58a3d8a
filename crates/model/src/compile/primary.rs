//! A domain transferred in from a primary during a migration
//! (docs/transfer.md, "Transfer in"): its primary read, and its records
//! layered, gtm's own over those the transfer wrote.

use std::{borrow::Cow, collections::HashSet, sync::Arc};

use super::{Cx, secondaries::socket_address};
use crate::config::{Domain, Record, RecordType};

impl Cx {
    /// The domain's primary, checked: its address read, its key's name
    /// (whether the cluster holds the key is the state machine's to say),
    /// no view; and no record marked `transferred` without a primary.
    pub(super) fn primary(&mut self, path: &str, d: &Domain) {
        let Some(p) = &d.primary else {
            for r in d.records.iter().filter(|r| r.is_transferred()) {
                self.err(
                    format!("{path} / record {} {}", r.name, r.kind.as_str()),
                    "transferred: only a domain with primary = { ... } has transferred records; gtm domain promote makes them the domain's own",
                );
            }
            return;
        };
        let ppath = format!("{path} / primary");
        if socket_address(&p.address).is_none() {
            self.err(
                &ppath,
                format!(
                    "address {:?} is not an IP address or IP:port (e.g. \"192.0.2.53\" or \"[2001:db8::53]:5300\")",
                    p.address
                ),
            );
        }
        if let Some(key) = &p.key
            && let Err(e) = crate::names::check_tsig_key_name(key)
        {
            self.err(&ppath, format!("key: {e}"));
        }
        if d.view.is_some() {
            self.err(
                &ppath,
                "a domain transferred in from a primary is the same for every client: it takes no view",
            );
        }
    }
}

/// The records `d` serves: with a primary, its own and each transferred
/// record that none of its own hides (one of the same name and type, a
/// CNAME at its name, or, for a transferred CNAME, any at its name).
/// Without one, `d` as it is.
pub fn layered(d: &Domain) -> Cow<'_, Domain> {
    if d.primary.is_none() || !d.records.iter().any(|r| r.is_transferred()) {
        return Cow::Borrowed(d);
    }
    let key = |r: &Record| r.name.to_ascii_lowercase();
    let own: Vec<&Arc<Record>> = d.records.iter().filter(|r| !r.is_transferred()).collect();
    let sets: HashSet<(String, RecordType)> = own.iter().map(|r| (key(r), r.kind)).collect();
    let names: HashSet<String> = own.iter().map(|r| key(r)).collect();
    let cnames: HashSet<String> = own
        .iter()
        .filter(|r| r.kind == RecordType::CNAME)
        .map(|r| key(r))
        .collect();
    let hidden = |r: &Record| {
        let name = key(r);
        cnames.contains(&name)
            || (r.kind == RecordType::CNAME && names.contains(&name))
            || sets.contains(&(name, r.kind))
    };
    Cow::Owned(Domain {
        records: d
            .records
            .iter()
            .filter(|r| !r.is_transferred() || !hidden(r))
            .cloned()
            .collect(),
        ..d.without_records()
    })
}
