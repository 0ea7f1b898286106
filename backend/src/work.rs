//! CPU-heavy work off the async runtime, bounded: planning, packing and MIG layouts run on the
//! `compute` pool, password hashing on the `hashing` pool. Each pool runs at most `threads`
//! jobs at once and lets at most `max_waiting` more wait; past that a request is refused at once
//! (503 with `Retry-After`, 429 for log-ins) rather than queued without limit, so `/api/health`
//! and light reads keep their share of the machine. Each signed-in user holds at most half of a
//! pool's places (running and waiting; [`as_user`] names the user for the request's task), so one
//! user's loop of heavy requests gets 429 while another user's still finds a place.
//!
//! Invariants: a job's [`Interrupt`] fires when the request that started it is dropped (it
//! timed out, or its client went away) or the server shuts down, and every computation checks
//! it between steps, so abandoned work stops and returns its memory; a slot is held until the
//! job has really ended, so the bound holds even for abandoned jobs.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use shared::common::interrupt::Interrupt;
use tokio::sync::Semaphore;

use crate::{
    error::{Error, Result},
    tally::{Place, Tally},
};

/// When the request that started a job must have ended: its arrival plus the request timeout
/// (set on every request by `app`). The timeout layer bounds only the wait for a response's
/// first byte; a job that streams its answer checks this itself, so the timeout ends the work.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub Instant);

impl Deadline {
    pub fn after(timeout: Duration) -> Self {
        Deadline(Instant::now() + timeout)
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.0
    }
}

tokio::task_local! {
    /// The signed-in user whose request this task serves.
    static USER: i64;
}

/// Runs `request` as `user`'s: the pools count its jobs against that user's share.
pub async fn as_user<F: Future>(user: i64, request: F) -> F::Output {
    USER.scope(user, request).await
}

/// One bounded pool.
#[derive(Clone)]
pub struct Pool {
    kind: Kind,
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    max_waiting: usize,
    running: Arc<AtomicUsize>,
    shutdown: Arc<AtomicBool>,
    /// Jobs each user holds (running or waiting), and the most one may.
    held: Tally<i64>,
    per_user: usize,
}

/// What a full pool answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 503 with `Retry-After`.
    Compute,
    /// 429 with `Retry-After`: too many log-ins at once.
    Hashing,
}

/// The server's pools, and the shutdown switch that stops their work.
#[derive(Clone)]
pub struct Work {
    pub compute: Pool,
    pub hashing: Pool,
    shutdown: Arc<AtomicBool>,
}

impl Work {
    /// One compute thread per core but one (left to the runtime), and as many for hashing.
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = cores.saturating_sub(1).max(1);
        Self::new(threads, 2 * threads, threads, 8 * threads)
    }

    pub fn new(
        compute_threads: usize,
        compute_waiting: usize,
        hashing_threads: usize,
        hashing_waiting: usize,
    ) -> Self {
        let shutdown = Arc::new(AtomicBool::new(false));
        Self {
            compute: Pool::new(Kind::Compute, compute_threads, compute_waiting, &shutdown),
            hashing: Pool::new(Kind::Hashing, hashing_threads, hashing_waiting, &shutdown),
            shutdown,
        }
    }

    /// Fires every running job's interrupt, for a shutdown that must not wait on them.
    pub fn stop_all(&self) {
        self.shutdown.store(true, Ordering::Relaxed);
    }
}

impl Pool {
    fn new(kind: Kind, threads: usize, max_waiting: usize, shutdown: &Arc<AtomicBool>) -> Self {
        Self {
            kind,
            slots: Arc::new(Semaphore::new(threads.max(1))),
            waiting: Arc::new(AtomicUsize::new(0)),
            max_waiting,
            running: Arc::new(AtomicUsize::new(0)),
            shutdown: Arc::clone(shutdown),
            held: Tally::default(),
            per_user: (threads.max(1) + max_waiting).div_ceil(2),
        }
    }

    /// Jobs running now (abandoned ones included, until they notice their interrupt).
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Runs `job` on a blocking thread once a slot is free, or refuses at once when too many
    /// already wait.
    pub async fn run<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Interrupt) -> T + Send + 'static,
    {
        let share = self.take_share()?;
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_waiting + self.free_slots() {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(self.busy());
        }
        let waited = Counted(Arc::clone(&self.waiting));
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| Error::Unavailable)?;
        drop(waited);
        let stop = Arc::new(Stop {
            abandoned: AtomicBool::new(false),
            shutdown: Arc::clone(&self.shutdown),
        });
        // Dropped with this future: the request timed out or its client left.
        let _abandon = Abandon(Arc::clone(&stop));
        self.running.fetch_add(1, Ordering::AcqRel);
        let running = Counted(Arc::clone(&self.running));
        let handle = tokio::task::spawn_blocking(move || {
            // They end with the job, not with the request.
            let (_slot, _running, _share) = (slot, running, share);
            job(&*stop)
        });
        handle
            .await
            .map_err(|err| Error::Internal(format!("a background job failed: {err}")))
    }

    /// A place of the request's user's share, when a user is named; refused (429) when they
    /// hold their share already.
    fn take_share(&self) -> Result<Option<Share>> {
        let Ok(user) = USER.try_with(|u| *u) else {
            return Ok(None);
        };
        let (share, _) = self.held.take(user, self.per_user).ok_or_else(|| {
            Error::caller_limit(
                "you have as many heavy requests running or waiting as one user may; wait for one to finish",
                1,
            )
        })?;
        Ok(Some(share))
    }

    fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }

    fn busy(&self) -> Error {
        match self.kind {
            Kind::Compute => Error::server_full(
                "the server is busy with other planning work; try again in 1 second",
                1,
            ),
            Kind::Hashing => {
                Error::caller_limit("too many log-ins at once; try again in 1 second", 1)
            }
        }
    }
}

/// The interrupt a job checks.
struct Stop {
    abandoned: AtomicBool,
    shutdown: Arc<AtomicBool>,
}

impl Interrupt for Stop {
    fn fired(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed) || self.shutdown.load(Ordering::Relaxed)
    }
}

struct Abandon(Arc<Stop>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.abandoned.store(true, Ordering::Relaxed);
    }
}

/// A user's place in a pool, given back when dropped.
type Share = Place<i64>;

/// Decrements its counter when dropped (also when a job panics).
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A job that runs until its interrupt fires.
    fn spin(stop: &dyn Interrupt) -> bool {
        while !stop.fired() {
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    type Running<T> = tokio::task::JoinHandle<Result<T>>;

    /// Fills a one-slot, one-waiting pool: a spinning job that runs, and `then` waiting.
    async fn fill<T: Send + 'static>(
        pool: &Pool,
        then: impl FnOnce(&dyn Interrupt) -> T + Send + 'static,
    ) -> (Running<bool>, Running<T>) {
        let running = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(spin).await }
        });
        while pool.running() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(then).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        (running, waiting)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_pool_refuses_at_once_and_dropped_requests_stop_their_job() {
        let work = Work::new(1, 1, 1, 1);
        let pool = work.compute.clone();
        // One runs, one waits; a third is refused without waiting.
        let (first, second) = fill(&pool, |_| 7).await;
        let refused = pool.run(|_| 0).await;
        assert!(matches!(
            refused,
            Err(Error::Throttled {
                whose: crate::error::Whose::Server,
                retry_after_s: 1,
                ..
            })
        ));
        // Abandoning the first request fires its interrupt: the job ends, the slot frees, and
        // the waiting one runs.
        first.abort();
        let second = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the slot was freed")
            .expect("joined");
        assert_eq!(second.expect("ran"), 7);
        assert_eq!(pool.running(), 0);
        // The hashing pool says 429.
        let hashing = work.hashing.clone();
        let (busy, waiting) = fill(&hashing, |_| 1).await;
        assert!(matches!(
            hashing.run(|_| 0).await,
            Err(Error::Throttled {
                whose: crate::error::Whose::Caller,
                ..
            })
        ));
        // A shutdown stops what still runs.
        work.stop_all();
        assert!(matches!(busy.await.expect("joined"), Ok(true)));
        assert!(waiting.await.expect("joined").is_ok());
    }

    /// One slot and two waiting places: a user holds at most two of the three, so another
    /// user still finds the third, and runs once the first user's job ends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_user_holds_at_most_half_of_a_pool() {
        let pool = Work::new(1, 2, 1, 1).compute.clone();
        let rita = |job: fn(&dyn Interrupt) -> bool| {
            let pool = pool.clone();
            tokio::spawn(as_user(7, async move { pool.run(job).await }))
        };
        let first = rita(spin);
        while pool.running() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let second = rita(|_| true);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let third = as_user(7, pool.run(|_| true)).await;
        assert!(
            matches!(third, Err(Error::Throttled { .. })),
            "rita's third"
        );
        let alex = tokio::spawn({
            let pool = pool.clone();
            as_user(8, async move { pool.run(|_| 42).await })
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        first.abort();
        let alex = tokio::time::timeout(Duration::from_secs(5), alex)
            .await
            .expect("alex's job ran")
            .expect("joined");
        assert_eq!(alex.expect("ran"), 42);
        assert!(second.await.expect("joined").expect("ran"));
        // every place is given back
        assert!(pool.held.is_empty());
    }
}
