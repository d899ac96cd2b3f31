//! Peers absent when a node connects: a process joining a running cluster while some of
//! its nodes are down connects to the nodes it reached ([`VerbsNode::connect_reached`]);
//! its queue pairs towards the others stay unconnected — the requesters parked, refusing
//! every request as a broken queue pair does — until each is met late
//! ([`VerbsEndpoint::connect_late`](crate::verbs::VerbsEndpoint::connect_late)), which
//! connects the very queue pairs whose numbers this node sent it.

use super::{Connected, VerbsNode, lock};
use crate::ids::NodeId;
use crate::verbs::connection::{Connection, bring_up};
use crate::verbs::error::VerbsError;
use crate::verbs::info::{NodeInfo, PeerInfo};
use std::collections::BTreeMap;

impl VerbsNode {
    /// [`VerbsNode::connect_peers`] with the peers reached only: a node of the layout
    /// `peers` does not hold is *absent* — its queue pairs stay unconnected, this node's
    /// requesters towards it refuse every request
    /// ([`RdmaError::QueuePairError`](crate::RdmaError::QueuePairError)) — until it is
    /// met late ([`VerbsEndpoint::connect_late`](crate::verbs::VerbsEndpoint::connect_late),
    /// with its answer to this node's [`VerbsNode::local_info_for`] it). Returns the
    /// absent nodes.
    ///
    /// # Errors
    /// As [`VerbsNode::connect_peers`], [`VerbsError::MissingPeer`] aside;
    /// [`VerbsError::BadNodeInfo`] if a node is absent and this node runs more than one
    /// thread (a node met late is connected by its one endpoint).
    pub fn connect_reached(
        &mut self,
        peers: &BTreeMap<u16, PeerInfo>,
    ) -> Result<Vec<NodeId>, VerbsError> {
        let id = self.id;
        let absent = self
            .layout()
            .node_ids()
            .any(|node| node != id && !peers.contains_key(&node.0));
        if absent && self.threads != 1 {
            return Err(VerbsError::BadNodeInfo {
                reason: format!(
                    "a node met late joins nodes of one thread only (this one runs {})",
                    self.threads
                ),
            });
        }
        self.connect_known(peers, true)?;
        let absent = self.absent();
        assert!(self.is_connected());
        assert!(
            absent.iter().all(|n| !peers.contains_key(&n.0) && *n != id),
            "rule (absent): only the nodes without information"
        );
        Ok(absent)
    }

    /// The peers absent when this node connected and not met since.
    pub fn absent(&self) -> Vec<NodeId> {
        lock(&self.absent).iter().map(|&n| NodeId(n)).collect()
    }

    /// What stands for an absent node's information until it is met: its shape, no
    /// address, no key (its requesters refuse every request, so nothing is addressed
    /// with it).
    pub(super) fn placeholder(&self, node: NodeId) -> PeerInfo {
        let (nodes, threads) = (self.layout().nodes(), self.threads);
        let table = vec![vec![0; usize::from(threads)]; usize::from(nodes)];
        PeerInfo {
            info: NodeInfo {
                node,
                nodes,
                words: self.layout().words(node),
                threads,
                gid: [0; 16],
                lid: 0,
                addr: 0,
                rkey: 0,
                responders: table.clone(),
                requesters: table,
            },
            ranges: Vec::new(),
        }
    }

    /// Connects thread `thread`'s `connection` towards `peer` — absent when this node
    /// connected, its requester still in the RESET state — to `peer`'s responder made
    /// for it, as `info` (the peer's answer) says, and this node's responder for `peer`
    /// to its requester. The connection stays parked: its endpoint unparks it.
    pub(super) fn connect_late(
        &self,
        peer: NodeId,
        thread: u16,
        connection: &mut Connection,
        info: &PeerInfo,
    ) -> Result<(), VerbsError> {
        self.check_newcomer(peer, info)?;
        if !lock(&self.absent).contains(&peer.0) {
            return Err(VerbsError::NotAbsent { node: peer });
        }
        let (me, t) = (self.id.index(), usize::from(thread));
        let far = |qpn| super::remote_qp(info, qpn);
        connection.connect_to(&self.device, far(info.info.responders[me][t]))?;
        let mut responders = lock(&self.responders);
        bring_up(
            &mut responders[peer.index()][t],
            &self.device,
            far(info.info.requesters[me][t]),
        )?;
        drop(responders);
        if let Connected::Yes(infos) = &mut *lock(&self.connected) {
            infos[peer.index()] = info.clone();
        }
        lock(&self.absent).remove(&peer.0);
        assert!(connection.broken(), "parked until its endpoint takes it");
        Ok(())
    }
}
