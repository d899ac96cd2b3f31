//! # Velos: one-sided Paxos state-machine replication for RDMA
//!
//! A Rust service embeds a replicated log: every replica applies the same commands in the
//! same order to its own copy of the service's state machine, and a new leader takes over
//! within microseconds when the old one fails. Velos decides each log slot with one remote
//! compare-and-swap per acceptor on a 64-bit word (one-sided Paxos): a stable leader
//! decides in a single round trip, and no follower's CPU takes part.
//!
//! **Start with [`embed`]**: [`embed::Cluster`] runs the replicas of one log in this
//! process (threads over the in-process RDMA backend, or the emulator in virtual time for
//! tests); [`embed::Node`] runs this process's one replica over real RDMA (the `verbs`
//! feature), set up from a [`cluster_file`] by [`rendezvous`] and [`connect`].
//!
//! **What survives what.** Nothing is written to disk: the log and the state live in the
//! replicas' memory, so a power loss of every replica at once loses them. With 2f + 1
//! replicas the log keeps deciding while at most f are down at once. A crashed replica's
//! memory is gone; a fresh process takes its place while the others keep deciding
//! ([`embed::Cluster::replace`]): it starts blank at a new *incarnation*, copies a peer's
//! snapshot and the log's tail, and votes once the leader has removed the old incarnation
//! and added the new one through the log — it never answers for what the old process
//! promised. The budget is back once it votes and the others have applied past that
//! change: replace a crashed replica before the next one fails. Across machines the
//! replacement is a process started with [`embed::Config::verbs_joining`] (or `velos node
//! --join`) in the crashed one's place: it meets the running nodes through [`join`]. A
//! command whose leader crashed mid-decision has an unknown outcome
//! ([`embed::Error::OutcomeUnknown`]). The README's first screen says more, with a tested
//! snippet.
//!
//! The layers underneath are re-exported: [`core`] (the protocol, sans-IO), [`rdma`] (the
//! RDMA programming model the engine is written against), [`sim`] (the emulator of the
//! rdma-rmw semantics).
#![deny(unsafe_code)]

pub mod cluster_file;
pub mod connect;
pub mod disk;
pub mod embed;
pub mod join;
pub mod loopback;
pub mod rendezvous;

pub use velos_core as core;
pub use velos_rdma as rdma;
pub use velos_sim as sim;

/// The README's Rust code (its embedding snippet), compiled and run with the doctests; its
/// other code blocks are shell commands, marked as such.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
