//! Per record of a compiled zone, a hash of its owner name, in record
//! order: a compile of a domain a write changed finds the records at the
//! changed names by reading 4 bytes a record, not every record (100,000
//! records read one by one were about a sixth of a one-record write).

use std::sync::{Arc, OnceLock};

use super::RecordSpec;

/// The hashes of a zone's record owners, made by the compile as the
/// records compile (a record kept from the compile before keeps its hash),
/// or when first read for a zone made otherwise. Not part of what a zone
/// is: two zones compare equal whatever their hashes hold.
#[derive(Clone, Default)]
pub struct OwnerHashes(OnceLock<Arc<[u32]>>);

impl OwnerHashes {
    /// Hashes made already, one per record in order.
    pub(super) fn given(hashes: Vec<u32>) -> Self {
        Self(OnceLock::from(Arc::<[u32]>::from(hashes)))
    }

    /// Whether the hashes are made (handed on, or read once).
    #[cfg(test)]
    pub(super) fn is_made(&self) -> bool {
        self.0.get().is_some()
    }

    /// The hashes of `records`' owners (the zone's own records).
    pub(super) fn of(&self, records: &[Arc<RecordSpec>]) -> &[u32] {
        self.0
            .get_or_init(|| records.iter().map(|r| owner_hash(&r.owner)).collect())
    }
}

impl PartialEq for OwnerHashes {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for OwnerHashes {}

impl std::fmt::Debug for OwnerHashes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnerHashes")
    }
}

/// A hash of an owner's lower-case wire form: equal owners hash alike;
/// FNV-1a, the same in every process.
pub(super) fn owner_hash(owner: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for &byte in owner {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}
