//! `Op::PutWords`, a multi-word put: its words land in address order (one remote write per
//! word, rule 3), the whole put is one pipe item whose payload adds its serialisation time,
//! and a word out of bounds fails it as a put to that word would.

use std::collections::BTreeSet;
use velos_rdma::{Layout, Loc, NodeId, Op, RdmaError, WorkId};
use velos_sim::explore::{ExploreOptions, Reduction, explore_with};
use velos_sim::latency::LatencyModel;
use velos_sim::litmus::program::{Action, Compiled, LitmusThread};
use velos_sim::machine::{Machine, Next};
use velos_sim::simulate::{SimConfig, Simulator, Stop};

const W: WorkId = WorkId(1);

fn put_words(words: Vec<u64>) -> Op {
    Op::PutWords {
        remote: Loc::word(NodeId(1), 0),
        words: words.into(),
        work_id: W,
    }
}

fn load(reg: usize, word: u32) -> Compiled {
    Compiled {
        action: Action::Op(Op::Load {
            loc: Loc::word(NodeId(1), word),
        }),
        reg: Some(reg),
    }
}

/// Node 0 puts `[1, 2]` into words 0 and 1 of node 1 while node 1 loads word 1, then
/// word 0: every pair of registers the explorer finds, with and without reduction.
fn reader_outcomes(reduction: Reduction) -> BTreeSet<(u64, u64)> {
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    let writer = vec![
        Compiled::op(put_words(vec![1, 2])),
        Compiled::op(Op::Wait { work_id: W }),
    ];
    machine.spawn(NodeId(0), LitmusThread::new(writer, 0));
    machine.spawn(
        NodeId(1),
        LitmusThread::new(vec![load(0, 1), load(1, 0)], 2),
    );
    let found = explore_with(
        machine,
        ExploreOptions::new(100_000, reduction),
        |m| {
            let regs = &m.threads[1].process.regs;
            (regs[0], regs[1])
        },
        |_| None,
    )
    .expect("a small program");
    assert_eq!(found.stuck, 0, "nothing blocks");
    found.outcomes
}

/// Rule 3 appends the words' remote writes in address order: a reader that sees word 1
/// sees word 0 too; it may see word 0 alone, or neither.
#[test]
fn the_words_land_in_address_order() {
    let expected: BTreeSet<(u64, u64)> = [(0, 0), (0, 1), (2, 1)].into();
    assert_eq!(reader_outcomes(Reduction::None), expected);
    assert_eq!(reader_outcomes(Reduction::Stubborn), expected);
}

/// The time from posting `op` to the end of its `wait`, on paper-cx6 without jitter, and
/// node 1's words 0..words after the run.
fn timed(op: Op, words: u32) -> (u64, Vec<u64>, Option<RdmaError>) {
    let mut machine = Machine::new(&Layout::uniform(2, 600));
    let code = vec![Compiled::op(op), Compiled::op(Op::Wait { work_id: W })];
    machine.spawn(NodeId(0), LitmusThread::new(code, 0));
    let latency = LatencyModel {
        jitter_ns: 0,
        ..LatencyModel::paper_cx6()
    };
    let mut sim = Simulator::new(machine, SimConfig::new(1, latency));
    assert_eq!(sim.run(u64::MAX, 100_000), Stop::Complete);
    let thread = &sim.machine().threads[0];
    assert_eq!(thread.next, Next::Finished);
    let error = thread.process.error.clone();
    let mem = (0..words)
        .map(|i| {
            sim.machine()
                .read(Loc::word(NodeId(1), i))
                .expect("in bounds")
        })
        .collect();
    (sim.now(), mem, error)
}

/// One work request for 4 KiB: the payload's serialisation (40 ps a byte at 200 Gb/s) is
/// added to one put's round trip, where 512 puts would cost 512 posts.
#[test]
fn a_long_put_costs_one_round_trip_and_its_payload() {
    let one = timed(put_words(vec![9]), 1);
    assert_eq!(one.1, vec![9]);
    let words: Vec<u64> = (1..=512).collect();
    let long = timed(put_words(words.clone()), 512);
    assert_eq!(long.1, words, "every word written, in place");
    let l = LatencyModel::paper_cx6();
    let payload = (4096 - 8) * l.wire_ps_per_byte / 1000;
    assert_eq!(
        long.0,
        one.0 + payload,
        "the same round trip plus the payload"
    );
    assert_eq!(
        one.0,
        timed(
            Op::PutInline {
                remote: Loc::word(NodeId(1), 0),
                value: 9,
                work_id: W,
            },
            1
        )
        .0,
        "one word costs what an inline put costs"
    );
}

/// A put whose last word is past the node's memory fails at its wait and writes nothing.
#[test]
fn a_word_out_of_bounds_fails_the_put() {
    let mut machine = Machine::new(&Layout::uniform(2, 2));
    let code = vec![
        Compiled::op(Op::PutWords {
            remote: Loc::word(NodeId(1), 1),
            words: vec![5, 6].into(),
            work_id: W,
        }),
        Compiled::op(Op::Wait { work_id: W }),
    ];
    machine.spawn(NodeId(0), LitmusThread::new(code, 0));
    let mut sim = Simulator::new(machine, SimConfig::new(1, LatencyModel::generic()));
    sim.run(u64::MAX, 10_000);
    let thread = &sim.machine().threads[0];
    assert!(
        matches!(thread.process.error, Some(RdmaError::WorkFailed { .. })),
        "the wait reports the failure: {:?}",
        thread.process.error
    );
    assert_eq!(sim.machine().read(Loc::word(NodeId(1), 1)), Some(0));
}
