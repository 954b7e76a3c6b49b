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
    fn the_ends_of_the_range() {
        // u64 + i64 nanoseconds span 1677 to 2554: always a 4-digit year.
        for (t, off) in [(u64::MAX, i64::MAX), (0, i64::MIN), (u64::MAX, i64::MIN)] {
            assert_eq!(wall_time(t, off), reference(t, off), "t={t} off={off}");
        }
    }
}
