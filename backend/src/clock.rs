//! What time it is: the wall clock, or a clock a test moves (so that a test of minutes passing
//! takes seconds). Every "now" and "today" of the server comes from here, and how a UTC day
//! crosses to PostgreSQL as a `date`.

use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use shared::common::day::Day;
use sqlx::types::time::Date;

/// The wall clock unless made [`Clock::manual`].
#[derive(Debug, Clone, Default)]
pub struct Clock {
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that stands at `start_ms` until [`Clock::set_ms`] moves it.
    pub fn manual(start_ms: i64) -> Self {
        Self {
            manual: Some(Arc::new(AtomicI64::new(start_ms))),
        }
    }

    /// Now, in Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            Some(at) => at.load(Ordering::SeqCst),
            None => now_ms(),
        }
    }

    /// Moves a manual clock (and every copy of it) to `ms`; the wall clock cannot be moved.
    pub fn set_ms(&self, ms: i64) {
        let at = self.manual.as_ref().expect("only a manual clock is moved");
        at.store(ms, Ordering::SeqCst);
    }
}

/// The wall clock, in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Today in UTC, by the wall clock: when requests start, end and count, and up to when
/// capacity is billed.
pub fn today() -> Day {
    Day::of_unix_seconds(now_ms().div_euclid(1000))
}

/// The Julian day number of 1970-01-01, the day `Day` counts from.
const UNIX_EPOCH_JULIAN_DAY: i32 = 2_440_588;

/// A UTC day as PostgreSQL's `date`.
pub fn date(day: Day) -> sqlx::Result<Date> {
    Date::from_julian_day(day.days_since_epoch() + UNIX_EPOCH_JULIAN_DAY)
        .map_err(|err| sqlx::Error::Encode(Box::new(err)))
}

/// A `date` as a UTC day.
pub fn day(date: Date) -> Day {
    Day::of_unix_seconds(i64::from(date.to_julian_day() - UNIX_EPOCH_JULIAN_DAY) * 86_400)
}

/// A `timestamptz` in Unix milliseconds (floored, as the recorder stores whole milliseconds).
pub fn unix_ms(at: sqlx::types::time::OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).unwrap_or(i64::MAX)
}

/// A `timestamptz` as the API shows instants: RFC 3339 in UTC, to the second
/// (`2026-12-07T22:11:52Z`).
pub fn rfc3339(at: sqlx::types::time::OffsetDateTime) -> String {
    shared::common::utc::format_rfc3339(at.unix_timestamp().saturating_mul(1_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_cross_as_the_calendar_dates_they_name() {
        // (text, year, month, day of month, day of the year)
        for (text, y, m, d, ordinal) in [
            ("1970-01-01", 1970, 1, 1, 1),
            ("2024-02-29", 2024, 2, 29, 60),
            ("2026-12-02", 2026, 12, 2, 336),
        ] {
            let parsed = Day::parse(text).expect("a day");
            let as_date = date(parsed).expect("in range");
            assert_eq!(
                (as_date.year(), as_date.month() as u8, as_date.day()),
                (y, m, d),
                "{text}"
            );
            let want = Date::from_ordinal_date(y, ordinal).expect("a date");
            assert_eq!(as_date, want, "{text}");
            assert_eq!(day(want), parsed, "{text}");
        }
    }
}
