//! Delegations: the names an NS record hands to a child zone. At such a
//! name only NS and DS are served; below it only glue (A and AAAA), which
//! a referral carries; anything else there would be occluded (RFC 1034
//! §4.2.1) and is refused.

use std::{collections::BTreeSet, sync::Arc};

use hickory_server::proto::rr::Name;

use super::{Cx, RecordSpec, paths::record_path};
use crate::{config::RecordType, names::key_name};

/// The delegation points of a zone, by owner (lower-case wire form).
pub type Cuts = BTreeSet<Box<[u8]>>;

/// The delegation point at or above the name `key` (lower-case wire form)
/// among `cuts`: the highest one, as a suffix of `key`.
pub fn cut_of<'k>(cuts: &Cuts, key: &'k [u8]) -> Option<&'k [u8]> {
    if cuts.is_empty() {
        return None;
    }
    let mut found = None;
    let mut at = 0;
    while let Some(&len) = key.get(at).filter(|&&l| l != 0) {
        let suffix = key.get(at..)?;
        if cuts.contains(suffix) {
            found = Some(suffix);
        }
        at += 1 + usize::from(len);
    }
    found
}

impl Cx {
    /// The delegation points of a zone's `records`, each record checked
    /// against them: `checked` (the records at the names a change touched)
    /// for what is at one name, every record for what is below a
    /// delegation when the zone has any. `inherited`: delegations of the
    /// zone a view's zone takes records from.
    pub(super) fn delegations(
        &mut self,
        path: &str,
        apex: &Name,
        records: &[Arc<RecordSpec>],
        checked: &[&RecordSpec],
        inherited: &Cuts,
    ) -> Cuts {
        let own: Cuts = records
            .iter()
            .filter(|r| r.kind == RecordType::NS)
            .map(|r| r.owner.clone())
            .collect();
        for r in checked {
            if r.kind == RecordType::DS && !own.contains(&r.owner) {
                self.err(
                    record_path(path, apex, r),
                    format!(
                        "a DS record sits at a delegation: add an NS record at {} too",
                        key_name(&r.owner)
                    ),
                );
            }
            if own.contains(&r.owner) && !matches!(r.kind, RecordType::NS | RecordType::DS) {
                self.err(
                    record_path(path, apex, r),
                    format!(
                        "{} is delegated (it has an NS record): only NS and DS are served there, the rest belongs in the child zone",
                        key_name(&r.owner)
                    ),
                );
            }
        }
        let all: Cuts = own.union(inherited).cloned().collect();
        if all.is_empty() {
            return all;
        }
        for r in records {
            let Some(cut) = r
                .owner
                .get(1 + usize::from(r.owner.first().copied().unwrap_or(0))..)
                .and_then(|parent| cut_of(&all, parent))
            else {
                continue;
            };
            if !matches!(r.kind, RecordType::A | RecordType::AAAA) {
                self.err(
                    record_path(path, apex, r),
                    format!(
                        "is below the delegation {} (its NS record): only glue (A, AAAA) is served there, the rest belongs in the child zone",
                        key_name(cut)
                    ),
                );
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::wire_key;

    #[test]
    fn the_highest_cut_above_a_name_is_found() {
        let key = |s: &str| wire_key(&Name::from_ascii(s).unwrap());
        let cuts: Cuts = [key("sub.example.test."), key("deep.sub.example.test.")]
            .into_iter()
            .collect();
        let name = key("ns1.deep.sub.example.test.");
        assert_eq!(cut_of(&cuts, &name), Some(&*key("sub.example.test.")));
        assert_eq!(
            cut_of(&cuts, &key("sub.example.test.")),
            Some(&*key("sub.example.test."))
        );
        assert_eq!(cut_of(&cuts, &key("www.example.test.")), None);
        assert_eq!(cut_of(&Cuts::new(), &name), None);
    }
}
