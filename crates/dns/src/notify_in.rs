//! NOTIFY from a primary (RFC 1996 §3.7–3.11; docs/transfer.md,
//! "Transfer in"): a domain transferred in from a primary is asked for
//! again as soon as its primary says it changed, not only at its
//! `soa.refresh`.
//!
//! This layer reads the NOTIFY (its TSIG verified by the general path)
//! and hands its zone, source address and key to the [`Secondary`] the
//! device serves with ([`Notices::serve`]), which knows the domains'
//! primaries: accepted, it is answered NOERROR at once and the transfer
//! runs apart; otherwise REFUSED with the extended error that says why.
//! Until a device serves NOTIFY (and when it never does) a NOTIFY gets
//! NOTIMP, as every opcode but QUERY does.

use std::{
    net::IpAddr,
    sync::{Arc, OnceLock},
};

use hickory_server::{
    proto::{op::ResponseCode, rr::RecordType},
    server::Request,
};

use super::ede::Ede;

/// Why a NOTIFY is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No domain of that name is served.
    NotServed,
    /// The domain is served but transferred from no primary.
    NoPrimary,
    /// It came from another address than the domain's primary.
    NotFromPrimary,
    /// The domain's primary has a TSIG key and the NOTIFY was not signed
    /// with it.
    NotSigned,
}

/// Takes the NOTIFYs a device receives: the device's replicated state.
pub trait Secondary: Send + Sync + 'static {
    /// A NOTIFY for `zone` (lower case, no final dot) from `from`,
    /// verified as signed with `key` (as the cluster keeps its name) when
    /// it was signed: taken (its transfer runs apart), or why not.
    fn notified(&self, zone: &str, from: IpAddr, key: Option<&str>) -> Result<(), Refusal>;
}

/// Whether (and by what) this device takes NOTIFYs.
#[derive(Default)]
pub struct Notices {
    secondary: OnceLock<Arc<dyn Secondary>>,
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("serving", &self.secondary.get().is_some())
            .finish()
    }
}

impl Notices {
    /// Takes NOTIFYs with `secondary` from now on. Only the first call
    /// counts.
    pub fn serve(&self, secondary: Arc<dyn Secondary>) {
        let _ = self.secondary.set(secondary);
    }

    /// The response code and extended error of a NOTIFY `request` signed
    /// with `key`, or `None` when this device takes none (the general path
    /// answers NOTIMP).
    pub(crate) fn decide(
        &self,
        request: &Request,
        key: Option<&str>,
    ) -> Option<(ResponseCode, Option<Ede>)> {
        let secondary = self.secondary.get()?;
        Some(match request.queries.queries() {
            // RFC 1996 §3.7: one question, of type SOA.
            [q] if q.query_type() == RecordType::SOA => {
                let zone = q
                    .name()
                    .to_ascii()
                    .trim_end_matches('.')
                    .to_ascii_lowercase();
                match secondary.notified(&zone, request.src().ip(), key) {
                    Ok(()) => (ResponseCode::NoError, None),
                    Err(Refusal::NotServed) => (ResponseCode::Refused, Some(Ede::NotAuthoritative)),
                    Err(_) => (ResponseCode::Refused, Some(Ede::Prohibited)),
                }
            }
            _ => (ResponseCode::FormErr, None),
        })
    }
}
