//! The bulk copies: `Op::GetWords` (one read of many words: as that many gets, so a read
//! racing a writer may come back torn, any word old or new), `Op::StoreWords` and
//! `Op::LoadWords` (as that many stores or loads in a row), each one step charged by its
//! bytes; bad addresses refused as the single-word operations refuse them.

use std::collections::BTreeSet;
use velos_rdma::{Layout, Loc, NodeId, Op, Process, RdmaError, Reply, Step, WorkId};
use velos_sim::explore::{ExploreOptions, Reduction, explore_with};
use velos_sim::latency::LatencyModel;
use velos_sim::litmus::program::{Compiled, LitmusThread};
use velos_sim::machine::{Machine, Next};
use velos_sim::simulate::{SimConfig, Simulator, Stop};

const W: WorkId = WorkId(1);

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// Node 1 stores 1 into word 0, then 2 into word 1, while node 0 reads both with one
/// `GetWords` into its words 0 and 1: every pair it can end with.
fn read_outcomes(reduction: Reduction) -> BTreeSet<(u64, u64)> {
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    let reader = vec![
        Compiled::op(Op::GetWords {
            local: w(0, 0),
            remote: w(1, 0),
            count: 2,
            work_id: W,
        }),
        Compiled::op(Op::Wait { work_id: W }),
    ];
    machine.spawn(NodeId(0), LitmusThread::new(reader, 0));
    let writer = vec![
        Compiled::op(Op::Store {
            loc: w(1, 0),
            value: 1,
        }),
        Compiled::op(Op::Store {
            loc: w(1, 1),
            value: 2,
        }),
    ];
    machine.spawn(NodeId(1), LitmusThread::new(writer, 0));
    let found = explore_with(
        machine,
        ExploreOptions::new(1_000_000, reduction),
        |m| {
            let read = |i| m.read(w(0, i)).expect("in bounds");
            (read(0), read(1))
        },
        |_| None,
    )
    .expect("a small program");
    assert_eq!(found.stuck, 0, "nothing blocks");
    found.outcomes
}

/// Torn both ways: the later word new with the earlier old is possible, as two gets of
/// one queue pair may execute in either order (one atomic read could not see it).
#[test]
fn a_multi_word_read_may_tear() {
    let all: BTreeSet<(u64, u64)> = [(0, 0), (1, 0), (1, 2), (0, 2)].into();
    assert_eq!(read_outcomes(Reduction::None), all);
    assert_eq!(read_outcomes(Reduction::Stubborn), all);
}

/// Issues its operations in turn, whatever they reply, and keeps the replies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Script {
    ops: Vec<Op>,
    replies: Vec<Reply>,
}

impl Process for Script {
    fn resume(&mut self, reply: Reply) -> Step {
        if reply != Reply::Start {
            self.replies.push(reply);
        }
        self.ops
            .get(self.replies.len())
            .cloned()
            .map_or(Step::Done, Step::Op)
    }
}

/// Runs `ops` on node 0 of a two-node machine (600 words each) on paper-cx6 without
/// jitter, node 1's words set to 100 + i first: the end time and node 0's replies.
fn timed(ops: Vec<Op>) -> (u64, Vec<Reply>) {
    let mut machine = Machine::new(&Layout::uniform(2, 600));
    for i in 0..600 {
        machine
            .init(w(1, i), 100 + u64::from(i))
            .expect("in bounds");
    }
    let script = Script {
        ops,
        replies: Vec::new(),
    };
    machine.spawn(NodeId(0), script);
    let latency = LatencyModel {
        jitter_ns: 0,
        ..LatencyModel::paper_cx6()
    };
    let mut sim = Simulator::new(machine, SimConfig::new(1, latency));
    assert_eq!(sim.run(u64::MAX, 1_000_000), Stop::Complete);
    let thread = &sim.machine().threads[0];
    assert_eq!(thread.next, Next::Finished);
    (sim.now(), thread.process.replies.clone())
}

fn get_words(count: u32) -> Vec<Op> {
    vec![
        Op::GetWords {
            local: w(0, 0),
            remote: w(1, 0),
            count,
            work_id: W,
        },
        Op::Wait { work_id: W },
        Op::LoadWords {
            loc: w(0, 0),
            count,
        },
        // A step after the copy, so that the run's end shows what the copy cost.
        Op::Now,
    ]
}

/// 512 words in one read cost one get's round trip and the payload's wire time; one
/// load of them costs their copy time.
#[test]
fn a_long_read_costs_one_round_trip_its_payload_and_its_copy() {
    let l = LatencyModel::paper_cx6();
    let (one, replies) = timed(get_words(1));
    assert_eq!(replies[2], Reply::Words(vec![100].into()));
    let (long, replies) = timed(get_words(512));
    assert_eq!(replies[1], Reply::Done, "the wait");
    let read: Vec<u64> = (0..512).map(|i| 100 + i).collect();
    assert_eq!(replies[2], Reply::Words(read.into()));
    let bytes = 4096 - 8;
    assert_eq!(
        long,
        one + bytes * l.wire_ps_per_byte / 1000 + bytes * l.copy_ps_per_byte / 1000,
        "the same round trip plus the payload and the copy"
    );
    // A store of many words costs its copy too, and lands every word.
    let store = |n: u64| {
        let words: Vec<u64> = (0..n).collect();
        timed(vec![
            Op::StoreWords {
                loc: w(0, 8),
                words: words.into(),
            },
            Op::LoadWords {
                loc: w(0, 8),
                count: n as u32,
            },
            Op::Now,
        ])
    };
    let (one, _) = store(1);
    let (long, replies) = store(512);
    // (Within a nanosecond: the store and the load are each rounded down.)
    let copies = 2 * bytes * l.copy_ps_per_byte / 1000;
    assert!(
        long.abs_diff(one + copies) <= 1,
        "{long} against {one} + {copies}"
    );
    assert_eq!(
        replies[1],
        Reply::Words((0..512).collect::<Vec<_>>().into())
    );
}

/// A read past the target's memory fails at its wait; local words past the node's fail
/// at once; no words at all is refused.
#[test]
fn bad_copies_are_refused_with_the_reason() {
    let (_, replies) = timed(vec![
        Op::GetWords {
            local: w(0, 0),
            remote: w(1, 590),
            count: 20,
            work_id: W,
        },
        Op::Wait { work_id: W },
    ]);
    assert!(
        matches!(&replies[1], Reply::Failed(RdmaError::WorkFailed { .. })),
        "{replies:?}"
    );
    for op in [
        Op::LoadWords {
            loc: w(0, 590),
            count: 20,
        },
        Op::StoreWords {
            loc: w(0, 599),
            words: vec![1, 2].into(),
        },
        Op::GetWords {
            local: w(0, 599),
            remote: w(1, 0),
            count: 2,
            work_id: W,
        },
    ] {
        let (_, replies) = timed(vec![op.clone()]);
        assert!(
            matches!(&replies[0], Reply::Failed(RdmaError::OutOfBounds { .. })),
            "{op:?}: {replies:?}"
        );
    }
    let (_, replies) = timed(vec![Op::LoadWords {
        loc: w(0, 0),
        count: 0,
    }]);
    assert!(matches!(
        &replies[0],
        Reply::Failed(RdmaError::Unsupported { .. })
    ));
}
