use crate::SyntaxError;

/// RFC 3339 as atproto uses it: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, uppercase `T`
/// and `Z`, a timezone always present, and `-00:00` refused (it means "unknown offset").
/// Year 0000 is allowed, but not an instant before it (`0000-01-01T00:00:00+01:00`).
pub fn check_datetime(value: &str) -> Result<(), SyntaxError> {
    if parse(value.as_bytes()).is_some() {
        Ok(())
    } else {
        Err(SyntaxError::new("datetime"))
    }
}

/// Microseconds since the Unix epoch of an atproto datetime, or `None` if it is not one.
pub fn datetime_to_unix_micros(value: &str) -> Option<i64> {
    parse(value.as_bytes())?;
    let b = value.as_bytes();
    let num = |r: std::ops::Range<usize>| digits(b, r).map(i64::from);
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &value[19..];
    let mut micros = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        let padded = format!("{:0<6}", &fraction[..len.min(6)]);
        micros = padded.parse().ok()?;
        rest = &fraction[len..];
    }
    let offset_seconds = match rest.as_bytes() {
        [b'Z'] => 0,
        [sign, ..] => {
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            let total = hours * 3600 + minutes * 60;
            if *sign == b'-' { -total } else { total }
        }
        [] => return None,
    };
    // Days from the civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * m + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    Some(seconds * 1_000_000 + micros)
}

/// Now, in microseconds since the Unix epoch (0 on a clock set before it).
pub fn now_unix_micros() -> i64 {
    crate::UnixMicros::now().0
}

/// An atproto datetime (UTC, microseconds) for a time since the Unix epoch.
pub fn format_unix_micros(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let days = seconds.div_euclid(86_400);
    let in_day = seconds.rem_euclid(86_400);
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60,
        fraction / 1000
    )
}

fn digits(bytes: &[u8], range: std::ops::Range<usize>) -> Option<u32> {
    let slice = bytes.get(range)?;
    if !slice.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        slice
            .iter()
            .fold(0, |acc, b| acc * 10 + u32::from(b - b'0')),
    )
}

fn parse(b: &[u8]) -> Option<()> {
    if b.len() > 64
        || b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || b.get(10) != Some(&b'T')
    {
        return None;
    }
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let year = digits(b, 0..4)?;
    let month = digits(b, 5..7)?;
    let day = digits(b, 8..10)?;
    let hour = digits(b, 11..13)?;
    let minute = digits(b, 14..16)?;
    let second = digits(b, 17..19)?;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day == 0 || day > days_in_month || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &b[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let len = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        rest = &fraction[len..];
    }
    match rest {
        b"Z" => Some(()),
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let offset = [*h1, *h2, b':', *m1, *m2];
            let hours = digits(&offset, 0..2)?;
            let minutes = digits(&offset, 3..5)?;
            if hours > 23 || minutes > 59 || (*sign == b'-' && hours == 0 && minutes == 0) {
                return None;
            }
            // In UTC it would fall before year 0, which the interop vectors refuse.
            let ahead =
                *sign == b'+' && hours * 3600 + minutes * 60 > hour * 3600 + minute * 60 + second;
            if year == 0 && month == 1 && day == 1 && ahead {
                return None;
            }
            Some(())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::check_datetime;

    #[test]
    fn accepts_rfc3339_with_timezone() {
        for ok in [
            "2024-01-02T03:04:05Z",
            "2024-01-02T03:04:05.123Z",
            "2024-01-02T03:04:05.123456789+05:30",
            "2024-02-29T00:00:00Z",
            "1985-04-12T23:20:50.52-07:00",
        ] {
            assert!(check_datetime(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn converts_to_unix_microseconds() {
        use super::datetime_to_unix_micros as micros;
        assert_eq!(micros("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            micros("2024-01-02T03:04:05.5Z"),
            Some(1_704_164_645_500_000)
        );
        assert_eq!(
            micros("2024-01-02T04:04:05.5+01:00"),
            Some(1_704_164_645_500_000)
        );
        assert_eq!(micros("2000-02-29T00:00:00Z"), Some(951_782_400_000_000));
        assert_eq!(micros("not a date"), None);
        for value in [
            0,
            951_782_400_000_000,
            1_704_164_645_500_000,
            4_102_444_800_123_000,
        ] {
            let text = super::format_unix_micros(value);
            assert!(super::check_datetime(&text).is_ok(), "{text}");
            assert_eq!(micros(&text), Some(value), "{text}");
        }
    }

    #[test]
    fn refuses_other_shapes() {
        for bad in [
            "",
            "2024-01-02",
            "2024-01-02T03:04:05",
            "2024-01-02t03:04:05z",
            "2024-01-02 03:04:05Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-02T24:00:00Z",
            "2024-01-02T03:04:05.Z",
            "2024-01-02T03:04:05-00:00",
            "2024-01-02T03:04:05+0530",
            "yesterday",
        ] {
            assert!(check_datetime(bad).is_err(), "{bad}");
        }
    }
}
