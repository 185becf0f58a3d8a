//! Limits of the DNS transports that more than one part reads: the TCP
//! listener enforces the idle timeout, the keepalive option advertises it.

use std::time::Duration;

/// A connection that sends no complete message for this long is closed.
pub const IDLE: Duration = Duration::from_secs(10);
