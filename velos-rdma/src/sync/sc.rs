//! The SC library of the rdma-rmw paper (§5, Fig. 14): every location has a home node and a
//! node lock there; write = acquire; inline put; release (no wait); read, CAS and FAA =
//! acquire; get or remote RMW; release; wait; load the result. Sequentially consistent for
//! its own locations, strongly isolated RMWs included.

use super::nlock::{self, NLock};
use super::{Routine, Yield, done_of, library_work_id, value_of};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply, Rmw};
use crate::shared::Shared;

const SC_WORK_ID: WorkId = library_work_id(4, 1);

/// One location of the SC library, with its node lock.
#[derive(Debug)]
pub struct ScLoc {
    loc: Loc,
    lock: Shared<NLock>,
    /// Per participant: where read and RMW results land, on its node.
    result: Vec<Loc>,
}

impl ScLoc {
    /// Allocates a location on `home` and its node lock, for participants on `nodes`.
    pub fn new(layout: &mut LayoutBuilder, home: NodeId, nodes: &[NodeId]) -> Shared<ScLoc> {
        let loc = layout.alloc(home);
        let lock = NLock::new(layout, home, nodes);
        let result = nodes.iter().map(|&n| layout.alloc(n)).collect();
        Shared::new(ScLoc { loc, lock, result })
    }

    /// The words only participant `slot` ever touches (its result word and its node-lock
    /// words).
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        let mut words = self.lock.private_words(slot);
        words.push(self.result[slot]);
        words
    }

    /// The word itself.
    pub fn loc(&self) -> Loc {
        self.loc
    }
}

/// What an SC operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScAccess {
    /// Write a value.
    Write(u64),
    /// Read the value.
    Read,
    /// Remote CAS or FAA.
    Rmw(Rmw),
}

/// Participant `slot` performs `access` on `x`. The routine returns the value read (the old
/// value for an RMW; 0 for a write).
pub fn access(x: &Shared<ScLoc>, slot: usize, access: ScAccess) -> ScOp {
    ScOp {
        x: x.clone(),
        slot,
        access,
        state: ScState::Acquiring(nlock::acquire(&x.lock, slot)),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ScState {
    Acquiring(nlock::Acquire),
    Accessed,
    Releasing(nlock::Release),
    Waited,
    Loaded,
}

/// An SC operation in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScOp {
    x: Shared<ScLoc>,
    slot: usize,
    access: ScAccess,
    state: ScState,
}

impl Routine for ScOp {
    type Output = u64;

    fn resume(&mut self, reply: Reply) -> Result<Yield<u64>, RdmaError> {
        let result = self.x.result[self.slot];
        match &mut self.state {
            ScState::Acquiring(acquire) => match acquire.resume(reply)? {
                Yield::Op(op) => Ok(Yield::Op(op)),
                Yield::Done(()) => {
                    self.state = ScState::Accessed;
                    let op = match self.access {
                        ScAccess::Write(value) => Op::PutInline {
                            remote: self.x.loc,
                            value,
                            work_id: SC_WORK_ID,
                        },
                        ScAccess::Read => Op::Get {
                            local: result,
                            remote: self.x.loc,
                            work_id: SC_WORK_ID,
                        },
                        ScAccess::Rmw(rmw) => Op::Atomic {
                            local: result,
                            remote: self.x.loc,
                            rmw,
                            work_id: SC_WORK_ID,
                        },
                    };
                    Ok(Yield::Op(op))
                }
            },
            ScState::Accessed => {
                done_of(reply)?;
                self.state = ScState::Releasing(nlock::release(&self.x.lock, self.slot));
                self.resume(Reply::Start)
            }
            ScState::Releasing(release) => match release.resume(reply)? {
                Yield::Op(op) => Ok(Yield::Op(op)),
                Yield::Done(()) => {
                    if let ScAccess::Write(_) = self.access {
                        return Ok(Yield::Done(0));
                    }
                    self.state = ScState::Waited;
                    Ok(Yield::Op(Op::Wait {
                        work_id: SC_WORK_ID,
                    }))
                }
            },
            ScState::Waited => {
                done_of(reply)?;
                self.state = ScState::Loaded;
                Ok(Yield::Op(Op::Load { loc: result }))
            }
            ScState::Loaded => Ok(Yield::Done(value_of(reply)?)),
        }
    }
}
