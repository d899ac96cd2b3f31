//! # Velos: one-sided Paxos state-machine replication for RDMA
//!
//! The facade: re-exports the member crates.
#![deny(unsafe_code)]

pub mod baseline;
pub mod bench;
pub mod check;
pub mod cluster_file;
pub mod demo;
pub mod embed;
pub mod harness;
pub mod node;
pub mod rendezvous;
#[cfg(feature = "verbs")]
pub mod verbs_litmus;
pub mod vopr;

pub use velos_core as core;
pub use velos_rdma as rdma;
pub use velos_sim as sim;

#[cfg(test)]
mod layering;

/// The exhaustive checks of [`harness`] clone and drop millions of small machine states;
/// the system allocator fragments under that load and runs them several times slower.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
