use crate::SyntaxError;

/// RFC 3339 as atproto uses it: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, uppercase `T`
/// and `Z`, a timezone always present, and `-00:00` refused (it means "unknown offset").
pub fn check_datetime(value: &str) -> Result<(), SyntaxError> {
    if parse(value.as_bytes()).is_some() {
        Ok(())
    } else {
        Err(SyntaxError::new("datetime"))
    }
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
    if year == 0 || day == 0 || day > days_in_month || hour > 23 || minute > 59 || second > 60 {
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
