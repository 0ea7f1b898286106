//! gpufleet's pure domain, shared by the backend, the browser (wasm32) and the CLI.
//!
//! Invariants: no I/O, no clocks, no randomness, no environment. Callers pass `now`, seeds and
//! ids. Units are in names (`mem_mib`, `price_cents_per_gpu_hour`); money is integer cents.

pub mod adoption;
pub mod audit;
pub mod auth;
pub mod catalogue;
pub mod chargeback;
pub mod cluster;
pub mod day;
pub mod decision;
pub mod error;
pub mod fleet;
pub mod health;
pub mod interrupt;
pub mod inventory;
pub mod isolation;
pub mod kueue;
pub mod label;
pub mod manifests;
pub mod money;
pub mod packing;
pub mod plan;
pub mod quota;
pub mod rng;
pub mod saved;
pub mod scenario;
pub mod simulate;
pub mod sizing;
pub mod suggest;
pub mod usage;
pub mod utc;
pub mod validate;
pub mod zip;

pub use error::{ApiError, ErrorCode, FieldError};
