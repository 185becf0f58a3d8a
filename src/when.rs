//! Times and ages as people read them (the console and the CLI): civil UTC
//! dates from milliseconds since the Unix epoch, and rough ages.

/// `2026-11-30 21:04:05 UTC`.
pub fn utc(ms: u64) -> String {
    let (date, (h, mi, s)) = civil(ms);
    format!("{date} {h:02}:{mi:02}:{s:02} UTC")
}

/// `2026-11-30 21:04:05.123Z`, as the CLI's tables show times.
pub fn iso_ms(ms: u64) -> String {
    let (date, (h, mi, s)) = civil(ms);
    format!("{date} {h:02}:{mi:02}:{s:02}.{:03}Z", ms % 1000)
}

/// `2026-11-30`.
pub fn date(ms: u64) -> String {
    civil(ms).0
}

/// The civil UTC year, month (1..=12) and day of `ms`.
pub fn ymd(ms: u64) -> (i64, u32, u32) {
    let days = ms / 1000 / 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

/// The date (`2026-11-30`) and the time of day of `ms`.
fn civil(ms: u64) -> (String, (u64, u64, u64)) {
    let rem = ms / 1000 % 86_400;
    let (y, m, d) = ymd(ms);
    (
        format!("{y:04}-{m:02}-{d:02}"),
        (rem / 3600, rem % 3600 / 60, rem % 60),
    )
}

/// `4 s`, `3 min`, `2 h`, `5 d`: how long ago, roughly.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..120 => format!("{s} s"),
        120..7200 => format!("{} min", s / 60),
        7200..172_800 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_ages_read_as_people_write_them() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_780_000_000_123), "2026-05-28 20:26:40 UTC");
        assert_eq!(iso_ms(1_780_000_000_123), "2026-05-28 20:26:40.123Z");
        assert_eq!(age(4_999), "4 s");
        assert_eq!(age(180_000), "3 min");
        assert_eq!(age(3 * 3_600_000), "3 h");
        assert_eq!(age(5 * 86_400_000), "5 d");
    }
}
