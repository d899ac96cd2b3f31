//! Velos embedded in a Rust service: a [`Cluster`] of replicas of one log, each applying
//! the committed commands to its own copy of the service's [`StateMachine`].
//!
//! * **Start** from a [`Config`]: the log's knobs ([`LogConfig`](velos_core::log::LogConfig),
//!   with real-time defaults from [`Config::new`]), batching ([`BatchConfig`]) and the
//!   [`Backend`]: threads over the in-process RDMA backend (the default), or the
//!   rdma-rmw emulator in virtual time for tests ([`Config::emulator`]).
//! * **One replica per process** over real RDMA: [`Node::start`] with
//!   [`Config::verbs`] (the cluster file's addresses for the connection set-up, as
//!   `velos node` does: [`crate::connect`]); a [`Node`] proposes, reads and reports for its
//!   own replica, and a follower refuses with [`Error::NotLeader`] naming the leader, to
//!   which the service forwards. `velos node --embed` runs one.
//! * **Propose**: [`Cluster::submit`] (the leader found, retried while leadership moves,
//!   bounded by [`Config::wait_timeout`]), [`Cluster::propose`] (blocking, once),
//!   [`Cluster::propose_async`] (a [`Receipt`], which is a [`Future`]
//!   usable from any executor, or blocks with a bound), [`Cluster::propose_at`] (one
//!   replica; a follower refuses with [`Error::NotLeader`], it does not forward). A
//!   receipt resolves once the command is committed and applied at the leader, with
//!   [`StateMachine::apply`]'s answer there ([`CommitInfo::response`]).
//! * **Batching and pipelining**: the leader's replica packs waiting commands into one log
//!   entry ([`batch`]: a tag byte and length-prefixed frames, never more than the log's
//!   `max_value_bytes`), keeps up to [`BatchConfig::max_in_flight`] batches undecided, and
//!   lets the oldest command wait at most [`BatchConfig::max_delay`] for company. Every
//!   command gets its own receipt; `apply` sees commands, never batches, and never the
//!   no-ops a new leader writes.
//! * **Query**: [`Cluster::leader`] (a replica that takes proposals, or none during a
//!   failover), [`Cluster::role`], [`Cluster::applied_commands`], [`Cluster::metrics`]
//!   (commits, aborts, leader changes, batches, latency histogram).
//! * **Watch** through `tracing`: leadership taken and lost, crashes, refused snapshots,
//!   the engine's terms and configurations; and availability — a `WARN` once no replica
//!   has taken proposals for longer than the log's failure timeout, an `INFO` with the
//!   gap's length (`gap_ms`) when proposals resume.
//! * **Stop**: [`Cluster::crash`] one replica (tests, demos), [`Cluster::shutdown`] all of
//!   them, getting the state machines back.
//!
//! ```
//! use velos::embed::{Cluster, Config, Position, RestoreError, StateMachine};
//!
//! #[derive(Default)]
//! struct Counter(u64);
//!
//! impl StateMachine for Counter {
//!     type Response = u64; // the count after the command
//!     fn apply(&mut self, _: Position, command: &[u8]) -> u64 {
//!         self.0 += u64::from(command.first().copied().unwrap_or(0));
//!         self.0
//!     }
//!     fn snapshot(&self) -> Vec<u8> {
//!         self.0.to_le_bytes().to_vec()
//!     }
//!     fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
//!         let b = bytes.try_into().map_err(|_| RestoreError("8 bytes".into()))?;
//!         self.0 = u64::from_le_bytes(b);
//!         Ok(())
//!     }
//! }
//!
//! let cluster = Cluster::start(Config::new(3), (0..3).map(|_| Counter::default()))?;
//! let info = cluster.submit(vec![5])?;
//! assert_eq!(info.position.slot, 0);
//! assert_eq!(info.response, 5); // apply's answer, from the leader
//! let machines = cluster.shutdown();
//! assert_eq!(machines[info.leader as usize].as_ref().map(|c| c.0), Some(5));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod batch;
mod client_session;
mod config;
mod driver;
mod emulator_backend;
mod error;
mod events;
mod gaps;
mod handle;
mod mem_backend;
mod metrics;
mod node;
#[cfg(test)]
mod node_tests;
mod receipt;
mod replace;
mod retry;
pub(crate) mod serve;
mod session;
mod shown;
mod state_machine;
mod verbs_backend;
mod watch;

pub use client_session::Session;
pub use config::{Backend, BatchConfig, Config, EmulatorConfig, Start, VerbsConfig};
pub use error::{Error, StartError};
pub use handle::{Cluster, LeaderFuture};
pub use metrics::MetricsSnapshot;
pub use node::Node;
pub use receipt::{Answer, CommitInfo, Outcome, Receipt};
pub use shown::Role;
pub use state_machine::{Position, RestoreError, StateMachine};
