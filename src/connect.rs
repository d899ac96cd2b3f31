//! The connection set-up of one replica over real RDMA, shared by the embedding's verbs
//! backend ([`crate::embed::Node`]) and `velos node`: the node's memory registered as the
//! log's region plan says, connection information exchanged with the other processes of
//! the cluster file ([`crate::rendezvous`]), the queue pairs connected; and the endpoint's
//! clock restarted when the replica starts ([`ClockFrom`]).
//!
//! `connect` needs velos-rdma's `verbs` backend (this crate's `verbs` feature).

use crate::rendezvous::RendezvousError;
use velos_rdma::{Endpoint, Op, Reply};
#[cfg(feature = "verbs")]
use {crate::cluster_file::ClusterFile, std::time::Duration, velos_core::log::LogConfig};

/// Why a node could not be connected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The exchange with the other processes failed.
    #[error(transparent)]
    Rendezvous(#[from] RendezvousError),
    /// The RDMA backend failed (opening the device, registering memory, connecting).
    #[error("rdma: {0}")]
    Rdma(String),
}

/// Registers node `id`'s memory as `log`'s region plan says, exchanges connection
/// information with the other processes of `cluster` and connects the queue pairs; the
/// node, ready to post to every peer, and its rendezvous listener, kept open for
/// processes that join later ([`crate::join::Joiners::serve`]).
#[cfg(feature = "verbs")]
pub fn connect(
    log: &LogConfig,
    cluster: &ClusterFile,
    id: u16,
    rendezvous_timeout: Duration,
) -> Result<(velos_rdma::verbs::VerbsNode, std::net::TcpListener), ConnectError> {
    use std::collections::BTreeMap;
    use velos_rdma::verbs::{PeerInfo, VerbsNode, VerbsOptions};

    assert!(
        cluster.node(id).is_some(),
        "the caller checked that node {id} is in the cluster file"
    );
    let rdma = |e: &dyn std::fmt::Display| ConnectError::Rdma(e.to_string());
    let shape = log.shape();
    // Least privilege: the node's memory is registered as its region plan says (acceptor
    // words read + atomics, each proposer's value buffers writable by that proposer only,
    // the heartbeat read-only), and each peer receives only the keys meant for it.
    let mut node = VerbsNode::with_plan(
        shape.layout(),
        velos_rdma::NodeId(id),
        1,
        &shape.region_plan(id),
        VerbsOptions::from_env(),
    )
    .map_err(|e| rdma(&e))?;
    let mine: BTreeMap<u16, Vec<u8>> = (0..log.replicas)
        .map(|peer| {
            let info = node.local_info_for(velos_rdma::NodeId(peer));
            (peer, info.to_bytes())
        })
        .collect();
    let listener = crate::rendezvous::listen(cluster, id)?;
    let blobs = crate::rendezvous::exchange_on(
        &listener,
        cluster,
        id,
        |peer| mine[&peer].clone(),
        rendezvous_timeout,
    )?;
    let mut peers = BTreeMap::new();
    for (peer, blob) in blobs {
        let info = PeerInfo::from_bytes(&blob).map_err(|e| rdma(&e))?;
        peers.insert(peer, info);
    }
    // This node reaches its own memory through loopback, with its own keys.
    peers.insert(id, node.local_info_for(velos_rdma::NodeId(id)));
    node.connect_peers(&peers).map_err(|e| rdma(&e))?;
    // A barrier: every peer has connected its side before anyone posts to it.
    let connected = |_| b"connected".to_vec();
    crate::rendezvous::exchange_on(&listener, cluster, id, connected, rendezvous_timeout)?;
    Ok((node, listener))
}

/// An endpoint whose clock (`Op::Now`) counts from `origin` of the inner one: a replica's
/// Ω counts every peer as seen at time 0, so the clock must start when the replica does
/// (a verbs endpoint's counts from the device's opening, seconds earlier under emulation).
pub struct ClockFrom<E> {
    /// The endpoint.
    pub inner: E,
    /// Its clock reading when this one started.
    pub origin: u64,
}

impl<E: Endpoint> ClockFrom<E> {
    /// `inner` with its clock restarted now; the reply of its clock if it has none.
    pub fn now(mut inner: E) -> Result<ClockFrom<E>, Reply> {
        match inner.execute(&Op::Now) {
            Reply::Value(origin) => Ok(ClockFrom { inner, origin }),
            other => Err(other),
        }
    }
}

impl<E: Endpoint> Endpoint for ClockFrom<E> {
    fn node(&self) -> velos_rdma::NodeId {
        self.inner.node()
    }

    fn execute(&mut self, op: &Op) -> Reply {
        match (op, self.inner.execute(op)) {
            (Op::Now, Reply::Value(t)) => Reply::Value(t.saturating_sub(self.origin)),
            (_, reply) => reply,
        }
    }
}
