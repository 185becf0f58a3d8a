//! Firing scheduled operator actions (docs/cluster.md, "Scheduled
//! changes"), and reading the times operators give them.
//!
//! The schedules are replicated state ([`crate::machine::schedule`]). The
//! leader, or a device in no cluster, looks at them twice a second and
//! proposes one [`Action::FireSchedule`] per due schedule, stamped with its
//! clock; the state machine applies the action and marks the schedule fired
//! in that one command, so a firing proposed twice (two leaders in a row)
//! applies once. A leader that sees no quorum proposes nothing (and a
//! proposal that fails is tried again on the next look), so a schedule
//! fires when quorum returns, late, and its event says how late.

use std::{collections::HashMap, sync::Arc, time::Duration};

use crate::{
    command::{Action, Actor},
    machine::{now_ms, schedule::book_of},
    replication::Replication,
};

/// How often the firing device looks for due schedules.
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The name firings act as (with the firing device), in history and logs.
pub const FIRING_USER: &str = "scheduler";

/// Fires due schedules while this device leads (or is in no cluster), until
/// `stop`.
pub async fn run(
    replication: Arc<Replication>,
    device: String,
    stop: tokio_util::sync::CancellationToken,
) {
    // The last failure logged per schedule: logged again only when it
    // changes, not twice a second while quorum is away.
    let mut failing: HashMap<(u64, bool), String> = HashMap::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = stop.cancelled() => return,
        }
        // A leader without quorum proposes nothing: its entry would wait in
        // its log and commit when quorum returns, stamped with a time long
        // past, hiding how late the schedule really fired.
        if !replication.proposes_for_cluster() {
            failing.clear();
            continue;
        }
        let now = now_ms();
        let due: Vec<(u64, bool)> = book_of(&*replication.state().await)
            .schedules
            .iter()
            .filter_map(|s| s.due(now).map(|reverse| (s.id, reverse)))
            .collect();
        for (id, reverse) in due {
            let actor = Actor {
                user: FIRING_USER.into(),
                device: device.clone(),
            };
            match replication
                .propose(actor, None, Action::FireSchedule { id, reverse })
                .await
            {
                Ok(_) => {
                    failing.remove(&(id, reverse));
                }
                Err(e) => {
                    let why = e.to_string();
                    if failing.get(&(id, reverse)) != Some(&why) {
                        tracing::warn!(schedule = id, reverse, error = %why, "a due schedule could not fire yet; trying again");
                        failing.insert((id, reverse), why);
                    }
                }
            }
        }
    }
}

/// A time as an operator writes it, in ms since the epoch: RFC 3339 with
/// its offset (`2026-12-01T02:00:00Z`, `2026-12-01T03:00:00+01:00`), or
/// relative to `now_ms` (`+30m`, `+2h`, `+1h30m`, `+45s`, `+1d`). A time
/// without an offset is refused: the device's and the operator's zones may
/// differ.
pub fn parse_time(text: &str, now_ms: u64) -> Result<u64, String> {
    let text = text.trim();
    if let Some(relative) = text.strip_prefix('+') {
        return parse_relative(relative)
            .map(|ms| now_ms.saturating_add(ms))
            .ok_or_else(|| {
                format!("\"{text}\" is not a relative time like +30m, +2h, +1h30m, +45s or +1d")
            });
    }
    parse_rfc3339(text).ok_or_else(|| {
        format!(
            "\"{text}\" is not a time: give RFC 3339 with its offset (2026-12-01T02:00:00Z, 2026-12-01T03:00:00+01:00) or a relative time (+30m)"
        )
    })
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
    fn times_absolute_with_offsets_and_relative() {
        let at = parse_time("2026-12-01T02:00:00Z", 0).unwrap();
        assert_eq!(crate::when::utc(at), "2026-12-01 02:00:00 UTC");
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
            let e = parse_time(bad, 0).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
    }
}
