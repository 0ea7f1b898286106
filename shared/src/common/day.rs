//! A calendar day in UTC, written `YYYY-MM-DD`: when a quota request starts and ends.
//!
//! Invariants: only real dates parse (no 2026-02-30); days compare and count in whole days;
//! the serde form is the `YYYY-MM-DD` text.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Days since 1970-01-01 (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(i32);

impl Day {
    /// `YYYY-MM-DD`, years 1970-9999.
    pub fn parse(text: &str) -> Option<Day> {
        let bytes = text.as_bytes();
        if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
            return None;
        }
        let number = |range: std::ops::Range<usize>| -> Option<i32> {
            let part = text.get(range)?;
            part.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| part.parse().ok())?
        };
        let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
        if year < 1970 || !(1..=12).contains(&month) || day < 1 || day > days_in(year, month) {
            return None;
        }
        Some(Day(days_from_civil(year, month, day)))
    }

    /// The day `n` days later (earlier when negative).
    pub fn plus(self, n: i32) -> Day {
        Day(self.0 + n)
    }

    /// Whole days from `self` to `later`.
    pub fn days_until(self, later: Day) -> i32 {
        later.0 - self.0
    }

    /// The first day of the day's month.
    pub fn first_of_month(self) -> Day {
        let (y, m, _) = civil_from_days(self.0);
        Day(days_from_civil(y, m, 1))
    }

    /// The first day of the next month.
    pub fn next_month(self) -> Day {
        let (y, m, _) = civil_from_days(self.0);
        Day(days_from_civil(y, m, 1) + days_in(y, m))
    }

    /// `YYYY-MM`.
    pub fn month_name(self) -> String {
        self.to_string()[..7].to_owned()
    }

    /// Days since 1970-01-01.
    pub fn days_since_epoch(self) -> i32 {
        self.0
    }

    /// The UTC day of a Unix time in seconds.
    pub fn of_unix_seconds(seconds: i64) -> Day {
        Day(i32::try_from(seconds.div_euclid(86_400)).unwrap_or(i32::MAX))
    }
}

fn is_leap(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub(crate) fn days_in(year: i32, month: i32) -> i32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Howard Hinnant's `days_from_civil`: the proleptic Gregorian calendar in closed form.
pub(crate) fn days_from_civil(year: i32, month: i32, day: i32) -> i32 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(crate) fn civil_from_days(days: i32) -> (i32, i32, i32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i32::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil_from_days(self.0);
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

impl Serialize for Day {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Day::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a date written YYYY-MM-DD"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_start_and_end_where_the_calendar_says() {
        let day = |s| Day::parse(s).unwrap_or_else(|| panic!("{s}"));
        assert_eq!(day("2028-02-29").first_of_month(), day("2028-02-01"));
        assert_eq!(day("2028-02-29").next_month(), day("2028-03-01"));
        assert_eq!(day("2026-12-31").next_month(), day("2027-01-01"));
        assert_eq!(day("2026-11-10").month_name(), "2026-11");
    }

    #[test]
    fn real_dates_parse_and_print_back() {
        let day = |s| Day::parse(s).unwrap_or_else(|| panic!("{s}"));
        assert_eq!(day("1970-01-01"), Day(0));
        // 2000-03-01 is day 11,017 (30 years of 365 days + 7 leap days + Jan + Feb 2000).
        assert_eq!(day("2000-03-01"), Day(30 * 365 + 7 + 31 + 29));
        for s in ["2024-02-29", "2026-12-01", "2026-12-31", "9999-12-31"] {
            assert_eq!(day(s).to_string(), s);
        }
        assert_eq!(day("2026-12-31").plus(1).to_string(), "2027-01-01");
        assert_eq!(day("2026-12-01").days_until(day("2027-01-01")), 31);
        // 2026-12-01T17:33:00Z
        assert_eq!(
            Day::of_unix_seconds(1_796_146_380).to_string(),
            "2026-12-01"
        );
    }

    #[test]
    fn impossible_dates_are_refused() {
        for s in [
            "2026-02-29",
            "2100-02-29",
            "2026-13-01",
            "2026-00-10",
            "2026-04-31",
            "26-1-1",
            "2026/12/01",
            "2026-12-1",
            "1969-12-31",
            "+026-12-01",
            "",
        ] {
            assert_eq!(Day::parse(s), None, "{s}");
        }
    }
}
