//! Velos embedded in a Rust service: a [`Cluster`] of replicas of one log, each applying
//! the committed commands to its own copy of the service's [`StateMachine`].
//!
//! * **Start** from a [`Config`]: the log's knobs ([`LogConfig`], with real-time
//!   defaults from [`Config::new`]: [limits and defaults](#limits-and-defaults)),
//!   batching ([`BatchConfig`]) and the
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
//!   usable from any executor, blocks with a bound, or is looked at without waiting:
//!   [`Receipt::try_get`]), [`Cluster::propose_at`] (one
//!   replica; a follower refuses with [`Error::NotLeader`], it does not forward). A
//!   receipt resolves once the command is committed and applied at the leader, with
//!   [`StateMachine::apply`]'s answer there ([`CommitInfo::response`]).
//! * **At most once**: a client [`Session`] ([`Cluster::session`]) sends a command again
//!   after an unknown outcome and the replicas apply it once; an [`OwnedSession`]
//!   ([`Cluster::owned_session`], the cluster shared through an `Arc`) is
//!   `Send + 'static` and moves into a spawned task. Both submit blocking or as futures
//!   (`submit_async`, `resubmit_async`).
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
//! * **Durability**, opt-in: with [`Config::durable`] each replica appends what it applies
//!   to a checksummed log in its own directory, synced on a thread of its own (group
//!   commit, off the decision path); [`Cluster::submit_durable`] and
//!   [`Cluster::wait_durable`] return once a majority of the members hold the entry on
//!   disk ([`Cluster::durable_index`]); after a power loss of every replica,
//!   [`Cluster::recover`] brings every durable entry back in order ([`Cluster::recovery`]
//!   says what each disk held and what was cut). A command committed but not yet durable
//!   may be lost then. Without it nothing is written to disk. In-process clusters only,
//!   for now.
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

//!
//! # Limits and defaults
//!
//! [`Config::new`] (replicas as threads on a real clock) sets the log ([`LogConfig`],
//! `config.log`) to:
//!
//! | knob | default | what it means |
//! |---|---|---|
//! | `slots` | 16,384 | positions of the log's ring, reused behind snapshots |
//! | `max_value_bytes` | 256 | one log entry: a batch (below) |
//! | `max_snapshot_bytes` | 1 MiB (1,048,576) | the largest snapshot: the state and the session table; each replica registers two banks of it and `⌈replicas / 2⌉` incoming ones (4 MiB with three replicas) |
//! | `pipeline` | 8 | slots the leader keeps prepared or accepting at once |
//! | `heartbeat_period_ns` | 200 µs | how often a replica bumps its heartbeat and reads the others' |
//! | `failure_timeout_ns` | 50 ms | a replica whose heartbeat has not moved this long is suspected: a crashed leader is replaced after about this long (the gap is reported, see **Watch**) |
//! | `detector` | [`Detector::Fixed`] | the timeout above as is (threads can be descheduled for milliseconds; an adaptive one would suspect them) |
//! | `lease_ns` | 0: no leases | reads go through the log, an empty marker entry each; at most the failure timeout |
//! | `idle_pause_ns` | 20 µs | an idle replica's pause between polls |
//! | `catch_up_after_ns` | 2 ms | a follower that learned nothing this long reads the next slot from a majority |
//! | `epochs` | 2 | acceptor words per slot (the overflow fallback) |
//! | `layout` | `WordLayout::VELOS` | the acceptor word's fields |
//! | `members` | every replica | the first voters |
//!
//! and the rest of the [`Config`] to: batches ([`BatchConfig::default`]) of at most 64
//! commands (`max_commands`) and the entry's bytes (`max_bytes`: 0), sent as soon as the
//! pipeline has room (`max_delay`: zero), 8 undecided at most (`max_in_flight`), held back
//! while the best live follower is 64 slots behind (`follower_lag_slots_max`); waits of
//! 10 s at most (`wait_timeout`); a snapshot every 4,096 slots (`snapshot_every_slots`,
//! a quarter of the ring); 65,536 client sessions kept (`max_sessions`); nothing on disk
//! (`durable_dir`: [`Config::durable`]), and with durability on a disk batch at most every
//! 1 ms while nobody waits for durability (`group_commit`).
//!
//! What follows for a command:
//!
//! * it holds at most 253 bytes ([`Config::max_command_bytes`]): the entry's 256 less the
//!   batch's tag byte and the command's 2-byte length. A command of a client session
//!   carries its session's id and sequence number too (LEB128, 20 bytes at most, 10 to 12
//!   usually), so 233 bytes always fit.
//! * a batch takes waiting commands while they fit: a command of `n` bytes takes `n + 1`
//!   of the entry's 255 after the tag (`n + 2` from 128 bytes on), so a batch holds at
//!   most `⌊255 / (n + 1)⌋` of them — 25 commands of 9 bytes, 127 of 1 byte — and never
//!   more than `max_commands`.
//! * a snapshot holds the state machine's bytes, then 24 bytes per session kept and 4 for
//!   their count: 65,536 sessions take 1.5 MiB, more than the 1 MiB of a snapshot, so a
//!   service that keeps more than 43,690 sessions alive (fewer with a state of its own)
//!   must raise `max_snapshot_bytes` or lower `max_sessions`. A snapshot that does not fit is refused
//!   and commands fail at once with [`Error::SnapshotTooLarge`], which names the sizes.
//!
//! [`Config::emulator`] keeps [`LogConfig::new`]'s timing, in virtual time: heartbeats
//! every 1 µs, a failure timeout of 20 µs at most (adaptive: 3 times the largest recent
//! heartbeat gap, at least 4 periods), idle pauses of 200 ns, catch-up reads after 10 µs;
//! with 1,024 slots, 64 KiB snapshots, a pipeline of 8 and a snapshot every 256 slots.
//!
//! ```
//! # use std::time::Duration;
//! # use velos::embed::{Config, Detector};
//! // The numbers above, as Config::new sets them.
//! let c = Config::new(3);
//! let log = &c.log;
//! assert_eq!((log.slots, log.max_value_bytes, log.max_snapshot_bytes), (16_384, 256, 1 << 20));
//! assert_eq!((log.pipeline, log.epochs, log.lease_ns), (8, 2, 0));
//! assert_eq!((log.heartbeat_period_ns, log.failure_timeout_ns), (200_000, 50_000_000));
//! assert_eq!(log.detector, Detector::Fixed);
//! assert_eq!((log.idle_pause_ns, log.catch_up_after_ns), (20_000, 2_000_000));
//! assert_eq!(log.members.len(), 3);
//! let b = c.batch;
//! assert_eq!((b.max_commands, b.max_bytes, b.max_delay), (64, 0, Duration::ZERO));
//! assert_eq!((b.max_in_flight, b.follower_lag_slots_max), (8, 64));
//! assert_eq!(c.wait_timeout, Duration::from_secs(10));
//! assert_eq!((c.snapshot_every_slots, c.max_sessions), (4_096, 65_536));
//! assert_eq!(c.max_command_bytes(), 253);
//! let e = Config::emulator(3, 1).log;
//! assert_eq!((e.heartbeat_period_ns, e.failure_timeout_ns), (1_000, 20_000));
//! assert_eq!((e.idle_pause_ns, e.catch_up_after_ns), (200, 10_000));
//! assert_eq!((e.slots, e.max_snapshot_bytes, e.pipeline), (1_024, 1 << 16, 8));
//! assert_eq!(Config::emulator(3, 1).snapshot_every_slots, 256);
//! ```

pub mod batch;
mod client_session;
mod config;
mod driver;
mod durable;
mod emulator_backend;
mod error;
mod events;
mod gaps;
mod handle;
mod mem_backend;
mod metrics;
mod node;
mod node_dir;
#[cfg(test)]
mod node_disk_tests;
mod node_durable;
// A whole cluster of `Node`s restarts over verbs only (the tests drive it on the
// in-process fabric): without the feature, a library build leaves it unused.
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
mod node_recovery;
#[cfg(test)]
mod node_tests;
mod peer_points;
mod persist;
mod receipt;
mod recovery;
mod replace;
mod retry;
pub(crate) mod serve;
mod session;
mod shown;
mod state_machine;
mod verbs_backend;
mod watch;

pub use client_session::{OwnedSession, Session};
pub use config::{
    Backend, BatchConfig, Config, DEFAULT_GROUP_COMMIT, EmulatorConfig, MAX_GROUP_COMMIT, Start,
    VerbsConfig,
};
pub use error::{Error, StartError};
pub use handle::{Cluster, LeaderFuture};
pub use metrics::MetricsSnapshot;
pub use node::Node;
pub use receipt::{Answer, CommitInfo, Outcome, Receipt};
pub use recovery::{Recovery, ReplicaDisk};
pub use shown::Role;
pub use state_machine::{Position, RestoreError, StateMachine};
/// The log's configuration (`Config::log`): its defaults under [`Config::new`] are listed
/// in [limits and defaults](self#limits-and-defaults).
pub use velos_core::log::{Detector, LogConfig};
