//! Extended DNS Errors (RFC 8914): why a response says what it says, as
//! an EDNS option (code 15) beside the rcode.
//!
//! A response carries one only when its query had an OPT record: a query
//! without EDNS never gets one added. Which cause gets which code is the
//! table of docs/architecture.md, "Extended DNS Errors"; causes with no
//! fitting registered code (malformed queries, TSIG failures, BADVERS, the
//! truncated answers of the rate limit) carry none.
//!
//! hickory has no variant for the option, so it travels as an unknown
//! option: a 2-byte INFO-CODE, then the UTF-8 EXTRA-TEXT.

use hickory_server::proto::rr::rdata::opt::EdnsOption;

/// The EDNS option code of an Extended DNS Error.
pub const OPTION_CODE: u16 = 15;

/// The extended errors gtm gives, each for the causes listed on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ede {
    /// 18 Prohibited: a zone transfer asked by a client the zone does not
    /// list as a secondary (with that key, from that address); a NOTIFY
    /// for a domain with no primary, or not from its primary's address, or
    /// not signed with its primary's key.
    Prohibited,
    /// 20 Not Authoritative: REFUSED for a name outside the zones served
    /// to the client (its view's included), for a class other than IN,
    /// for a CH name other than the identity names, and for a NOTIFY of a
    /// domain not served.
    NotAuthoritative,
    /// 21 Not Supported: NOTIMP for an opcode other than QUERY, NOTIFY and
    /// UPDATE (and for these two on a device that takes none), REFUSED
    /// for AXFR or IXFR over UDP.
    NotSupported,
    /// 30 Invalid Query Type: FORMERR for a question of type NXNAME
    /// (RFC 9824 §3.5).
    InvalidQueryType,
    /// 0 Other, "fail-safe answer": a steered record answers its
    /// `fail_safe` values because none of its addresses is healthy.
    FailSafe,
}

/// The whole option of a fail-safe answer as the fast path writes it:
/// code, length, INFO-CODE 0 and the text.
pub const FAIL_SAFE_OPTION: [u8; 22] = *b"\x00\x0f\x00\x12\x00\x00fail-safe answer";

impl Ede {
    /// The INFO-CODE (IANA's Extended DNS Error Codes registry).
    pub fn info_code(self) -> u16 {
        match self {
            Ede::FailSafe => 0,
            Ede::Prohibited => 18,
            Ede::NotAuthoritative => 20,
            Ede::NotSupported => 21,
            Ede::InvalidQueryType => 30,
        }
    }

    /// The EXTRA-TEXT: only where the code alone does not say it (code 0
    /// needs one, RFC 8914 §4.1).
    pub fn extra_text(self) -> &'static str {
        match self {
            Ede::FailSafe => "fail-safe answer",
            _ => "",
        }
    }

    /// The option's data: INFO-CODE, then EXTRA-TEXT.
    pub fn data(self) -> Vec<u8> {
        let text = self.extra_text().as_bytes();
        let mut data = Vec::with_capacity(2 + text.len());
        data.extend_from_slice(&self.info_code().to_be_bytes());
        data.extend_from_slice(text);
        data
    }

    /// The option, for a response hickory encodes.
    pub fn option(self) -> EdnsOption {
        EdnsOption::Unknown(OPTION_CODE, self.data())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_server::proto::{
        op::{Edns, Message, MessageType, OpCode},
        rr::rdata::opt::EdnsCode,
    };

    /// The table of docs/architecture.md, one row per code.
    #[test]
    fn each_cause_has_its_registered_code_and_text() {
        let table = [
            (Ede::Prohibited, 18, ""),
            (Ede::NotAuthoritative, 20, ""),
            (Ede::NotSupported, 21, ""),
            (Ede::InvalidQueryType, 30, ""),
            (Ede::FailSafe, 0, "fail-safe answer"),
        ];
        for (ede, code, text) in table {
            assert_eq!(ede.info_code(), code, "{ede:?}");
            assert_eq!(ede.extra_text(), text, "{ede:?}");
            let mut want = code.to_be_bytes().to_vec();
            want.extend_from_slice(text.as_bytes());
            assert_eq!(ede.data(), want, "{ede:?}");
        }
    }

    #[test]
    fn the_fast_paths_bytes_are_the_fail_safe_option() {
        let data = Ede::FailSafe.data();
        let mut want = OPTION_CODE.to_be_bytes().to_vec();
        want.extend_from_slice(&(data.len() as u16).to_be_bytes());
        want.extend_from_slice(&data);
        assert_eq!(FAIL_SAFE_OPTION[..], want[..]);
    }

    /// Encoded by hickory and read back, the option is code 15 with the
    /// INFO-CODE and text as sent.
    #[test]
    fn the_option_survives_hickorys_encoder() {
        let mut m = Message::new(1, MessageType::Response, OpCode::Query);
        let mut edns = Edns::new();
        edns.options_mut().insert(Ede::NotAuthoritative.option());
        m.edns = Some(edns);
        let bytes = m.to_vec().unwrap();
        let back = Message::from_vec(&bytes).unwrap();
        let option = back.edns.as_ref().unwrap().option(EdnsCode::from(15u16));
        assert_eq!(option, Some(&EdnsOption::Unknown(15, vec![0, 20])));
    }
}
