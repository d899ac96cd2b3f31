//! # velos-testkit: what checks Velos, apart from what runs it
//!
//! Nothing here is linked into a service that embeds Velos; the tests, the benchmarks and
//! the `velos` tool use it.
//!
//! * [`harness`]: the engine on the rdma-rmw emulator — exhaustive checks of the protocol
//!   model and of [`single_decree`], and simulated clusters with faults
//!   ([`harness::cluster::run`]), each run ending with the checkers.
//! * [`check`]: the checkers, one per property (agreement, validity, integrity, no holes,
//!   prefixes, promises, linearizability of a key-value history).
//! * [`durable`]: every replica's simulated disk and the checks of a whole-cluster power
//!   loss.
//! * [`vopr`]: the seeded fault-injection campaign (`velos vopr`).
//! * [`baseline`]: Mu, the leader-based protocol Velos is compared with, on the same
//!   programming model and emulator.
//! * `verbs_litmus` (feature `verbs`): the litmus suite on real RDMA.
#![deny(unsafe_code)]

pub mod baseline;
pub mod check;
pub mod durable;
pub mod harness;
pub mod single_decree;
#[cfg(feature = "verbs")]
pub mod verbs_litmus;
pub mod vopr;

/// The exhaustive checks of [`harness`] clone and drop millions of small machine states;
/// the system allocator fragments under that load and runs them several times slower.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
