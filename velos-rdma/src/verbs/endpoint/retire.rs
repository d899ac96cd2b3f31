//! A peer cut off for good (`Op::Disconnect`): the endpoint's queue pair towards it and
//! this node's responders for it in the error state, until a new process in its place is
//! met through the join path ([`VerbsEndpoint::rejoin`]).

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
