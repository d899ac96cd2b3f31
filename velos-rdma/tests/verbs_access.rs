//! Queue-pair write permission (`Op::SetWriteAccess`) on real verbs, the single-process
//! fabric: the same behaviour as the in-process backend's (`tests/mem_access.rs`). A
//! revoked node's put is refused by the NIC (its responder lost remote write access): it
//! fails with a remote access error at its wait, changes nothing and breaks the queue
//! pair; other nodes' writes and atomics, and the revoked node's reads of other nodes,
//! are unaffected; a grant reconnects, and a revoke after the reconnection refuses again;
//! an endpoint made after a revoke is refused as well.
//!
//! Without a device every test prints a skip message and passes, unless
//! `VELOS_REQUIRE_RDMA=1`.
#![cfg(feature = "verbs")]

mod verbs_common;

use velos_rdma::verbs::VerbsEndpoint;
use velos_rdma::{Endpoint, Loc, NodeId, Op, RdmaError, Reply, Rmw, WorkId};
use verbs_common::{fabric, post_and_wait, put, w, work_failed};

const D: WorkId = WorkId(1);

/// A get of `remote` into `local` and its wait: the wait's reply.
fn get(endpoint: &mut VerbsEndpoint<'_>, local: Loc, remote: Loc) -> Reply {
    let op = Op::Get {
        local,
        remote,
        work_id: D,
    };
    post_and_wait(endpoint, op, D)
}

/// `SetWriteAccess { writers }` by `owner`, which must take effect.
fn grant(owner: &mut VerbsEndpoint<'_>, writers: u64) {
    assert_eq!(owner.execute(&Op::SetWriteAccess { writers }), Reply::Done);
}

/// The reply of the wait for a put the target refused at `loc`.
fn refused(loc: Loc) -> Reply {
    work_failed(D, RdmaError::RemoteAccess { loc })
}

#[test]
fn revoke_refuses_puts_and_grant_reconnects() {
    let Some(fabric) = fabric("revoke_refuses_puts_and_grant_reconnects", 3, 8) else {
        return;
    };
    let (mut owner, mut old, mut new) = (
        fabric.endpoint(NodeId(0)).unwrap(),
        fabric.endpoint(NodeId(1)).unwrap(),
        fabric.endpoint(NodeId(2)).unwrap(),
    );
    assert_eq!(put(&mut old, w(0, 0), 1), Reply::Done);
    // Only node 2 (and node 0 itself) may write from now on.
    grant(&mut owner, 0b101);
    assert_eq!(put(&mut old, w(0, 0), 2), refused(w(0, 0)));
    assert_eq!(
        fabric.read(w(0, 0)),
        Ok(1),
        "the refused put changed nothing"
    );
    // The queue pair is broken: a get on it fails too, while node 0 grants nothing new.
    let broken = work_failed(D, RdmaError::QueuePairError { node: NodeId(0) });
    assert_eq!(get(&mut old, w(1, 0), w(0, 0)), broken);
    // Node 1's reads of another node are unaffected.
    assert_eq!(get(&mut old, w(1, 1), w(2, 0)), Reply::Done);
    // Node 2's writes and atomics are unaffected.
    assert_eq!(put(&mut new, w(0, 1), 7), Reply::Done);
    let faa = Op::Atomic {
        local: w(2, 0),
        remote: w(0, 2),
        rmw: Rmw::Faa { add: 1 },
        work_id: D,
    };
    assert_eq!(post_and_wait(&mut new, faa, D), Reply::Done);
    assert_eq!((fabric.read(w(0, 1)), fabric.read(w(0, 2))), (Ok(7), Ok(1)));
    // A grant to node 1 reconnects its queue pair.
    grant(&mut owner, 0b111);
    assert_eq!(put(&mut old, w(0, 0), 3), Reply::Done);
    assert_eq!(get(&mut old, w(1, 0), w(0, 0)), Reply::Done);
    assert_eq!((fabric.read(w(0, 0)), fabric.read(w(1, 0))), (Ok(3), Ok(3)));
    // Revoked again, then refused again: the switch works after a reconnection too.
    grant(&mut owner, 0b001);
    assert_eq!(put(&mut old, w(0, 0), 4), refused(w(0, 0)));
    assert_eq!(put(&mut new, w(0, 1), 8), refused(w(0, 1)));
    assert_eq!((fabric.read(w(0, 0)), fabric.read(w(0, 1))), (Ok(3), Ok(7)));
}

#[test]
fn an_endpoint_made_after_a_revoke_is_refused_too() {
    let Some(fabric) = fabric("an_endpoint_made_after_a_revoke_is_refused_too", 2, 8) else {
        return;
    };
    let mut owner = fabric.endpoint(NodeId(0)).unwrap();
    grant(&mut owner, 0b01);
    // Its responders are registered with the access node 0 grants now.
    let mut late = fabric.endpoint(NodeId(1)).unwrap();
    assert_eq!(put(&mut late, w(0, 3), 9), refused(w(0, 3)));
    assert_eq!(fabric.read(w(0, 3)), Ok(0));
    grant(&mut owner, 0b11);
    assert_eq!(put(&mut late, w(0, 3), 9), Reply::Done);
    assert_eq!(fabric.read(w(0, 3)), Ok(9));
}

#[test]
fn bad_masks_are_typed_errors() {
    let Some(fabric) = fabric("bad_masks_are_typed_errors", 2, 8) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).unwrap();
    assert_eq!(
        endpoint.execute(&Op::SetWriteAccess { writers: 1 << 5 }),
        Reply::Failed(RdmaError::UnknownNode { node: NodeId(5) })
    );
    assert_eq!(put(&mut endpoint, w(1, 0), 4), Reply::Done);
}
