//! # velos-core: one-sided Paxos (Velos), sans-IO
//!
//! Events in, RDMA operations out; no clock, no threads, no I/O.
#![deny(unsafe_code)]

pub mod batch;
pub mod cluster;
pub mod freeze;
pub mod leb128;
pub mod log;
pub mod proposal;
pub mod slot;
mod spare;
pub mod word;

/// Whether this build carries the deliberately wrong protocol variants of the
/// `mutations` feature (tests only). A workspace-wide `cargo test` or `cargo bench`
/// unifies features across every package's dev-dependencies and turns it on; a
/// benchmark of the engine's CPU refuses to run on such a build (`velos-bench`).
pub const MUTATIONS: bool = cfg!(feature = "mutations");

pub use velos_rdma as rdma;
pub use word::{AcceptorState, FieldOverflow, WordLayout};
