//! Cooperative cancellation. Long computations (a week's simulation, a packing replay, a MIG
//! layout) check an [`Interrupt`] between steps and stop with [`Interrupted`] when it fires:
//! the server fires it when a request times out, its client goes away, or the server shuts
//! down, so abandoned work gives its core and memory back.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the caller wants the computation to stop.
pub trait Interrupt: Sync {
    fn fired(&self) -> bool;
}

/// Never fires: for callers that wait for the result whatever it costs (the CLI, the browser).
pub struct Never;

impl Interrupt for Never {
    fn fired(&self) -> bool {
        false
    }
}

impl Interrupt for AtomicBool {
    fn fired(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

/// The computation stopped because its [`Interrupt`] fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the computation was stopped before it finished")]
pub struct Interrupted;
