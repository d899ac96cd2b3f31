//! The two protocols' trials on a fresh fabric each: their processes, their timing scaled,
//! and what a trial measured, derived from what each node applied and when (the fabric's
//! clock, `Op::Now`) as the simulated benchmark derives it.

use super::trial::{self, Finished, Observed};
use super::{SeedRun, VerbsFailoverConfig, VerbsTrial};
use anyhow::{Context, anyhow, ensure};
use velos_core::log::{LogConfig, Replica};
use velos_rdma::Shared;
use velos_rdma::verbs::{VerbsFabric, VerbsOptions};
use velos_testkit::baseline::mu::{MuConfig, MuNode};
use velos_testkit::check::{AppliedLog, agreement};
use velos_testkit::harness::script::{ClientScript, Scripted};

/// Replicas (the papers').
const REPLICAS: u16 = 3;
/// Log slots: room for a trial's entries with a wide margin (no snapshots, no recycling).
const SLOTS: u32 = 4096;

impl Observed for Scripted {
    fn leads(&self) -> bool {
        self.replica.is_leader()
    }

    fn applied(&self) -> u64 {
        self.replica.applied.len() as u64
    }
}

impl Observed for MuNode {
    fn leads(&self) -> bool {
        self.is_leader()
    }

    fn applied(&self) -> u64 {
        self.applied.len() as u64
    }
}

/// `(slot, applied at, crashed)` per node, and the agreement check over the values.
type Applied = Vec<(Vec<u64>, Vec<u64>, bool)>;

fn checked(logs: Vec<AppliedLog>) -> anyhow::Result<()> {
    let applied: usize = logs.iter().map(|l| l.entries.len()).sum();
    ensure!(applied > 0, "no entry applied at all");
    let failures = agreement(&logs);
    ensure!(
        failures.is_empty(),
        "agreement: {:?}",
        &failures[..failures.len().min(5)]
    );
    Ok(())
}

fn hex(bytes: impl IntoIterator<Item = u8>) -> String {
    bytes.into_iter().map(|b| format!("{b:02x}")).collect()
}

fn fabric(layout: velos_rdma::Layout) -> anyhow::Result<VerbsFabric> {
    VerbsFabric::with_options(layout, VerbsOptions::from_env())
        .map_err(|e| anyhow!("no usable RDMA device: {e}"))
}

/// One crash of Velos's leader: the engine's default timing scaled, its clients' values
/// proposed back to back (pipelined).
pub(super) fn velos_trial(
    config: &VerbsFailoverConfig,
    k: u32,
) -> anyhow::Result<(String, VerbsTrial)> {
    let mut log = LogConfig::new(REPLICAS, SLOTS, config.value_bytes);
    let scale = config.time_scale;
    log.heartbeat_period_ns *= scale;
    log.failure_timeout_ns *= scale;
    log.catch_up_after_ns *= scale;
    let shared = Shared::new(log.clone());
    let script = ClientScript {
        count: u64::from(SLOTS) - 4 * u64::from(log.pipeline),
        size: config.value_bytes as usize,
    };
    let procs = (0..REPLICAS)
        .map(|r| {
            Replica::new(shared.clone(), r)
                .and_then(|replica| Scripted::new(replica, script.clone()))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("the Velos replicas: {e}"))?;
    let fabric = fabric(log.shape().layout())?;
    let Finished {
        procs,
        crash,
        applied_before,
    } = trial::run(&fabric, procs, config)?;
    let (crashed, crash_ns) = crash.context("no leader applied the warm-up entries in time")?;
    checked(
        procs
            .iter()
            .enumerate()
            .map(|(i, p)| AppliedLog {
                replica: i as u16,
                entries: p
                    .replica
                    .applied
                    .iter()
                    .map(|(s, v)| (*s, hex(v.iter().copied())))
                    .collect(),
                jumps: Vec::new(),
            })
            .collect(),
    )?;
    let survivors = || {
        procs
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i != usize::from(crashed))
            .map(|(_, p)| &p.replica)
    };
    let detect_ns = survivors()
        .flat_map(|r| r.leader_changes.iter())
        .filter(|&&(t, l)| t >= crash_ns && l != crashed)
        .map(|&(t, _)| t - crash_ns)
        .min();
    let takeover_ns = survivors()
        .flat_map(|r| r.terms_started.iter())
        .filter(|&&t| t >= crash_ns)
        .map(|&t| t - crash_ns)
        .min();
    // Terms: the first leader's and one taking over after the crash; any other is a
    // leader change no crash caused.
    let terms = |before: bool| {
        procs
            .iter()
            .flat_map(|p| p.replica.terms_started.iter())
            .filter(|&&t| (t < crash_ns) == before)
            .count() as u64
    };
    let false_suspicions = terms(true).saturating_sub(1) + terms(false).saturating_sub(1);
    let applied: Applied = procs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let r = &p.replica;
            (
                r.applied.iter().map(|(s, _)| *s).collect(),
                r.applied_at.clone(),
                i == usize::from(crashed),
            )
        })
        .collect();
    let trial = VerbsTrial {
        trial: k,
        crashed,
        applied_before,
        detect_ns,
        failover_ns: SeedRun::failover(&applied, crash_ns, takeover_ns),
        false_suspicions: Some(false_suspicions),
    };
    Ok((fabric.device_name().to_string(), trial))
}

/// One crash of Mu's leader: its published timing scaled, one entry at a time.
pub(super) fn mu_trial(
    config: &VerbsFailoverConfig,
    k: u32,
) -> anyhow::Result<(String, VerbsTrial)> {
    let mut mu = MuConfig::new(REPLICAS, SLOTS, config.value_bytes.div_ceil(8));
    let scale = config.time_scale;
    mu.entries = SLOTS - 64;
    mu.hb_period_ns *= scale;
    mu.fd_period_ns *= scale;
    mu.fd_collect_ns *= scale;
    mu.phase_timeout_ns *= scale;
    mu.check()
        .map_err(|e| anyhow!("the Mu configuration: {e}"))?;
    let shared = Shared::new(mu.clone());
    let procs = (0..REPLICAS)
        .map(|r| MuNode::new(shared.clone(), r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("the Mu nodes: {e}"))?;
    let fabric = fabric(mu.layout())?;
    let Finished {
        procs,
        crash,
        applied_before,
    } = trial::run(&fabric, procs, config)?;
    let (crashed, crash_ns) = crash.context("no leader applied the warm-up entries in time")?;
    checked(
        procs
            .iter()
            .enumerate()
            .map(|(i, p)| AppliedLog {
                replica: i as u16,
                entries: p
                    .applied
                    .iter()
                    .map(|(s, v)| (*s, hex(v.iter().flat_map(|w| w.to_le_bytes()))))
                    .collect(),
                jumps: Vec::new(),
            })
            .collect(),
    )?;
    // Mu's detector suspecting the leader is when a survivor starts its takeover.
    let detect_ns = procs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != usize::from(crashed))
        .flat_map(|(_, p)| p.takeovers_started.iter())
        .filter(|&&t| t >= crash_ns)
        .map(|&t| t - crash_ns)
        .min();
    let applied: Applied = procs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                p.applied.iter().map(|(s, _)| *s).collect(),
                p.applied_at.clone(),
                i == usize::from(crashed),
            )
        })
        .collect();
    let trial = VerbsTrial {
        trial: k,
        crashed,
        applied_before,
        detect_ns,
        failover_ns: SeedRun::failover(&applied, crash_ns, detect_ns),
        false_suspicions: None,
    };
    Ok((fabric.device_name().to_string(), trial))
}
