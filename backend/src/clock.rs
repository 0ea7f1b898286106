//! What time it is: the wall clock, or a clock a test moves (so that a test of minutes passing
//! takes seconds). Every "now" and "today" of the server comes from here.

use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use shared::common::day::Day;

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
