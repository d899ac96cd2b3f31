//! The decision-latency benchmark in virtual time (`velos bench latency`): latency from a
//! stable leader's proposal to its decision against the value size (1 B to 4 KiB), one
//! proposal at a time, under a latency profile (`paper-cx6` by default), with the
//! acceptor words and value buffers in host memory or in NIC device memory — the Velos
//! paper's Fig. 1. Every point also runs the paper's reference patterns (3 CASes or 3
//! WRITEs waited for a majority, [`round`]) in the same configuration, so that a decision
//! can be read against one CAS round trip.
//!
//! Protocols are a [`Protocol`]: Velos now; a Mu baseline joins as one more variant whose
//! `measure` runs it on the same simulator, profile and sizes.

mod output;
mod plot;
pub mod round;
#[cfg(test)]
mod tests;
mod velos;

use anyhow::Context;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
pub use output::{table, write_outputs};
use round::RoundKind;
use serde::Serialize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use velos_sim::latency::LatencyModel;

/// A replication protocol the benchmark measures. The extension point for baselines: a
/// new protocol adds a variant, its name, and a `measure` arm that returns the decision
/// latencies of one (size, placement) point — the Mu baseline (`src/baseline/mu/`) as
/// `Mu`, whose decision is one inline-or-not WRITE of the entry into every follower's
/// log, waited for a majority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Protocol {
    /// One-sided Paxos: the value's puts then one accept CAS per acceptor, decided at a
    /// majority of successful CASes.
    Velos,
}

impl Protocol {
    /// Every protocol, in the order of tables and plots.
    pub const ALL: [Protocol; 1] = [Protocol::Velos];

    /// The protocol's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Velos => "velos",
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
    /// Rounds of each reference pattern per placement.
    pub rounds: u64,
    /// The seed of every run.
    pub seed: u64,
    /// Step costs.
    pub latency: LatencyModel,
    /// Points simulated at once (threads).
    #[serde(skip)]
    pub jobs: usize,
}

impl LatencyConfig {
    /// The full sweep: sizes 1 B to 4 KiB in powers of two, both placements, 200
    /// decisions per point after 20 of warm-up, 5 µs between them, the engine's default
    /// idle pause (200 ns), the `paper-cx6` profile.
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
            rounds: 200,
            seed: 1,
            latency: LatencyModel::paper_cx6(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// A tiny sweep for tests: three sizes, a few decisions each.
    pub fn quick() -> LatencyConfig {
        LatencyConfig {
            sizes: vec![1, 16, 256],
            proposals: 5,
            warmup_proposals: 2,
            rounds: 5,
            ..LatencyConfig::full()
        }
    }

    /// Checks the configuration before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.protocols.is_empty(), "no protocol to measure");
        anyhow::ensure!(
            !self.sizes.is_empty() && self.sizes.iter().all(|&s| (1..=1 << 20).contains(&s)),
            "value sizes must be 1 byte to 1 MiB"
        );
        anyhow::ensure!(!self.device_memory.is_empty(), "no placement to measure");
        anyhow::ensure!(
            self.proposals > 0 && self.rounds > 0,
            "at least one decision and one round"
        );
        anyhow::ensure!(
            self.proposals + self.warmup_proposals <= 1 << 20,
            "at most 2^20 decisions per point (the log is not recycled)"
        );
        Ok(())
    }
}

/// Where a decision's time went (means over a point, virtual ns), from the leader's own
/// steps: `turn` from the proposal to the leader's first post for it (the rest of its
/// pause or turn); `posting` from there to the post of the CAS that completed the
/// majority (the value's puts and the CASes ahead of it); `cas_round` from that post to
/// the majority's completion (the round trip, including any wait behind the value's
/// writes on the same queue pair); `notice` from there to the decision (the leader's
/// polling: a test, a load, its plan).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Phases {
    /// Proposal to the first post.
    pub turn_ns: u64,
    /// First post to the majority CAS's post.
    pub posting_ns: u64,
    /// The majority CAS's post to the majority's completion.
    pub cas_round_ns: u64,
    /// The majority's completion to the decision.
    pub notice_ns: u64,
}

/// The raw result of one point.
struct Measured {
    hist: Histogram<u64>,
    phase_sums: [u64; 4],
    phase_count: u64,
    steps: u64,
    simulated_ns: u64,
    trace_hash: u64,
}

impl Measured {
    fn new() -> Measured {
        Measured {
            hist: Histogram::new(3).expect("3 significant digits"),
            phase_sums: [0; 4],
            phase_count: 0,
            steps: 0,
            simulated_ns: 0,
            trace_hash: 0,
        }
    }

    fn record(&mut self, latency_ns: u64, phases: Option<Phases>) {
        self.hist
            .record(latency_ns.max(1))
            .expect("the histogram grows");
        if let Some(p) = phases {
            let parts = [p.turn_ns, p.posting_ns, p.cas_round_ns, p.notice_ns];
            for (sum, part) in self.phase_sums.iter_mut().zip(parts) {
                *sum += part;
            }
            self.phase_count += 1;
        }
    }

    fn phases(&self) -> Option<Phases> {
        let n = self.phase_count;
        (n > 0).then(|| Phases {
            turn_ns: self.phase_sums[0] / n,
            posting_ns: self.phase_sums[1] / n,
            cas_round_ns: self.phase_sums[2] / n,
            notice_ns: self.phase_sums[3] / n,
        })
    }
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyPoint {
    /// The protocol's name.
    pub protocol: &'static str,
    /// Value size in bytes.
    pub size: usize,
    /// Replicated words in NIC device memory.
    pub device_memory: bool,
    /// Decisions measured.
    pub decisions: u64,
    /// Median decision latency (virtual ns).
    pub p50_ns: u64,
    /// 99th percentile (virtual ns).
    pub p99_ns: u64,
    /// Mean (virtual ns).
    pub mean_ns: f64,
    /// Longest (virtual ns).
    pub max_ns: u64,
    /// Where the time went (means), when the protocol reports it.
    pub phases: Option<Phases>,
    /// Virtual time simulated (ns).
    pub simulated_ns: u64,
    /// Machine steps simulated.
    pub steps: u64,
    /// The simulator's trace hash (hex): the same configuration gives the same hash.
    pub trace_hash: String,
}

/// The reference patterns under one placement: medians over `rounds` rounds (virtual ns).
#[derive(Clone, Debug, Serialize)]
pub struct RoundRef {
    /// The targets in NIC device memory.
    pub device_memory: bool,
    /// 3 CASes posted together, waited for a majority.
    pub cas_majority_ns: u64,
    /// 3 inline WRITEs posted together, waited for a majority.
    pub write_majority_ns: u64,
}

/// The target: a protocol's 1-byte median decision against one CAS round to a majority.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// The protocol's name.
    pub protocol: &'static str,
    /// The placement.
    pub device_memory: bool,
    /// The smallest size measured (1 B in the full sweep).
    pub size: usize,
    /// Its median decision latency (virtual ns).
    pub p50_ns: u64,
    /// The CAS round to a majority in the same placement (virtual ns).
    pub cas_majority_ns: u64,
    /// `p50_ns / cas_majority_ns`.
    pub ratio: f64,
    /// Whether the ratio is at most 1.05 (within 5 % of one CAS round).
    pub within_5_percent: bool,
}

/// Everything a sweep measured.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyReport {
    /// What was measured.
    pub config: LatencyConfig,
    /// Every point, in the order protocol, placement, size.
    pub points: Vec<LatencyPoint>,
    /// The reference patterns, per placement.
    pub rounds: Vec<RoundRef>,
    /// The target, per protocol and placement.
    pub targets: Vec<TargetCheck>,
    /// Wall time of the whole sweep (s).
    pub wall_seconds: f64,
}

impl LatencyReport {
    /// The point of `protocol` at `size` bytes and `device_memory`, if measured.
    pub fn point(
        &self,
        protocol: Protocol,
        size: usize,
        device_memory: bool,
    ) -> Option<&LatencyPoint> {
        self.points.iter().find(|x| {
            x.protocol == protocol.name() && x.size == size && x.device_memory == device_memory
        })
    }

    /// The reference patterns under `device_memory`, if measured.
    pub fn round(&self, device_memory: bool) -> Option<&RoundRef> {
        self.rounds
            .iter()
            .find(|r| r.device_memory == device_memory)
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
    let bar = if progress {
        ProgressBar::with_draw_target(Some(jobs.len() as u64), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<anyhow::Result<LatencyPoint>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..config.jobs.clamp(1, jobs.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(protocol, dm, size)) = jobs.get(i) else {
                        break;
                    };
                    let placement = if dm { "device memory" } else { "host memory" };
                    bar.set_message(format!("{} {size} B, {placement}", protocol.name()));
                    let point = run_point(config, protocol, size, dm)
                        .with_context(|| format!("{} at {size} B, {placement}", protocol.name()));
                    results.lock().expect("no worker panicked")[i] = Some(point);
                    bar.inc(1);
                }
            });
        }
    });
    bar.finish_and_clear();
    let points = results
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut report = LatencyReport {
        config: config.clone(),
        points,
        rounds,
        targets: Vec::new(),
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
    let m = protocol.measure(config, size, device_memory)?;
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
        simulated_ns: m.simulated_ns,
        steps: m.steps,
        trace_hash: format!("{:016x}", m.trace_hash),
    })
}

/// Per protocol and placement: the smallest size's median against the CAS round.
fn targets(report: &LatencyReport) -> Vec<TargetCheck> {
    let config = &report.config;
    let Some(&size) = config.sizes.iter().min() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &protocol in &config.protocols {
        for &dm in &config.device_memory {
            let (Some(x), Some(r)) = (report.point(protocol, size, dm), report.round(dm)) else {
                continue;
            };
            let ratio = x.p50_ns as f64 / r.cas_majority_ns as f64;
            out.push(TargetCheck {
                protocol: protocol.name(),
                device_memory: dm,
                size,
                p50_ns: x.p50_ns,
                cas_majority_ns: r.cas_majority_ns,
                ratio,
                within_5_percent: ratio <= 1.05,
            });
        }
    }
    out
}
