//! A zone's names, in shards by a hash of the name. Each shard is shared
//! between snapshots: a zone derived from its build before copies only the
//! shards its change touches, and dropping the zone it replaced frees only
//! those (a one-record write to a zone of 100,000 names copied and freed
//! all of them).

use std::{collections::HashMap, sync::Arc};

use super::{Node, hash_bytes};

/// At most how many names a shard holds, on average, when a zone is
/// built: a shard's table of 2,048 buckets holds 1,792 before it grows, so
/// a large zone's shards are about 80 % full, with room for a hash's
/// spread (a power-of-two number of shards left them 61 % full at 10,000
/// names). A zone of 100,000 names has 61 shards, one of a few hundred
/// names a single one.
const NAMES_PER_SHARD: usize = 1650;
/// At most this many shards.
const MAX_SHARDS: usize = 1024;

type Shard = HashMap<Box<[u8]>, Node>;

/// Names keyed by their lower-case wire form.
#[derive(Debug, Clone)]
pub(super) struct Nodes {
    /// A name's shard is its hash scaled to their number (fixed when the
    /// zone is first built).
    shards: Box<[Arc<Shard>]>,
}

impl Nodes {
    /// Room for about `names` names.
    pub(super) fn with_capacity(names: usize) -> Self {
        let count = names.div_ceil(NAMES_PER_SHARD).clamp(1, MAX_SHARDS);
        let each = names / count + 1;
        Self {
            shards: (0..count)
                .map(|_| Arc::new(HashMap::with_capacity(each)))
                .collect(),
        }
    }

    fn index(&self, key: &[u8]) -> usize {
        match self.shards.len() {
            1 => 0,
            // The hash's high bits pick the shard: `hash * n / 2^64`.
            n => ((u128::from(hash_bytes(key)) * n as u128) >> 64) as usize,
        }
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&Node> {
        self.shards.get(self.index(key))?.get(key)
    }

    pub(super) fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// The shard holding `key`, copied first when it is shared.
    fn shard_mut(&mut self, key: &[u8]) -> Option<&mut Shard> {
        let i = self.index(key);
        self.shards.get_mut(i).map(Arc::make_mut)
    }

    pub(super) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Node> {
        self.shard_mut(key)?.get_mut(key)
    }

    pub(super) fn insert(&mut self, key: Box<[u8]>, node: Node) {
        if let Some(shard) = self.shard_mut(&key) {
            shard.insert(key, node);
        }
    }

    pub(super) fn remove(&mut self, key: &[u8]) {
        if self.contains_key(key)
            && let Some(shard) = self.shard_mut(key)
        {
            shard.remove(key);
        }
    }

    /// Every name, in no order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Box<[u8]>, &Node)> {
        self.shards.iter().flat_map(|shard| shard.iter())
    }

    /// Every name, in no order, each shard copied first when it is shared.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&Box<[u8]>, &mut Node)> {
        self.shards
            .iter_mut()
            .flat_map(|shard| Arc::make_mut(shard).iter_mut())
    }

    /// How many shards `self` shares with `other` (the same allocation).
    #[cfg(test)]
    pub(super) fn shared_with(&self, other: &Nodes) -> usize {
        self.shards
            .iter()
            .zip(other.shards.iter())
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    }

    #[cfg(test)]
    pub(super) fn shards(&self) -> usize {
        self.shards.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node {
            rrsets: Vec::new(),
            nodata_wire: Arc::from(&b""[..]),
            signed_nodata: None,
        }
    }

    fn key(i: usize) -> Box<[u8]> {
        let label = format!("r{i}");
        let mut k = vec![label.len() as u8];
        k.extend_from_slice(label.as_bytes());
        k.extend_from_slice(b"\x04test\x00");
        k.into()
    }

    #[test]
    fn names_are_found_in_their_shard_and_a_change_copies_one_shard() {
        let mut nodes = Nodes::with_capacity(100_000);
        assert!(nodes.shards() > 1, "{}", nodes.shards());
        for i in 0..100_000 {
            nodes.insert(key(i), node());
        }
        assert_eq!(nodes.iter().count(), 100_000);
        assert!((0..100_000).all(|i| nodes.contains_key(&key(i))));
        assert!(!nodes.contains_key(&key(100_000)));

        let mut changed = nodes.clone();
        changed.remove(&key(7));
        changed.insert(key(100_001), node());
        // An absent name taken out copies nothing.
        changed.remove(&key(100_002));
        assert!(!changed.contains_key(&key(7)) && changed.contains_key(&key(100_001)));
        assert!(nodes.contains_key(&key(7)) && !nodes.contains_key(&key(100_001)));
        let touched = if nodes.index(&key(7)) == nodes.index(&key(100_001)) {
            1
        } else {
            2
        };
        assert_eq!(changed.shared_with(&nodes), nodes.shards() - touched);
    }

    /// Shards are built most of the way full, and none grows while the
    /// names it was built for go in.
    #[test]
    fn shards_are_sized_to_their_names() {
        for names in [10_001, 100_001, 250_000] {
            let mut nodes = Nodes::with_capacity(names);
            let room = |n: &Nodes| n.shards.iter().map(|s| s.capacity()).sum::<usize>();
            let before = room(&nodes);
            for i in 0..names {
                nodes.insert(key(i), node());
            }
            assert_eq!(room(&nodes), before, "{names}: a shard grew");
            assert!(
                before * 10 <= names * 13,
                "{names} names in room for {before}"
            );
        }
    }

    #[test]
    fn a_small_zone_has_one_shard() {
        let mut nodes = Nodes::with_capacity(10);
        assert_eq!(nodes.shards(), 1);
        nodes.insert(key(1), node());
        assert!(nodes.get(&key(1)).is_some());
        assert!(nodes.get_mut(&key(1)).is_some());
        assert_eq!(nodes.iter_mut().count(), 1);
    }
}
