//! A domain's secondaries (zone transfers and NOTIFY).

use super::{Cx, SecondarySpec};
use crate::config::Domain;

/// The longest SOA expire of a signed domain with secondaries: the least
/// validity a transferred signature has left (docs/transfer.md).
pub const SIGNED_EXPIRE_MAX: u32 = 604_800;

/// `IP` or `IP:port` (port 53 by default).
pub fn socket_address(text: &str) -> Option<std::net::SocketAddr> {
    text.parse::<std::net::SocketAddr>()
        .or_else(|_| {
            text.parse::<std::net::IpAddr>()
                .map(|ip| std::net::SocketAddr::new(ip, 53))
        })
        .ok()
}

impl Cx {
    /// A domain's secondaries: addresses read, key names checked (whether
    /// the keys exist is the cluster's to say: the state machine checks it
    /// against its keys). A pinned `soa.serial` cannot go with them.
    pub(super) fn secondaries(&mut self, path: &str, d: &Domain) -> Vec<SecondarySpec> {
        let mut out = Vec::with_capacity(d.secondaries.len());
        for (i, s) in d.secondaries.iter().enumerate() {
            let spath = format!("{path} / secondaries[{i}]");
            let address = match socket_address(&s.address) {
                Some(a) => a,
                None => {
                    self.err(
                        &spath,
                        format!(
                            "address {:?} is not an IP address or IP:port (e.g. \"192.0.2.53\" or \"[2001:db8::53]:5300\")",
                            s.address
                        ),
                    );
                    continue;
                }
            };
            if let Err(e) = crate::names::check_tsig_key_name(&s.key) {
                self.err(&spath, format!("key: {e}"));
                continue;
            }
            if out.iter().any(|o: &SecondarySpec| o.address == address) {
                self.err(&spath, format!("address {address} is listed twice"));
                continue;
            }
            out.push(SecondarySpec {
                address,
                key: s.key.clone(),
            });
        }
        // A transfer's signatures have a week left at least (docs/dnssec.md):
        // a secondary must stop answering before they expire.
        if let Some(expire) = d.soa.as_ref().and_then(|soa| soa.expire)
            && !out.is_empty()
            && d.dnssec == Some(true)
            && expire > SIGNED_EXPIRE_MAX
        {
            self.err(
                format!("{path} / soa.expire"),
                format!("{expire} is over {SIGNED_EXPIRE_MAX} (one week): a secondary of a signed domain would go on serving signatures after they expire (docs/transfer.md)"),
            );
        }
        if !out.is_empty() && d.soa.as_ref().is_some_and(|soa| soa.serial.is_some()) {
            self.err(
                path,
                "soa.serial cannot be set on a domain with secondaries: its serial must move whenever the transferred zone changes (docs/transfer.md)",
            );
        }
        out
    }
}
