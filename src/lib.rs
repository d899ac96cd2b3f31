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
//! The layers underneath are re-exported: [`core`] (the protocol, sans-IO), [`rdma`] (the
//! RDMA programming model the engine is written against), [`sim`] (the emulator of the
//! rdma-rmw semantics).
#![deny(unsafe_code)]

pub mod cluster_file;
pub mod connect;
pub mod embed;
pub mod rendezvous;

pub use velos_core as core;
pub use velos_rdma as rdma;
pub use velos_sim as sim;
