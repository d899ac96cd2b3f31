//! Queue-pair write permission (`Op::SetWriteAccess`) on the in-process backend: a revoked
//! node's put fails with a remote access error, changes nothing and breaks its queue pair;
//! other nodes and other kinds of access are unaffected; a grant reconnects.

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
