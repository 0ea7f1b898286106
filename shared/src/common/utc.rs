//! Instants in UTC as Unix milliseconds, read and written as RFC 3339
//! (`2026-12-01T10:00:00Z`, `2026-12-01T11:00:00+01:00`, fractions of a second allowed).
//!
//! Invariants: only real dates and times parse; an offset is folded into the instant, so every
//! instant prints back in UTC with a `Z`.

use crate::common::day::{civil_from_days, days_from_civil, days_in};

pub const SECOND_MS: i64 = 1_000;
pub const MINUTE_MS: i64 = 60 * SECOND_MS;
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
pub const DAY_MS: i64 = 24 * HOUR_MS;

/// The instant an RFC 3339 text names, in Unix milliseconds (digits past the millisecond are
/// dropped); `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let text = text.trim();
    let bytes = text.as_bytes();
    if bytes.len() < 20 || !matches!(bytes[10], b'T' | b't' | b' ') {
        return None;
    }
    let day = crate::common::day::Day::parse(&text[..10])?;
    let number = |s: &str| -> Option<i64> {
        (s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let rest = &text[11..];
    if rest.len() < 9 || &rest[2..3] != ":" || &rest[5..6] != ":" {
        return None;
    }
    let (hour, minute, second) = (
        number(&rest[0..2])?,
        number(&rest[3..5])?,
        number(&rest[6..8])?,
    );
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut tail = &rest[8..];
    let mut millis = 0;
    if let Some(fraction) = tail.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = padded.parse::<i64>().ok()?;
        tail = &fraction[digits..];
    }
    let offset_ms = match tail {
        "Z" | "z" => 0,
        _ if tail.len() == 6 && matches!(&tail[0..1], "+" | "-") && &tail[3..4] == ":" => {
            let (h, m) = (number(&tail[1..3])?, number(&tail[4..6])?);
            if h > 23 || m > 59 {
                return None;
            }
            let sign = if &tail[0..1] == "-" { -1 } else { 1 };
            sign * (h * HOUR_MS + m * MINUTE_MS)
        }
        _ => return None,
    };
    let days = i64::from(day.days_since_epoch());
    Some(
        days * DAY_MS + hour * HOUR_MS + minute * MINUTE_MS + second * SECOND_MS + millis
            - offset_ms,
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ`, with `.mmm` when the instant is not on a whole second.
pub fn format_rfc3339(ms: i64) -> String {
    let days = ms.div_euclid(DAY_MS);
    let in_day = ms.rem_euclid(DAY_MS);
    let (y, mo, d) = civil_from_days(i32::try_from(days).unwrap_or(i32::MAX));
    let (h, mi, s, milli) = (
        in_day / HOUR_MS,
        in_day % HOUR_MS / MINUTE_MS,
        in_day % MINUTE_MS / SECOND_MS,
        in_day % SECOND_MS,
    );
    if milli == 0 {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
    }
}

/// The start of the minute holding `ms`.
pub fn floor_minute(ms: i64) -> i64 {
    ms - ms.rem_euclid(MINUTE_MS)
}

/// The start of the hour holding `ms`.
pub fn floor_hour(ms: i64) -> i64 {
    ms - ms.rem_euclid(HOUR_MS)
}

/// The first instant of the UTC month holding `ms`, and of the month after it.
pub fn month_bounds(ms: i64) -> (i64, i64) {
    let days = i32::try_from(ms.div_euclid(DAY_MS)).unwrap_or(i32::MAX);
    let (y, m, _) = civil_from_days(days);
    let start = i64::from(days_from_civil(y, m, 1)) * DAY_MS;
    let end = start + i64::from(days_in(y, m)) * DAY_MS;
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_parse_with_offsets_and_fractions() {
        // 2026-12-01 is day 20,788 since 1970-01-01: 56 years of 365 days, 14 leap days
        // (1972-2024), and Jan-Nov 2026's 334 days.
        let midnight = (56 * 365 + 14 + 334) * DAY_MS;
        assert_eq!(parse_rfc3339("2026-12-01T00:00:00Z"), Some(midnight));
        assert_eq!(
            parse_rfc3339("2026-12-01T01:30:00+01:30"),
            Some(midnight),
            "an offset is folded in"
        );
        assert_eq!(
            parse_rfc3339("2026-11-30T19:00:00-05:00"),
            Some(midnight),
            "a negative offset crosses the day"
        );
        assert_eq!(
            parse_rfc3339("2026-12-01T00:00:01.5Z"),
            Some(midnight + 1_500)
        );
        assert_eq!(
            parse_rfc3339("2026-12-01T00:00:01.123456Z"),
            Some(midnight + 1_123)
        );
        for bad in [
            "2026-12-01",
            "2026-12-01T24:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-12-01T00:00:00",
            "2026-12-01T00:00:00.Z",
            "2026-12-01T00:00:00+1:00",
            "yesterday",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn instants_print_back_in_utc() {
        for text in ["2026-12-01T10:05:00Z", "2024-02-29T23:59:59.001Z"] {
            assert_eq!(
                parse_rfc3339(text).map(format_rfc3339).as_deref(),
                Some(text)
            );
        }
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn months_have_their_real_lengths() {
        let at = |s| parse_rfc3339(s).unwrap_or_else(|| panic!("{s}"));
        assert_eq!(
            month_bounds(at("2028-02-15T12:00:00Z")),
            (at("2028-02-01T00:00:00Z"), at("2028-03-01T00:00:00Z"))
        );
        assert_eq!(
            month_bounds(at("2026-12-31T23:59:59.999Z")),
            (at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00Z"))
        );
        assert_eq!(
            floor_minute(at("2026-12-01T10:05:59.999Z")),
            at("2026-12-01T10:05:00Z")
        );
        assert_eq!(
            floor_hour(at("2026-12-01T10:05:59Z")),
            at("2026-12-01T10:00:00Z")
        );
    }
}
