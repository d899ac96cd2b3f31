//! A new process in a peer's place: the endpoint's queue pair towards the peer is replaced
//! by one connected to the new process ([`VerbsEndpoint::rejoin`]), parked until the new
//! process has connected its side ([`VerbsEndpoint::activate`]).

use super::{PeerInfo, VerbsEndpoint};
use crate::ids::NodeId;
use crate::verbs::error::VerbsError;

impl VerbsEndpoint<'_> {
    /// Connects this thread to a new process in `peer`'s place, described by `info` (its
    /// [`VerbsNode::local_info_for`](crate::verbs::VerbsNode::local_info_for) this node),
    /// and returns what the new process needs to connect to this node (this node's
    /// information for it: new queue-pair numbers, the same keys).
    ///
    /// The queue pair towards the old process is moved to the error state if it is not
    /// there yet, every request on it completes (with an error, reported by `Wait`,
    /// `Poll` or `GlobalFence` as usual), and it is destroyed with this node's responder
    /// for the old process: the old process can no longer reach this node. The new queue
    /// pair refuses every request ([`RdmaError::QueuePairError`], as a broken one does)
    /// until [`VerbsEndpoint::activate`]: the new process connects its side only after
    /// this answer reaches it.
    ///
    /// # Errors
    /// [`VerbsError::UnknownNode`] for this node itself or a node not in the layout;
    /// information that does not fit (as [`VerbsNode::connect_peers`] checks it); a node
    /// of more than one thread; a verbs error if a queue pair cannot be made or moved.
    ///
    /// [`RdmaError::QueuePairError`]: crate::RdmaError::QueuePairError
    /// [`VerbsNode::connect_peers`]: crate::verbs::VerbsNode::connect_peers
    pub fn rejoin(&mut self, peer: NodeId, info: &PeerInfo) -> Result<PeerInfo, VerbsError> {
        if peer == self.node {
            return Err(VerbsError::UnknownNode { node: peer });
        }
        let t = self
            .queue_pair(peer)
            .map_err(|_| VerbsError::UnknownNode { node: peer })?;
        // Checked and made first: a refused rejoin leaves the old queue pair as it was.
        let (connection, mine) = self.host.replace_peer(peer, self.thread, &self.cq, info)?;
        self.ring_all();
        if !self.connections[t].broken() {
            self.connections[t].force_error()?;
        }
        // Every request the NIC holds on the old queue pair completes (flushed in error)
        // before it goes, so none of its completions is left to overrun the queue.
        self.settle(|completions| completions.in_flight(peer) == 0, |_| ());
        self.submit_waiting(t);
        self.connections[t] = connection;
        self.fence[t] = false;
        self.drained[t] = false;
        if let Some(remotes) = &mut self.remotes {
            remotes[t] = info.clone();
        }
        assert!(self.connections[t].broken(), "parked until activated");
        assert_eq!(self.completions.in_flight(peer), 0);
        Ok(mine)
    }

    /// The queue pair towards `peer`, connected to a new process by
    /// [`VerbsEndpoint::rejoin`], takes requests from now on (the new process has
    /// connected its side). Call it once, after `rejoin`.
    ///
    /// # Errors
    /// [`VerbsError::UnknownNode`] for a node not in the layout or this node.
    pub fn activate(&mut self, peer: NodeId) -> Result<(), VerbsError> {
        let t = self
            .queue_pair(peer)
            .ok()
            .filter(|_| peer != self.node)
            .ok_or(VerbsError::UnknownNode { node: peer })?;
        assert_eq!(self.completions.in_flight(peer), 0, "rule: parked, so idle");
        self.connections[t].unpark();
        assert!(!self.connections[t].broken());
        Ok(())
    }
}
