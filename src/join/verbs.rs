//! The verbs side of joining: the joiner's connection set-up ([`join`]) and a running
//! replica's handling of its requests ([`Joiners::handle`]).

use super::{JoinAnswer, JoinMessage, Joiners, Start};
use crate::cluster_file::ClusterFile;
use crate::connect::ConnectError;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::Duration;
use velos_core::log::{ClientScript, LogConfig, Replica};
use velos_rdma::NodeId;
use velos_rdma::Shared;
use velos_rdma::verbs::{PeerInfo, VerbsEndpoint, VerbsNode, VerbsOptions};

/// A process that met the cluster, connected to every other node.
#[derive(Debug)]
pub struct Met {
    /// Its node, ready to post to every peer.
    pub node: VerbsNode,
    /// Its rendezvous listener, for later joiners ([`Joiners::serve`]).
    pub listener: TcpListener,
    /// A joiner's: every place's incarnation, its own included (for `Replica::joining`);
    /// `None` for a process that started with the cluster.
    pub incarnations: Option<Vec<u64>>,
}

impl Met {
    /// This process's replica `id` of `log`: a fresh one if it started with the cluster,
    /// else one joining in its place at the incarnations met (`Replica::joining`).
    pub fn replica(
        &self,
        log: Shared<LogConfig>,
        id: u16,
        client: ClientScript,
    ) -> Result<Replica, String> {
        match &self.incarnations {
            None => Replica::new(log, id, client),
            Some(incarnations) => Replica::joining(log, id, client, incarnations),
        }
    }
}

/// Meets the cluster of `cluster` as node `id` as `start` says: with the others as they
/// start ([`crate::connect::connect`]) or into the running cluster ([`join`]).
///
/// # Errors
/// As `connect` or `join`.
pub fn meet(
    log: &LogConfig,
    cluster: &ClusterFile,
    id: u16,
    start: Start,
    timeout: Duration,
) -> Result<Met, ConnectError> {
    match start {
        Start::WithCluster => {
            let (node, listener) = crate::connect::connect(log, cluster, id, timeout)?;
            Ok(Met {
                node,
                listener,
                incarnations: None,
            })
        }
        Start::Join { incarnation } => join(log, cluster, id, incarnation, timeout),
    }
}

/// Joins the running cluster of `cluster` in node `id`'s place, at `incarnation`
/// ([`super::incarnation_now`] if `None`): registers the node's memory as `log`'s region
/// plan says, exchanges [`JoinMessage::Join`] with every other node, connects the queue
/// pairs, and tells every node [`JoinMessage::Connected`]. Waits at most `timeout` for
/// each round.
///
/// # Errors
/// A node that refuses (an incarnation not above the one it knows, a wrong secret, …)
/// or does not answer in time ([`ConnectError::Rendezvous`]); the device
/// ([`ConnectError::Rdma`]).
pub fn join(
    log: &LogConfig,
    cluster: &ClusterFile,
    id: u16,
    incarnation: Option<u64>,
    timeout: Duration,
) -> Result<Met, ConnectError> {
    assert!(cluster.node(id).is_some(), "the caller checked the id");
    let rdma = |e: &dyn std::fmt::Display| ConnectError::Rdma(e.to_string());
    let incarnation = incarnation.unwrap_or_else(super::incarnation_now);
    let shape = log.shape();
    let mut node = VerbsNode::with_plan(
        shape.layout(),
        NodeId(id),
        1,
        &shape.region_plan(id),
        VerbsOptions::from_env(),
    )
    .map_err(|e| rdma(&e))?;
    let listener = crate::rendezvous::listen(cluster, id)?;
    let asks: BTreeMap<u16, Vec<u8>> = (0..log.replicas)
        .map(|peer| {
            let info = node.local_info_for(NodeId(peer)).to_bytes();
            (peer, JoinMessage::Join { incarnation, info }.to_bytes())
        })
        .collect();
    let answers = crate::rendezvous::dial_each(cluster, id, |p| asks[&p].clone(), timeout)?;
    let mut incarnations = vec![0; usize::from(log.replicas)];
    incarnations[usize::from(id)] = incarnation;
    let mut peers = BTreeMap::new();
    for (peer, bytes) in answers {
        let answer: JoinAnswer = serde_json::from_slice(&bytes)
            .map_err(|e| ConnectError::Rdma(format!("node {peer}'s answer: {e}")))?;
        incarnations[usize::from(peer)] = answer.incarnation;
        peers.insert(
            peer,
            PeerInfo::from_bytes(&answer.info).map_err(|e| rdma(&e))?,
        );
    }
    peers.insert(id, node.local_info_for(NodeId(id)));
    node.connect_peers(&peers).map_err(|e| rdma(&e))?;
    let connected = JoinMessage::Connected { incarnation }.to_bytes();
    crate::rendezvous::dial_each(cluster, id, |_| connected.clone(), timeout)?;
    assert!(node.is_connected());
    Ok(Met {
        node,
        listener,
        incarnations: Some(incarnations),
    })
}

impl Joiners {
    /// Handles every request waiting, for `replica` on `endpoint` (call it from the
    /// replica's loop, between two operations): a join is refused if its incarnation is
    /// not above the one the engine knows for the place, else the endpoint rejoins it
    /// (parked); a connection made tells the engine (`Replica::peer_replaced`) and then
    /// unparks the queue pair. Returns the places replaced, with their incarnations.
    pub fn handle(
        &mut self,
        endpoint: &mut VerbsEndpoint<'_>,
        replica: &mut Replica,
    ) -> Vec<(u16, u64)> {
        let mut replaced = Vec::new();
        while let Some(request) = self.next() {
            let peer = request.peer;
            let result = match request.message {
                JoinMessage::Join {
                    incarnation,
                    ref info,
                } => self.rejoin(endpoint, replica, peer, incarnation, info),
                JoinMessage::Connected { incarnation } => {
                    if self.parked.get(&peer) != Some(&incarnation) {
                        Err(format!(
                            "no join of node {peer} at incarnation {incarnation}"
                        ))
                    } else {
                        // Rule (no amnesia): the engine first, so nothing it posts on the
                        // new connection counts for the old process.
                        let told = replica
                            .peer_replaced(peer, incarnation)
                            .map_err(|e| e.to_string());
                        told.and_then(|()| {
                            endpoint.activate(NodeId(peer)).map_err(|e| e.to_string())
                        })
                        .map(|()| {
                            self.parked.remove(&peer);
                            replaced.push((peer, incarnation));
                            Vec::new()
                        })
                    }
                }
            };
            request.answer(result);
        }
        replaced
    }

    /// A join of `peer` at `incarnation` with its `info`: this node's answer.
    fn rejoin(
        &mut self,
        endpoint: &mut VerbsEndpoint<'_>,
        replica: &Replica,
        peer: u16,
        incarnation: u64,
        info: &[u8],
    ) -> Result<Vec<u8>, String> {
        let Some(&known) = replica.incarnations().get(usize::from(peer)) else {
            return Err(format!("node {peer} is not a replica of this log"));
        };
        if incarnation <= known {
            return Err(format!(
                "incarnation {incarnation} of node {peer} is not above {known}, the one \
                 node {} knows",
                replica.id()
            ));
        }
        let info = PeerInfo::from_bytes(info).map_err(|e| e.to_string())?;
        let mine = endpoint
            .rejoin(NodeId(peer), &info)
            .map_err(|e| e.to_string())?;
        self.parked.insert(peer, incarnation);
        let answer = JoinAnswer {
            incarnation: replica.incarnation(),
            info: mine.to_bytes(),
        };
        Ok(serde_json::to_vec(&answer).expect("an answer serialises"))
    }
}
