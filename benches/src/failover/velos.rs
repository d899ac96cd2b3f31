//! One seed of Velos: a 3-replica harness cluster whose leader proposes its client's
//! values back to back (pipelined, the engine's window), crashed at the configured time.

use super::{FailoverConfig, SeedRun};
use anyhow::{Context, ensure};
use velos_core::log::LogConfig;
use velos_rdma::NodeId;
use velos_sim::machine::CrashMode;
use velos_sim::simulate::{Fault, Simulator};
use velos_testkit::harness::cluster::{self, ClusterSpec};
use velos_testkit::harness::script::ClientScript;

/// Replicas (the paper's).
const REPLICAS: u16 = 3;

/// Runs `seed`: the crash, then the rest of the run; the safety checks must pass.
pub(super) fn run_seed(config: &FailoverConfig, seed: u64) -> anyhow::Result<SeedRun> {
    let (crash_at, after) = (config.velos_crash_ns, config.velos_after_ns);
    // The run ends where it would without the seed's offset: the timeline's buckets stay
    // whole.
    let end = crash_at + after;
    let crash_at = super::crash_instant(crash_at, seed);
    // Room for one entry per µs, far above the steady rate (about one per 2.5 µs).
    let slots = u32::try_from(end / 1_000 + 64).context("too long a run")?;
    // The engine's default timing: heartbeat 1 µs, failure timeout 20 µs.
    let log = LogConfig::new(REPLICAS, slots, config.value_bytes);
    let spec = ClusterSpec {
        log,
        seed,
        duration_ns: end,
        crash_leader_at: None,
        crashes: Vec::new(),
        slow: Vec::new(),
        client: ClientScript {
            count: u64::from(slots),
            size: config.value_bytes as usize,
        },
        latency: config.latency.clone(),
        near_overflow: None,
        device_memory: false,
        pauses: Vec::new(),
        delays: Vec::new(),
        delays_from: Vec::new(),
        snapshot_every: None,
        snapshot_bytes: 8,
        reconfigure: Vec::new(),
        lease_reads: false,
        replace: Vec::new(),
        told_late: Vec::new(),
        durable: None,
    };
    let mut sim = Simulator::new(cluster::machine(&spec), cluster::sim_config(&spec));
    sim.run(crash_at, u64::MAX);
    let m = sim.machine();
    let leader = m
        .threads
        .iter()
        .position(|t| m.is_up(t.node) && t.process.is_leader())
        .context("no leader at the crash time")? as u16;
    sim.inject(Fault::Crash {
        node: NodeId(leader),
        mode: CrashMode::Hang,
    });
    let crash_ns = sim.now();
    sim.run(end, u64::MAX);
    let report = cluster::report(&spec, &sim);
    ensure!(
        report.ok(),
        "a safety check failed: {:?}",
        report.failures.iter().take(5).collect::<Vec<_>>()
    );
    let most = report.replicas.iter().map(|r| r.applied.len()).max();
    ensure!(
        most < Some(slots as usize),
        "the log ({slots} slots) filled before the end"
    );
    let survivors = sim
        .machine()
        .threads
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != usize::from(leader))
        .map(|(_, t)| &t.process.replica);
    let (detect_ns, takeover_ns) = SeedRun::velos_times(survivors, leader, crash_ns);
    // Terms: the first leader's, and one taking over after the crash; any other is a
    // leader change no crash caused.
    let before = report
        .leader_changes
        .iter()
        .filter(|c| c.at_ns < crash_ns)
        .count() as u64;
    let after_crash = report.leader_changes.len() as u64 - before;
    let false_suspicions = before.saturating_sub(1) + after_crash.saturating_sub(1);
    let applied: Vec<(Vec<u64>, Vec<u64>, bool)> = report
        .replicas
        .iter()
        .map(|r| {
            (
                r.applied.iter().map(|(s, _)| *s).collect(),
                r.applied_at.clone(),
                r.crashed,
            )
        })
        .collect();
    Ok(SeedRun {
        seed,
        crashed: leader,
        crash_ns,
        detect_ns,
        takeover_ns,
        failover_ns: SeedRun::failover(&applied, crash_ns, takeover_ns),
        first_apply_ns: SeedRun::next_decision(&applied, crash_ns, crash_ns),
        false_suspicions: Some(false_suspicions),
        timeline: SeedRun::timeline(&applied, end),
        steps: report.steps,
    })
}
