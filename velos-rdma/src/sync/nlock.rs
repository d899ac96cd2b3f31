//! nlock(n): the node lock of the rdma-rmw paper (§4.4, Fig. 13), a centralised ticket
//! lock on node n. Acquire: remote FAA on the ticket word, then get the release word until
//! it equals the ticket, and keep ticket + 1 for the release. Release: a remote fence
//! towards n, then an inline put of ticket + 1 into the release word. It orders the
//! critical section's operations towards n only, and only as seen by the next acquirer.

use super::fetch::{Access, ReadWord};
use super::{FetchAtomic, Routine, Yield, done_of, first_op, library_work_id, value_of};
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
    /// Drawing a ticket: the FAA on the ticket word, its wait, the load.
    Drawing(FetchAtomic),
    /// The ticket is known; reading the release word (get, wait, load) until it equals it.
    Polling {
        ticket: u64,
        read: ReadWord,
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
    /// Starts a read of the release word (a get into scratch, its wait, a load).
    fn poll(&self, ticket: u64) -> Result<(AcquireState, Op), RdmaError> {
        let scratch = self.lock.scratch[self.slot];
        let mut read = ReadWord::new(self.lock.release, Access::Nic, scratch, ACQUIRE_WORK_ID);
        let op = first_op(&mut read)?;
        Ok((AcquireState::Polling { ticket, read }, op))
    }
}

impl Routine for Acquire {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let scratch = self.lock.scratch[self.slot];
        let (state, op) = match self.state {
            AcquireState::Start => {
                done_of(reply)?;
                let faa = Rmw::Faa { add: 1 };
                let mut draw = FetchAtomic::new(scratch, self.lock.ticket, faa, ACQUIRE_WORK_ID);
                let op = first_op(&mut draw)?;
                (AcquireState::Drawing(draw), op)
            }
            AcquireState::Drawing(ref mut draw) => match draw.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(ticket) => self.poll(ticket)?,
            },
            AcquireState::Polling {
                ticket,
                ref mut read,
            } => match read.resume(reply)? {
                Yield::Op(op) => return Ok(Yield::Op(op)),
                Yield::Done(released) if released == ticket => {
                    let store = Op::Store {
                        loc: self.lock.next[self.slot],
                        value: ticket.wrapping_add(1),
                    };
                    (AcquireState::Stored, store)
                }
                Yield::Done(_) => self.poll(ticket)?,
            },
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
