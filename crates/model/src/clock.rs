//! The one wall clock: milliseconds since the Unix epoch, as commands,
//! events, history and TSIG carry times. A clock set before 1970 reads 0.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
