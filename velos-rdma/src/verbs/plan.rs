//! A region plan on verbs: the memory-region access flags of each [`Access`].
//!
//! A node opened with a plan ([`VerbsNode::with_plan`](super::VerbsNode::with_plan))
//! registers one memory region per grant ([`Grant`](crate::plan::Grant)), with exactly
//! the remote access it grants, and one more over all its words with local access only
//! (the local operands of its own requests). A grant for one node only
//! ([`Grant::only`](crate::plan::Grant::only)) has its key in that node's
//! [`PeerInfo`](super::PeerInfo) alone
//! ([`VerbsNode::local_info_for`](super::VerbsNode::local_info_for)); grants for two
//! different nodes may cover the same words (the memory is registered once per grant).
//! An access the plan does not grant is still posted, with a key that does not allow it,
//! so that the NIC refuses it: the request fails with
//! [`RdmaError::RemoteAccess`](crate::RdmaError) and its queue pair goes to the error
//! state.

use super::error::VerbsError;
use crate::ids::NodeId;
use crate::layout::Layout;
use crate::plan::{Access, Grant};
use sideway::ibverbs::AccessFlags;

/// The access flags of a memory region granting `access` (local write is needed by verbs
/// whenever remote write or atomics are granted).
pub(super) fn flags(access: Access) -> AccessFlags {
    match access {
        Access::Read => AccessFlags::RemoteRead,
        Access::Write => AccessFlags::LocalWrite | AccessFlags::RemoteWrite,
        Access::ReadWrite => {
            AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead
        }
        Access::Atomic => AccessFlags::LocalWrite | AccessFlags::RemoteAtomic,
        Access::ReadAtomic => {
            AccessFlags::LocalWrite | AccessFlags::RemoteAtomic | AccessFlags::RemoteRead
        }
        Access::All => {
            AccessFlags::LocalWrite
                | AccessFlags::RemoteWrite
                | AccessFlags::RemoteRead
                | AccessFlags::RemoteAtomic
        }
    }
}

/// Checks a plan for node `node` of `layout` ([`crate::plan::check_plan`]).
pub(super) fn check_plan(layout: &Layout, node: NodeId, plan: &[Grant]) -> Result<(), VerbsError> {
    crate::plan::check_plan(layout, node, plan).map_err(|reason| VerbsError::BadPlan { reason })
}
