//! The lock benchmark in virtual time (`velos bench locks`): throughput and acquire latency
//! of distributed locks against the number of processes P and the writer fraction F_W, as
//! in the RMA-locks paper's evaluation, on the simulation driver.
//!
//! Every process repeatedly draws reader or writer from a seeded PRNG of its own (writer
//! with probability F_W; exclusive locks take every acquire as a writer), acquires,
//! spends a short critical section (one local store, then local loads), releases, and
//! optionally thinks (local loads). A run lasts a warm-up then a measured window of
//! virtual time; the acquisitions completed in the window give the throughput (per
//! virtual second) and the acquire latencies (start of the acquire to entering the
//! critical section, in virtual ns, into an HDR histogram). Mutual exclusion is checked on
//! the way: a reader and a writer, or two writers, in their critical sections at once
//! fail the run.

mod plot;
mod worker;

use crate::sweep::run_jobs;
use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;
use velos_rdma::sync::rmarw::{self, RmaRwConfig};
use velos_rdma::sync::{dmcs, fompi, nlock};
use velos_rdma::{LayoutBuilder, Loc, NodeId};
use velos_sim::latency::LatencyModel;
use velos_sim::machine::Machine;
use velos_sim::simulate::{SimConfig, Simulator};
use worker::{LockRef, Worker, Workload};

/// A lock the benchmark knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LockKind {
    /// The topology-aware reader-writer lock of the RMA-locks paper
    /// ([`velos_rdma::sync::rmarw`]), on a two-level tree (root, nodes).
    RmaRw,
    /// The foMPI-style reader-writer baseline ([`velos_rdma::sync::fompi`]).
    Fompi,
    /// The rdma-rmw paper's node lock, a centralised ticket lock (exclusive only).
    Nlock,
    /// The distributed MCS queue lock of the RMA-locks paper ([`velos_rdma::sync::dmcs`];
    /// exclusive only).
    Dmcs,
}

impl LockKind {
    /// Every lock, in the order of tables and plots.
    pub const ALL: [LockKind; 4] = [
        LockKind::RmaRw,
        LockKind::Dmcs,
        LockKind::Nlock,
        LockKind::Fompi,
    ];

    /// The lock's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::RmaRw => "rma-rw",
            LockKind::Fompi => "fompi",
            LockKind::Nlock => "nlock",
            LockKind::Dmcs => "d-mcs",
        }
    }

    /// The lock called `name`, if known.
    pub fn by_name(name: &str) -> Option<LockKind> {
        LockKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether readers share the lock (else every acquire is exclusive).
    pub fn reader_writer(self) -> bool {
        match self {
            LockKind::RmaRw | LockKind::Fompi => true,
            LockKind::Nlock | LockKind::Dmcs => false,
        }
    }
}

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct LocksConfig {
    /// The locks.
    pub locks: Vec<LockKind>,
    /// Numbers of processes P.
    pub processes: Vec<usize>,
    /// Writer fractions F_W, in percent.
    pub writer_percents: Vec<f64>,
    /// Processes per node (the last node may have fewer).
    pub per_node: usize,
    /// RMA-RW: processes per physical reader counter (`None`: one counter per node).
    pub t_dc: Option<usize>,
    /// RMA-RW: writer lock passings inside a node before the lock leaves it.
    pub t_l_node: u64,
    /// RMA-RW: writer lock passings between nodes before the lock goes to the readers.
    pub t_l_root: u64,
    /// RMA-RW: readers that may enter in a row before a waiting writer gets the lock.
    pub t_r: u64,
    /// Local operations in the critical section (one store, then loads).
    pub cs_ops: u32,
    /// Local loads between a release and the next acquire.
    pub think_ops: u32,
    /// Virtual time before measuring (ns).
    pub warmup_ns: u64,
    /// The measured window of virtual time (ns).
    pub measure_ns: u64,
    /// The seed of every run.
    pub seed: u64,
    /// Step costs.
    pub latency: LatencyModel,
    /// Points simulated at once (threads).
    #[serde(skip)]
    pub jobs: usize,
}

impl LocksConfig {
    /// The full sweep: P ∈ {4, 8, 16, 32, 64}, F_W ∈ {0.2, 2, 5, 25, 100} %, every lock,
    /// 4 processes per node, the cluster latency model, a critical section of one local
    /// store and no think time, 50 µs of warm-up then 1 ms measured; RMA-RW with one
    /// reader counter per node (T_DC = processes per node), T_L,node = 16,
    /// T_L,root = 64 (so T_W = 1024) and T_R = 256 (`paper-notes/results.md`, "Lock
    /// benchmark", says why).
    pub fn full() -> LocksConfig {
        LocksConfig {
            locks: LockKind::ALL.to_vec(),
            processes: vec![4, 8, 16, 32, 64],
            writer_percents: vec![0.2, 2.0, 5.0, 25.0, 100.0],
            per_node: 4,
            t_dc: None,
            t_l_node: 16,
            t_l_root: 64,
            t_r: 256,
            cs_ops: 1,
            think_ops: 0,
            warmup_ns: 50_000,
            measure_ns: 1_000_000,
            seed: 1,
            latency: LatencyModel::cluster(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// A tiny sweep for tests: P ∈ {4, 8}, every F_W, short windows.
    pub fn quick() -> LocksConfig {
        LocksConfig {
            processes: vec![4, 8],
            warmup_ns: 5_000,
            measure_ns: 40_000,
            ..LocksConfig::full()
        }
    }

    /// This configuration on the latency profile `latency`, its windows of virtual time
    /// scaled by the profile's remote round ([`round_ns`]) against the cluster profile's:
    /// the same number of lock rounds, so about the same work, whatever a step costs
    /// (under `uniform`, where every step costs 1 ns, 1 ms would be ≈ 45 times the
    /// cluster profile's steps). The cluster profile keeps its windows exactly.
    pub fn on_profile(mut self, latency: LatencyModel) -> LocksConfig {
        let (ours, cluster) = (round_ns(&latency), round_ns(&LatencyModel::cluster()));
        let scale = |ns: u64| (u128::from(ns) * u128::from(ours) / u128::from(cluster)) as u64;
        self.warmup_ns = scale(self.warmup_ns);
        self.measure_ns = scale(self.measure_ns).max(1);
        self.latency = latency;
        self
    }

    /// About how many machine steps the whole sweep simulates, at most: each of a run's P
    /// processes taking one step per cheapest CPU step (a process spinning on local
    /// memory) through its warm-up and window, summed over the runs (an exclusive lock
    /// runs once per P). Measured sweeps stay near or below it (the cluster profile's quick
    /// sweep simulates about a twentieth of it; `uniform`, where NIC steps run beside the
    /// CPUs', 1.1 times).
    pub fn estimated_steps(&self) -> u128 {
        let per_process = u128::from(self.warmup_ns + self.measure_ns)
            / u128::from(self.latency.cpu_local_ns.max(1));
        let processes: u128 = self.runs().iter().map(|&(_, p, _)| p as u128).sum();
        processes * per_process
    }

    /// RMA-RW's configuration for participants on `nodes`: the two-level tree (root,
    /// nodes) with this configuration's thresholds.
    pub fn rma_rw(&self, nodes: &[NodeId]) -> RmaRwConfig {
        RmaRwConfig::two_level(
            nodes,
            self.t_dc.unwrap_or(self.per_node),
            self.t_l_node,
            self.t_l_root,
            self.t_r,
        )
    }

    /// The node of each of `p` processes: `per_node` consecutive processes per node.
    pub fn placement(&self, p: usize) -> Vec<NodeId> {
        (0..p)
            .map(|i| NodeId(u16::try_from(i / self.per_node).expect("P fits the node ids")))
            .collect()
    }

    /// Checks the configuration before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.per_node > 0, "at least one process per node");
        anyhow::ensure!(
            self.processes
                .iter()
                .all(|&p| p > 0 && self.nodes(p) <= usize::from(u16::MAX)),
            "every P must be positive and fit the node ids"
        );
        anyhow::ensure!(
            self.writer_percents
                .iter()
                .all(|&f| (0.0..=100.0).contains(&f)),
            "writer fractions are percentages in 0..=100"
        );
        anyhow::ensure!(self.measure_ns > 0, "the measured window must be positive");
        let steps = self.estimated_steps();
        anyhow::ensure!(
            steps <= MAX_ESTIMATED_STEPS,
            "the sweep would simulate up to about {steps} steps (processes × virtual time \
             / the {} profile's cheapest step, {} ns, summed over {} runs), more than \
             {MAX_ESTIMATED_STEPS}: shorten --measure-us or --warmup-us, or ask for fewer \
             --processes, --locks or --writer-percent",
            self.latency.name,
            self.latency.cpu_local_ns.max(1),
            self.runs().len()
        );
        if self.locks.contains(&LockKind::RmaRw) {
            for &p in &self.processes {
                self.rma_rw(&self.placement(p))
                    .check(p)
                    .with_context(|| format!("rma-rw configuration at P={p}"))?;
            }
        }
        Ok(())
    }

    /// The simulations the sweep runs, `(lock, P, F_W)` in order: an exclusive lock takes
    /// every acquire as a writer's, whatever F_W, so it runs once per P (with F_W = 100 %)
    /// and that point is reported for every F_W.
    fn runs(&self) -> Vec<(LockKind, usize, f64)> {
        let mut runs = Vec::new();
        for &lock in &self.locks {
            for &p in &self.processes {
                if lock.reader_writer() {
                    runs.extend(self.writer_percents.iter().map(|&fw| (lock, p, fw)));
                } else if !self.writer_percents.is_empty() {
                    runs.push((lock, p, 100.0));
                }
            }
        }
        runs
    }

    /// The number of nodes for `p` processes.
    pub fn nodes(&self, p: usize) -> usize {
        p.div_ceil(self.per_node)
    }
}

/// The most steps a sweep may be estimated to simulate ([`LocksConfig::estimated_steps`]):
/// about ten minutes of one core at the simulator's ≈ 0.7 µs a step when the estimate is
/// reached, a few times less in practice; the full sweep on the cluster profile is
/// estimated at 3.1 × 10^8.
pub const MAX_ESTIMATED_STEPS: u128 = 1_000_000_000;

/// A remote atomic's round in `latency`, without jitter: post, doorbell, the wire both
/// ways, the atomic at the responder, the completion written back.
pub fn round_ns(latency: &LatencyModel) -> u64 {
    (latency.cpu_post_ns
        + latency.doorbell_ns
        + 2 * latency.wire_ns
        + latency.atomic_ns
        + latency.local_mem_write_ns)
        .max(1)
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct LockPoint {
    /// The lock's name.
    pub lock: &'static str,
    /// Processes P.
    pub processes: usize,
    /// Nodes they run on.
    pub nodes: usize,
    /// Writer fraction F_W in percent. Exclusive locks take every acquire as a writer's:
    /// they are measured once per P and the point is repeated for every F_W.
    pub writer_percent: f64,
    /// Acquisitions completed in the measured window.
    pub acquisitions: u64,
    /// Of which writers' (exclusive).
    pub writer_acquisitions: u64,
    /// Processes that completed no acquisition in the measured window (starved).
    pub starved: usize,
    /// Acquisitions per virtual second.
    pub throughput_per_s: f64,
    /// Median acquire latency (virtual ns).
    pub latency_p50_ns: u64,
    /// 99th percentile acquire latency (virtual ns).
    pub latency_p99_ns: u64,
    /// Longest acquire latency among those completed in the window (virtual ns).
    pub latency_max_ns: u64,
    /// Longest wait seen: completed acquires, and acquires still waiting when the window
    /// closed, counted up to its end (virtual ns). Starvation shows here, not in p99.
    pub longest_wait_ns: u64,
    /// The measured window of virtual time (ns).
    pub virtual_ns: u64,
    /// Virtual time simulated in all, warm-up included (ns).
    pub simulated_ns: u64,
    /// Machine steps simulated.
    pub steps: u64,
    /// The simulator's trace hash (hex): the same configuration gives the same hash.
    pub trace_hash: String,
    /// Wall time the point took (s).
    pub wall_seconds: f64,
}

/// RMA-RW's throughput over the baseline's at one point.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    /// Processes P.
    pub processes: usize,
    /// Writer fraction F_W in percent.
    pub writer_percent: f64,
    /// The faster lock's name.
    pub lock: &'static str,
    /// The baseline's name.
    pub baseline: &'static str,
    /// Throughput of `lock` / throughput of `baseline`.
    pub ratio: f64,
}

/// Everything a sweep measured.
#[derive(Clone, Debug, Serialize)]
pub struct LocksReport {
    /// What was measured.
    pub config: LocksConfig,
    /// Every point, in the order lock, P, F_W.
    pub points: Vec<LockPoint>,
    /// Every other reader-writer lock's throughput over foMPI's at the largest P, per F_W.
    pub ratios: Vec<Ratio>,
    /// Wall time of the whole sweep (s).
    pub wall_seconds: f64,
}

impl LocksReport {
    /// The point of `lock` at (`p`, `writer_percent`), if measured.
    pub fn point(&self, lock: LockKind, p: usize, writer_percent: f64) -> Option<&LockPoint> {
        self.points.iter().find(|x| {
            x.lock == lock.name() && x.processes == p && x.writer_percent == writer_percent
        })
    }
}

/// Runs the sweep, showing a progress bar on stderr when it is a terminal.
pub fn run(config: &LocksConfig, progress: bool) -> anyhow::Result<LocksReport> {
    config.check()?;
    let jobs = config.runs();
    let start = Instant::now();
    let measured = run_jobs(
        &jobs,
        config.jobs,
        progress,
        "",
        |&(lock, p, fw)| format!("{} P={p} F_W={fw}%", lock.name()),
        |&(lock, p, fw)| {
            run_point(config, lock, p, fw)
                .with_context(|| format!("{} at P={p}, F_W={fw}%", lock.name()))
        },
    )?;
    let mut points = Vec::new();
    for x in measured {
        if LockKind::by_name(x.lock).is_some_and(LockKind::reader_writer) {
            points.push(x);
        } else {
            points.extend(config.writer_percents.iter().map(|&fw| LockPoint {
                writer_percent: fw,
                ..x.clone()
            }));
        }
    }
    let mut report = LocksReport {
        config: config.clone(),
        points,
        ratios: Vec::new(),
        wall_seconds: start.elapsed().as_secs_f64(),
    };
    report.ratios = ratios(&report);
    Ok(report)
}

/// Every other reader-writer lock's throughput over foMPI's at the largest P, per F_W.
fn ratios(report: &LocksReport) -> Vec<Ratio> {
    let config = &report.config;
    let Some(&p) = config.processes.iter().max() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &fw in &config.writer_percents {
        let Some(base) = report.point(LockKind::Fompi, p, fw) else {
            continue;
        };
        for &lock in &config.locks {
            if lock == LockKind::Fompi || !lock.reader_writer() {
                continue;
            }
            if let Some(x) = report.point(lock, p, fw) {
                out.push(Ratio {
                    processes: p,
                    writer_percent: fw,
                    lock: x.lock,
                    baseline: base.lock,
                    ratio: x.throughput_per_s / base.throughput_per_s,
                });
            }
        }
    }
    out
}

/// SplitMix64 of a few words: the seeds of a point's workers and scheduler. The workers'
/// seeds do not depend on the lock, so every lock sees the same reader/writer draws.
fn mix(words: &[u64]) -> u64 {
    let mut h = 0x243F_6A88_85A3_08D3u64;
    for &w in words {
        h ^= w;
        h = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
        h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 31;
    }
    h
}

/// The machine of one point: `p` workers over `lock`, and the node of each.
fn build(
    config: &LocksConfig,
    lock: LockKind,
    p: usize,
    work: Workload,
    fw_bits: u64,
) -> Machine<Worker> {
    let nodes = config.nodes(p);
    let node_of = config.placement(p);
    let mut layout = LayoutBuilder::new(u16::try_from(nodes).expect("checked"));
    let home = NodeId(0);
    let (lock_ref, private): (LockRef, Vec<Vec<Loc>>) = match lock {
        LockKind::RmaRw => {
            let l = rmarw::RmaRw::new(&mut layout, &config.rma_rw(&node_of), &node_of);
            let private = (0..p).map(|i| l.private_words(i)).collect();
            (LockRef::RmaRw(l), private)
        }
        LockKind::Fompi => {
            let l = fompi::FompiRw::new(&mut layout, home, &node_of);
            let private = (0..p).map(|i| l.private_words(i)).collect();
            (LockRef::Fompi(l), private)
        }
        LockKind::Nlock => {
            let l = nlock::NLock::new(&mut layout, home, &node_of);
            let private = (0..p).map(|i| l.private_words(i)).collect();
            (LockRef::Nlock(l), private)
        }
        LockKind::Dmcs => {
            let l = dmcs::Dmcs::new(&mut layout, home, &node_of);
            let private = (0..p).map(|i| l.private_words(i)).collect();
            (LockRef::Dmcs(l), private)
        }
    };
    let own: Vec<Loc> = node_of.iter().map(|&n| layout.alloc(n)).collect();
    let mut machine = Machine::new(&layout.build());
    for i in 0..p {
        let seed = mix(&[config.seed, p as u64, fw_bits, i as u64]);
        let t = machine.spawn(
            node_of[i],
            Worker::new(lock_ref.clone(), i, seed, work, own[i]),
        );
        machine.set_private(own[i], t);
        for &w in &private[i] {
            machine.set_private(w, t);
        }
    }
    machine
}

/// Per-thread progress the harness has already accounted for.
#[derive(Clone, Copy, Default)]
struct Seen {
    started: u64,
    entered: u64,
    left: u64,
    started_at: u64,
    /// In the critical section as a writer (`Some(true)`) or a reader.
    holding: Option<bool>,
}

/// Simulates one point.
pub fn run_point(
    config: &LocksConfig,
    lock: LockKind,
    p: usize,
    writer_percent: f64,
) -> anyhow::Result<LockPoint> {
    let wall = Instant::now();
    let work = Workload {
        writer_ppm: (writer_percent * 10_000.0).round() as u32,
        cs_ops: config.cs_ops,
        think_ops: config.think_ops,
        limit: None,
    };
    let fw_bits = writer_percent.to_bits();
    let machine = build(config, lock, p, work, fw_bits);
    let sim_seed = mix(&[config.seed, p as u64, fw_bits, lock as u64, 0x51]);
    let mut sim = Simulator::new(machine, SimConfig::new(sim_seed, config.latency.clone()));
    let from = config.warmup_ns;
    let end = config.warmup_ns + config.measure_ns;
    let mut seen = vec![Seen::default(); p];
    let mut per_process = vec![0u64; p];
    let (mut writers_in, mut readers_in) = (0usize, 0usize);
    let mut hist = Histogram::<u64>::new(3).expect("3 significant digits");
    let (mut acquisitions, mut writer_acquisitions) = (0u64, 0u64);
    let mut last_cpu = 0;
    while sim.now() < end {
        if !sim.step() {
            bail!("nothing can move at {} ns (deadlock)", sim.now());
        }
        // Workers change only in CPU steps: look at them only then.
        if sim.cpu_steps() == last_cpu {
            continue;
        }
        last_cpu = sim.cpu_steps();
        let now = sim.now();
        for (t, thread) in sim.machine().threads.iter().enumerate() {
            let w = &thread.process;
            let s = &mut seen[t];
            if w.entered == s.entered && w.left == s.left && w.started == s.started {
                continue;
            }
            if let Some(e) = &w.error {
                bail!("worker {t} failed: {e}");
            }
            if w.entered != s.entered {
                s.entered = w.entered;
                if writers_in > 0 || (w.writer && readers_in > 0) {
                    bail!(
                        "mutual exclusion broken at {now} ns: worker {t} entered as a {} \
                         with {writers_in} writers and {readers_in} readers inside",
                        if w.writer { "writer" } else { "reader" }
                    );
                }
                if w.writer {
                    writers_in += 1;
                } else {
                    readers_in += 1;
                }
                s.holding = Some(w.writer);
                if (from..end).contains(&now) {
                    acquisitions += 1;
                    per_process[t] += 1;
                    writer_acquisitions += u64::from(w.writer);
                    hist.record((now - s.started_at).max(1))
                        .expect("the histogram grows");
                }
            }
            if w.left != s.left {
                s.left = w.left;
                match s.holding.take() {
                    Some(true) => writers_in -= 1,
                    Some(false) => readers_in -= 1,
                    None => bail!("worker {t} left a critical section it was not in"),
                }
            }
            if w.started != s.started {
                s.started = w.started;
                s.started_at = now;
            }
        }
    }
    if let Some((t, e)) = sim
        .machine()
        .threads
        .iter()
        .enumerate()
        .find_map(|(t, th)| th.process.error.as_ref().map(|e| (t, e)))
    {
        bail!("worker {t} failed: {e}");
    }
    // The premise of the point: an acquisition in the window (else mutual exclusion held
    // on nothing and the throughput and latencies measure nothing).
    if acquisitions == 0 {
        bail!(
            "no acquisition in the measured window ({} ns from {from} ns): nothing measured",
            config.measure_ns
        );
    }
    let pending = seen
        .iter()
        .zip(&sim.machine().threads)
        .filter(|(_, th)| th.process.started > th.process.entered)
        .map(|(s, _)| end.saturating_sub(s.started_at))
        .max()
        .unwrap_or(0);
    let quantile = |q: f64| {
        if hist.is_empty() {
            0
        } else {
            hist.value_at_quantile(q)
        }
    };
    Ok(LockPoint {
        lock: lock.name(),
        processes: p,
        nodes: config.nodes(p),
        writer_percent,
        acquisitions,
        writer_acquisitions,
        starved: per_process.iter().filter(|&&n| n == 0).count(),
        throughput_per_s: acquisitions as f64 * 1e9 / config.measure_ns as f64,
        latency_p50_ns: quantile(0.5),
        latency_p99_ns: quantile(0.99),
        latency_max_ns: hist.max(),
        longest_wait_ns: hist.max().max(pending),
        virtual_ns: config.measure_ns,
        simulated_ns: sim.now(),
        steps: sim.steps(),
        trace_hash: format!("{:016x}", sim.trace_hash()),
        wall_seconds: wall.elapsed().as_secs_f64(),
    })
}

/// The short table: one row per (F_W, P); per lock its throughput (M acquisitions per
/// virtual second), median and p99 acquire latency (µs), and starved processes; then the
/// ratios.
pub fn table(report: &LocksReport) -> String {
    use std::fmt::Write;
    let config = &report.config;
    let mut out = String::new();
    let _ = write!(out, "{:>6} {:>4}", "", "");
    for lock in &config.locks {
        let _ = write!(out, " | {:<27}", lock.name());
    }
    out.push('\n');
    let _ = write!(out, "{:>6} {:>4}", "F_W%", "P");
    for _ in &config.locks {
        let _ = write!(out, " | {:>7} {:>13} {:>5}", "Macq/s", "p50/p99 µs", "strv");
    }
    out.push('\n');
    for &fw in &config.writer_percents {
        for &p in &config.processes {
            let _ = write!(out, "{fw:>6} {p:>4}");
            for &lock in &config.locks {
                match report.point(lock, p, fw) {
                    Some(x) => {
                        let latency = format!(
                            "{:.1}/{:.1}",
                            x.latency_p50_ns as f64 / 1e3,
                            x.latency_p99_ns as f64 / 1e3
                        );
                        let _ = write!(
                            out,
                            " | {:>7.3} {:>13} {:>5}",
                            x.throughput_per_s / 1e6,
                            latency,
                            x.starved
                        );
                    }
                    None => {
                        let _ = write!(out, " | {:<27}", "-");
                    }
                }
            }
            out.push('\n');
        }
    }
    for r in &report.ratios {
        let _ = writeln!(
            out,
            "{} / {} throughput at P={}, F_W={}%: {:.2}x",
            r.lock, r.baseline, r.processes, r.writer_percent, r.ratio
        );
    }
    out
}

/// Writes `locks.json` and one SVG plot of throughput against P per F_W into `dir`.
pub fn write_outputs(report: &LocksReport, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("locks.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    for &fw in &report.config.writer_percents {
        let path = dir.join(format!("throughput_fw_{fw}.svg"));
        plot::throughput(report, fw, &path)
            .with_context(|| format!("plotting {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
