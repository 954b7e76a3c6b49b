//! RFC 3339 UTC text for a kernel instant, the `time` of every log event:
//! formatted by hand (civil date from days, digits into a stack buffer)
//! because the writer stamps every event and the report path checks every
//! signal's `time` against its `t`. The same text as the `time` crate's
//! RFC 3339 formatter, which the tests hold it to: fraction without
//! trailing zeros, none when zero, `Z`.

/// RFC 3339 UTC with nanoseconds for a CLOCK_BOOTTIME instant.
pub fn wall_time(t: u64, boot_to_wall_ns: i64) -> String {
    let mut buf = [0u8; 30];
    let n = format(&mut buf, t as i128 + boot_to_wall_ns as i128);
    // Only ASCII digits and separators were written.
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Whether `text` is exactly [`wall_time`]`(t, boot_to_wall_ns)`, without
/// making the string: the report path asks it of every signal.
pub fn is_wall_time(text: &str, t: u64, boot_to_wall_ns: i64) -> bool {
    let mut buf = [0u8; 30];
    let n = format(&mut buf, t as i128 + boot_to_wall_ns as i128);
    text.as_bytes() == &buf[..n]
}

/// The instant (ns since the Unix epoch) whose [`wall_time`] text is
/// exactly `text`, if there is one in `i64`: how the model keeps a log's
/// odd `time` in eight bytes. Anything else (another layout, an offset,
/// trailing zeros) is `None`, and the caller keeps the text.
pub fn parse_wall_time(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b.len() > 30 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(r)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0i64, |v, &c| v * 10 + i64::from(c - b'0')))
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let frac = match &b[19..] {
        [b'Z'] => 0,
        [b'.', f @ .., b'Z'] if (1..=9).contains(&f.len()) => {
            num(20..20 + f.len())? * 10i64.pow(9 - f.len() as u32)
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec;
    let ns = i64::try_from(i128::from(secs) * 1_000_000_000 + i128::from(frac)).ok()?;
    // Only a text the formatter itself would write (no trailing zeros, a
    // real date) comes back as a number.
    let mut buf = [0u8; 30];
    let n = format(&mut buf, i128::from(ns));
    (&buf[..n] == b).then_some(ns)
}

/// (year, month, day) to days since 1970-01-01, proleptic Gregorian
/// (Howard Hinnant's `days_from_civil`, the inverse of `civil_from_days`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Writes the text of `ns` (since the Unix epoch) into `out`; its length, 0
/// when the year is out of RFC 3339's range.
fn format(out: &mut [u8; 30], ns: i128) -> usize {
    const NS: i128 = 1_000_000_000;
    let secs = ns.div_euclid(NS);
    let nanos = ns.rem_euclid(NS) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let Ok(days) = i64::try_from(days) else {
        return 0;
    };
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return 0;
    }
    let mut put = Put { out, at: 0 };
    put.digits(y as u32, 4);
    put.byte(b'-');
    put.digits(m, 2);
    put.byte(b'-');
    put.digits(d, 2);
    put.byte(b'T');
    put.digits(sod / 3600, 2);
    put.byte(b':');
    put.digits(sod / 60 % 60, 2);
    put.byte(b':');
    put.digits(sod % 60, 2);
    if nanos != 0 {
        let mut width = 9;
        let mut frac = nanos;
        while frac.is_multiple_of(10) {
            frac /= 10;
            width -= 1;
        }
        put.byte(b'.');
        put.digits(frac, width);
    }
    put.byte(b'Z');
    put.at
}

struct Put<'a> {
    out: &'a mut [u8; 30],
    at: usize,
}

impl Put<'_> {
    fn byte(&mut self, b: u8) {
        self.out[self.at] = b;
        self.at += 1;
    }

    /// `v` in exactly `width` digits, zero-padded.
    fn digits(&mut self, mut v: u32, width: usize) {
        for i in (0..width).rev() {
            self.out[self.at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        self.at += width;
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::wall_time;

    fn reference(t: u64, off: i64) -> String {
        let ns = t as i128 + off as i128;
        time::OffsetDateTime::from_unix_timestamp_nanos(ns)
            .ok()
            .and_then(|d| {
                d.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_default()
    }

    #[test]
    fn same_text_as_the_time_crate() {
        // Offsets around today, the epoch, leap days, centuries and the
        // ends of the range; instants with every count of trailing zeros.
        let offsets: [i64; 8] = [
            1_764_526_000_000_000_000, // 2025-11-30
            0,
            -1,
            951_782_400_000_000_000,    // 2000-02-29
            -2_208_988_800_000_000_000, // 1900-01-01
            4_107_542_400_000_000_000,  // 2100-03-01
            i64::MIN,                   // 1677
            i64::MAX,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for off in offsets {
            for i in 0..20_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let t = match i % 5 {
                    0 => x % 1_000_000_000_000_000,
                    1 => (x % 1_000_000_000) * 1_000_000_000,
                    2 => (x % 1_000_000_000_000) * 1_000,
                    3 => i * 100_000_000,
                    _ => x,
                };
                assert_eq!(wall_time(t, off), reference(t, off), "t={t} off={off}");
            }
        }
    }

    #[test]
    fn parse_is_the_inverse_of_format() {
        use super::{is_wall_time, parse_wall_time};
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = match i % 3 {
                0 => x % 5_000_000_000_000_000_000,
                1 => (x % 1_000_000_000) * 1_000_000_000,
                _ => (x % 1_000_000_000_000) * 1_000,
            };
            let off = 1_764_526_000_000_000_000 - (i as i64) * 7_777_777_777_777;
            let text = wall_time(t, off);
            let ns = parse_wall_time(&text).expect(&text);
            assert_eq!(i128::from(ns), t as i128 + off as i128, "{text}");
            assert!(is_wall_time(&text, t, off));
            assert!(!is_wall_time(&text, t + 1, off));
        }
        for odd in [
            "",
            "2026-11-30T20:57:21.410838850Z",
            "2026-11-30T20:57:21.Z",
            "2026-11-30T20:57:21.4108388561Z",
            "2026-11-30T20:57:21+00:00",
            "2026-02-30T20:57:21Z",
            "2026-11-30t20:57:21Z",
            "2026-11-30T20:57:21 Z",
            "+026-11-30T20:57:21Z",
            "9999-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_wall_time(odd), None, "{odd}");
        }
        assert_eq!(parse_wall_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_wall_time("1969-12-31T23:59:59.999999999Z"), Some(-1));
    }

    #[test]
    fn the_ends_of_the_range() {
        // u64 + i64 nanoseconds span 1677 to 2554: always a 4-digit year.
        for (t, off) in [(u64::MAX, i64::MAX), (0, i64::MIN), (u64::MAX, i64::MIN)] {
            assert_eq!(wall_time(t, off), reference(t, off), "t={t} off={off}");
        }
    }
}
