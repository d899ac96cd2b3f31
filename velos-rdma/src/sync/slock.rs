//! slock: the strong lock of the rdma-rmw paper (§4.3): a weak lock whose release first
//! issues a global fence towards every node, so every remote operation of the critical
//! section has fully completed before the lock is passed on.

use super::wlock::{self, WLock};
use super::{Routine, Yield, done_of};
use crate::error::RdmaError;
use crate::ids::NodeId;
use crate::op::{Op, Reply};
use crate::shared::Shared;

/// A strong lock is a weak lock used with fenced releases.
pub type SLock = WLock;

/// Participant `slot` acquires `lock` (a weak-lock acquire).
pub fn acquire(lock: &Shared<SLock>, slot: usize) -> wlock::Acquire {
    wlock::acquire(lock, slot)
}

/// Participant `slot` releases `lock`: a global fence towards every node, then the weak
/// release.
pub fn release(lock: &Shared<SLock>, slot: usize, nodes: u16) -> Release {
    Release {
        fenced: 0,
        nodes,
        release: wlock::release(lock, slot),
        started: false,
    }
}

/// A strong-lock release in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    /// Global fences issued so far (towards nodes `0..fenced`).
    fenced: u16,
    nodes: u16,
    release: wlock::Release,
    started: bool,
}

impl Routine for Release {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        if self.fenced < self.nodes {
            done_of(reply)?;
            self.fenced += 1;
            return Ok(Yield::Op(Op::GlobalFence {
                node: NodeId(self.fenced - 1),
            }));
        }
        if !self.started {
            done_of(reply)?;
            self.started = true;
            return self.release.resume(Reply::Start);
        }
        self.release.resume(reply)
    }
}
