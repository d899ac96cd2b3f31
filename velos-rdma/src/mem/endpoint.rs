//! A thread's endpoint on a [`MemFabric`].

use super::completions::{Completions, SharedCompletions, Ticket};
use super::fabric::MemFabric;
use super::jitter::Jitter;
use super::task::Task;
use super::worker::Job;
use crate::doorbell::{self, Doorbells, WorkRequests};
use crate::endpoint::Endpoint;
use crate::error::RdmaError;
use crate::idle::Backoff;
use crate::ids::{Loc, NodeId, WorkId};
use crate::op::{Op, Reply};
use crossbeam_channel::Sender;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{self, AtomicU64, Ordering};

/// One thread's connection to a [`MemFabric`]; made by [`MemFabric::endpoint`].
///
/// CPU operations (`Load`, `Store`, `Cas`, `Mfence`) act on the thread's own node at once,
/// as `SeqCst` atomics. Remote operations are posted: the reply is [`Reply::Done`] and the
/// operation executes later (in [`Mode::Worker`](super::Mode::Worker)) or inside the post
/// (in [`Mode::Inline`](super::Mode::Inline)). The operations of one queue pair (this
/// endpoint towards one node) execute one at a time, in posting order. A `Pause` passes by
/// the idle back-off of [`crate::idle`] (spinning, then yielding, then sleeping once the
/// thread has been idle a while; never asleep longer than asked).
///
/// # Failures
/// A remote operation replies `Failed` at post only when there is no queue pair for it (its
/// target is not a node of the layout) or its local operand is on another node. Any other
/// failure (bad address, crashed node, queue pair in error) is the operation's completion
/// status, reported once, by the first of these that covers the operation:
/// * `Wait` for its work id, as [`RdmaError::WorkFailed`] (the earliest posted failure
///   among the awaited operations);
/// * `Poll` acknowledging it, as the plain cause;
/// * `GlobalFence` towards its target, as the plain cause. A global fence towards a crashed
///   node or through a queue pair in error fails even when no operation failed.
///
/// # Counting
/// The endpoint hands each remote operation to its queue pair at once (it does not batch),
/// but counts work requests and doorbells by the rule the verbs backend batches by
/// ([`crate::doorbell`]): [`work_requests`](MemEndpoint::work_requests).
///
/// Dropping an endpoint waits until its posted operations have completed.
#[derive(Debug)]
pub struct MemEndpoint<'f> {
    fabric: &'f MemFabric,
    node: NodeId,
    id: u64,
    nic: Nic<'f>,
    jitter: Option<Jitter>,
    /// Remote operations posted so far.
    seq: u64,
    /// Per target node: operations posted on the queue pair so far.
    posted: Vec<u64>,
    /// Per target node: completions acknowledged by `Poll` so far.
    polled: Vec<u64>,
    /// Per work id ever posted: per target node, the queue-pair position of the newest
    /// operation with that id not awaited since (0: none; all 0: nothing to wait for).
    /// An awaited id's row is zeroed, not removed, so that a work id posted again and
    /// again (a CAS cell, a heartbeat read) allocates nothing; hashed by `FxHash`, since
    /// a work id is a small integer the endpoint's own program chose.
    newest: FxHashMap<WorkId, Box<[u64]>>,
    /// Operations executed so far.
    ops: u64,
    /// How `Pause`s pass: the idle back-off of [`crate::idle`].
    backoff: Backoff,
    /// The work requests and doorbells the doorbell rule counts.
    doorbells: Doorbells,
}

/// Where the endpoint's remote operations execute.
#[derive(Debug)]
enum Nic<'f> {
    /// On this thread, inside the post; the completions are this endpoint's alone.
    Inline(Completions),
    /// On the node's NIC worker, which reports into the shared completions.
    Worker {
        jobs: &'f Sender<Job>,
        completions: Arc<SharedCompletions>,
    },
}

impl<'f> MemEndpoint<'f> {
    pub(super) fn new(
        fabric: &'f MemFabric,
        node: NodeId,
        id: u64,
        jitter: Option<Jitter>,
    ) -> MemEndpoint<'f> {
        let nodes = usize::from(fabric.layout().nodes());
        let nic = match fabric.worker(node) {
            None => Nic::Inline(Completions::new(nodes)),
            Some(jobs) => Nic::Worker {
                jobs,
                completions: Arc::new(SharedCompletions::new(nodes)),
            },
        };
        MemEndpoint {
            fabric,
            node,
            id,
            nic,
            jitter,
            seq: 0,
            posted: vec![0; nodes],
            polled: vec![0; nodes],
            newest: FxHashMap::default(),
            ops: 0,
            backoff: Backoff::default(),
            doorbells: Doorbells::new(nodes),
        }
    }

    /// The work requests this endpoint's remote operations would be on a NIC, and the
    /// doorbells they would ring, by the rule of [`crate::doorbell`]: one work request per
    /// remote operation posted (none for one that failed at once), nothing signaled, no
    /// flush. Operations still kept by the rule are not counted yet.
    pub fn work_requests(&self) -> WorkRequests {
        let counts = WorkRequests {
            posted: self.doorbells.requests(),
            doorbells: self.doorbells.doorbells(),
            ..WorkRequests::default()
        };
        assert!(counts.doorbells <= counts.posted);
        counts
    }

    /// The word at `loc` for a CPU access by this thread.
    fn local_word(&self, loc: Loc) -> Result<&'f AtomicU64, RdmaError> {
        if loc.node != self.node {
            return Err(RdmaError::NotLocal {
                loc,
                node: self.node,
            });
        }
        let memory = self.fabric.memory();
        let word = memory.word(loc)?;
        memory.alive(self.node)?;
        Ok(word)
    }

    /// Posts a remote operation.
    fn post(&mut self, op: &Op) -> Result<(), RdmaError> {
        let work_id = op.work_id().expect("a remote operation has a work id");
        let task = Task::post(op, self.node, self.fabric.memory())?;
        let target = task.target.index();
        self.seq += 1;
        self.posted[target] += 1;
        let ticket = Ticket {
            seq: self.seq,
            target: task.target,
            qp_seq: self.posted[target],
            work_id,
        };
        let nodes = self.posted.len();
        self.newest
            .entry(work_id)
            .or_insert_with(|| vec![0; nodes].into_boxed_slice())[target] = ticket.qp_seq;
        if self.doorbells.keep(target) {
            self.doorbells.ring(target);
        }
        match &mut self.nic {
            Nic::Inline(completions) => {
                completions.complete(ticket, task.execute(self.fabric.memory()));
            }
            Nic::Worker { jobs, completions } => jobs
                .send(Job {
                    endpoint: self.id,
                    ticket,
                    task,
                    completions: Arc::clone(completions),
                })
                .expect("NIC workers live as long as the fabric"),
        }
        Ok(())
    }

    /// `Test`: whether every earlier operation with `work_id` has completed (then as
    /// `wait`), without blocking.
    fn test(&mut self, work_id: WorkId) -> Result<bool, RdmaError> {
        let Some(newest) = self.newest.get_mut(&work_id) else {
            return Ok(true);
        };
        // Borrowed, not cloned: the rows and the completions are different fields.
        if !settle(
            &mut self.nic,
            |_| true,
            |completions| completions.covers(newest),
        ) {
            return Ok(false);
        }
        // Complete: as `wait`, on the row already found.
        Self::awaited(&mut self.nic, work_id, newest).map(|()| true)
    }

    /// `WaitAny`: the lowest i in `mask` whose work id `base + i` is complete (then as `wait`).
    fn wait_any(&mut self, base: WorkId, mask: u64) -> Result<u64, RdmaError> {
        if mask == 0 {
            return Err(RdmaError::NothingToWaitFor);
        }
        let ids: Vec<(u64, Vec<u64>)> = (0..64u64)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| {
                let id = WorkId(base.0 + i as u32);
                let row = self.newest.get(&id).map(|row| row.to_vec());
                (i, row.unwrap_or_default())
            })
            .collect();
        let complete = |c: &Completions| {
            ids.iter()
                .find(|(_, n)| n.is_empty() || c.covers(n))
                .map(|(i, _)| *i)
        };
        let i = self.settle(|c| complete(c).is_some(), |c| complete(c).expect("settled"));
        self.wait(WorkId(base.0 + i as u32)).map(|()| i)
    }

    /// `Wait`: every earlier operation with `work_id` has completed.
    fn wait(&mut self, work_id: WorkId) -> Result<(), RdmaError> {
        let Some(newest) = self.newest.get_mut(&work_id) else {
            return Ok(());
        };
        Self::awaited(&mut self.nic, work_id, newest)
    }

    /// `wait` for `work_id` whose row of newest positions is `newest`: blocks until they
    /// completed, then zeroes the row and reports the earliest failure among them.
    fn awaited(nic: &mut Nic<'_>, work_id: WorkId, newest: &mut [u64]) -> Result<(), RdmaError> {
        if newest.iter().all(|&p| p == 0) {
            return Ok(()); // awaited since its last post: as if never posted
        }
        let failure = settle(
            nic,
            |completions| completions.covers(newest),
            |completions| completions.take_failure(|ticket| ticket.work_id == work_id),
        );
        newest.fill(0);
        match failure {
            None => Ok(()),
            Some(cause) => Err(RdmaError::WorkFailed {
                work_id,
                cause: Box::new(cause),
            }),
        }
    }

    /// `Poll`: the oldest unacknowledged operation on the queue pair towards `node` has
    /// completed.
    fn poll(&mut self, node: NodeId) -> Result<(), RdmaError> {
        let target = self.queue_pair(node)?;
        // In the model such a poll is never enabled and the thread blocks forever; a real
        // backend says so instead of hanging.
        if self.polled[target] >= self.posted[target] {
            return Err(RdmaError::NothingToPoll { node });
        }
        self.polled[target] += 1;
        let qp_seq = self.polled[target];
        self.settle(
            |completions| completions.completed(node) >= qp_seq,
            |completions| {
                completions.take_failure(|ticket| ticket.target == node && ticket.qp_seq == qp_seq)
            },
        )
        .map_or(Ok(()), Err)
    }

    /// `GlobalFence`: every earlier operation towards `node` has completed.
    fn global_fence(&mut self, node: NodeId) -> Result<(), RdmaError> {
        let posted = self.posted[self.queue_pair(node)?];
        self.settle(
            |completions| completions.completed(node) >= posted,
            |completions| completions.take_failure(|ticket| ticket.target == node),
        )
        .map_or(Ok(()), Err)?;
        self.fabric.memory().queue_pair(self.node, node)
    }

    /// The index of the queue pair towards `node`, if `node` exists.
    fn queue_pair(&self, node: NodeId) -> Result<usize, RdmaError> {
        if self.fabric.memory().has_node(node) {
            Ok(node.index())
        } else {
            Err(RdmaError::UnknownNode { node })
        }
    }

    /// Blocks until `ready` holds of the completions, then runs `then` on them.
    fn settle<R>(
        &mut self,
        ready: impl Fn(&Completions) -> bool,
        then: impl FnOnce(&mut Completions) -> R,
    ) -> R {
        settle(&mut self.nic, ready, then)
    }

    fn execute_op(&mut self, op: &Op) -> Result<Reply, RdmaError> {
        let done = |result: Result<(), RdmaError>| result.map(|()| Reply::Done);
        match *op {
            Op::Load { loc } => Ok(Reply::Value(self.local_word(loc)?.load(Ordering::SeqCst))),
            Op::Store { loc, value } => {
                self.local_word(loc)?.store(value, Ordering::SeqCst);
                Ok(Reply::Done)
            }
            Op::LoadWords { loc, count } => {
                crate::copy::load_words(|loc| self.local_word(loc), loc, count)
            }
            Op::StoreWords { loc, ref words } => {
                crate::copy::store_words(|loc| self.local_word(loc), loc, words)
            }
            Op::Cas { loc, expected, new } => Ok(Reply::Value(
                self.local_word(loc)?
                    .compare_exchange(expected, new, Ordering::SeqCst, Ordering::SeqCst)
                    .unwrap_or_else(|actual| actual),
            )),
            Op::Mfence => {
                atomic::fence(Ordering::SeqCst);
                Ok(Reply::Done)
            }
            Op::Put { .. }
            | Op::PutInline { .. }
            | Op::PutWords { .. }
            | Op::Get { .. }
            | Op::GetWords { .. }
            | Op::Atomic { .. } => done(self.post(op)),
            Op::Wait { work_id } => done(self.wait(work_id)),
            Op::WaitAny { base, mask } => self.wait_any(base, mask).map(Reply::Value),
            Op::Test { work_id } => self.test(work_id).map(|c| Reply::Value(u64::from(c))),
            Op::TestLoad { work_id, loc } => match self.test(work_id)? {
                false => Ok(Reply::Done),
                true => Ok(Reply::Value(self.local_word(loc)?.load(Ordering::SeqCst))),
            },
            Op::Poll { node } => done(self.poll(node)),
            // Queue pairs already run one operation at a time, in order.
            Op::Rfence { node } => done(self.queue_pair(node).map(drop)),
            Op::GlobalFence { node } => done(self.global_fence(node)),
            Op::Now => Ok(Reply::Value(self.fabric.now_ns())),
            // In effect at once: puts the NIC executes from now on are checked against it.
            Op::SetWriteAccess { writers } => {
                done(self.fabric.memory().set_writers(self.node, writers))
            }
            Op::Disconnect { node } => done(self.fabric.memory().disconnect(self.node, node)),
            Op::Pause { ns } => {
                // Spun, yielded or slept by how long the thread has been idle; never
                // asleep longer than asked (see `crate::idle`).
                let fabric = self.fabric;
                self.backoff
                    .pause(ns, || fabric.now_ns(), || false, std::thread::sleep);
                Ok(Reply::Done)
            }
        }
    }
}

/// [`MemEndpoint::settle`] on the endpoint's NIC alone (so that the caller may hold
/// another field of the endpoint meanwhile).
fn settle<R>(
    nic: &mut Nic<'_>,
    ready: impl Fn(&Completions) -> bool,
    then: impl FnOnce(&mut Completions) -> R,
) -> R {
    match nic {
        Nic::Inline(completions) => {
            assert!(ready(completions), "inline operations complete at post");
            then(completions)
        }
        Nic::Worker { completions, .. } => completions.settle(ready, then),
    }
}

impl Endpoint for MemEndpoint<'_> {
    fn node(&self) -> NodeId {
        self.node
    }

    fn execute(&mut self, op: &Op) -> Reply {
        self.ops += 1;
        self.backoff.saw(op);
        if let Some(jitter) = &mut self.jitter {
            jitter.delay();
        }
        if doorbell::rings(op) {
            self.doorbells.ring_all();
        }
        self.execute_op(op).unwrap_or_else(Reply::Failed)
    }
}

impl Drop for MemEndpoint<'_> {
    fn drop(&mut self) {
        let posted = std::mem::take(&mut self.posted);
        self.settle(|completions| completions.covers(&posted), |_| ());
        self.doorbells.ring_all();
        self.fabric.count_ops(self.ops, self.work_requests());
    }
}
