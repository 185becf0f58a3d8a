//! Times and ages as people read them (the console and the CLI): civil UTC
//! dates from milliseconds since the Unix epoch, rough ages, and the times
//! operators write (schedules).

/// `2026-11-30 21:04:05 UTC`.
pub fn utc(ms: u64) -> String {
    let (date, (h, mi, s)) = civil(ms);
    format!("{date} {h:02}:{mi:02}:{s:02} UTC")
}

/// `2026-11-30T21:04:05Z`: RFC 3339 in UTC, as a schedule's time is
/// written (what [`parse_time`] reads again, to the second).
pub fn rfc3339(ms: u64) -> String {
    let (date, (h, mi, s)) = civil(ms);
    format!("{date}T{h:02}:{mi:02}:{s:02}Z")
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

/// A time an operator wrote that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhenError {
    /// `+` and not a duration after it.
    #[error("\"{0}\" is not a relative time like +30m, +2h, +1h30m, +45s or +1d")]
    NotRelative(String),
    /// Neither RFC 3339 with its offset nor a relative time.
    #[error(
        "\"{0}\" is not a time: give RFC 3339 with its offset (2026-12-01T02:00:00Z, 2026-12-01T03:00:00+01:00) or a relative time (+30m)"
    )]
    NotATime(String),
}

/// A time as an operator writes it, in ms since the epoch: RFC 3339 with
/// its offset (`2026-12-01T02:00:00Z`, `2026-12-01T03:00:00+01:00`), or
/// relative to `now_ms` (`+30m`, `+2h`, `+1h30m`, `+45s`, `+1d`). A time
/// without an offset is refused: the device's and the operator's zones may
/// differ.
pub fn parse_time(text: &str, now_ms: u64) -> Result<u64, WhenError> {
    let text = text.trim();
    if let Some(relative) = text.strip_prefix('+') {
        return parse_relative(relative)
            .map(|ms| now_ms.saturating_add(ms))
            .ok_or_else(|| WhenError::NotRelative(text.to_string()));
    }
    parse_rfc3339(text).ok_or_else(|| WhenError::NotATime(text.to_string()))
}

fn parse_relative(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut any = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => return None,
        };
        let n: u64 = number.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        number.clear();
        any = true;
    }
    (any && number.is_empty()).then_some(total)
}

fn parse_rfc3339(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = text.get(from..from + len)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' '))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return None;
    }
    let (y, mo, d) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (h, mi, s) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = text.get(19..)?;
    let mut millis = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            return None;
        }
        let first: String = fraction.get(..len)?.chars().take(3).collect();
        millis = format!("{first:0<3}").parse().ok()?;
        rest = fraction.get(len..)?;
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes().get(3) != Some(&b':') {
                return None;
            }
            let (oh, om) = (digits_of(rest, 1)?, digits_of(rest, 4)?);
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 60 + om)
        }
    };
    // Days from civil (Howard Hinnant's algorithm), the inverse of
    // `crate::when`'s.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if mo > 2 { mo - 3 } else { mo + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset_min * 60;
    let ms = secs.checked_mul(1000)?.checked_add(millis)?;
    u64::try_from(ms).ok()
}

fn digits_of(text: &str, from: usize) -> Option<i64> {
    let part = text.get(from..from + 2)?;
    part.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| part.parse().ok())?
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

    #[test]
    fn times_absolute_with_offsets_and_relative() {
        let at = parse_time("2026-12-01T02:00:00Z", 0).unwrap();
        assert_eq!(crate::when::utc(at), "2026-12-01 02:00:00 UTC");
        assert_eq!(rfc3339(at + 250), "2026-12-01T02:00:00Z");
        assert_eq!(parse_time(&rfc3339(at), 0), Ok(at));
        assert_eq!(parse_time("2026-12-01T03:00:00+01:00", 0), Ok(at));
        assert_eq!(parse_time("2026-11-30T21:30:00-04:30", 0), Ok(at));
        assert_eq!(parse_time("2026-12-01T02:00:00.250Z", 0), Ok(at + 250));
        assert_eq!(parse_time("1970-01-01T00:00:01Z", 0), Ok(1000));
        assert_eq!(parse_time("+30m", 1000), Ok(1000 + 1_800_000));
        assert_eq!(parse_time("+1h30m", 0), Ok(5_400_000));
        assert_eq!(parse_time("+2s", 5), Ok(2005));
        assert_eq!(parse_time("+1d", 0), Ok(86_400_000));
        for bad in [
            "2026-12-01T02:00:00",
            "2026-12-01 02:00",
            "2026-13-01T02:00:00Z",
            "2026-12-01T02:00:00+0100",
            "+",
            "+30",
            "+30x",
            "+m",
            "tomorrow",
            "",
            "2026-12-01T02:00:00.Z",
            "+99999999999999999999d",
        ] {
            let e = parse_time(bad, 0).unwrap_err().to_string();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
    }
}
