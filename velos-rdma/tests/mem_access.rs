//! Queue-pair write permission (`Op::SetWriteAccess`) on the in-process backend: a revoked
//! node's put fails with a remote access error, changes nothing and breaks its queue pair;
//! other nodes and other kinds of access are unaffected; a grant reconnects. And
//! `Op::Disconnect`: a node cut off neither reads nor atomically updates, nor is reached.

use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{Endpoint, Layout, Loc, NodeId, Op, RdmaError, Reply, Rmw, WorkId};

const D: WorkId = WorkId(1);

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

fn put(remote: Loc, value: u64) -> [Op; 2] {
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
    for mode in [Mode::Inline, Mode::Worker] {
        let fabric =
            MemFabric::with_options(Layout::uniform(3, 8), MemOptions { mode, jitter: None });
        let (mut owner, mut old, mut new) = (
            fabric.endpoint(NodeId(0)),
            fabric.endpoint(NodeId(1)),
            fabric.endpoint(NodeId(2)),
        );
        assert_eq!(run(&mut old, &put(w(0, 0), 1)), vec![Reply::Done; 2]);
        // Only node 2 (and node 0 itself) may write from now on.
        let revoke = Op::SetWriteAccess { writers: 0b101 };
        assert_eq!(owner.execute(&revoke), Reply::Done);
        let refused = run(&mut old, &put(w(0, 0), 2));
        let access = RdmaError::RemoteAccess { loc: w(0, 0) };
        assert!(failed_with(&refused[1], &access), "{refused:?}");
        assert_eq!(
            fabric.read(w(0, 0)),
            Ok(1),
            "the refused put changed nothing"
        );
        // The queue pair is broken: a get on it fails too.
        let get = [
            Op::Get {
                local: w(1, 0),
                remote: w(0, 0),
                work_id: D,
            },
            Op::Wait { work_id: D },
        ];
        let broken = RdmaError::QueuePairError { node: NodeId(0) };
        assert!(failed_with(&run(&mut old, &get)[1], &broken));
        // Node 2 writes and atomics of node 2 are unaffected.
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
        // A grant to node 1 reconnects its queue pair.
        assert_eq!(
            owner.execute(&Op::SetWriteAccess { writers: 0b111 }),
            Reply::Done
        );
        assert_eq!(run(&mut old, &put(w(0, 0), 3)), vec![Reply::Done; 2]);
        assert_eq!(run(&mut old, &get), vec![Reply::Done; 2]);
        assert_eq!((fabric.read(w(0, 0)), fabric.read(w(1, 0))), (Ok(3), Ok(3)));
    }
}

#[test]
fn bad_masks_are_typed_errors() {
    let fabric = MemFabric::new(Layout::uniform(2, 8), Mode::Inline);
    let mut endpoint = fabric.endpoint(NodeId(0));
    assert_eq!(
        endpoint.execute(&Op::SetWriteAccess { writers: 1 << 5 }),
        Reply::Failed(RdmaError::UnknownNode { node: NodeId(5) })
    );
    assert_eq!(run(&mut endpoint, &put(w(1, 0), 4)), vec![Reply::Done; 2]);
}

fn cas(remote: Loc, local: Loc) -> [Op; 2] {
    [
        Op::Atomic {
            local,
            remote,
            rmw: Rmw::Cas {
                expected: 0,
                new: 9,
            },
            work_id: D,
        },
        Op::Wait { work_id: D },
    ]
}

/// Node 0 cuts node 1 off: node 1's CAS on node 0's word fails and changes nothing, and so
/// does node 0's get of node 1's; node 2 reaches both as before; a new process in node 1's
/// place, reconnected by the join path, reaches node 0 again.
#[test]
fn a_disconnect_cuts_both_ways_until_the_join_path_reconnects() {
    for mode in [Mode::Inline, Mode::Worker] {
        let fabric =
            MemFabric::with_options(Layout::uniform(3, 8), MemOptions { mode, jitter: None });
        let (mut owner, mut cut, mut other) = (
            fabric.endpoint(NodeId(0)),
            fabric.endpoint(NodeId(1)),
            fabric.endpoint(NodeId(2)),
        );
        assert_eq!(
            owner.execute(&Op::Disconnect { node: NodeId(1) }),
            Reply::Done
        );
        let refused = run(&mut cut, &cas(w(0, 0), w(1, 0)));
        let broken = RdmaError::QueuePairError { node: NodeId(0) };
        assert!(failed_with(&refused[1], &broken), "{refused:?}");
        assert_eq!(
            fabric.read(w(0, 0)),
            Ok(0),
            "the refused CAS changed nothing"
        );
        let get = [
            Op::Get {
                local: w(0, 1),
                remote: w(1, 1),
                work_id: D,
            },
            Op::Wait { work_id: D },
        ];
        let back = RdmaError::QueuePairError { node: NodeId(1) };
        assert!(failed_with(&run(&mut owner, &get)[1], &back), "both ways");
        assert_eq!(
            run(&mut other, &cas(w(0, 0), w(2, 0))),
            vec![Reply::Done; 2]
        );
        assert_eq!(fabric.read(w(0, 0)), Ok(9), "node 2's CAS landed");
        // The join path: node 1's process crashes, a new one starts and connects.
        fabric.crash(NodeId(1));
        fabric.restart(NodeId(1));
        fabric.reconnect(NodeId(1), NodeId(0));
        fabric.reconnect(NodeId(0), NodeId(1));
        let mut new = fabric.endpoint(NodeId(1));
        assert_eq!(run(&mut new, &cas(w(0, 3), w(1, 0))), vec![Reply::Done; 2]);
        assert_eq!(fabric.read(w(0, 3)), Ok(9));
    }
}

/// Rule (disconnect the process met): a new process started in node 1's place connects
/// its own queue pairs; node 0, not told yet, cuts node 1 off (the old process, which it
/// knows was removed). The new process's queue pair towards node 0 is untouched, node 0's
/// towards it stays cut until node 0 meets it; and a cut after that cuts it both ways.
#[test]
fn a_disconnect_spares_a_new_process_not_met_yet() {
    for mode in [Mode::Inline, Mode::Worker] {
        let fabric =
            MemFabric::with_options(Layout::uniform(3, 8), MemOptions { mode, jitter: None });
        let mut owner = fabric.endpoint(NodeId(0));
        fabric.crash(NodeId(1));
        fabric.restart(NodeId(1));
        fabric.reconnect(NodeId(1), NodeId(0));
        let mut new = fabric.endpoint(NodeId(1));
        assert_eq!(
            owner.execute(&Op::Disconnect { node: NodeId(1) }),
            Reply::Done
        );
        assert_eq!(run(&mut new, &cas(w(0, 0), w(1, 0))), vec![Reply::Done; 2]);
        assert_eq!(
            fabric.read(w(0, 0)),
            Ok(9),
            "the new process reaches node 0"
        );
        let to_new = RdmaError::QueuePairError { node: NodeId(1) };
        assert!(failed_with(&run(&mut owner, &put(w(1, 1), 3))[1], &to_new));
        fabric.reconnect(NodeId(0), NodeId(1)); // node 0 meets it
        assert_eq!(run(&mut owner, &put(w(1, 1), 3)), vec![Reply::Done; 2]);
        assert_eq!(fabric.read(w(1, 1)), Ok(3));
        assert_eq!(
            owner.execute(&Op::Disconnect { node: NodeId(1) }),
            Reply::Done
        );
        let to_owner = RdmaError::QueuePairError { node: NodeId(0) };
        assert!(failed_with(
            &run(&mut new, &cas(w(0, 2), w(1, 0)))[1],
            &to_owner
        ));
    }
}

#[test]
fn a_disconnect_of_itself_or_of_no_node_is_a_typed_error() {
    let fabric = MemFabric::new(Layout::uniform(2, 8), Mode::Inline);
    let mut endpoint = fabric.endpoint(NodeId(0));
    for node in [NodeId(0), NodeId(7)] {
        assert_eq!(
            endpoint.execute(&Op::Disconnect { node }),
            Reply::Failed(RdmaError::UnknownNode { node })
        );
    }
    assert_eq!(run(&mut endpoint, &put(w(1, 0), 4)), vec![Reply::Done; 2]);
}
