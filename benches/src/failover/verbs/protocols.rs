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

fn hex(bytes: impl IntoIterator<Item = u8>) -> String {
    bytes.into_iter().map(|b| format!("{b:02x}")).collect()
}

impl Observed for Scripted {
    fn leads(&self) -> bool {
        self.replica.is_leader()
    }

    fn applied(&self) -> u64 {
        self.replica.applied.len() as u64
    }

    fn log(&self) -> Vec<(u64, String)> {
        let applied = &self.replica.applied;
        applied
            .iter()
            .map(|(s, v)| (*s, hex(v.iter().copied())))
            .collect()
    }

    fn applied_at(&self) -> &[u64] {
        &self.replica.applied_at
    }
}

impl Observed for MuNode {
    fn leads(&self) -> bool {
        self.is_leader()
    }

    fn applied(&self) -> u64 {
        self.applied.len() as u64
    }

    fn log(&self) -> Vec<(u64, String)> {
        let bytes = |v: &Vec<u64>| hex(v.iter().flat_map(|w| w.to_le_bytes()));
        self.applied.iter().map(|(s, v)| (*s, bytes(v))).collect()
    }

    fn applied_at(&self) -> &[u64] {
        &self.applied_at
    }
}

/// A trial whose leader crashed, every node's log checked for agreement.
struct Crashed<P> {
    /// The nodes' processes as they stopped.
    procs: Vec<P>,
    crashed: u16,
    /// The fabric's clock at the crash.
    crash_ns: u64,
    applied_before: u64,
    /// Per node: `(slots, applied at, crashed)`, as [`SeedRun::failover`] takes them.
    applied: Vec<(Vec<u64>, Vec<u64>, bool)>,
    device: String,
}

/// Runs `procs` on a fresh fabric of `layout` until its leader crashed and a survivor went
/// on (`trial::run`); the premises: a crash, something applied, and agreement.
fn crash_one<P: Observed>(
    config: &VerbsFailoverConfig,
    layout: velos_rdma::Layout,
    procs: Vec<P>,
) -> anyhow::Result<Crashed<P>> {
    let fabric = VerbsFabric::with_options(layout, VerbsOptions::from_env())
        .map_err(|e| anyhow!("no usable RDMA device: {e}"))?;
    let Finished {
        procs,
        crash,
        applied_before,
    } = trial::run(&fabric, procs, config)?;
    let (crashed, crash_ns) = crash.context("no leader applied the warm-up entries in time")?;
    let logs: Vec<AppliedLog> = (0..)
        .zip(&procs)
        .map(|(replica, p)| AppliedLog {
            replica,
            entries: p.log(),
            jumps: Vec::new(),
        })
        .collect();
    let entries: usize = logs.iter().map(|l| l.entries.len()).sum();
    ensure!(entries > 0, "no entry applied at all");
    let failures = agreement(&logs);
    ensure!(
        failures.is_empty(),
        "agreement: {:?}",
        &failures[..failures.len().min(5)]
    );
    let applied = logs
        .iter()
        .zip(&procs)
        .map(|(log, p)| {
            let slots = log.entries.iter().map(|(s, _)| *s).collect();
            (slots, p.applied_at().to_vec(), log.replica == crashed)
        })
        .collect();
    Ok(Crashed {
        procs,
        crashed,
        crash_ns,
        applied_before,
        applied,
        device: fabric.device_name().to_string(),
    })
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
    let Crashed {
        procs,
        crashed,
        crash_ns,
        applied_before,
        applied,
        device,
    } = crash_one(config, log.shape().layout(), procs)?;
    let survivors = (0..)
        .zip(&procs)
        .filter(|(i, _)| *i != crashed)
        .map(|(_, p)| &p.replica);
    let (detect_ns, takeover_ns) = SeedRun::velos_times(survivors, crashed, crash_ns);
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
    let trial = VerbsTrial {
        trial: k,
        crashed,
        applied_before,
        detect_ns,
        failover_ns: SeedRun::failover(&applied, crash_ns, takeover_ns),
        false_suspicions: Some(false_suspicions),
    };
    Ok((device, trial))
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
    let Crashed {
        procs,
        crashed,
        crash_ns,
        applied_before,
        applied,
        device,
    } = crash_one(config, mu.layout(), procs)?;
    // Mu's detector suspecting the leader is when a survivor starts its takeover.
    let detect_ns = procs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != usize::from(crashed))
        .flat_map(|(_, p)| p.takeovers_started.iter())
        .filter(|&&t| t >= crash_ns)
        .map(|&t| t - crash_ns)
        .min();
    let trial = VerbsTrial {
        trial: k,
        crashed,
        applied_before,
        detect_ns,
        failover_ns: SeedRun::failover(&applied, crash_ns, detect_ns),
        false_suspicions: None,
    };
    Ok((device, trial))
}
