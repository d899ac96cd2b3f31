//! A peer absent when a node connects, met late, on real verbs: three one-thread
//! [`VerbsNode`]s in one process connect; node 2 goes and a fresh node 2 joins while node
//! 1 does not answer: it connects to node 0 only ([`VerbsNode::connect_reached`]), its
//! requests towards node 1 refused; node 1 answers later, and the fresh node connects the
//! very queue pairs it had sent it ([`VerbsEndpoint::connect_late`]): then all three reach
//! each other's memory.
//!
//! Skips without a device unless `VELOS_REQUIRE_RDMA=1` (as `verbs_nodes.rs`).
//!
//! [`VerbsEndpoint::connect_late`]: velos_rdma::verbs::VerbsEndpoint::connect_late
#![cfg(feature = "verbs")]

mod verbs_common;

use std::collections::BTreeMap;
use velos_rdma::verbs::{PeerInfo, VerbsError};
use velos_rdma::{NodeId, RdmaError, Reply};
use verbs_common::{connected_trio, info_for, put, trio_node, w};

const TEST: &str = "verbs_late";

fn refused(reply: Reply) -> bool {
    matches!(reply, Reply::Failed(RdmaError::WorkFailed { cause, .. })
        if matches!(*cause, RdmaError::QueuePairError { .. }))
}

#[test]
fn a_peer_absent_at_the_join_is_connected_once_it_answers() {
    let Some(mut nodes) = connected_trio(TEST) else {
        return;
    };
    drop(nodes.pop()); // the process in node 2's place is gone
    let (n0, n1) = (&nodes[0], &nodes[1]);
    let mut e0 = n0.endpoint(0).expect("endpoint");
    let mut e1 = n1.endpoint(0).expect("endpoint");

    // A fresh node 2 meets node 0 only: node 1 does not answer.
    let mut fresh = trio_node(TEST, 2).expect("the device is still there");
    let answer0 = e0
        .rejoin(NodeId(2), &info_for(&fresh, 0))
        .expect("rejoin 0");
    let peers = BTreeMap::from([(0, PeerInfo::from_bytes(&answer0.to_bytes()).expect("bytes"))]);
    let absent = fresh.connect_reached(&peers).expect("connects to node 0");
    assert_eq!(absent, [NodeId(1)]);
    assert_eq!(fresh.absent(), [NodeId(1)]);
    e0.activate(NodeId(2)).expect("activate");
    let mut e2 = fresh.endpoint(0).expect("endpoint");
    assert_eq!(put(&mut e2, w(0, 1), 3), Reply::Done);
    assert_eq!(n0.read(w(0, 1)), Ok(3));
    assert!(refused(put(&mut e2, w(1, 1), 4)), "node 1 absent: refused");

    // Node 1 answers late: it takes the information node 2 sent it at the join.
    let answer1 = e1
        .rejoin(NodeId(2), &info_for(&fresh, 1))
        .expect("rejoin 1");
    let answer1 = PeerInfo::from_bytes(&answer1.to_bytes()).expect("bytes");
    e2.connect_late(NodeId(1), &answer1).expect("connect late");
    e1.activate(NodeId(2)).expect("activate");
    assert!(fresh.absent().is_empty());
    assert_eq!(put(&mut e2, w(1, 1), 5), Reply::Done);
    assert_eq!(n1.read(w(1, 1)), Ok(5));
    assert_eq!(put(&mut e1, w(2, 2), 6), Reply::Done);
    assert_eq!(fresh.read(w(2, 2)), Ok(6));
    assert_eq!(put(&mut e0, w(2, 3), 7), Reply::Done);
    assert_eq!(fresh.read(w(2, 3)), Ok(7));

    // Typed refusals: a peer connected already, this node itself, another node's
    // information.
    assert!(matches!(
        e2.connect_late(NodeId(1), &answer1),
        Err(VerbsError::NotAbsent { .. })
    ));
    assert!(matches!(
        e2.connect_late(NodeId(2), &answer1),
        Err(VerbsError::UnknownNode { .. })
    ));
    assert_eq!(put(&mut e2, w(1, 2), 8), Reply::Done, "still connected");
}
