//! Region plans on the in-process backend: what a plan grants works, what it does not
//! grant fails with a remote access error, changes nothing and breaks that queue pair.

use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::plan::{Access, Grant};
use velos_rdma::{Layout, Loc, NodeId, Op, RdmaError, Reply, Rmw, WorkId};

mod common;
use common::Script;

const D: WorkId = WorkId(1);

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// Node 0: words 0..2 read+atomic for all, 2..4 writable by node 1 only and readable by
/// node 2, the rest local. Nodes 1 and 2: everything for everyone.
fn fabric(mode: Mode) -> MemFabric {
    let everything = vec![Grant::new(0..8, Access::All)];
    let plans = vec![
        vec![
            Grant::new(0..2, Access::ReadAtomic),
            Grant::new(2..4, Access::ReadWrite).only(NodeId(1)),
            Grant::new(2..4, Access::Read).only(NodeId(2)),
        ],
        everything.clone(),
        everything,
    ];
    let options = MemOptions { mode, jitter: None };
    MemFabric::with_plans(Layout::uniform(3, 8), options, plans).expect("a valid plan")
}

fn script(fabric: &MemFabric, node: u16, ops: Vec<Op>) -> Vec<Reply> {
    fabric
        .run(vec![(NodeId(node), Script::new(ops))])
        .remove(0)
        .replies
}

fn refused(loc: Loc) -> Reply {
    Reply::Failed(RdmaError::WorkFailed {
        work_id: D,
        cause: Box::new(RdmaError::RemoteAccess { loc }),
    })
}

#[test]
fn granted_accesses_work() {
    for mode in [Mode::Inline, Mode::Worker] {
        let f = fabric(mode);
        f.write(w(0, 0), 5).unwrap();
        let cas = Rmw::Cas {
            expected: 5,
            new: 6,
        };
        let ops = vec![
            Op::Atomic {
                local: w(1, 0),
                remote: w(0, 0),
                rmw: cas,
                work_id: D,
            },
            Op::Wait { work_id: D },
            Op::PutInline {
                remote: w(0, 2),
                value: 9,
                work_id: D,
            },
            Op::Wait { work_id: D },
            Op::Get {
                local: w(1, 1),
                remote: w(0, 1),
                work_id: D,
            },
            Op::Wait { work_id: D },
        ];
        assert!(script(&f, 1, ops).iter().all(|r| *r == Reply::Done));
        assert_eq!((f.read(w(0, 0)), f.read(w(0, 2))), (Ok(6), Ok(9)));
        let read = vec![
            Op::Get {
                local: w(2, 0),
                remote: w(0, 2),
                work_id: D,
            },
            Op::Wait { work_id: D },
        ];
        assert_eq!(script(&f, 2, read), [Reply::Done, Reply::Done]);
        assert_eq!(f.read(w(2, 0)), Ok(9));
    }
}

#[test]
fn an_access_the_plan_does_not_grant_fails_and_changes_nothing() {
    for mode in [Mode::Inline, Mode::Worker] {
        // Node 2 writes into node 1's buffer: refused, and the pair 2 → 0 is broken.
        let f = fabric(mode);
        let ops = vec![
            Op::PutInline {
                remote: w(0, 2),
                value: 7,
                work_id: D,
            },
            Op::Wait { work_id: D },
            Op::Get {
                local: w(2, 0),
                remote: w(0, 0),
                work_id: D,
            },
            Op::Wait { work_id: D },
        ];
        let broken = Reply::Failed(RdmaError::WorkFailed {
            work_id: D,
            cause: Box::new(RdmaError::QueuePairError { node: NodeId(0) }),
        });
        assert_eq!(
            script(&f, 2, ops),
            [Reply::Done, refused(w(0, 2)), Reply::Done, broken]
        );
        assert_eq!(f.read(w(0, 2)), Ok(0));
        // A plain write of an acceptor-like word, a read of a local-only word.
        for (op, loc) in [
            (
                Op::PutInline {
                    remote: w(0, 1),
                    value: 1,
                    work_id: D,
                },
                w(0, 1),
            ),
            (
                Op::Get {
                    local: w(1, 0),
                    remote: w(0, 5),
                    work_id: D,
                },
                w(0, 5),
            ),
            (
                Op::Atomic {
                    local: w(1, 0),
                    remote: w(0, 2),
                    rmw: Rmw::Faa { add: 1 },
                    work_id: D,
                },
                w(0, 2),
            ),
        ] {
            let f = fabric(mode);
            assert_eq!(
                script(&f, 1, vec![op, Op::Wait { work_id: D }])[1],
                refused(loc)
            );
            assert_eq!(f.snapshot()[0], vec![0; 8]);
        }
    }
}

#[test]
fn a_bad_plan_is_refused_with_its_reason() {
    let options = MemOptions::default();
    let e = MemFabric::with_plans(Layout::uniform(2, 8), options, vec![vec![]]).unwrap_err();
    assert!(e.contains("1 plans for 2 nodes"), "{e}");
    let outside = vec![vec![Grant::new(0..9, Access::Read)], vec![]];
    let e = MemFabric::with_plans(Layout::uniform(2, 8), options, outside).unwrap_err();
    assert!(e.contains("the plan of") && e.contains("outside"), "{e}");
}

/// Accesses of several words: inside one grant they go through; across two grants that
/// both allow them too; the first word no grant allows, or past the region, is the
/// failure, and a refused put writes none of its words.
#[test]
fn a_many_word_access_is_allowed_word_by_word_and_refused_at_its_first_bad_word() {
    for mode in [Mode::Inline, Mode::Worker] {
        let put = |at: u32, n: u64| Op::PutWords {
            remote: w(0, at),
            words: (1..=n).collect::<Vec<u64>>().into(),
            work_id: D,
        };
        let wait = Op::Wait { work_id: D };
        // Node 1 may write words 2..4 of node 0: two words go in, three stop at word 4.
        let f = fabric(mode);
        assert_eq!(
            script(&f, 1, vec![put(2, 2), wait.clone()]),
            [Reply::Done, Reply::Done]
        );
        assert_eq!(&f.snapshot()[0][2..4], [1, 2]);
        let f = fabric(mode);
        assert_eq!(
            script(&f, 1, vec![put(2, 3), wait.clone()])[1],
            refused(w(0, 4))
        );
        assert_eq!(f.snapshot()[0], vec![0; 8], "a refused put writes nothing");
        // Node 2 reads words 0..4 of node 0 across two grants, both readable for it.
        let f = fabric(mode);
        let get = |remote: Loc, count: u32| Op::GetWords {
            local: w(2, 0),
            remote,
            count,
            work_id: D,
        };
        assert_eq!(
            script(&f, 2, vec![get(w(0, 0), 4), wait.clone()]),
            [Reply::Done, Reply::Done]
        );
        // A misaligned first word: it is the failure, whatever follows.
        let f = fabric(mode);
        let odd = Loc {
            offset: 4,
            ..w(1, 0)
        };
        assert_eq!(
            script(&f, 2, vec![get(odd, 2), wait.clone()])[1],
            Reply::Failed(RdmaError::WorkFailed {
                work_id: D,
                cause: Box::new(RdmaError::MisalignedAtomic { loc: odd }),
            })
        );
        // Past the region: the first word beyond it is the failure.
        let f = fabric(mode);
        assert_eq!(
            script(&f, 2, vec![get(w(1, 6), 4), wait.clone()])[1],
            Reply::Failed(RdmaError::WorkFailed {
                work_id: D,
                cause: Box::new(RdmaError::OutOfBounds { loc: w(1, 8) }),
            })
        );
    }
}
