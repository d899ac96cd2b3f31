//! One seed of the Mu baseline: a 3-node Mu cluster whose leader proposes entries back to
//! back (one at a time), its leader crashed at the configured time
//! ([`mu_cluster::run`]).

use super::{FailoverConfig, SeedRun};
use anyhow::{Context, anyhow, ensure};
use velos_testkit::baseline::mu::MuConfig;
use velos_testkit::harness::mu_cluster::{self, MuSpec};

/// Replicas (the paper's).
const REPLICAS: u16 = 3;

/// Runs `seed`; the safety checks must pass.
pub(super) fn run_seed(config: &FailoverConfig, seed: u64) -> anyhow::Result<SeedRun> {
    let (crash_at, after) = (config.mu_crash_ns, config.mu_after_ns);
    // The run ends where it would without the seed's offset: the timeline's buckets stay
    // whole.
    let end = crash_at + after;
    let crash_at = super::crash_instant(crash_at, seed);
    // Room for one entry per µs (a decision takes about 1.5 µs).
    let slots = u32::try_from(end / 1_000 + 64).context("too long a run")?;
    let spec = MuSpec {
        config: MuConfig::new(REPLICAS, slots, config.value_bytes.div_ceil(8)),
        seed,
        duration_ns: end,
        crash_leader_at: Some(crash_at),
        slow: Vec::new(),
        stalls: Vec::new(),
        latency: config.latency.clone(),
    };
    let report = mu_cluster::run(&spec).map_err(|e| anyhow!("the Mu cluster: {e}"))?;
    let (crashed, crash_ns) = report.crashed.context("no leader at the crash time")?;
    // Liveness after the crash is what is measured here, not a check: a run too short to
    // fail over reports no failover time.
    let failed: Vec<&String> = report
        .checks
        .iter()
        .filter(|&(name, ok)| !ok && name != "liveness_after_crash")
        .map(|(name, _)| name)
        .collect();
    ensure!(
        failed.is_empty(),
        "a check failed ({failed:?}): {:?}",
        report.failures.iter().take(5).collect::<Vec<_>>()
    );
    let most = report.replicas.iter().map(|r| r.applied.len()).max();
    ensure!(
        most < Some(slots as usize),
        "the log ({slots} slots) filled before the end"
    );
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
        crashed,
        crash_ns,
        detect_ns: report.detect_ns,
        takeover_ns: report.detect_ns,
        failover_ns: SeedRun::failover(&applied, crash_ns, report.detect_ns),
        first_apply_ns: SeedRun::next_decision(&applied, crash_ns, crash_ns),
        false_suspicions: None,
        timeline: SeedRun::timeline(&applied, end),
        steps: report.steps,
    })
}
