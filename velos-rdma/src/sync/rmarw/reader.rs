//! The reader's side: arriving at and departing from the physical counter c(p).

use super::counter::{self, COUNT_ONE};
use super::{Counter, READ_LOCK_WORK_ID, READ_UNLOCK_WORK_ID, RmaRw};
use crate::error::RdmaError;
use crate::ids::Loc;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;
use crate::sync::fetch::ReadWord;
use crate::sync::{FetchAtomic, Routine, Yield, done_of, first_op};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ReadLockState {
    Start,
    /// The FAA of ARRIVE, its wait and the load of the old value.
    Arriving(FetchAtomic),
    /// Over the budget in READ mode (ARRIVE was `expect`, phase `phase`): the atomic read
    /// of the root's TAIL.
    CheckingRoot {
        phase: u64,
        expect: u64,
        fetch: FetchAtomic,
    },
    /// A writer is queued at the root: reading ARRIVE to see whether it took the counter.
    AwaitingTake {
        phase: u64,
        read: ReadWord,
    },
    /// No writer at the root: the CAS that resets the budget was posted.
    Resetting,
    ResetWaited,
    /// Arrived in WRITE mode: reading ARRIVE until its phase differs from `phase`.
    AwaitingGiveBack {
        phase: u64,
        read: ReadWord,
    },
}

/// An RMA-RW read acquire in progress.
///
/// It arrives at its physical counter with one FAA. In WRITE mode it waits until the
/// phase changes (the writers gave the counter back; it is counted, so the next writer
/// waits for it). In READ mode it enters, unless T_R readers were already admitted at the
/// counter since the last budget reset and a writer is queued at the root: then it waits
/// until that writer takes the counter, and enters while the writer waits for it to leave
/// (a reader counted in READ mode may always enter: every later writer waits for it; it
/// waits only to let the writer go first). Once no writer is queued at the root, it resets
/// the budget (one CAS attempt: a failure means a later arrival or a writer, each of which
/// resets it in turn) and enters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadLock {
    lock: Shared<RmaRw>,
    slot: usize,
    /// The arrival has taken effect.
    announced: bool,
    state: ReadLockState,
}

impl ReadLock {
    pub(super) fn new(lock: &Shared<RmaRw>, slot: usize) -> ReadLock {
        ReadLock {
            lock: lock.clone(),
            slot,
            announced: false,
            state: ReadLockState::Start,
        }
    }

    /// Whether this reader is counted at its physical counter: its arrival (the first
    /// remote operation of the acquire) has completed. From then on at most T_W writers
    /// enter before it (the bound `velos-sim/tests/rmarw_fairness.rs` checks).
    pub fn announced(&self) -> bool {
        match &self.state {
            ReadLockState::Arriving(fetch) => fetch.completed(),
            _ => self.announced,
        }
    }

    fn counter(&self) -> Counter {
        self.lock.counter_of(self.slot)
    }

    fn scratch(&self) -> Loc {
        self.lock.scratch[self.slot][0]
    }

    /// Reads ARRIVE: with CPU loads when the counter is on our node, with gets otherwise.
    fn read_arrive(&self) -> Result<(ReadWord, Op), RdmaError> {
        let arrive = self.counter().arrive;
        let mut read = self.lock.read_word(self.slot, arrive, READ_LOCK_WORK_ID);
        let op = first_op(&mut read)?;
        Ok((read, op))
    }

    /// The atomic read of the root's TAIL: atomic, so that it is ordered after a writer's
    /// FAA that has completed (a get could still read the value before it).
    fn check_root(&self, phase: u64, expect: u64) -> Result<(ReadLockState, Op), RdmaError> {
        let tail = self.lock.root_queue().tail();
        let read = Rmw::Faa { add: 0 };
        let mut fetch = FetchAtomic::new(self.scratch(), tail, read, READ_LOCK_WORK_ID);
        let op = first_op(&mut fetch)?;
        let state = ReadLockState::CheckingRoot {
            phase,
            expect,
            fetch,
        };
        Ok((state, op))
    }
}

impl Routine for ReadLock {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let wait = Op::Wait {
            work_id: READ_LOCK_WORK_ID,
        };
        let (state, op) = match &mut self.state {
            ReadLockState::Start => {
                done_of(reply)?;
                assert!(!self.announced, "rma-rw: a read acquire starts uncounted");
                let arrive = self.counter().arrive;
                let faa = Rmw::Faa { add: COUNT_ONE };
                let mut fetch = FetchAtomic::new(self.scratch(), arrive, faa, READ_LOCK_WORK_ID);
                let op = first_op(&mut fetch)?;
                (ReadLockState::Arriving(fetch), op)
            }
            ReadLockState::Arriving(fetch) => {
                let arrive = match fetch.resume(reply)? {
                    Yield::Op(op) => return Ok(Yield::Op(op)),
                    Yield::Done(arrive) => arrive,
                };
                self.announced = true;
                let phase = counter::phase(arrive);
                if counter::writing(arrive) {
                    let (read, op) = self.read_arrive()?;
                    (ReadLockState::AwaitingGiveBack { phase, read }, op)
                } else if counter::budget_index(arrive) < self.lock.config.t_r {
                    return Ok(Yield::Done(()));
                } else {
                    self.check_root(phase, arrive.wrapping_add(COUNT_ONE))?
                }
            }
            ReadLockState::CheckingRoot {
                phase,
                expect,
                fetch,
            } => {
                let tail = match fetch.resume(reply)? {
                    Yield::Op(op) => return Ok(Yield::Op(op)),
                    Yield::Done(tail) => tail,
                };
                let (phase, expect) = (*phase, *expect);
                if !self.lock.root_queue().is_empty(tail) {
                    // A writer is queued at the root: let it take the counter first.
                    let (read, op) = self.read_arrive()?;
                    (ReadLockState::AwaitingTake { phase, read }, op)
                } else {
                    let reset = Op::Atomic {
                        local: self.scratch(),
                        remote: self.counter().arrive,
                        rmw: Rmw::Cas {
                            expected: expect,
                            new: counter::reset(expect),
                        },
                        work_id: READ_LOCK_WORK_ID,
                    };
                    (ReadLockState::Resetting, reset)
                }
            }
            ReadLockState::AwaitingTake { phase, read } => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(arrive) if counter::phase(arrive) != *phase => {
                    return Ok(Yield::Done(()));
                }
                // Not taken yet: look at the root again (the writer may have left it
                // without taking the counter, if it was leaving when we looked).
                Yield::Done(arrive) => {
                    let phase = *phase;
                    self.check_root(phase, arrive)?
                }
            },
            ReadLockState::Resetting => {
                done_of(reply)?;
                (ReadLockState::ResetWaited, wait)
            }
            ReadLockState::ResetWaited => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
            ReadLockState::AwaitingGiveBack { phase, read } => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(arrive) if counter::phase(arrive) != *phase => {
                    return Ok(Yield::Done(()));
                }
                Yield::Done(_) => {
                    let phase = *phase;
                    let (read, op) = self.read_arrive()?;
                    (ReadLockState::AwaitingGiveBack { phase, read }, op)
                }
            },
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ReadUnlockState {
    Start,
    Departing,
    Departed,
}

/// An RMA-RW read release in progress: one FAA of DEPART, and its wait.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadUnlock {
    lock: Shared<RmaRw>,
    slot: usize,
    state: ReadUnlockState,
}

impl ReadUnlock {
    pub(super) fn new(lock: &Shared<RmaRw>, slot: usize) -> ReadUnlock {
        ReadUnlock {
            lock: lock.clone(),
            slot,
            state: ReadUnlockState::Start,
        }
    }
}

impl Routine for ReadUnlock {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let (state, op) = match self.state {
            ReadUnlockState::Start => {
                done_of(reply)?;
                let depart = Op::Atomic {
                    local: self.lock.scratch[self.slot][0],
                    remote: self.lock.counter_of(self.slot).depart,
                    rmw: Rmw::Faa { add: 1 },
                    work_id: READ_UNLOCK_WORK_ID,
                };
                (ReadUnlockState::Departing, depart)
            }
            ReadUnlockState::Departing => {
                done_of(reply)?;
                let wait = Op::Wait {
                    work_id: READ_UNLOCK_WORK_ID,
                };
                (ReadUnlockState::Departed, wait)
            }
            ReadUnlockState::Departed => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}
