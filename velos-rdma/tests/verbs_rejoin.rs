//! A new process in a node's place, on real verbs: three one-thread [`VerbsNode`]s in one
//! process connect; node 2 goes (dropped, like a killed process) and a fresh node 2 takes
//! its place; nodes 0 and 1 reconnect to it through [`VerbsEndpoint::rejoin`] on their
//! live endpoints, which refuse requests towards it until [`VerbsEndpoint::activate`];
//! then all three reach each other's memory again.
//!
//! Skips without a device unless `VELOS_REQUIRE_RDMA=1` (as `verbs_nodes.rs`).
//!
//! [`VerbsEndpoint::rejoin`]: velos_rdma::verbs::VerbsEndpoint::rejoin
//! [`VerbsEndpoint::activate`]: velos_rdma::verbs::VerbsEndpoint::activate
#![cfg(feature = "verbs")]

mod verbs_common;

use std::collections::BTreeMap;
use velos_rdma::verbs::{PeerInfo, VerbsError};
use velos_rdma::{Endpoint, NodeId, Op, RdmaError, Reply, Rmw, WorkId};
use verbs_common::{connected_trio, info_for, put, trio_node, w};

const D: WorkId = WorkId(1);
const TEST: &str = "verbs_rejoin";

#[test]
fn a_fresh_process_in_a_nodes_place_is_reached_once_both_sides_connected() {
    let Some(mut nodes) = connected_trio(TEST) else {
        return;
    };
    let old = nodes.pop().expect("node 2");
    let (n0, n1) = (&nodes[0], &nodes[1]);
    let mut e0 = n0.endpoint(0).expect("endpoint");
    let mut e1 = n1.endpoint(0).expect("endpoint");
    assert_eq!(put(&mut e0, w(2, 1), 7), Reply::Done);
    assert_eq!(old.read(w(2, 1)), Ok(7));
    drop(old); // the process in node 2's place is gone, memory and queue pairs

    // A fresh process for node 2: blank memory, new queue pairs.
    let mut fresh = trio_node(TEST, 2).expect("the device is still there");
    assert_eq!(fresh.read(w(2, 1)), Ok(0));
    let answer0 = e0
        .rejoin(NodeId(2), &info_for(&fresh, 0))
        .expect("rejoin 0");
    let answer1 = e1
        .rejoin(NodeId(2), &info_for(&fresh, 1))
        .expect("rejoin 1");
    // Parked until the new process has connected its side: refused, not posted.
    match put(&mut e0, w(2, 1), 8) {
        Reply::Failed(RdmaError::WorkFailed { cause, .. })
            if matches!(*cause, RdmaError::QueuePairError { .. }) => {}
        other => panic!("a parked queue pair took a request: {other:?}"),
    }
    let peers = BTreeMap::from([
        (0, PeerInfo::from_bytes(&answer0.to_bytes()).expect("bytes")),
        (1, PeerInfo::from_bytes(&answer1.to_bytes()).expect("bytes")),
    ]);
    fresh
        .connect_peers(&peers)
        .expect("the fresh node connects");
    e0.activate(NodeId(2)).expect("activate");
    e1.activate(NodeId(2)).expect("activate");

    // Both old nodes reach the new memory; the new node reaches theirs.
    assert_eq!(put(&mut e0, w(2, 1), 9), Reply::Done);
    assert_eq!(fresh.read(w(2, 1)), Ok(9));
    assert_eq!(put(&mut e1, w(2, 2), 10), Reply::Done);
    assert_eq!(fresh.read(w(2, 2)), Ok(10));
    n0.write(w(0, 3), 5).unwrap();
    let mut e2 = fresh.endpoint(0).expect("endpoint");
    let cas = Op::Atomic {
        local: w(2, 4),
        remote: w(0, 3),
        rmw: Rmw::Cas {
            expected: 5,
            new: 6,
        },
        work_id: D,
    };
    assert_eq!(e2.execute(&cas), Reply::Done);
    assert_eq!(e2.execute(&Op::Wait { work_id: D }), Reply::Done);
    assert_eq!(e2.execute(&Op::Load { loc: w(2, 4) }), Reply::Value(5));
    assert_eq!(n0.read(w(0, 3)), Ok(6));
    assert_eq!(put(&mut e2, w(1, 5), 11), Reply::Done);
    assert_eq!(n1.read(w(1, 5)), Ok(11));
    drop(e2);

    // Typed refusals: this node itself, a node not in the layout, information of another
    // node.
    let me = info_for(n0, 0);
    assert!(matches!(
        e0.rejoin(NodeId(0), &me),
        Err(VerbsError::UnknownNode { .. })
    ));
    assert!(matches!(
        e0.rejoin(NodeId(7), &me),
        Err(VerbsError::UnknownNode { .. })
    ));
    assert!(matches!(
        e0.rejoin(NodeId(1), &me),
        Err(VerbsError::PeerMismatch { .. })
    ));
    // A refused rejoin leaves the queue pair as it was.
    assert_eq!(put(&mut e0, w(1, 6), 12), Reply::Done);
    assert_eq!(n1.read(w(1, 6)), Ok(12));
}
