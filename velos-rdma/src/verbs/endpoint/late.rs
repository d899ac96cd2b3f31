//! A peer absent when this node connected, met late: the endpoint's queue pair towards it
//! — never connected, parked since — connected to it ([`VerbsEndpoint::connect_late`]).

use super::{PeerInfo, VerbsEndpoint};
use crate::ids::NodeId;
use crate::verbs::error::VerbsError;

impl VerbsEndpoint<'_> {
    /// Connects this thread to `peer`, absent when this node connected
    /// ([`VerbsNode::connect_reached`](crate::verbs::VerbsNode::connect_reached)) and met
    /// since: `info` is its information for this node (its answer to this node's
    /// [`VerbsNode::local_info_for`](crate::verbs::VerbsNode::local_info_for) it, whose
    /// queue pairs it connected to). The queue pair takes requests from now on.
    ///
    /// # Errors
    /// [`VerbsError::UnknownNode`] for this node itself or a node not in the layout;
    /// [`VerbsError::NotAbsent`] for a peer connected already; information that does not
    /// fit (as [`VerbsNode::connect_peers`] checks it); a verbs error if a queue pair
    /// cannot be moved (the queue pair stays parked).
    ///
    /// [`VerbsNode::connect_peers`]: crate::verbs::VerbsNode::connect_peers
    pub fn connect_late(&mut self, peer: NodeId, info: &PeerInfo) -> Result<(), VerbsError> {
        if peer == self.node {
            return Err(VerbsError::UnknownNode { node: peer });
        }
        let t = self
            .queue_pair(peer)
            .map_err(|_| VerbsError::UnknownNode { node: peer })?;
        if !self.host.is_absent(peer) {
            return Err(VerbsError::NotAbsent { node: peer });
        }
        // Requests kept for it were refused (parked): none reached the NIC.
        self.ring_all();
        assert_eq!(
            self.completions.in_flight(peer),
            0,
            "rule (absent): parked since the start, so idle"
        );
        self.host
            .connect_absent(peer, self.thread, &mut self.connections[t], info)?;
        self.fence[t] = false;
        self.drained[t] = false;
        if let Some(remotes) = &mut self.remotes {
            remotes[t] = info.clone();
        }
        self.connections[t].unpark();
        assert!(!self.connections[t].broken());
        Ok(())
    }
}
