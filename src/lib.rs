//! # Velos: one-sided Paxos state-machine replication for RDMA
//!
//! The facade: re-exports the member crates.
#![deny(unsafe_code)]

pub mod bench;
pub mod harness;
pub mod local;

pub use velos_core as core;
pub use velos_rdma as rdma;
pub use velos_sim as sim;

#[cfg(test)]
mod layering;
