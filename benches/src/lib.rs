//! # velos-bench: Velos's benchmarks
//!
//! Shared by `velos bench` and `cargo bench` (this crate's `benches/`). They measure and
//! report; they never assert speed. The comparison crates (OmniPaxos) and the plotting
//! live here only.
#![deny(unsafe_code)]

pub mod bank;
pub mod embed;
pub mod emulator;
pub mod engine;
pub mod failover;
pub mod join;
pub mod latency;
pub mod locks;
mod op_kind;
pub mod sweep;
mod trace;
