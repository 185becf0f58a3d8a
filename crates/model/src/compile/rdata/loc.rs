//! LOC (RFC 1876): a location, read from its presentation form into its
//! 16 bytes, and written back.
//!
//! `d1 [m1 [s1]] N|S d2 [m2 [s2]] E|W alt[m] [size[m] [hp[m] [vp[m]]]]`.
//! Numbers are read as decimals (never floats), so what is written is what
//! is encoded.

const EQUATOR: u32 = 1 << 31;
/// The altitude's zero: 100,000 m below the reference, in centimetres.
const ALT_BASE: i64 = 10_000_000;

/// The 16 bytes of a LOC record written as `value`.
pub(super) fn parse(value: &str) -> Result<Vec<u8>, String> {
    let words: Vec<&str> = value.split_ascii_whitespace().collect();
    let mut at = 0;
    let lat = angle(&words, &mut at, ('N', 'S'), 90)?;
    let lon = angle(&words, &mut at, ('E', 'W'), 180)?;
    let alt_word = words.get(at).ok_or("the altitude is missing")?;
    at += 1;
    let alt = metres(alt_word, true)
        .ok_or_else(|| format!("\"{alt_word}\" is not an altitude in metres"))?;
    if !(-ALT_BASE..=i64::from(u32::MAX) - ALT_BASE).contains(&alt) {
        return Err(format!(
            "altitude \"{alt_word}\" is outside -100000m to 42849672.95m"
        ));
    }
    // Size 1 m, horizontal precision 10 km, vertical 10 m (RFC 1876 §3).
    let mut precisions = [100, 1_000_000, 1_000];
    for (i, what) in ["size", "horizontal precision", "vertical precision"]
        .iter()
        .enumerate()
    {
        let Some(word) = words.get(at) else { break };
        at += 1;
        let cm = metres(word, false)
            .filter(|cm| *cm <= 9_000_000_000)
            .ok_or_else(|| format!("\"{word}\" is not a {what} from 0 to 90000000m"))?;
        precisions[i] = cm;
    }
    if let Some(extra) = words.get(at) {
        return Err(format!("\"{extra}\" follows the vertical precision"));
    }
    let mut out = vec![0u8];
    out.extend(precisions.iter().map(|cm| precision(*cm)));
    out.extend_from_slice(&lat.to_be_bytes());
    out.extend_from_slice(&lon.to_be_bytes());
    out.extend_from_slice(&((alt + ALT_BASE) as u32).to_be_bytes());
    Ok(out)
}

/// Degrees, optional minutes and seconds, and a hemisphere letter, as
/// thousandths of a second of arc from the equator (or meridian) plus 2^31.
fn angle(
    words: &[&str],
    at: &mut usize,
    (pos, neg): (char, char),
    max: u64,
) -> Result<u32, String> {
    let mut parts = Vec::new();
    loop {
        let word = words
            .get(*at)
            .ok_or_else(|| format!("the {pos}/{neg} coordinate is missing its hemisphere"))?;
        *at += 1;
        if word.eq_ignore_ascii_case(&pos.to_string())
            || word.eq_ignore_ascii_case(&neg.to_string())
        {
            let negative = word.eq_ignore_ascii_case(&neg.to_string());
            let value = match parts[..] {
                [d] => degrees(d, 0, 0, max),
                [d, m] => degrees(d, m, 0, max),
                [d, m, s] => degrees(d, m, s, max),
                _ => None,
            }
            .ok_or_else(|| format!("the {pos}/{neg} coordinate is out of range"))?;
            let value = u32::try_from(value).map_err(|_| "out of range".to_string())?;
            return Ok(if negative {
                EQUATOR - value
            } else {
                EQUATOR + value
            });
        }
        let n = match parts.len() {
            0 | 1 => word.parse::<u64>().ok(),
            2 => thousandths(word),
            _ => None,
        }
        .ok_or_else(|| format!("\"{word}\" is not part of a {pos}/{neg} coordinate"))?;
        parts.push(n);
    }
}

/// `d` degrees, `m` minutes and `s_ms` thousandths of a second, in
/// thousandths of a second, at most `max` degrees.
fn degrees(d: u64, m: u64, s_ms: u64, max: u64) -> Option<u64> {
    if m >= 60 || s_ms >= 60_000 {
        return None;
    }
    let total = (d * 60 + m) * 60_000 + s_ms;
    (total <= max * 3_600_000).then_some(total)
}

/// A decimal with at most three places, in thousandths.
fn thousandths(word: &str) -> Option<u64> {
    decimal(word, 3).and_then(|v| u64::try_from(v).ok())
}

/// A distance in metres (`12.5m` or `12.5`), in centimetres; negative only
/// when `signed`.
fn metres(word: &str, signed: bool) -> Option<i64> {
    let word = word.strip_suffix(['m', 'M']).unwrap_or(word);
    let v = decimal(word, 2)?;
    (signed || v >= 0).then_some(v)
}

/// A decimal number with at most `places` places, scaled by 10^places.
fn decimal(word: &str, places: u32) -> Option<i64> {
    let (negative, digits) = match word.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, word),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > places as usize
        || whole.len() > 12
    {
        return None;
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut frac_v: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    frac_v *= 10i64.pow(places - frac.len() as u32);
    let v = whole.checked_mul(10i64.pow(places))?.checked_add(frac_v)?;
    Some(if negative { -v } else { v })
}

/// RFC 1876's size and precision byte: a mantissa and a power of ten of
/// centimetres, each 0 to 9.
fn precision(cm: i64) -> u8 {
    let mut exponent = 0u32;
    while exponent < 9 && cm >= 10i64.pow(exponent + 1) {
        exponent += 1;
    }
    let mantissa = (cm / 10i64.pow(exponent)).min(9) as u8;
    (mantissa << 4) | exponent as u8
}

/// Whether `data` is a LOC record's data: 16 bytes of version 0, its
/// precisions well formed.
pub(super) fn check(data: &[u8]) -> Result<(), String> {
    if data.len() != 16 {
        return Err(format!("LOC data is 16 bytes, not {}", data.len()));
    }
    if data[0] != 0 {
        return Err(format!("LOC version {} is not 0", data[0]));
    }
    if data[1..4].iter().any(|b| b >> 4 > 9 || b & 0x0f > 9) {
        return Err("a LOC precision byte has a digit over 9".into());
    }
    Ok(())
}

/// LOC data (16 bytes, checked) in its presentation form.
pub fn write(data: &[u8]) -> Option<String> {
    check(data).ok()?;
    let word = |i: usize| u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
    let coordinate = |v: u32, (pos, neg): (char, char)| {
        let (ms, hemi) = if v >= EQUATOR {
            (v - EQUATOR, pos)
        } else {
            (EQUATOR - v, neg)
        };
        let (d, rest) = (ms / 3_600_000, ms % 3_600_000);
        let (m, s) = (rest / 60_000, rest % 60_000);
        format!("{d} {m} {}.{:03} {hemi}", s / 1000, s % 1000)
    };
    let cm = |b: u8| i64::from(b >> 4) * 10i64.pow(u32::from(b & 0x0f));
    let m = |v: i64| {
        let sign = if v < 0 { "-" } else { "" };
        format!("{sign}{}.{:02}m", v.abs() / 100, v.abs() % 100)
    };
    Some(format!(
        "{} {} {} {} {} {}",
        coordinate(word(4), ('N', 'S')),
        coordinate(word(8), ('E', 'W')),
        m(i64::from(word(12)) - ALT_BASE),
        m(cm(data[1])),
        m(cm(data[2])),
        m(cm(data[3])),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_1876_example_encodes_and_writes_back() {
        // RFC 1876 §4's example, and its bytes from BIND's encoder.
        let data = parse("42 21 54 N 71 06 18 W -24m 30m").unwrap();
        assert_eq!(
            data,
            [
                0x00, 0x33, 0x16, 0x13, 0x89, 0x17, 0x2d, 0xd0, 0x70, 0xbe, 0x15, 0xf0, 0x00, 0x98,
                0x8d, 0x20
            ]
        );
        assert_eq!(
            write(&data).unwrap(),
            "42 21 54.000 N 71 6 18.000 W -24.00m 30.00m 10000.00m 10.00m"
        );
        assert_eq!(parse(&write(&data).unwrap()).unwrap(), data);
    }

    #[test]
    fn defaults_and_short_forms() {
        let a = parse("52 N 4 E 0").unwrap();
        assert_eq!(&a[1..4], &[0x12, 0x16, 0x13]);
        assert_eq!(parse("52 0 0 N 4 0 0 E 0m 1m 10000m 10m").unwrap(), a);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (bad, why) in [
            ("91 N 0 E 0", "out of range"),
            ("42 60 N 0 E 0", "out of range"),
            ("42 N 181 E 0", "out of range"),
            ("42 N 71 W", "altitude is missing"),
            ("42 N 71 W 0 1 2 3 4", "follows the vertical precision"),
            ("42 X 71 W 0", "not part of"),
            ("42 N 71 W -200000m", "outside"),
            ("42 N 71 W 0 -1m", "not a size"),
            ("42 N 71 W 1.234", "not an altitude"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
