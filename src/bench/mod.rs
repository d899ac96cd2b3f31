//! Benchmarks shared by `velos bench` and `cargo bench`. They measure and report; they
//! never assert speed.

pub mod embed;
pub mod emulator;
pub mod engine;
pub mod failover;
pub mod latency;
pub mod locks;
mod op_kind;
pub mod sweep;
mod trace;
