//! The verbs side of joining: the joiner's connection set-up ([`join`]), a running
//! replica's handling of its requests ([`Joiners::handle`]), and the joiner's handling of
//! the nodes it meets late ([`Late::handle`]).

use super::{JoinAnswer, JoinMessage, Joiners, Late, Start};
use crate::cluster_file::ClusterFile;
use crate::connect::ConnectError;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::Duration;
use velos_core::log::{LogConfig, Replica};
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
    /// A joiner's: every place's incarnation, its own included (for `Replica::joining`;
    /// 0 for a node not met yet, which this process then counts in no configuration
    /// that names a later incarnation of it until it is met); `None` for a process that
    /// started with the cluster.
    pub incarnations: Option<Vec<u64>>,
    /// A joiner's: the nodes it did not meet at the join, dialed on in the background,
    /// and those not told yet that it connected (handle it at the replica's turns:
    /// [`Late::handle`]); `None` for a process that started with the cluster.
    pub late: Option<Late>,
}

impl Met {
    /// This process's replica `id` of `log`: a fresh one if it started with the cluster,
    /// else one joining in its place at the incarnations met (`Replica::joining`).
    pub fn replica(&self, log: Shared<LogConfig>, id: u16) -> Result<Replica, String> {
        match &self.incarnations {
            None => Replica::new(log, id),
            Some(incarnations) => Replica::joining(log, id, incarnations),
        }
    }
}

/// Meets the cluster of `cluster` as node `id` as `start` says: with the others as they
/// start, or restart after a power loss ([`crate::connect::connect`]), or into the
/// running cluster ([`join`]).
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
        Start::WithCluster | Start::Recover => {
            let (node, listener) = crate::connect::connect(log, cluster, id, timeout)?;
            Ok(Met {
                node,
                listener,
                incarnations: None,
                late: None,
            })
        }
        Start::Join { incarnation } => join(log, cluster, id, incarnation, timeout),
    }
}

/// Joins the running cluster of `cluster` in node `id`'s place, at `incarnation`
/// ([`super::incarnation_now`] if `None`): registers the node's memory as `log`'s region
/// plan says, exchanges [`JoinMessage::Join`] with the other nodes until a majority of the
/// file (this node counted) answered ([`super::ask`]), connects the queue pairs towards
/// them (the others' stay parked: [`VerbsNode::connect_reached`]), and tells them
/// [`JoinMessage::Connected`] until a majority acknowledged. The nodes not met, or not
/// told, are dialed on in the background ([`Met::late`]). Waits at most `timeout` for
/// each round.
///
/// # Errors
/// A node that refuses (an incarnation not above the one it knows, a wrong secret, …)
/// or too few answering in time ([`ConnectError::Rendezvous`]); the device
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
    let info_for = |peer: u16| node.local_info_for(NodeId(peer)).to_bytes();
    let asked = super::ask(cluster, id, incarnation, info_for, timeout)?;
    let mut incarnations = vec![0; usize::from(log.replicas)];
    incarnations[usize::from(id)] = incarnation;
    let mut peers = BTreeMap::new();
    for (&peer, answer) in &asked.answers {
        incarnations[usize::from(peer)] = answer.incarnation;
        peers.insert(
            peer,
            PeerInfo::from_bytes(&answer.info).map_err(|e| rdma(&e))?,
        );
    }
    peers.insert(id, node.local_info_for(NodeId(id)));
    let absent = node.connect_reached(&peers).map_err(|e| rdma(&e))?;
    let missing = asked.missing();
    assert_eq!(
        absent.iter().map(|n| n.0).collect::<Vec<_>>(),
        missing,
        "rule (absent): the queue pairs of the nodes not met stay parked"
    );
    if !missing.is_empty() {
        tracing::info!(node = id, ?missing, "joined with a majority; dialing on");
    }
    let late = asked.connected(timeout)?;
    assert!(node.is_connected());
    Ok(Met {
        node,
        listener,
        incarnations: Some(incarnations),
        late: Some(late),
    })
}

impl Late {
    /// Handles every node met late, for the joiner's `replica` on `endpoint` (call it
    /// from the replica's loop, between two operations): the engine told first if the
    /// node's process is newer than the one it knows (`Replica::peer_replaced`, rule (no
    /// amnesia)), then the queue pair towards it connected
    /// ([`VerbsEndpoint::connect_late`]), then the node told in the background
    /// ([`Late::connected`]). A node that refused, or whose answer does not fit, is given
    /// up (logged). Returns the nodes connected, with their incarnations.
    pub fn handle(
        &mut self,
        endpoint: &mut VerbsEndpoint<'_>,
        replica: &mut Replica,
    ) -> Vec<(u16, u64)> {
        let me = replica.id();
        let mut connected = Vec::new();
        while let Some((peer, answer)) = self.met() {
            match Late::connect(endpoint, replica, peer, answer) {
                Ok(incarnation) => {
                    if let Err(e) = self.connected(peer) {
                        tracing::warn!(node = me, peer, "telling a node met late: {e}");
                    }
                    connected.push((peer, incarnation));
                }
                Err(e) => tracing::warn!(node = me, peer, "a node met late given up: {e}"),
            }
        }
        while let Some((peer, told)) = self.told_within(Duration::ZERO) {
            match told {
                Ok(()) => tracing::info!(node = me, peer, "met late and told"),
                Err(e) => tracing::warn!(node = me, peer, "not told: {e}"),
            }
        }
        connected
    }

    /// Connects to `peer`, met late with `answer`: its incarnation.
    fn connect(
        endpoint: &mut VerbsEndpoint<'_>,
        replica: &mut Replica,
        peer: u16,
        answer: Result<JoinAnswer, crate::rendezvous::RendezvousError>,
    ) -> Result<u64, String> {
        let answer = answer.map_err(|e| e.to_string())?;
        let info = PeerInfo::from_bytes(&answer.info).map_err(|e| e.to_string())?;
        let Some(&known) = replica.incarnations().get(usize::from(peer)) else {
            return Err(format!("node {peer} is not a replica of this log"));
        };
        if answer.incarnation < known {
            return Err(format!(
                "incarnation {} of node {peer} is below {known}, the one known",
                answer.incarnation
            ));
        }
        if answer.incarnation > known {
            replica
                .peer_replaced(peer, answer.incarnation)
                .map_err(|e| e.to_string())?;
        }
        endpoint
            .connect_late(NodeId(peer), &info)
            .map_err(|e| e.to_string())?;
        assert_eq!(
            replica.incarnations()[usize::from(peer)],
            answer.incarnation
        );
        Ok(answer.incarnation)
    }
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
