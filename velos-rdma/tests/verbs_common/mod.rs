//! What the verbs backend's tests share: opening a device or skipping, a fabric, and a
//! connected pair of nodes under a region plan.
#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use velos_rdma::verbs::{
    Access, Grant, PeerInfo, VerbsError, VerbsFabric, VerbsNode, VerbsOptions,
};
use velos_rdma::{Layout, Loc, NodeId, Op, RdmaError, Reply, WorkId};

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
