//! # velos-core: one-sided Paxos (Velos), sans-IO
//!
//! Events in, RDMA operations out; no clock, no threads, no I/O.
#![deny(unsafe_code)]

pub mod cluster;
pub mod freeze;
pub mod leb128;
pub mod log;
pub mod proposal;
pub mod slot;
mod spare;
pub mod word;

pub use velos_rdma as rdma;
pub use word::{AcceptorState, FieldOverflow, WordLayout};
