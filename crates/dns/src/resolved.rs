//! What a question resolved to: the content of a response, before it is
//! encoded.

use hickory_server::proto::{op::ResponseCode, rr::Record};

use super::ede::Ede;

/// The content of a response.
#[derive(Debug, Default)]
pub struct Resolved {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    /// The additional section: a referral's glue.
    pub additional: Vec<Record>,
    /// ECS scope prefix the answer depended on.
    pub scope: u8,
    /// A referral to a delegated name: not authoritative.
    pub referral: bool,
    /// The Extended DNS Error the response carries (when asked with EDNS).
    pub ede: Option<Ede>,
}
