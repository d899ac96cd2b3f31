//! A region plan: which word ranges of a [`VerbsNode`](super::VerbsNode)'s memory peers
//! may reach, and how ([`Grant`], [`Access`]).
//!
//! A node opened with a plan ([`VerbsNode::with_plan`](super::VerbsNode::with_plan))
//! registers one memory region per grant, with exactly the remote access it grants, and
//! one more over all its words with local access only (the local operands of its own
//! requests). A grant to one peer only ([`Grant::only`]) has its key in that peer's
//! [`NodeInfo`](super::NodeInfo) alone
//! ([`VerbsNode::local_info_for`](super::VerbsNode::local_info_for)). An access the plan
//! does not grant is still posted, with a key that does not allow it, so that the NIC
//! refuses it: the request fails with [`RdmaError::RemoteAccess`](crate::RdmaError) and
//! its queue pair goes to the error state.

use super::error::VerbsError;
use crate::ids::NodeId;
use crate::layout::Layout;
use sideway::ibverbs::AccessFlags;
use std::ops::Range;

/// The remote access a [`Grant`] gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// RDMA READ only.
    Read,
    /// RDMA WRITE only.
    Write,
    /// RDMA READ and WRITE.
    ReadWrite,
    /// Remote atomics (compare-and-swap, fetch-and-add) only.
    Atomic,
    /// READ, WRITE and atomics.
    All,
}

impl Access {
    /// The access flags of a memory region granting this access (local write is needed
    /// by verbs whenever remote write or atomics are granted).
    pub(super) fn flags(self) -> AccessFlags {
        match self {
            Access::Read => AccessFlags::RemoteRead,
            Access::Write => AccessFlags::LocalWrite | AccessFlags::RemoteWrite,
            Access::ReadWrite => {
                AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead
            }
            Access::Atomic => AccessFlags::LocalWrite | AccessFlags::RemoteAtomic,
            Access::All => {
                AccessFlags::LocalWrite
                    | AccessFlags::RemoteWrite
                    | AccessFlags::RemoteRead
                    | AccessFlags::RemoteAtomic
            }
        }
    }
}

/// A range of a node's words with the remote access it grants, to every node (this one
/// included) or to one peer only.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    /// The words, by word index in the node's memory (not empty).
    pub words: Range<u32>,
    /// What peers may do there.
    pub access: Access,
    /// The only node whose [`NodeInfo`](super::NodeInfo) carries the range's key, or
    /// `None` for every node.
    pub only: Option<NodeId>,
}

impl Grant {
    /// `access` to `words`, for every node.
    pub fn new(words: Range<u32>, access: Access) -> Grant {
        Grant {
            words,
            access,
            only: None,
        }
    }

    /// The same grant, for `peer` only.
    #[must_use]
    pub fn only(self, peer: NodeId) -> Grant {
        Grant {
            only: Some(peer),
            ..self
        }
    }

    /// Whether `peer` receives the grant's key.
    pub(super) fn is_for(&self, peer: NodeId) -> bool {
        self.only.is_none_or(|only| only == peer)
    }
}

/// Checks a plan for node `node` of `layout`: every grant non-empty, inside the node's
/// words, for a node of the layout, and no two overlapping.
pub(super) fn check_plan(layout: &Layout, node: NodeId, plan: &[Grant]) -> Result<(), VerbsError> {
    let bad = |reason: String| Err(VerbsError::BadPlan { reason });
    let words = layout.words(node);
    for (i, grant) in plan.iter().enumerate() {
        if grant.words.is_empty() || grant.words.end > words {
            return bad(format!(
                "grant {i} ({:?}) is empty or outside the node's {words} words",
                grant.words
            ));
        }
        if let Some(peer) = grant.only.filter(|peer| peer.0 >= layout.nodes()) {
            return bad(format!("grant {i} is for {peer}, not a node of the layout"));
        }
        if let Some(j) = plan[..i].iter().position(|other| {
            other.words.start < grant.words.end && grant.words.start < other.words.end
        }) {
            return bad(format!("grants {j} and {i} overlap"));
        }
    }
    Ok(())
}
