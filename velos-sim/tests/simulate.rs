//! The simulation driver: determinism (trace hashes), exact virtual time, and every fault.

use velos_rdma::{Loc, NodeId, Op, RdmaError, Rmw, WorkId};
use velos_sim::latency::LatencyModel;
use velos_sim::litmus::compile::compile;
use velos_sim::litmus::parse;
use velos_sim::litmus::program::{Compiled, LitmusThread};
use velos_sim::litmus::run::initial_machine;
use velos_sim::machine::{CrashMode, Machine, Next, Transition};
use velos_sim::simulate::{Fault, ScheduledFault, SimConfig, Simulator, Stop};

fn machine_of(text: &str) -> Machine<LitmusThread> {
    let test = parse(text).expect("test parses");
    initial_machine(&compile(&test).expect("test compiles"))
}

const FIG5: &str = "litmus fig5\nnodes 2\nloc y@1 = 0\nloc x@2 = 0\n\
thread T1@1\n  puti x 1 w=d\n  wait d\n  load r1 y\n\
thread T2@2\n  puti y 1 w=f\n  wait f\n  load r2 x\n\
exists T1:r1 = 0 && T2:r2 = 0\nexpect allowed\n";

fn run(seed: u64, latency: LatencyModel) -> (u64, u64, Stop) {
    let mut sim = Simulator::new(machine_of(FIG5), SimConfig::new(seed, latency));
    let stop = sim.run(u64::MAX, 100_000);
    (sim.trace_hash(), sim.now(), stop)
}

#[test]
fn same_seed_same_trace_bit_for_bit() {
    for seed in 0..20 {
        let a = run(seed, LatencyModel::generic());
        let b = run(seed, LatencyModel::generic());
        assert_eq!(a, b, "seed {seed} replays differently");
        assert_eq!(a.2, Stop::Complete);
    }
}

#[test]
fn different_seeds_explore_different_traces() {
    let hashes: std::collections::BTreeSet<u64> = (0..50)
        .map(|seed| run(seed, LatencyModel::uniform()).0)
        .collect();
    assert!(
        hashes.len() > 10,
        "only {} distinct traces over 50 seeds",
        hashes.len()
    );
}

#[test]
fn pinned_trace_hash_of_seed_42() {
    // A change of the scheduler, the PRNG or a rule's timing shows up here: replaying old
    // seeds depends on it. Update only together with a note on why replays changed.
    let (hash, now, stop) = run(42, LatencyModel::generic());
    assert_eq!(stop, Stop::Complete);
    assert_eq!((hash, now), (PINNED_HASH, PINNED_NOW));
}

const PINNED_HASH: u64 = 5_493_843_642_732_936_699;
const PINNED_NOW: u64 = 933;

/// One thread on node 0 running `ops`, over `nodes` nodes of 4 words.
fn script(nodes: u16, ops: Vec<Op>) -> Machine<LitmusThread> {
    let mut machine = Machine::new(&velos_rdma::Layout::uniform(nodes, 4));
    let code = ops.into_iter().map(Compiled::op).collect();
    machine.spawn(NodeId(0), LitmusThread::new(code, 0));
    machine
}

const W: WorkId = WorkId(1);

/// The error of `put_wait(1)` whose target node 1 crashed (or was replaced) under it.
fn put_to_crashed_node_1() -> Option<RdmaError> {
    Some(RdmaError::WorkFailed {
        work_id: W,
        cause: Box::new(RdmaError::RemoteCrashed { node: NodeId(1) }),
    })
}

/// Node `node` crashes at `at_ns`.
fn crash_of(node: u16, at_ns: u64, mode: CrashMode) -> ScheduledFault {
    ScheduledFault {
        at_ns,
        fault: Fault::Crash {
            node: NodeId(node),
            mode,
        },
    }
}

fn put_wait(to: u16) -> Vec<Op> {
    vec![
        Op::PutInline {
            remote: Loc::word(NodeId(to), 0),
            value: 5,
            work_id: W,
        },
        Op::Wait { work_id: W },
    ]
}

#[test]
fn virtual_time_of_a_put_is_exact() {
    // uniform: every step costs 1 ns. post at 0 -> doorbell: in the pipe at 1 -> remote
    // write issued at 2 (the inline value needs no local read) -> ACK completes and the
    // write commits at 3 -> wait returns at 3.
    let mut sim = Simulator::new(
        script(2, put_wait(1)),
        SimConfig::new(7, LatencyModel::uniform()),
    );
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Complete);
    assert_eq!(sim.now(), 3);
    assert_eq!(sim.machine().read(Loc::word(NodeId(1), 0)), Some(5));
}

#[test]
fn crash_with_error_mode_fails_the_wait() {
    let mut config = SimConfig::new(1, LatencyModel::uniform());
    config.faults.push(crash_of(1, 0, CrashMode::Error));
    let mut sim = Simulator::new(script(2, put_wait(1)), config);
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Complete);
    let error = sim.machine().threads[0].process.error.clone();
    assert_eq!(error, put_to_crashed_node_1());
}

#[test]
fn crash_with_hang_mode_never_completes_the_wait() {
    let mut config = SimConfig::new(1, LatencyModel::uniform());
    config.faults.push(crash_of(1, 0, CrashMode::Hang));
    let mut sim = Simulator::new(script(2, put_wait(1)), config);
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Deadlock);
    assert!(matches!(
        sim.machine().threads[0].next,
        Next::Pending(Op::Wait { .. })
    ));
    assert_eq!(sim.machine().threads[0].process.error, None);
}

#[test]
fn a_restarted_node_runs_its_new_process_on_blank_memory_and_old_operations_fail() {
    // Node 1 holds 7 when it crashes (operations towards it hang); a put of node 0 waits
    // for it for ever, until a new process starts in node 1's place: then the put fails
    // (its connection ended with the old process), the memory is blank but for what the
    // new process stores, and the run completes.
    let mut machine = script(2, put_wait(1));
    machine
        .init(Loc::word(NodeId(1), 2), 7)
        .expect("in the layout");
    let idle = |code: Vec<Op>| LitmusThread::new(code.into_iter().map(Compiled::op).collect(), 0);
    machine.spawn(NodeId(1), idle(vec![]));
    let mut config = SimConfig::new(1, LatencyModel::uniform());
    config.faults.push(crash_of(1, 0, CrashMode::Hang));
    let mut sim = Simulator::new(machine, config);
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Deadlock);
    let hash = sim.trace_hash();
    let store = Op::Store {
        loc: Loc::word(NodeId(1), 3),
        value: 9,
    };
    sim.restart(NodeId(1), idle(vec![store]));
    assert_ne!(sim.trace_hash(), hash, "a restart is in the trace");
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Complete);
    let m = sim.machine();
    assert!(m.is_up(NodeId(1)));
    assert_eq!(m.read(Loc::word(NodeId(1), 2)), Some(0), "blank memory");
    assert_eq!(
        m.read(Loc::word(NodeId(1), 3)),
        Some(9),
        "the new process ran"
    );
    assert_eq!(m.threads[0].process.error, put_to_crashed_node_1());
}

#[test]
fn a_post_still_in_the_store_buffer_at_a_restart_fails_and_never_reaches_the_new_memory() {
    // Node 0 stores locally, then posts a put to node 1: the put waits in its store buffer
    // behind the store. Node 1 crashes and a new process starts there before the store
    // buffer drains. The put was posted on the connection to the old process: it fails,
    // and the new process's memory stays blank (it once landed there, and an acceptor's
    // word named a value buffer nobody had written into the new memory).
    let mut ops = vec![Op::Store {
        loc: Loc::word(NodeId(0), 1),
        value: 1,
    }];
    ops.extend(put_wait(1));
    let mut m = script(2, ops);
    let idle = |code: Vec<Op>| LitmusThread::new(code.into_iter().map(Compiled::op).collect(), 0);
    m.spawn(NodeId(1), idle(vec![]));
    let mut clock = velos_sim::machine::NoDelay;
    m.fire(Transition::Cpu(0), 0, &mut clock); // the store
    m.fire(Transition::Cpu(0), 0, &mut clock); // the put, behind it
    assert_eq!(m.threads[0].sb.len(), 2, "both wait in the store buffer");
    m.crash(NodeId(1), CrashMode::Hang);
    m.restart(NodeId(1), idle(vec![]), 0);
    assert_eq!(
        m.threads[0].sb.len(),
        1,
        "the put left the store buffer, failed"
    );
    let mut enabled = Vec::new();
    loop {
        m.enabled(&mut enabled);
        let Some(&(t, _)) = enabled.first() else {
            break;
        };
        m.fire(t, 0, &mut clock);
    }
    assert_eq!(m.read(Loc::word(NodeId(1), 0)), Some(0), "blank memory");
    assert_eq!(
        m.read(Loc::word(NodeId(0), 1)),
        Some(1),
        "the store flushed"
    );
    assert_eq!(m.threads[0].process.error, put_to_crashed_node_1());
}

#[test]
fn crash_of_the_own_node_stops_the_thread() {
    let mut config = SimConfig::new(1, LatencyModel::uniform());
    config.faults.push(crash_of(0, 1, CrashMode::Hang));
    let mut sim = Simulator::new(script(2, put_wait(1)), config);
    sim.run(u64::MAX, 1000);
    assert_eq!(sim.machine().threads[0].next, Next::Crashed);
}

#[test]
fn queue_pair_error_fails_the_wait_and_later_posts() {
    let mut config = SimConfig::new(1, LatencyModel::uniform());
    config.faults.push(ScheduledFault {
        at_ns: 0,
        fault: Fault::QueuePairError {
            from: NodeId(0),
            to: NodeId(1),
        },
    });
    let mut ops = put_wait(1);
    ops.push(Op::Atomic {
        local: Loc::word(NodeId(0), 1),
        remote: Loc::word(NodeId(1), 1),
        rmw: Rmw::Faa { add: 1 },
        work_id: WorkId(2),
    });
    ops.push(Op::Wait { work_id: WorkId(2) });
    let mut sim = Simulator::new(script(2, ops), config);
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Complete);
    assert_eq!(
        sim.machine().threads[0].process.error,
        Some(RdmaError::WorkFailed {
            work_id: W,
            cause: Box::new(RdmaError::QueuePairError { node: NodeId(1) })
        })
    );
}

/// A queue pair put in error while an atomic's write waits in its `rW` (issued to the
/// responder, not yet in memory) still commits it: the write lands and `L[n]` is freed, so
/// a later atomic from another node towards the same node completes (before the fix it
/// waited for the lock for ever: seeds 1289 and 15431 of the campaign).
#[test]
fn an_atomic_write_issued_before_a_queue_pair_error_frees_the_lock() {
    let latency = LatencyModel {
        remote_mem_write_ns: 1_000, // the atomic's write waits in rW for 1 µs
        ..LatencyModel::uniform()
    };
    let mut config = SimConfig::new(1, latency);
    config.faults.push(ScheduledFault {
        at_ns: 500,
        fault: Fault::QueuePairError {
            from: NodeId(0),
            to: NodeId(1),
        },
    });
    let cas = vec![
        Op::Atomic {
            local: Loc::word(NodeId(0), 1),
            remote: Loc::word(NodeId(1), 0),
            rmw: Rmw::Cas {
                expected: 0,
                new: 7,
            },
            work_id: W,
        },
        Op::Wait { work_id: W },
    ];
    let mut machine = script(3, cas);
    let later = vec![
        Op::Pause { ns: 600 },
        Op::Atomic {
            local: Loc::word(NodeId(2), 1),
            remote: Loc::word(NodeId(1), 1),
            rmw: Rmw::Faa { add: 1 },
            work_id: W,
        },
        Op::Wait { work_id: W },
    ];
    let code = later.into_iter().map(Compiled::op).collect();
    machine.spawn(NodeId(2), LitmusThread::new(code, 0));
    let mut sim = Simulator::new(machine, config);
    assert_eq!(sim.run(100_000, 10_000), Stop::Complete);
    let m = sim.machine();
    assert_eq!(
        m.threads[1].next,
        Next::Finished,
        "the later atomic completed"
    );
    assert_eq!(m.threads[1].process.error, None);
    assert_eq!(
        m.read(Loc::word(NodeId(1), 0)),
        Some(7),
        "the issued write landed"
    );
    assert_eq!(m.read(Loc::word(NodeId(1), 1)), Some(1));
    // The requester's completion (its local write) came before the fault.
    assert_eq!(m.threads[0].next, Next::Finished);
    assert_eq!(m.threads[0].process.error, None);
}

#[test]
fn delay_fault_adds_exactly_its_cost() {
    let base = {
        let mut sim = Simulator::new(
            script(2, put_wait(1)),
            SimConfig::new(3, LatencyModel::uniform()),
        );
        sim.run(u64::MAX, 1000);
        sim.now()
    };
    let mut config = SimConfig::new(3, LatencyModel::uniform());
    config.faults.push(ScheduledFault {
        at_ns: 0,
        fault: Fault::Delay {
            node: NodeId(1),
            extra_ns: 100,
            duration_ns: 1_000,
        },
    });
    let mut sim = Simulator::new(script(2, put_wait(1)), config);
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Complete);
    // Two delayed steps on the queue pair towards node 1: the wire there and back (the
    // doorbell is the poster's own step).
    assert_eq!(sim.now(), base + 200);
}

/// A slow peer is a gray failure of its queue pairs only: a post towards it does not hold
/// up the poster's later posts to another node (the store buffer hands each to the NIC at
/// the doorbell's own cost), so a put to node 2 posted after one to the slowed node 1
/// completes at the undelayed time.
#[test]
fn a_slow_peer_does_not_hold_up_posts_to_the_others() {
    const W2: WorkId = WorkId(2);
    let ops = vec![
        Op::PutInline {
            remote: Loc::word(NodeId(1), 0),
            value: 5,
            work_id: W,
        },
        Op::PutInline {
            remote: Loc::word(NodeId(2), 0),
            value: 6,
            work_id: W2,
        },
        Op::Wait { work_id: W2 },
    ];
    let time = |delay: bool| {
        let mut config = SimConfig::new(3, LatencyModel::uniform());
        if delay {
            config
                .faults
                .push(ScheduledFault::delay(1, 0, 1_000_000, 10_000_000));
        }
        let mut sim = Simulator::new(script(3, ops.clone()), config);
        // The first whole nanosecond by which the thread's wait returned.
        let finished = (1..100u64)
            .find(|&t| {
                sim.run(t, u64::MAX);
                sim.machine().threads[0].next == Next::Finished
            })
            .expect("the wait returns within 100 ns");
        let m = sim.machine();
        assert_eq!(m.threads[0].process.error, None);
        assert_eq!(m.read(Loc::word(NodeId(2), 0)), Some(6), "the put landed");
        (finished, m.read(Loc::word(NodeId(1), 0)))
    };
    let (healthy, landed) = time(false);
    assert_eq!(
        landed,
        Some(5),
        "premise: without the delay, both puts land"
    );
    let (slowed, pending) = time(true);
    assert_eq!(
        pending,
        Some(0),
        "premise: the put to the slow node is still on its way"
    );
    assert_eq!(slowed, healthy, "node 2's put is not held up by node 1's");
}

#[test]
fn bad_addresses_are_errors_not_panics() {
    let ops = vec![
        Op::Atomic {
            local: Loc::word(NodeId(0), 0),
            remote: Loc {
                node: NodeId(1),
                offset: 4,
            },
            rmw: Rmw::Cas {
                expected: 0,
                new: 1,
            },
            work_id: W,
        },
        Op::Wait { work_id: W },
    ];
    let mut sim = Simulator::new(script(2, ops), SimConfig::new(1, LatencyModel::uniform()));
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Complete);
    assert_eq!(
        sim.machine().threads[0].process.error,
        Some(RdmaError::WorkFailed {
            work_id: W,
            cause: Box::new(RdmaError::MisalignedAtomic {
                loc: Loc {
                    node: NodeId(1),
                    offset: 4
                }
            })
        })
    );
    let oob = vec![
        Op::Get {
            local: Loc::word(NodeId(0), 0),
            remote: Loc::word(NodeId(1), 99),
            work_id: W,
        },
        Op::Wait { work_id: W },
    ];
    let mut sim = Simulator::new(script(2, oob), SimConfig::new(1, LatencyModel::uniform()));
    sim.run(u64::MAX, 1000);
    assert!(matches!(
        sim.machine().threads[0].process.error,
        Some(RdmaError::WorkFailed { ref cause, .. }) if matches!(**cause, RdmaError::OutOfBounds { .. })
    ));
    let not_local = vec![Op::Store {
        loc: Loc::word(NodeId(1), 0),
        value: 1,
    }];
    let mut sim = Simulator::new(
        script(2, not_local),
        SimConfig::new(1, LatencyModel::uniform()),
    );
    sim.run(u64::MAX, 1000);
    assert!(matches!(
        sim.machine().threads[0].process.error,
        Some(RdmaError::NotLocal { .. })
    ));
}

/// Runs `setup` (posting work id `W`), then `probe` into register 0, 5 µs of local loads
/// (1,000 loads of 5 ns: far more than a round trip), and `probe` into register 1, with
/// node 1 hung from the start if `crash`: the registers, once the thread finished.
fn probe_twice(setup: Vec<Compiled>, probe: Op, crash: bool) -> Vec<u64> {
    use velos_sim::litmus::program::Action;
    let probe = |reg| Compiled {
        action: Action::Op(probe.clone()),
        reg: Some(reg),
    };
    let mut machine = Machine::new(&velos_rdma::Layout::uniform(2, 4));
    let mut code = setup;
    code.push(probe(0));
    code.extend((0..1000).map(|_| {
        Compiled::op(Op::Load {
            loc: Loc::word(NodeId(0), 3),
        })
    }));
    code.push(probe(1));
    machine.spawn(NodeId(0), LitmusThread::new(code, 2));
    let mut config = SimConfig::new(5, LatencyModel::generic());
    if crash {
        config.faults.push(crash_of(1, 0, CrashMode::Hang));
    }
    let mut sim = Simulator::new(machine, config);
    sim.run(u64::MAX, 10_000);
    let thread = &sim.machine().threads[0];
    assert_eq!(thread.next, Next::Finished, "a probe never blocks");
    thread.process.regs.clone()
}

/// `test` never blocks: 0 while the operation is pending, then 1 (and the op's failure).
#[test]
fn test_reports_completion_without_blocking() {
    let put = || {
        vec![Compiled::op(Op::PutInline {
            remote: Loc::word(NodeId(1), 0),
            value: 5,
            work_id: W,
        })]
    };
    let test = Op::Test { work_id: W };
    assert_eq!(
        probe_twice(put(), test.clone(), false),
        vec![0, 1],
        "pending right after the post, complete 5 µs later"
    );
    assert_eq!(
        probe_twice(put(), test, true),
        vec![0, 0],
        "towards a hung node it stays 0 and never blocks"
    );
}

/// `test_load` never blocks: `Done` while the get is pending (the register keeps its 0),
/// then the word the get brought (and, towards a hung node, never).
#[test]
fn test_load_replies_the_word_once_complete() {
    let local = Loc::word(NodeId(0), 1);
    let get = |value: Option<u64>| {
        let mut code = Vec::new();
        if let Some(value) = value {
            code.push(Compiled::op(Op::PutInline {
                remote: Loc::word(NodeId(1), 0),
                value,
                work_id: WorkId(9),
            }));
            code.push(Compiled::op(Op::Wait { work_id: WorkId(9) }));
        }
        code.push(Compiled::op(Op::Get {
            local,
            remote: Loc::word(NodeId(1), 0),
            work_id: W,
        }));
        code
    };
    let test_load = Op::TestLoad {
        work_id: W,
        loc: local,
    };
    assert_eq!(
        probe_twice(get(Some(5)), test_load.clone(), false),
        vec![0, 5],
        "pending, then the word the get brought"
    );
    assert_eq!(
        probe_twice(get(None), test_load, true),
        vec![0, 0],
        "towards a hung node: pending for ever"
    );
}

/// `wait_any` returns the first work id whose operations are complete, and blocks while
/// none is (towards a hung node, forever).
#[test]
fn wait_any_waits_for_the_first_answer() {
    use velos_sim::litmus::program::Action;
    let mut machine = Machine::new(&velos_rdma::Layout::uniform(3, 4));
    let code = vec![
        Compiled::op(Op::PutInline {
            remote: Loc::word(NodeId(1), 0),
            value: 5,
            work_id: WorkId(10),
        }),
        Compiled::op(Op::PutInline {
            remote: Loc::word(NodeId(2), 0),
            value: 5,
            work_id: WorkId(11),
        }),
        Compiled {
            action: Action::Op(Op::WaitAny {
                base: WorkId(10),
                mask: 0b11,
            }),
            reg: Some(0),
        },
    ];
    machine.spawn(NodeId(0), LitmusThread::new(code, 1));
    let mut config = SimConfig::new(5, LatencyModel::generic());
    config.faults.push(crash_of(1, 0, CrashMode::Hang));
    let mut sim = Simulator::new(machine, config);
    // Complete: the put hung towards the crashed node does not count (`Machine::is_complete`).
    assert_eq!(sim.run(u64::MAX, 10_000), Stop::Complete);
    assert_eq!(
        sim.machine().threads[0].process.regs,
        vec![1],
        "node 2 answered, node 1 never will"
    );
    assert_eq!(sim.machine().threads[0].next, Next::Finished);
}

/// `now` reads virtual time; `pause` lets exactly its duration pass (plus the step's own
/// cost); the explorer has no time, so there both are instantaneous.
#[test]
fn now_and_pause_follow_virtual_time() {
    use velos_sim::litmus::program::Action;
    let now = |reg| Compiled {
        action: Action::Op(Op::Now),
        reg: Some(reg),
    };
    let code = vec![now(0), Compiled::op(Op::Pause { ns: 1_000 }), now(1)];
    let mut machine = Machine::new(&velos_rdma::Layout::uniform(1, 4));
    machine.spawn(NodeId(0), LitmusThread::new(code.clone(), 2));
    // uniform: every step costs 1 ns: now at 0, pause from 1 to 1 + 1000, now at 1001.
    let mut sim = Simulator::new(machine, SimConfig::new(3, LatencyModel::uniform()));
    assert_eq!(sim.run(u64::MAX, 100), Stop::Complete);
    assert_eq!(sim.machine().threads[0].process.regs, vec![0, 1_001]);
    let mut machine = Machine::new(&velos_rdma::Layout::uniform(1, 4));
    machine.spawn(NodeId(0), LitmusThread::new(code, 2));
    let outcomes =
        velos_sim::explore::outcomes(machine, 100, |m| m.threads[0].process.regs.clone());
    assert_eq!(outcomes.into_iter().collect::<Vec<_>>(), vec![vec![0, 0]]);
}

/// `test` right after a put's post may see it pending or complete; the reductions must keep
/// both (rule 5, the ACK leaving the pipe, decides which).
#[test]
fn test_after_a_put_sees_both_pending_and_complete() {
    use velos_sim::explore::{ExploreOptions, Reduction, explore_with};
    use velos_sim::litmus::program::Action;
    let code = vec![
        Compiled::op(Op::PutInline {
            remote: Loc::word(NodeId(1), 0),
            value: 5,
            work_id: W,
        }),
        Compiled {
            action: Action::Op(Op::Test { work_id: W }),
            reg: Some(0),
        },
        Compiled::op(Op::Wait { work_id: W }),
    ];
    for reduction in [Reduction::None, Reduction::Singletons, Reduction::Stubborn] {
        let mut machine = Machine::new(&velos_rdma::Layout::uniform(2, 4));
        machine.spawn(NodeId(0), LitmusThread::new(code.clone(), 1));
        let e = explore_with(
            machine,
            ExploreOptions {
                max_states: 10_000,
                reduction,
            },
            |m| m.threads[0].process.regs.clone(),
            |_| None,
        )
        .expect("small");
        assert_eq!(
            e.outcomes.into_iter().collect::<Vec<_>>(),
            vec![vec![0], vec![1]],
            "{reduction:?}"
        );
    }
}

/// Every fault applied is recorded with whether it met a live node: a second crash of a
/// node already down and a pause of it did nothing, until the node restarts inside the
/// pause's window; a delay of a live node acted.
#[test]
fn a_fault_that_meets_its_node_down_is_told_as_doing_nothing() {
    let mut machine = script(2, put_wait(1));
    let idle = |code: Vec<Op>| LitmusThread::new(code.into_iter().map(Compiled::op).collect(), 0);
    machine.spawn(NodeId(1), idle(vec![]));
    let mut config = SimConfig::new(1, LatencyModel::uniform());
    config.faults.push(crash_of(1, 0, CrashMode::Hang));
    config.faults.push(crash_of(1, 1, CrashMode::Hang));
    config.faults.push(ScheduledFault {
        at_ns: 1,
        fault: Fault::Pause {
            node: NodeId(1),
            duration_ns: 1_000_000,
        },
    });
    config.faults.push(ScheduledFault::delay(0, 1, 5, 10));
    let mut sim = Simulator::new(machine, config);
    assert_eq!(sim.run(u64::MAX, 1000), Stop::Deadlock);
    assert_eq!(sim.faults_applied(), 4);
    let idle_faults = |sim: &Simulator<LitmusThread>| -> Vec<Fault> {
        sim.faults_without_effect()
            .map(|e| e.fault.clone())
            .collect()
    };
    assert_eq!(
        idle_faults(&sim),
        [
            Fault::Crash {
                node: NodeId(1),
                mode: CrashMode::Hang
            },
            Fault::Pause {
                node: NodeId(1),
                duration_ns: 1_000_000
            }
        ],
        "the second crash and the pause met node 1 down; the first crash and the delay acted"
    );
    // Node 1 restarts inside the pause's window: the pause now acts on the new process.
    sim.restart(NodeId(1), idle(vec![]));
    assert_eq!(
        idle_faults(&sim),
        [Fault::Crash {
            node: NodeId(1),
            mode: CrashMode::Hang
        }]
    );
}
