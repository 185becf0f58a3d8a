//! The health engine (spec §1): probers, the scheduler that runs them, the
//! threshold state machine and scenario decisions. See docs/health.md.

mod convert;
mod instance;
pub mod probe;
pub mod scenario;
pub mod scheduler;
pub mod threshold;

pub use convert::{probe_spec, target_of};
pub use instance::{Instance, instances};
