//! The ticket queue: the MCS queue of [`super::dmcs`] and of RMA-RW's per-level queues (DQ,
//! [`super::rmarw`]), entered with an FAA that draws a ticket instead of the swap the model
//! lacks. One implementation and one proof serve both locks.
//!
//! # The words
//!
//! * TAIL, on the queue's tail node: DRAWN (high 32 bits, the next ticket) and OPEN (low 32
//!   bits, the ticket that may enter without waiting). Zeroed memory (0, 0) is the empty
//!   queue, and so is any (x, x). Both fields wrap as the hardware wraps them: the FAA of
//!   2³² that draws a ticket lets its carry fall off the top of the word.
//! * SLOT, a ring of R words on the tail node (R a power of two, at least the members that
//!   can be queued at once, at most M): the member with ticket d writes `d << 32 | rank`
//!   (the raw 32-bit ticket) into `SLOT[d mod R]`, so that its successor finds it.
//! * Per *member* (a participant in D-MCS; a participant or an element in a DQ), on the
//!   member's home node: NEXT (the successor's rank, ∅ = 0), STATUS (D-MCS's WAIT: a
//!   queue-specific *waiting* value until the predecessor writes a signal), and TICKET (the
//!   TAIL that the member's FAA returned: its ticket d and *snapshot* s of OPEN). Ranks
//!   are member index + 1.
//!
//! Tickets compare modulo M = 2^bits ([`Tickets::bits`], 32 in production; M divides 2³²):
//! ticket d is *open* iff d ≡ OPEN (mod M).
//!
//! # The protocol
//!
//! * Enter: reset NEXT to ∅ and STATUS to waiting; FAA TAIL by 2³² (ticket d, snapshot s,
//!   kept in TICKET); register in SLOT (inline put). If d is open the queue was empty: the
//!   member heads it. Otherwise get `SLOT[(d − 1) mod R]` until it holds ticket d − 1, put
//!   the own rank into that member's NEXT, and read STATUS until it is not waiting. A CPU
//!   member whose queue's tail node is its own node registers with a CPU store and reads
//!   SLOT with CPU loads instead (SLOT never sees an atomic, so weak isolation is moot).
//! * Leave (the head member's tenure ends): if NEXT is set, *pass*: refresh OPEN if due
//!   (below), then put the signal into the successor's STATUS. Otherwise CAS TAIL from
//!   (d + 1, s) to (d + 1, d + 1): success empties the queue. A failure with DRAWN still
//!   d + 1 means only OPEN differed (a predecessor refreshed it after our FAA): CAS again
//!   from exactly the value returned. A failure with DRAWN moved means ticket d + 1 is on
//!   its way: read NEXT until it links, then pass.
//! * Refresh: a member passing with (d − s) mod M ≥ T, where T = M − N (M − N − 1 for a
//!   queue built with slack, Lemma 5) and N bounds the members that can hold tickets at
//!   once, sets OPEN to d: a CAS of TAIL from a guess
//!   (DRAWN', OPEN') to (DRAWN', d), retried from the value returned until it succeeds,
//!   and completed (waited for, its result loaded) before the passing put.
//!
//! # Why it is mutually exclusive
//!
//! Count tickets without wrapping (the n-th FAA on TAIL draws ticket n, counting from the
//! initial DRAWN) and call OPEN's unwrapped value the ticket it was last set to. The
//! *current* ticket c is the smallest one drawn and not yet released; the queue is empty
//! when there is none (c = DRAWN). The raw fields are these values mod 2³², and M divides
//! 2³², so raw values agree mod M exactly when the unwrapped ones do. "Holding" below means
//! heading the queue (D-MCS: holding the lock; a DQ: the member's tenure at that level).
//!
//! *Handover.* OPEN changes only by the leave's CAS (which needs DRAWN = d + 1, so it
//! succeeds only for the last ticket drawn, and sets OPEN = DRAWN: the queue is empty)
//! and by the refresh CAS; both are issued only for the current ticket (**Lemma 4**, one
//! writer of OPEN). Ticket d + 1 heads the queue either (a) because its FAA saw d + 1
//! open, which (Lemma 2) means ticket d's leave CAS came first and d left without passing
//! (nobody linked: d + 1 links only when it did not enter by (a)); or (b) because its
//! STATUS got a signal, which only ticket d's leave writes, after d + 1 linked into d's
//! NEXT, which d + 1 does only when its FAA came before d's leave CAS (that CAS then
//! fails). Exactly one of (a) and (b) happens, and each admits d + 1 only after d is out;
//! by induction on tickets, one head at a time — provided no ticket enters by (a) while
//! another is current, which is what the wrap argument shows.
//!
//! *The wrap.* With 32-bit fields and no refresh, a queue passed on 2³² times in a row
//! without ever being empty would draw a ticket equal to the stale OPEN, and a second
//! member would enter. The refresh bounds the gap between the current ticket and OPEN:
//!
//! * **Lemma 1** (gap): at all times 0 ≤ c − OPEN ≤ T (unwrapped). Empty queue: the leave
//!   CAS set OPEN = DRAWN = c, gap 0. Handover from d to d + 1: if d refreshed, OPEN = d,
//!   gap 1 ≤ T (T ≥ 1 because N < M, N + 1 < M with slack); otherwise d − s < T, and OPEN only grows (it is
//!   only ever set to the current ticket or to DRAWN, both ≥ OPEN), so
//!   (d + 1) − OPEN ≤ (d + 1) − s ≤ T. Draws change neither c nor OPEN.
//! * **Lemma 2** (closed): a ticket t drawn while ticket c is current is not open. The
//!   tickets c..t are held by distinct members (a member is queued at most once at a
//!   time), so t ≤ c + N − 1, and 0 < t − OPEN ≤ (N − 1) + T = M − 1: t ≢ OPEN (mod M).
//!   A ticket drawn while the queue is empty has OPEN = t exactly (Lemma 1, gap 0).
//! * **Lemma 3** (exact snapshot): for the snapshot s of ticket d, 0 ≤ d − s ≤ M − 1 (as
//!   in Lemma 2), so (d − s) mod M, computed from raw fields, is the unwrapped d − s, and
//!   the refresh rule of Lemma 1 is exactly what the code tests.
//! * **Lemma 4** (refresh ends): while d is current, only d's leave writes OPEN, and DRAWN
//!   moves at most N − 1 times (every other member draws at most once). A refresh CAS that
//!   fails returns the current value, whose OPEN is then exact; later failures are DRAWN's
//!   moves: at most N failures in all. The leave CAS likewise fails with DRAWN = d + 1 at
//!   most once. The refresh completes before the passing put, so no later CAS on TAIL is
//!   overtaken by it.
//! * **Lemma 5** (empty): if the queue is built with slack (T ≤ M − N − 1, see
//!   `TicketQueue::new`), it is empty iff DRAWN ≡ OPEN (mod M): empty means
//!   DRAWN = c = OPEN; otherwise 1 ≤ DRAWN − OPEN = (DRAWN − c) + (c − OPEN) ≤ N + T < M.
//!   (Without slack DRAWN − OPEN = M is possible with N tickets out and a gap of T.)
//!
//! The SLOT ring needs R | M so that `d mod R` is the same for raw and unwrapped tickets,
//! and R ≥ N so that the ≤ N tickets in use never share a word; SLOT tags are raw 32-bit
//! tickets, and a stale tag equal to d − 1 would need 2³² tickets since the word was last
//! written. [`Tickets::refresh`] = `false` drops the refresh; it exists only so that a test
//! can show the defect.
//!
//! # Custody: who acts for a member
//!
//! A member's ticket is drawn by the participant that enters it, and its tenure is ended by
//! the participant that leaves for it: the same one in D-MCS and at a DQ's finest level
//! (`Access::Cpu`: the member is the participant, its words are on its node, reset and
//! read with CPU operations, and TICKET is where the FAA's result lands — a private word).
//! An element's member (`Access::Nic`) is acted for by whichever participant currently
//! holds the element's lock: its words are reached with gets and inline puts even when
//! local, and TICKET gets the FAA's result directly when the member's home is the entering
//! participant's node (the FAA's wait returns once it is in memory), by an inline put
//! otherwise. So that another participant can leave for it, **Lemma 6** (custody): a NIC
//! member's resets are in memory before its FAA (a global fence towards its home), and its
//! SLOT registration and a put TICKET are in memory before the enter goes on (global
//! fences towards the tail node and, after a put, the home). Then the leaver's get of
//! TICKET reads this tenure's value, and a late registration can never land over the
//! registration of ticket d + R. For a CPU member the D-MCS argument suffices: the
//! registration is in memory before the tenure ends, because either a successor read it
//! (it spins until it does) or the leave's CAS went to the tail node through the same
//! queue pair, which a remote atomic may do only when the writes before it have landed
//! (and a registration by CPU store left the store buffer before that CAS did).
//!
//! # Ordering in the rdma-rmw model
//!
//! * CPU resets reach memory before the FAA starts: a remote operation leaves the store
//!   buffer only after every older CPU write (so no successor links into a stale NEXT, and
//!   no predecessor's signal is overwritten by the reset);
//! * TAIL is only ever touched by remote atomics, which are atomic among themselves (weak
//!   isolation excludes only CPU accesses and puts, which TAIL never sees);
//! * puts carry their value inline: a put's NIC local read happens late, so a put from a
//!   buffer could send a value written after the post;
//! * a put is acknowledged before its write lands; the readers of NEXT and STATUS read
//!   until they see the write.

use super::fetch::{Access, ReadWord, ReadWords};
use super::{FetchAtomic, Routine, Yield, done_of, first_op, value_of};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;

/// ∅: the empty rank in NEXT and SLOT.
pub(crate) const EMPTY: u64 = 0;

/// The FAA on TAIL that draws a ticket: +1 in DRAWN, the high half.
const DRAW: u64 = 1 << 32;

/// A TAIL value: DRAWN in the high half, OPEN in the low half.
pub(crate) fn tail_word(drawn: u32, open: u32) -> u64 {
    (u64::from(drawn) << 32) | u64::from(open)
}

/// The high and low halves of a word: DRAWN and OPEN of TAIL, ticket and snapshot of
/// TICKET, ticket and rank of SLOT.
pub(crate) fn tail_fields(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// How a ticket queue numbers its tickets (see the module documentation for the proof that
/// goes with these choices).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tickets {
    /// Tickets compare modulo M = 2^`bits`, in `1..=32`; the members must be fewer than M.
    /// 32 in production; small values let the exhaustive checks reach the wrap. TAIL's raw
    /// fields are 32 bits whatever `bits` is.
    pub bits: u32,
    /// Whether a member refreshes OPEN when it passes the queue on (Lemma 1). `false`
    /// exists only so that a test can show the defect the refresh fixes: without it, a
    /// queue passed on M times in a row without being empty lets a second member in.
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

/// NEXT, STATUS and TICKET of one member, on its home node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Member {
    pub(crate) next: Loc,
    pub(crate) status: Loc,
    pub(crate) ticket: Loc,
    pub(crate) home: NodeId,
    pub(crate) access: Access,
}

impl Member {
    /// Allocates a member's words on `home`.
    pub(crate) fn new(layout: &mut LayoutBuilder, home: NodeId, access: Access) -> Member {
        Member {
            next: layout.alloc(home),
            status: layout.alloc(home),
            ticket: layout.alloc(home),
            home,
            access,
        }
    }
}

/// One ticket queue: TAIL, the SLOT ring, the members it may hold, and the ticket rule.
#[derive(Debug)]
pub(crate) struct TicketQueue {
    /// TAIL: DRAWN (high half) and OPEN (low half).
    tail: Loc,
    /// `SLOT[d mod R]` is `d << 32 | rank` of ticket d's member; R is a power of two.
    slots: Vec<Loc>,
    /// The members, by rank − 1 (shared by the queues whose members they are).
    members: Shared<Vec<Member>>,
    /// STATUS while a member waits; any other value is a signal.
    waiting: u64,
    /// M − 1: tickets compare modulo M.
    mask: u32,
    /// T: a member whose ticket is T or more past its snapshot refreshes OPEN.
    threshold: u32,
    /// Whether members refresh OPEN ([`Tickets::refresh`]).
    refresh: bool,
    /// N: at most this many members hold tickets at once.
    bound: usize,
    /// Whether T = M − N − 1 (Lemma 5).
    slack: bool,
}

impl TicketQueue {
    /// Allocates TAIL and a SLOT ring on `tail_node` for a queue of which at most `bound`
    /// of `members` are ever queued at once; `waiting` is STATUS while a member waits.
    /// With `slack`, T = M − N − 1 instead of M − N, so that the queue's emptiness can be
    /// read off TAIL (Lemma 5).
    ///
    /// # Panics
    /// If `tickets.bits` is not in `1..=32`, or N (plus one with `slack`) is not below M
    /// (Lemma 2).
    pub(crate) fn new(
        layout: &mut LayoutBuilder,
        tail_node: NodeId,
        members: &Shared<Vec<Member>>,
        bound: usize,
        waiting: u64,
        tickets: Tickets,
        slack: bool,
    ) -> TicketQueue {
        assert!(
            bound >= 1 && bound <= members.len(),
            "ticket queue: 1 ≤ N ≤ members"
        );
        assert!(
            (1..=32).contains(&tickets.bits),
            "ticket queue: tickets have 1 to 32 bits, not {}",
            tickets.bits
        );
        let modulus = 1u64 << tickets.bits;
        let n = bound as u64 + u64::from(slack);
        // Lemma 2: t − OPEN ≤ (N − 1) + (M − N) < M needs N < M.
        assert!(
            n < modulus,
            "ticket queue: {bound} members need more than {}-bit tickets (Lemma 2: N < M)",
            tickets.bits
        );
        let ring = bound.next_power_of_two() as u64;
        let queue = TicketQueue {
            tail: layout.alloc(tail_node),
            slots: layout.alloc_many(tail_node, ring as u32),
            members: members.clone(),
            waiting,
            mask: (modulus - 1) as u32,
            threshold: (modulus - n) as u32,
            refresh: tickets.refresh,
            bound,
            slack,
        };
        // Postconditions (Lemmas 1, 2, 5 and the ring): T ≥ 1, T + N ≤ M (− 1 with
        // slack), R ≥ N and R | M.
        assert!(queue.threshold >= 1, "ticket queue: T ≥ 1");
        assert!(u64::from(queue.threshold) + bound as u64 + u64::from(slack) == modulus);
        assert!(queue.slots.len() >= bound && modulus % ring == 0);
        queue
    }

    /// TAIL: DRAWN (high 32 bits) and OPEN (low 32 bits).
    pub(crate) fn tail(&self) -> Loc {
        self.tail
    }

    /// The words of the member of rank `rank` (not ∅).
    pub(crate) fn member(&self, rank: u64) -> Member {
        assert!(rank != EMPTY, "ticket queue: ∅ names no member");
        let index = usize::try_from(rank - 1).expect("ranks fit usize");
        assert!(
            index < self.members.len(),
            "ticket queue: rank {rank} read from the queue names no member"
        );
        self.members[index]
    }

    /// Whether the queue is empty, from a value of its TAIL (Lemma 5). Only for a queue
    /// built with slack.
    pub(crate) fn is_empty(&self, tail: u64) -> bool {
        assert!(
            self.slack,
            "ticket queue: emptiness is exact only with slack (Lemma 5)"
        );
        let (drawn, open) = tail_fields(tail);
        self.is_open(drawn, open)
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

    /// Whether the member with ticket `ticket` and snapshot `snapshot` refreshes OPEN when
    /// it passes the queue on: (d − s) mod M ≥ T, which is the unwrapped d − s (Lemma 3).
    fn must_refresh(&self, ticket: u32, snapshot: u32) -> bool {
        self.refresh && ticket.wrapping_sub(snapshot) & self.mask >= self.threshold
    }
}

/// How an enter ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Entered {
    /// The ticket was open: the queue was empty, and the member heads it.
    Open,
    /// The predecessor wrote this signal into STATUS (never the waiting value).
    Signal(u64),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum EnterState {
    Start,
    /// NEXT := ∅ was issued.
    NextReset,
    /// STATUS := waiting was issued.
    StatusReset,
    /// (NIC member) The resets are in memory.
    ResetsLanded,
    /// Drawing a ticket: the FAA on TAIL, its wait, the load of the old TAIL.
    Drawing(FetchAtomic),
    /// The registration in SLOT was posted; `drawn` is TAIL as the FAA returned it (the
    /// ticket and the snapshot), `open` whether the ticket is open.
    Registering {
        drawn: u64,
        open: bool,
    },
    /// (NIC member) The put of TICKET was posted.
    Recording {
        ticket: u32,
        open: bool,
    },
    /// (NIC member) The global fence towards the tail node was issued; `recorded`: TICKET
    /// was written with a put (not by the FAA itself).
    LandingTail {
        ticket: u32,
        open: bool,
        recorded: bool,
    },
    /// (NIC member) The global fence towards the member's home was issued.
    LandingHome {
        ticket: u32,
        open: bool,
    },
    /// (CPU member) The ticket was open: the wait for the registration was issued.
    EnteringOpen,
    /// A get of the SLOT word of ticket `ticket` − 1 (the predecessor's) was posted.
    FindingPred {
        ticket: u32,
    },
    /// Its wait returned; the word is loaded next.
    FindWaited {
        ticket: u32,
    },
    /// The predecessor's SLOT word was loaded (from scratch, or from SLOT itself when it
    /// is local).
    FindLoaded {
        ticket: u32,
    },
    /// The own rank was put into the predecessor's NEXT.
    Linking,
    /// The link (and the registration) is acknowledged.
    Linked,
    /// Reading STATUS until it is not the waiting value.
    Spinning(ReadWord),
}

/// A participant enters member `me` (a rank) into a ticket queue and waits until it heads
/// it: the queue's acquire.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Enter {
    queue: Shared<TicketQueue>,
    me: u64,
    /// The participant's scratch word (on its node): gets and a NIC member's FAA land here.
    scratch: Loc,
    work_id: WorkId,
    state: EnterState,
}

impl Enter {
    /// Participant with scratch word `scratch` enters member `me` into `queue`.
    pub(crate) fn new(
        queue: &Shared<TicketQueue>,
        me: u64,
        scratch: Loc,
        work_id: WorkId,
    ) -> Enter {
        let member = queue.member(me);
        assert!(
            member.access == Access::Nic || member.ticket.node == scratch.node,
            "ticket queue: a CPU member is on its participant's node"
        );
        Enter {
            queue: queue.clone(),
            me,
            scratch,
            work_id,
            state: EnterState::Start,
        }
    }

    /// Whether the member is in the queue: its FAA on TAIL has completed.
    pub(crate) fn queued(&self) -> bool {
        match &self.state {
            EnterState::Start
            | EnterState::NextReset
            | EnterState::StatusReset
            | EnterState::ResetsLanded => false,
            EnterState::Drawing(fetch) => fetch.completed(),
            _ => true,
        }
    }

    fn member(&self) -> Member {
        self.queue.member(self.me)
    }

    /// Where the FAA's result lands: TICKET itself if it is on the participant's node (a
    /// CPU member, or a NIC member at home), scratch otherwise (and a put copies it).
    fn drawn_at(&self) -> Loc {
        let ticket = self.member().ticket;
        if ticket.node == self.scratch.node {
            ticket
        } else {
            self.scratch
        }
    }

    /// Writes one of the member's words: a CPU store, or an inline put.
    fn write(&self, loc: Loc, value: u64) -> Op {
        match self.member().access {
            Access::Cpu => Op::Store { loc, value },
            Access::Nic => Op::PutInline {
                remote: loc,
                value,
                work_id: self.work_id,
            },
        }
    }

    /// Starts drawing a ticket: the FAA on TAIL.
    fn draw(&self) -> Result<(EnterState, Op), RdmaError> {
        let faa = Rmw::Faa { add: DRAW };
        let mut fetch = FetchAtomic::new(self.drawn_at(), self.queue.tail, faa, self.work_id);
        let op = first_op(&mut fetch)?;
        Ok((EnterState::Drawing(fetch), op))
    }

    /// Whether the participant reaches SLOT with CPU operations: a CPU member whose
    /// queue's tail node is its own node.
    fn slots_local(&self) -> bool {
        self.member().access == Access::Cpu && self.queue.tail.node == self.scratch.node
    }

    /// The registration of ticket `ticket` in SLOT: a CPU store when SLOT is local, an
    /// inline put otherwise.
    fn register(&self, ticket: u32) -> Op {
        let loc = self.queue.slot_word(ticket);
        let value = tail_word(ticket, 0) | self.me;
        if self.slots_local() {
            Op::Store { loc, value }
        } else {
            Op::PutInline {
                remote: loc,
                value,
                work_id: self.work_id,
            }
        }
    }

    /// Reads the SLOT word of ticket `ticket` − 1 (the predecessor's): a CPU load when
    /// SLOT is local, a get otherwise.
    fn find_pred(&self, ticket: u32) -> (EnterState, Op) {
        let loc = self.queue.slot_word(ticket.wrapping_sub(1));
        if self.slots_local() {
            (EnterState::FindLoaded { ticket }, Op::Load { loc })
        } else {
            let get = Op::Get {
                local: self.scratch,
                remote: loc,
                work_id: self.work_id,
            };
            (EnterState::FindingPred { ticket }, get)
        }
    }

    /// The registration and (NIC member) TICKET are issued and, for a NIC member, in
    /// memory (Lemma 6): enter at once, or look for the predecessor.
    fn proceed(&self, ticket: u32, open: bool) -> Result<(EnterState, Op), Yield<Entered>> {
        match (open, self.member().access) {
            // A local registration is a CPU store: nothing to wait for.
            (true, Access::Cpu) if self.slots_local() => Err(Yield::Done(Entered::Open)),
            (true, Access::Cpu) => {
                let wait = Op::Wait {
                    work_id: self.work_id,
                };
                Ok((EnterState::EnteringOpen, wait))
            }
            // The fences completed every operation of the enter.
            (true, Access::Nic) => Err(Yield::Done(Entered::Open)),
            (false, _) => Ok(self.find_pred(ticket)),
        }
    }

    /// (NIC member) The global fence that puts the registration (and TICKET, if the tail
    /// node is its home) in memory (Lemma 6); `recorded`: TICKET was written by a put.
    fn land_at_tail(&self, ticket: u32, open: bool, recorded: bool) -> (EnterState, Op) {
        let fence = Op::GlobalFence {
            node: self.queue.tail.node,
        };
        let state = EnterState::LandingTail {
            ticket,
            open,
            recorded,
        };
        (state, fence)
    }

    fn spin(&self) -> Result<(EnterState, Op), RdmaError> {
        let member = self.member();
        let mut read = ReadWord::new(member.status, member.access, self.scratch, self.work_id);
        let op = first_op(&mut read)?;
        Ok((EnterState::Spinning(read), op))
    }
}

impl Routine for Enter {
    type Output = Entered;

    fn resume(&mut self, reply: Reply) -> Result<Yield<Entered>, RdmaError> {
        let queue = &self.queue;
        let member = self.member();
        let wait = Op::Wait {
            work_id: self.work_id,
        };
        let (state, op) = match self.state {
            EnterState::Start => {
                done_of(reply)?;
                // Reset before the FAA makes the member visible: a successor links into
                // NEXT and the predecessor signals into STATUS only after it.
                (EnterState::NextReset, self.write(member.next, EMPTY))
            }
            EnterState::NextReset => {
                done_of(reply)?;
                let reset = self.write(member.status, queue.waiting);
                (EnterState::StatusReset, reset)
            }
            EnterState::StatusReset => {
                done_of(reply)?;
                match member.access {
                    // CPU stores reach memory before the later atomic leaves the store
                    // buffer: nothing more is needed.
                    Access::Cpu => self.draw()?,
                    // Puts are acknowledged before they land, and the FAA goes to another
                    // queue pair: fence until they are in memory (Lemma 6).
                    Access::Nic => {
                        let fence = Op::GlobalFence { node: member.home };
                        (EnterState::ResetsLanded, fence)
                    }
                }
            }
            EnterState::ResetsLanded => {
                done_of(reply)?;
                self.draw()?
            }
            EnterState::Drawing(ref mut fetch) => {
                let drawn = match fetch.resume(reply)? {
                    Yield::Op(op) => return Ok(Yield::Op(op)),
                    Yield::Done(drawn) => drawn,
                };
                let (ticket, snapshot) = tail_fields(drawn);
                let open = queue.is_open(ticket, snapshot);
                // Lemma 2: a ticket is open only when the queue is empty, and then OPEN is
                // the ticket exactly (without the refresh the lemma fails at the wrap).
                assert!(
                    !queue.refresh || !open || snapshot == ticket,
                    "ticket queue: Lemma 2 broken: ticket {ticket:#x} open against OPEN \
                     {snapshot:#x}"
                );
                // Register first, whatever happens next: the successor looks here.
                (
                    EnterState::Registering { drawn, open },
                    self.register(ticket),
                )
            }
            EnterState::Registering { drawn, open } => {
                done_of(reply)?;
                let ticket = tail_fields(drawn).0;
                match member.access {
                    Access::Cpu => match self.proceed(ticket, open) {
                        Ok(next) => next,
                        Err(done) => return Ok(done),
                    },
                    // This tenure may be ended by another participant, which reads TICKET:
                    // copy the FAA's result there unless the FAA wrote it (its wait
                    // returned once it was in memory).
                    Access::Nic if self.drawn_at() != member.ticket => {
                        let record = self.write(member.ticket, drawn);
                        (EnterState::Recording { ticket, open }, record)
                    }
                    Access::Nic => self.land_at_tail(ticket, open, false),
                }
            }
            EnterState::Recording { ticket, open } => {
                done_of(reply)?;
                self.land_at_tail(ticket, open, true)
            }
            EnterState::LandingTail {
                ticket,
                open,
                recorded: true,
            } if member.home != queue.tail.node => {
                done_of(reply)?;
                let fence = Op::GlobalFence { node: member.home };
                (EnterState::LandingHome { ticket, open }, fence)
            }
            EnterState::LandingTail { ticket, open, .. }
            | EnterState::LandingHome { ticket, open } => {
                done_of(reply)?;
                // Lemma 6: the registration and TICKET are in memory.
                match self.proceed(ticket, open) {
                    Ok(next) => next,
                    Err(done) => return Ok(done),
                }
            }
            EnterState::EnteringOpen => {
                done_of(reply)?;
                return Ok(Yield::Done(Entered::Open));
            }
            EnterState::FindingPred { ticket } => {
                done_of(reply)?;
                (EnterState::FindWaited { ticket }, wait)
            }
            EnterState::FindWaited { ticket } => {
                done_of(reply)?;
                let load = Op::Load { loc: self.scratch };
                (EnterState::FindLoaded { ticket }, load)
            }
            EnterState::FindLoaded { ticket } => {
                let (tag, pred) = tail_fields(value_of(reply)?);
                if tag != ticket.wrapping_sub(1) || pred == 0 {
                    // The predecessor has not registered yet: the word is older.
                    self.find_pred(ticket)
                } else {
                    let pred = u64::from(pred);
                    assert_ne!(pred, self.me, "ticket queue: member {pred} queued twice");
                    let link = Op::PutInline {
                        remote: queue.member(pred).next,
                        value: self.me,
                        work_id: self.work_id,
                    };
                    (EnterState::Linking, link)
                }
            }
            EnterState::Linking => {
                done_of(reply)?;
                (EnterState::Linked, wait)
            }
            EnterState::Linked => {
                done_of(reply)?;
                self.spin()?
            }
            EnterState::Spinning(ref mut read) => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(status) if status == queue.waiting => self.spin()?,
                Yield::Done(signal) => return Ok(Yield::Done(Entered::Signal(signal))),
            },
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum LeaveState {
    /// Not started; `known` is NEXT and TICKET as the caller read them, if it did.
    Start { known: Option<(u64, u64)> },
    /// Reading NEXT and TICKET.
    Reading(ReadWords),
    /// The leave CAS of TAIL from an expected value with DRAWN = d + 1 to (d + 1, d + 1).
    Freeing(FetchAtomic),
    /// That CAS failed because a successor drew a ticket: reading NEXT until it links.
    /// `seen` is TAIL as the CAS returned it (the guess of a refresh).
    AwaitingSuccessor { seen: u64, read: ReadWord },
    /// A refresh CAS of TAIL from an expected value to (its DRAWN, d), before passing to
    /// `successor`; `failures` earlier attempts failed.
    Refreshing {
        successor: u64,
        failures: u32,
        fetch: FetchAtomic,
    },
    /// The signal was put into the successor's STATUS.
    Passing,
    /// The put is acknowledged.
    Passed,
}

/// A participant ends the tenure of member `me` at the head of a ticket queue: passes the
/// queue on with `signal` to the successor, or empties it (the queue's release).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Leave {
    queue: Shared<TicketQueue>,
    me: u64,
    /// The participant's scratch words (on its node): results of CASes and gets.
    scratch: [Loc; 2],
    work_id: WorkId,
    signal: u64,
    /// The member's ticket d, once known.
    ticket: u32,
    /// The member's snapshot s (OPEN as its FAA returned it), once known.
    snapshot: u32,
    state: LeaveState,
}

impl Leave {
    /// Participant with scratch words `scratch` ends the tenure of member `me` of `queue`,
    /// signalling `signal` to a successor. `known`: NEXT and TICKET, if the caller has
    /// just read them (they are read first otherwise).
    pub(crate) fn new(
        queue: &Shared<TicketQueue>,
        me: u64,
        scratch: [Loc; 2],
        work_id: WorkId,
        signal: u64,
        known: Option<(u64, u64)>,
    ) -> Leave {
        assert_ne!(
            signal, queue.waiting,
            "ticket queue: a member leaves with a signal"
        );
        Leave {
            queue: queue.clone(),
            me,
            scratch,
            work_id,
            signal,
            ticket: 0,
            snapshot: 0,
            state: LeaveState::Start { known },
        }
    }

    /// The reads of NEXT and TICKET.
    pub(crate) fn read_next_and_ticket(
        queue: &TicketQueue,
        me: u64,
        scratch: [Loc; 2],
        work_id: WorkId,
    ) -> ReadWords {
        let member = queue.member(me);
        ReadWords::pair(
            [member.next, member.ticket],
            member.access,
            scratch,
            work_id,
        )
    }

    /// The put that passes the queue on to `successor` (a rank).
    fn pass(&self, successor: u64) -> Op {
        assert_ne!(
            successor, self.me,
            "ticket queue: a member is not its own successor"
        );
        Op::PutInline {
            remote: self.queue.member(successor).status,
            value: self.signal,
            work_id: self.work_id,
        }
    }

    /// A CAS of TAIL from `expected` to `new`, its old value landing in scratch; its
    /// first operation.
    fn cas(&self, expected: u64, new: u64) -> Result<(FetchAtomic, Op), RdmaError> {
        let cas = Rmw::Cas { expected, new };
        let mut fetch = FetchAtomic::new(self.scratch[0], self.queue.tail, cas, self.work_id);
        let op = first_op(&mut fetch)?;
        Ok((fetch, op))
    }

    /// NEXT and TICKET are known: pass on, or empty the queue.
    fn decide(&mut self, successor: u64, drawn: u64) -> Result<(LeaveState, Op), RdmaError> {
        (self.ticket, self.snapshot) = tail_fields(drawn);
        if successor == EMPTY {
            self.free(tail_word(self.ticket.wrapping_add(1), self.snapshot))
        } else {
            // The successor drew d + 1, so DRAWN ≥ d + 2; OPEN as the own FAA saw it.
            let guess = tail_word(self.ticket.wrapping_add(2), self.snapshot);
            self.hand_over(successor, guess, 0)
        }
    }

    /// The leave CAS from `expected` (whose DRAWN is d + 1) to (d + 1, d + 1).
    fn free(&self, expected: u64) -> Result<(LeaveState, Op), RdmaError> {
        let after = self.ticket.wrapping_add(1);
        assert_eq!(
            tail_fields(expected).0,
            after,
            "ticket queue: the queue empties only while DRAWN = d + 1"
        );
        let (fetch, op) = self.cas(expected, tail_word(after, after))?;
        Ok((LeaveState::Freeing(fetch), op))
    }

    /// Passes the queue on to `successor`, refreshing OPEN first if the rule says so (a
    /// CAS from `guess`, TAIL as last seen or predicted).
    fn hand_over(
        &self,
        successor: u64,
        guess: u64,
        failures: u32,
    ) -> Result<(LeaveState, Op), RdmaError> {
        if !self.queue.must_refresh(self.ticket, self.snapshot) {
            return Ok((LeaveState::Passing, self.pass(successor)));
        }
        // Lemma 4: at most one failure for a stale OPEN and N − 1 for DRAWN's moves.
        assert!(
            failures as usize <= self.queue.bound,
            "ticket queue: Lemma 4 broken: the refresh failed {failures} times"
        );
        let (fetch, op) = self.cas(guess, tail_word(tail_fields(guess).0, self.ticket))?;
        let state = LeaveState::Refreshing {
            successor,
            failures,
            fetch,
        };
        Ok((state, op))
    }

    fn await_successor(&self, seen: u64) -> Result<(LeaveState, Op), RdmaError> {
        let member = self.queue.member(self.me);
        let mut read = ReadWord::new(member.next, member.access, self.scratch[0], self.work_id);
        let op = first_op(&mut read)?;
        Ok((LeaveState::AwaitingSuccessor { seen, read }, op))
    }
}

/// The expected value of a CAS.
fn expected(fetch: &FetchAtomic) -> u64 {
    match fetch.rmw() {
        Rmw::Cas { expected, .. } => expected,
        other => unreachable!("ticket queue: a leave posts CASes only, not {other:?}"),
    }
}

impl Routine for Leave {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let (state, op) = match self.state {
            LeaveState::Start { known } => {
                done_of(reply)?;
                match known {
                    Some((successor, drawn)) => self.decide(successor, drawn)?,
                    None => {
                        let mut read = Leave::read_next_and_ticket(
                            &self.queue,
                            self.me,
                            self.scratch,
                            self.work_id,
                        );
                        let op = first_op(&mut read)?;
                        (LeaveState::Reading(read), op)
                    }
                }
            }
            LeaveState::Reading(ref mut read) => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done((successor, drawn)) => self.decide(successor, drawn)?,
            },
            LeaveState::Freeing(ref mut fetch) => {
                let old = match fetch.resume(reply)? {
                    Yield::Op(op) => return Ok(Yield::Op(op)),
                    Yield::Done(old) => old,
                };
                let expected = expected(fetch);
                if old == expected {
                    // Postcondition (Lemma 1): the queue is empty, OPEN = DRAWN = d + 1.
                    return Ok(Yield::Done(()));
                }
                if tail_fields(old).0 == self.ticket.wrapping_add(1) {
                    // Nobody drew after d; only OPEN differed: a predecessor refreshed it
                    // after our FAA. Lemma 4: only a refresh moves OPEN under a drawn
                    // ticket, and OPEN can differ from the snapshot only at the first try.
                    assert!(
                        self.queue.refresh && tail_fields(expected).1 == self.snapshot,
                        "ticket queue: Lemma 4 broken: OPEN moved under ticket {:#x} \
                         ({old:#x})",
                        self.ticket
                    );
                    self.free(old)?
                } else {
                    self.await_successor(old)?
                }
            }
            LeaveState::AwaitingSuccessor { seen, ref mut read } => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(EMPTY) => self.await_successor(seen)?,
                Yield::Done(successor) => self.hand_over(successor, seen, 0)?,
            },
            LeaveState::Refreshing {
                successor,
                failures,
                ref mut fetch,
            } => {
                let old = match fetch.resume(reply)? {
                    Yield::Op(op) => return Ok(Yield::Op(op)),
                    Yield::Done(old) => old,
                };
                let expected = expected(fetch);
                if old == expected {
                    // OPEN = d now (gap 0), and the CAS is complete before the pass
                    // (Lemma 4): no later CAS on TAIL can be overtaken by it.
                    (LeaveState::Passing, self.pass(successor))
                } else {
                    // Lemma 4: after a first failure OPEN is exact; only DRAWN moves.
                    assert!(
                        failures == 0 || tail_fields(old).1 == tail_fields(expected).1,
                        "ticket queue: Lemma 4 broken: OPEN moved while ticket {:#x} holds",
                        self.ticket
                    );
                    self.hand_over(successor, old, failures + 1)?
                }
            }
            LeaveState::Passing => {
                done_of(reply)?;
                let wait = Op::Wait {
                    work_id: self.work_id,
                };
                (LeaveState::Passed, wait)
            }
            LeaveState::Passed => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}
