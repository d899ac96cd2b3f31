#![allow(missing_docs)] // criterion's macros generate undocumented functions

//! `cargo bench -p velos-bench --bench engine`: the engine's CPU per decision — a stable
//! leader's recorded inputs replayed into a copy of its replica, no backend, one thread
//! (`velos_bench::engine`). Criterion's time per element is the engine's time per
//! decision; a regression of the hot path shows up as a change here. Three loads: one
//! client, 64 commands outstanding one per entry (`propose`), and 64 outstanding gathered
//! into entries by the engine (`submit`, `64submitted`: a "decision" there is a command
//! committed). Reports; asserts nothing about speed.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use velos_bench::engine::{Client, record_with};

/// dhat's allocator: it forwards to the system's and, while a profiler runs, counts
/// (the hot path should allocate nothing).
#[global_allocator]
static GLOBAL: dhat::Alloc = dhat::Alloc;

fn decision_path(c: &mut Criterion) {
    if let Err(e) = velos_bench::release_engine("engine") {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    let mut group = c.benchmark_group("engine");
    let loads = [
        ("1client", 1, Client::Propose),
        ("64outstanding", 64, Client::Propose),
        ("64submitted", 64, Client::Submit),
    ];
    for (name, outstanding, client) in loads {
        let recording = record_with(2_000, 4_000, outstanding, client).expect("the recording runs");
        let ops = recording.ops;
        println!(
            "engine/{name}: per decision {:.2} engine calls, {:.2} steps, {:.2} work requests ({:.2} puts, {:.2} \
             atomics, {:.2} gets) in {:.2} doorbells, {:.2} tests, {:.2} loads, {:.2} clock \
             readings",
            ops.calls,
            ops.steps,
            ops.work_requests,
            ops.puts,
            ops.atomics,
            ops.gets,
            ops.doorbells,
            ops.tests,
            ops.loads,
            ops.clocks
        );
        // The best of a few replays in thread CPU time: steadier than wall time on a
        // shared machine, and the figure `velos bench embed` calls the engine's.
        let best = (0..30)
            .map(|_| {
                let replica = recording.start();
                let start = cpu_time::ThreadTime::now();
                recording
                    .replay(replica)
                    .expect("the replay retraces the run");
                start.elapsed().as_nanos() as f64 / recording.decisions as f64
            })
            .fold(f64::INFINITY, f64::min);
        let replica = recording.start();
        let profiler = dhat::Profiler::builder().testing().build();
        recording
            .replay(replica)
            .expect("the replay retraces the run");
        let allocations = dhat::HeapStats::get().total_blocks;
        drop(profiler);
        println!(
            "engine/{name}: {best:.0} ns of thread CPU per decision (best of 30 replays), \
             {:.2} allocations per decision",
            allocations as f64 / recording.decisions as f64
        );
        // The in-process NIC's share of the leader's thread: the same window's operations
        // on a fresh fabric (`Recording::replay_nic`).
        let fabric = recording.nic_fabric().expect("the fabric is made");
        let nic = (0..30)
            .map(|_| {
                let start = cpu_time::ThreadTime::now();
                recording.replay_nic(&fabric).expect("the NIC replay runs");
                start.elapsed().as_nanos() as f64 / recording.decisions as f64
            })
            .fold(f64::INFINITY, f64::min);
        println!(
            "nic/{name}: {nic:.0} ns of thread CPU per decision in the in-process NIC (best of \
             30 replays of the leader's operations, {:.2} work requests a decision)",
            ops.work_requests
        );
        group.throughput(Throughput::Elements(recording.decisions));
        group.bench_function(name, |b| {
            b.iter_batched(
                || recording.start(),
                |replica| {
                    recording
                        .replay(replica)
                        .expect("the replay retraces the run")
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, decision_path);
criterion_main!(benches);
