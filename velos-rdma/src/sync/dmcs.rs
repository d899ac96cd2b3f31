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
//!   of 2³² on TAIL, which always succeeds and returns the own ticket d and OPEN (the
//!   *snapshot* s). Zeroed memory (0, 0) is the free lock. The fields wrap as the hardware
//!   wraps them (the FAA's carry falls off the top of the word).
//! * Tickets compare modulo M = 2^bits ([`Tickets::bits`], 32 in production): ticket d is
//!   *open* iff d ≡ OPEN (mod M).
//! * SLOT, a ring of R words on the tail node (R = participants rounded up to a power of
//!   two, R ≤ M): the holder of ticket d writes `d << 32 | rank` (the raw 32-bit ticket)
//!   into `SLOT[d mod R]`, so that its successor, the holder of ticket d + 1, can find it.
//!
//! * Acquire: reset NEXT to ∅ and WAIT to 1 with CPU stores, FAA TAIL (keeping the result
//!   in a private word for the release), and register in SLOT (inline put). If d is open
//!   the lock was free: enter. Otherwise get `SLOT[(d − 1) mod R]` until it holds ticket
//!   d − 1 (the predecessor registers right after its own FAA, so this is short), write the
//!   own rank into the predecessor's NEXT (inline put) and spin with CPU loads on the own
//!   WAIT.
//! * Release: if NEXT is set, *pass*: first refresh OPEN if the rule below says so, then
//!   one inline put of 0 into the successor's WAIT. Otherwise CAS TAIL from (d + 1, s) to
//!   (d + 1, d + 1): if it succeeds nobody drew a ticket after d and the lock is free (the
//!   next ticket, d + 1, is open). If it fails and DRAWN is still d + 1, only OPEN
//!   differed (a predecessor refreshed it after our FAA): CAS again from exactly the value
//!   returned. If DRAWN moved, the holder of ticket d + 1 is on its way: spin on NEXT,
//!   then pass.
//! * Refresh: the holder of ticket d with snapshot s that passes the lock, with
//!   (d − s) mod M ≥ T where T = M − N (N participants), sets OPEN to d: a CAS of TAIL
//!   from a guess (DRAWN', OPEN') to (DRAWN', d), retried from the returned value until it
//!   succeeds, and completed (waited for and its result loaded) before the passing put.
//!
//! The MCS properties are kept: a waiter spins only on its own WAIT, and the lock passes
//! with one put; FIFO order is the ticket order.
//!
//! # Why it is mutually exclusive
//!
//! Count tickets without wrapping (the n-th FAA on TAIL draws ticket n, counting from the
//! initial DRAWN) and call OPEN's unwrapped value the ticket it was last set to. The
//! *current* ticket c is the smallest one drawn and not yet released; the lock is free
//! when there is none (c = DRAWN). The raw fields are these values mod 2³², and M divides
//! 2³², so raw values agree mod M exactly when the unwrapped ones do.
//!
//! *Handover.* OPEN changes only by the release CAS (which needs DRAWN = d + 1, so it
//! succeeds only for the last ticket drawn, and sets OPEN = DRAWN: the lock is free) and
//! by the refresh CAS; both are issued only by the current ticket's holder (**Lemma 4**,
//! one writer of OPEN). The holder of ticket d + 1 enters either (a) because its FAA saw
//! d + 1 open, which (Lemma 2 below) means ticket d's release CAS came first and ticket d
//! left without passing (nobody linked: d + 1 links only when it did not enter by (a)); or
//! (b) because WAIT was cleared, which only ticket d's holder does, on its way out, after
//! d + 1 linked into its NEXT, which d + 1 does only when its FAA came before ticket d's
//! release CAS (that CAS then fails). Exactly one of (a) and (b) happens, and each admits
//! d + 1 only after d is out; by induction on tickets, one holder at a time — provided no
//! ticket enters by (a) while another is current, which is what the wrap argument shows.
//!
//! *The wrap.* With 32-bit fields and no refresh, a lock handed over 2³² times in a row
//! without ever being free would draw a ticket equal to the stale OPEN, and a second
//! holder would enter. The refresh bounds the gap between the current ticket and OPEN:
//!
//! * **Lemma 1** (gap): at all times 0 ≤ c − OPEN ≤ T (unwrapped). Free lock: the release
//!   CAS set OPEN = DRAWN = c, gap 0. Handover from d to d + 1: if d refreshed, OPEN = d,
//!   gap 1 ≤ T (T ≥ 1 because N < M); otherwise (d − s) < T, and OPEN only grows (it is
//!   only ever set to the current ticket or to DRAWN, both ≥ OPEN), so
//!   (d + 1) − OPEN ≤ (d + 1) − s ≤ T. Draws change neither c nor OPEN while c holds.
//! * **Lemma 2** (closed): a ticket t drawn while ticket c is current is not open. The
//!   tickets c..t are held by distinct participants (each participant holds at most one
//!   ticket), so t ≤ c + N − 1, and 0 < t − OPEN ≤ (N − 1) + T = M − 1: t ≢ OPEN (mod M).
//!   A ticket drawn while the lock is free has OPEN = t exactly (Lemma 1, gap 0).
//! * **Lemma 3** (exact snapshot): for the snapshot s of ticket d, 0 ≤ d − s ≤ M − 1 (as
//!   in Lemma 2), so (d − s) mod M, which the holder computes from raw fields, is the
//!   unwrapped d − s, and the refresh rule of Lemma 1 is exactly what the code tests.
//! * **Lemma 4** (refresh ends): while d holds, only d's holder writes OPEN, and DRAWN
//!   moves at most N − 1 times (every other participant draws at most once). A refresh
//!   CAS that fails returns the current value, whose OPEN is then exact; later failures
//!   are DRAWN's moves only: at most N failures in all. For the release CAS likewise: it
//!   fails with DRAWN = d + 1 at most once (OPEN is exact after that), and the refresh
//!   completes before the passing put, so no later holder's CAS on TAIL overtakes it.
//!
//! So a ticket enters by (a) only when the lock is free, and the handover argument above
//! gives mutual exclusion, for any number of acquisitions. The SLOT ring needs R | M so
//! that `d mod R` is the same for raw and unwrapped tickets (R | M | 2³²), and R ≥ N so
//! that the ≤ N tickets in use never share a word; SLOT tags are raw 32-bit tickets, and a
//! stale tag equal to d − 1 would need 2³² tickets since the word was last written.
//! [`Tickets::refresh`] = `false` drops the refresh; it exists only so that a test can show
//! the defect (with 2-bit tickets, the fifth ticket of a never-free lock enters while the
//! fourth holds).
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

/// How a D-MCS lock numbers its tickets (see the module documentation for the proof that
/// goes with these choices).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tickets {
    /// Tickets compare modulo M = 2^`bits`, in `1..=32`; the participants must be fewer
    /// than M. 32 in production; small values let the exhaustive checks reach the wrap.
    /// TAIL's raw fields are 32 bits whatever `bits` is.
    pub bits: u32,
    /// Whether a holder refreshes OPEN when it passes the lock (Lemma 1). `false` exists
    /// only so that a test can show the defect the refresh fixes: without it, a lock passed
    /// M times in a row without being free lets a second holder in.
    pub refresh: bool,
}

impl Default for Tickets {
    /// 32-bit tickets with the refresh: the production setting.
    fn default() -> Tickets {
        Tickets {
            bits: 32,
            refresh: true,
        }
    }
}

/// The words of one D-MCS lock.
#[derive(Debug)]
pub struct Dmcs {
    /// TAIL, on the tail node: DRAWN (high half) and OPEN (low half).
    tail: Loc,
    /// SLOT, on the tail node: `SLOT[d mod R]` is `d << 32 | rank` of ticket d's holder.
    /// R is a power of two no larger than M (it divides M, so the ring index is the same
    /// for raw and unwrapped tickets) and at least the number of participants (the
    /// tickets in use are distinct mod R).
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
    /// M − 1: tickets compare modulo M.
    mask: u32,
    /// T = M − N: a holder whose ticket is T or more past its snapshot refreshes OPEN.
    threshold: u32,
    /// Whether holders refresh OPEN ([`Tickets::refresh`]).
    refresh: bool,
}

impl Dmcs {
    /// Allocates a D-MCS lock whose TAIL lives on `tail_node`, for participants on `nodes`
    /// (participant `slot` runs on `nodes[slot]`), with 32-bit tickets. Zeroed memory is
    /// the free lock.
    pub fn new(layout: &mut LayoutBuilder, tail_node: NodeId, nodes: &[NodeId]) -> Shared<Dmcs> {
        Dmcs::with_tickets(layout, tail_node, nodes, Tickets::default())
    }

    /// Like [`Dmcs::new`], with tickets numbered as `tickets` says.
    ///
    /// # Panics
    /// If `tickets.bits` is not in `1..=32`, or there are not fewer participants than
    /// 2^`bits` (Lemma 2 needs N < M).
    pub fn with_tickets(
        layout: &mut LayoutBuilder,
        tail_node: NodeId,
        nodes: &[NodeId],
        tickets: Tickets,
    ) -> Shared<Dmcs> {
        assert!(!nodes.is_empty(), "dmcs: a lock has participants");
        assert!(
            (1..=32).contains(&tickets.bits),
            "dmcs: tickets have 1 to 32 bits, not {}",
            tickets.bits
        );
        let modulus = 1u64 << tickets.bits;
        let participants = nodes.len() as u64;
        // Lemma 2: t − OPEN ≤ (N − 1) + (M − N) < M needs N < M.
        assert!(
            participants < modulus,
            "dmcs: {participants} participants need more than {}-bit tickets (Lemma 2: N < M)",
            tickets.bits
        );
        let ring = nodes.len().next_power_of_two() as u64;
        assert!(ring <= modulus, "dmcs: the SLOT ring divides M");
        let tail = layout.alloc(tail_node);
        let slots = layout.alloc_many(tail_node, ring as u32);
        let next = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let wait = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let ticket = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let scratch = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let lock = Dmcs {
            tail,
            slots,
            nodes: nodes.to_vec(),
            next,
            wait,
            ticket,
            scratch,
            mask: (modulus - 1) as u32,
            threshold: (modulus - participants) as u32,
            refresh: tickets.refresh,
        };
        // Postconditions (Lemmas 1 and 2): T ≥ 1 and T + N = M; R | M.
        assert!(lock.threshold >= 1, "dmcs: T = M − N ≥ 1");
        assert_eq!(u64::from(lock.threshold) + participants, modulus);
        assert_eq!(modulus % lock.slots.len() as u64, 0, "dmcs: R divides M");
        Shared::new(lock)
    }

    /// TAIL: DRAWN (high 32 bits) and OPEN (low 32 bits). Zero is the free lock; any
    /// `(x << 32) | x` is a free lock too, which lets a test start near the raw wrap.
    pub fn tail(&self) -> Loc {
        self.tail
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

    /// Whether ticket `ticket` may enter at once: it is ≡ OPEN (mod M).
    fn is_open(&self, ticket: u32, open: u32) -> bool {
        (open ^ ticket) & self.mask == 0
    }

    /// Whether the holder of ticket `ticket` with snapshot `snapshot` refreshes OPEN when it
    /// passes the lock: (d − s) mod M ≥ T, which is the unwrapped d − s (Lemma 3).
    fn must_refresh(&self, ticket: u32, snapshot: u32) -> bool {
        self.refresh && ticket.wrapping_sub(snapshot) & self.mask >= self.threshold
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
        ticket: 0,
        snapshot: 0,
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
                let (ticket, snapshot) = tail_fields(value_of(reply)?);
                // Register first, whatever happens next: the successor looks here.
                let register = Op::PutInline {
                    remote: lock.slot_word(ticket),
                    value: (u64::from(ticket) << 32) | me,
                    work_id: ACQUIRE_WORK_ID,
                };
                let open = lock.is_open(ticket, snapshot);
                // Lemma 2: a ticket is open only when the lock is free, and then OPEN is
                // the ticket exactly (without the refresh the lemma fails at the wrap).
                assert!(
                    !lock.refresh || !open || snapshot == ticket,
                    "dmcs: Lemma 2 broken: ticket {ticket:#x} open against OPEN {snapshot:#x}"
                );
                let state = if open {
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
    /// NEXT was loaded; the own snapshot is loaded next.
    NextLoaded,
    /// The own ticket and snapshot were loaded; `successor` is NEXT as loaded before.
    TicketLoaded {
        successor: u64,
    },
    /// A CAS of TAIL from `expected` (DRAWN = d + 1) to (d + 1, d + 1) was posted.
    Freeing {
        expected: u64,
    },
    /// Its wait returned; the old value is loaded next.
    FreeWaited {
        expected: u64,
    },
    /// The old value of TAIL was loaded.
    FreeLoaded {
        expected: u64,
    },
    /// The CAS failed because a successor drew a ticket: spinning until it links into
    /// NEXT. `seen` is TAIL as that CAS returned it (the guess of a refresh).
    SpinningOnNext {
        seen: u64,
    },
    /// A refresh CAS of TAIL from `expected` to (DRAWN of `expected`, d) was posted, before
    /// passing to `successor`; `failures` earlier attempts failed.
    Refreshing {
        expected: u64,
        successor: u64,
        failures: usize,
    },
    /// Its wait returned; the old value is loaded next.
    RefreshWaited {
        expected: u64,
        successor: u64,
        failures: usize,
    },
    /// The old value of TAIL was loaded.
    RefreshLoaded {
        expected: u64,
        successor: u64,
        failures: usize,
    },
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
    /// The own ticket d, once loaded.
    ticket: u32,
    /// The own snapshot s (OPEN as the own FAA returned it), once loaded.
    snapshot: u32,
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

    /// A CAS of TAIL from `expected` to `new`, its old value landing in scratch.
    fn cas(&self, expected: u64, new: u64) -> Op {
        Op::Atomic {
            local: self.lock.scratch[self.slot],
            remote: self.lock.tail,
            rmw: Rmw::Cas { expected, new },
            work_id: RELEASE_WORK_ID,
        }
    }

    /// The release CAS from `expected` (whose DRAWN is d + 1) to (d + 1, d + 1).
    fn free(&self, expected: u64) -> (ReleaseState, Op) {
        let after = self.ticket.wrapping_add(1);
        assert_eq!(
            tail_fields(expected).0,
            after,
            "dmcs: the lock goes free only while DRAWN = d + 1"
        );
        let cas = self.cas(expected, tail_word(after, after));
        (ReleaseState::Freeing { expected }, cas)
    }

    /// Passes the lock to `successor`, refreshing OPEN first if the rule says so (a CAS
    /// from `guess`, TAIL as last seen or predicted).
    fn hand_over(&self, successor: u64, guess: u64, failures: usize) -> (ReleaseState, Op) {
        if !self.lock.must_refresh(self.ticket, self.snapshot) {
            return (ReleaseState::Passing, self.pass(successor));
        }
        // Lemma 4: at most one failure for a stale OPEN and N − 1 for DRAWN's moves.
        assert!(
            failures <= self.lock.participants(),
            "dmcs: Lemma 4 broken: the refresh failed {failures} times"
        );
        let cas = self.cas(guess, tail_word(tail_fields(guess).0, self.ticket));
        let state = ReleaseState::Refreshing {
            expected: guess,
            successor,
            failures,
        };
        (state, cas)
    }
}

impl Routine for Release {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let lock = &self.lock;
        let load_next = Op::Load {
            loc: lock.next[self.slot],
        };
        let load_scratch = Op::Load {
            loc: lock.scratch[self.slot],
        };
        let wait = Op::Wait {
            work_id: RELEASE_WORK_ID,
        };
        let (state, op) = match self.state {
            ReleaseState::Start => {
                done_of(reply)?;
                (ReleaseState::NextLoaded, load_next)
            }
            ReleaseState::NextLoaded => {
                let successor = value_of(reply)?;
                let load = Op::Load {
                    loc: lock.ticket[self.slot],
                };
                (ReleaseState::TicketLoaded { successor }, load)
            }
            ReleaseState::TicketLoaded { successor } => {
                (self.ticket, self.snapshot) = tail_fields(value_of(reply)?);
                if successor == EMPTY {
                    self.free(tail_word(self.ticket.wrapping_add(1), self.snapshot))
                } else {
                    // A successor drew d + 1, so DRAWN ≥ d + 2; OPEN as the own FAA saw it.
                    let guess = tail_word(self.ticket.wrapping_add(2), self.snapshot);
                    self.hand_over(successor, guess, 0)
                }
            }
            ReleaseState::Freeing { expected } => {
                done_of(reply)?;
                (ReleaseState::FreeWaited { expected }, wait)
            }
            ReleaseState::FreeWaited { expected } => {
                done_of(reply)?;
                (ReleaseState::FreeLoaded { expected }, load_scratch)
            }
            ReleaseState::FreeLoaded { expected } => {
                let old = value_of(reply)?;
                if old == expected {
                    // Postcondition (Lemma 1): the lock is free, OPEN = DRAWN = d + 1.
                    return Ok(Yield::Done(()));
                }
                if tail_fields(old).0 == self.ticket.wrapping_add(1) {
                    // Nobody drew after d; only OPEN differed: a predecessor refreshed it
                    // after our FAA. Lemma 4: only a refresh moves OPEN under a drawn
                    // ticket, and it can differ from the snapshot only at the first try.
                    assert!(
                        lock.refresh && tail_fields(expected).1 == self.snapshot,
                        "dmcs: Lemma 4 broken: OPEN moved under ticket {:#x} ({old:#x})",
                        self.ticket
                    );
                    self.free(old)
                } else {
                    (ReleaseState::SpinningOnNext { seen: old }, load_next)
                }
            }
            ReleaseState::SpinningOnNext { seen } => match value_of(reply)? {
                EMPTY => (ReleaseState::SpinningOnNext { seen }, load_next),
                successor => self.hand_over(successor, seen, 0),
            },
            ReleaseState::Refreshing {
                expected,
                successor,
                failures,
            } => {
                done_of(reply)?;
                let state = ReleaseState::RefreshWaited {
                    expected,
                    successor,
                    failures,
                };
                (state, wait)
            }
            ReleaseState::RefreshWaited {
                expected,
                successor,
                failures,
            } => {
                done_of(reply)?;
                let state = ReleaseState::RefreshLoaded {
                    expected,
                    successor,
                    failures,
                };
                (state, load_scratch)
            }
            ReleaseState::RefreshLoaded {
                expected,
                successor,
                failures,
            } => {
                let old = value_of(reply)?;
                if old == expected {
                    // OPEN = d now (gap 0), and the CAS is complete before the pass
                    // (Lemma 4): no later holder's CAS can be overtaken by it.
                    (ReleaseState::Passing, self.pass(successor))
                } else {
                    // Lemma 4: after a first failure OPEN is exact; only DRAWN moves.
                    assert!(
                        failures == 0 || tail_fields(old).1 == tail_fields(expected).1,
                        "dmcs: Lemma 4 broken: OPEN moved while ticket {:#x} holds",
                        self.ticket
                    );
                    self.hand_over(successor, old, failures + 1)
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::Endpoint;
    use crate::mem::{MemFabric, MemOptions, Mode};
    use crate::sync::guard;

    /// 2-bit tickets (M = 4) for three participants on two nodes, TAIL started just below
    /// the raw 2³² wrap, many acquisitions on real threads: every critical section
    /// increments a counter with get, put and global fence (a lost update would show), and
    /// at the end TAIL is free with DRAWN past the wrap.
    #[test]
    fn small_tickets_wrap_on_threads_without_losing_an_update() {
        const ROUNDS: u64 = 300;
        let nodes = [NodeId(0), NodeId(1), NodeId(1)];
        let mut layout = LayoutBuilder::new(2);
        let tickets = Tickets {
            bits: 2,
            refresh: true,
        };
        let lock = Dmcs::with_tickets(&mut layout, NodeId(0), &nodes, tickets);
        let counter = layout.alloc(NodeId(0));
        let scratch: Vec<Loc> = nodes.iter().map(|&n| layout.alloc(n)).collect();
        for seed in 0..4 {
            let fabric = MemFabric::with_options(
                layout.build(),
                MemOptions {
                    mode: Mode::Worker,
                    jitter: Some(seed),
                },
            );
            let start = u32::MAX - 1;
            fabric
                .write(lock.tail(), tail_word(start, start))
                .expect("TAIL");
            std::thread::scope(|s| {
                for (slot, &node) in nodes.iter().enumerate() {
                    let (fabric, lock, scratch) = (&fabric, &lock, scratch[slot]);
                    s.spawn(move || {
                        let mut endpoint = fabric.endpoint(node);
                        let work_id = WorkId(1);
                        for _ in 0..ROUNDS {
                            let mut held = guard::dmcs(lock, slot, &mut endpoint).expect("in");
                            let e = held.endpoint();
                            let get = Op::Get {
                                local: scratch,
                                remote: counter,
                                work_id,
                            };
                            assert_eq!(e.execute(&get), Reply::Done);
                            assert_eq!(e.execute(&Op::Wait { work_id }), Reply::Done);
                            let Reply::Value(v) = e.execute(&Op::Load { loc: scratch }) else {
                                panic!("a load replies a value")
                            };
                            let put = Op::PutInline {
                                remote: counter,
                                value: v + 1,
                                work_id,
                            };
                            assert_eq!(e.execute(&put), Reply::Done);
                            let fence = Op::GlobalFence { node: counter.node };
                            assert_eq!(e.execute(&fence), Reply::Done);
                            held.release().expect("out");
                        }
                    });
                }
            });
            let total = ROUNDS * nodes.len() as u64;
            assert_eq!(
                fabric.read(counter),
                Ok(total),
                "seed {seed}: a lost update"
            );
            let end = start.wrapping_add(total as u32);
            assert_eq!(
                fabric.read(lock.tail()),
                Ok(tail_word(end, end)),
                "seed {seed}: TAIL is free, past the wrap"
            );
        }
    }

    #[test]
    #[should_panic(expected = "Lemma 2: N < M")]
    fn as_many_participants_as_tickets_is_refused() {
        let mut layout = LayoutBuilder::new(1);
        let tickets = Tickets {
            bits: 1,
            refresh: true,
        };
        Dmcs::with_tickets(&mut layout, NodeId(0), &[NodeId(0); 2], tickets);
    }
}
