//! Device-memory placement: words in NIC device memory make the responder's steps cost
//! `device_mem_access_ns` (virtual time is exact), and change nothing else.

use velos_rdma::{Layout, Loc, NodeId, Op, RdmaError, Rmw, WorkId};
use velos_sim::latency::LatencyModel;
use velos_sim::litmus::program::{Compiled, LitmusThread};
use velos_sim::machine::Machine;
use velos_sim::simulate::{SimConfig, Simulator, Stop};

const W: WorkId = WorkId(1);

/// Every step 1 ns, but a responder's host-memory access 100 ns and its device-memory
/// access 10 ns; no jitter.
fn profile() -> LatencyModel {
    LatencyModel {
        name: "test".into(),
        atomic_ns: 100,
        remote_mem_write_ns: 100,
        put_ack_ns: 100,
        device_mem_access_ns: 10,
        ..LatencyModel::uniform()
    }
}

/// Node 0 runs `op` then waits for it, towards word 0 of node 1 (in device memory or
/// not): the end time and node 1's word 0.
fn run(op: Op, device_memory: bool) -> (u64, Option<u64>) {
    let mut machine = Machine::new(&Layout::uniform(2, 4));
    if device_memory {
        machine
            .set_device_memory(NodeId(1), 0..1)
            .expect("inside the layout");
    }
    let code = [op, Op::Wait { work_id: W }].map(Compiled::op).to_vec();
    machine.spawn(NodeId(0), LitmusThread::new(code, 0));
    let mut sim = Simulator::new(machine, SimConfig::new(3, profile()));
    assert_eq!(sim.run(u64::MAX, 1_000), Stop::Complete);
    (sim.now(), sim.machine().read(Loc::word(NodeId(1), 0)))
}

#[test]
fn a_put_into_device_memory_is_acknowledged_sooner() {
    let put = Op::PutInline {
        remote: Loc::word(NodeId(1), 0),
        value: 7,
        work_id: W,
    };
    // post 0 -> pipe 1 -> remote write issued 2 -> ACK after 100 (host) or 10 (device)
    // plus the wire's 1 -> the wait returns then.
    assert_eq!(run(put.clone(), false), (103, Some(7)));
    assert_eq!(run(put, true), (13, Some(7)));
}

#[test]
fn a_cas_on_device_memory_executes_sooner() {
    let cas = Op::Atomic {
        local: Loc::word(NodeId(0), 0),
        remote: Loc::word(NodeId(1), 0),
        rmw: Rmw::Cas {
            expected: 0,
            new: 9,
        },
        work_id: W,
    };
    // post 0 -> pipe 1 -> atomic read 2; the run ends when the atomic's write-back
    // commits, after the execution (100 or 10) and the remote write (100 or 10).
    let (host, word) = run(cas.clone(), false);
    let (device, same) = run(cas, true);
    assert_eq!(
        (word, same),
        (Some(9), Some(9)),
        "placement changes no result"
    );
    assert_eq!((host, device), (202, 22));
}

#[test]
fn placement_outside_the_memory_is_refused() {
    let mut machine: Machine<LitmusThread> = Machine::new(&Layout::uniform(2, 4));
    assert_eq!(
        machine.set_device_memory(NodeId(2), 0..1),
        Err(RdmaError::UnknownNode { node: NodeId(2) })
    );
    assert!(matches!(
        machine.set_device_memory(NodeId(1), 2..5),
        Err(RdmaError::OutOfBounds { .. })
    ));
    assert_eq!(machine.set_device_memory(NodeId(1), 2..4), Ok(()));
    assert!(machine.in_device_memory(Loc::word(NodeId(1), 3)));
    assert!(!machine.in_device_memory(Loc::word(NodeId(1), 1)));
    assert!(!machine.in_device_memory(Loc::word(NodeId(0), 3)));
}
