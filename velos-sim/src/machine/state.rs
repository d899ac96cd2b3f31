//! The state of the emulated machine: memory, threads with store buffers, queue pairs and
//! the per-node remote-atomic locks `L[n]` (rdma-semantics.md, "State").

use super::active::{ActiveQps, Members};
use super::delay::Link;
use super::items::{LocalWriteEntry, PipeItem, RemoteWrite, SbEntry, Timed};
use super::mutation::Mutation;
use std::collections::VecDeque;
use std::ops::Range;
use velos_rdma::{Layout, Loc, NodeId, Op, Process, RdmaError, Shared, WorkId};

/// What a thread does next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Next {
    /// It waits to execute this operation.
    Pending(Op),
    /// Its process has finished.
    Finished,
    /// Its node crashed.
    Crashed,
}

/// A thread: its process, its next operation, and its TSO store buffer `B[t]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadState<P> {
    /// The node it runs on.
    pub node: NodeId,
    /// The program, as a state machine.
    pub process: P,
    /// The next operation.
    pub next: Next,
    /// Earliest virtual time of the next CPU step.
    pub ready: u64,
    /// Store buffer: CPU writes and posted remote operations, oldest first.
    pub sb: VecDeque<Timed<SbEntry>>,
    /// Whether completion notifications are kept for `poll`.
    pub polls: bool,
    /// Failures of asynchronous operations not yet reported by a `wait`, oldest first.
    pub failed: Vec<(WorkId, RdmaError)>,
    /// Whether its pending [`Op::SetWriteAccess`] has started (the change is under way;
    /// it takes effect at the thread's next CPU step).
    pub changing_access: bool,
}

/// Why a queue pair cannot carry operations any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpStatus {
    /// Working.
    Ready,
    /// Put in the error state by a fault: every operation on it fails.
    Error,
    /// Put in the error state because its target refused a put
    /// ([`Op::SetWriteAccess`]): every operation on it fails until the target grants the
    /// requester's node write access again, which reconnects it.
    Refused,
    /// Cut off by one of its two nodes ([`Op::Disconnect`]): every operation on it fails
    /// until a new process in the place of one of them is started (the join path).
    Disconnected,
    /// The process it led to ended and a new one started in the target's place
    /// ([`Machine::restart`]) that the requester's node has not met yet: every operation on
    /// it fails until the join path connects the two ([`Machine::reconnect`]).
    Unmet,
}

/// A queue pair `Q[(t,n)]`: pipe, remote write buffer and local write buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueuePair {
    /// Pending and in-progress operations, oldest at the front.
    pub pipe: VecDeque<Timed<PipeItem>>,
    /// `rW`: remote writes on their way to the target's memory.
    pub rw: VecDeque<Timed<RemoteWrite>>,
    /// `lW`: NIC local writes and completion notifications.
    pub lw: VecDeque<Timed<LocalWriteEntry>>,
    /// Ready or in error.
    pub status: QpStatus,
}

impl QueuePair {
    fn new() -> QueuePair {
        QueuePair {
            pipe: VecDeque::new(),
            rw: VecDeque::new(),
            lw: VecDeque::new(),
            status: QpStatus::Ready,
        }
    }

    /// Whether `lW` holds only completion notifications (premise of rule 2).
    pub fn lw_only_completions(&self) -> bool {
        self.lw
            .iter()
            .all(|e| matches!(e.item, LocalWriteEntry::Completion))
    }

    /// Whether every operation is fully done: the global-fence condition.
    pub fn drained(&self) -> bool {
        self.pipe.is_empty() && self.rw.is_empty() && self.lw_only_completions()
    }
}

/// How operations towards a crashed node end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CrashMode {
    /// They never complete (the paper's model: a crashed process never answers).
    #[default]
    Hang,
    /// They complete with [`RdmaError::RemoteCrashed`] (a NIC that reports a broken
    /// connection after its retries run out).
    Error,
}

/// Whether a node is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeStatus {
    /// Running.
    Up,
    /// Crashed: its memory is gone and its threads stopped.
    Crashed(CrashMode),
}

/// The whole emulated machine. `Clone + Hash + Eq` so that the explorer can deduplicate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Machine<P> {
    /// Registered memory, one vector of words per node: `M`.
    pub mem: Vec<Vec<u64>>,
    /// Threads, in spawn order.
    pub threads: Vec<ThreadState<P>>,
    /// Queue pairs, `threads × nodes`, index `t * nodes + n`. Read it freely; change it
    /// only through the machine's steps and faults, which keep the set of queue pairs in
    /// use (the steps look at no other) up to date.
    pub qps: Vec<QueuePair>,
    /// `L[n]`: whether a remote atomic holds node n's atomic lock.
    pub atomic_busy: Vec<bool>,
    /// Per node: which nodes may put into its memory (bit i: node i), as its last
    /// [`Op::SetWriteAccess`] set it; initially every node.
    pub writers: Vec<u64>,
    /// Whether some process declares [`Process::changes_write_access`]: then the explorer
    /// makes no reduction (see `access.rs`).
    pub access_control: bool,
    /// Per node: up or crashed.
    pub nodes: Vec<NodeStatus>,
    /// A deliberately wrong rule, for tests only; `None` is the model.
    pub mutation: Option<Mutation>,
    /// Per node, per word: `t + 1` if only thread t ever touches the word (a library's
    /// scratch word), else 0. Declared by the program; the explorer's reduction uses it.
    pub owner: Shared<Vec<Vec<u32>>>,
    /// Per node: the word ranges placed in NIC device memory (see `placement.rs`). Only
    /// the latency of responder steps depends on it, never what a step does.
    pub(crate) device: Shared<Vec<Vec<Range<u32>>>>,
    /// The queue pairs in use (derived from `qps`; out of equality and hashing).
    active: ActiveQps,
    /// The queue pairs whose queues changed since the simulator's cache of enabled steps
    /// last looked (`enabled_cache.rs`; derived, out of equality and hashing).
    changed: ActiveQps,
}

impl<P: Process> Machine<P> {
    /// A machine with `layout`'s memory zeroed and no threads.
    pub fn new(layout: &Layout) -> Machine<P> {
        let n = usize::from(layout.nodes());
        Machine {
            mem: layout
                .node_ids()
                .map(|id| vec![0; layout.words(id) as usize])
                .collect(),
            threads: Vec::new(),
            qps: Vec::new(),
            atomic_busy: vec![false; n],
            writers: vec![u64::MAX; n],
            access_control: false,
            nodes: vec![NodeStatus::Up; n],
            mutation: None,
            owner: Shared::new(
                layout
                    .node_ids()
                    .map(|id| vec![0; layout.words(id) as usize])
                    .collect(),
            ),
            device: Shared::new(vec![Vec::new(); n]),
            active: ActiveQps::new(),
            changed: ActiveQps::new(),
        }
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.mem.len()
    }

    /// Sets a word before the run starts.
    pub fn init(&mut self, loc: Loc, value: u64) -> Result<(), RdmaError> {
        let index = self.word_index(loc)?;
        self.mem[loc.node.index()][index] = value;
        Ok(())
    }

    /// Adds a thread running `process` on `node`; it starts with [`velos_rdma::Reply::Start`].
    pub fn spawn(&mut self, node: NodeId, mut process: P) -> usize {
        assert!(node.index() < self.node_count(), "spawn on unknown {node}");
        assert!(
            self.threads.iter().all(|t| t.sb.is_empty()),
            "spawn before the run starts"
        );
        let polls = process.polls();
        self.access_control |= process.changes_write_access();
        let next = match process.resume(velos_rdma::Reply::Start) {
            velos_rdma::Step::Op(op) => Next::Pending(op),
            velos_rdma::Step::Done => Next::Finished,
        };
        self.threads.push(ThreadState {
            node,
            process,
            next,
            ready: 0,
            sb: VecDeque::new(),
            polls,
            failed: Vec::new(),
            changing_access: false,
        });
        for _ in 0..self.node_count() {
            self.qps.push(QueuePair::new());
        }
        self.active.reserve(self.qps.len());
        self.changed.reserve(self.qps.len());
        self.threads.len() - 1
    }

    /// Brings queue pair q's membership of the set in use up to date with its queues.
    pub(crate) fn refresh_active(&mut self, q: usize) {
        let qp = &self.qps[q];
        let busy = !(qp.pipe.is_empty() && qp.rw.is_empty() && qp.lw.is_empty());
        self.active.set(q, busy);
        self.changed.set(q, true);
    }

    /// Brings the whole set of queue pairs in use up to date (after a fault).
    pub(crate) fn refresh_all_active(&mut self) {
        for q in 0..self.qps.len() {
            self.refresh_active(q);
        }
    }

    /// Marks queue pair q in use: an item is entering it.
    pub(crate) fn mark_active(&mut self, q: usize) {
        self.active.set(q, true);
        self.changed.set(q, true);
    }

    /// The queue pairs that may hold something, in index order: every non-empty one, and
    /// perhaps some empty ones.
    pub(crate) fn active_qps(&self) -> Members<'_> {
        self.active.iter()
    }

    /// The queue pairs whose queues changed since [`Machine::clear_changed`], in index
    /// order (every change of a queue pair's queues goes through `refresh_active` or
    /// `mark_active`).
    pub(crate) fn changed_qps(&self) -> Members<'_> {
        self.changed.iter()
    }

    /// Forgets the changes seen so far.
    pub(crate) fn clear_changed(&mut self) {
        self.changed.clear();
    }

    /// Thread t's queue pairs that may hold something, in index order.
    pub(crate) fn active_qps_of(&self, t: usize) -> Members<'_> {
        let n = self.node_count();
        self.active.iter_range(t * n..(t + 1) * n)
    }

    /// Debug builds: every non-empty queue pair is in the set in use.
    #[cfg(debug_assertions)]
    pub(crate) fn check_active(&self) {
        for (q, qp) in self.qps.iter().enumerate() {
            let busy = !(qp.pipe.is_empty() && qp.rw.is_empty() && qp.lw.is_empty());
            assert!(
                !busy || self.active.contains(q),
                "queue pair {q} is in use but not in the active set"
            );
        }
    }

    /// The queue pair `Q[(t,n)]`'s index.
    pub fn qp_index(&self, thread: usize, node: NodeId) -> usize {
        thread * self.node_count() + node.index()
    }

    /// The thread and target node of queue pair `q`.
    pub fn qp_ends(&self, q: usize) -> (usize, NodeId) {
        let n = self.node_count();
        (q / n, NodeId((q % n) as u16))
    }

    /// The nodes queue pair `q` joins: its poster's and its target.
    pub fn link(&self, q: usize) -> Link {
        let (t, to) = self.qp_ends(q);
        Link {
            from: self.threads[t].node,
            to,
        }
    }

    /// Checks a location against the memory's shape.
    pub fn word_index(&self, loc: Loc) -> Result<usize, RdmaError> {
        // Not `ok_or(error)`: that builds and drops an error on every call.
        let Some(index) = loc.word_index() else {
            return Err(RdmaError::MisalignedAtomic { loc });
        };
        match self.mem.get(loc.node.index()) {
            Some(words) if index < words.len() => Ok(index),
            _ => Err(RdmaError::OutOfBounds { loc }),
        }
    }

    /// Reads a word of memory (`M`), or `None` for a bad location.
    pub fn read(&self, loc: Loc) -> Option<u64> {
        let index = self.word_index(loc).ok()?;
        Some(self.mem[loc.node.index()][index])
    }

    /// Writes a word of memory (`M`). Locations were checked when the operation was posted.
    pub(crate) fn write(&mut self, loc: Loc, value: u64) {
        let index = self.word_index(loc).expect("locations are checked at post");
        self.mem[loc.node.index()][index] = value;
    }

    /// Declares that only thread `thread` ever touches `loc`.
    pub fn set_private(&mut self, loc: Loc, thread: usize) {
        self.mark_owner(loc, u32::try_from(thread + 1).expect("thread ids fit u32"));
    }

    /// Writes `mark` into the owner table for `loc`. The table is set up before the run and
    /// then shared by every state: while only this machine holds it, no copy is made.
    pub(crate) fn mark_owner(&mut self, loc: Loc, mark: u32) {
        let index = self
            .word_index(loc)
            .expect("a declared word inside the layout");
        self.owner.make_mut()[loc.node.index()][index] = mark;
    }

    /// The thread `loc` is private to, if any.
    pub fn private_to(&self, loc: Loc) -> Option<usize> {
        let index = loc.word_index()?;
        match self.owner.get(loc.node.index())?.get(index)? {
            0 => None,
            &t => Some(t as usize - 1),
        }
    }

    /// Whether the rules run with mutation `m`.
    pub fn mutated(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }

    /// Whether `node` is up.
    pub fn is_up(&self, node: NodeId) -> bool {
        matches!(self.nodes[node.index()], NodeStatus::Up)
    }

    /// The end condition: every live thread finished and every store buffer, pipe and
    /// `rW` empty, every `lW` only completions. Queue pairs towards a node that crashed in
    /// `Hang` mode never drain and are not counted.
    pub fn is_complete(&self) -> bool {
        self.threads
            .iter()
            .all(|t| !matches!(t.next, Next::Pending(_)) && t.sb.is_empty())
            && self.qps.iter().enumerate().all(|(q, qp)| {
                let (_, target) = self.qp_ends(q);
                qp.drained() || !self.is_up(target)
            })
    }
}
