//! The checks of all the records at one name: a CNAME alone there, and
//! everything fitting one DNS message.

use std::collections::HashMap;

use hickory_server::proto::rr::{Name, rdata::SOA};

use super::{
    Cx, RecordSpec,
    paths::{record_path, relative},
    size::{MAX_NAME_BYTES, answer_size, apex_size},
};
use crate::{
    config::RecordType,
    names::{key_name, wire_key},
};

impl Cx {
    /// Checks the records of `checked` by name, in file order (of each
    /// name's first record), for stable errors. `apex_set`: the SOA and the
    /// name servers, answered at the apex with its records.
    pub(super) fn names(
        &mut self,
        path: &str,
        apex: &Name,
        apex_set: (&SOA, &[Name]),
        checked: &[&RecordSpec],
    ) {
        let apex_wire = wire_key(apex);
        let mut by_owner: HashMap<&[u8], Vec<&RecordSpec>> = HashMap::new();
        for &r in checked {
            by_owner.entry(&r.owner).or_default().push(r);
        }
        for owner in checked.iter().map(|r| &*r.owner) {
            let Some(at) = by_owner.remove(owner) else {
                continue;
            };
            let at_apex = *owner == *apex_wire;
            self.cname_alone(path, apex, at_apex, &at);
            // Everything at one name must fit one response (an ANY answer).
            let apex_bytes = if at_apex {
                apex_size(apex_set.0, apex_set.1)
            } else {
                0
            };
            self.fits_a_message(path, apex, owner, apex_bytes, &at);
        }
    }

    /// A CNAME owns its name alone (RFC 1034 §3.6.2), and is never at the
    /// apex. `at`: the records at one name.
    fn cname_alone(&mut self, path: &str, apex: &Name, at_apex: bool, at: &[&RecordSpec]) {
        let Some(cname) = at.iter().find(|r| r.kind == RecordType::CNAME) else {
            return;
        };
        let cpath = record_path(path, apex, cname);
        if at_apex {
            self.err(&cpath, "the apex cannot be a CNAME (it holds SOA and NS)");
        } else if at.len() > 1 {
            let others: Vec<_> = at
                .iter()
                .filter(|r| r.kind != RecordType::CNAME)
                .map(|r| r.kind.as_str())
                .collect();
            self.err(
                &cpath,
                format!(
                    "{} shares its name; a CNAME must be alone at its name (RFC 1034 §3.6.2)",
                    others.join(", ")
                ),
            );
        }
    }

    /// The records at `owner` (`at`), with `apex_bytes` of SOA and NS at
    /// the apex, take at most [`MAX_NAME_BYTES`] in an answer; each one's
    /// data encodes and reads back.
    fn fits_a_message(
        &mut self,
        path: &str,
        apex: &Name,
        owner: &[u8],
        apex_bytes: usize,
        at: &[&RecordSpec],
    ) {
        let mut total = apex_bytes;
        for r in at {
            match answer_size(r) {
                Ok(n) => total += n,
                Err(e) => self.err(record_path(path, apex, r), e.to_string()),
            }
        }
        if total <= MAX_NAME_BYTES {
            return;
        }
        let kinds: Vec<_> = at.iter().map(|r| r.kind.as_str()).collect();
        let what = if at.len() == 1 {
            record_path(path, apex, at[0])
        } else {
            format!(
                "{path} / records {} {}",
                relative(&key_name(owner), apex),
                kinds.join(" ")
            )
        };
        self.err(
            what,
            format!(
                "the records of {} take {total} bytes in an answer; at most {MAX_NAME_BYTES} fit a DNS message (65,535 bytes with the question and overhead)",
                key_name(owner)
            ),
        );
    }
}
