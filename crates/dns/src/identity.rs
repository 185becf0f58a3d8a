//! Which device answered: the NSID option (RFC 5001) and the CHAOS-class
//! `id.server.` / `hostname.bind.` TXT names, both carrying the device's
//! NSID value (node setting `nsid`, default the device name).
//!
//! Devices of one cluster may answer differently by design (place, health
//! seen from their site), so an operator asking "who said that?" needs
//! this before anything else.

use hickory_server::proto::{
    op::ResponseCode,
    rr::{
        Name, RData, Record, RecordType,
        rdata::{TXT, opt::NSIDPayload},
    },
};

use super::{ede::Ede, resolved::Resolved};

/// The CH names answered, lower-cased wire-form for comparison.
const NAMES: [&str; 2] = ["id.server.", "hostname.bind."];

/// The response to a query of class CH for `name` (lower-cased by the
/// decoder): the NSID value as TXT for `id.server.` and `hostname.bind.`
/// (TXT or ANY), REFUSED for anything else, as NSD does.
pub fn chaos(nsid: &str, name: &Name, qtype: RecordType) -> Resolved {
    let known = NAMES
        .iter()
        .any(|n| Name::from_ascii(n).is_ok_and(|n| n == *name));
    if !known || !matches!(qtype, RecordType::TXT | RecordType::ANY) {
        return Resolved {
            rcode: ResponseCode::Refused,
            ede: Some(Ede::NotAuthoritative),
            ..Resolved::default()
        };
    }
    let mut record = Record::from_rdata(
        name.clone(),
        0,
        RData::TXT(TXT::new(vec![nsid.to_string()])),
    );
    record.dns_class = hickory_server::proto::rr::DNSClass::CH;
    Resolved {
        rcode: ResponseCode::NoError,
        answers: vec![record],
        ..Resolved::default()
    }
}

/// The NSID option payload; `None` only if the value cannot be carried
/// (node settings refuse such values).
pub fn nsid_payload(nsid: &str) -> Option<NSIDPayload> {
    NSIDPayload::new(nsid.as_bytes().to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chaos_names_answer_the_nsid_and_others_are_refused() {
        let n = |s: &str| Name::from_ascii(s).expect("name");
        let r = chaos("dev-1", &n("id.server."), RecordType::TXT);
        assert_eq!(r.rcode, ResponseCode::NoError);
        assert_eq!(r.answers.len(), 1);
        assert_eq!(r.answers[0].data.to_string(), "dev-1");
        assert_eq!(
            r.answers[0].dns_class,
            hickory_server::proto::rr::DNSClass::CH
        );
        assert_eq!(
            chaos("dev-1", &n("hostname.bind."), RecordType::ANY).rcode,
            ResponseCode::NoError
        );
        for (name, t) in [
            ("version.bind.", RecordType::TXT),
            ("id.server.", RecordType::A),
            ("example.test.", RecordType::TXT),
        ] {
            let r = chaos("dev-1", &n(name), t);
            assert_eq!(r.rcode, ResponseCode::Refused, "{name} {t}");
            assert!(r.answers.is_empty());
        }
    }
}
