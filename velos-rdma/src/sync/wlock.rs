//! wlock: the weak lock of the rdma-rmw paper (§4.2, Fig. 10), a ticket lock over sv.
//!
//! A ticket dispenser on one node; per participant a turn word on its node and a release
//! shared variable. Acquire: remote FAA on the dispenser (the ticket), then scan the local
//! copies of every participant's release variable until one equals the ticket. Release:
//! store ticket + 1 in the own release variable and broadcast it to every other node.
//! Mutual exclusion only: the critical section's remote operations may complete after the
//! release (add a global fence, or use [`super::slock`]).

use super::sv::{Bcast, SharedVar};
use super::{FetchAtomic, Routine, Yield, done_of, first_op, library_work_id, value_of};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;

const ACQUIRE_WORK_ID: WorkId = library_work_id(2, 1);
const RELEASE_WORK_ID: WorkId = library_work_id(2, 2);

/// The words of one weak lock.
#[derive(Debug)]
pub struct WLock {
    dispenser: Loc,
    /// Per participant: its node.
    nodes: Vec<NodeId>,
    /// Per participant: the word holding its ticket, on its node.
    turn: Vec<Loc>,
    /// Per participant: its release variable.
    release: Vec<SharedVar>,
    /// Every node of the fabric.
    node_count: u16,
}

impl WLock {
    /// Allocates a weak lock whose dispenser lives on `home`, for participants on `nodes`
    /// (participant i runs on `nodes[i]`).
    pub fn new(layout: &mut LayoutBuilder, home: NodeId, nodes: &[NodeId]) -> Shared<WLock> {
        assert!(!nodes.is_empty(), "a lock has participants");
        let dispenser = layout.alloc(home);
        let turn = nodes.iter().map(|&n| layout.alloc(n)).collect();
        let release = nodes.iter().map(|_| SharedVar::new(layout)).collect();
        Shared::new(WLock {
            dispenser,
            nodes: nodes.to_vec(),
            turn,
            release,
            node_count: layout.nodes(),
        })
    }

    /// Number of participants.
    pub fn participants(&self) -> usize {
        self.nodes.len()
    }

    /// The words only participant `slot` ever touches (its turn word): no other thread
    /// reads or writes them, which the explorer's reduction relies on.
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        vec![self.turn[slot]]
    }

    /// The node of participant `slot`.
    pub fn node_of(&self, slot: usize) -> NodeId {
        self.nodes[slot]
    }
}

/// Participant `slot` acquires `lock`.
pub fn acquire(lock: &Shared<WLock>, slot: usize) -> Acquire {
    assert!(
        slot < lock.participants(),
        "wlock: unknown participant {slot}"
    );
    Acquire {
        lock: lock.clone(),
        slot,
        state: AcquireState::Start,
    }
}

/// Participant `slot` releases `lock` (it must hold it).
pub fn release(lock: &Shared<WLock>, slot: usize) -> Release {
    assert!(
        slot < lock.participants(),
        "wlock: unknown participant {slot}"
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
    /// Drawing a ticket: the FAA on the dispenser, its wait, the load.
    Drawing(FetchAtomic),
    /// Loading participant `checking`'s release copy, waiting for it to equal `ticket`.
    Scanning {
        ticket: u64,
        checking: usize,
    },
}

/// A weak-lock acquire in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acquire {
    lock: Shared<WLock>,
    slot: usize,
    state: AcquireState,
}

impl Routine for Acquire {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let lock = &self.lock;
        let me = lock.nodes[self.slot];
        let (state, step) = match &mut self.state {
            AcquireState::Start => {
                done_of(reply)?;
                let faa = Rmw::Faa { add: 1 };
                let turn = lock.turn[self.slot];
                let mut draw = FetchAtomic::new(turn, lock.dispenser, faa, ACQUIRE_WORK_ID);
                let op = first_op(&mut draw)?;
                (AcquireState::Drawing(draw), Yield::Op(op))
            }
            AcquireState::Drawing(draw) => {
                let ticket = match draw.resume(reply)? {
                    Yield::Op(op) => return Ok(Yield::Op(op)),
                    Yield::Done(ticket) => ticket,
                };
                let load = Op::Load {
                    loc: lock.release[0].copy(me),
                };
                (
                    AcquireState::Scanning {
                        ticket,
                        checking: 0,
                    },
                    Yield::Op(load),
                )
            }
            AcquireState::Scanning { ticket, checking } => {
                let (ticket, checking) = (*ticket, *checking);
                if value_of(reply)? == ticket {
                    return Ok(Yield::Done(()));
                }
                let next = (checking + 1) % lock.participants();
                let load = Op::Load {
                    loc: lock.release[next].copy(me),
                };
                (
                    AcquireState::Scanning {
                        ticket,
                        checking: next,
                    },
                    Yield::Op(load),
                )
            }
        };
        self.state = state;
        Ok(step)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ReleaseState {
    Start,
    Loaded,
    Stored,
    Broadcasting(Bcast),
}

/// A weak-lock release in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    lock: Shared<WLock>,
    slot: usize,
    state: ReleaseState,
}

impl Routine for Release {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        let lock = &self.lock;
        let me = lock.nodes[self.slot];
        match &mut self.state {
            ReleaseState::Start => {
                done_of(reply)?;
                self.state = ReleaseState::Loaded;
                Ok(Yield::Op(Op::Load {
                    loc: lock.turn[self.slot],
                }))
            }
            ReleaseState::Loaded => {
                let ticket = value_of(reply)?;
                self.state = ReleaseState::Stored;
                Ok(Yield::Op(Op::Store {
                    loc: lock.release[self.slot].copy(me),
                    value: ticket.wrapping_add(1),
                }))
            }
            ReleaseState::Stored => {
                done_of(reply)?;
                let others: Vec<NodeId> = (0..lock.node_count)
                    .map(NodeId)
                    .filter(|&n| n != me)
                    .collect();
                let mut bcast = lock.release[self.slot].bcast(me, &others, RELEASE_WORK_ID);
                let first = bcast.resume(Reply::Start)?;
                self.state = ReleaseState::Broadcasting(bcast);
                Ok(first)
            }
            ReleaseState::Broadcasting(bcast) => bcast.resume(reply),
        }
    }
}
