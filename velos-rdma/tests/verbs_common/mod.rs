//! What the verbs backend's tests share: opening a device or skipping, a fabric, a
//! connected pair of nodes under a region plan, and three one-thread nodes connected to
//! each other (the peer-change tests: a new process, a peer met late, a peer cut off).
#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use velos_rdma::verbs::{
    Access, Grant, PeerInfo, VerbsEndpoint, VerbsError, VerbsFabric, VerbsNode, VerbsOptions,
};
use velos_rdma::{Endpoint, Layout, Loc, NodeId, Op, RdmaError, Reply, WorkId};

/// Whether the environment demands a device (`VELOS_REQUIRE_RDMA=1`).
pub fn rdma_required() -> bool {
    std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

/// `opened`, or `None` after a skip message when this machine has no RDMA device.
pub fn usable<T>(test: &str, opened: Result<T, VerbsError>) -> Option<T> {
    match opened {
        Ok(opened) => Some(opened),
        Err(error) if error.is_no_device() && !rdma_required() => {
            println!("skipped {test}: {error} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            None
        }
        Err(error) => panic!("{test}: no usable RDMA device: {error}"),
    }
}

/// A fabric of `nodes` nodes of `words` words each, or `None` without a device.
pub fn fabric(test: &str, nodes: u16, words: u32) -> Option<VerbsFabric> {
    let layout = Layout::uniform(nodes, words);
    usable(
        test,
        VerbsFabric::with_options(layout, VerbsOptions::from_env()),
    )
}

/// Nodes 0 and 1 with `threads` threads each, connected; node 0's words 0..8 writable,
/// 8..16 read-only (a plan).
pub fn planned_pair(test: &str, threads: u16) -> Option<Vec<VerbsNode>> {
    let layout = Layout::uniform(2, 16);
    let plan = [
        Grant::new(0..8, Access::Write),
        Grant::new(8..16, Access::Read),
    ];
    let options = VerbsOptions::from_env();
    let node0 = VerbsNode::with_plan(layout.clone(), NodeId(0), threads, &plan, options.clone());
    let mut nodes = vec![
        usable(test, node0)?,
        VerbsNode::with_options(layout, NodeId(1), threads, options).expect("node 1"),
    ];
    let infos: Vec<PeerInfo> = [(0, 1), (1, 0)]
        .into_iter()
        .map(|(from, to)| {
            let bytes = nodes[from].local_info_for(NodeId(to)).to_bytes();
            PeerInfo::from_bytes(&bytes).expect("our own bytes")
        })
        .collect();
    for (node, info) in nodes.iter_mut().zip(infos.iter().rev()) {
        let peers = BTreeMap::from([(info.info.node.0, info.clone())]);
        node.connect_peers(&peers).expect("connect");
    }
    Some(nodes)
}

/// Word `word` of `node`.
pub fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// `wait(work_id)`.
pub fn wait(work_id: WorkId) -> Op {
    Op::Wait { work_id }
}

/// The reply of a `wait` whose operations failed with `cause`.
pub fn work_failed(work_id: WorkId, cause: RdmaError) -> Reply {
    Reply::Failed(RdmaError::WorkFailed {
        work_id,
        cause: Box::new(cause),
    })
}

/// Node `id` of a three-node layout of 8 words per node, with one thread, or `None` without
/// a device.
pub fn trio_node(test: &str, id: u16) -> Option<VerbsNode> {
    let layout = Layout::uniform(3, 8);
    usable(
        test,
        VerbsNode::with_options(layout, NodeId(id), 1, VerbsOptions::from_env()),
    )
}

/// What `node` sends `peer`, through its byte form.
pub fn info_for(node: &VerbsNode, peer: u16) -> PeerInfo {
    PeerInfo::from_bytes(&node.local_info_for(NodeId(peer)).to_bytes()).expect("our bytes")
}

/// Nodes 0, 1 and 2 ([`trio_node`]), each connected to the two others, or `None` without a
/// device.
pub fn connected_trio(test: &str) -> Option<Vec<VerbsNode>> {
    let mut nodes = (0..3)
        .map(|id| trio_node(test, id))
        .collect::<Option<Vec<_>>>()?;
    for id in 0..3u16 {
        let peers: BTreeMap<u16, PeerInfo> = (0..3u16)
            .filter(|&p| p != id)
            .map(|p| (p, info_for(&nodes[usize::from(p)], id)))
            .collect();
        nodes[usize::from(id)]
            .connect_peers(&peers)
            .expect("connect");
    }
    Some(nodes)
}

/// `op` posted on `endpoint`, then a wait for `work_id`: the wait's reply.
pub fn post_and_wait(endpoint: &mut VerbsEndpoint<'_>, op: Op, work_id: WorkId) -> Reply {
    assert_eq!(endpoint.execute(&op), Reply::Done, "posted");
    endpoint.execute(&wait(work_id))
}

/// An inline put of `value` into `remote` and its wait (work id 1): the wait's reply.
pub fn put(endpoint: &mut VerbsEndpoint<'_>, remote: Loc, value: u64) -> Reply {
    let work_id = WorkId(1);
    let op = Op::PutInline {
        remote,
        value,
        work_id,
    };
    post_and_wait(endpoint, op, work_id)
}
