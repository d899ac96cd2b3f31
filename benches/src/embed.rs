//! The embedding benchmark (`velos bench embed`): three replicas in one process, Velos on
//! the in-process backend beside OmniPaxos (the `omnipaxos` crate, its in-memory storage,
//! messages moved in-process), measured side by side in one run: committed commands per
//! second with one closed-loop client (one command at a time, each waiting for its
//! commit, no batching) and with many outstanding proposals (pipelined), and CPU time per
//! decision.
//!
//! Each repeat runs the six measurements (Velos and OmniPaxos; one client, many, and many
//! batched) one after the other, never at once, so that the two systems see the same machine, then
//! the round trip of `velos::embed::Cluster::submit` from a client thread
//! (`embed/submit.rs`); the report gives the medians over the repeats.
//!
//! # CPU per decision
//! Three numbers, all CPU time (not wall time) divided by the decisions of the measured
//! window ([`RunResult`]):
//! * `engine`: the consensus engine's own work on the leader. For Velos, the leader's
//!   [`velos_core::log::Replica`] is a sans-IO state machine; the run records every input
//!   it got over the window (replies, proposals) and replays them afterwards into a copy
//!   of the replica as the window found it, on one thread, without any backend: the
//!   replay's thread CPU time is the engine's (`embed/velos.rs`). For OmniPaxos, every
//!   replica's message handling must run for a decision, and all three run on the
//!   driver's one thread: its thread CPU time.
//! * `leader thread`: the thread CPU time of the thread that runs the leader and the
//!   client — for Velos the engine plus the in-process backend executing its remote
//!   operations (the NIC's work on real RDMA) and the client; for OmniPaxos the same as
//!   `engine`.
//! * `process`: the whole process's CPU time (every thread: for Velos also the followers,
//!   which poll their memory and idle as [`FollowerIdle`] says; for OmniPaxos the
//!   driver thread).

mod omnipaxos;
mod omnipaxos_threads;
mod output;
mod report;
pub(crate) mod submit;
#[cfg(test)]
mod tests;
mod velos;

use crate::sweep::run_jobs;
use anyhow::Context;
use hdrhistogram::Histogram;
pub use output::{table, write_outputs};
pub use report::{EmbedReport, SystemSummary, TargetCheck};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
pub use submit::SubmitRun;

/// Bytes of every command: an 8-byte counter (Velos proposes it as a byte vector,
/// OmniPaxos as a `u64` entry, which it copies without allocating).
pub const COMMAND_BYTES: usize = 8;

/// The system a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    /// Velos: three `Replica`s on threads over the in-process RDMA backend.
    Velos,
    /// OmniPaxos: three instances on one thread, messages moved between them in-process.
    OmniPaxos,
    /// OmniPaxos: three instances, each on a thread of its own, messages over channels.
    #[serde(rename = "omnipaxos-threads")]
    OmniPaxosThreads,
}

impl System {
    /// Every system, in the order of tables.
    pub const ALL: [System; 3] = [System::Velos, System::OmniPaxos, System::OmniPaxosThreads];

    /// The system's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            System::Velos => "velos",
            System::OmniPaxos => "omnipaxos",
            System::OmniPaxosThreads => "omnipaxos-threads",
        }
    }
}

/// The client side of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// One client, unbatched: a closed loop, one command at a time, the next proposed
    /// when the previous one committed.
    One,
    /// Many clients: `outstanding` commands proposed and not yet committed at all times
    /// (pipelined); a new one as soon as one commits. Still one command per log entry.
    Many,
    /// Many clients, batching on in both systems: `outstanding` commands in flight, up
    /// to `batch` commands per log entry (Velos: each command submitted, the engine
    /// gathering what waits into entries of up to `batch` while its pipeline is busy,
    /// `Replica::submit`; OmniPaxos: its `batch_size`, a batch handed over when full).
    Batched,
}

impl Workload {
    /// The workload's name in reports (the suffix of the JSON keys).
    pub fn name(self) -> &'static str {
        match self {
            Workload::One => "1client",
            Workload::Many => "many",
            Workload::Batched => "batched",
        }
    }
}

/// How Velos's followers spend the idle pauses the engine asks for (`Op::Pause`; the
/// followers have nothing to do for a decision: the leader's CASes reach their memory
/// without their CPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FollowerIdle {
    /// The in-process backend's pause (its idle back-off: spinning, then yielding, then
    /// sleeping through pauses once the follower has been idle a while).
    Spin,
    /// The benchmark's driver sleeps through the pause (the thread leaves the CPU).
    Sleep,
}

impl FollowerIdle {
    /// By name on the command line.
    pub fn by_name(name: &str) -> Option<FollowerIdle> {
        match name {
            "spin" => Some(FollowerIdle::Spin),
            "sleep" => Some(FollowerIdle::Sleep),
            _ => None,
        }
    }
}

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct EmbedConfig {
    /// Repeats of the six measurements; the report gives medians.
    pub repeats: usize,
    /// Commits measured per one-client run.
    pub commits_1client: u64,
    /// Commits measured per many-client run.
    pub commits_many: u64,
    /// Commits before the measured window of every run (not measured).
    pub warmup_commits: u64,
    /// Commands outstanding in the many-client runs.
    pub outstanding: u64,
    /// Commands per log entry in the batched runs (both systems; at most, for Velos).
    pub batch: u64,
    /// Velos: slots the leader keeps prepared or accepting at once
    /// ([`velos_core::log::LogConfig`]'s `pipeline`).
    pub velos_pipeline: u32,
    /// Velos: the idle pause (ns; `idle_pause_ns`). The leader's driver skips a pause
    /// when its client has a command to propose, as an embedding woken by a proposal
    /// would.
    pub velos_idle_pause_ns: u64,
    /// Velos: how the followers idle.
    pub velos_follower_idle: FollowerIdle,
    /// OmniPaxos: wall time between two `tick()`s of every instance (ns).
    pub omnipaxos_tick_ns: u64,
    /// OmniPaxos: ticks before an election timeout (`election_tick_timeout`).
    pub omnipaxos_election_ticks: u64,
    /// `Cluster::submit` round trips timed per repeat (after `warmup_commits` untimed).
    pub submits: u64,
}

impl EmbedConfig {
    /// The full run: 5 repeats, 200 000 commits per one-client run and 500 000 per
    /// many-client run (64 outstanding; 16 commands per entry when batched) after 5 000
    /// of warm-up; Velos with the engine's
    /// default pipeline (4 slots), idle pauses of 20 µs, followers idling as the backend
    /// does; OmniPaxos ticked every millisecond, an election timeout of 10 ticks; 20 000
    /// timed submits.
    pub fn full() -> EmbedConfig {
        EmbedConfig {
            repeats: 5,
            commits_1client: 200_000,
            commits_many: 500_000,
            warmup_commits: 5_000,
            outstanding: 64,
            batch: 16,
            velos_pipeline: 4,
            velos_idle_pause_ns: 20_000,
            velos_follower_idle: FollowerIdle::Spin,
            omnipaxos_tick_ns: 1_000_000,
            omnipaxos_election_ticks: 10,
            submits: 20_000,
        }
    }

    /// A small run for tests: one repeat, a few thousand commits.
    pub fn quick() -> EmbedConfig {
        EmbedConfig {
            repeats: 1,
            commits_1client: 2_000,
            commits_many: 5_000,
            warmup_commits: 200,
            submits: 1_000,
            ..EmbedConfig::full()
        }
    }

    /// Checks the configuration before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.repeats > 0, "at least one repeat");
        anyhow::ensure!(
            self.commits_1client > 0 && self.commits_many > 0,
            "at least one commit per run"
        );
        anyhow::ensure!(self.outstanding > 0, "at least one outstanding command");
        // OmniPaxos hands a batch over only when it is full: every count a multiple.
        anyhow::ensure!(
            self.batch > 0 && self.outstanding % self.batch == 0,
            "a batch of 1 or more commands dividing the {} outstanding, not {}",
            self.outstanding,
            self.batch
        );
        anyhow::ensure!(self.submits > 0, "at least one timed submit");
        // The engine keeps 4 CAS cells per pipelined slot and 4 more per acceptor, at most
        // 64 (velos_core::log::LogConfig::cas_cells).
        anyhow::ensure!(
            (1..=15).contains(&self.velos_pipeline),
            "a Velos pipeline of 1 to 15 slots"
        );
        anyhow::ensure!(
            self.omnipaxos_tick_ns > 0 && self.omnipaxos_election_ticks > 0,
            "OmniPaxos ticks and election ticks must be positive"
        );
        // Velos's log is not recycled yet: every commit of a run keeps its slot.
        let slots = velos::slots(self, self.commits_1client.max(self.commits_many));
        anyhow::ensure!(
            slots <= 1 << 24,
            "a run of {slots} commits needs as many Velos slots; at most 2^24"
        );
        Ok(())
    }

    /// The commits measured by a run of `workload`.
    fn commits(&self, workload: Workload) -> u64 {
        match workload {
            Workload::One => self.commits_1client,
            Workload::Many | Workload::Batched => self.commits_many,
        }
    }

    /// The commands outstanding in a run of `workload`.
    fn outstanding(&self, workload: Workload) -> u64 {
        match workload {
            Workload::One => 1,
            Workload::Many | Workload::Batched => self.outstanding,
        }
    }

    /// The commands per log entry in a run of `workload`.
    fn batch(&self, workload: Workload) -> u64 {
        match workload {
            Workload::One | Workload::Many => 1,
            Workload::Batched => self.batch,
        }
    }

    /// Commands a run of `workload` proposes in all (warm-up and window), rounded up to
    /// whole batches.
    fn total(&self, workload: Workload) -> u64 {
        (self.warmup_commits + self.commits(workload)).next_multiple_of(self.batch(workload))
    }
}

/// One measured run.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// The system.
    pub system: System,
    /// The client side.
    pub workload: Workload,
    /// Which repeat (from 0).
    pub repeat: usize,
    /// Commits in the measured window.
    pub commits: u64,
    /// The window's wall time (ns).
    pub wall_ns: u64,
    /// Commits per second of wall time.
    pub commits_per_s: f64,
    /// The engine's CPU time per decision (ns; see the module documentation).
    pub engine_cpu_ns_per_decision: f64,
    /// Velos: the in-process NIC's CPU time per decision (ns), the leader's operations of
    /// the window executed again on a fresh fabric; `None` for OmniPaxos.
    pub nic_cpu_ns_per_decision: Option<f64>,
    /// The leader's (and client's) thread CPU time per decision (ns).
    pub leader_thread_cpu_ns_per_decision: f64,
    /// The process's CPU time per decision (ns).
    pub process_cpu_ns_per_decision: f64,
    /// Commit latency, median (ns): one-client runs only.
    pub latency_p50_ns: Option<u64>,
    /// Commit latency, 99th percentile (ns): one-client runs only.
    pub latency_p99_ns: Option<u64>,
    /// What the engine did per decision (Velos: its operations on the leader by kind;
    /// OmniPaxos: messages between the replicas).
    pub per_decision: BTreeMap<String, f64>,
}

/// Clocks read at the start and at the end of a measured window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Marks {
    wall: Instant,
    process_cpu: Duration,
    thread_cpu: Duration,
}

impl Marks {
    /// The clocks now (the thread clock of the calling thread).
    pub(crate) fn now() -> Marks {
        Marks {
            wall: Instant::now(),
            process_cpu: cpu_time::ProcessTime::now().as_duration(),
            thread_cpu: cpu_time::ThreadTime::now().as_duration(),
        }
    }
}

/// What a driver measured over its window, before it becomes a [`RunResult`].
#[derive(Debug)]
pub(crate) struct Window {
    /// Commits in it.
    pub(crate) commits: u64,
    /// Clocks at its start and end, read on the leader's thread.
    pub(crate) start: Marks,
    /// At its end.
    pub(crate) end: Marks,
    /// The engine's CPU time over it (ns).
    pub(crate) engine_cpu_ns: u64,
    /// Velos: the in-process NIC's CPU time for the window's operations (ns), measured
    /// apart (`nic_cpu` in `embed/velos.rs`); what a real NIC does for free.
    pub(crate) nic_cpu_ns: Option<u64>,
    /// Commit latencies (one-client runs).
    pub(crate) latencies: Option<Histogram<u64>>,
    /// Counts over the window, divided by the commits in the report.
    pub(crate) counts: Vec<(&'static str, u64)>,
}

impl Window {
    fn result(self, system: System, workload: Workload, repeat: usize) -> RunResult {
        assert!(self.commits > 0, "a window holds commits");
        let per = |ns: u128| ns as f64 / self.commits as f64;
        let wall_ns = (self.end.wall - self.start.wall).as_nanos();
        let process = (self.end.process_cpu - self.start.process_cpu).as_nanos();
        let thread = (self.end.thread_cpu - self.start.thread_cpu).as_nanos();
        RunResult {
            system,
            workload,
            repeat,
            commits: self.commits,
            wall_ns: wall_ns as u64,
            commits_per_s: self.commits as f64 * 1e9 / wall_ns.max(1) as f64,
            engine_cpu_ns_per_decision: per(u128::from(self.engine_cpu_ns)),
            nic_cpu_ns_per_decision: self.nic_cpu_ns.map(|ns| per(u128::from(ns))),
            leader_thread_cpu_ns_per_decision: per(thread),
            process_cpu_ns_per_decision: per(process),
            latency_p50_ns: self.latencies.as_ref().map(|h| h.value_at_quantile(0.5)),
            latency_p99_ns: self.latencies.as_ref().map(|h| h.value_at_quantile(0.99)),
            per_decision: self
                .counts
                .into_iter()
                .map(|(name, n)| (name.to_string(), n as f64 / self.commits as f64))
                .collect(),
        }
    }
}

/// A histogram of commit latencies (ns), 3 significant digits.
pub(crate) fn latency_histogram() -> Histogram<u64> {
    Histogram::<u64>::new(3).expect("3 significant digits")
}

/// The command with sequence number `n`.
pub(crate) fn command(n: u64) -> [u8; COMMAND_BYTES] {
    n.to_le_bytes()
}

/// Runs one measurement.
pub fn run_one(
    config: &EmbedConfig,
    system: System,
    workload: Workload,
    repeat: usize,
) -> anyhow::Result<RunResult> {
    let window = match system {
        System::Velos => velos::measure(config, workload)?,
        System::OmniPaxos => omnipaxos::measure(config, workload)?,
        System::OmniPaxosThreads => omnipaxos_threads::measure(config, workload)?,
    };
    // A step may decide several commands: the window starts at the first step that
    // completes the warm-up, so it holds the planned commits or a few fewer (a batch's
    // worth more when the total was rounded up to whole batches).
    let batch = config.batch(workload);
    assert!(
        window.commits < config.commits(workload) + batch
            && window.commits + config.outstanding(workload) >= config.commits(workload),
        "the window holds about the planned commits"
    );
    Ok(window.result(system, workload, repeat))
}

/// A measurement of [`run`].
enum Job {
    /// One system, one workload.
    Run(usize, Workload, System),
    /// `Cluster::submit` round trips.
    Submit(usize),
}

/// What a [`Job`] measured.
enum Measured {
    Run(RunResult),
    Submit(SubmitRun),
}

/// Runs every repeat of the six measurements and the submit round trips, one at a time,
/// showing a progress bar on stderr when `progress` is set.
pub fn run(config: &EmbedConfig, progress: bool) -> anyhow::Result<EmbedReport> {
    config.check()?;
    let start = Instant::now();
    let jobs: Vec<Job> = (0..config.repeats)
        .flat_map(|r| {
            [Workload::One, Workload::Many, Workload::Batched]
                .into_iter()
                .flat_map(move |w| System::ALL.into_iter().map(move |s| Job::Run(r, w, s)))
                .chain([Job::Submit(r)])
        })
        .collect();
    // One job at a time: the systems must not compete for the cores.
    let measured = run_jobs(
        &jobs,
        1,
        progress,
        "",
        |job| match *job {
            Job::Run(r, w, s) => format!(" {} {} (repeat {})", s.name(), w.name(), r + 1),
            Job::Submit(r) => format!(" velos submit (repeat {})", r + 1),
        },
        |job| match *job {
            Job::Run(r, w, s) => run_one(config, s, w, r)
                .map(Measured::Run)
                .with_context(|| format!("{} {} repeat {}", s.name(), w.name(), r + 1)),
            Job::Submit(r) => submit::measure(config, r)
                .map(Measured::Submit)
                .with_context(|| format!("velos submit repeat {}", r + 1)),
        },
    )?;
    let (mut runs, mut submits) = (Vec::new(), Vec::new());
    for m in measured {
        match m {
            Measured::Run(r) => runs.push(r),
            Measured::Submit(s) => submits.push(s),
        }
    }
    assert_eq!(submits.len(), config.repeats, "one submit run per repeat");
    Ok(EmbedReport::new(
        config.clone(),
        runs,
        submits,
        start.elapsed().as_secs_f64(),
    ))
}
