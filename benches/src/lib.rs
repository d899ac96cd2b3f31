//! # velos-bench: Velos's benchmarks
//!
//! Shared by `velos bench` and `cargo bench` (this crate's `benches/`). They measure and
//! report; they never assert speed. The comparison crates (OmniPaxos) and the plotting
//! live here only.
#![deny(unsafe_code)]

/// Refuses a build whose engine carries velos-core's test-only `mutations` feature
/// ([`velos_core::MUTATIONS`]): its branches are on the decision path, so a CPU figure
/// would not be the engine users run. `cargo bench --bench NAME` from the workspace root
/// builds every member's dev-dependencies and gets that feature from the test kit's;
/// `cargo bench -p velos-bench --bench NAME` does not.
pub fn release_engine(bench: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !velos_core::MUTATIONS,
        "this build of velos-core carries its test-only `mutations` feature (a workspace-wide \
         `cargo bench` turns it on): run `cargo bench -p velos-bench --bench {bench}`"
    );
    Ok(())
}

pub mod bank;
pub mod durable;
pub mod embed;
pub mod emulator;
pub mod engine;
pub mod failover;
pub mod join;
pub mod latency;
pub mod locks;
mod op_kind;
pub mod stats;
pub mod sweep;
mod trace;
