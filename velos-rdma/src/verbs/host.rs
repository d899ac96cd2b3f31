//! What a [`VerbsEndpoint`](super::VerbsEndpoint) runs against: the single-process
//! [`VerbsFabric`](super::VerbsFabric) or one process's [`VerbsNode`](super::VerbsNode).
//!
//! The endpoint's request building, completion tracking and
//! [`Endpoint`](crate::Endpoint) implementation are the same for both; they differ in
//! which words this process holds (every node's, or one node's), where a remote word is
//! for the NIC (a local region's rkey, or a peer's from its
//! [`NodeInfo`](super::NodeInfo)), and what happens to an endpoint's queue pairs when it
//! goes (destroyed, or handed back to the node for the thread's next endpoint).

use super::connection::{Connection, Lane};
use super::error::VerbsError;
use super::info::PeerInfo;
use super::memory::WordAddress;
use crate::doorbell::WorkRequests;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use sideway::ibverbs::completion::ExtendedCompletionQueue;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The owner of an endpoint's memory and queue pairs.
pub(super) trait Host: Debug + Sync {
    /// The layout of the cluster's registered memory (every node's, held here or not).
    fn layout(&self) -> &Layout;

    /// The word at `loc`, for a CPU access, after checking alignment and bounds. Only
    /// called for a location on the endpoint's own node, which this process holds.
    fn word(&self, loc: Loc) -> Result<&AtomicU64, RdmaError>;

    /// The address and local key of the word at `loc`, a checked location on the
    /// endpoint's own node (the local operand of a request).
    fn local(&self, loc: Loc) -> WordAddress;

    /// The address and remote key of the word at `loc`, a checked location on any node
    /// (the target of a request).
    fn remote(&self, loc: Loc) -> WordAddress;

    /// Send-queue depth of each requester queue pair.
    fn queue_depth(&self) -> u32;

    /// How long a wait goes without completions before it fails the outstanding requests
    /// ([`VerbsOptions::completion_timeout`](super::VerbsOptions::completion_timeout)).
    fn completion_timeout(&self) -> Duration;

    /// Nanoseconds since the host was made (the clock of `Op::Now`).
    fn now_ns(&self) -> u64;

    /// An endpoint has gone, after every request it posted completed: takes back its
    /// queue pairs and counts the `ops` operations it executed.
    fn release(&self, lane: Lane, ops: u64);

    /// Every node's information, for endpoints that address remote words by their own
    /// copy of it ([`Host::remote`] otherwise).
    fn peers(&self) -> Option<Vec<PeerInfo>> {
        None
    }

    /// Replaces thread `thread`'s connection towards `peer` by one to a new process in
    /// its place, described by `info` (see `VerbsNode`'s): the new connection,
    /// parked, and this node's information for the new process.
    fn replace_peer(
        &self,
        peer: NodeId,
        thread: u16,
        cq: &Arc<ExtendedCompletionQueue>,
        info: &PeerInfo,
    ) -> Result<(Connection, PeerInfo), VerbsError> {
        let _ = (thread, cq, info);
        Err(VerbsError::BadNodeInfo {
            reason: format!(
                "{peer}: a new process joins a node of a cluster (VerbsNode), not a \
                 single-process fabric"
            ),
        })
    }

    /// Moves this node's responders for every thread of `peer` into the error state
    /// (`Op::Disconnect`): `peer`'s requests are no longer executed here.
    fn retire_responders(&self, peer: NodeId) -> Result<(), VerbsError> {
        Err(VerbsError::BadNodeInfo {
            reason: format!(
                "{peer}: a peer is disconnected by a node of a cluster (VerbsNode), not a \
                 single-process fabric"
            ),
        })
    }

    /// Whether `peer` was absent when this node connected and is not connected since.
    fn is_absent(&self, peer: NodeId) -> bool {
        let _ = peer;
        false
    }

    /// Connects thread `thread`'s `connection` towards `peer`, absent when this node
    /// connected and never connected since, to `peer`'s process described by `info`, and
    /// this node's responder for it (see `VerbsNode`'s); the connection stays parked.
    fn connect_absent(
        &self,
        peer: NodeId,
        thread: u16,
        connection: &mut Connection,
        info: &PeerInfo,
    ) -> Result<(), VerbsError> {
        let _ = (thread, connection, info);
        Err(VerbsError::BadNodeInfo {
            reason: format!(
                "{peer}: a node met late belongs to a node of a cluster (VerbsNode), not a \
                 single-process fabric"
            ),
        })
    }

    /// `Op::SetWriteAccess` by a thread of `node`: from now on only `writers` may put
    /// into its words (see `super::access`).
    fn set_writers(&self, node: NodeId, writers: u64) -> Result<(), RdmaError> {
        let _ = (node, writers);
        Err(RdmaError::Unsupported {
            operation: "SetWriteAccess",
            backend: "a node of a cluster (VerbsNode): the peers' requesters are in other \
                      processes; the single-process VerbsFabric switches permissions",
        })
    }

    /// Whether `from`'s `connection` towards `target`, broken by a refused write, is
    /// granted again; if so it was cycled and takes requests again. The caller saw every
    /// request on it complete.
    fn regrant(
        &self,
        from: NodeId,
        target: NodeId,
        connection: &mut Connection,
    ) -> Result<bool, VerbsError> {
        let _ = (from, target, connection);
        Ok(false)
    }

    /// An endpoint that is going posted `counts` work requests: a host that sums them up
    /// adds them (by default they are not kept).
    fn count_work_requests(&self, counts: WorkRequests) {
        let _ = counts;
    }
}
