//! The decision-latency benchmark in virtual time (`velos bench latency`): latency from a
//! stable leader's proposal to its decision against the value size (1 B to 4 KiB), one
//! proposal at a time, under a latency profile (`paper-cx6` by default), with the
//! acceptor words and value buffers in host memory or in NIC device memory — the Velos
//! paper's Fig. 1. Every point also runs the paper's reference patterns (3 CASes or 3
//! WRITEs waited for a majority, [`round`]) in the same configuration, so that a decision
//! can be read against one CAS round trip.
//!
//! Protocols are a [`Protocol`]: Velos, and the Mu baseline on the same simulator,
//! profile and sizes. Both write a value in one multi-word put per replica (Mu adds the
//! header in a second one); a value's cost grows with its bytes only by the link's rate.
//!
//! Virtual time does not charge the engine's own computation between two operations; on
//! a NIC the leader's CPU is on the decision's critical path. Every Velos point therefore
//! also reports a *CPU-charged* latency: per decision, its virtual latency plus the
//! engine CPU on the leader's critical path, measured by recording the leader's inputs
//! during the run and replaying them afterwards into a copy of its replica on one thread,
//! without any backend, timed with thread CPU time, best of several replays (the `cpu`
//! module's docs say how a decision's steps are split). The target line reads it against
//! one CAS round too (≤ 1.25x; reported, never asserted).

mod cpu;
mod mu;
mod output;
mod plot;
mod report;
pub mod round;
#[cfg(test)]
mod tests;
mod velos;

use crate::sweep::run_jobs;
use anyhow::Context;
use hdrhistogram::Histogram;
pub use output::{table, write_outputs};
pub use report::{CpuCharge, LatencyPoint, LatencyReport, Phases, RoundRef, TargetCheck};
use report::{Measured, notes, targets};
use round::RoundKind;
use serde::Serialize;
use std::time::Instant;
use velos_sim::latency::LatencyModel;

/// A replication protocol the benchmark measures. The extension point for baselines: a
/// new protocol adds a variant, its name, and a `measure` arm that returns the decision
/// latencies of one (size, placement) point — the Mu baseline (`src/baseline/mu/`) as
/// `Mu`, whose decision is one inline-or-not WRITE of the entry into every follower's
/// log, waited for a majority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// One-sided Paxos: the value's puts then one accept CAS per acceptor, decided at a
    /// majority of successful CASes.
    Velos,
    /// The Mu baseline: the entry's words, then its header, put into every follower's
    /// log, decided when a majority (the leader's own log included) acknowledged.
    Mu,
}

impl Protocol {
    /// Every protocol, in the order of tables and plots.
    pub const ALL: [Protocol; 2] = [Protocol::Velos, Protocol::Mu];

    /// The protocol's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Velos => "velos",
            Protocol::Mu => "mu",
        }
    }

    /// The protocol called `name`, if known.
    pub fn by_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Decision latencies of `size`-byte values, with the protocol's replicated words in
    /// device memory or not.
    fn measure(
        self,
        config: &LatencyConfig,
        size: usize,
        device_memory: bool,
    ) -> anyhow::Result<Measured> {
        match self {
            Protocol::Velos => velos::measure(config, size, device_memory),
            Protocol::Mu => mu::measure(config, size, device_memory),
        }
    }
}

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyConfig {
    /// The protocols.
    pub protocols: Vec<Protocol>,
    /// Value sizes in bytes.
    pub sizes: Vec<usize>,
    /// Placements: `false` host memory, `true` NIC device memory.
    pub device_memory: Vec<bool>,
    /// Decisions measured per point.
    pub proposals: usize,
    /// Decisions before those, not measured (the leader's caches are warm in the paper).
    pub warmup_proposals: usize,
    /// Virtual time before the first proposal: the leader takes office and pre-prepares
    /// its window (ns).
    pub warmup_ns: u64,
    /// Think time between a decision and the next proposal (ns): the leader's
    /// pre-preparation of the next slot finishes in it, as between a closed-loop client's
    /// requests.
    pub gap_ns: u64,
    /// The leader's pause when it has nothing to do (ns; [`velos_core::log::LogConfig`]'s
    /// `idle_pause_ns`): a proposal waits for the end of the pause it arrives in.
    pub idle_pause_ns: u64,
    /// The replicas' failure timeout (ns; [`velos_core::log::LogConfig`]'s
    /// `failure_timeout_ns`). The leader bumps its heartbeat once per turn, and a turn
    /// posts a whole value word by word: from about 2 KiB on, a turn outlasts the
    /// engine's default 20 µs and the followers depose a live leader. The benchmark wants
    /// a stable leader, so its default is 1 ms.
    pub failure_timeout_ns: u64,
    /// Rounds of each reference pattern per placement.
    pub rounds: u64,
    /// Replays of the leader's recorded inputs timed for the CPU charge (each decision's
    /// segments keep their fastest).
    pub cpu_replays: usize,
    /// The seed of every run.
    pub seed: u64,
    /// Step costs.
    pub latency: LatencyModel,
    /// Points simulated at once (threads).
    #[serde(skip)]
    pub jobs: usize,
}

/// The most value-buffer words a node's memory may hold in a latency run.
pub const MAX_WORDS_PER_NODE: usize = 1 << 24;

impl LatencyConfig {
    /// The value-buffer words each node needs: the log is not recycled, so every decision
    /// keeps its slot, and every slot a value buffer per replica (3) at every replica,
    /// each its content and two stamps (16 slots of headroom).
    pub fn words_per_node(&self) -> usize {
        let largest = self.sizes.iter().copied().max().unwrap_or(1);
        (self.proposals + self.warmup_proposals + 16) * 3 * (largest.div_ceil(8) + 2)
    }

    /// The full sweep: sizes 1 B to 4 KiB in powers of two, both placements, 200
    /// decisions per point after 20 of warm-up, 5 µs between them, the engine's default
    /// idle pause (200 ns), a failure timeout of 1 ms, the `paper-cx6` profile, 15
    /// replays for the CPU charge.
    pub fn full() -> LatencyConfig {
        LatencyConfig {
            protocols: Protocol::ALL.to_vec(),
            sizes: (0..=12).map(|k| 1 << k).collect(),
            device_memory: vec![false, true],
            proposals: 200,
            warmup_proposals: 20,
            warmup_ns: 20_000,
            gap_ns: 5_000,
            idle_pause_ns: 200,
            failure_timeout_ns: 1_000_000,
            rounds: 200,
            cpu_replays: 15,
            seed: 1,
            latency: LatencyModel::paper_cx6(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// A tiny sweep for tests: three sizes, a few decisions each, 3 replays.
    pub fn quick() -> LatencyConfig {
        LatencyConfig {
            sizes: vec![1, 16, 256],
            proposals: 5,
            warmup_proposals: 2,
            rounds: 5,
            cpu_replays: 3,
            ..LatencyConfig::full()
        }
    }

    /// Checks the configuration before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.protocols.is_empty(), "no protocol to measure");
        anyhow::ensure!(
            !self.sizes.is_empty() && self.sizes.iter().all(|&s| (1..=1 << 16).contains(&s)),
            "value sizes must be 1 byte to 64 KiB"
        );
        anyhow::ensure!(!self.device_memory.is_empty(), "no placement to measure");
        anyhow::ensure!(
            self.failure_timeout_ns > 2_000,
            "the failure timeout must exceed two heartbeat periods (2 µs)"
        );
        anyhow::ensure!(
            self.proposals > 0 && self.rounds > 0,
            "at least one decision and one round"
        );
        anyhow::ensure!(
            (1..=1_000).contains(&self.cpu_replays),
            "1 to 1000 replays for the CPU charge"
        );
        let largest = self.sizes.iter().copied().max().unwrap_or(1);
        let words = self.words_per_node();
        anyhow::ensure!(
            words <= MAX_WORDS_PER_NODE,
            "{} decisions of {largest} bytes need {words} words per node; at most 2^24 \
             (fewer proposals or smaller values)",
            self.proposals + self.warmup_proposals
        );
        Ok(())
    }
}

/// The median of the reference pattern `kind` under `config`'s profile.
fn median_round(
    config: &LatencyConfig,
    kind: RoundKind,
    device_memory: bool,
) -> anyhow::Result<u64> {
    let mut hist = Histogram::<u64>::new(3).expect("3 significant digits");
    for x in round::measure(
        kind,
        &config.latency,
        device_memory,
        config.rounds,
        config.seed,
    )? {
        hist.record(x.max(1)).expect("the histogram grows");
    }
    Ok(hist.value_at_quantile(0.5))
}

/// Runs the sweep, showing a progress bar on stderr when `progress` is set.
pub fn run(config: &LatencyConfig, progress: bool) -> anyhow::Result<LatencyReport> {
    config.check()?;
    let start = Instant::now();
    let mut rounds = Vec::new();
    for &dm in &config.device_memory {
        rounds.push(RoundRef {
            device_memory: dm,
            cas_majority_ns: median_round(config, RoundKind::Cas, dm)?,
            write_majority_ns: median_round(config, RoundKind::Write, dm)?,
        });
    }
    let jobs: Vec<(Protocol, bool, usize)> = config
        .protocols
        .iter()
        .flat_map(|&p| {
            config
                .device_memory
                .iter()
                .flat_map(move |&dm| config.sizes.iter().map(move |&s| (p, dm, s)))
        })
        .collect();
    let placement = |dm: bool| if dm { "device memory" } else { "host memory" };
    let points = run_jobs(
        &jobs,
        config.jobs,
        progress,
        "",
        |&(protocol, dm, size)| format!("{} {size} B, {}", protocol.name(), placement(dm)),
        |&(protocol, dm, size)| {
            run_point(config, protocol, size, dm)
                .with_context(|| format!("{} at {size} B, {}", protocol.name(), placement(dm)))
        },
    )?;
    let mut report = LatencyReport {
        config: config.clone(),
        points,
        rounds,
        targets: Vec::new(),
        notes: notes(&config.protocols),
        wall_seconds: start.elapsed().as_secs_f64(),
    };
    report.targets = targets(&report);
    assert_eq!(report.points.len(), jobs.len(), "every point measured");
    Ok(report)
}

/// Simulates one point.
pub fn run_point(
    config: &LatencyConfig,
    protocol: Protocol,
    size: usize,
    device_memory: bool,
) -> anyhow::Result<LatencyPoint> {
    config.check()?;
    anyhow::ensure!(
        (1..=1 << 16).contains(&size),
        "a value of {size} bytes: 1 byte to 64 KiB"
    );
    let m = protocol.measure(config, size, device_memory)?;
    let cpu = m.cpu_charge();
    assert_eq!(
        m.hist.len(),
        config.proposals as u64,
        "every decision recorded"
    );
    Ok(LatencyPoint {
        protocol: protocol.name(),
        size,
        device_memory,
        decisions: m.hist.len(),
        p50_ns: m.hist.value_at_quantile(0.5),
        p99_ns: m.hist.value_at_quantile(0.99),
        mean_ns: m.hist.mean(),
        max_ns: m.hist.max(),
        phases: m.phases(),
        cpu_charged_p50_ns: cpu.map(|c| c.cpu_charged_p50_ns),
        cpu,
        simulated_ns: m.simulated_ns,
        steps: m.steps,
        trace_hash: format!("{:016x}", m.trace_hash),
    })
}
