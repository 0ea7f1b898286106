//! gpufleet's pure domain, shared by the backend, the browser (wasm32) and the CLI.
//!
//! Invariants: no I/O, no clocks, no randomness, no environment. Callers pass `now`, seeds and
//! ids. Units are in names (`mem_mib`, `price_cents_per_gpu_hour`); money is integer cents.

// The domain map (docs/architecture.md): each module imports only from the rows above it.
pub mod accounts;
pub mod audit;
pub mod chargeback;
pub mod cluster;
pub mod common;
pub mod fleet;
pub mod health;
pub mod inventory;
pub mod kueue;
pub mod packing;
pub mod planning;
pub mod quota;
pub mod usage;

pub use common::error::{ApiError, ErrorCode, FieldError};
