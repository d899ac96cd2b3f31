//! The distributed queues DQ: the ticket queue of one element of one level
//! ([`crate::sync::ticket_queue`], the queue D-MCS uses too), as routines that the writer's
//! acquire and release combine.
//!
//! A queue member has NEXT, STATUS and TICKET words on its home node. Members of the
//! finest level are participants: their words are on their own node and the participant
//! resets and reads them with CPU operations, as in D-MCS. Members of the other levels are
//! elements: their words are on the node of the element's first participant and are used,
//! over time, by whichever participant holds the element's lock, so every participant
//! reaches them with remote operations (gets and inline puts; loopback when local). The
//! participant that leaves for an element may not be the one that entered it: it finds
//! the element's ticket and snapshot in TICKET (Lemma 6 of the ticket queue says why that
//! word is in memory by then).

use super::RmaRw;
use super::status::Status;
use crate::error::RdmaError;
use crate::ids::{Loc, WorkId};
use crate::op::Reply;
use crate::shared::Shared;
use crate::sync::fetch::ReadWords;
use crate::sync::ticket_queue::{Enter, Entered, Leave};
use crate::sync::{Routine, Yield};

/// How an enqueue ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Queued {
    /// There was no predecessor: the member heads the queue and must acquire the level
    /// above (or, at the root, the readers' side).
    First,
    /// The predecessor wrote this status (never WAITING).
    Signal(Status),
}

/// Participant `slot` enqueues the member it acts for at `level` into that level's DQ of
/// its element, and waits for its predecessor's signal (the ticket queue's enter, with
/// STATUS decoded).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Enqueue {
    enter: Enter,
}

impl Enqueue {
    pub(super) fn new(lock: &Shared<RmaRw>, slot: usize, level: usize, work_id: WorkId) -> Enqueue {
        assert!(
            level < lock.levels(),
            "rma-rw: level {level} out of the tree"
        );
        let enter = Enter::new(
            lock.queue_of(level, slot),
            rank(lock, slot, level),
            lock.scratch[slot][0],
            work_id,
        );
        Enqueue { enter }
    }

    /// Whether the member is in the queue (its FAA on TAIL has completed).
    pub(super) fn queued(&self) -> bool {
        self.enter.queued()
    }
}

impl Routine for Enqueue {
    type Output = Queued;

    fn resume(&mut self, reply: Reply) -> Result<Yield<Queued>, RdmaError> {
        Ok(match self.enter.resume(reply)? {
            Yield::Op(op) => Yield::Op(op),
            Yield::Done(Entered::Open) => Yield::Done(Queued::First),
            Yield::Done(Entered::Signal(word)) => Yield::Done(Queued::Signal(Status::decode(word))),
        })
    }
}

/// The rank of the member participant `slot` acts for at `level`.
fn rank(lock: &RmaRw, slot: usize, level: usize) -> u64 {
    lock.unit_of(level, slot) as u64 + 1
}

/// The two scratch words of participant `slot` that reading NEXT and TICKET takes.
fn scratch_pair(lock: &RmaRw, slot: usize) -> [Loc; 2] {
    [lock.scratch[slot][0], lock.scratch[slot][1]]
}

/// Reads NEXT and TICKET of the member participant `slot` acts for at `level` (what
/// [`leave`] needs to know).
pub(super) fn read_next_and_ticket(
    lock: &Shared<RmaRw>,
    slot: usize,
    level: usize,
    work_id: WorkId,
) -> ReadWords {
    let (queue, me) = (lock.queue_of(level, slot), rank(lock, slot, level));
    Leave::read_next_and_ticket(queue, me, scratch_pair(lock, slot), work_id)
}

/// Participant `slot` ends the tenure of the member it acts for at `level`: writes
/// `signal` into the successor's STATUS (a grant passes the lock, ACQUIRE_PARENT and
/// MODE_CHANGE do not), or, if there is none, empties the queue (the ticket queue's
/// leave). `known` is NEXT (∅ if there was no successor then) and TICKET, as
/// [`read_next_and_ticket`] read them.
pub(super) fn leave(
    lock: &Shared<RmaRw>,
    slot: usize,
    level: usize,
    known: (u64, u64),
    signal: u64,
    work_id: WorkId,
) -> Leave {
    let (queue, me) = (lock.queue_of(level, slot), rank(lock, slot, level));
    Leave::new(
        queue,
        me,
        scratch_pair(lock, slot),
        work_id,
        signal,
        Some(known),
    )
}
