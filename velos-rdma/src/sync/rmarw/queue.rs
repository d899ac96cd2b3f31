//! The distributed queues DQ: the D-MCS queue of one element of one level, as routines
//! that the writer's acquire and release combine.
//!
//! A queue member has a NEXT and a STATUS word on its home node. Members of the finest
//! level are participants: their words are on their own node and the participant resets
//! and reads them with CPU operations, as in D-MCS. Members of the other levels are
//! elements: their words are on the node of the element's first participant and are used,
//! over time, by whichever participant holds the element's lock, so every participant
//! reaches them with remote operations (gets and inline puts; loopback when local).

use super::status::{Status, WAITING};
use super::{EMPTY, RmaRw};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;
use crate::sync::{Routine, Yield, done_of, value_of};

/// How the participant that acts for a queue member reaches its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Access {
    /// CPU loads and stores: the member is the participant itself, on its own node.
    Cpu,
    /// Gets and inline puts: the member is an element, acted for by changing participants.
    Nic,
}

/// NEXT and STATUS of one queue member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct UnitWords {
    pub(super) next: Loc,
    pub(super) status: Loc,
    pub(super) home: NodeId,
    pub(super) access: Access,
}

impl UnitWords {
    pub(super) fn new(layout: &mut LayoutBuilder, home: NodeId, access: Access) -> UnitWords {
        UnitWords {
            next: layout.alloc(home),
            status: layout.alloc(home),
            home,
            access,
        }
    }
}

/// Starts `routine`: its first step.
pub(super) fn start<R: Routine>(routine: &mut R) -> Result<Yield<R::Output>, RdmaError> {
    routine.resume(Reply::Start)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ReadState {
    Start,
    Posted,
    Waited,
    Loading,
}

/// Reads one word: a CPU load, or a get into a scratch word, its wait, and a load.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ReadWord {
    loc: Loc,
    access: Access,
    scratch: Loc,
    work_id: WorkId,
    state: ReadState,
}

impl ReadWord {
    pub(super) fn new(loc: Loc, access: Access, scratch: Loc, work_id: WorkId) -> ReadWord {
        ReadWord {
            loc,
            access,
            scratch,
            work_id,
            state: ReadState::Start,
        }
    }
}

impl Routine for ReadWord {
    type Output = u64;

    fn resume(&mut self, reply: Reply) -> Result<Yield<u64>, RdmaError> {
        let (state, op) = match self.state {
            ReadState::Start => {
                done_of(reply)?;
                match self.access {
                    Access::Cpu => (ReadState::Loading, Op::Load { loc: self.loc }),
                    Access::Nic => {
                        let get = Op::Get {
                            local: self.scratch,
                            remote: self.loc,
                            work_id: self.work_id,
                        };
                        (ReadState::Posted, get)
                    }
                }
            }
            ReadState::Posted => {
                done_of(reply)?;
                let wait = Op::Wait {
                    work_id: self.work_id,
                };
                (ReadState::Waited, wait)
            }
            ReadState::Waited => {
                done_of(reply)?;
                (ReadState::Loading, Op::Load { loc: self.scratch })
            }
            ReadState::Loading => return Ok(Yield::Done(value_of(reply)?)),
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

/// How an enqueue ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Queued {
    /// There was no predecessor: the member heads the queue and must acquire the level
    /// above (or, at the root, the readers' side).
    First,
    /// The predecessor wrote this status (never WAITING).
    Signal(Status),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum EnqueueState {
    Start,
    /// NEXT := ∅ was issued.
    NextReset,
    /// STATUS := WAITING was issued.
    StatusReset,
    /// (Remote members) the resets are in memory.
    Fenced,
    /// A CAS of TAIL from `expected` to the member's rank was posted.
    Swapping {
        expected: u64,
    },
    SwapWaited {
        expected: u64,
    },
    SwapLoaded {
        expected: u64,
    },
    /// The rank was put into the predecessor's NEXT.
    Linking,
    Linked,
    /// Reading STATUS until it is not WAITING.
    Spinning(ReadWord),
}

/// Participant `slot` enqueues the member it acts for at `level` into that level's DQ of
/// its element, and waits for its predecessor's signal (D-MCS acquire, extended).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Enqueue {
    lock: Shared<RmaRw>,
    slot: usize,
    level: usize,
    work_id: WorkId,
    state: EnqueueState,
}

impl Enqueue {
    pub(super) fn new(lock: &Shared<RmaRw>, slot: usize, level: usize, work_id: WorkId) -> Enqueue {
        assert!(
            level < lock.levels(),
            "rma-rw: level {level} out of the tree"
        );
        Enqueue {
            lock: lock.clone(),
            slot,
            level,
            work_id,
            state: EnqueueState::Start,
        }
    }

    /// Whether the member is in the queue (its swap of TAIL has taken effect).
    pub(super) fn queued(&self) -> bool {
        matches!(
            self.state,
            EnqueueState::Linking | EnqueueState::Linked | EnqueueState::Spinning(_)
        )
    }

    fn unit(&self) -> UnitWords {
        self.lock
            .unit(self.level, self.lock.unit_of(self.level, self.slot))
    }

    fn rank(&self) -> u64 {
        self.lock.unit_of(self.level, self.slot) as u64 + 1
    }

    fn scratch(&self) -> Loc {
        self.lock.scratch[self.slot][0]
    }

    /// One attempt of the swap of TAIL: a CAS from the predicted value. The model has no
    /// swap; under heavy contention a predicted CAS can keep losing (D-MCS moved to an FAA
    /// ticket for that reason, see [`crate::sync::dmcs`]); these queues still use it.
    fn swap(&self, expected: u64) -> Op {
        Op::Atomic {
            local: self.scratch(),
            remote: self.lock.tail_of(self.level, self.slot),
            rmw: Rmw::Cas {
                expected,
                new: self.rank(),
            },
            work_id: self.work_id,
        }
    }

    fn write(&self, loc: Loc, value: u64) -> Op {
        match self.unit().access {
            Access::Cpu => Op::Store { loc, value },
            Access::Nic => Op::PutInline {
                remote: loc,
                value,
                work_id: self.work_id,
            },
        }
    }
}

impl Routine for Enqueue {
    type Output = Queued;

    fn resume(&mut self, reply: Reply) -> Result<Yield<Queued>, RdmaError> {
        let unit = self.unit();
        let scratch = self.scratch();
        let me = self.rank();
        let wait = Op::Wait {
            work_id: self.work_id,
        };
        let (state, op) = match &mut self.state {
            EnqueueState::Start => {
                done_of(reply)?;
                // Reset before the swap makes us visible: a successor links into NEXT and
                // the predecessor signals into STATUS only after it.
                (EnqueueState::NextReset, self.write(unit.next, EMPTY))
            }
            EnqueueState::NextReset => {
                done_of(reply)?;
                (EnqueueState::StatusReset, self.write(unit.status, WAITING))
            }
            EnqueueState::StatusReset => {
                done_of(reply)?;
                match unit.access {
                    // CPU stores reach memory before the later atomic leaves the store
                    // buffer: nothing more is needed.
                    Access::Cpu => (EnqueueState::Swapping { expected: EMPTY }, self.swap(EMPTY)),
                    // Puts are acknowledged before they land, and the swap goes to another
                    // queue pair: fence until they are in memory.
                    Access::Nic => (EnqueueState::Fenced, Op::GlobalFence { node: unit.home }),
                }
            }
            EnqueueState::Fenced => {
                done_of(reply)?;
                (EnqueueState::Swapping { expected: EMPTY }, self.swap(EMPTY))
            }
            EnqueueState::Swapping { expected } => {
                done_of(reply)?;
                (
                    EnqueueState::SwapWaited {
                        expected: *expected,
                    },
                    wait,
                )
            }
            EnqueueState::SwapWaited { expected } => {
                done_of(reply)?;
                let load = Op::Load { loc: scratch };
                (
                    EnqueueState::SwapLoaded {
                        expected: *expected,
                    },
                    load,
                )
            }
            EnqueueState::SwapLoaded { expected } => {
                let old = value_of(reply)?;
                assert_ne!(
                    old, me,
                    "rma-rw: a member is queued twice at level {}",
                    self.level
                );
                let expected = *expected;
                if old != expected {
                    (EnqueueState::Swapping { expected: old }, self.swap(old))
                } else if old == EMPTY {
                    return Ok(Yield::Done(Queued::First));
                } else {
                    let pred = self.lock.unit_of_rank(self.level, old);
                    let link = Op::PutInline {
                        remote: self.lock.unit(self.level, pred).next,
                        value: me,
                        work_id: self.work_id,
                    };
                    (EnqueueState::Linking, link)
                }
            }
            EnqueueState::Linking => {
                done_of(reply)?;
                (EnqueueState::Linked, wait)
            }
            EnqueueState::Linked => {
                done_of(reply)?;
                let mut read = ReadWord::new(unit.status, unit.access, scratch, self.work_id);
                let Yield::Op(op) = start(&mut read)? else {
                    unreachable!("a read issues an operation")
                };
                (EnqueueState::Spinning(read), op)
            }
            EnqueueState::Spinning(read) => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(word) => match Status::decode(word) {
                    Status::Waiting => {
                        let mut again =
                            ReadWord::new(unit.status, unit.access, scratch, self.work_id);
                        let Yield::Op(op) = start(&mut again)? else {
                            unreachable!("a read issues an operation")
                        };
                        (EnqueueState::Spinning(again), op)
                    }
                    signal => return Ok(Yield::Done(Queued::Signal(signal))),
                },
            },
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum LeaveState {
    Start,
    /// A CAS of TAIL from the member's rank to ∅ was posted.
    Cas,
    CasWaited,
    CasLoaded,
    /// Someone swapped TAIL after us: reading NEXT until it links itself.
    AwaitingSuccessor(ReadWord),
    /// The signal was put into the successor's STATUS.
    Signalling,
    Signalled,
}

/// Participant `slot` ends the tenure of the member it acts for at `level`: writes
/// `signal` into the successor's STATUS (a grant passes the lock, ACQUIRE_PARENT and
/// MODE_CHANGE do not), or, if there is none, empties the queue (D-MCS release, extended).
/// `successor` is NEXT as read before (∅ if there was none then).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Leave {
    lock: Shared<RmaRw>,
    slot: usize,
    level: usize,
    successor: u64,
    signal: u64,
    work_id: WorkId,
    state: LeaveState,
}

impl Leave {
    pub(super) fn new(
        lock: &Shared<RmaRw>,
        slot: usize,
        level: usize,
        successor: u64,
        signal: u64,
        work_id: WorkId,
    ) -> Leave {
        assert_ne!(signal, WAITING, "rma-rw: a member leaves with a signal");
        Leave {
            lock: lock.clone(),
            slot,
            level,
            successor,
            signal,
            work_id,
            state: LeaveState::Start,
        }
    }

    fn me(&self) -> u64 {
        self.lock.unit_of(self.level, self.slot) as u64 + 1
    }

    fn signal(&self, successor: u64) -> Op {
        assert_ne!(
            successor,
            self.me(),
            "rma-rw: a member is not its own successor"
        );
        let succ = self.lock.unit_of_rank(self.level, successor);
        Op::PutInline {
            remote: self.lock.unit(self.level, succ).status,
            value: self.signal,
            work_id: self.work_id,
        }
    }

    fn read_next(&self) -> ReadWord {
        let unit = self
            .lock
            .unit(self.level, self.lock.unit_of(self.level, self.slot));
        ReadWord::new(
            unit.next,
            unit.access,
            self.lock.scratch[self.slot][0],
            self.work_id,
        )
    }
}

impl Routine for Leave {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let wait = Op::Wait {
            work_id: self.work_id,
        };
        let (state, op) = match &mut self.state {
            LeaveState::Start => {
                done_of(reply)?;
                if self.successor != EMPTY {
                    (LeaveState::Signalling, self.signal(self.successor))
                } else {
                    let cas = Op::Atomic {
                        local: self.lock.scratch[self.slot][0],
                        remote: self.lock.tail_of(self.level, self.slot),
                        rmw: Rmw::Cas {
                            expected: self.me(),
                            new: EMPTY,
                        },
                        work_id: self.work_id,
                    };
                    (LeaveState::Cas, cas)
                }
            }
            LeaveState::Cas => {
                done_of(reply)?;
                (LeaveState::CasWaited, wait)
            }
            LeaveState::CasWaited => {
                done_of(reply)?;
                let load = Op::Load {
                    loc: self.lock.scratch[self.slot][0],
                };
                (LeaveState::CasLoaded, load)
            }
            LeaveState::CasLoaded => {
                let tail = value_of(reply)?;
                // Lemma (MCS): while a member is queued, TAIL is not ∅.
                assert_ne!(tail, EMPTY, "rma-rw: TAIL is ∅ while a member is queued");
                if tail == self.me() {
                    return Ok(Yield::Done(()));
                }
                let mut read = self.read_next();
                let Yield::Op(op) = start(&mut read)? else {
                    unreachable!("a read issues an operation")
                };
                (LeaveState::AwaitingSuccessor(read), op)
            }
            LeaveState::AwaitingSuccessor(read) => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(EMPTY) => {
                    let mut again = self.read_next();
                    let Yield::Op(op) = start(&mut again)? else {
                        unreachable!("a read issues an operation")
                    };
                    (LeaveState::AwaitingSuccessor(again), op)
                }
                Yield::Done(successor) => {
                    self.successor = successor;
                    (LeaveState::Signalling, self.signal(successor))
                }
            },
            LeaveState::Signalling => {
                done_of(reply)?;
                (LeaveState::Signalled, wait)
            }
            LeaveState::Signalled => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}
