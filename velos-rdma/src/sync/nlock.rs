//! nlock(n): the node lock of the rdma-rmw paper (§4.4, Fig. 13), a centralised ticket
//! lock on node n. Acquire: remote FAA on the ticket word, then get the release word until
//! it equals the ticket, and keep ticket + 1 for the release. Release: a remote fence
//! towards n, then an inline put of ticket + 1 into the release word. It orders the
//! critical section's operations towards n only, and only as seen by the next acquirer.

use super::{Routine, Yield, done_of, library_work_id, value_of};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;

const ACQUIRE_WORK_ID: WorkId = library_work_id(3, 1);
const RELEASE_WORK_ID: WorkId = library_work_id(3, 2);

/// The words of one node lock.
#[derive(Debug)]
pub struct NLock {
    node: NodeId,
    ticket: Loc,
    release: Loc,
    /// Per participant: its node.
    nodes: Vec<NodeId>,
    /// Per participant: where remote results land, on its node.
    scratch: Vec<Loc>,
    /// Per participant: the ticket to hand on at release, on its node.
    next: Vec<Loc>,
}

impl NLock {
    /// Allocates a node lock on `node` for participants on `nodes`.
    pub fn new(layout: &mut LayoutBuilder, node: NodeId, nodes: &[NodeId]) -> Shared<NLock> {
        assert!(!nodes.is_empty(), "a lock has participants");
        Shared::new(NLock {
            node,
            ticket: layout.alloc(node),
            release: layout.alloc(node),
            nodes: nodes.to_vec(),
            scratch: nodes.iter().map(|&n| layout.alloc(n)).collect(),
            next: nodes.iter().map(|&n| layout.alloc(n)).collect(),
        })
    }

    /// The node the lock lives on and protects.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The words only participant `slot` ever touches (its result and next-ticket words).
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        vec![self.scratch[slot], self.next[slot]]
    }

    /// Number of participants.
    pub fn participants(&self) -> usize {
        self.nodes.len()
    }
}

/// Participant `slot` acquires `lock`.
pub fn acquire(lock: &Shared<NLock>, slot: usize) -> Acquire {
    assert!(
        slot < lock.participants(),
        "nlock: unknown participant {slot}"
    );
    Acquire {
        lock: lock.clone(),
        slot,
        state: AcquireState::Start,
    }
}

/// Participant `slot` releases `lock` (it must hold it).
pub fn release(lock: &Shared<NLock>, slot: usize) -> Release {
    assert!(
        slot < lock.participants(),
        "nlock: unknown participant {slot}"
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
    Fetched,
    Waited,
    LoadingTicket,
    /// The ticket is known; a get of the release word was posted.
    Polling {
        ticket: u64,
    },
    PollWaited {
        ticket: u64,
    },
    Checking {
        ticket: u64,
    },
    Stored,
}

/// A node-lock acquire in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire {
    lock: Shared<NLock>,
    slot: usize,
    state: AcquireState,
}

impl Acquire {
    fn get_release(&self) -> Op {
        Op::Get {
            local: self.lock.scratch[self.slot],
            remote: self.lock.release,
            work_id: ACQUIRE_WORK_ID,
        }
    }
}

impl Routine for Acquire {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let scratch = self.lock.scratch[self.slot];
        let wait = Op::Wait {
            work_id: ACQUIRE_WORK_ID,
        };
        let (state, op) = match self.state {
            AcquireState::Start => {
                done_of(reply)?;
                let faa = Op::Atomic {
                    local: scratch,
                    remote: self.lock.ticket,
                    rmw: Rmw::Faa { add: 1 },
                    work_id: ACQUIRE_WORK_ID,
                };
                (AcquireState::Fetched, faa)
            }
            AcquireState::Fetched => {
                done_of(reply)?;
                (AcquireState::Waited, wait)
            }
            AcquireState::Waited => {
                done_of(reply)?;
                (AcquireState::LoadingTicket, Op::Load { loc: scratch })
            }
            AcquireState::LoadingTicket => {
                let ticket = value_of(reply)?;
                (AcquireState::Polling { ticket }, self.get_release())
            }
            AcquireState::Checking { ticket } => {
                if value_of(reply)? == ticket {
                    let store = Op::Store {
                        loc: self.lock.next[self.slot],
                        value: ticket.wrapping_add(1),
                    };
                    (AcquireState::Stored, store)
                } else {
                    (AcquireState::Polling { ticket }, self.get_release())
                }
            }
            AcquireState::Polling { ticket } => {
                done_of(reply)?;
                (AcquireState::PollWaited { ticket }, wait)
            }
            AcquireState::PollWaited { ticket } => {
                done_of(reply)?;
                (AcquireState::Checking { ticket }, Op::Load { loc: scratch })
            }
            AcquireState::Stored => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ReleaseState {
    Start,
    Loaded,
    Fenced { next: u64 },
    Posted,
}

/// A node-lock release in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    lock: Shared<NLock>,
    slot: usize,
    state: ReleaseState,
}

impl Routine for Release {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let (state, op) = match self.state {
            ReleaseState::Start => {
                done_of(reply)?;
                (
                    ReleaseState::Loaded,
                    Op::Load {
                        loc: self.lock.next[self.slot],
                    },
                )
            }
            ReleaseState::Loaded => {
                let next = value_of(reply)?;
                (
                    ReleaseState::Fenced { next },
                    Op::Rfence {
                        node: self.lock.node,
                    },
                )
            }
            ReleaseState::Fenced { next } => {
                done_of(reply)?;
                let put = Op::PutInline {
                    remote: self.lock.release,
                    value: next,
                    work_id: RELEASE_WORK_ID,
                };
                (ReleaseState::Posted, put)
            }
            ReleaseState::Posted => {
                done_of(reply)?;
                return Ok(Yield::Done(()));
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}
