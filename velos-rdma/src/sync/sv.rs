//! sv: shared variables (LOCO). Every node holds a copy; a thread stores and loads its own
//! node's copy with CPU operations and broadcasts it to other nodes' copies with puts.

use super::{Routine, Yield, done_of, library_work_id};
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::op::{Op, Reply};

/// A shared variable: one word on every node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedVar {
    copies: Vec<Loc>,
}

impl SharedVar {
    /// Allocates a copy on every node of `layout`.
    pub fn new(layout: &mut LayoutBuilder) -> SharedVar {
        let copies = (0..layout.nodes())
            .map(|n| layout.alloc(NodeId(n)))
            .collect();
        SharedVar { copies }
    }

    /// From its copies, one per node in node order.
    pub fn from_copies(copies: Vec<Loc>) -> SharedVar {
        assert!(
            copies.iter().enumerate().all(|(n, l)| l.node.index() == n),
            "copy n of a shared variable lives on node n"
        );
        SharedVar { copies }
    }

    /// Node `node`'s copy.
    pub fn copy(&self, node: NodeId) -> Loc {
        self.copies[node.index()]
    }

    /// The `bcast(x, d, nodes)` routine: for each target a put of `from`'s copy into the
    /// target's copy (NIC local read, then remote write), all with `work_id`. It posts and
    /// returns; `wait(work_id)` waits for the local reads, a global fence for the writes.
    pub fn bcast(&self, from: NodeId, targets: &[NodeId], work_id: WorkId) -> Bcast {
        let mut mask = 0u64;
        for t in targets {
            assert!(
                t.index() < 64 && t.index() < self.copies.len(),
                "bcast target {t}"
            );
            mask |= 1 << t.index();
        }
        Bcast {
            local: self.copy(from),
            copies: self.copies.clone(),
            pending: mask,
            work_id,
        }
    }
}

/// The default work id of broadcasts issued by the libraries.
pub const BCAST_WORK_ID: WorkId = library_work_id(1, 1);

/// A broadcast in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bcast {
    local: Loc,
    copies: Vec<Loc>,
    /// Targets not yet posted, as a bit set of node indices.
    pending: u64,
    work_id: WorkId,
}

impl Routine for Bcast {
    type Output = ();

    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        done_of(reply)?;
        if self.pending == 0 {
            return Ok(Yield::Done(()));
        }
        let n = self.pending.trailing_zeros() as usize;
        self.pending &= !(1 << n);
        Ok(Yield::Op(Op::Put {
            remote: self.copies[n],
            local: self.local,
            work_id: self.work_id,
        }))
    }
}
