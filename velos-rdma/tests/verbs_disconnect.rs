//! `Op::Disconnect` on real verbs (rule (retire): a member removed from the configuration
//! loses its queue pairs): three one-thread [`VerbsNode`]s in one process connect; node 0
//! cuts node 1 off. Node 1's CAS on node 0's word then fails and changes nothing (node 0's
//! responder for it is in the error state), node 0's get of node 1's word fails (its
//! requester is), and node 2 reaches node 0 as before. A disconnect of the node itself or
//! of a node not in the layout is a typed error.
//!
//! Skips without a device unless `VELOS_REQUIRE_RDMA=1` (as `verbs_nodes.rs`).
#![cfg(feature = "verbs")]

mod verbs_common;

use std::collections::BTreeMap;
use velos_rdma::verbs::PeerInfo;
use velos_rdma::{Endpoint, Loc, NodeId, Op, RdmaError, Reply, Rmw, WorkId};
use verbs_common::{connected_trio, info_for, post_and_wait, put, trio_node, w};

const D: WorkId = WorkId(1);

/// `op` posted on `endpoint` and waited for (work id `D`): the wait's reply.
fn run(endpoint: &mut velos_rdma::verbs::VerbsEndpoint<'_>, op: Op) -> Reply {
    post_and_wait(endpoint, op, D)
}

fn cas(remote: Loc, local: Loc) -> Op {
    Op::Atomic {
        local,
        remote,
        rmw: Rmw::Cas {
            expected: 0,
            new: 9,
        },
        work_id: D,
    }
}

fn failed(reply: &Reply) -> bool {
    matches!(reply, Reply::Failed(RdmaError::WorkFailed { .. }))
}

#[test]
fn a_disconnected_peer_neither_reaches_nor_is_reached() {
    let Some(nodes) = connected_trio("verbs_disconnect") else {
        return;
    };
    let (n0, n1, n2) = (&nodes[0], &nodes[1], &nodes[2]);
    let mut e0 = n0.endpoint(0).expect("endpoint");
    let mut e1 = n1.endpoint(0).expect("endpoint");
    let mut e2 = n2.endpoint(0).expect("endpoint");
    // Before: node 1 reaches node 0.
    assert_eq!(run(&mut e1, cas(w(0, 0), w(1, 0))), Reply::Done);
    assert_eq!(n0.read(w(0, 0)), Ok(9));
    n0.write(w(0, 0), 0).unwrap();

    assert_eq!(e0.execute(&Op::Disconnect { node: NodeId(1) }), Reply::Done);
    let refused = run(&mut e1, cas(w(0, 0), w(1, 0)));
    assert!(failed(&refused), "node 1's CAS after the cut: {refused:?}");
    assert_eq!(n0.read(w(0, 0)), Ok(0), "the refused CAS changed nothing");
    let get = Op::Get {
        local: w(0, 1),
        remote: w(1, 1),
        work_id: D,
    };
    n1.write(w(1, 1), 5).unwrap();
    let reply = e0.execute(&get);
    assert!(
        matches!(reply, Reply::Failed(_)) || failed(&e0.execute(&Op::Wait { work_id: D })),
        "node 0's get of node 1 after the cut"
    );
    assert_eq!(n0.read(w(0, 1)), Ok(0), "nothing read");
    // Node 2 is not concerned.
    assert_eq!(run(&mut e2, cas(w(0, 2), w(2, 0))), Reply::Done);
    assert_eq!(n0.read(w(0, 2)), Ok(9));
    for node in [NodeId(0), NodeId(7)] {
        assert_eq!(
            e0.execute(&Op::Disconnect { node }),
            Reply::Failed(RdmaError::UnknownNode { node })
        );
    }
}

#[test]
fn a_disconnect_spares_a_new_process_met_but_not_connected_yet() {
    const TEST: &str = "verbs_disconnect_parked";
    let Some(mut nodes) = connected_trio(TEST) else {
        return;
    };
    drop(nodes.pop()); // the process in node 2's place is gone
    let (n0, n1) = (&nodes[0], &nodes[1]);
    let mut e0 = n0.endpoint(0).expect("endpoint");
    let mut e1 = n1.endpoint(0).expect("endpoint");
    let mut fresh = trio_node(TEST, 2).expect("the device is still there");
    let answer0 = e0
        .rejoin(NodeId(2), &info_for(&fresh, 0))
        .expect("rejoin 0");
    let answer1 = e1
        .rejoin(NodeId(2), &info_for(&fresh, 1))
        .expect("rejoin 1");
    // Node 1's engine still knows the old process and cuts it off (it was removed).
    assert_eq!(e1.execute(&Op::Disconnect { node: NodeId(2) }), Reply::Done);
    let peers = BTreeMap::from([
        (0, PeerInfo::from_bytes(&answer0.to_bytes()).expect("bytes")),
        (1, PeerInfo::from_bytes(&answer1.to_bytes()).expect("bytes")),
    ]);
    fresh
        .connect_peers(&peers)
        .expect("the fresh node connects");
    e0.activate(NodeId(2)).expect("activate");
    e1.activate(NodeId(2)).expect("activate");
    // The new process reaches node 1 and node 1 reaches it.
    let mut e2 = fresh.endpoint(0).expect("endpoint");
    assert_eq!(run(&mut e2, cas(w(1, 2), w(2, 0))), Reply::Done);
    assert_eq!(n1.read(w(1, 2)), Ok(9), "the new process's CAS on node 1");
    assert_eq!(put(&mut e1, w(2, 3), 4), Reply::Done);
    assert_eq!(
        fresh.read(w(2, 3)),
        Ok(4),
        "node 1's put into the new process"
    );
    // A disconnect once it is connected cuts it off as any other.
    assert_eq!(e1.execute(&Op::Disconnect { node: NodeId(2) }), Reply::Done);
    let refused = run(&mut e2, cas(w(1, 4), w(2, 0)));
    assert!(failed(&refused), "after the cut: {refused:?}");
    assert_eq!(n1.read(w(1, 4)), Ok(0));
}
