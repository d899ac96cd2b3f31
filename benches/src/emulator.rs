//! Speed of the emulator: explorer states per second over a litmus suite, and emulated
//! operations per second of the simulation driver.

use crate::stats::median;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;
use velos_rdma::{Layout, Loc, NodeId, Op, Rmw, WorkId};
use velos_sim::latency::LatencyModel;
use velos_sim::litmus::program::{Compiled, LitmusThread};
use velos_sim::litmus::{RunOptions, collect_files, run_file};
use velos_sim::machine::Machine;
use velos_sim::simulate::{SimConfig, Simulator, Stop};

/// What one measurement of the emulator found.
#[derive(Clone, Debug, Serialize)]
pub struct EmulatorReport {
    /// Litmus files explored.
    pub suite_files: usize,
    /// States explored over the whole suite.
    pub suite_states: usize,
    /// Median wall time of exploring the whole suite, in seconds.
    pub suite_seconds_median: f64,
    /// Explorer states per second (suite states / median time).
    pub explorer_states_per_s: f64,
    /// Operations executed by processes in the simulation run.
    pub sim_ops: u64,
    /// Machine steps (rule firings) in the simulation run.
    pub sim_steps: u64,
    /// Median wall time of the simulation run, in seconds.
    pub sim_seconds_median: f64,
    /// Emulated operations per second on one core.
    pub sim_ops_per_s: f64,
    /// Machine steps per second on one core.
    pub sim_steps_per_s: f64,
}

/// Explores every file under `suite` `repeats` times; simulates `ops_per_thread`
/// operations on each of 4 threads `repeats` times.
pub fn measure(
    suite: &Path,
    repeats: usize,
    ops_per_thread: usize,
) -> anyhow::Result<EmulatorReport> {
    let files = collect_files(suite)?;
    let options = RunOptions::default();
    let mut suite_states = 0;
    let mut times = Vec::new();
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        suite_states = 0;
        for f in &files {
            suite_states += run_file(f, &options)?.states;
        }
        times.push(start.elapsed().as_secs_f64());
    }
    let suite_seconds_median = median(times).expect("at least one repeat");
    let mut sim_times = Vec::new();
    let (mut sim_ops, mut sim_steps) = (0, 0);
    for _ in 0..repeats.max(1) {
        let machine = workload(4, ops_per_thread);
        let mut sim = Simulator::new(machine, SimConfig::new(1, LatencyModel::generic()));
        let start = Instant::now();
        let stop = sim.run(u64::MAX, u64::MAX);
        sim_times.push(start.elapsed().as_secs_f64());
        anyhow::ensure!(
            stop == Stop::Complete,
            "the simulation workload ended with {stop:?}"
        );
        sim_ops = sim.cpu_steps();
        sim_steps = sim.steps();
    }
    let sim_seconds_median = median(sim_times).expect("at least one repeat");
    Ok(EmulatorReport {
        suite_files: files.len(),
        suite_states,
        suite_seconds_median,
        explorer_states_per_s: suite_states as f64 / suite_seconds_median,
        sim_ops,
        sim_steps,
        sim_seconds_median,
        sim_ops_per_s: sim_ops as f64 / sim_seconds_median,
        sim_steps_per_s: sim_steps as f64 / sim_seconds_median,
    })
}

/// `threads` threads on as many nodes, each issuing a mix of remote and local operations
/// towards its neighbour: inline put, put, get, remote FAA and CAS, waits, loads, stores.
fn workload(threads: u16, ops_per_thread: usize) -> Machine<LitmusThread> {
    let mut machine = Machine::new(&Layout::uniform(threads, 8));
    for t in 0..threads {
        let me = NodeId(t);
        let peer = NodeId((t + 1) % threads);
        let mut code = Vec::with_capacity(ops_per_thread);
        let mut i = 0u32;
        while code.len() < ops_per_thread {
            let w = WorkId(i % 4);
            let ops = [
                Op::Store {
                    loc: Loc::word(me, 1),
                    value: u64::from(i),
                },
                Op::PutInline {
                    remote: Loc::word(peer, 2),
                    value: u64::from(i),
                    work_id: w,
                },
                Op::Put {
                    remote: Loc::word(peer, 3),
                    local: Loc::word(me, 1),
                    work_id: w,
                },
                Op::Get {
                    local: Loc::word(me, 4),
                    remote: Loc::word(peer, 2),
                    work_id: w,
                },
                Op::Atomic {
                    local: Loc::word(me, 5),
                    remote: Loc::word(peer, 0),
                    rmw: Rmw::Faa { add: 1 },
                    work_id: w,
                },
                Op::Atomic {
                    local: Loc::word(me, 6),
                    remote: Loc::word(peer, 7),
                    rmw: Rmw::Cas {
                        expected: 0,
                        new: 1,
                    },
                    work_id: w,
                },
                Op::Wait { work_id: w },
                Op::Load {
                    loc: Loc::word(me, 4),
                },
            ];
            code.extend(ops.into_iter().map(Compiled::op));
            i += 1;
        }
        code.truncate(ops_per_thread);
        machine.spawn(me, LitmusThread::new(code, 0));
    }
    machine
}
