//! The real-verbs backend (feature `verbs`): operation semantics and failures on a real
//! RDMA device, and a process driven on a verbs endpoint.
//!
//! Without a device (no libibverbs, ENOSYS, or an empty device list) every test prints a
//! skip message and passes, unless `VELOS_REQUIRE_RDMA=1`, which makes "no device" a
//! failure (set it where a device must be there, such as the soft-RoCE guest).
//! `VELOS_RDMA_DEVICE` and `VELOS_RDMA_GID_INDEX` choose the device and GID index.
#![cfg(feature = "verbs")]

use velos_rdma::verbs::{VerbsError, VerbsFabric, VerbsOptions};
use velos_rdma::{
    Endpoint, Layout, Loc, NodeId, Op, Process, RdmaError, Reply, Rmw, Step, WorkId, drive,
};

mod common;
use common::Script;

const D: WorkId = WorkId(1);
const E: WorkId = WorkId(2);

/// Whether the environment demands a device (`VELOS_REQUIRE_RDMA=1`).
fn rdma_required() -> bool {
    std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

/// A fabric of `nodes` nodes with 8 words each on the device the environment names, or
/// `None` (after a skip message) when this machine has no RDMA device.
fn fabric(test: &str, nodes: u16) -> Option<VerbsFabric> {
    match VerbsFabric::with_options(Layout::uniform(nodes, 8), VerbsOptions::from_env()) {
        Ok(fabric) => Some(fabric),
        Err(error) if error.is_no_device() && !rdma_required() => {
            println!("skipped {test}: {error} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            None
        }
        Err(error) => panic!("{test}: no usable RDMA fabric: {error}"),
    }
}

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// Runs `ops` on a thread of `node` and returns the replies.
fn script(fabric: &VerbsFabric, node: u16, ops: Vec<Op>) -> Vec<Reply> {
    let mut done = fabric
        .run(vec![(NodeId(node), Script::new(ops))])
        .expect("endpoint");
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
    let Some(fabric) = fabric("put_get_and_inline_put", 2) else {
        return;
    };
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
    assert_eq!(replies, expected, "on {}", fabric.device_name());
    assert_eq!(fabric.read(w(1, 0)), Ok(5));
    assert_eq!(fabric.read(w(1, 1)), Ok(9));
    assert_eq!(fabric.snapshot()[1][..2], [5, 9]);
}

#[test]
fn puts_and_gets_within_the_own_node() {
    let Some(fabric) = fabric("puts_and_gets_within_the_own_node", 1) else {
        return;
    };
    fabric.write(w(0, 3), 0xDEAD_BEEF).unwrap();
    let replies = script(
        &fabric,
        0,
        vec![
            get(w(0, 4), w(0, 3), D),
            Op::Wait { work_id: D },
            put_inline(w(0, 5), u64::MAX, D),
            Op::Wait { work_id: D },
            Op::Load { loc: w(0, 4) },
            Op::Load { loc: w(0, 5) },
        ],
    );
    let mut expected = vec![Reply::Done; 4];
    expected.extend([Reply::Value(0xDEAD_BEEF), Reply::Value(u64::MAX)]);
    assert_eq!(replies, expected);
}

#[test]
fn remote_cas_hit_and_miss_and_faa_wraps_around() {
    let Some(fabric) = fabric("remote_cas_hit_and_miss_and_faa_wraps_around", 2) else {
        return;
    };
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
    assert!(
        replies.iter().all(|r| !matches!(r, Reply::Failed(_))),
        "{replies:?}"
    );
    let loads: Vec<_> = replies.iter().skip(2).step_by(3).cloned().collect();
    assert_eq!(
        loads,
        [Reply::Value(0), Reply::Value(1), Reply::Value(u64::MAX - 1)]
    );
    assert_eq!(fabric.read(w(1, 0)), Ok(1), "the missed CAS wrote nothing");
    assert_eq!(fabric.read(w(1, 1)), Ok(1), "FAA wraps around");
}

#[test]
fn wait_covers_every_earlier_operation_with_its_work_id() {
    let Some(fabric) = fabric("wait_covers_every_earlier_operation_with_its_work_id", 3) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    // More operations than a queue pair holds, so posting also waits for room.
    let rounds = 2 * u64::from(fabric.options().queue_depth);
    for value in 1..=rounds {
        for node in 1..3 {
            let op = put_inline(w(node, (value % 8) as u32), value, D);
            assert_eq!(endpoint.execute(&op), Reply::Done);
        }
    }
    assert_eq!(endpoint.execute(&put_inline(w(0, 0), 42, E)), Reply::Done);
    assert_eq!(endpoint.execute(&Op::Wait { work_id: D }), Reply::Done);
    for node in 1..3 {
        for value in rounds - 7..=rounds {
            assert_eq!(fabric.read(w(node, (value % 8) as u32)), Ok(value));
        }
    }
    assert_eq!(endpoint.execute(&Op::Wait { work_id: E }), Reply::Done);
    assert_eq!(fabric.read(w(0, 0)), Ok(42));
    // Nothing left with either id: a test is complete, a wait returns at once.
    assert_eq!(endpoint.execute(&Op::Test { work_id: D }), Reply::Value(1));
    assert_eq!(endpoint.execute(&Op::Wait { work_id: E }), Reply::Done);
}

#[test]
fn posting_towards_an_unknown_node_fails_at_once() {
    let Some(fabric) = fabric("posting_towards_an_unknown_node_fails_at_once", 2) else {
        return;
    };
    let unknown = RdmaError::UnknownNode { node: NodeId(5) };
    let replies = script(
        &fabric,
        0,
        vec![
            put_inline(w(5, 0), 1, D),
            atomic(w(0, 0), w(5, 0), Rmw::Faa { add: 1 }),
            get(w(1, 0), w(1, 1), D),
            Op::Rfence { node: NodeId(5) },
            Op::GlobalFence { node: NodeId(5) },
            Op::Poll { node: NodeId(5) },
            Op::Wait { work_id: D },
        ],
    );
    assert_eq!(
        replies,
        [
            Reply::Failed(unknown.clone()),
            Reply::Failed(unknown.clone()),
            Reply::Failed(RdmaError::NotLocal {
                loc: w(1, 0),
                node: NodeId(0)
            }),
            Reply::Failed(unknown.clone()),
            Reply::Failed(unknown.clone()),
            Reply::Failed(unknown),
            Reply::Done,
        ]
    );
    assert!(matches!(
        fabric.endpoint(NodeId(2)),
        Err(VerbsError::UnknownNode { node: NodeId(2) })
    ));
}

#[test]
fn bad_addresses_fail_at_the_wait_and_leave_the_queue_pair_usable() {
    let Some(fabric) = fabric("bad_addresses_fail_at_the_wait", 2) else {
        return;
    };
    let misaligned = Loc {
        node: NodeId(1),
        offset: 4,
    };
    let replies = script(
        &fabric,
        0,
        vec![
            put_inline(w(1, 0), 1, E),
            get(w(0, 0), w(1, 100), D),
            get(w(0, 100), w(1, 0), D),
            Op::Wait { work_id: E },
            Op::Wait { work_id: D },
            atomic(w(0, 0), misaligned, Rmw::Faa { add: 1 }),
            Op::Wait { work_id: D },
            Op::Wait { work_id: D },
            put_inline(w(1, 2), 3, E),
            Op::Wait { work_id: E },
        ],
    );
    assert_eq!(
        replies,
        [
            Reply::Done,
            Reply::Done,
            Reply::Done,
            Reply::Done,
            work_failed(D, RdmaError::OutOfBounds { loc: w(1, 100) }),
            Reply::Done,
            work_failed(D, RdmaError::MisalignedAtomic { loc: misaligned }),
            Reply::Done,
            Reply::Done,
            Reply::Done,
        ]
    );
    assert_eq!(fabric.read(w(1, 2)), Ok(3));
}

#[test]
fn cpu_operations_are_local_and_checked() {
    let Some(fabric) = fabric("cpu_operations_are_local_and_checked", 2) else {
        return;
    };
    let misaligned = Loc {
        node: NodeId(0),
        offset: 3,
    };
    let replies = script(
        &fabric,
        0,
        vec![
            Op::Load { loc: w(1, 0) },
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
    assert_eq!(
        replies,
        [
            Reply::Failed(RdmaError::NotLocal {
                loc: w(1, 0),
                node: NodeId(0),
            }),
            Reply::Failed(RdmaError::OutOfBounds { loc: w(0, 8) }),
            Reply::Failed(RdmaError::MisalignedAtomic { loc: misaligned }),
            Reply::Done,
            Reply::Value(4),
            Reply::Value(5),
            Reply::Done,
            Reply::Value(5),
        ]
    );
}

#[test]
fn a_queue_pair_in_error_fails_only_that_direction() {
    let Some(fabric) = fabric("a_queue_pair_in_error_fails_only_that_direction", 3) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    endpoint
        .set_queue_pair_error(NodeId(1))
        .expect("a queue pair can be put in error");
    let broken = RdmaError::QueuePairError { node: NodeId(1) };
    let replies: Vec<Reply> = [
        put_inline(w(1, 0), 1, D),
        Op::Wait { work_id: D },
        put_inline(w(2, 0), 2, D),
        Op::Wait { work_id: D },
        Op::GlobalFence { node: NodeId(1) },
    ]
    .iter()
    .map(|op| endpoint.execute(op))
    .collect();
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
    drop(endpoint);
    let other = script(
        &fabric,
        2,
        vec![put_inline(w(1, 0), 3, D), Op::Wait { work_id: D }],
    );
    assert_eq!(other, [Reply::Done, Reply::Done]);
    assert_eq!(fabric.read(w(1, 0)), Ok(3));
    assert_eq!(fabric.read(w(2, 0)), Ok(2));
}

#[test]
fn poll_acknowledges_the_oldest_operation_and_reports_its_failure() {
    let Some(fabric) = fabric("poll_acknowledges_the_oldest_operation", 2) else {
        return;
    };
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
            Op::Poll { node: NodeId(1) },
            Op::Wait { work_id: D },
        ],
    );
    let mut expected = vec![Reply::Done; 5];
    expected.extend([
        Reply::Failed(RdmaError::OutOfBounds { loc: w(1, 100) }),
        Reply::Done,
        Reply::Failed(RdmaError::NothingToPoll { node: NodeId(1) }),
        Reply::Done,
    ]);
    assert_eq!(replies, expected);
    assert_eq!(fabric.read(w(1, 1)), Ok(3));
}

#[test]
fn global_fence_waits_for_the_remote_write() {
    let Some(fabric) = fabric("global_fence_waits_for_the_remote_write", 2) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    for value in 1..=20 {
        assert_eq!(
            endpoint.execute(&put_inline(w(1, 0), value, D)),
            Reply::Done
        );
        let fence = endpoint.execute(&Op::GlobalFence { node: NodeId(1) });
        assert_eq!(fence, Reply::Done);
        assert_eq!(fabric.read(w(1, 0)), Ok(value));
    }
}

#[test]
fn test_and_wait_any() {
    let Some(fabric) = fabric("test_and_wait_any", 3) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    assert_eq!(endpoint.execute(&Op::Test { work_id: D }), Reply::Value(1));
    assert_eq!(endpoint.execute(&put_inline(w(1, 0), 7, D)), Reply::Done);
    while endpoint.execute(&Op::Test { work_id: D }) == Reply::Value(0) {
        std::thread::yield_now();
    }
    assert_eq!(fabric.read(w(1, 0)), Ok(7));
    let base = WorkId(10);
    assert_eq!(
        endpoint.execute(&put_inline(w(2, 0), 1, WorkId(11))),
        Reply::Done
    );
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
    // A failed operation is reported by the test that finds it complete, once.
    endpoint.execute(&put_inline(w(1, 100), 7, D));
    let failed = loop {
        match endpoint.execute(&Op::Test { work_id: D }) {
            Reply::Value(0) => std::thread::yield_now(),
            reply => break reply,
        }
    };
    assert_eq!(
        failed,
        work_failed(D, RdmaError::OutOfBounds { loc: w(1, 100) })
    );
    assert_eq!(endpoint.execute(&Op::Test { work_id: D }), Reply::Value(1));
}

#[test]
fn now_is_monotonic_and_pause_waits() {
    let Some(fabric) = fabric("now_is_monotonic_and_pause_waits", 1) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    let Reply::Value(t0) = endpoint.execute(&Op::Now) else {
        panic!("now replies a value")
    };
    assert_eq!(endpoint.execute(&Op::Pause { ns: 2_000_000 }), Reply::Done);
    let Reply::Value(t1) = endpoint.execute(&Op::Now) else {
        panic!("now replies a value")
    };
    assert!(t1 >= t0 + 2_000_000, "paused 2 ms: {t0} -> {t1}");
}

/// Increments the counter word `counter` `times` times with remote CAS: read it with a
/// get, then CAS from the value read to one more, retrying from the CAS's old value when
/// another thread got there first. Counts its retries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CasIncrementer {
    counter: Loc,
    /// Where gets and CAS results land, on the thread's node.
    scratch: Loc,
    times: u32,
    done: u32,
    expected: u64,
    state: State,
    retries: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum State {
    Start,
    Got,
    ReadGot,
    Cased,
    ReadCased,
}

impl CasIncrementer {
    fn new(counter: Loc, scratch: Loc, times: u32) -> CasIncrementer {
        CasIncrementer {
            counter,
            scratch,
            times,
            done: 0,
            expected: 0,
            state: State::Start,
            retries: 0,
        }
    }

    fn cas(&mut self) -> Step {
        self.state = State::Cased;
        Step::Op(Op::Atomic {
            local: self.scratch,
            remote: self.counter,
            rmw: Rmw::Cas {
                expected: self.expected,
                new: self.expected + 1,
            },
            work_id: D,
        })
    }
}

impl Process for CasIncrementer {
    fn resume(&mut self, reply: Reply) -> Step {
        assert!(!matches!(reply, Reply::Failed(_)), "{reply:?}");
        match (self.state, reply) {
            (State::Start, _) => {
                self.state = State::Got;
                Step::Op(get(self.scratch, self.counter, D))
            }
            (State::Got | State::Cased, _) => {
                self.state = match self.state {
                    State::Got => State::ReadGot,
                    _ => State::ReadCased,
                };
                // Wait, then read what the NIC wrote; `drive` hands over one reply at a
                // time, so this takes two steps.
                Step::Op(Op::Wait { work_id: D })
            }
            (State::ReadGot | State::ReadCased, Reply::Done) => {
                Step::Op(Op::Load { loc: self.scratch })
            }
            (State::ReadGot, Reply::Value(value)) => {
                self.expected = value;
                self.cas()
            }
            (State::ReadCased, Reply::Value(old)) if old == self.expected => {
                self.done += 1;
                if self.done == self.times {
                    return Step::Done;
                }
                self.expected += 1;
                self.cas()
            }
            (State::ReadCased, Reply::Value(old)) => {
                self.retries += 1;
                self.expected = old;
                self.cas()
            }
            (state, reply) => panic!("unexpected {reply:?} in {state:?}"),
        }
    }
}

#[test]
fn a_process_driven_on_a_verbs_endpoint() {
    let Some(fabric) = fabric("a_process_driven_on_a_verbs_endpoint", 2) else {
        return;
    };
    fabric.write(w(1, 0), 100).unwrap();
    let mut process = CasIncrementer::new(w(1, 0), w(0, 1), 50);
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    let ops = drive(&mut process, &mut endpoint);
    drop(endpoint);
    assert_eq!(fabric.read(w(1, 0)), Ok(150));
    assert_eq!(process.retries, 0, "alone, no CAS misses");
    assert_eq!(
        ops,
        3 + 3 * 50,
        "get, wait, load, then per CAS: CAS, wait, load"
    );
    assert_eq!(fabric.ops(), ops);
}

#[test]
fn run_threads_of_remote_cas_and_faa_count_exactly() {
    let Some(fabric) = fabric("run_threads_of_remote_cas_and_faa_count_exactly", 3) else {
        return;
    };
    let incrementers = (0..3)
        .map(|node| (NodeId(node), CasIncrementer::new(w(0, 0), w(node, 1), 30)))
        .collect();
    let done = fabric.run(incrementers).expect("endpoints");
    assert_eq!(fabric.read(w(0, 0)), Ok(90));
    assert!(done.iter().all(|p| p.done == 30));
    let adders = (0..3)
        .map(|node| {
            let mut ops = vec![atomic(w(node, 2), w(0, 3), Rmw::Faa { add: 1 }); 100];
            ops.push(Op::Wait { work_id: D });
            (NodeId(node), Script::new(ops))
        })
        .collect();
    let done = fabric.run(adders).expect("endpoints");
    assert_eq!(fabric.read(w(0, 3)), Ok(300));
    assert!(done.iter().all(|p| p.replies == vec![Reply::Done; 101]));
}
