//! A changed domain compiled from its compile before: the records a write
//! did not touch, before and after the ones it did, keep their compiled
//! form, and only the changed ones are compiled and checked against the
//! names they share (design-scale.md, increment 4).

use std::sync::Arc;

use hickory_server::proto::rr::Name;

use super::ZoneSpec;
use crate::config::{Domain, Record, same_name};

/// How many of `d`'s records are `before`'s from the start and from the
/// end, when their compiled forms can be taken from `before`: the domain
/// is the same but for its records (what a record compiles against), its
/// compile made one record per configured record, and the change covers at
/// most half of the records (a whole compile is then as cheap).
pub(super) fn unchanged(d: &Domain, before: (&Domain, &ZoneSpec)) -> Option<(usize, usize)> {
    let (old, zone) = before;
    if !d.same_but_records(old) || zone.records.len() != old.records.len() {
        return None;
    }
    let (new, old) = (&d.records, &old.records);
    let (start, end) = crate::ends::same_ends(new, old, |a, b| a == b);
    let changed = (new.len() - start - end).max(old.len() - start - end);
    (changed <= new.len().max(old.len()) / 2).then_some((start, end))
}

/// Whether a changed record (`changed`, between the `start` records kept
/// from the start and the `end` kept from the end) has the name, as
/// [`same_name`] reads it, and the type of a kept one. A kept record's
/// owner is its name under `apex` (it compiled, so its name is relative),
/// so only the kept records whose owner hashes as that name would are
/// read, not every record of the domain.
pub(super) fn shares_a_kept_name(
    changed: &[Arc<Record>],
    before: (&Domain, &ZoneSpec),
    (start, end): (usize, usize),
    apex: &Name,
) -> bool {
    let (old, zone) = before;
    let hashes = zone.owner_hashes();
    let kept_end = old.records.len().saturating_sub(end);
    changed.iter().any(|c| {
        let name = c.name.trim_end_matches('.');
        let owner = if name == "@" {
            Ok(apex.clone())
        } else {
            super::rdata::fqdn(name, apex)
        };
        let Ok(owner) = owner else {
            // No kept record's name reads so: each made an owner.
            return false;
        };
        let hash = super::owners::owner_hash(&crate::names::wire_key(&owner));
        hashes
            .iter()
            .enumerate()
            .filter(|&(i, &h)| h == hash && (i < start || i >= kept_end))
            .any(|(i, _)| {
                old.records
                    .get(i)
                    .is_some_and(|k| k.kind == c.kind && same_name(&c.name, &k.name))
            })
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::compile::{compile, compile_from};

    fn text(records: &[&str]) -> String {
        crate::domain_text("ns1.a.test", records)
    }

    /// Each step compiled from the step before equals it compiled whole,
    /// zones and errors alike, and takes what it says from before.
    #[test]
    fn a_domain_compiled_from_before_is_what_a_whole_compile_gives() {
        let base = [
            "www A 192.0.2.1",
            "api A 192.0.2.2",
            "mail MX 10 mx.a.test.",
            "txt TXT one",
        ];
        // The records, and how many are kept from the start and the end.
        type Step<'a> = (Vec<&'a str>, Option<(usize, usize)>);
        let steps: Vec<Step> = vec![
            // One record replaced in the middle.
            (
                vec![base[0], "api A 192.0.2.9", base[2], base[3]],
                Some((1, 2)),
            ),
            // One appended, one removed.
            (
                vec![base[0], base[1], base[2], base[3], "new A 192.0.2.3"],
                Some((4, 0)),
            ),
            (vec![base[0], base[2], base[3]], Some((1, 2))),
            // A changed record's error, and one a kept record's name gives
            // (a CNAME beside an A), said as a whole compile says them.
            (vec![base[0], base[1], "mail MX bad", base[3]], Some((2, 1))),
            (
                vec![base[0], base[1], base[2], base[3], "@ CNAME www.a.test"],
                Some((4, 0)),
            ),
            (
                vec![base[0], base[1], base[2], base[3], "www CNAME api.a.test"],
                Some((4, 0)),
            ),
            // A name and type a kept record has: compiled whole.
            (
                vec![base[0], base[1], base[2], base[3], "WWW. A 192.0.2.4"],
                Some((4, 0)),
            ),
            // A changed record with the name and type of a kept one after
            // it, or spelt otherwise (case, a final dot): compiled whole,
            // so that it is refused as defined twice, as ever.
            (vec![base[0], "txt TXT two", base[2], base[3]], Some((1, 2))),
            (
                vec![base[0], base[1], base[2], base[3], "TXT. TXT three"],
                Some((4, 0)),
            ),
            // Everything changed: compiled whole.
            (
                vec!["x A 192.0.2.1", "y A 192.0.2.2", "z A 192.0.2.3"],
                None,
            ),
        ];
        let first = crate::parse(&text(&base)).unwrap();
        let compiled = compile(&first).unwrap();
        let mut refused = 0;
        for (records, expected) in steps {
            let next = crate::parse(&text(&records)).unwrap();
            let (old, new) = (&first.domains[0], &next.domains[0]);
            assert_eq!(
                unchanged(new, (old, &compiled.zones[0])),
                expected,
                "{records:?}"
            );
            let from = compile_from(&next, Some((&first, &compiled.zones)));
            let whole = compile(&next);
            match (from, whole) {
                (Ok(from), Ok(whole)) => {
                    assert_eq!(from.zones, whole.zones, "{records:?}");
                    // A compiled zone carries its owners' hashes (made
                    // as its records compile, or taken from before for
                    // the records kept), the ones its records give.
                    let zone = &from.zones[0];
                    assert!(zone.owners.is_made(), "{records:?}");
                    let fresh: Vec<u32> = zone
                        .records
                        .iter()
                        .map(|r| super::super::owners::owner_hash(&r.owner))
                        .collect();
                    assert_eq!(zone.owner_hashes(), &fresh[..], "{records:?}");
                    // A kept record is the one compiled before (the same
                    // allocation), not compiled again.
                    if expected.is_some_and(|(start, _)| start > 0) {
                        assert!(
                            Arc::ptr_eq(&from.zones[0].records[0], &compiled.zones[0].records[0]),
                            "{records:?}"
                        );
                    }
                }
                (Err(from), Err(whole)) => {
                    assert_eq!(from, whole, "{records:?}");
                    refused += 1;
                }
                (from, whole) => panic!("{records:?}: {from:?} against {whole:?}"),
            }
        }
        assert_eq!(
            refused, 6,
            "MX, the two CNAMEs, the second www A and the two TXTs at txt are refused"
        );
    }

    /// A zone's count of CNAMEs, kept over a chain of changes, is the one a
    /// whole compile counts.
    #[test]
    fn a_zone_compiled_from_before_counts_its_cnames_as_a_whole_compile() {
        let steps: [&[&str]; 5] = [
            &["www A 192.0.2.1", "c1 CNAME www.a.test", "api A 192.0.2.2"],
            &["www A 192.0.2.1", "api A 192.0.2.2"],
            &["www A 192.0.2.1", "api A 192.0.2.2", "c2 CNAME api.a.test"],
            &[
                "www A 192.0.2.1",
                "c3 CNAME www.a.test",
                "c2 CNAME api.a.test",
            ],
            &[
                "www A 192.0.2.9",
                "c3 CNAME www.a.test",
                "c2 CNAME api.a.test",
            ],
        ];
        let mut config = crate::parse(&text(steps[0])).unwrap();
        let mut compiled = compile(&config).unwrap();
        for records in &steps[1..] {
            let next = crate::parse(&text(records)).unwrap();
            let from = compile_from(&next, Some((&config, &compiled.zones))).unwrap();
            let whole = compile(&next).unwrap();
            assert_eq!(from.zones[0].cnames, whole.zones[0].cnames, "{records:?}");
            let expected = records.iter().filter(|r| r.contains("CNAME")).count();
            assert_eq!(from.zones[0].cnames, expected, "{records:?}");
            (config, compiled) = (next, from);
        }
    }

    #[test]
    fn a_domain_changed_beyond_its_records_is_compiled_whole() {
        let first = crate::parse(&text(&["www A 192.0.2.1"])).unwrap();
        let compiled = compile(&first).unwrap();
        let next = crate::parse(
            &text(&["www A 192.0.2.1", "api A 192.0.2.2"]).replace("ns1.a.test", "ns2.a.test"),
        )
        .unwrap();
        assert_eq!(
            unchanged(&next.domains[0], (&first.domains[0], &compiled.zones[0])),
            None
        );
    }
}
