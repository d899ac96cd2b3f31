//! # velos-core: one-sided Paxos (Velos), sans-IO
//!
//! Events in, RDMA operations out; no clock, no threads, no I/O. (The engine arrives with
//! the consensus issue; this crate is a placeholder in the workspace until then.)
#![deny(unsafe_code)]

pub use velos_rdma as rdma;
