//! A zone's names, in shards by a hash of the name. Each shard is shared
//! between snapshots: a zone derived from its build before copies only the
//! shards its change touches, and dropping the zone it replaced frees only
//! those (a one-record write to a zone of 100,000 names copied and freed
//! all of them).

use std::{collections::HashMap, sync::Arc};

use super::{Node, hash_bytes};

/// About how many names a shard holds when a zone is built (from half to
/// as many): a zone of 100,000 names has 128 shards, one of a few hundred
/// names a single one.
const NAMES_PER_SHARD: usize = 1536;
/// At most this many shards (a power of two).
const MAX_SHARDS: usize = 1024;

type Shard = HashMap<Box<[u8]>, Node>;

/// Names keyed by their lower-case wire form.
#[derive(Debug, Clone)]
pub(super) struct Nodes {
    /// A power of two of them; a name's shard is its hash modulo their
    /// number, fixed when the zone is first built.
    shards: Box<[Arc<Shard>]>,
}

impl Nodes {
    /// Room for about `names` names.
    pub(super) fn with_capacity(names: usize) -> Self {
        let count = (names / NAMES_PER_SHARD)
            .next_power_of_two()
            .clamp(1, MAX_SHARDS);
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
            n => (hash_bytes(key) as usize) & (n - 1),
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
