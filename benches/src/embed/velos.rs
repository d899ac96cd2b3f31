//! Velos in the embedding benchmark: three [`Replica`]s, each on its own thread over one
//! in-process fabric ([`MemFabric`], remote operations executed inline by the posting
//! thread, every node's memory reachable only as its region plan says — as
//! `velos::embed` runs them), the client on the leader's thread.
//!
//! The driver is ours rather than `velos::embed`'s so that the client sits in the
//! leader's loop (no channel between them) and so that the leader's inputs can be
//! recorded over the window: afterwards they are replayed, without any backend, into a
//! copy of the replica taken when the window started, and the replay's CPU time is the
//! engine's own ([`replay`]). The replay checks that it retraces the run: the same
//! proposals accepted, as many decisions.
//!
//! Batched runs submit each command ([`Replica::submit`]): the engine gathers what waits
//! into entries of up to `batch` commands (its values are that large) while its pipeline
//! is busy.

use super::{EmbedConfig, FollowerIdle, Marks, Window, Workload, command, latency_histogram};
use crate::op_kind::OpKind;
use crate::trace::{Entries, Trace};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use velos_core::log::{Detector, LogConfig, Replica};
use velos_rdma::mem::MemFabric;
use velos_rdma::{Batch, Endpoint, NodeId, Op, Process, Reply, Shared, Step};

const REPLICAS: u16 = 3;

/// Slots a run of `commits` measured commits uses at most: the warm-up, the window (an
/// entry per command when the engine finds none waiting to gather), what is outstanding
/// at its end, and a margin for the no-ops of the leader's first turn.
pub(super) fn slots(config: &EmbedConfig, commits: u64) -> u64 {
    config.warmup_commits + commits + config.outstanding + 1_024
}

/// Bytes of an entry of `batch` commands (every command has the same size): what the
/// engine's batch format makes of them (`velos_core::batch`), 8 bytes for one command
/// alone.
fn entry_bytes(batch: u64) -> usize {
    if batch == 1 {
        return command(0).len();
    }
    let mut builder = velos_core::batch::BatchBuilder::new(usize::MAX);
    for n in 0..batch {
        let pushed = builder.push(&command(n));
        assert!(pushed, "an unbounded batch takes every command");
    }
    builder.finish().len()
}

/// The log: a stable leader on real threads (a heartbeat every 100 µs, suspicion after
/// 50 ms without one, as the demo does: OS scheduling gaps are not failures), catch-up
/// reads after 1 ms (the followers learn from their own acceptor words).
fn log_config(config: &EmbedConfig, slots: u64, batch: u64) -> anyhow::Result<LogConfig> {
    let slots = u32::try_from(slots)?;
    let mut c = LogConfig::new(REPLICAS, slots, u32::try_from(entry_bytes(batch))?);
    c.heartbeat_period_ns = 100_000;
    c.failure_timeout_ns = 50_000_000;
    c.detector = Detector::Fixed;
    c.idle_pause_ns = config.velos_idle_pause_ns;
    c.catch_up_after_ns = 1_000_000;
    c.pipeline = config.velos_pipeline;
    c.validate().map_err(anyhow::Error::msg)?;
    Ok(c)
}

/// Operations of the leader by kind.
#[derive(Clone, Copy, Debug, Default)]
struct OpCounts {
    /// Engine calls (`resume_batch`), a batch of operations each.
    calls: u64,
    steps: u64,
    now: u64,
    pause: u64,
    skipped_pause: u64,
    put: u64,
    atomic: u64,
    get: u64,
    test: u64,
    load: u64,
    other: u64,
}

impl OpCounts {
    fn count(&mut self, op: &Op) {
        self.steps += 1;
        *match OpKind::of(op) {
            OpKind::Now => &mut self.now,
            OpKind::Pause => &mut self.pause,
            OpKind::Put => &mut self.put,
            OpKind::Atomic => &mut self.atomic,
            OpKind::Get => &mut self.get,
            OpKind::Test => &mut self.test,
            OpKind::Load => &mut self.load,
            OpKind::Other => &mut self.other,
        } += 1;
    }

    fn since(self, before: OpCounts) -> Vec<(&'static str, u64)> {
        vec![
            ("engine_calls", self.calls - before.calls),
            ("steps", self.steps - before.steps),
            ("op_now", self.now - before.now),
            ("op_pause", self.pause - before.pause),
            ("pause_skipped", self.skipped_pause - before.skipped_pause),
            ("op_put", self.put - before.put),
            ("op_remote_atomic", self.atomic - before.atomic),
            ("op_get", self.get - before.get),
            ("op_test", self.test - before.test),
            ("op_load", self.load - before.load),
            ("op_other", self.other - before.other),
        ]
    }
}

/// What the leader's thread brings back.
struct LeaderRun {
    /// The leader's replica when the window started, and its inputs from then on.
    snapshot: Replica,
    trace: Trace,
    /// Commands proposed before the window (the next one's number).
    proposed_before: u64,
    /// The client submitted its commands (batched runs), and its entries when the window
    /// started.
    submit: bool,
    entries: Entries,
    start: Marks,
    end: Marks,
    commits: u64,
    latencies: Option<hdrhistogram::Histogram<u64>>,
    counts: Vec<(&'static str, u64)>,
}

/// Measures one run.
pub(super) fn measure(config: &EmbedConfig, workload: Workload) -> anyhow::Result<Window> {
    let commits = config.commits(workload);
    let outstanding = config.outstanding(workload);
    let batch = config.batch(workload);
    let log = log_config(config, slots(config, commits), batch)?;
    let fabric = crate::engine::inline_fabric(&log)?;
    let log = Shared::new(log);
    let stop = AtomicBool::new(false);
    let run = std::thread::scope(|s| {
        let followers: Vec<_> = (1..REPLICAS)
            .map(|me| {
                let (fabric, log, stop) = (&fabric, log.clone(), &stop);
                s.spawn(move || follow(fabric, log, me, config.velos_follower_idle, stop))
            })
            .collect();
        let run = lead(
            &fabric,
            log.clone(),
            (config.warmup_commits, config.total(workload)),
            outstanding,
            batch > 1,
        );
        stop.store(true, Ordering::SeqCst);
        for f in followers {
            f.join().expect("a follower thread panicked");
        }
        run
    })?;
    let engine_cpu_ns = replay(&run)?;
    let nic_cpu_ns = nic_cpu(&run, &log)?;
    Ok(Window {
        commits: run.commits,
        start: run.start,
        end: run.end,
        engine_cpu_ns,
        nic_cpu_ns: Some(nic_cpu_ns),
        latencies: run.latencies,
        counts: run.counts,
    })
}

/// The leader's thread: replica 0 (Ω's first choice) and the client. Proposes `total`
/// commands, keeping `outstanding` of them in the engine, one per entry or (`submit`)
/// gathered into entries by the engine; the window starts once `warmup` are committed.
fn lead(
    fabric: &MemFabric,
    log: Shared<LogConfig>,
    (warmup, total): (u64, u64),
    outstanding: u64,
    submit: bool,
) -> anyhow::Result<LeaderRun> {
    let mut replica = Replica::new(log, 0).map_err(anyhow::Error::msg)?;
    let mut endpoint = fabric.endpoint(NodeId(0));
    let mut trace = Trace::with_capacity(total as usize + 1_000);
    let mut entries = Entries::default();
    let mut counts = OpCounts::default();
    let mut before = counts;
    let mut latencies = (outstanding == 1).then(latency_histogram);
    let mut proposed = 0u64;
    let mut committed = 0u64;
    // The replica, the clocks and the commits when the window started.
    let mut window_start: Option<(Replica, Entries, Marks, u64, u64)> = None;
    let mut last_commit = Instant::now();
    let mut reply = Reply::Start;
    let mut ops = Vec::with_capacity(64);
    let started = Instant::now();
    let mut iterations = 0u64;
    loop {
        let recording = window_start.is_some();
        // The client: keep `outstanding` commands in the engine, once it leads.
        while proposed < total && proposed - committed < outstanding && replica.is_leader() {
            let taken = if submit {
                let at = replica.submit(&command(proposed));
                if recording {
                    trace.submit(at.is_ok());
                }
                at.map(|at| entries.submitted(at)).is_ok()
            } else {
                let taken = replica.propose(command(proposed).to_vec()).is_ok();
                if recording {
                    trace.propose(taken);
                }
                taken
            };
            if !taken {
                break;
            }
            proposed += 1;
        }
        if recording {
            trace.resume(&reply);
        }
        ops.clear();
        let end = replica.resume_batch(reply, &mut ops);
        counts.calls += 1;
        for (id, result) in replica.take_results() {
            let slot = result.map_err(|e| anyhow::anyhow!("proposal {id}: {e}"))?;
            anyhow::ensure!(slot < 1 << 32, "slot {slot}");
            committed += entries.committed(id);
            if recording && let Some(h) = latencies.as_mut() {
                let now = Instant::now();
                h.record((now - last_commit).as_nanos() as u64)
                    .expect("the histogram grows");
                last_commit = now;
            }
        }
        replica.drain_committed().for_each(drop);
        if !recording && committed >= warmup {
            let snapshot = replica.clone();
            let marks = Marks::now();
            last_commit = marks.wall;
            before = counts;
            window_start = Some((snapshot, entries.clone(), marks, committed, proposed));
        }
        if committed >= total {
            break;
        }
        iterations += 1;
        if iterations % 4_096 == 0 {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(600),
                "no progress: {committed} of {total} commits after 10 minutes"
            );
        }
        anyhow::ensure!(end == Batch::Resume, "the leader stopped");
        reply = Reply::Done;
        for op in &ops {
            reply = match op {
                // A command to propose: the engine has work, no time to idle.
                Op::Pause { .. }
                    if proposed < total
                        && proposed - committed < outstanding
                        && replica.is_leader() =>
                {
                    counts.skipped_pause += 1;
                    Reply::Done
                }
                op => {
                    counts.count(op);
                    endpoint.execute(op)
                }
            };
        }
    }
    let end = Marks::now();
    let (snapshot, entries, start, committed_before, proposed_before) =
        window_start.expect("the window started");
    Ok(LeaderRun {
        snapshot,
        trace,
        proposed_before,
        submit,
        entries,
        start,
        end,
        commits: committed - committed_before,
        latencies,
        counts: counts.since(before),
    })
}

/// A follower's thread: replica `me`, driven until `stop`, its committed entries taken
/// and dropped (a no-op state machine).
fn follow(
    fabric: &MemFabric,
    log: Shared<LogConfig>,
    me: u16,
    idle: FollowerIdle,
    stop: &AtomicBool,
) {
    let mut replica = Replica::new(log, me).expect("validated");
    let mut endpoint = fabric.endpoint(NodeId(me));
    let mut reply = Reply::Start;
    loop {
        if stop.load(Ordering::Relaxed) {
            replica.shutdown();
        }
        reply = match replica.resume(reply) {
            Step::Done => break,
            Step::Op(Op::Pause { ns }) if idle == FollowerIdle::Sleep => {
                std::thread::sleep(Duration::from_nanos(ns));
                Reply::Done
            }
            Step::Op(op) => endpoint.execute(&op),
        };
        replica.drain_committed().for_each(drop);
    }
}

/// Checks that a replay of the window decided as many commands as the run did.
fn retraced(run: &LeaderRun, committed: u64) -> anyhow::Result<()> {
    anyhow::ensure!(
        committed == run.commits,
        "the replay decided {committed} commands in the window, the run {} (submitted: {})",
        run.commits,
        run.submit
    );
    Ok(())
}

/// Replays the leader's recorded inputs into a copy of its replica as the window found
/// it, on this thread, without a backend; the thread CPU time of the replay (ns). Checks
/// that the replay takes the same proposals and decides as many commands.
fn replay(run: &LeaderRun) -> anyhow::Result<u64> {
    let mut replica = run.snapshot.clone();
    let entries = run.entries.clone();
    let cpu_start = cpu_time::ThreadTime::now();
    let decided = run
        .trace
        .replay((&mut replica, entries), run.proposed_before, command)?;
    let cpu = cpu_start.elapsed();
    retraced(run, decided)?;
    Ok(cpu.as_nanos() as u64)
}

/// The in-process NIC's share of the leader's thread: the window's operations (what a
/// second replay of the recorded inputs returns, the idle pauses left out) executed again,
/// in order, on a fresh inline fabric of the same log, timed in thread CPU (ns) — the
/// part a real NIC does for free. The followers' memory is blank there, so CASes meet
/// other words than in the run; each still costs its post, execution and completion
/// (as `cargo bench -p velos-bench --bench engine`'s `nic/` figures).
fn nic_cpu(run: &LeaderRun, log: &LogConfig) -> anyhow::Result<u64> {
    let mut ops = Vec::new();
    let mut replica = run.snapshot.clone();
    let decided = run.trace.replay_into(
        (&mut replica, run.entries.clone()),
        run.proposed_before,
        command,
        |batch| {
            let posted = batch.iter().filter(|op| !matches!(op, Op::Pause { .. }));
            ops.extend(posted.cloned());
        },
    )?;
    retraced(run, decided)?;
    let fabric = crate::engine::inline_fabric(log)?;
    let cpu_start = cpu_time::ThreadTime::now();
    crate::engine::execute_afresh(&fabric, &ops)?;
    Ok(cpu_start.elapsed().as_nanos() as u64)
}
