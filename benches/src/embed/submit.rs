//! The handle's own path: [`Cluster::submit`] on a real `velos::embed` cluster (three
//! replicas, the default backend and configuration), called from a client thread of its
//! own in a closed loop, one command at a time. Each call's wall time is one round trip:
//! the command handed to the leader's thread, batched, decided, applied there, and the
//! receipt woken — everything a service pays per command, which the engine-only runs of
//! `embed/velos.rs` leave out.

use super::{EmbedConfig, command, latency_histogram};
use serde::Serialize;
use std::time::Instant;
use velos::embed::{Cluster, Config, Position, RestoreError, StateMachine};

/// One repeat's `submit` round trips.
#[derive(Clone, Debug, Serialize)]
pub struct SubmitRun {
    /// Which repeat (from 0).
    pub repeat: usize,
    /// Submits measured.
    pub submits: u64,
    /// Submits per second of the measured window.
    pub submits_per_s: f64,
    /// Round trip, median (ns).
    pub p50_ns: u64,
    /// Round trip, 99th percentile (ns).
    pub p99_ns: u64,
}

/// The benchmark's state machine: it counts what it applies (`bench durable`'s too).
#[derive(Default)]
pub(crate) struct Count(pub(crate) u64);

impl StateMachine for Count {
    type Response = ();

    fn apply(&mut self, _: Position, _: &[u8]) {
        self.0 += 1;
    }

    fn snapshot(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        let b = bytes
            .try_into()
            .map_err(|_| RestoreError("8 bytes".into()))?;
        self.0 = u64::from_le_bytes(b);
        Ok(())
    }
}

/// Measures one repeat: `warmup_commits` submits first, then `config.submits` timed ones.
pub(super) fn measure(config: &EmbedConfig, repeat: usize) -> anyhow::Result<SubmitRun> {
    anyhow::ensure!(config.submits > 0, "at least one submit");
    let cluster = Cluster::start(Config::new(3), (0..3).map(|_| Count::default()))?;
    let total = config.warmup_commits + config.submits;
    let mut histogram = latency_histogram();
    let mut window = None;
    for n in 0..total {
        if n == config.warmup_commits {
            window = Some(Instant::now());
        }
        let sent = Instant::now();
        cluster
            .submit(command(n).to_vec())
            .map_err(|e| anyhow::anyhow!("submit {n}: {e}"))?;
        if window.is_some() {
            histogram.record(sent.elapsed().as_nanos() as u64)?;
        }
    }
    let wall = window.map_or(0.0, |w| w.elapsed().as_secs_f64());
    let applied = cluster.shutdown().into_iter().flatten().map(|c| c.0).max();
    anyhow::ensure!(
        applied.is_some_and(|a| a >= total),
        "the leader applied {applied:?} of {total} commands"
    );
    let run = SubmitRun {
        repeat,
        submits: histogram.len(),
        submits_per_s: histogram.len() as f64 / wall.max(f64::MIN_POSITIVE),
        p50_ns: histogram.value_at_quantile(0.5),
        p99_ns: histogram.value_at_quantile(0.99),
    };
    assert_eq!(run.submits, config.submits, "every timed submit recorded");
    Ok(run)
}
