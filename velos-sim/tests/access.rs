//! Queue-pair write permission (`Op::SetWriteAccess`) in the emulator: a revoked node's put
//! fails with `RemoteAccess` and breaks its queue pair, a grant reconnects it, the change
//! costs exactly `qp_access_change_ns`, and the explorer sees both orders of a put and a
//! revocation. And `Op::Disconnect`: both ways cut, until a new process starts in the
//! cut node's place; a new process its cutter has not met yet keeps its own side (rule
//! (disconnect the process met)).

use velos_rdma::{Layout, Loc, NodeId, Op, Process, RdmaError, Reply, Step, WorkId};
use velos_sim::explore::{ExploreOptions, Reduction, explore_with};
use velos_sim::latency::LatencyModel;
use velos_sim::machine::{Machine, QpStatus};
use velos_sim::simulate::{SimConfig, Simulator, Stop};

/// A fixed list of operations; every reply is recorded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Script {
    ops: Vec<Op>,
    replies: Vec<Reply>,
    declares: bool,
}

impl Script {
    fn new(ops: Vec<Op>) -> Script {
        Script {
            ops,
            replies: Vec::new(),
            declares: true,
        }
    }
}

impl Process for Script {
    fn resume(&mut self, reply: Reply) -> Step {
        if reply != Reply::Start {
            self.replies.push(reply);
        }
        match self.ops.get(self.replies.len()) {
            Some(op) => Step::Op(op.clone()),
            None => Step::Done,
        }
    }

    fn changes_write_access(&self) -> bool {
        self.declares
    }
}

const W: WorkId = WorkId(1);
const ACCESS_NS: u64 = 250_000;

fn latency() -> LatencyModel {
    LatencyModel {
        qp_access_change_ns: ACCESS_NS,
        ..LatencyModel::uniform()
    }
}

fn target() -> Loc {
    Loc::word(NodeId(1), 0)
}

fn put(value: u64) -> [Op; 2] {
    [
        Op::PutInline {
            remote: target(),
            value,
            work_id: W,
        },
        Op::Wait { work_id: W },
    ]
}

fn refused(reply: &Reply) -> bool {
    matches!(reply, Reply::Failed(RdmaError::WorkFailed { cause, .. })
        if matches!(**cause, RdmaError::RemoteAccess { loc } if loc == target()))
}

/// Node 1 revokes node 0's write access, then grants it again; node 0 puts before, during
/// the refusal (fails, and so does a get on the broken queue pair), and after the grant.
#[test]
fn revoked_put_fails_and_grant_reconnects() {
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    let owner = machine.spawn(
        NodeId(1),
        Script::new(vec![
            Op::Now,
            Op::SetWriteAccess { writers: 0b10 },
            Op::Now,
            Op::Pause { ns: 1_000_000 },
            Op::SetWriteAccess { writers: 0b11 },
        ]),
    );
    let get = [
        Op::Get {
            local: Loc::word(NodeId(0), 1),
            remote: target(),
            work_id: W,
        },
        Op::Wait { work_id: W },
    ];
    let mut ops = put(1).to_vec();
    ops.push(Op::Pause { ns: 500_000 });
    ops.extend(put(2));
    ops.extend(get);
    ops.push(Op::Pause { ns: 1_000_000 });
    ops.extend(put(3));
    let writer = machine.spawn(NodeId(0), Script::new(ops));
    let mut sim = Simulator::new(machine, SimConfig::new(7, latency()));
    assert_eq!(sim.run(u64::MAX, 10_000), Stop::Complete);
    let m = sim.machine();
    let owner = &m.threads[owner].process.replies;
    // Now at 0 (next step at 1); the change starts at 1, is in effect at 1 + ACCESS_NS and
    // the process resumes then (its next step 1 ns later): exact virtual time.
    assert_eq!(owner[0], Reply::Value(0));
    assert_eq!(owner[1], Reply::Done);
    assert_eq!(owner[2], Reply::Value(ACCESS_NS + 2));
    assert_eq!(owner[4], Reply::Done);
    let writer = &m.threads[writer].process.replies;
    assert_eq!(
        writer[1],
        Reply::Done,
        "before the revocation the put lands"
    );
    assert!(
        refused(&writer[4]),
        "the revoked put fails: {:?}",
        writer[4]
    );
    assert!(
        matches!(&writer[6], Reply::Failed(RdmaError::WorkFailed { cause, .. })
            if matches!(**cause, RdmaError::QueuePairError { node: NodeId(1) })),
        "the refusal broke the queue pair: {:?}",
        writer[6]
    );
    assert_eq!(writer[9], Reply::Done, "after the grant the put lands");
    assert_eq!(m.read(target()), Some(3));
    assert_eq!(m.qps[m.qp_index(1, NodeId(1))].status, QpStatus::Ready);
}

/// Bad masks and undeclared changes are typed errors.
#[test]
fn bad_changes_are_refused() {
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    machine.spawn(
        NodeId(0),
        Script::new(vec![Op::SetWriteAccess { writers: 0b100 }]),
    );
    let mut undeclared = Script::new(vec![Op::SetWriteAccess { writers: 0b1 }]);
    undeclared.declares = false;
    let mut lone = Machine::new(&Layout::uniform(2, 4));
    lone.spawn(NodeId(1), undeclared);
    let mut sim = Simulator::new(machine, SimConfig::new(1, latency()));
    assert_eq!(sim.run(u64::MAX, 100), Stop::Complete);
    assert_eq!(
        sim.machine().threads[0].process.replies,
        vec![Reply::Failed(RdmaError::UnknownNode { node: NodeId(2) })]
    );
    let mut sim = Simulator::new(lone, SimConfig::new(1, latency()));
    assert_eq!(sim.run(u64::MAX, 100), Stop::Complete);
    assert!(matches!(
        sim.machine().threads[0].process.replies[..],
        [Reply::Failed(RdmaError::Unsupported { .. })]
    ));
    assert_eq!(sim.machine().writers, vec![u64::MAX; 2], "nothing changed");
}

/// The explorer keeps both orders of a put and a concurrent revocation, under every
/// reduction (none is made on a machine with access control).
#[test]
fn explorer_sees_put_before_and_after_revocation() {
    for reduction in [Reduction::None, Reduction::Singletons, Reduction::Stubborn] {
        let mut machine = Machine::new(&Layout::uniform(2, 4));
        machine.spawn(
            NodeId(1),
            Script::new(vec![Op::SetWriteAccess { writers: 0b10 }]),
        );
        machine.spawn(NodeId(0), Script::new(put(9).to_vec()));
        let e = explore_with(
            machine,
            ExploreOptions {
                max_states: 10_000,
                reduction,
            },
            |m| (refused(&m.threads[1].process.replies[1]), m.read(target())),
            |_| None,
        )
        .expect("small");
        let outcomes: Vec<_> = e.outcomes.into_iter().collect();
        assert_eq!(
            outcomes,
            vec![(false, Some(9)), (true, Some(0))],
            "{reduction:?}"
        );
    }
}

fn cas_at(remote: Loc, local: Loc) -> [Op; 2] {
    [
        Op::Atomic {
            local,
            remote,
            rmw: velos_rdma::Rmw::Cas {
                expected: 0,
                new: 9,
            },
            work_id: W,
        },
        Op::Wait { work_id: W },
    ]
}

fn broken_towards(reply: &Reply, node: u16) -> bool {
    matches!(reply, Reply::Failed(RdmaError::WorkFailed { cause, .. })
        if matches!(**cause, RdmaError::QueuePairError { node: n } if n == NodeId(node)))
}

/// Node 1 cuts node 0 off: node 0's CAS on node 1 fails and changes nothing, node 1's get
/// of node 0's word fails too; a new process in node 0's place reaches node 1 again.
#[test]
fn a_disconnect_cuts_both_ways_until_a_new_process_starts() {
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    let mut cutter = vec![Op::Disconnect { node: NodeId(0) }];
    cutter.extend([
        Op::Get {
            local: Loc::word(NodeId(1), 1),
            remote: Loc::word(NodeId(0), 1),
            work_id: W,
        },
        Op::Wait { work_id: W },
    ]);
    let cutter = machine.spawn(NodeId(1), Script::new(cutter));
    let mut ops = vec![Op::Pause { ns: 10_000 }];
    ops.extend(cas_at(target(), Loc::word(NodeId(0), 0)));
    let cut = machine.spawn(NodeId(0), Script::new(ops));
    let mut sim = Simulator::new(machine, SimConfig::new(7, latency()));
    assert_eq!(sim.run(u64::MAX, 10_000), Stop::Complete);
    let m = sim.machine();
    assert_eq!(m.threads[cutter].process.replies[0], Reply::Done);
    assert!(broken_towards(&m.threads[cutter].process.replies[2], 0));
    assert!(broken_towards(&m.threads[cut].process.replies[2], 1));
    assert_eq!(m.read(target()), Some(0), "the refused CAS changed nothing");
    assert_eq!(
        m.qps[m.qp_index(cut, NodeId(1))].status,
        QpStatus::Disconnected
    );
    assert_eq!(
        m.qps[m.qp_index(cutter, NodeId(0))].status,
        QpStatus::Disconnected
    );
    // The join path: a new process in node 0's place.
    sim.inject(velos_sim::simulate::Fault::Crash {
        node: NodeId(0),
        mode: velos_sim::machine::CrashMode::Error,
    });
    sim.restart(
        NodeId(0),
        Script::new(cas_at(target(), Loc::word(NodeId(0), 0)).to_vec()),
    );
    assert_eq!(sim.run(u64::MAX, 10_000), Stop::Complete);
    let m = sim.machine();
    assert_eq!(m.threads[cut].process.replies, vec![Reply::Done; 2]);
    assert_eq!(m.read(target()), Some(9), "the new process's CAS landed");
    // Node 1 has not met the new process yet: its queue pair towards it waits for that.
    assert_eq!(m.qps[m.qp_index(cutter, NodeId(0))].status, QpStatus::Unmet);
    sim.reconnect(NodeId(1), NodeId(0));
    let m = sim.machine();
    assert_eq!(m.qps[m.qp_index(cutter, NodeId(0))].status, QpStatus::Ready);
    let disconnect_self = Script::new(vec![Op::Disconnect { node: NodeId(1) }]);
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    let t = machine.spawn(NodeId(1), disconnect_self);
    let mut sim = Simulator::new(machine, SimConfig::new(7, latency()));
    assert_eq!(sim.run(u64::MAX, 100), Stop::Complete);
    assert_eq!(
        sim.machine().threads[t].process.replies,
        vec![Reply::Failed(RdmaError::UnknownNode { node: NodeId(1) })]
    );
}

/// Rule (disconnect the process met): a new process starts in node 0's place; node 1,
/// which has not met it, cuts node 0 off (it means the old process). The new process's
/// CAS on node 1 still lands — its queue pair is its own —; node 1's side stays cut until
/// the join path connects it, and a cut after that is both ways again.
#[test]
fn a_disconnect_spares_a_new_process_its_cutter_has_not_met() {
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    let cutter = Script::new(vec![
        Op::Pause { ns: 5_000 },
        Op::Disconnect { node: NodeId(0) },
    ]);
    let cutter = machine.spawn(NodeId(1), cutter);
    let old = machine.spawn(NodeId(0), Script::new(vec![]));
    let mut sim = Simulator::new(machine, SimConfig::new(7, latency()));
    sim.inject(velos_sim::simulate::Fault::Crash {
        node: NodeId(0),
        mode: velos_sim::machine::CrashMode::Hang,
    });
    let mut ops = vec![Op::Pause { ns: 10_000 }];
    ops.extend(cas_at(target(), Loc::word(NodeId(0), 0)));
    sim.restart(NodeId(0), Script::new(ops));
    let m = sim.machine();
    assert_eq!(m.qps[m.qp_index(cutter, NodeId(0))].status, QpStatus::Unmet);
    assert_eq!(sim.run(u64::MAX, 10_000), Stop::Complete);
    let m = sim.machine();
    assert_eq!(m.threads[cutter].process.replies, vec![Reply::Done; 2]);
    assert_eq!(m.threads[old].process.replies, vec![Reply::Done; 3]);
    assert_eq!(m.read(target()), Some(9), "the new process's CAS landed");
    assert_eq!(m.qps[m.qp_index(old, NodeId(1))].status, QpStatus::Ready);
    assert_eq!(
        m.qps[m.qp_index(cutter, NodeId(0))].status,
        QpStatus::Disconnected
    );
    sim.reconnect(NodeId(1), NodeId(0));
    let m = sim.machine();
    assert_eq!(m.qps[m.qp_index(cutter, NodeId(0))].status, QpStatus::Ready);
}
