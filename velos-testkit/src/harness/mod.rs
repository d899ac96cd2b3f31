//! What needs every crate: the consensus engine run on the emulator (exhaustive checks,
//! simulated clusters), baselines.

pub mod cluster;
pub mod consensus_checks;
pub mod durable;
pub mod mu_cluster;
mod mutation_checks;
pub mod protocol_model;
pub mod report;
pub mod script;
pub mod service;
pub mod spec;
