//! # velos-sim: an emulator of the rdma-rmw operational semantics
//!
//! One state machine ([`machine::Machine`]: memory, TSO store buffers, queue pairs with
//! their pipe / `rW` / `lW` buffers, and the per-node remote-atomic locks) with three
//! drivers: the exhaustive [`explore`]r, the seeded virtual-time [`simulate`]or with fault
//! injection, and the [`litmus`] runner on top of both. Beside them, a simulated [`disk`]
//! for the durable log, with the faults a real one has.
#![deny(unsafe_code)]

pub mod disk;
pub mod explore;
pub mod latency;
pub mod litmus;
pub mod machine;
pub mod rng;
pub mod simulate;
