//! Litmus programs of the rdma-rmw paper (Ambal et al.) on the in-process backend, run many
//! times with jitter: an outcome the paper forbids must never appear. (The backend is
//! stronger than the model, so allowed weak outcomes need not appear; the emulator checks
//! those.) Nodes are numbered from 0 here, from 1 in the paper.

use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{Layout, Loc, NodeId, Op, Reply, Rmw, WorkId};

mod common;
use common::Script;

const D: WorkId = WorkId(1);
const RUNS: u64 = 100;

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// Runs the threads `(node, ops)` on fresh 3-node fabrics, `RUNS` times per mode with a
/// different jitter seed each time, and hands each finished fabric and the threads'
/// replies to `check`.
fn litmus(threads: &[(u16, Vec<Op>)], check: impl Fn(&MemFabric, &[Vec<Reply>])) {
    for mode in [Mode::Inline, Mode::Worker] {
        for seed in 0..RUNS {
            let options = MemOptions {
                mode,
                jitter: Some(seed),
            };
            let fabric = MemFabric::with_options(Layout::uniform(3, 4), options);
            let procs = threads
                .iter()
                .map(|(node, ops)| (NodeId(*node), Script::new(ops.clone())))
                .collect();
            let replies: Vec<_> = fabric.run(procs).into_iter().map(|p| p.replies).collect();
            check(&fabric, &replies);
        }
    }
}

fn read(fabric: &MemFabric, loc: Loc) -> u64 {
    fabric.read(loc).expect("litmus locations are valid")
}

#[test]
fn fig2c_two_polls_acknowledge_both_puts() {
    let (x, z_src) = (w(0, 0), w(0, 1));
    let (y, z) = (w(1, 0), w(1, 1));
    let put = |remote, local| Op::Put {
        remote,
        local,
        work_id: D,
    };
    let poll = Op::Poll { node: NodeId(1) };
    let writer = vec![
        put(z, z_src),
        put(y, x),
        poll.clone(),
        poll,
        Op::Store { loc: x, value: 1 },
    ];
    litmus(&[(0, writer)], |fabric, _| assert_eq!(read(fabric, y), 0));
}

#[test]
fn fig2d_wait_orders_the_put_before_the_store() {
    let (x, y) = (w(0, 0), w(1, 0));
    let writer = vec![
        Op::Put {
            remote: y,
            local: x,
            work_id: D,
        },
        Op::Wait { work_id: D },
        Op::Store { loc: x, value: 1 },
    ];
    litmus(&[(0, writer)], |fabric, _| assert_eq!(read(fabric, y), 0));
}

#[test]
fn fig5_global_fences_forbid_both_reads_missing() {
    let (y, x) = (w(0, 0), w(1, 0));
    let thread = |remote, local| {
        vec![
            Op::PutInline {
                remote,
                value: 1,
                work_id: D,
            },
            Op::GlobalFence { node: remote.node },
            Op::Load { loc: local },
        ]
    };
    litmus(&[(0, thread(x, y)), (1, thread(y, x))], |_, replies| {
        let (r1, r2) = (&replies[0][2], &replies[1][2]);
        assert!(
            !(*r1 == Reply::Value(0) && *r2 == Reply::Value(0)),
            "forbidden: r1=0, r2=0"
        );
    });
}

#[test]
fn sec2_3_cpu_cas_is_atomic_against_a_store() {
    let x = w(0, 0);
    let cas = vec![Op::Cas {
        loc: x,
        expected: 0,
        new: 1,
    }];
    let store = vec![Op::Store { loc: x, value: 2 }];
    litmus(&[(0, cas), (0, store)], |fabric, replies| {
        let a = &replies[0][0];
        assert!(
            !(*a == Reply::Value(0) && read(fabric, x) == 1),
            "forbidden: a=0, x=1"
        );
    });
}

#[test]
fn fig6c_remote_cas_is_atomic_against_a_remote_faa() {
    let (a, b, x) = (w(0, 0), w(2, 0), w(1, 0));
    let rmw = |local, rmw| {
        vec![
            Op::Atomic {
                local,
                remote: x,
                rmw,
                work_id: D,
            },
            Op::Wait { work_id: D },
        ]
    };
    let cas = rmw(
        a,
        Rmw::Cas {
            expected: 0,
            new: 1,
        },
    );
    let faa = rmw(b, Rmw::Faa { add: 1 });
    litmus(&[(0, cas), (2, faa)], |fabric, _| {
        assert!(
            !(read(fabric, a) == 0 && read(fabric, x) == 1),
            "forbidden: a=0, x=1"
        );
    });
}

#[test]
fn fig7b_remote_faa_is_not_overtaken_by_a_later_put() {
    let (a, x, y) = (w(0, 0), w(1, 0), w(1, 1));
    let rdma = vec![
        Op::Atomic {
            local: a,
            remote: x,
            rmw: Rmw::Faa { add: 1 },
            work_id: D,
        },
        Op::PutInline {
            remote: y,
            value: 1,
            work_id: D,
        },
        Op::Wait { work_id: D },
    ];
    let cpu = vec![Op::Load { loc: y }, Op::Store { loc: x, value: 1 }];
    litmus(&[(0, rdma), (1, cpu)], |fabric, replies| {
        let b = &replies[1][0];
        assert!(
            !(read(fabric, a) == 1 && *b == Reply::Value(1)),
            "forbidden: a=1, b=1"
        );
    });
}
