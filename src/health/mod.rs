//! The health engine (spec §1): probers, the scheduler that runs them, the
//! threshold state machine and scenario decisions. See docs/health.md.

pub mod scenario;
pub mod threshold;
