//! What decided a steered answer, noted by the answer path for dnstap.
//!
//! The answer paths take a [`Note`]: `()` when the query is not tapped,
//! whose note does nothing and is compiled away, or an
//! `Option<Steered>` that keeps the first steered record answered.

use std::sync::Arc;

use crate::snapshot::{Choice, Client, RrsetAnswer, Snapshot};

/// A steered record's answer to one query, as the answer path chose it:
/// the snapshot and the answer it read, and the choice. Put into words
/// by the writer ([`super::extra`]), off the DNS workers.
#[derive(Debug, Clone)]
pub struct Steered {
    pub snapshot: Arc<Snapshot>,
    /// The index of the record's zone in `snapshot`.
    pub zone: usize,
    /// The record's name, lower-case wire form.
    pub owner: Box<[u8]>,
    pub rtype: u16,
    pub answer: Arc<RrsetAnswer>,
    pub choice: Choice,
    pub client: Client,
}

/// Where the answer path notes a steered answer.
pub trait Note {
    /// Notes the steered answer `make` gives; called only for a steered
    /// record's slot.
    fn steered(&mut self, make: impl FnOnce() -> Steered);
}

/// Not tapped: nothing noted, nothing made.
impl Note for () {
    #[inline(always)]
    fn steered(&mut self, _make: impl FnOnce() -> Steered) {}
}

/// Tapped: the first steered record of the answer.
impl Note for Option<Steered> {
    fn steered(&mut self, make: impl FnOnce() -> Steered) {
        if self.is_none() {
            *self = Some(make());
        }
    }
}
