//! The operations a process issues, and the replies it gets back.

use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::words::Words;
use serde::{Deserialize, Serialize};

/// The read-modify-write a remote atomic performs at its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Rmw {
    /// Compare-and-swap: write `new` if the word equals `expected`.
    Cas {
        /// The value the word must hold for the swap to happen.
        expected: u64,
        /// The value written on success.
        new: u64,
    },
    /// Fetch-and-add of `add` (wrapping).
    Faa {
        /// The increment.
        add: u64,
    },
}

impl Rmw {
    /// The value the atomic writes given the old value, or `None` when a CAS fails.
    pub fn apply(self, old: u64) -> Option<u64> {
        match self {
            Rmw::Cas { expected, new } => (old == expected).then_some(new),
            Rmw::Faa { add } => Some(old.wrapping_add(add)),
        }
    }
}

/// One operation of the programming model. CPU operations touch the issuing thread's own
/// node; remote operations carry a work id and are asynchronous: posting returns at once.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// CPU read of a local word; replies [`Reply::Value`].
    Load {
        /// The word read (on the thread's node).
        loc: Loc,
    },
    /// CPU write of a local word (through the TSO store buffer).
    Store {
        /// The word written (on the thread's node).
        loc: Loc,
        /// The value.
        value: u64,
    },
    /// CPU read of `count` consecutive local words (ours: a memory copy out, where `Load`
    /// reads one word): replies [`Reply::Words`], word i from `loc` + 8·i. In the model,
    /// that many `Load`s in a row, in address order; one CPU step, charged by its bytes.
    LoadWords {
        /// The first word read (on the thread's node).
        loc: Loc,
        /// How many words (at least 1).
        count: u32,
    },
    /// CPU write of consecutive local words (ours: a memory copy, where `Store` writes one
    /// word): word i to `loc` + 8·i. In the model, that many `Store`s in a row, in
    /// address order, each through the store buffer; one CPU step, charged by its bytes.
    StoreWords {
        /// The first word written (on the thread's node).
        loc: Loc,
        /// The values.
        words: Words,
    },
    /// CPU compare-and-swap on a local word; waits for the store buffer to drain; replies
    /// the old value.
    Cas {
        /// The word (on the thread's node).
        loc: Loc,
        /// Expected old value.
        expected: u64,
        /// Value written on success.
        new: u64,
    },
    /// CPU memory fence: waits for the store buffer to drain.
    Mfence,
    /// RDMA write: the NIC reads `local` and writes the value to `remote`.
    Put {
        /// Destination word (its node is the target of the queue pair).
        remote: Loc,
        /// Source word on the thread's node, read by the NIC, not at post time.
        local: Loc,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// Inline RDMA write of a constant captured at post time.
    PutInline {
        /// Destination word.
        remote: Loc,
        /// The value written.
        value: u64,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// Inline RDMA write of several consecutive words captured at post time (ours: a NIC
    /// writes a message of many bytes in one work request, where a put moves one word).
    /// Word i goes to `remote` + 8·i. In the model it is one pipe item, `P1(y, v₀…vₙ)`,
    /// and rule 3 appends one remote write per word to `rW` in address order, so the
    /// words reach memory one by one, lowest address first, as the puts of one queue pair
    /// do (a reader may see a prefix of them, never a later word without the earlier
    /// ones). Completes as a put; every word must be writable, else it fails as a put to
    /// the first word that is not would.
    PutWords {
        /// Destination of word 0 (its node is the target of the queue pair).
        remote: Loc,
        /// The words written.
        words: Words,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// RDMA read of `remote` into the local word `local`.
    Get {
        /// Destination word on the thread's node.
        local: Loc,
        /// Source word (its node is the target of the queue pair).
        remote: Loc,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// RDMA read of `count` consecutive words (ours: a NIC reads a message of many bytes
    /// in one work request, where a get moves one word): remote word i into local word i.
    /// In the model, `count` gets posted at once with one work id, in address order; like
    /// the gets of one queue pair they may be executed in any order, so a reader may see
    /// any mix of older and newer words (torn, as a READ of many bytes is). The payload's
    /// bytes are charged as a put's. Every word must be readable and every local word on
    /// the thread's node.
    GetWords {
        /// Destination of word 0, on the thread's node.
        local: Loc,
        /// Source of word 0 (its node is the target of the queue pair).
        remote: Loc,
        /// How many words (at least 1).
        count: u32,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// Remote atomic (CAS or FAA) on `remote`; the old value lands in `local`.
    Atomic {
        /// Where the NIC writes the old value (on the thread's node).
        local: Loc,
        /// The target word; must be 8-byte aligned.
        remote: Loc,
        /// What the atomic does.
        rmw: Rmw,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// rdmawait `wait`: blocks until every earlier remote operation of this thread with
    /// this work id is complete.
    Wait {
        /// The tag waited for.
        work_id: WorkId,
    },
    /// rdmawait `test` (ours, the non-blocking twin of `wait`, as `MPI_Test` is of
    /// `MPI_Wait`): replies `Value(1)` if every earlier remote operation of this thread with
    /// this work id is complete — then exactly as `wait` would (its failures included) —
    /// and `Value(0)` otherwise, consuming nothing. It lets a process wait for a majority of
    /// operations when some target may never answer.
    Test {
        /// The tag tested.
        work_id: WorkId,
    },
    /// rdmawait `test` and, once the work id is complete, a CPU `Load` of `loc` in the same
    /// step (ours: a remote atomic's old value as it completes, one step instead of a
    /// `test` and then a load). Replies [`Reply::Done`] while an earlier remote operation
    /// with this work id is incomplete (consuming nothing); once every one is complete, the
    /// failure among them as `test` reports it, else the word at `loc` as `Load` reads it.
    /// Meant for a word only this thread's operations with that work id write (a remote
    /// atomic's result cell): then nothing can change it between the two halves.
    TestLoad {
        /// The tag tested.
        work_id: WorkId,
        /// The word loaded once it is complete (on the thread's node).
        loc: Loc,
    },
    /// rdmawait `wait_any` (ours, like polling a completion queue until one of several
    /// operations completes): blocks until, for some bit i of `mask`, every earlier remote
    /// operation with work id `base + i` is complete, and replies `Value(i)` for the lowest
    /// such i — reporting a failure among those operations as `wait(base + i)` would. It
    /// lets a process wait for the first of several acceptors to answer, without polling.
    WaitAny {
        /// The work id of bit 0.
        base: WorkId,
        /// Which work ids `base + i` to wait for; never 0.
        mask: u64,
    },
    /// rdmatso `poll`: consumes the oldest completion notification of the queue pair
    /// towards `node`, blocking until there is one.
    Poll {
        /// Target node of the queue pair.
        node: NodeId,
    },
    /// Remote fence towards `node`: later operations on that queue pair start only after
    /// every earlier one has completed. Does not block the CPU.
    Rfence {
        /// Target node of the queue pair.
        node: NodeId,
    },
    /// Global fence towards `node`: blocks until every earlier operation of this thread
    /// towards `node` is fully done, remote writes in memory included.
    GlobalFence {
        /// Target node.
        node: NodeId,
    },
    /// Reads the node's clock (ours: failure detectors need timeouts): replies
    /// `Value(ns)`, nanoseconds since the backend started, never decreasing. Virtual time in
    /// the simulator; 0 in the exhaustive explorer, which has no time.
    Now,
    /// Lets `ns` nanoseconds pass before the next operation (ours: a periodic task's
    /// timer). Blocks only the CPU; operations already posted go on. A no-op in the
    /// exhaustive explorer.
    Pause {
        /// How long.
        ns: u64,
    },
    /// Changes which peers may RDMA WRITE into this node's memory (ours: Mu's permission
    /// switch, where only the leader's queue pair holds REMOTE_WRITE on a follower's log).
    /// The node's CPU changes the access of its own end of every queue pair at once: bit i
    /// of `writers` set means node i's queue pairs towards this node may write (puts,
    /// inline or not); reads and remote atomics are unaffected. Replies `Done` once the
    /// change is in effect; on a NIC that takes a while (about 250 µs on ConnectX).
    ///
    /// Initially every peer may write. After the change, a put from a node whose bit is
    /// clear fails with [`RdmaError::RemoteAccess`] at the `wait` for its work id (the
    /// target checks when the write arrives, so a put posted before the change can fail)
    /// and, as on a NIC, puts the requester's queue pair into the error state: its later
    /// operations fail with [`RdmaError::QueuePairError`]. Granting write access again
    /// reconnects the peer's refused queue pairs towards this node (Mu cycles a queue
    /// pair through reset when it changes permissions), so they carry operations again.
    ///
    /// A bit for a node the fabric does not have fails the operation with
    /// [`RdmaError::UnknownNode`]; a fabric of more than 64 nodes cannot name them all
    /// and replies [`RdmaError::Unsupported`].
    SetWriteAccess {
        /// Bit i: node i may write into this node's memory.
        writers: u64,
    },
    /// Ends this node's connection with `node` for good (least privilege once `node` no
    /// longer belongs: a member removed from a configuration). This node's queue pairs
    /// towards `node` and `node`'s towards this node go into the error state: operations
    /// outstanding on them complete in error and later ones fail with
    /// [`RdmaError::QueuePairError`], so neither reads, writes nor atomically updates the
    /// other's memory from now on. Only a new process in `node`'s place, met through the
    /// join path, is connected again (a reconnection made outside this operation). Replies
    /// `Done` once both ends refuse; this node itself or a node the fabric does not have
    /// fails with [`RdmaError::UnknownNode`].
    Disconnect {
        /// The peer cut off.
        node: NodeId,
    },
}

impl Op {
    /// The node a remote operation targets, or `None` for a CPU operation or a wait.
    pub fn target(&self) -> Option<NodeId> {
        match self {
            Op::Put { remote, .. }
            | Op::PutInline { remote, .. }
            | Op::PutWords { remote, .. }
            | Op::Get { remote, .. }
            | Op::GetWords { remote, .. }
            | Op::Atomic { remote, .. } => Some(remote.node),
            Op::Rfence { node } => Some(*node),
            Op::Load { .. }
            | Op::LoadWords { .. }
            | Op::Store { .. }
            | Op::StoreWords { .. }
            | Op::Cas { .. }
            | Op::Mfence
            | Op::Wait { .. }
            | Op::Test { .. }
            | Op::TestLoad { .. }
            | Op::WaitAny { .. }
            | Op::Poll { .. }
            | Op::GlobalFence { .. }
            | Op::Now
            | Op::Pause { .. }
            | Op::SetWriteAccess { .. }
            | Op::Disconnect { .. } => None,
        }
    }

    /// The work id of a remote operation.
    pub fn work_id(&self) -> Option<WorkId> {
        match self {
            Op::Put { work_id, .. }
            | Op::PutInline { work_id, .. }
            | Op::PutWords { work_id, .. }
            | Op::Get { work_id, .. }
            | Op::GetWords { work_id, .. }
            | Op::Atomic { work_id, .. } => Some(*work_id),
            _ => None,
        }
    }
}

/// Checks the `writers` of [`Op::SetWriteAccess`] for a fabric of `nodes` nodes: every set
/// bit names a node, and the fabric has at most 64 nodes.
pub fn check_writers(writers: u64, nodes: usize) -> Result<(), RdmaError> {
    if nodes > 64 {
        return Err(RdmaError::Unsupported {
            operation: "SetWriteAccess",
            backend: "a fabric of more than 64 nodes",
        });
    }
    let beyond = writers.checked_shr(nodes as u32).unwrap_or(0);
    if beyond != 0 {
        let bit = nodes as u32 + beyond.trailing_zeros();
        return Err(RdmaError::UnknownNode {
            node: NodeId(bit as u16),
        });
    }
    Ok(())
}

/// Whether `writers` (of [`Op::SetWriteAccess`]) lets `node` write.
pub fn may_write(writers: u64, node: NodeId) -> bool {
    node.0 < 64 && (writers >> node.0) & 1 == 1
}

/// What a backend answers to an operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// The first resumption of a process: no operation has run yet.
    Start,
    /// The operation is done (or, for a remote operation, posted).
    Done,
    /// A value: the word read by `Load`, the old value of a CPU `Cas`.
    Value(u64),
    /// The words read by `LoadWords`, in address order.
    Words(Words),
    /// The operation failed; see [`RdmaError`].
    Failed(RdmaError),
}
