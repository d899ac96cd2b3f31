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
//! had 60 of 64 processes starved). So the queue is a *ticket queue*
//! ([`super::ticket_queue`], shared with RMA-RW's per-level queues, where the protocol and
//! its proof are written down once):
//!
//! * TAIL, on the tail node, holds DRAWN (high 32 bits, the next ticket) and OPEN (low 32
//!   bits, the ticket that may enter without waiting); an enqueue is one FAA of 2³², which
//!   always succeeds and returns the own ticket d and OPEN (the snapshot s), kept in a
//!   private word (the member's TICKET). Tickets compare modulo M = 2^bits
//!   ([`Tickets::bits`], 32 here). Zeroed memory is the free lock.
//! * SLOT, a ring of R words on the tail node (R = participants rounded up to a power of
//!   two): the holder of ticket d registers there, so that its successor finds it.
//! * Acquire: reset NEXT to ∅ and WAIT to 1 with CPU stores, FAA TAIL, register in SLOT
//!   (inline put). If d is open the lock was free: enter. Otherwise find the predecessor
//!   in SLOT, write the own rank into its NEXT (inline put) and spin with CPU loads on the
//!   own WAIT.
//! * Release: if NEXT is set, pass: refresh OPEN if (d − s) mod M ≥ M − N (N participants),
//!   then one inline put of 0 into the successor's WAIT. Otherwise CAS TAIL from (d + 1, s)
//!   to (d + 1, d + 1) (the lock is free), retried from the returned value if only OPEN
//!   differed; if DRAWN moved, spin on NEXT, then pass.
//!
//! The MCS properties are kept: a waiter spins only on its own WAIT, and the lock passes
//! with one put; FIFO order is the ticket order. Mutual exclusion holds for any number of
//! acquisitions, across the tickets' wrap: the refresh keeps OPEN within M − N of the
//! current ticket, so a ticket drawn while the lock is held is never open (Lemmas 1–4 of
//! [`super::ticket_queue`]). A D-MCS participant is its own queue member, so the CPU
//! accesses above are exactly the member accesses of the ticket queue.
//!
//! Like [`super::wlock`], the lock orders the processes, not the critical section's remote
//! operations: a holder that wants the next holder to see its puts must wait for them (a
//! global fence towards their node) before the release.

use super::fetch::Access;
use super::ticket_queue::{Enter, Entered, Leave, Member, TicketQueue};
use super::{Routine, Yield, library_work_id};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::Reply;
use crate::shared::Shared;

pub use super::ticket_queue::Tickets;

const LIBRARY: u32 = 5;
const ACQUIRE_WORK_ID: WorkId = library_work_id(LIBRARY, 1);
const RELEASE_WORK_ID: WorkId = library_work_id(LIBRARY, 2);

/// WAIT while a participant must spin; the passing put writes [`GO`].
const WAITING: u64 = 1;
/// WAIT once the predecessor passed the lock.
const GO: u64 = 0;

/// The words of one D-MCS lock.
#[derive(Debug)]
pub struct Dmcs {
    /// TAIL and SLOT on the tail node; per participant, NEXT, WAIT (the queue's STATUS)
    /// and TICKET on its node.
    queue: Shared<TicketQueue>,
    /// Per participant: its node.
    nodes: Vec<NodeId>,
    /// Per participant: where gets and atomics return (private).
    scratch: Vec<Loc>,
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
    /// 2^`bits` (Lemma 2 of [`super::ticket_queue`] needs N < M).
    pub fn with_tickets(
        layout: &mut LayoutBuilder,
        tail_node: NodeId,
        nodes: &[NodeId],
        tickets: Tickets,
    ) -> Shared<Dmcs> {
        assert!(!nodes.is_empty(), "dmcs: a lock has participants");
        assert!(
            nodes.len() < 1 << 31,
            "dmcs: fewer than 2^31 participants (ranks and tickets are 32 bits)"
        );
        let members: Vec<Member> = nodes
            .iter()
            .map(|&n| Member::new(layout, n, Access::Cpu))
            .collect();
        let members = Shared::new(members);
        let queue = TicketQueue::new(
            layout,
            tail_node,
            &members,
            nodes.len(),
            WAITING,
            tickets,
            false,
        );
        let scratch = nodes.iter().map(|&n| layout.alloc(n)).collect();
        Shared::new(Dmcs {
            queue: Shared::new(queue),
            nodes: nodes.to_vec(),
            scratch,
        })
    }

    /// TAIL: DRAWN (high 32 bits) and OPEN (low 32 bits). Zero is the free lock; any
    /// `(x << 32) | x` is a free lock too, which lets a test start near the raw wrap.
    pub fn tail(&self) -> Loc {
        self.queue.tail()
    }

    /// The words only participant `slot` ever touches (its TICKET and scratch words). NEXT
    /// and WAIT are not private: the neighbours in the queue write them.
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        vec![
            self.queue.member(Dmcs::rank(slot)).ticket,
            self.scratch[slot],
        ]
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
}

/// Participant `slot` acquires `lock`.
pub fn acquire(lock: &Shared<Dmcs>, slot: usize) -> Acquire {
    assert!(
        slot < lock.participants(),
        "dmcs: unknown participant {slot}"
    );
    let enter = Enter::new(
        &lock.queue,
        Dmcs::rank(slot),
        lock.scratch[slot],
        ACQUIRE_WORK_ID,
    );
    Acquire { enter }
}

/// Participant `slot` releases `lock` (it must hold it).
pub fn release(lock: &Shared<Dmcs>, slot: usize) -> Release {
    assert!(
        slot < lock.participants(),
        "dmcs: unknown participant {slot}"
    );
    let scratch = lock.scratch[slot];
    // A CPU member's NEXT and TICKET are read with loads: one scratch word is enough.
    let leave = Leave::new(
        &lock.queue,
        Dmcs::rank(slot),
        [scratch, scratch],
        RELEASE_WORK_ID,
        GO,
        None,
    );
    Release { leave }
}

/// A D-MCS acquire in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire {
    enter: Enter,
}

impl Routine for Acquire {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        Ok(match self.enter.resume(reply)? {
            Yield::Op(op) => Yield::Op(op),
            Yield::Done(Entered::Open) => Yield::Done(()),
            Yield::Done(Entered::Signal(signal)) => {
                assert_eq!(signal, GO, "dmcs: WAIT holds {WAITING} or {GO}");
                Yield::Done(())
            }
        })
    }
}

/// A D-MCS release in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    leave: Leave,
}

impl Routine for Release {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        self.leave.resume(reply)
    }
}

#[cfg(all(test, feature = "mem"))]
mod tests {
    use super::*;
    use crate::endpoint::Endpoint;
    use crate::ids::Loc;
    use crate::mem::{MemFabric, MemOptions, Mode};
    use crate::op::Op;
    use crate::sync::guard;
    use crate::sync::ticket_queue::tail_word;

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
