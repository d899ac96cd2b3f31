//! The in-process backend: real threads, node memory as atomic words.
//!
//! A [`MemFabric`] owns the registered memory of every node of a [`Layout`](crate::Layout)
//! (one `Vec<AtomicU64>` per node) and hands out [`MemEndpoint`]s, one per thread, that
//! implement [`Endpoint`](crate::Endpoint). [`MemFabric::run`] runs a set of
//! [`Process`](crate::Process)es on one thread each.
//!
//! Two [`Mode`]s:
//! * [`Mode::Inline`]: a remote operation runs to completion on the posting thread, inside
//!   the post. The fastest path, for embedding and benchmarks.
//! * [`Mode::Worker`]: every node has a NIC worker thread that executes the remote
//!   operations posted by that node's threads, so they really run asynchronously to the
//!   posting CPU. With a jitter seed ([`MemOptions::jitter`]) endpoints and workers insert
//!   small pseudo-random delays and workers pick a random ready queue pair next, to
//!   diversify interleavings in randomised litmus runs.
//!
//! # Relation to the rdma-rmw model
//!
//! The backend is *stronger* than the model: it produces a subset of the outcomes the
//! model allows, never one it forbids.
//! * Every access to node memory is a `SeqCst` atomic, so CPU operations behave as if the
//!   TSO store buffer were flushed at once (x86-TSO allows that), and all accesses of a run
//!   fall into one total order consistent with program order and with the synchronisation
//!   of posts and completions.
//! * A remote operation enters its queue pair at post time (the store buffer holds no CPU
//!   write to pass, since those are already in memory). A queue pair executes its operations
//!   one at a time in posting order, each fully (local read, remote write in memory, local
//!   write in memory) before the next starts. So whenever an operation acts, it is at the
//!   head of its pipe with `rW` empty and no pending local write: every premise of rules
//!   2, 3, 6, 9–12 holds, and the following commit steps (4, 5, 7, 8, 13) can be taken at
//!   once. An `rfence` is therefore a no-op (rule 1 can always fire when its turn comes).
//! * A remote atomic is one hardware read-modify-write, so it is atomic even against CPU
//!   accesses and puts (the model only requires atomicity against other remote atomics).
//! * `wait`, `poll` and `global_fence` return only once the operations they cover are
//!   fully done, which is at or after the point the model requires.
//!
//! # Faults
//! [`MemFabric::crash`] makes a node's memory unreachable; [`MemFabric::set_queue_pair_error`]
//! breaks the queue pairs from one node towards another. Operations then fail with
//! [`RdmaError`](crate::RdmaError) values; remote operations report their failure
//! asynchronously (see [`MemEndpoint`]).

mod completions;
mod endpoint;
mod fabric;
mod jitter;
mod memory;
mod task;
mod worker;

pub use endpoint::MemEndpoint;
pub use fabric::{MemFabric, MemOptions, Mode};
