//! `velos bench join`: a replica replaced by a fresh process while the leader decides back
//! to back, on the simulator (virtual time: exact, but it does not charge the engine's own
//! CPU) — a follower (replica 2), or the crashed former leader (replica 0, a lower id than
//! the acting leader's: the replacement must not take the lead, rule (sticky leader)).
//! Per seed: from the replacement's start to its first vote (the leader's decision of the
//! first slot whose configuration names it) and to its first entry applied at or past that
//! slot (caught up); the acting leader's decisions per µs during the join against the
//! 200 µs before the replacement started, and its longest gap between two decisions from
//! then to the end of the run.

use crate::stats::median;
use serde::Serialize;
use velos_core::log::LogConfig;
use velos_sim::latency::LatencyModel;
use velos_testkit::harness::cluster::{ClusterSpec, ReplicaReport, run};
use velos_testkit::harness::script::ClientScript;

/// What a join measurement runs.
#[derive(Clone, Debug, Serialize)]
pub struct JoinConfig {
    /// Seeds 0 to this.
    pub seeds: u64,
    /// The ring's slots.
    pub slots: u32,
    /// The services' snapshots (bytes) and how often they are taken (entries).
    pub snapshot_bytes: u32,
    /// Every this many entries.
    pub snapshot_every: u64,
    /// When replica 2 crashes and its replacement starts (ns).
    pub start_ns: u64,
    /// How long the run goes on after it (ns).
    pub after_ns: u64,
    /// The latency profile's name.
    pub latency: String,
    /// Replace the crashed former leader (replica 0, its replacement starting
    /// [`FAILOVER_NS`] after the crash, once replica 1 leads) instead of a follower.
    pub former_leader: bool,
}

/// In the former leader's case, the time between its crash and its replacement's start:
/// the failover is over by then, so what is measured is the replacement's cost alone.
pub const FAILOVER_NS: u64 = 300_000;

impl Default for JoinConfig {
    /// The setting: 3 replicas, the `cluster` profile, a 64-slot ring, 64 KiB
    /// snapshots every 32 entries, the replacement started at 1 ms, 2 ms more.
    fn default() -> JoinConfig {
        JoinConfig {
            seeds: 8,
            slots: 64,
            snapshot_bytes: 64 << 10,
            snapshot_every: 32,
            start_ns: 1_000_000,
            after_ns: 2_000_000,
            latency: "cluster".into(),
            former_leader: false,
        }
    }
}

/// One seed's join.
#[derive(Clone, Debug, Serialize)]
pub struct JoinRun {
    /// The seed.
    pub seed: u64,
    /// From the start to the leader's decision of the first slot that counts the
    /// replacement (ns); `None`: it never voted.
    pub vote_ns: Option<u64>,
    /// From the start to the replacement's first entry applied at or past that slot (ns).
    pub caught_up_ns: Option<u64>,
    /// Snapshots the replacement copied.
    pub installs: usize,
    /// The leader's decisions per µs in the 200 µs before the crash.
    pub rate_before: f64,
    /// …and from the start until the replacement caught up (or the run's end).
    pub rate_during: f64,
    /// The acting leader's longest time without a decision from the replacement's start
    /// to the run's end (ns).
    pub longest_gap_ns: u64,
    /// Whether every check of the run passed and the replacement voted.
    pub ok: bool,
}

/// The measurement: every seed, and the medians.
#[derive(Clone, Debug, Serialize)]
pub struct JoinReport {
    /// What ran.
    pub config: JoinConfig,
    /// Per seed.
    pub runs: Vec<JoinRun>,
    /// Median of `vote_ns` over the seeds that voted.
    pub vote_ns_median: Option<u64>,
    /// Median of `caught_up_ns` over the seeds that caught up.
    pub caught_up_ns_median: Option<u64>,
    /// Median of `rate_during / rate_before`.
    pub rate_ratio_median: f64,
    /// Median and largest `longest_gap_ns`.
    pub longest_gap_ns_median: Option<u64>,
    /// The largest over the seeds.
    pub longest_gap_ns_max: Option<u64>,
}

/// The window before the crash that the rate is measured over (ns).
const BEFORE_NS: u64 = 200_000;

/// Entries `r` applied in `[from, to)` per µs.
fn rate(r: &ReplicaReport, from: u64, to: u64) -> f64 {
    let n = r
        .applied_at
        .iter()
        .filter(|&&t| t >= from && t < to)
        .count();
    n as f64 * 1_000.0 / (to - from).max(1) as f64
}

/// The longest time without an entry applied by `r` in `[from, to]` (ns), the window's
/// ends counting as boundaries.
fn longest_gap(r: &ReplicaReport, from: u64, to: u64) -> u64 {
    let inside = r
        .applied_at
        .iter()
        .copied()
        .filter(|&t| t >= from && t <= to);
    let (mut last, mut gap) = (from, 0);
    for t in inside.chain([to]) {
        gap = gap.max(t - last);
        last = t;
    }
    gap
}

/// Runs seed `seed` of `config`.
pub fn run_seed(config: &JoinConfig, seed: u64) -> anyhow::Result<JoinRun> {
    let mut log = LogConfig::new(3, config.slots, 16);
    log.max_snapshot_bytes = config.snapshot_bytes.max(8);
    let latency = LatencyModel::by_name(&config.latency)
        .ok_or_else(|| anyhow::anyhow!("no latency profile {:?}", config.latency))?;
    let client = ClientScript {
        count: u64::MAX,
        size: 16,
    };
    // (replaced, acting leader, when the replacement starts after the crash)
    let (id, acting, delay) = match config.former_leader {
        true => (0, 1, FAILOVER_NS),
        false => (2, 0, 0),
    };
    let crash = config.start_ns;
    let start = crash + delay;
    let end_ns = start + config.after_ns;
    let spec = ClusterSpec {
        latency,
        snapshot_every: Some(config.snapshot_every),
        snapshot_bytes: config.snapshot_bytes as usize,
        replace: vec![(id, crash, delay)],
        ..ClusterSpec::new(log.clone(), seed, end_ns, client)
    };
    let report = run(&spec);
    let find = |id: u16, incarnation: u64| {
        report
            .replicas
            .iter()
            .find(|r| (r.id, r.incarnation) == (id, incarnation))
    };
    let leader = find(acting, 0).ok_or_else(|| anyhow::anyhow!("no replica {acting}"))?;
    let new = find(id, 1).ok_or_else(|| anyhow::anyhow!("no replacement"))?;
    // The configuration that adds it back: the last change the leader applied, naming it.
    let voting_from = leader
        .memberships
        .iter()
        .rev()
        .find(|&&(slot, mask)| mask & (1 << id) != 0 && slot > 0)
        .map(|&(slot, _)| slot + u64::from(log.pipeline));
    let decided_at = |r: &ReplicaReport, from: u64| {
        r.applied
            .iter()
            .zip(&r.applied_at)
            .find(|((slot, _), _)| *slot >= from)
            .map(|(_, &t)| t.saturating_sub(start))
    };
    let vote_ns = voting_from.and_then(|s| decided_at(leader, s));
    let caught_up_ns = voting_from.and_then(|s| decided_at(new, s));
    let end = caught_up_ns.map_or(end_ns, |c| start + c.max(1));
    Ok(JoinRun {
        seed,
        vote_ns,
        caught_up_ns,
        installs: new.installs.len(),
        rate_before: rate(leader, start.saturating_sub(BEFORE_NS), start),
        rate_during: rate(leader, start, end),
        longest_gap_ns: longest_gap(leader, start, end_ns),
        // A join whose replacement never voted measured nothing.
        ok: report.ok() && vote_ns.is_some(),
    })
}

/// Runs every seed of `config`.
pub fn measure(config: &JoinConfig) -> anyhow::Result<JoinReport> {
    let runs: Vec<JoinRun> = (0..config.seeds)
        .map(|seed| run_seed(config, seed))
        .collect::<anyhow::Result<_>>()?;
    let ratios: Vec<f64> = runs
        .iter()
        .map(|r| r.rate_during / r.rate_before.max(f64::MIN_POSITIVE))
        .collect();
    Ok(JoinReport {
        config: config.clone(),
        vote_ns_median: median(runs.iter().filter_map(|r| r.vote_ns).collect()),
        caught_up_ns_median: median(runs.iter().filter_map(|r| r.caught_up_ns).collect()),
        rate_ratio_median: median(ratios).unwrap_or(0.0),
        longest_gap_ns_median: median(runs.iter().map(|r| r.longest_gap_ns).collect()),
        longest_gap_ns_max: runs.iter().map(|r| r.longest_gap_ns).max(),
        runs,
    })
}
