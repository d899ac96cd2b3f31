//! The in-process backend: operation semantics, failures, faults and `run`, in every mode.

use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{Endpoint, Layout, Loc, NodeId, Op, RdmaError, Reply, Rmw, WorkId};

mod common;
use common::Script;

const D: WorkId = WorkId(1);
const E: WorkId = WorkId(2);

/// Every way to build a fabric: inline, worker, worker with jitter.
const OPTIONS: [MemOptions; 3] = [
    MemOptions {
        mode: Mode::Inline,
        jitter: None,
    },
    MemOptions {
        mode: Mode::Worker,
        jitter: None,
    },
    MemOptions {
        mode: Mode::Worker,
        jitter: Some(0x5EED),
    },
];

/// One fabric of `nodes` nodes with 8 words each, per entry of [`OPTIONS`].
fn fabrics(nodes: u16) -> impl Iterator<Item = MemFabric> {
    OPTIONS
        .into_iter()
        .map(move |options| MemFabric::with_options(Layout::uniform(nodes, 8), options))
}

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// Runs `ops` on a thread of `node` and returns the replies.
fn script(fabric: &MemFabric, node: u16, ops: Vec<Op>) -> Vec<Reply> {
    let mut done = fabric.run(vec![(NodeId(node), Script::new(ops))]);
    done.remove(0).replies
}

fn put_inline(remote: Loc, value: u64, work_id: WorkId) -> Op {
    Op::PutInline {
        remote,
        value,
        work_id,
    }
}

fn get(local: Loc, remote: Loc, work_id: WorkId) -> Op {
    Op::Get {
        local,
        remote,
        work_id,
    }
}

fn atomic(local: Loc, remote: Loc, rmw: Rmw) -> Op {
    Op::Atomic {
        local,
        remote,
        rmw,
        work_id: D,
    }
}

fn work_failed(work_id: WorkId, cause: RdmaError) -> Reply {
    Reply::Failed(RdmaError::WorkFailed {
        work_id,
        cause: Box::new(cause),
    })
}

#[test]
fn put_get_and_inline_put() {
    for fabric in fabrics(2) {
        let replies = script(
            &fabric,
            0,
            vec![
                Op::Store {
                    loc: w(0, 0),
                    value: 5,
                },
                Op::Put {
                    remote: w(1, 0),
                    local: w(0, 0),
                    work_id: D,
                },
                put_inline(w(1, 1), 9, D),
                Op::Wait { work_id: D },
                get(w(0, 2), w(1, 1), E),
                Op::Wait { work_id: E },
                Op::Load { loc: w(0, 2) },
            ],
        );
        let mut expected = vec![Reply::Done; 6];
        expected.push(Reply::Value(9));
        assert_eq!(replies, expected, "{:?}", fabric.options());
        assert_eq!(fabric.read(w(1, 0)), Ok(5));
        assert_eq!(fabric.read(w(1, 1)), Ok(9));
        assert_eq!(fabric.snapshot()[1][..2], [5, 9]);
    }
}

#[test]
fn remote_cas_hit_and_miss_and_faa_wraps_around() {
    for fabric in fabrics(2) {
        fabric.write(w(1, 1), u64::MAX - 1).unwrap();
        let wait = || Op::Wait { work_id: D };
        let replies = script(
            &fabric,
            0,
            vec![
                atomic(
                    w(0, 0),
                    w(1, 0),
                    Rmw::Cas {
                        expected: 0,
                        new: 1,
                    },
                ),
                wait(),
                Op::Load { loc: w(0, 0) },
                atomic(
                    w(0, 1),
                    w(1, 0),
                    Rmw::Cas {
                        expected: 0,
                        new: 2,
                    },
                ),
                wait(),
                Op::Load { loc: w(0, 1) },
                atomic(w(0, 2), w(1, 1), Rmw::Faa { add: 3 }),
                wait(),
                Op::Load { loc: w(0, 2) },
            ],
        );
        let loads: Vec<_> = replies.iter().skip(2).step_by(3).cloned().collect();
        assert_eq!(
            loads,
            [Reply::Value(0), Reply::Value(1), Reply::Value(u64::MAX - 1)]
        );
        assert_eq!(fabric.read(w(1, 0)), Ok(1), "the missed CAS wrote nothing");
        assert_eq!(fabric.read(w(1, 1)), Ok(1), "FAA wraps around");
    }
}

#[test]
fn put_reads_its_local_word_when_the_nic_executes_it() {
    for fabric in fabrics(2) {
        fabric.write(w(1, 0), 77).unwrap();
        // At post time the put's local word is still 0; the get before it on the same
        // queue pair fills it before the put executes.
        let ops = vec![
            get(w(0, 0), w(1, 0), D),
            Op::Put {
                remote: w(1, 1),
                local: w(0, 0),
                work_id: D,
            },
            Op::Wait { work_id: D },
        ];
        assert_eq!(script(&fabric, 0, ops), vec![Reply::Done; 3]);
        assert_eq!(fabric.read(w(1, 1)), Ok(77));
    }
}

#[test]
fn queue_pair_is_fifo() {
    for fabric in fabrics(2) {
        let ops = (1..=100)
            .flat_map(|value| {
                [
                    put_inline(w(1, 0), value, D),
                    get(w(0, 0), w(1, 0), E),
                    Op::Wait { work_id: E },
                    Op::Load { loc: w(0, 0) },
                ]
            })
            .collect();
        let replies = script(&fabric, 0, ops);
        let loads: Vec<_> = replies.into_iter().skip(3).step_by(4).collect();
        assert_eq!(loads, (1..=100).map(Reply::Value).collect::<Vec<_>>());
    }
}

#[test]
fn wait_without_operations_returns_at_once() {
    for fabric in fabrics(1) {
        assert_eq!(
            script(&fabric, 0, vec![Op::Wait { work_id: D }]),
            [Reply::Done]
        );
    }
}

#[test]
fn misaligned_atomic_fails_at_the_wait_once() {
    for fabric in fabrics(2) {
        let remote = Loc {
            node: NodeId(1),
            offset: 4,
        };
        let replies = script(
            &fabric,
            0,
            vec![
                atomic(w(0, 0), remote, Rmw::Faa { add: 1 }),
                Op::Wait { work_id: D },
                Op::Wait { work_id: D },
            ],
        );
        let cause = RdmaError::MisalignedAtomic { loc: remote };
        assert_eq!(replies, [Reply::Done, work_failed(D, cause), Reply::Done]);
    }
}

/// A work id awaited, then posted again (a CAS cell, a heartbeat read: the engine reuses
/// its ids every turn): each round's wait and test see that round's operations only, a
/// failure is reported in the round that had it and never again.
#[test]
fn a_reused_work_id_reports_each_round_alone() {
    for fabric in fabrics(3) {
        let replies = script(
            &fabric,
            0,
            vec![
                // Round 1: towards node 1, fine.
                put_inline(w(1, 0), 7, D),
                Op::Wait { work_id: D },
                Op::Test { work_id: D },
                // Round 2: towards node 2 this time, out of bounds (waited for: a NIC
                // worker may not have run it at a test right after the post).
                get(w(0, 1), w(2, 100), D),
                Op::Wait { work_id: D },
                Op::Test { work_id: D },
                // Round 3: towards node 1 again, fine: the old failure stays reported.
                get(w(0, 2), w(1, 0), D),
                Op::Wait { work_id: D },
                Op::TestLoad {
                    work_id: D,
                    loc: w(0, 2),
                },
            ],
        );
        let cause = RdmaError::OutOfBounds { loc: w(2, 100) };
        assert_eq!(
            replies,
            [
                Reply::Done,
                Reply::Done,
                Reply::Value(1),
                Reply::Done,
                work_failed(D, cause),
                Reply::Value(1),
                Reply::Done,
                Reply::Done,
                Reply::Value(7),
            ]
        );
    }
}

#[test]
fn out_of_bounds_fails_at_the_wait_of_its_work_id() {
    for fabric in fabrics(2) {
        let replies = script(
            &fabric,
            0,
            vec![
                put_inline(w(1, 0), 1, E),
                get(w(0, 0), w(1, 100), D),
                get(w(0, 100), w(1, 0), D),
                Op::Wait { work_id: E },
                Op::Wait { work_id: D },
            ],
        );
        let first = RdmaError::OutOfBounds { loc: w(1, 100) };
        assert_eq!(
            replies,
            [
                Reply::Done,
                Reply::Done,
                Reply::Done,
                Reply::Done,
                work_failed(D, first)
            ]
        );
    }
}

#[test]
fn posting_fails_at_once_without_a_queue_pair_or_with_a_foreign_local_word() {
    for fabric in fabrics(2) {
        let replies = script(
            &fabric,
            0,
            vec![
                put_inline(w(5, 0), 1, D),
                get(w(1, 0), w(1, 1), D),
                Op::GlobalFence { node: NodeId(5) },
                Op::Wait { work_id: D },
            ],
        );
        assert_eq!(
            replies,
            [
                Reply::Failed(RdmaError::UnknownNode { node: NodeId(5) }),
                Reply::Failed(RdmaError::NotLocal {
                    loc: w(1, 0),
                    node: NodeId(0)
                }),
                Reply::Failed(RdmaError::UnknownNode { node: NodeId(5) }),
                Reply::Done,
            ]
        );
    }
}

#[test]
fn cpu_operations_are_local_and_checked() {
    for fabric in fabrics(2) {
        let misaligned = Loc {
            node: NodeId(0),
            offset: 3,
        };
        let replies = script(
            &fabric,
            0,
            vec![
                Op::Load { loc: w(1, 0) },
                Op::Store {
                    loc: w(1, 0),
                    value: 1,
                },
                Op::Load { loc: w(0, 8) },
                Op::Load { loc: misaligned },
                Op::Store {
                    loc: w(0, 0),
                    value: 4,
                },
                Op::Cas {
                    loc: w(0, 0),
                    expected: 4,
                    new: 5,
                },
                Op::Cas {
                    loc: w(0, 0),
                    expected: 4,
                    new: 6,
                },
                Op::Mfence,
                Op::Load { loc: w(0, 0) },
            ],
        );
        let not_local = Reply::Failed(RdmaError::NotLocal {
            loc: w(1, 0),
            node: NodeId(0),
        });
        assert_eq!(
            replies,
            [
                not_local.clone(),
                not_local,
                Reply::Failed(RdmaError::OutOfBounds { loc: w(0, 8) }),
                Reply::Failed(RdmaError::MisalignedAtomic { loc: misaligned }),
                Reply::Done,
                Reply::Value(4),
                Reply::Value(5),
                Reply::Done,
                Reply::Value(5),
            ]
        );
        assert_eq!(fabric.read(w(1, 0)), Ok(0));
    }
}

#[test]
fn crashed_node_fails_later_operations() {
    for fabric in fabrics(3) {
        let mut endpoint = fabric.endpoint(NodeId(0));
        let mut execute = |op| endpoint.execute(&op);
        assert_eq!(execute(put_inline(w(1, 0), 1, D)), Reply::Done);
        assert_eq!(execute(Op::Wait { work_id: D }), Reply::Done);
        fabric.crash(NodeId(1));
        let crashed = RdmaError::RemoteCrashed { node: NodeId(1) };
        assert_eq!(execute(put_inline(w(1, 0), 2, D)), Reply::Done);
        assert_eq!(
            execute(Op::Wait { work_id: D }),
            work_failed(D, crashed.clone())
        );
        assert_eq!(
            execute(Op::GlobalFence { node: NodeId(1) }),
            Reply::Failed(crashed.clone())
        );
        assert_eq!(execute(put_inline(w(2, 0), 3, D)), Reply::Done);
        assert_eq!(execute(Op::GlobalFence { node: NodeId(2) }), Reply::Done);
        drop(endpoint);

        let own = fabric
            .endpoint(NodeId(1))
            .execute(&Op::Load { loc: w(1, 0) });
        assert_eq!(own, Reply::Failed(crashed.clone()));
        assert_eq!(fabric.read(w(1, 0)), Err(crashed.clone()));
        assert_eq!(fabric.write(w(1, 0), 4), Err(crashed));
        assert_eq!(fabric.read(w(2, 0)), Ok(3));
    }
}

#[test]
fn a_restarted_node_has_blank_memory_and_each_peer_reconnects_to_it() {
    for fabric in fabrics(3) {
        let mut endpoint = fabric.endpoint(NodeId(0));
        let mut execute = |op| endpoint.execute(&op);
        assert_eq!(execute(put_inline(w(1, 0), 7, D)), Reply::Done);
        assert_eq!(execute(Op::Wait { work_id: D }), Reply::Done);
        fabric.crash(NodeId(1));
        fabric.restart(NodeId(1));
        assert_eq!(fabric.read(w(1, 0)), Ok(0), "blank memory");
        // The old connection ended with the old process: a put fails until node 0
        // connects to the new one.
        assert_eq!(execute(put_inline(w(1, 0), 8, D)), Reply::Done);
        assert_eq!(
            execute(Op::Wait { work_id: D }),
            work_failed(D, RdmaError::QueuePairError { node: NodeId(1) })
        );
        fabric.reconnect(NodeId(0), NodeId(1));
        assert_eq!(execute(put_inline(w(1, 0), 9, D)), Reply::Done);
        assert_eq!(execute(Op::Wait { work_id: D }), Reply::Done);
        drop(endpoint);
        assert_eq!(fabric.read(w(1, 0)), Ok(9));
        // The new process runs; node 2 has not reconnected yet.
        let own = fabric
            .endpoint(NodeId(1))
            .execute(&Op::Load { loc: w(1, 0) });
        assert_eq!(own, Reply::Value(9));
        let mut from2 = fabric.endpoint(NodeId(2));
        assert_eq!(from2.execute(&put_inline(w(1, 1), 1, D)), Reply::Done);
        assert_eq!(
            from2.execute(&Op::Wait { work_id: D }),
            work_failed(D, RdmaError::QueuePairError { node: NodeId(1) })
        );
    }
}

#[test]
fn queue_pair_error_fails_only_that_direction() {
    for fabric in fabrics(3) {
        fabric.set_queue_pair_error(NodeId(0), NodeId(1));
        let broken = RdmaError::QueuePairError { node: NodeId(1) };
        let replies = script(
            &fabric,
            0,
            vec![
                put_inline(w(1, 0), 1, D),
                Op::Wait { work_id: D },
                put_inline(w(2, 0), 2, D),
                Op::Wait { work_id: D },
                Op::GlobalFence { node: NodeId(1) },
            ],
        );
        assert_eq!(
            replies,
            [
                Reply::Done,
                work_failed(D, broken.clone()),
                Reply::Done,
                Reply::Done,
                Reply::Failed(broken),
            ]
        );
        let other = script(
            &fabric,
            2,
            vec![put_inline(w(1, 0), 3, D), Op::Wait { work_id: D }],
        );
        assert_eq!(other, [Reply::Done, Reply::Done]);
        assert_eq!(fabric.read(w(1, 0)), Ok(3));
    }
}

#[test]
fn poll_acknowledges_the_oldest_operation_and_reports_its_failure() {
    for fabric in fabrics(2) {
        let replies = script(
            &fabric,
            0,
            vec![
                put_inline(w(1, 0), 1, D),
                put_inline(w(1, 100), 2, D),
                Op::Rfence { node: NodeId(1) },
                put_inline(w(1, 1), 3, D),
                Op::Poll { node: NodeId(1) },
                Op::Poll { node: NodeId(1) },
                Op::Poll { node: NodeId(1) },
                Op::Wait { work_id: D },
            ],
        );
        let oob = RdmaError::OutOfBounds { loc: w(1, 100) };
        let mut expected = vec![Reply::Done; 5];
        expected.extend([Reply::Failed(oob), Reply::Done, Reply::Done]);
        assert_eq!(replies, expected);
        assert_eq!(fabric.read(w(1, 1)), Ok(3));
    }
}

#[test]
fn poll_without_an_operation_is_an_error_not_a_hang() {
    for fabric in fabrics(2) {
        let reply = fabric
            .endpoint(NodeId(0))
            .execute(&Op::Poll { node: NodeId(1) });
        assert_eq!(
            reply,
            Reply::Failed(RdmaError::NothingToPoll { node: NodeId(1) })
        );
    }
}

#[test]
fn global_fence_waits_for_the_remote_write() {
    for fabric in fabrics(2) {
        let mut endpoint = fabric.endpoint(NodeId(0));
        for value in 1..=50 {
            assert_eq!(
                endpoint.execute(&put_inline(w(1, 0), value, D)),
                Reply::Done
            );
            let fence = endpoint.execute(&Op::GlobalFence { node: NodeId(1) });
            assert_eq!(fence, Reply::Done);
            assert_eq!(fabric.read(w(1, 0)), Ok(value));
        }
    }
}

#[test]
fn run_four_threads_of_remote_faa_count_exactly() {
    for fabric in fabrics(4) {
        let procs = (0..4)
            .map(|node| {
                let mut ops = vec![atomic(w(node, 1), w(0, 0), Rmw::Faa { add: 1 }); 1000];
                ops.push(Op::Wait { work_id: D });
                (NodeId(node), Script::new(ops))
            })
            .collect();
        let done = fabric.run(procs);
        assert_eq!(fabric.read(w(0, 0)), Ok(4000), "{:?}", fabric.options());
        assert!(done.iter().all(|p| p.replies == vec![Reply::Done; 1001]));
        assert_eq!(fabric.ops(), 4 * 1001);
    }
}

#[test]
fn run_returns_processes_in_order_with_their_posts_complete() {
    for fabric in fabrics(3) {
        // No waits: `run` itself waits for the posted operations.
        let procs = (0..3)
            .map(|node| {
                let ops = vec![put_inline(
                    w((node + 1) % 3, node.into()),
                    10 + u64::from(node),
                    D,
                )];
                (NodeId(node), Script::new(ops))
            })
            .collect();
        let done = fabric.run(procs);
        assert_eq!(done.iter().map(|p| p.pc).collect::<Vec<_>>(), [2, 2, 2]);
        assert_eq!(fabric.read(w(1, 0)), Ok(10));
        assert_eq!(fabric.read(w(2, 1)), Ok(11));
        assert_eq!(fabric.read(w(0, 2)), Ok(12));
    }
}

#[test]
fn dropping_the_fabric_stops_its_workers() {
    for _ in 0..20 {
        let fabric = MemFabric::new(Layout::uniform(3, 8), Mode::Worker);
        let mut endpoint = fabric.endpoint(NodeId(0));
        for value in 0..100 {
            endpoint.execute(&put_inline(w(value % 3, 0), value.into(), D));
        }
        drop(endpoint);
        assert_eq!(fabric.read(w(0, 0)), Ok(99));
    }
}

#[test]
fn test_is_a_non_blocking_wait() {
    for fabric in fabrics(2) {
        let mut endpoint = fabric.endpoint(NodeId(0));
        assert_eq!(
            endpoint.execute(&Op::Test { work_id: D }),
            Reply::Value(1),
            "nothing posted: complete"
        );
        assert_eq!(endpoint.execute(&put_inline(w(1, 0), 7, D)), Reply::Done);
        // Poll until complete; the worker finishes the put in bounded time.
        while endpoint.execute(&Op::Test { work_id: D }) == Reply::Value(0) {
            std::thread::yield_now();
        }
        assert_eq!(
            endpoint.execute(&Op::GlobalFence { node: NodeId(1) }),
            Reply::Done
        );
        assert_eq!(fabric.read(w(1, 0)), Ok(7));
    }
    // A failed operation is reported by the test that finds it complete, once.
    let fabric = MemFabric::new(Layout::uniform(2, 8), Mode::Inline);
    let mut endpoint = fabric.endpoint(NodeId(0));
    endpoint.execute(&put_inline(w(1, 100), 7, D));
    assert!(matches!(
        endpoint.execute(&Op::Test { work_id: D }),
        Reply::Failed(RdmaError::WorkFailed { .. })
    ));
    assert_eq!(endpoint.execute(&Op::Test { work_id: D }), Reply::Value(1));
}

#[test]
fn test_load_is_a_test_and_then_a_load() {
    for fabric in fabrics(2) {
        let mut endpoint = fabric.endpoint(NodeId(0));
        let cell = w(0, 1);
        assert_eq!(
            endpoint.execute(&Op::TestLoad {
                work_id: D,
                loc: cell
            }),
            Reply::Value(0),
            "nothing posted: complete, the cell as it is"
        );
        let cas = Op::Atomic {
            local: cell,
            remote: w(1, 0),
            rmw: Rmw::Cas {
                expected: 0,
                new: 9,
            },
            work_id: D,
        };
        assert_eq!(endpoint.execute(&cas), Reply::Done);
        let old = loop {
            match endpoint.execute(&Op::TestLoad {
                work_id: D,
                loc: cell,
            }) {
                Reply::Done => std::thread::yield_now(), // not complete yet
                reply => break reply,
            }
        };
        assert_eq!(old, Reply::Value(0), "the CAS's old value");
        assert_eq!(fabric.read(w(1, 0)), Ok(9));
    }
    // A failure is reported as `test` reports it, once; then the cell is loaded.
    let fabric = MemFabric::new(Layout::uniform(2, 8), Mode::Inline);
    let mut endpoint = fabric.endpoint(NodeId(0));
    endpoint.execute(&put_inline(w(1, 100), 7, D));
    let test_load = Op::TestLoad {
        work_id: D,
        loc: w(0, 2),
    };
    assert!(matches!(
        endpoint.execute(&test_load),
        Reply::Failed(RdmaError::WorkFailed { .. })
    ));
    assert_eq!(endpoint.execute(&test_load), Reply::Value(0));
}

#[test]
fn wait_any_returns_the_first_complete_work_id() {
    for fabric in fabrics(3) {
        let mut endpoint = fabric.endpoint(NodeId(0));
        let base = WorkId(10);
        assert_eq!(
            endpoint.execute(&put_inline(w(1, 0), 1, WorkId(11))),
            Reply::Done
        );
        // Bit 1 (work id 11) has an operation; bit 0 (work id 10) has none: complete at once.
        assert_eq!(
            endpoint.execute(&Op::WaitAny { base, mask: 0b11 }),
            Reply::Value(0)
        );
        assert_eq!(
            endpoint.execute(&Op::WaitAny { base, mask: 0b10 }),
            Reply::Value(1)
        );
        assert_eq!(
            endpoint.execute(&Op::WaitAny { base, mask: 0 }),
            Reply::Failed(RdmaError::NothingToWaitFor)
        );
    }
}

/// `now` is the fabric's monotonic clock in ns; `pause` lets at least its duration pass.
#[test]
fn now_is_monotonic_and_pause_waits() {
    let fabric = MemFabric::new(Layout::uniform(1, 4), Mode::Inline);
    let mut endpoint = fabric.endpoint(NodeId(0));
    let Reply::Value(t0) = endpoint.execute(&Op::Now) else {
        panic!("now replies a value")
    };
    assert_eq!(endpoint.execute(&Op::Pause { ns: 2_000_000 }), Reply::Done);
    let Reply::Value(t1) = endpoint.execute(&Op::Now) else {
        panic!("now replies a value")
    };
    assert!(t1 >= t0 + 2_000_000, "paused 2 ms: {t0} -> {t1}");
}

/// A multi-word put writes its words in place; one whose last word is past the node's
/// memory fails at its wait and writes nothing.
#[test]
fn put_words_writes_every_word_or_fails_whole() {
    for fabric in fabrics(2) {
        let words = |v: Vec<u64>, at: u32| Op::PutWords {
            remote: w(1, at),
            words: v.into(),
            work_id: D,
        };
        let replies = script(
            &fabric,
            0,
            vec![words(vec![4, 5, 6], 2), Op::Wait { work_id: D }],
        );
        assert_eq!(replies, vec![Reply::Done, Reply::Done]);
        let got: Vec<u64> = (2..5)
            .map(|i| fabric.read(w(1, i)).expect("in bounds"))
            .collect();
        assert_eq!(got, vec![4, 5, 6]);
        let replies = script(
            &fabric,
            0,
            vec![words(vec![7, 8], 7), Op::Wait { work_id: D }],
        );
        assert_eq!(
            replies,
            vec![
                Reply::Done,
                work_failed(D, RdmaError::OutOfBounds { loc: w(1, 8) })
            ]
        );
        assert_eq!(fabric.read(w(1, 7)), Ok(0), "nothing written");
    }
}

/// The in-process endpoint counts work requests and doorbells by the doorbell rule: a run
/// of posts touching k queue pairs rings k doorbells, `Rfence` keeps the run, any other
/// operation ends it, a post failing at once counts nothing; the fabric adds up the
/// endpoints that went.
#[test]
fn work_requests_and_doorbells_are_counted_by_the_doorbell_rule() {
    use velos_rdma::WorkRequests;
    for fabric in fabrics(3) {
        let mut endpoint = fabric.endpoint(NodeId(0));
        let ops = [
            put_inline(w(1, 0), 1, D),
            put_inline(w(2, 0), 2, D),
            Op::Rfence { node: NodeId(1) },
            get(w(0, 1), w(1, 0), D),
            put_inline(w(7, 0), 3, D),
        ];
        for op in &ops[..4] {
            assert_eq!(endpoint.execute(op), Reply::Done);
        }
        assert_eq!(
            endpoint.execute(&ops[4]),
            Reply::Failed(RdmaError::UnknownNode { node: NodeId(7) })
        );
        assert_eq!(endpoint.work_requests(), WorkRequests::default(), "kept");
        assert_eq!(endpoint.execute(&Op::Wait { work_id: D }), Reply::Done);
        let first = WorkRequests {
            posted: 3,
            doorbells: 2,
            ..WorkRequests::default()
        };
        assert_eq!(endpoint.work_requests(), first);
        // Seventeen puts to one node: a full list of 16, then one more at the drop.
        for i in 0..17 {
            assert_eq!(
                endpoint.execute(&put_inline(w(1, i % 8), 4, E)),
                Reply::Done
            );
        }
        drop(endpoint);
        let total = WorkRequests {
            posted: 20,
            doorbells: 4,
            ..WorkRequests::default()
        };
        assert_eq!(fabric.work_requests(), total);
    }
}

/// The bulk copies: `StoreWords` and `LoadWords` on the node's own words, `GetWords` of a
/// peer's into them; a copy past the memory refused as a single word's would be.
#[test]
fn bulk_stores_loads_and_multi_word_gets() {
    for fabric in fabrics(2) {
        let replies = script(
            &fabric,
            1,
            vec![Op::StoreWords {
                loc: w(1, 2),
                words: vec![7, 8, 9].into(),
            }],
        );
        assert_eq!(replies, vec![Reply::Done]);
        let replies = script(
            &fabric,
            0,
            vec![
                Op::GetWords {
                    local: w(0, 4),
                    remote: w(1, 2),
                    count: 3,
                    work_id: D,
                },
                Op::Wait { work_id: D },
                Op::LoadWords {
                    loc: w(0, 4),
                    count: 3,
                },
                // Past the target's memory: fails at the wait, as a get would.
                Op::GetWords {
                    local: w(0, 0),
                    remote: w(1, 6),
                    count: 3,
                    work_id: E,
                },
                Op::Wait { work_id: E },
                // Past this node's memory: refused at once.
                Op::LoadWords {
                    loc: w(0, 6),
                    count: 3,
                },
                Op::StoreWords {
                    loc: w(0, 7),
                    words: vec![1, 2].into(),
                },
            ],
        );
        assert_eq!(
            replies[..3],
            [Reply::Done, Reply::Done, Reply::Words(vec![7, 8, 9].into())]
        );
        assert!(
            matches!(&replies[4], Reply::Failed(RdmaError::WorkFailed { cause, .. })
                if matches!(**cause, RdmaError::OutOfBounds { .. })),
            "{replies:?}"
        );
        for reply in &replies[5..] {
            assert!(
                matches!(reply, Reply::Failed(RdmaError::OutOfBounds { .. })),
                "{replies:?}"
            );
        }
        assert_eq!(
            fabric.read(w(0, 7)),
            Ok(0),
            "a refused store writes nothing"
        );
    }
}
