//! Alias records: an A or AAAA record answered with the answer of another
//! record of the same type in the same zone, at any name, the apex
//! included (where a CNAME cannot be). The target's health, place and
//! balance decide the answer; no resolver is needed.

use std::{
    collections::{BTreeSet, HashSet},
    sync::Arc,
};

use hickory_server::proto::rr::Name;

use super::{Content, Cx, RecordSpec, paths::record_path};
use crate::{config::RecordType, names::key_name};

impl Cx {
    /// Checks each alias of `records` against them: its target is a record
    /// of the same type that is not an alias. The aliases, by name and
    /// type.
    pub(super) fn aliases(
        &mut self,
        path: &str,
        apex: &Name,
        records: &[Arc<RecordSpec>],
    ) -> BTreeSet<(Box<[u8]>, RecordType)> {
        let aliases: Vec<(&RecordSpec, &[u8])> = records
            .iter()
            .filter_map(|r| match &r.content {
                Content::Alias(target) => Some((&**r, &*target.0)),
                _ => None,
            })
            .collect();
        if aliases.is_empty() {
            return BTreeSet::new();
        }
        let answered: HashSet<(&[u8], RecordType)> = records
            .iter()
            .filter(|r| !matches!(r.content, Content::Alias(_)))
            .map(|r| (&*r.owner, r.kind))
            .collect();
        let aliased: HashSet<(&[u8], RecordType)> =
            aliases.iter().map(|(r, _)| (&*r.owner, r.kind)).collect();
        for (r, target) in &aliases {
            let why = if aliased.contains(&(*target, r.kind)) {
                format!(
                    "alias: the {} record of {} is an alias itself; an alias names a record with an answer of its own",
                    r.kind,
                    key_name(target)
                )
            } else if !answered.contains(&(*target, r.kind)) {
                format!(
                    "alias: {} has no {} record in the domain",
                    key_name(target),
                    r.kind
                )
            } else {
                continue;
            };
            self.err(record_path(path, apex, r), why);
        }
        aliases
            .iter()
            .map(|(r, _)| (r.owner.clone(), r.kind))
            .collect()
    }
}
