//! What every domain uses: the HTTP error contract, field rules, words for people, money,
//! exact products past 128 bits, UTC days and instants, Kubernetes quantities, the seeded generator, the interrupt, the zip
//! writer.

pub mod day;
pub mod error;
pub mod exact;
pub mod interrupt;
pub mod label;
pub mod money;
pub mod quantity;
pub mod rng;
pub mod utc;
pub mod validate;
pub mod yaml;
pub mod zip;
