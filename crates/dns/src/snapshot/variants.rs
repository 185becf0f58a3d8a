//! A group's encoded answer sections, one per balance variant, in one
//! allocation: a large zone holds a group per record, most with a single
//! variant, and a list of boxed sections took two allocations for it.
//!
//! Layout: the number of variants (u32), then per variant the end of its
//! section, counted from where the sections start (u32), and its record
//! count (u16), then the sections one after another. All little-endian.

/// The bytes of one variant's header entry.
const ENTRY: usize = 6;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Variants(Box<[u8]>);

impl Variants {
    /// The sections in variant order, each with its record count. `None`
    /// when they do not fit 4 GiB together.
    pub fn new(sections: &[(Box<[u8]>, u16)]) -> Option<Self> {
        let total: usize = sections.iter().map(|(s, _)| s.len()).sum();
        let head = 4 + ENTRY * sections.len();
        let mut out = Vec::with_capacity(head + total);
        out.extend_from_slice(&u32::try_from(sections.len()).ok()?.to_le_bytes());
        let mut end = 0usize;
        for (section, count) in sections {
            end += section.len();
            out.extend_from_slice(&u32::try_from(end).ok()?.to_le_bytes());
            out.extend_from_slice(&count.to_le_bytes());
        }
        for (section, _) in sections {
            out.extend_from_slice(section);
        }
        Some(Self(out.into_boxed_slice()))
    }

    /// How many variants there are.
    pub fn len(&self) -> usize {
        self.u32_at(0).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Variant `v`'s section and its record count.
    pub fn get(&self, v: usize) -> Option<(&[u8], u16)> {
        let n = self.len();
        if v >= n {
            return None;
        }
        let head = 4 + ENTRY * n;
        let start = match v.checked_sub(1) {
            Some(before) => self.u32_at(4 + ENTRY * before)?,
            None => 0,
        };
        let at = 4 + ENTRY * v;
        let end = self.u32_at(at)?;
        let count = u16::from_le_bytes(self.0.get(at + 4..at + 6)?.try_into().ok()?);
        Some((self.0.get(head + start..head + end)?, count))
    }

    fn u32_at(&self, at: usize) -> Option<usize> {
        let bytes = self.0.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(bytes) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_gives_back_its_section_and_count() {
        for n in [0usize, 1, 2, 5] {
            let sections: Vec<(Box<[u8]>, u16)> = (0..n)
                .map(|i| (vec![i as u8; i * 3 + 1].into_boxed_slice(), i as u16 + 7))
                .collect();
            let variants = Variants::new(&sections).unwrap();
            assert_eq!(variants.len(), n);
            for (i, (section, count)) in sections.iter().enumerate() {
                assert_eq!(variants.get(i), Some((&section[..], *count)), "{n}: {i}");
            }
            assert_eq!(variants.get(n), None);
        }
        assert_eq!(Variants::default().len(), 0);
        assert_eq!(Variants::default().get(0), None);
        // Empty sections in between.
        let sections = [
            (Box::from(&b"ab"[..]), 1),
            (Box::default(), 0),
            (Box::from(&b"c"[..]), 1),
        ];
        let variants = Variants::new(&sections).unwrap();
        assert_eq!(variants.get(1), Some((&b""[..], 0)));
        assert_eq!(variants.get(2), Some((&b"c"[..], 1)));
    }
}
