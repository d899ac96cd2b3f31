//! D-MCS: the distributed MCS queue lock of the RMA locks paper (Schmid, Besta, Hoefler,
//! "High-Performance Distributed RMA Locks", §3.1), on the programming model.
//!
//! Every participant p has two words on its own node (the paper's one window per process
//! with offsets): NEXT (the rank of p's successor in the queue, initially ∅) and WAIT (set
//! while p must spin). One word TAIL on the tail node holds the rank of the queue's tail.
//! Ranks are `slot + 1`, so ∅ is 0 and zeroed memory is a free lock.
//!
//! * Acquire: reset NEXT to ∅ and WAIT to 1 with CPU stores, swap TAIL with the own rank
//!   (remote atomics), and if there was a predecessor write the own rank into its NEXT
//!   (inline put) and spin with CPU loads on the own WAIT until it reads 0.
//! * Release: if NEXT is ∅, CAS TAIL from the own rank to ∅; if that succeeds the lock is
//!   free. Otherwise a successor has swapped TAIL but not yet linked itself: spin on NEXT
//!   until it is set. Then pass the lock with one inline put of 0 into the successor's WAIT.
//!
//! Ordering in the rdma-rmw model (`shared/design/rdma-semantics.md`):
//! * the two CPU stores reach memory before the swap starts, because a remote operation
//!   leaves the store buffer only after every older CPU write (so no successor can link
//!   itself into a stale NEXT, and no predecessor can clear WAIT before it was set);
//! * TAIL is only ever touched by remote atomics, which are atomic among themselves (weak
//!   isolation excludes only CPU accesses and puts, which TAIL never sees);
//! * the puts carry their value inline: a put's NIC local read happens late, so a put from a
//!   buffer could send a value written after the post;
//! * a put is acknowledged before its write lands; nothing here relies on more than its
//!   eventual landing, because the reader of NEXT or WAIT spins until it sees the write.
//!
//! Like [`super::wlock`], the lock orders the processes, not the critical section's remote
//! operations: a holder that wants the next holder to see its puts must wait for them (a
//! global fence towards their node) before the release.

use super::{Routine, Yield, done_of, library_work_id, value_of};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;

const LIBRARY: u32 = 5;
const ACQUIRE_WORK_ID: WorkId = library_work_id(LIBRARY, 1);
const RELEASE_WORK_ID: WorkId = library_work_id(LIBRARY, 2);

/// ∅: the empty rank in TAIL and NEXT.
const EMPTY: u64 = 0;

/// The words of one D-MCS lock.
#[derive(Debug)]
pub struct Dmcs {
    /// TAIL, on the tail node: the rank of the last queued participant, or ∅.
    tail: Loc,
    /// Per participant: its node.
    nodes: Vec<NodeId>,
    /// Per participant: NEXT, on its node.
    next: Vec<Loc>,
    /// Per participant: WAIT, on its node.
    wait: Vec<Loc>,
    /// Per participant: where the TAIL atomics return, on its node (private).
    scratch: Vec<Loc>,
}

impl Dmcs {
    /// Allocates a D-MCS lock whose TAIL lives on `tail_node`, for participants on `nodes`
    /// (participant `slot` runs on `nodes[slot]`). Zeroed memory is the free lock.
    pub fn new(layout: &mut LayoutBuilder, tail_node: NodeId, nodes: &[NodeId]) -> Shared<Dmcs> {
        assert!(!nodes.is_empty(), "dmcs: a lock has participants");
        assert!(
            u32::try_from(nodes.len()).is_ok(),
            "dmcs: at most 2^32 participants (ranks are slot + 1)"
        );
        let tail = layout.alloc(tail_node);
        let next = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let wait = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let scratch = nodes.iter().map(|&n| layout.alloc(n)).collect();
        Shared::new(Dmcs {
            tail,
            nodes: nodes.to_vec(),
            next,
            wait,
            scratch,
        })
    }

    /// The words only participant `slot` ever touches (its scratch word). NEXT and WAIT are
    /// not private: the neighbours in the queue write them.
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        vec![self.scratch[slot]]
    }

    /// Number of participants.
    pub fn participants(&self) -> usize {
        self.nodes.len()
    }

    /// The node of participant `slot`.
    pub fn node_of(&self, slot: usize) -> NodeId {
        self.nodes[slot]
    }

    /// The rank of participant `slot` in TAIL and NEXT.
    fn rank(slot: usize) -> u64 {
        slot as u64 + 1
    }

    /// The participant of a non-empty rank.
    fn slot_of(&self, rank: u64) -> usize {
        assert!(rank != EMPTY, "dmcs: ∅ names no participant");
        let slot = usize::try_from(rank - 1).expect("ranks fit usize");
        assert!(
            slot < self.participants(),
            "dmcs: rank {rank} read from the queue names no participant"
        );
        slot
    }
}

/// Participant `slot` acquires `lock`.
pub fn acquire(lock: &Shared<Dmcs>, slot: usize) -> Acquire {
    assert!(
        slot < lock.participants(),
        "dmcs: unknown participant {slot}"
    );
    Acquire {
        lock: lock.clone(),
        slot,
        state: AcquireState::Start,
    }
}

/// Participant `slot` releases `lock` (it must hold it).
pub fn release(lock: &Shared<Dmcs>, slot: usize) -> Release {
    assert!(
        slot < lock.participants(),
        "dmcs: unknown participant {slot}"
    );
    Release {
        lock: lock.clone(),
        slot,
        state: ReleaseState::Start,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum AcquireState {
    Start,
    /// NEXT := ∅ is in the store buffer; WAIT := 1 next.
    NextReset,
    /// Both resets are buffered; the swap of TAIL starts next.
    WaitSet,
    /// A CAS of TAIL from `expected` to the own rank was posted.
    Swapping {
        expected: u64,
    },
    /// Its wait returned; the old value is loaded next.
    SwapWaited {
        expected: u64,
    },
    /// The old value of TAIL was loaded.
    SwapLoaded {
        expected: u64,
    },
    /// The own rank was written into the predecessor's NEXT.
    Linking,
    /// The link is acknowledged; WAIT is loaded next.
    Linked,
    /// WAIT was loaded.
    Spinning,
}

/// A D-MCS acquire in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire {
    lock: Shared<Dmcs>,
    slot: usize,
    state: AcquireState,
}

impl Acquire {
    /// The swap attempt: a CAS of TAIL from `expected` to the own rank.
    ///
    /// The model has CAS and FAA but no swap. A swap is a CAS whose expected value is the
    /// current one, so we *predict* TAIL: first ∅ (the uncontended lock: one round trip,
    /// like a real swap), and after a failure the value the failed CAS returned, which is
    /// TAIL as it was a moment ago. A retry happens only when another participant swapped
    /// TAIL in between, so the loop is lock-free; a get before each CAS would cost a round
    /// trip more without being any less racy.
    fn swap(&self, expected: u64) -> Op {
        Op::Atomic {
            local: self.lock.scratch[self.slot],
            remote: self.lock.tail,
            rmw: Rmw::Cas {
                expected,
                new: Dmcs::rank(self.slot),
            },
            work_id: ACQUIRE_WORK_ID,
        }
    }
}

impl Routine for Acquire {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let lock = &self.lock;
        let me = Dmcs::rank(self.slot);
        let wait = Op::Wait {
            work_id: ACQUIRE_WORK_ID,
        };
        let load_wait = Op::Load {
            loc: lock.wait[self.slot],
        };
        let (state, op) = match self.state {
            AcquireState::Start => {
                done_of(reply)?;
                let store = Op::Store {
                    loc: lock.next[self.slot],
                    value: EMPTY,
                };
                (AcquireState::NextReset, store)
            }
            AcquireState::NextReset => {
                done_of(reply)?;
                let store = Op::Store {
                    loc: lock.wait[self.slot],
                    value: 1,
                };
                (AcquireState::WaitSet, store)
            }
            AcquireState::WaitSet => {
                done_of(reply)?;
                (AcquireState::Swapping { expected: EMPTY }, self.swap(EMPTY))
            }
            AcquireState::Swapping { expected } => {
                done_of(reply)?;
                (AcquireState::SwapWaited { expected }, wait)
            }
            AcquireState::SwapWaited { expected } => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: lock.scratch[self.slot],
                };
                (AcquireState::SwapLoaded { expected }, load)
            }
            AcquireState::SwapLoaded { expected } => {
                let old = value_of(reply)?;
                // A participant is queued at most once: TAIL never holds the own rank here.
                assert_ne!(old, me, "dmcs: participant {} queued twice", self.slot);
                if old != expected {
                    // The prediction was stale: retry with the value TAIL had.
                    (AcquireState::Swapping { expected: old }, self.swap(old))
                } else if old == EMPTY {
                    // No predecessor: the lock is ours.
                    return Ok(Yield::Done(()));
                } else {
                    let pred = lock.slot_of(old);
                    let link = Op::PutInline {
                        remote: lock.next[pred],
                        value: me,
                        work_id: ACQUIRE_WORK_ID,
                    };
                    (AcquireState::Linking, link)
                }
            }
            AcquireState::Linking => {
                done_of(reply)?;
                (AcquireState::Linked, wait)
            }
            AcquireState::Linked => {
                done_of(reply)?;
                (AcquireState::Spinning, load_wait)
            }
            AcquireState::Spinning => match value_of(reply)? {
                0 => return Ok(Yield::Done(())),
                waiting => {
                    assert_eq!(waiting, 1, "dmcs: WAIT holds 0 or 1");
                    (AcquireState::Spinning, load_wait)
                }
            },
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ReleaseState {
    Start,
    /// NEXT was loaded.
    NextLoaded,
    /// A CAS of TAIL from the own rank to ∅ was posted.
    Cas,
    /// Its wait returned; the old value is loaded next.
    CasWaited,
    /// The old value of TAIL was loaded.
    CasLoaded,
    /// The CAS failed: a successor swapped TAIL; spinning until it links into NEXT.
    SpinningOnNext,
    /// The lock was passed with a put of 0 into the successor's WAIT.
    Passing,
    /// The put is acknowledged.
    Passed,
}

/// A D-MCS release in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    lock: Shared<Dmcs>,
    slot: usize,
    state: ReleaseState,
}

impl Release {
    /// The put that passes the lock to `successor` (a rank).
    fn pass(&self, successor: u64) -> Op {
        let succ = self.lock.slot_of(successor);
        assert_ne!(
            succ, self.slot,
            "dmcs: a participant is not its own successor"
        );
        Op::PutInline {
            remote: self.lock.wait[succ],
            value: 0,
            work_id: RELEASE_WORK_ID,
        }
    }
}

impl Routine for Release {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let lock = &self.lock;
        let me = Dmcs::rank(self.slot);
        let load_next = Op::Load {
            loc: lock.next[self.slot],
        };
        let (state, op) = match self.state {
            ReleaseState::Start => {
                done_of(reply)?;
                (ReleaseState::NextLoaded, load_next)
            }
            ReleaseState::NextLoaded => match value_of(reply)? {
                EMPTY => {
                    let cas = Op::Atomic {
                        local: lock.scratch[self.slot],
                        remote: lock.tail,
                        rmw: Rmw::Cas {
                            expected: me,
                            new: EMPTY,
                        },
                        work_id: RELEASE_WORK_ID,
                    };
                    (ReleaseState::Cas, cas)
                }
                successor => (ReleaseState::Passing, self.pass(successor)),
            },
            ReleaseState::Cas => {
                done_of(reply)?;
                let wait = Op::Wait {
                    work_id: RELEASE_WORK_ID,
                };
                (ReleaseState::CasWaited, wait)
            }
            ReleaseState::CasWaited => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: lock.scratch[self.slot],
                };
                (ReleaseState::CasLoaded, load)
            }
            ReleaseState::CasLoaded => {
                let tail = value_of(reply)?;
                // Lemma (MCS): while the holder is queued, TAIL is not ∅.
                assert_ne!(tail, EMPTY, "dmcs: TAIL is ∅ while the holder is queued");
                if tail == me {
                    return Ok(Yield::Done(()));
                }
                (ReleaseState::SpinningOnNext, load_next)
            }
            ReleaseState::SpinningOnNext => match value_of(reply)? {
                EMPTY => (ReleaseState::SpinningOnNext, load_next),
                successor => (ReleaseState::Passing, self.pass(successor)),
            },
            ReleaseState::Passing => {
                done_of(reply)?;
                let wait = Op::Wait {
                    work_id: RELEASE_WORK_ID,
                };
                (ReleaseState::Passed, wait)
            }
            ReleaseState::Passed => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}
