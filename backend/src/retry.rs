//! How background loops (the cluster reconciler, the usage ingest) wait after failures.

use std::time::Duration;

/// The longest wait between runs while a dependency keeps failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// `every`, doubled for each failed run in a row, at most [`MAX_BACKOFF`] (and never less than
/// `every`).
pub fn backoff(every: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.min(10).saturating_sub(1);
    every.saturating_mul(factor).min(MAX_BACKOFF.max(every))
}
