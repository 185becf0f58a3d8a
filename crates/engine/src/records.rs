//! The engine's steered records, a list per zone in the snapshot's zone
//! order, indexed as one list (zone by zone, in record order: the order of
//! [`Snapshot::steered_slots`](gtm_dns::snapshot::Snapshot::steered_slots),
//! which peers and the dependency index count in). An install moves the
//! list of a zone it keeps whole and builds only those of zones that
//! changed.

use super::{RecordKey, Steered};

/// The engine's records: boxed, so a list moves as pointers.
pub(super) type Records = Zoned<Box<Steered>>;

#[derive(Debug)]
pub(super) struct Zoned<T> {
    zones: Vec<Vec<T>>,
    /// The index after each zone's last item, counting all zones.
    ends: Vec<usize>,
}

impl<T> Default for Zoned<T> {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl<T> Zoned<T> {
    pub(super) fn new(zones: Vec<Vec<T>>) -> Self {
        let ends = zones
            .iter()
            .scan(0, |end, z| {
                *end += z.len();
                Some(*end)
            })
            .collect();
        Self { zones, ends }
    }

    /// The lists, zone by zone, for the next install to take apart.
    pub(super) fn into_zones(self) -> Vec<Vec<T>> {
        self.zones
    }

    pub(super) fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        let (zone, at) = self.place(i)?;
        self.zones.get_mut(zone)?.get_mut(at)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.iter_from(0)
    }

    /// The items from item `start` on, found without reading those before
    /// it (a page of a million records starts where it starts).
    pub(super) fn iter_from(&self, start: usize) -> impl Iterator<Item = &T> + '_ {
        let (zone, at) = self.place(start).unwrap_or((self.zones.len(), 0));
        let zones = self.zones.get(zone..).unwrap_or_default();
        zones
            .iter()
            .enumerate()
            .flat_map(move |(k, z)| z.get(if k == 0 { at } else { 0 }..).unwrap_or_default())
    }

    /// The zone of item `i`, and its index there.
    fn place(&self, i: usize) -> Option<(usize, usize)> {
        let zone = self.ends.partition_point(|&end| end <= i);
        let start = match zone.checked_sub(1) {
            Some(z) => *self.ends.get(z)?,
            None => 0,
        };
        (zone < self.zones.len()).then_some((zone, i - start))
    }
}

impl Records {
    /// The index of the record labelled `label` (`www.example.test/A`).
    pub(super) fn position(&self, label: &str) -> Option<usize> {
        let key = RecordKey::of(label)?;
        self.iter().position(|r| r.is(&key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's label names it again: its owner in any case, its type
    /// as written; other types and texts name nothing.
    #[test]
    fn a_label_names_the_record_it_was_made_of() {
        let config = gtm_model::parse(
            "[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n\
             [[domain.record]]\nname = \"*.Web\"\ntype = \"AAAA\"\n\
             addresses = [{ ip = \"2001:db8::1\" }]\n",
        )
        .unwrap();
        let compiled = gtm_model::compile(&config).unwrap();
        let spec = &compiled.zones[0].records[0];
        let key = RecordKey::of_spec(spec);
        assert_eq!(spec.label(), "*.web.example.test/AAAA");
        assert_eq!(RecordKey::of(&spec.label()), Some(key.clone()));
        assert_eq!(RecordKey::of("*.WEB.Example.test/AAAA"), Some(key));
        for other in [
            "*.web.example.test/A",
            "*.web.example.test/MX",
            "*.web.example.test",
        ] {
            assert_ne!(
                RecordKey::of(other),
                Some(RecordKey::of_spec(spec)),
                "{other}"
            );
        }
    }

    /// Indexed as the zones' lists one after the other, empty ones too.
    #[test]
    fn the_zones_lists_are_one_list() {
        let lists = vec![vec![0, 1], vec![], vec![2], vec![], vec![3, 4, 5], vec![]];
        let flat: Vec<i32> = lists.iter().flatten().copied().collect();
        let mut zoned = Zoned::new(lists);
        assert_eq!(zoned.len(), flat.len());
        assert_eq!(zoned.iter().copied().collect::<Vec<_>>(), flat);
        for start in 0..=flat.len() + 1 {
            let from: Vec<i32> = zoned.iter_from(start).copied().collect();
            assert_eq!(from, flat.get(start..).unwrap_or_default(), "from {start}");
        }
        for i in 0..flat.len() {
            *zoned.get_mut(i).unwrap() += 10;
        }
        assert_eq!(zoned.get_mut(flat.len()), None);
        let moved: Vec<i32> = zoned.into_zones().into_iter().flatten().collect();
        assert_eq!(moved, [10, 11, 12, 13, 14, 15]);
        assert_eq!(Zoned::<i32>::default().iter().count(), 0);
    }
}
