//! DNSSEC (docs/dnssec.md): zone keys kept in the replicated state
//! ([`keys`]) and online signing of the answers as they are built
//! ([`signer`]). The worker that makes missing keys and renews signatures
//! is `workers::dnssec`.
//!
//! The DNS path never signs what it can know in advance: static and steered
//! answers are signed with the snapshot (per place group and balance
//! variant), so a signed answer stays a lookup and a copy. Only a name that
//! does not exist and a wildcard's expansion are signed per query.

pub mod keys;
pub mod signer;
