//! The entries of store buffers and queue pairs (the paper's hardware domains, App. 0.D.1).

use velos_rdma::{Loc, Rmw, Words, WorkId};

/// An entry with the virtual time from which its next step may fire. The explorer keeps
/// every `ready` at 0, so timing never splits its states.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Timed<T> {
    /// The entry.
    pub item: T,
    /// Earliest virtual time (ns) of its next step.
    pub ready: u64,
}

/// An entry of a thread's store buffer `B[t]`: CPU writes and posted remote operations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SbEntry {
    /// A CPU write waiting to be flushed to memory.
    Write {
        /// The word.
        loc: Loc,
        /// The value.
        value: u64,
    },
    /// A posted remote operation, in its initial pipe form, waiting to enter the queue pair
    /// towards `target`.
    Remote {
        /// Target node of the queue pair.
        target: velos_rdma::NodeId,
        /// The operation.
        item: PipeItem,
    },
}

/// An item of a queue pair's `pipe` (the paper's names in the variant docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PipeItem {
    /// `P0(y,x)`: a put before its NIC local read.
    PutRead {
        /// Remote destination y.
        remote: Loc,
        /// Local source x.
        local: Loc,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `P1(y,v)`: a put that has read v.
    PutWrite {
        /// Remote destination.
        remote: Loc,
        /// The value read.
        value: u64,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `P1(y, v₀…vₙ)`: a multi-word put (`Op::PutWords`, captured at post). Rule 3
    /// appends one `nrw` per word to `rW`, in address order.
    PutWords {
        /// Remote destination of word 0.
        remote: Loc,
        /// The words.
        words: Words,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `ACK`: a put whose remote write was issued.
    Ack {
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `G0(a,y)`: a get before its remote read.
    GetRead {
        /// Local destination a.
        local: Loc,
        /// Remote source y.
        remote: Loc,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `LW(a,v)`: a pending NIC local write (of a get or remote RMW).
    LocalWrite {
        /// Local destination.
        local: Loc,
        /// The value to write.
        value: u64,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `A0(rmw)`: a remote RMW before its atomic read.
    AtomicRead {
        /// Local destination of the old value.
        local: Loc,
        /// The target word.
        remote: Loc,
        /// CAS or FAA.
        rmw: Rmw,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `AW(y,v)`: a pending atomic remote write.
    AtomicWrite {
        /// The target word.
        remote: Loc,
        /// The value to write.
        value: u64,
        /// rdmawait tag.
        work_id: WorkId,
    },
    /// `F`: a remote fence.
    Fence,
}

impl PipeItem {
    /// The rdmawait tag, `None` for a fence.
    pub fn work_id(&self) -> Option<WorkId> {
        match *self {
            PipeItem::PutRead { work_id, .. }
            | PipeItem::PutWrite { work_id, .. }
            | PipeItem::PutWords { work_id, .. }
            | PipeItem::Ack { work_id }
            | PipeItem::GetRead { work_id, .. }
            | PipeItem::LocalWrite { work_id, .. }
            | PipeItem::AtomicRead { work_id, .. }
            | PipeItem::AtomicWrite { work_id, .. } => Some(work_id),
            PipeItem::Fence => None,
        }
    }

    /// Whether a remote write of this item (rules 3, 12) may write `loc`.
    pub fn may_write_remote(&self, loc: Loc) -> bool {
        match self {
            PipeItem::PutRead { remote, .. }
            | PipeItem::PutWrite { remote, .. }
            | PipeItem::AtomicRead { remote, .. }
            | PipeItem::AtomicWrite { remote, .. } => *remote == loc,
            PipeItem::PutWords { remote, words, .. } => {
                remote.node == loc.node
                    && loc.offset >= remote.offset
                    && u64::from(loc.offset - remote.offset) < 8 * words.len() as u64
                    && (loc.offset - remote.offset) % 8 == 0
            }
            PipeItem::Ack { .. }
            | PipeItem::GetRead { .. }
            | PipeItem::LocalWrite { .. }
            | PipeItem::Fence => false,
        }
    }

    /// Whether the item is one of `{ACK, G0, LW}`: the items an op may overtake under
    /// rules 3, 6, 9–12.
    pub fn overtakable(&self) -> bool {
        matches!(
            self,
            PipeItem::Ack { .. } | PipeItem::GetRead { .. } | PipeItem::LocalWrite { .. }
        )
    }
}

/// An entry of a queue pair's remote write buffer `rW`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RemoteWrite {
    /// `nrw(y,v)`: the remote write of a put.
    Put {
        /// Target word.
        loc: Loc,
        /// Value.
        value: u64,
    },
    /// `nraw(y,v)`: the atomic remote write of a remote RMW; its commit frees `L[n]`.
    Atomic {
        /// Target word.
        loc: Loc,
        /// Value.
        value: u64,
    },
}

/// An entry of a queue pair's local write buffer `lW`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LocalWriteEntry {
    /// `nlw(a,v)`: a NIC local write (get or RMW result).
    Write {
        /// Local word.
        loc: Loc,
        /// Value.
        value: u64,
        /// rdmawait tag of the operation it completes.
        work_id: WorkId,
    },
    /// `cn`: a completion notification, kept only for threads that poll.
    Completion,
}
