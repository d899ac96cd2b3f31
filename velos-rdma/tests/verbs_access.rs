//! Queue-pair write permission (`Op::SetWriteAccess`) on real verbs, the single-process
//! fabric: the same behaviour as the in-process backend's (`tests/mem_access.rs`). A
//! revoked node's put is refused by the NIC (its responder lost remote write access): it
//! fails with a remote access error at its wait, changes nothing and breaks the queue
//! pair; other nodes, and reads and atomics of other nodes, are unaffected; a grant
//! reconnects, and so does a revoke and grant while the refused put is still pending.
//!
//! Without a device every test prints a skip message and passes, unless
//! `VELOS_REQUIRE_RDMA=1`.
#![cfg(feature = "verbs")]

mod verbs_common;

use velos_rdma::{Endpoint, Op, RdmaError, Reply, Rmw, WorkId};
use verbs_common::{fabric, w};

const D: WorkId = WorkId(1);

fn put(remote: velos_rdma::Loc, value: u64) -> [Op; 2] {
    [
        Op::PutInline {
            remote,
            value,
            work_id: D,
        },
        Op::Wait { work_id: D },
    ]
}

fn run(endpoint: &mut impl Endpoint, ops: &[Op]) -> Vec<Reply> {
    ops.iter().map(|op| endpoint.execute(op)).collect()
}

fn failed_with(reply: &Reply, cause: &RdmaError) -> bool {
    matches!(reply, Reply::Failed(RdmaError::WorkFailed { cause: c, .. }) if **c == *cause)
}

#[test]
fn revoke_refuses_puts_and_grant_reconnects() {
    let Some(fabric) = fabric("revoke_refuses_puts_and_grant_reconnects", 3, 8) else {
        return;
    };
    let node = velos_rdma::NodeId;
    let (mut owner, mut old, mut new) = (
        fabric.endpoint(node(0)).unwrap(),
        fabric.endpoint(node(1)).unwrap(),
        fabric.endpoint(node(2)).unwrap(),
    );
    assert_eq!(run(&mut old, &put(w(0, 0), 1)), vec![Reply::Done; 2]);
    // Only node 2 (and node 0 itself) may write from now on.
    assert_eq!(
        owner.execute(&Op::SetWriteAccess { writers: 0b101 }),
        Reply::Done
    );
    let refused = run(&mut old, &put(w(0, 0), 2));
    let access = RdmaError::RemoteAccess { loc: w(0, 0) };
    assert!(failed_with(&refused[1], &access), "{refused:?}");
    assert_eq!(
        fabric.read(w(0, 0)),
        Ok(1),
        "the refused put changed nothing"
    );
    // The queue pair is broken: a get on it fails too, while node 0 grants nothing new.
    let get = [
        Op::Get {
            local: w(1, 0),
            remote: w(0, 0),
            work_id: D,
        },
        Op::Wait { work_id: D },
    ];
    let broken = RdmaError::QueuePairError { node: node(0) };
    assert!(failed_with(&run(&mut old, &get)[1], &broken));
    // Node 1's reads of another node are unaffected.
    let get_2 = [
        Op::Get {
            local: w(1, 1),
            remote: w(2, 0),
            work_id: D,
        },
        Op::Wait { work_id: D },
    ];
    assert_eq!(run(&mut old, &get_2), vec![Reply::Done; 2]);
    // Node 2's writes and atomics are unaffected, and so are node 1's own words.
    assert_eq!(run(&mut new, &put(w(0, 1), 7)), vec![Reply::Done; 2]);
    let faa = [
        Op::Atomic {
            local: w(2, 0),
            remote: w(0, 2),
            rmw: Rmw::Faa { add: 1 },
            work_id: D,
        },
        Op::Wait { work_id: D },
    ];
    assert_eq!(run(&mut new, &faa), vec![Reply::Done; 2]);
    assert_eq!((fabric.read(w(0, 1)), fabric.read(w(0, 2))), (Ok(7), Ok(1)));
    // A grant to node 1 reconnects its queue pair.
    assert_eq!(
        owner.execute(&Op::SetWriteAccess { writers: 0b111 }),
        Reply::Done
    );
    assert_eq!(run(&mut old, &put(w(0, 0), 3)), vec![Reply::Done; 2]);
    assert_eq!(run(&mut old, &get), vec![Reply::Done; 2]);
    assert_eq!((fabric.read(w(0, 0)), fabric.read(w(1, 0))), (Ok(3), Ok(3)));
    // Revoked again, then refused again: the switch works after a reconnection too.
    assert_eq!(
        owner.execute(&Op::SetWriteAccess { writers: 0b001 }),
        Reply::Done
    );
    assert!(failed_with(&run(&mut old, &put(w(0, 0), 4))[1], &access));
    let access_1 = RdmaError::RemoteAccess { loc: w(0, 1) };
    assert!(failed_with(&run(&mut new, &put(w(0, 1), 8))[1], &access_1));
    assert_eq!((fabric.read(w(0, 0)), fabric.read(w(0, 1))), (Ok(3), Ok(7)));
}

#[test]
fn an_endpoint_made_after_a_revoke_is_refused_too() {
    let Some(fabric) = fabric("an_endpoint_made_after_a_revoke_is_refused_too", 2, 8) else {
        return;
    };
    let mut owner = fabric.endpoint(velos_rdma::NodeId(0)).unwrap();
    assert_eq!(
        owner.execute(&Op::SetWriteAccess { writers: 0b01 }),
        Reply::Done
    );
    // Its responders are registered with the access node 0 grants now.
    let mut late = fabric.endpoint(velos_rdma::NodeId(1)).unwrap();
    let access = RdmaError::RemoteAccess { loc: w(0, 3) };
    assert!(failed_with(&run(&mut late, &put(w(0, 3), 9))[1], &access));
    assert_eq!(fabric.read(w(0, 3)), Ok(0));
    assert_eq!(
        owner.execute(&Op::SetWriteAccess { writers: 0b11 }),
        Reply::Done
    );
    assert_eq!(run(&mut late, &put(w(0, 3), 9)), vec![Reply::Done; 2]);
    assert_eq!(fabric.read(w(0, 3)), Ok(9));
}

#[test]
fn bad_masks_are_typed_errors() {
    let Some(fabric) = fabric("bad_masks_are_typed_errors", 2, 8) else {
        return;
    };
    let mut endpoint = fabric.endpoint(velos_rdma::NodeId(0)).unwrap();
    assert_eq!(
        endpoint.execute(&Op::SetWriteAccess { writers: 1 << 5 }),
        Reply::Failed(RdmaError::UnknownNode {
            node: velos_rdma::NodeId(5)
        })
    );
    assert_eq!(run(&mut endpoint, &put(w(1, 0), 4)), vec![Reply::Done; 2]);
}
