//! The application's half of the state machine: what a committed command
//! does to the replicated map.
//!
//! gtm-cluster replicates opaque command bytes. Every device applies every
//! committed command, in log order, to its copy of the map through the
//! application's [`Machine`]; the [`Effect`] it returns is written in the same
//! batch as the applied pointer, and its outcome goes back to the device
//! that proposed the command (see [`ClusterNode::propose`](crate::ClusterNode::propose)).

use std::fmt;

use crate::types::{Map, Value, Write};

/// What one command does: the writes to make (none for a rejected command)
/// and the outcome returned to its proposer, both opaque to this crate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effect {
    pub writes: Vec<Write>,
    pub outcome: Vec<u8>,
}

/// The application's deterministic state machine.
///
/// `apply` must depend only on `kv` (the committed map before the command)
/// and `command`: every device applies the same commands to the same map
/// and must reach the same map. It runs on the blocking pool (a command may
/// parse and validate a large configuration) and must not panic on any
/// bytes: a command that does not decode is rejected, not applied.
pub trait Machine: Send + Sync + fmt::Debug + 'static {
    /// `index` is the command's log index (the same on every device).
    fn apply(&self, kv: &Map, index: u64, command: &[u8]) -> Effect;

    /// A command of at least [`PREPARE_BYTES`] was appended to this
    /// device's log at `index`, not yet committed (on a follower: as it
    /// arrived from the leader). The application may start work that its
    /// `apply` of the command at that index takes instead of doing it then
    /// (parsing a large configuration). It must return at once, doing the
    /// work on a thread of its own, and must not change what `apply` does:
    /// the entry may still be replaced before it commits. Nothing, unless
    /// the application says otherwise.
    fn prepare(&self, _index: u64, _command: &Value) {}
}

/// The size from which an appended command is offered to
/// [`Machine::prepare`].
pub const PREPARE_BYTES: usize = 1024 * 1024;

/// The simplest application, for this crate's own tests: a command is a
/// batch of writes (bincode), applied as it is; one that does not decode
/// is rejected (no writes), with its error as the outcome.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Writes;

#[cfg(test)]
impl Writes {
    pub(crate) fn command(writes: Vec<Write>) -> crate::types::Proposal {
        crate::types::Proposal(crate::types::encode(&writes).expect("encode").into())
    }
}

#[cfg(test)]
impl Machine for Writes {
    fn apply(&self, _kv: &Map, _index: u64, command: &[u8]) -> Effect {
        match crate::types::decode::<Vec<Write>>(command) {
            Ok(writes) => Effect {
                writes,
                outcome: Vec::new(),
            },
            Err(e) => Effect {
                writes: Vec::new(),
                outcome: e.to_string().into_bytes(),
            },
        }
    }
}
