//! The writer's side: climbing the tree of DQs, and changing the mode of DC at the root.

use super::counter::{self, TAKE};
use super::queue::{self, Enqueue, Queued};
use super::status::{ACQUIRE_PARENT, Counts, MAX_LEVELS, MODE_CHANGE, Status};
use super::{EMPTY, RmaRw, WRITE_LOCK_WORK_ID, WRITE_UNLOCK_WORK_ID};
use crate::error::RdmaError;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;
use crate::sync::fetch::{ReadWord, ReadWords};
use crate::sync::ticket_queue::Leave;
use crate::sync::{Routine, Yield, done_of, first_op, value_of};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TakeState {
    /// Posting the FAA that takes counter `k` (all are posted, then one wait).
    Posting {
        k: usize,
    },
    Waited,
    /// Loading the old ARRIVE of counter `k`; `taken` holds the counts loaded so far.
    Loading {
        k: usize,
        taken: Vec<u64>,
    },
    /// Reading DEPART of counter `k` until it reaches `taken[k]`.
    Draining {
        k: usize,
        taken: Vec<u64>,
        read: ReadWord,
    },
}

/// Acquire the lock from the readers (the root's holder, after MODE_CHANGE or with no
/// predecessor): take every physical counter with one FAA (its phase becomes odd, WRITE;
/// the old value says how many readers arrived), then wait until that many have departed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TakeFromReaders {
    lock: Shared<RmaRw>,
    slot: usize,
    state: TakeState,
}

impl TakeFromReaders {
    fn new(lock: &Shared<RmaRw>, slot: usize) -> TakeFromReaders {
        TakeFromReaders {
            lock: lock.clone(),
            slot,
            state: TakeState::Posting { k: 0 },
        }
    }

    fn take(&self, k: usize) -> Op {
        Op::Atomic {
            local: self.lock.scratch[self.slot][k],
            remote: self.lock.counters[k].arrive,
            rmw: Rmw::Faa { add: TAKE },
            work_id: WRITE_LOCK_WORK_ID,
        }
    }

    fn drain(&self, k: usize, taken: Vec<u64>) -> Result<(TakeState, Op), RdmaError> {
        let depart = self.lock.counters[k].depart;
        let mut read = self.lock.read_word(self.slot, depart, WRITE_LOCK_WORK_ID);
        let op = first_op(&mut read)?;
        Ok((TakeState::Draining { k, taken, read }, op))
    }
}

impl Routine for TakeFromReaders {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let counters = self.lock.counters.len();
        let (state, op) = match &mut self.state {
            TakeState::Posting { k } => {
                done_of(reply)?;
                let k = *k;
                if k < counters {
                    (TakeState::Posting { k: k + 1 }, self.take(k))
                } else {
                    let wait = Op::Wait {
                        work_id: WRITE_LOCK_WORK_ID,
                    };
                    (TakeState::Waited, wait)
                }
            }
            TakeState::Waited => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: self.lock.scratch[self.slot][0],
                };
                let taken = Vec::with_capacity(counters);
                (TakeState::Loading { k: 0, taken }, load)
            }
            TakeState::Loading { k, taken } => {
                let arrive = value_of(reply)?;
                // Writers are serialised by the root DQ, and the previous one gave every
                // counter back before the root passed on: we find READ mode.
                assert!(
                    !counter::writing(arrive),
                    "rma-rw: counter {k} already in WRITE mode when taken"
                );
                let mut taken = std::mem::take(taken);
                taken.push(counter::count(arrive));
                let k = *k + 1;
                if k < counters {
                    let load = Op::Load {
                        loc: self.lock.scratch[self.slot][k],
                    };
                    (TakeState::Loading { k, taken }, load)
                } else {
                    assert_eq!(taken.len(), counters, "a count per counter");
                    self.drain(0, taken)?
                }
            }
            TakeState::Draining { k, taken, read } => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(depart) => {
                    let k = *k;
                    let taken = std::mem::take(taken);
                    if !counter::drained(depart, taken[k]) {
                        self.drain(k, taken)?
                    } else if k + 1 < counters {
                        self.drain(k + 1, taken)?
                    } else {
                        return Ok(Yield::Done(()));
                    }
                }
            },
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum GiveBackState {
    /// Posting the atomic read (FAA 0) of counter `k`'s ARRIVE.
    Reading {
        k: usize,
    },
    ReadWaited,
    /// Loading counter `k`'s ARRIVE; `deltas` holds what to add to each one so far.
    Loading {
        k: usize,
        deltas: Vec<u64>,
    },
    /// Posting the FAA that gives counter `k` back.
    Posting {
        k: usize,
        deltas: Vec<u64>,
    },
    Waited,
}

/// Pass the lock to the readers (the root's holder, at T_L,0 or with no successor): give
/// every physical counter back, READ mode with a fresh budget. The atomic read first gives
/// the exact base and phase to change (only this writer changes them now); readers that
/// arrive in between add to the count, which the change does not touch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct GiveBack {
    lock: Shared<RmaRw>,
    slot: usize,
    state: GiveBackState,
}

impl GiveBack {
    fn new(lock: &Shared<RmaRw>, slot: usize) -> GiveBack {
        GiveBack {
            lock: lock.clone(),
            slot,
            state: GiveBackState::Reading { k: 0 },
        }
    }

    fn faa(&self, k: usize, add: u64) -> Op {
        Op::Atomic {
            local: self.lock.scratch[self.slot][k],
            remote: self.lock.counters[k].arrive,
            rmw: Rmw::Faa { add },
            work_id: WRITE_UNLOCK_WORK_ID,
        }
    }
}

impl Routine for GiveBack {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let counters = self.lock.counters.len();
        let wait = Op::Wait {
            work_id: WRITE_UNLOCK_WORK_ID,
        };
        let (state, op) = match &mut self.state {
            GiveBackState::Reading { k } => {
                done_of(reply)?;
                let k = *k;
                if k < counters {
                    (GiveBackState::Reading { k: k + 1 }, self.faa(k, 0))
                } else {
                    (GiveBackState::ReadWaited, wait)
                }
            }
            GiveBackState::ReadWaited => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: self.lock.scratch[self.slot][0],
                };
                let deltas = Vec::with_capacity(counters);
                (GiveBackState::Loading { k: 0, deltas }, load)
            }
            GiveBackState::Loading { k, deltas } => {
                let arrive = value_of(reply)?;
                assert!(
                    counter::writing(arrive),
                    "rma-rw: counter {k} given back while not in WRITE mode"
                );
                let mut deltas = std::mem::take(deltas);
                deltas.push(counter::give_back(arrive));
                let k = *k + 1;
                if k < counters {
                    let load = Op::Load {
                        loc: self.lock.scratch[self.slot][k],
                    };
                    (GiveBackState::Loading { k, deltas }, load)
                } else {
                    let first = self.faa(0, deltas[0]);
                    (GiveBackState::Posting { k: 1, deltas }, first)
                }
            }
            GiveBackState::Posting { k, deltas } => {
                done_of(reply)?;
                let k = *k;
                if k < counters {
                    let add = deltas[k];
                    let deltas = std::mem::take(deltas);
                    let faa = self.faa(k, add);
                    (GiveBackState::Posting { k: k + 1, deltas }, faa)
                } else {
                    (GiveBackState::Waited, wait)
                }
            }
            GiveBackState::Waited => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum WriteLockState {
    Start,
    /// In the DQ of the current level.
    Queueing(Enqueue),
    /// At the root, acquiring the lock from the readers.
    Taking(TakeFromReaders),
    /// The held counts are being stored.
    StoringHeld,
}

/// An RMA-RW write acquire in progress.
///
/// It enters the DQ of its finest element and climbs: a grant from a predecessor ends the
/// acquire (the cohort holds every level above); ACQUIRE_PARENT or an empty queue moves it
/// one level up; at the root, MODE_CHANGE or an empty queue makes it acquire the lock from
/// the readers. The counts it holds per level are kept in a private word for the release.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteLock {
    lock: Shared<RmaRw>,
    slot: usize,
    /// The level whose DQ it is in.
    level: usize,
    state: WriteLockState,
}

impl WriteLock {
    pub(super) fn new(lock: &Shared<RmaRw>, slot: usize) -> WriteLock {
        WriteLock {
            lock: lock.clone(),
            slot,
            level: lock.levels() - 1,
            state: WriteLockState::Start,
        }
    }

    /// Whether this writer is visible to readers: it is queued in the root's DQ (its FAA
    /// on the root TAIL has completed) or already takes the counters. From then on the
    /// readers that enter before it are bounded (`paper-notes/rma-rw.md`, and the check in
    /// `velos-sim/tests/rmarw_fairness.rs`). A writer to which the lock is passed below the
    /// root is never announced: it waits only behind writers of its own cohort.
    pub fn announced(&self) -> bool {
        match &self.state {
            WriteLockState::Start => false,
            WriteLockState::Queueing(enqueue) => self.level == 0 && enqueue.queued(),
            WriteLockState::Taking(_) => true,
            WriteLockState::StoringHeld => self.level == 0,
        }
    }

    fn enqueue(&mut self, level: usize) -> Result<Yield<()>, RdmaError> {
        self.level = level;
        let mut enqueue = Enqueue::new(&self.lock, self.slot, level, WRITE_LOCK_WORK_ID);
        let op = first_op(&mut enqueue)?;
        self.state = WriteLockState::Queueing(enqueue);
        Ok(Yield::Op(op))
    }

    fn take(&mut self) -> Result<Yield<()>, RdmaError> {
        assert_eq!(
            self.level, 0,
            "rma-rw: only the root's holder takes the counters"
        );
        let mut take = TakeFromReaders::new(&self.lock, self.slot);
        let op = first_op(&mut take)?;
        self.state = WriteLockState::Taking(take);
        Ok(Yield::Op(op))
    }

    /// The lock is ours with `counts` valid up to the current level; the levels below were
    /// entered first (count 1).
    fn hold(&mut self, counts: Counts) -> Result<Yield<()>, RdmaError> {
        let levels = self.lock.levels();
        let counts = (self.level + 1..levels).fold(counts, |c, level| c.with(level, 1));
        // Postcondition: a count per level, each within its threshold.
        for level in 0..levels {
            let c = counts.get(level);
            assert!(
                c >= 1 && c <= self.lock.config.t_l[level],
                "rma-rw: count {c} at level {level} outside 1..=T_L"
            );
        }
        self.state = WriteLockState::StoringHeld;
        Ok(Yield::Op(Op::Store {
            loc: self.lock.held[self.slot],
            value: counts.word(),
        }))
    }
}

impl Routine for WriteLock {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        match &mut self.state {
            WriteLockState::Start => {
                done_of(reply)?;
                self.enqueue(self.lock.levels() - 1)
            }
            WriteLockState::Queueing(enqueue) => match enqueue.resume(reply)? {
                Yield::Op(op) => Ok(Yield::Op(op)),
                Yield::Done(Queued::First) | Yield::Done(Queued::Signal(Status::AcquireParent))
                    if self.level > 0 =>
                {
                    self.enqueue(self.level - 1)
                }
                Yield::Done(Queued::First) | Yield::Done(Queued::Signal(Status::ModeChange))
                    if self.level == 0 =>
                {
                    self.take()
                }
                Yield::Done(Queued::Signal(Status::Grant(counts))) => self.hold(counts),
                Yield::Done(other) => panic!(
                    "rma-rw: {other:?} at level {} of {}",
                    self.level,
                    self.lock.levels()
                ),
            },
            WriteLockState::Taking(take) => match take.resume(reply)? {
                Yield::Op(op) => Ok(Yield::Op(op)),
                Yield::Done(()) => self.hold(Counts::first(1)),
            },
            WriteLockState::StoringHeld => {
                done_of(reply)?;
                Ok(Yield::Done(()))
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum WriteUnlockState {
    Start,
    /// The held counts are loaded next.
    LoadingHeld,
    /// The held word is cleared (so that a release without the lock is caught).
    ClearingHeld,
    /// Reading NEXT and TICKET of the member at the current level.
    ReadingNext(ReadWords),
    /// Giving the counters back to the readers (root).
    GivingBack(GiveBack),
    /// Ending the tenure at the current level (a grant, or a signal while leaving).
    Leaving(Leave),
}

/// An RMA-RW write release in progress.
///
/// From the finest level up: if the member has a successor and the level's count is below
/// T_L,i, grant it the lock (count + 1) and stop climbing. Otherwise go up first (at the
/// root: give the counters back to the readers), and on the way back down leave each DQ,
/// telling a successor ACQUIRE_PARENT (at the root: MODE_CHANGE). A level is left only after
/// every level above it is released, because the successor that climbs uses the same
/// member's words one level up.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteUnlock {
    lock: Shared<RmaRw>,
    slot: usize,
    counts: Counts,
    level: usize,
    /// Per level: NEXT as read on the way up (∅ where there was none). An array, not a
    /// `Vec`: routine states are cloned on every step the explorer takes.
    successors: [u64; MAX_LEVELS],
    /// Per level: TICKET as read on the way up (the member's ticket and snapshot).
    tickets: [u64; MAX_LEVELS],
    state: WriteUnlockState,
}

impl WriteUnlock {
    pub(super) fn new(lock: &Shared<RmaRw>, slot: usize) -> WriteUnlock {
        let levels = lock.levels();
        WriteUnlock {
            lock: lock.clone(),
            slot,
            counts: Counts::first(levels),
            level: levels - 1,
            successors: [EMPTY; MAX_LEVELS],
            tickets: [0; MAX_LEVELS],
            state: WriteUnlockState::Start,
        }
    }

    fn read_next(&mut self, level: usize) -> Result<Yield<()>, RdmaError> {
        self.level = level;
        let mut read =
            queue::read_next_and_ticket(&self.lock, self.slot, level, WRITE_UNLOCK_WORK_ID);
        let op = first_op(&mut read)?;
        self.state = WriteUnlockState::ReadingNext(read);
        Ok(Yield::Op(op))
    }

    fn leave(&mut self, level: usize, signal: u64) -> Result<Yield<()>, RdmaError> {
        self.level = level;
        let known = (self.successors[level], self.tickets[level]);
        let mut leave = queue::leave(
            &self.lock,
            self.slot,
            level,
            known,
            signal,
            WRITE_UNLOCK_WORK_ID,
        );
        let op = first_op(&mut leave)?;
        self.state = WriteUnlockState::Leaving(leave);
        Ok(Yield::Op(op))
    }

    /// The level's tenure ended: leave the next finer level, or finish.
    fn descend(&mut self) -> Result<Yield<()>, RdmaError> {
        let finer = self.level + 1;
        if finer < self.lock.levels() {
            self.leave(finer, ACQUIRE_PARENT)
        } else {
            Ok(Yield::Done(()))
        }
    }
}

impl Routine for WriteUnlock {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        match &mut self.state {
            WriteUnlockState::Start => {
                done_of(reply)?;
                self.state = WriteUnlockState::LoadingHeld;
                Ok(Yield::Op(Op::Load {
                    loc: self.lock.held[self.slot],
                }))
            }
            WriteUnlockState::LoadingHeld => {
                self.counts = Counts::from_word(value_of(reply)?);
                // Precondition: the caller holds the write lock, so it holds counts (the
                // word is cleared below, so a second release without an acquire fails).
                assert!(
                    self.counts.get(self.lock.levels() - 1) >= 1,
                    "rma-rw: write_unlock by participant {} that does not hold the lock",
                    self.slot
                );
                self.state = WriteUnlockState::ClearingHeld;
                Ok(Yield::Op(Op::Store {
                    loc: self.lock.held[self.slot],
                    value: 0,
                }))
            }
            WriteUnlockState::ClearingHeld => {
                done_of(reply)?;
                self.read_next(self.lock.levels() - 1)
            }
            WriteUnlockState::ReadingNext(read) => match read.resume(reply)? {
                Yield::Op(op) => Ok(Yield::Op(op)),
                Yield::Done((successor, ticket)) => {
                    let level = self.level;
                    self.successors[level] = successor;
                    self.tickets[level] = ticket;
                    let count = self.counts.get(level);
                    if successor != EMPTY && count < self.lock.config.t_l[level] {
                        let grant = self.counts.with(level, count + 1).grant(level);
                        self.leave(level, grant)
                    } else if level == 0 {
                        let mut give = GiveBack::new(&self.lock, self.slot);
                        let op = first_op(&mut give)?;
                        self.state = WriteUnlockState::GivingBack(give);
                        Ok(Yield::Op(op))
                    } else {
                        self.read_next(level - 1)
                    }
                }
            },
            WriteUnlockState::GivingBack(give) => match give.resume(reply)? {
                Yield::Op(op) => Ok(Yield::Op(op)),
                Yield::Done(()) => self.leave(0, MODE_CHANGE),
            },
            WriteUnlockState::Leaving(leave) => match leave.resume(reply)? {
                Yield::Op(op) => Ok(Yield::Op(op)),
                Yield::Done(()) => self.descend(),
            },
        }
    }
}
