//! A served zone written as an RFC 1035 master file (`gtm zone export`):
//! what a client of no particular place is answered now, on this device.
//!
//! The SOA first, then every name in canonical order with its records,
//! names relative to `$ORIGIN`, each record with its TTL. Static records
//! are written whole; a steered record as its default answer (the answer
//! a secondary transfers), or, with [`Steered::Comment`], as comments only.
//! DNSSEC records are left out: a file is loaded and signed by its server.

use std::fmt::Write;

use hickory_server::proto::rr::{Name, RecordType as Rt};

use crate::snapshot::Snapshot;
use gtm_model::{compile::presentation, config::RecordType};

/// How a steered record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steered {
    /// As its default answer now, marked steered by a comment.
    Answer,
    /// Commented out: the file serves no answer for it.
    Comment,
}

/// The types a signed zone adds, which a file leaves to its server.
fn made_by_signing(rt: Rt) -> bool {
    matches!(
        rt,
        Rt::RRSIG | Rt::NSEC | Rt::NSEC3 | Rt::NSEC3PARAM | Rt::DNSKEY | Rt::CDS | Rt::CDNSKEY
    )
}

/// Zone `zone` of `snapshot` as a master file, after `header` (comment
/// lines, each starting with `;`). `None` when there is no such zone.
pub fn write(snapshot: &Snapshot, zone: usize, steered: Steered, header: &str) -> Option<String> {
    let data = snapshot.zones.get(zone)?;
    let apex = &data.apex;
    let mut nodes: Vec<_> = snapshot.zone_nodes(zone).collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::new();
    out.push_str(header);
    let _ = writeln!(out, "$ORIGIN {apex}");
    let mut soa = String::new();
    let mut rest = String::new();
    for (name, node) in nodes {
        let owner = relative(&name, apex);
        for slot in &node.rrsets {
            if made_by_signing(slot.rtype) {
                continue;
            }
            let answer = slot.answer.load();
            let Some(group) = answer.groups.get(answer.default_group()) else {
                continue;
            };
            let kind = RecordType::from_code(u16::from(slot.rtype));
            let into = if slot.rtype == Rt::SOA {
                &mut soa
            } else {
                &mut rest
            };
            let is_steered = slot.is_steered();
            if is_steered {
                let _ = writeln!(
                    into,
                    "; {owner} {kind} is steered: {}",
                    match steered {
                        Steered::Answer => "its default answer on this device now",
                        Steered::Comment => "not served from this file",
                    }
                );
            }
            let prefix = if is_steered && steered == Steered::Comment {
                "; "
            } else {
                ""
            };
            for record in group.variant(&name, 0) {
                let _ = writeln!(
                    into,
                    "{prefix}{owner}\t{}\tIN\t{kind}\t{}",
                    record.ttl,
                    presentation(kind, &record.data)
                );
            }
        }
    }
    out.push_str(&soa);
    out.push_str(&rest);
    Some(out)
}

/// `name` relative to `apex`: `@`, or its labels above it.
fn relative(name: &Name, apex: &Name) -> String {
    if name == apex {
        return "@".into();
    }
    let text = name.to_string();
    text.strip_suffix(&format!(".{apex}"))
        .map_or(text.clone(), str::to_string)
}
