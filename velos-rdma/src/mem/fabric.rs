//! The fabric: node memories, fault injection, NIC workers, and running processes.

use super::endpoint::MemEndpoint;
use super::jitter::Jitter;
use super::memory::Memory;
use super::worker::{Job, Worker};
use crate::doorbell::WorkRequests;
use crate::endpoint::drive;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use crate::plan::{Grant, check_plan};
use crate::process::Process;
use crossbeam_channel::Sender;
use std::panic;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::thread;

/// Where remote operations execute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// On the posting thread, to completion, inside the post: the fastest path.
    #[default]
    Inline,
    /// On a NIC worker thread of the posting node, asynchronously to the posting thread.
    Worker,
}

/// How to build a [`MemFabric`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemOptions {
    /// Where remote operations execute.
    pub mode: Mode,
    /// A seed: endpoints and NIC workers then insert small pseudo-random delays before
    /// operations (and workers pick a random ready queue pair), to diversify interleavings.
    /// `None`: no delays.
    pub jitter: Option<u64>,
}

/// An in-process RDMA fabric: the registered memory of every node of a [`Layout`], as
/// atomic words, and (in [`Mode::Worker`]) one NIC worker thread per node.
///
/// Threads reach it through [`MemEndpoint`]s ([`MemFabric::endpoint`]) or run
/// [`Process`]es on it with [`MemFabric::run`]. Dropping the fabric stops its workers.
#[derive(Debug)]
pub struct MemFabric {
    memory: Arc<Memory>,
    options: MemOptions,
    /// In worker mode, the NIC of each node, indexed by node; empty in inline mode.
    workers: Vec<Worker>,
    /// The id of the next endpoint.
    next_endpoint: AtomicU64,
    /// Operations executed by endpoints that have been dropped.
    ops: AtomicU64,
    /// Work requests and doorbells counted by endpoints that have been dropped.
    work_requests: Mutex<WorkRequests>,
    /// When the fabric was made: the zero of every node's clock (`Op::Now`).
    started: std::time::Instant,
}

impl MemFabric {
    /// A fabric with zeroed memory for `layout`, executing remote operations as `mode`
    /// says, without jitter.
    pub fn new(layout: Layout, mode: Mode) -> MemFabric {
        MemFabric::with_options(layout, MemOptions { mode, jitter: None })
    }

    /// A fabric with zeroed memory for `layout` and the given options.
    pub fn with_options(layout: Layout, options: MemOptions) -> MemFabric {
        MemFabric::build(Memory::new(layout), options)
    }

    /// A fabric whose nodes' memories are reachable only as their region plans say (one
    /// plan per node, see [`crate::plan`]): a remote operation the target's plan does not
    /// grant its source node fails with [`RdmaError::RemoteAccess`] and puts the queue
    /// pairs from the source towards the target into the error state, as on a NIC.
    /// `Err` names the first plan that does not pass [`crate::plan::check_plan`].
    pub fn with_plans(
        layout: Layout,
        options: MemOptions,
        plans: Vec<Vec<Grant>>,
    ) -> Result<MemFabric, String> {
        if plans.len() != usize::from(layout.nodes()) {
            return Err(format!(
                "{} plans for {} nodes",
                plans.len(),
                layout.nodes()
            ));
        }
        for (node, plan) in layout.node_ids().zip(&plans) {
            check_plan(&layout, node, plan).map_err(|e| format!("the plan of {node}: {e}"))?;
        }
        Ok(MemFabric::build(Memory::with_plans(layout, plans), options))
    }

    fn build(memory: Memory, options: MemOptions) -> MemFabric {
        let memory = Arc::new(memory);
        let workers = match options.mode {
            Mode::Inline => Vec::new(),
            Mode::Worker => memory
                .layout()
                .node_ids()
                .map(|node| {
                    let jitter = options
                        .jitter
                        .map(|seed| Jitter::new(seed, u64::MAX - u64::from(node.0)));
                    Worker::spawn(node, Arc::clone(&memory), jitter)
                })
                .collect(),
        };
        MemFabric {
            memory,
            options,
            workers,
            next_endpoint: AtomicU64::new(0),
            ops: AtomicU64::new(0),
            work_requests: Mutex::new(WorkRequests::default()),
            started: std::time::Instant::now(),
        }
    }

    /// The layout of the registered memory.
    pub fn layout(&self) -> &Layout {
        self.memory.layout()
    }

    /// The options the fabric was built with.
    pub fn options(&self) -> MemOptions {
        self.options
    }

    /// Reads the word at `loc`, for inspection (not an operation of any thread).
    pub fn read(&self, loc: Loc) -> Result<u64, RdmaError> {
        let word = self.memory.word(loc)?;
        self.memory.alive(loc.node)?;
        Ok(word.load(Ordering::SeqCst))
    }

    /// Writes `value` into the word at `loc`, for initialisation (not an operation of any
    /// thread).
    pub fn write(&self, loc: Loc, value: u64) -> Result<(), RdmaError> {
        let word = self.memory.word(loc)?;
        self.memory.alive(loc.node)?;
        word.store(value, Ordering::SeqCst);
        Ok(())
    }

    /// A copy of every node's words, node by node. A crashed node's words are shown as
    /// they were left (an operation racing with the crash may still have changed them).
    pub fn snapshot(&self) -> Vec<Vec<u64>> {
        self.memory.snapshot()
    }

    /// A new endpoint for a thread running on `node`.
    ///
    /// # Panics
    /// If `node` is not a node of the layout.
    pub fn endpoint(&self, node: NodeId) -> MemEndpoint<'_> {
        assert!(self.memory.has_node(node), "unknown node {node}");
        let id = self.next_endpoint.fetch_add(1, Ordering::Relaxed);
        let jitter = self.options.jitter.map(|seed| Jitter::new(seed, id));
        MemEndpoint::new(self, node, id, jitter)
    }

    /// Crashes `node`: its memory is gone. Later operations towards it, or by its threads,
    /// fail with [`RdmaError::RemoteCrashed`]; `read` and `write` on it too.
    ///
    /// # Panics
    /// If `node` is not a node of the layout.
    pub fn crash(&self, node: NodeId) {
        assert!(self.memory.has_node(node), "unknown node {node}");
        self.memory.crash(node);
    }

    /// Starts a new process on crashed `node` (a replacement registering blank memory at
    /// the same addresses): its memory is zeroed and its threads may run again; the queue
    /// pairs of every other node towards it are in the error state — their connections
    /// ended with the old process — until that node [`MemFabric::reconnect`]s.
    ///
    /// # Panics
    /// If `node` is not a node of the layout, or did not crash. Threads of the old process
    /// must have stopped.
    pub fn restart(&self, node: NodeId) {
        assert!(self.memory.has_node(node), "unknown node {node}");
        self.memory.restart(node);
    }

    /// Connects `from`'s threads to `to` again (new queue pairs): operations from `from`
    /// towards `to` work again, unless `to` is crashed.
    ///
    /// # Panics
    /// If `from` or `to` is not a node of the layout.
    pub fn reconnect(&self, from: NodeId, to: NodeId) {
        self.memory.reconnect(from, to);
    }

    /// Puts the queue pairs of threads on `from` towards `to` into the error state: their
    /// later operations fail with [`RdmaError::QueuePairError`].
    ///
    /// # Panics
    /// If `from` or `to` is not a node of the layout.
    pub fn set_queue_pair_error(&self, from: NodeId, to: NodeId) {
        self.memory.set_queue_pair_error(from, to);
    }

    /// Runs each process on its own thread, with an endpoint on its node; the threads start
    /// together. Returns the processes in their final states, in the given order, once
    /// every thread has finished and every remote operation it posted has completed.
    pub fn run<P: Process>(&self, procs: Vec<(NodeId, P)>) -> Vec<P> {
        let start = Barrier::new(procs.len());
        let start = &start;
        thread::scope(|scope| {
            let threads: Vec<_> = procs
                .into_iter()
                .map(|(node, mut process)| {
                    // Endpoints are made here, in order, so that jitter streams are
                    // assigned deterministically.
                    let mut endpoint = self.endpoint(node);
                    scope.spawn(move || {
                        start.wait();
                        drive(&mut process, &mut endpoint);
                        // Dropping the endpoint waits for its remote operations.
                        drop(endpoint);
                        process
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|thread| thread.join().unwrap_or_else(|p| panic::resume_unwind(p)))
                .collect()
        })
    }

    /// How many operations the endpoints of this fabric have executed, counting the
    /// endpoints that have been dropped (so every operation of a finished [`run`]).
    ///
    /// [`run`]: MemFabric::run
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    /// The work requests and doorbells the endpoints of this fabric that have been dropped
    /// counted by the doorbell rule (so every request of a finished [`run`];
    /// [`MemEndpoint::work_requests`] counts a live endpoint's).
    ///
    /// [`run`]: MemFabric::run
    pub fn work_requests(&self) -> WorkRequests {
        *self
            .work_requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The channel of `node`'s NIC worker, or `None` in inline mode.
    pub(super) fn worker(&self, node: NodeId) -> Option<&Sender<Job>> {
        self.workers.get(node.index()).map(Worker::jobs)
    }

    /// Nanoseconds since the fabric was made (the clock of `Op::Now`).
    pub(super) fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// An endpoint that is going executed `ops` operations and counted `work_requests`.
    pub(super) fn count_ops(&self, ops: u64, work_requests: WorkRequests) {
        self.ops.fetch_add(ops, Ordering::SeqCst);
        let mut total = self
            .work_requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *total += work_requests;
        assert!(total.doorbells <= total.posted);
    }
}

impl Drop for MemFabric {
    fn drop(&mut self) {
        // Endpoints borrow the fabric, so they are all gone: closing each channel ends its
        // worker's loop.
        self.workers.drain(..).for_each(Worker::stop);
    }
}
