//! The backend's integration tests in one binary: one link instead of twelve, and one process
//! whose tests run side by side (each `#[sqlx::test]` on its own fresh database).

#[path = "../common/mod.rs"]
mod common;

mod api;
mod auth;
mod budgets;
mod chargeback;
mod cli;
mod cluster;
mod conformance;
mod connections;
mod day_on_kueue;
mod drive;
mod hardening;
mod live;
mod packing;
mod planning;
mod quota;
mod real_cluster;
mod robustness;
mod usage;
