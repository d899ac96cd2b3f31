//! A peer cut off for good (`Op::Disconnect`): the endpoint's queue pair towards it and
//! this node's responders for it in the error state, until a new process in its place is
//! met through the join path ([`VerbsEndpoint::rejoin`]).
//!
//! Rule (disconnect the process met): the cut is of the process this node is connected
//! to in the place. While the queue pair is parked — a new process in the place was met
//! by [`VerbsEndpoint::rejoin`] and has not connected its side, or the place was absent
//! at the start — the old process is cut off already (the rejoin destroyed its queue
//! pair and responder), and the new one is not the process the caller means: its engine
//! learns of it only once it connected. Cutting its fresh responder then left a joiner
//! that every other node had met unable to reach this one, for good.

use super::VerbsEndpoint;
use crate::error::RdmaError;
use crate::ids::NodeId;

impl VerbsEndpoint<'_> {
    /// `Op::Disconnect { node }`: the requester towards `node` is moved to the error state
    /// (its outstanding requests complete in error, reported by `Wait`, `Poll` or
    /// `GlobalFence` as usual), then this node's responders for `node`'s threads: from
    /// then on `node` reaches nothing here. Both ends are this node's own queue pairs, so
    /// no word from `node` is needed.
    pub(super) fn disconnect(&mut self, node: NodeId) -> Result<(), RdmaError> {
        let t = self.queue_pair(node)?;
        if node == self.node {
            return Err(RdmaError::UnknownNode { node });
        }
        if self.connections[t].parked() {
            return Ok(()); // rule (disconnect the process met): nothing of it is left here
        }
        let refused = |_| RdmaError::Unsupported {
            operation: "Disconnect",
            backend: "this device (it refused to move a queue pair to the error state)",
        };
        if !self.connections[t].broken() {
            self.set_queue_pair_error(node).map_err(refused)?;
        }
        self.host.retire_responders(node).map_err(refused)?;
        assert!(
            self.connections[t].broken(),
            "rule (retire): nothing more is posted"
        );
        Ok(())
    }
}
