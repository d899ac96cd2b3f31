//! The Mu baseline's decision latency on the same simulator, profile and sizes: a stable
//! Mu leader ([`velos_testkit::baseline::mu`]) proposing one entry at a time, each decision timed
//! from the leader starting to write the entry to a majority holding it
//! ([`mu_cluster::decision_latencies_placed`]). Mu's fast path is two WRITEs into each
//! follower's log: the value words in one multi-word put, then the header (on a NIC, Mu
//! writes one WRITE per entry with a canary byte).

use super::{LatencyConfig, Measured};
use anyhow::{Context, anyhow, ensure};
use velos_testkit::harness::mu_cluster;

/// Replicas of the measured cluster (the paper's).
const REPLICAS: u16 = 3;

/// Measures `config.proposals` decisions of `size`-byte values after the warm-up ones,
/// with every node's log in device memory or not.
pub(super) fn measure(
    config: &LatencyConfig,
    size: usize,
    device_memory: bool,
) -> anyhow::Result<Measured> {
    let total = config.warmup_proposals + config.proposals;
    let latencies = mu_cluster::decision_latencies_placed(
        &config.latency,
        REPLICAS,
        u32::try_from(size).context("value size")?,
        u32::try_from(total).context("too many proposals")?,
        config.seed,
        device_memory,
    )
    .map_err(|e| anyhow!("the Mu cluster: {e}"))?;
    ensure!(
        latencies.len() >= total,
        "the Mu cluster decided {} of {total} entries",
        latencies.len()
    );
    let mut measured = Measured::new();
    for &ns in &latencies[config.warmup_proposals..total] {
        measured.record(ns, None);
    }
    Ok(measured)
}
