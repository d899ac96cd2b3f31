//! The fabric: the device, the registered memory of every node, and running processes.

use super::access::WriteAccess;
use super::connection::{Connection, Lane};
use super::device::{Device, VerbsOptions};
use super::endpoint::VerbsEndpoint;
use super::error::VerbsError;
use super::host::Host;
use super::memory::{Memory, WordAddress};
use crate::doorbell::WorkRequests;
use crate::endpoint::drive;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use crate::process::Process;
use std::panic;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// A single-process RDMA fabric on a real device: every node of a [`Layout`] has its
/// registered region (one memory region each, all in one protection domain) in this
/// process, and threads reach them over loopback RC queue pairs.
///
/// Threads get [`VerbsEndpoint`]s ([`VerbsFabric::endpoint`]) or run [`Process`]es with
/// [`VerbsFabric::run`].
#[derive(Debug)]
pub struct VerbsFabric {
    /// Declared before `device`: the regions are deregistered before the protection
    /// domain goes.
    memory: Memory,
    /// Who may write into each node, and the responders that enforce it.
    access: WriteAccess,
    device: Device,
    options: VerbsOptions,
    /// Operations executed by endpoints that have been dropped.
    ops: AtomicU64,
    /// Work requests posted by endpoints that have been dropped.
    work_requests: Mutex<WorkRequests>,
    /// When the fabric was made: the zero of every node's clock (`Op::Now`).
    started: Instant,
}

impl VerbsFabric {
    /// A fabric with zeroed memory for `layout` on the first RDMA device, with the default
    /// options.
    ///
    /// # Errors
    /// [`VerbsError::NoDevice`] on a machine without RDMA; other variants when the device
    /// fails.
    pub fn open(layout: Layout) -> Result<VerbsFabric, VerbsError> {
        VerbsFabric::with_options(layout, VerbsOptions::default())
    }

    /// A fabric with zeroed memory for `layout` and the given options.
    ///
    /// # Errors
    /// As [`VerbsFabric::open`], and [`VerbsError::DeviceNotFound`] for a device name not
    /// in the list.
    pub fn with_options(layout: Layout, options: VerbsOptions) -> Result<VerbsFabric, VerbsError> {
        let device = Device::open(&options)?;
        let access = WriteAccess::new(layout.nodes());
        let memory = Memory::register(layout, &device.pd)?;
        let fabric = VerbsFabric {
            access,
            memory,
            device,
            options,
            ops: AtomicU64::new(0),
            work_requests: Mutex::new(WorkRequests::default()),
            started: Instant::now(),
        };
        assert_eq!(fabric.device.port, fabric.options.port);
        Ok(fabric)
    }

    /// The registered memory and the device (the permission routes' timing test).
    #[cfg(test)]
    pub(super) fn parts(&self) -> (&Memory, &Device) {
        (&self.memory, &self.device)
    }

    /// The layout of the registered memory.
    pub fn layout(&self) -> &Layout {
        self.memory.layout()
    }

    /// The options the fabric was built with.
    pub fn options(&self) -> &VerbsOptions {
        &self.options
    }

    /// The fabric's clock: ns since it was made, what `Op::Now` replies on every node.
    pub fn clock_ns(&self) -> u64 {
        Host::now_ns(self)
    }

    /// The name of the device in use (`rxe0`, ...).
    pub fn device_name(&self) -> &str {
        &self.device.name
    }

    /// Reads the word at `loc`, for inspection (not an operation of any thread).
    pub fn read(&self, loc: Loc) -> Result<u64, RdmaError> {
        Ok(self.memory.word(loc)?.load(Ordering::SeqCst))
    }

    /// Writes `value` into the word at `loc`, for initialisation (not an operation of any
    /// thread).
    pub fn write(&self, loc: Loc, value: u64) -> Result<(), RdmaError> {
        self.memory.word(loc)?.store(value, Ordering::SeqCst);
        Ok(())
    }

    /// A copy of every node's words, node by node.
    pub fn snapshot(&self) -> Vec<Vec<u64>> {
        self.memory.snapshot()
    }

    /// A new endpoint for a thread running on `node`, with its own completion queue and
    /// one connection (a pair of RC queue pairs) towards every node, its own included.
    ///
    /// # Errors
    /// [`VerbsError::UnknownNode`] if `node` is not a node of the layout; a verbs error if
    /// the queue pairs cannot be made or connected.
    pub fn endpoint(&self, node: NodeId) -> Result<VerbsEndpoint<'_>, VerbsError> {
        if !self.memory.has_node(node) {
            return Err(VerbsError::UnknownNode { node });
        }
        let lane = Lane::loopback(&self.device, self.layout(), self.options.queue_depth)?;
        self.access.register(node, &lane)?;
        Ok(VerbsEndpoint::new(self, node, lane))
    }

    /// Runs each process on its own thread, with an endpoint on its node; the threads start
    /// together. Returns the processes in their final states, in the given order, once
    /// every thread has finished and every remote operation it posted has completed.
    ///
    /// # Errors
    /// If an endpoint cannot be made (before any process runs).
    pub fn run<P: Process + Send>(&self, procs: Vec<(NodeId, P)>) -> Result<Vec<P>, VerbsError> {
        let mut ready = Vec::with_capacity(procs.len());
        for (node, process) in procs {
            ready.push((self.endpoint(node)?, process));
        }
        let count = ready.len();
        let start = Barrier::new(count);
        let start = &start;
        let done = thread::scope(|scope| {
            let threads: Vec<_> = ready
                .into_iter()
                .map(|(mut endpoint, mut process)| {
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
                .collect::<Vec<P>>()
        });
        assert_eq!(done.len(), count);
        Ok(done)
    }

    /// How many operations the endpoints of this fabric have executed, counting the
    /// endpoints that have been dropped (so every operation of a finished [`run`]).
    ///
    /// [`run`]: VerbsFabric::run
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    /// How many work requests the endpoints of this fabric that have been dropped posted,
    /// and how many of them were signaled (so every request of a finished [`run`];
    /// [`VerbsEndpoint::work_requests`] counts a live endpoint's).
    ///
    /// [`run`]: VerbsFabric::run
    pub fn work_requests(&self) -> WorkRequests {
        *self
            .work_requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Host for VerbsFabric {
    fn layout(&self) -> &Layout {
        self.memory.layout()
    }

    fn word(&self, loc: Loc) -> Result<&AtomicU64, RdmaError> {
        self.memory.word(loc)
    }

    fn local(&self, loc: Loc) -> WordAddress {
        self.memory.local(loc)
    }

    fn remote(&self, loc: Loc) -> WordAddress {
        self.memory.remote(loc)
    }

    fn queue_depth(&self) -> u32 {
        self.options.queue_depth
    }

    fn completion_timeout(&self) -> Duration {
        self.options.completion_timeout
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The lane's queue pairs are destroyed (each endpoint makes its own).
    fn release(&self, lane: Lane, ops: u64) {
        drop(lane);
        self.ops.fetch_add(ops, Ordering::SeqCst);
    }

    fn set_writers(&self, node: NodeId, writers: u64) -> Result<(), RdmaError> {
        self.access.set(node, writers)
    }

    fn regrant(
        &self,
        from: NodeId,
        target: NodeId,
        connection: &mut Connection,
    ) -> Result<bool, VerbsError> {
        self.access.regrant(&self.device, from, target, connection)
    }

    fn count_work_requests(&self, counts: WorkRequests) {
        let mut total = self
            .work_requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *total += counts;
        assert!(total.signaled <= total.posted);
    }
}
