//! D-MCS: the distributed MCS queue lock of the RMA locks paper (Schmid, Besta, Hoefler,
//! "High-Performance Distributed RMA Locks", §3.1), on the programming model.
//!
//! Every participant p has two words on its own node (the paper's one window per process
//! with offsets): NEXT (the rank of p's successor in the queue, initially ∅) and WAIT (set
//! while p must spin). Ranks are `slot + 1`, so ∅ is 0.
//!
//! The paper enqueues with an atomic swap of TAIL. The model has CAS and FAA but no swap,
//! and a swap emulated by a CAS on a predicted tail starves: under contention TAIL changes
//! more often than once per round trip, so a remote waiter's prediction is stale whenever
//! its CAS lands, while processes that got in once keep re-enqueuing (the lock benchmark
//! had 60 of 64 processes starved). So the queue order comes from a ticket instead:
//!
//! * TAIL, on the tail node, holds two 32-bit fields: DRAWN (high half, the next ticket)
//!   and OPEN (low half, the ticket that may enter without waiting). An enqueue is one FAA
//!   of 2³² on TAIL, which always succeeds and returns the own ticket d and OPEN. Zeroed
//!   memory (0, 0) is the free lock.
//! * SLOT, a ring of R words on the tail node (R = participants rounded up to a power of
//!   two): the holder of ticket d writes `d << 32 | rank` into `SLOT[d mod R]`, so that
//!   its successor, the holder of ticket d + 1, can find it.
//!
//! * Acquire: reset NEXT to ∅ and WAIT to 1 with CPU stores, FAA TAIL (keeping the result
//!   in a private word for the release), and register in SLOT (inline put). If OPEN = d the
//!   lock was free: enter. Otherwise get `SLOT[(d − 1) mod R]` until it holds ticket d − 1
//!   (the predecessor registers right after its own FAA, so this is short), write the own
//!   rank into the predecessor's NEXT (inline put) and spin with CPU loads on the own WAIT.
//! * Release: if NEXT is set, pass the lock with one inline put of 0 into the successor's
//!   WAIT. Otherwise CAS TAIL from (d + 1, OPEN as the acquire saw it) to (d + 1, d + 1): if
//!   it succeeds nobody drew a ticket after d and the lock is free (the next ticket, d + 1,
//!   is open). If it fails, the holder of ticket d + 1 is on its way: spin on NEXT, then
//!   pass.
//!
//! The MCS properties are kept: a waiter spins only on its own WAIT, and the lock passes
//! with one put; FIFO order is the ticket order.
//!
//! Why it is mutually exclusive. Tickets are unique (FAA). OPEN changes only by the
//! release CAS, which succeeds only for the holder of ticket d while DRAWN = d + 1, and sets
//! OPEN to d + 1; after ticket d was drawn and until its holder releases, nobody else can
//! change OPEN, so the holder's snapshot is exact. The holder of ticket d + 1 enters either
//! (a) because its FAA returned OPEN = d + 1, so the CAS of ticket d came before that FAA
//! and ticket d had left, and ticket d did not pass (it does not look at NEXT after a
//! successful CAS, and nobody linked: d + 1 links only when it did not enter by (a)); or
//! (b) because WAIT was cleared, which only ticket d's holder does, on its way out, after
//! d + 1 linked into its NEXT, which d + 1 does only when its FAA came before ticket d's
//! CAS (the CAS then fails). Exactly one of (a) and (b) happens, and each admits d + 1
//! only after d is out; by induction on tickets, one holder at a time. The one limit:
//! OPEN is 32 bits, so if the lock were held without ever being free for 2³² acquisitions
//! in a row, a stale OPEN could equal a new ticket.
//!
//! Ordering in the rdma-rmw model (`shared/design/rdma-semantics.md`):
//! * the two CPU stores reach memory before the FAA starts, because a remote operation
//!   leaves the store buffer only after every older CPU write (so no successor can link
//!   itself into a stale NEXT, and no predecessor can clear WAIT before it was set);
//! * TAIL is only ever touched by remote atomics, which are atomic among themselves (weak
//!   isolation excludes only CPU accesses and puts, which TAIL never sees);
//! * the puts carry their value inline: a put's NIC local read happens late, so a put from a
//!   buffer could send a value written after the post;
//! * a put is acknowledged before its write lands; the readers of NEXT and WAIT spin until
//!   they see the write. A SLOT registration is in memory before its writer's release ends:
//!   either a successor read it (it spins until it does) and linked, or the release's CAS
//!   went to the tail node through the same queue pair, which a remote atomic may do only
//!   when the writes before it have landed. So the registration of ticket d + R, whose
//!   ticket is drawn only after ticket d's release, never races one of ticket d.
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

/// ∅: the empty rank in NEXT.
const EMPTY: u64 = 0;

/// The FAA on TAIL that draws a ticket: +1 in DRAWN, the high half.
const DRAW: u64 = 1 << 32;

/// A TAIL value: DRAWN in the high half, OPEN in the low half.
fn tail_word(drawn: u32, open: u32) -> u64 {
    (u64::from(drawn) << 32) | u64::from(open)
}

/// The high and low halves of a word: DRAWN and OPEN of TAIL, ticket and rank of SLOT.
fn tail_fields(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// The words of one D-MCS lock.
#[derive(Debug)]
pub struct Dmcs {
    /// TAIL, on the tail node: DRAWN (high half) and OPEN (low half).
    tail: Loc,
    /// SLOT, on the tail node: `SLOT[d mod R]` is `d << 32 | rank` of ticket d's holder.
    /// R is a power of two (it divides 2³², so the ring index survives the ticket's wrap)
    /// and at least the number of participants (the tickets in use are distinct mod R).
    slots: Vec<Loc>,
    /// Per participant: its node.
    nodes: Vec<NodeId>,
    /// Per participant: NEXT, on its node.
    next: Vec<Loc>,
    /// Per participant: WAIT, on its node.
    wait: Vec<Loc>,
    /// Per participant: the TAIL its FAA returned, kept for the release (private).
    ticket: Vec<Loc>,
    /// Per participant: where the other gets and atomics return (private).
    scratch: Vec<Loc>,
}

impl Dmcs {
    /// Allocates a D-MCS lock whose TAIL lives on `tail_node`, for participants on `nodes`
    /// (participant `slot` runs on `nodes[slot]`). Zeroed memory is the free lock.
    pub fn new(layout: &mut LayoutBuilder, tail_node: NodeId, nodes: &[NodeId]) -> Shared<Dmcs> {
        assert!(!nodes.is_empty(), "dmcs: a lock has participants");
        assert!(
            nodes.len() <= 1 << 31,
            "dmcs: at most 2^31 participants (ranks and tickets are 32 bits)"
        );
        let ring = u32::try_from(nodes.len().next_power_of_two()).expect("at most 2^31");
        let tail = layout.alloc(tail_node);
        let slots = layout.alloc_many(tail_node, ring);
        let next = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let wait = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let ticket = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let scratch = nodes.iter().map(|&n| layout.alloc(n)).collect();
        Shared::new(Dmcs {
            tail,
            slots,
            nodes: nodes.to_vec(),
            next,
            wait,
            ticket,
            scratch,
        })
    }

    /// The words only participant `slot` ever touches (its ticket and scratch words). NEXT
    /// and WAIT are not private: the neighbours in the queue write them.
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        vec![self.ticket[slot], self.scratch[slot]]
    }

    /// Number of participants.
    pub fn participants(&self) -> usize {
        self.nodes.len()
    }

    /// The node of participant `slot`.
    pub fn node_of(&self, slot: usize) -> NodeId {
        self.nodes[slot]
    }

    /// The rank of participant `slot` in NEXT and SLOT.
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

    /// The SLOT word of ticket `ticket`.
    fn slot_word(&self, ticket: u32) -> Loc {
        // R is a power of two, so this is `ticket mod R`.
        self.slots[ticket as usize & (self.slots.len() - 1)]
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
    /// Both resets are buffered; the FAA on TAIL starts next.
    WaitSet,
    /// The FAA that draws a ticket was posted.
    Drawing,
    /// Its wait returned; the old TAIL is loaded next.
    DrawWaited,
    /// The old TAIL was loaded.
    Drawn,
    /// The lock was open: the registration in SLOT was posted, its wait is next.
    RegisteredOpen,
    /// Done waiting for the registration; the lock is ours.
    EnteredOpen,
    /// The lock was not open: the registration in SLOT was posted; the predecessor's
    /// SLOT word is read next.
    Registered {
        ticket: u32,
    },
    /// A get of the predecessor's SLOT word (ticket `ticket` − 1) was posted.
    FindingPred {
        ticket: u32,
    },
    /// Its wait returned; the word is loaded next.
    FindWaited {
        ticket: u32,
    },
    /// The predecessor's SLOT word was loaded.
    FindLoaded {
        ticket: u32,
    },
    /// The own rank was written into the predecessor's NEXT.
    Linking,
    /// The link (and the registration) is acknowledged; WAIT is loaded next.
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
    /// A get of the SLOT word of ticket `ticket` − 1 (the predecessor's).
    fn find_pred(&self, ticket: u32) -> Op {
        Op::Get {
            local: self.lock.scratch[self.slot],
            remote: self.lock.slot_word(ticket.wrapping_sub(1)),
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
                let draw = Op::Atomic {
                    local: lock.ticket[self.slot],
                    remote: lock.tail,
                    rmw: Rmw::Faa { add: DRAW },
                    work_id: ACQUIRE_WORK_ID,
                };
                (AcquireState::Drawing, draw)
            }
            AcquireState::Drawing => {
                done_of(reply)?;
                (AcquireState::DrawWaited, wait)
            }
            AcquireState::DrawWaited => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: lock.ticket[self.slot],
                };
                (AcquireState::Drawn, load)
            }
            AcquireState::Drawn => {
                let (ticket, open) = tail_fields(value_of(reply)?);
                // Register first, whatever happens next: the successor looks here.
                let register = Op::PutInline {
                    remote: lock.slot_word(ticket),
                    value: (u64::from(ticket) << 32) | me,
                    work_id: ACQUIRE_WORK_ID,
                };
                let state = if open == ticket {
                    AcquireState::RegisteredOpen
                } else {
                    AcquireState::Registered { ticket }
                };
                (state, register)
            }
            AcquireState::RegisteredOpen => {
                done_of(reply)?;
                (AcquireState::EnteredOpen, wait)
            }
            AcquireState::EnteredOpen => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
            AcquireState::Registered { ticket } => {
                done_of(reply)?;
                (AcquireState::FindingPred { ticket }, self.find_pred(ticket))
            }
            AcquireState::FindingPred { ticket } => {
                done_of(reply)?;
                (AcquireState::FindWaited { ticket }, wait)
            }
            AcquireState::FindWaited { ticket } => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: lock.scratch[self.slot],
                };
                (AcquireState::FindLoaded { ticket }, load)
            }
            AcquireState::FindLoaded { ticket } => {
                let word = value_of(reply)?;
                let (tag, pred) = tail_fields(word);
                if tag != ticket.wrapping_sub(1) || pred == 0 {
                    // The predecessor has not registered yet: the word is older.
                    (AcquireState::FindingPred { ticket }, self.find_pred(ticket))
                } else {
                    let pred = lock.slot_of(u64::from(pred));
                    assert_ne!(pred, self.slot, "dmcs: participant {pred} queued twice");
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
    /// The own TAIL snapshot was loaded.
    TicketLoaded,
    /// A CAS of TAIL from (d + 1, OPEN) to (d + 1, d + 1) was posted.
    Cas {
        expected: u64,
    },
    /// Its wait returned; the old value is loaded next.
    CasWaited {
        expected: u64,
    },
    /// The old value of TAIL was loaded.
    CasLoaded {
        expected: u64,
    },
    /// The CAS failed: a successor drew a ticket; spinning until it links into NEXT.
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
        let load_next = Op::Load {
            loc: lock.next[self.slot],
        };
        let wait = Op::Wait {
            work_id: RELEASE_WORK_ID,
        };
        let (state, op) = match self.state {
            ReleaseState::Start => {
                done_of(reply)?;
                (ReleaseState::NextLoaded, load_next)
            }
            ReleaseState::NextLoaded => match value_of(reply)? {
                EMPTY => {
                    let load = Op::Load {
                        loc: lock.ticket[self.slot],
                    };
                    (ReleaseState::TicketLoaded, load)
                }
                successor => (ReleaseState::Passing, self.pass(successor)),
            },
            ReleaseState::TicketLoaded => {
                // OPEN has not changed since the own FAA (only this release may change it).
                let (ticket, open) = tail_fields(value_of(reply)?);
                let after = ticket.wrapping_add(1);
                let expected = tail_word(after, open);
                let cas = Op::Atomic {
                    local: lock.scratch[self.slot],
                    remote: lock.tail,
                    rmw: Rmw::Cas {
                        expected,
                        new: tail_word(after, after),
                    },
                    work_id: RELEASE_WORK_ID,
                };
                (ReleaseState::Cas { expected }, cas)
            }
            ReleaseState::Cas { expected } => {
                done_of(reply)?;
                (ReleaseState::CasWaited { expected }, wait)
            }
            ReleaseState::CasWaited { expected } => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: lock.scratch[self.slot],
                };
                (ReleaseState::CasLoaded { expected }, load)
            }
            ReleaseState::CasLoaded { expected } => {
                let old = value_of(reply)?;
                if old == expected {
                    return Ok(Yield::Done(()));
                }
                // Only DRAWN can have moved: somebody drew the next ticket.
                assert_eq!(
                    tail_fields(old).1,
                    tail_fields(expected).1,
                    "dmcs: OPEN changed while the lock was held"
                );
                (ReleaseState::SpinningOnNext, load_next)
            }
            ReleaseState::SpinningOnNext => match value_of(reply)? {
                EMPTY => (ReleaseState::SpinningOnNext, load_next),
                successor => (ReleaseState::Passing, self.pass(successor)),
            },
            ReleaseState::Passing => {
                done_of(reply)?;
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
