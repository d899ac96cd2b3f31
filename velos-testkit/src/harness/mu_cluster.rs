//! A Mu cluster ([`crate::baseline::mu`]) on the simulation driver: faults, the checks
//! Velos clusters end with (agreement, validity, integrity, no holes) and liveness after
//! a leader crash, and the failover times in virtual time.

use super::cluster::{ReplicaReport, check};
use crate::baseline::mu::{MuConfig, MuNode};
use std::collections::BTreeMap;
use velos_rdma::{NodeId, Shared};
use velos_sim::latency::LatencyModel;
use velos_sim::machine::{CrashMode, Machine};
use velos_sim::simulate::{Fault, ScheduledFault, SimConfig, Simulator};

/// One simulated run of a Mu cluster.
#[derive(Clone, Debug)]
pub struct MuSpec {
    /// The cluster.
    pub config: MuConfig,
    /// The seed: it fixes the whole run.
    pub seed: u64,
    /// Virtual time to run (ns).
    pub duration_ns: u64,
    /// Crash whichever node leads (in the fast path) at this time.
    pub crash_leader_at: Option<u64>,
    /// Slow down operations towards a node: (node, from ns, extra ns per step, for ns).
    pub slow: Vec<(u16, u64, u64, u64)>,
    /// Stop a node's CPU for a while: (node, from ns, for ns). A stalled leader looks
    /// dead to the others, then comes back believing it still leads.
    pub stalls: Vec<(u16, u64, u64)>,
    /// Step costs.
    pub latency: LatencyModel,
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct MuReport {
    /// The seed.
    pub seed: u64,
    /// What each node applied.
    pub replicas: Vec<ReplicaReport>,
    /// The checks: name → pass.
    pub checks: BTreeMap<String, bool>,
    /// What failed, in words.
    pub failures: Vec<String>,
    /// The crashed leader and when, if one was crashed.
    pub crashed: Option<(u16, u64)>,
    /// From the crash to the first takeover started by another node (ns).
    pub detect_ns: Option<u64>,
    /// From the crash to the first decision of another leader (ns).
    pub failover_ns: Option<u64>,
    /// Per node, its decisions as leader.
    pub decisions: Vec<Vec<crate::baseline::mu::Decision>>,
    /// Log writes refused by followers (deposed leaders), over all nodes.
    pub refusals: u64,
    /// Emulator steps taken.
    pub steps: u64,
}

impl MuReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.checks.values().all(|&ok| ok)
    }

    /// The failures with the seed and the command that replays the run.
    pub fn explain(&self, test: &str) -> String {
        format!(
            "seed {}: {:?}\nreplay: VELOS_MU_SEED={} cargo test --release --test mu_cluster {test}",
            self.seed, self.failures, self.seed
        )
    }
}

fn hex(words: &[u64]) -> String {
    words.iter().map(|w| format!("{w:016x}")).collect()
}

/// The emulator machine of a Mu cluster, one process per node.
fn machine(config: &MuConfig, stalls: &[(u16, u64, u64)]) -> Result<Machine<MuNode>, String> {
    let shared = Shared::new(config.clone());
    let mut machine = Machine::new(&config.layout());
    for r in 0..config.replicas {
        let mut node = MuNode::new(shared.clone(), r)?;
        node.stall = stalls
            .iter()
            .find(|s| s.0 == r)
            .map(|&(_, at, ns)| (at, ns));
        machine.spawn(NodeId(r), node);
    }
    Ok(machine)
}

/// Runs `spec` and checks the outcome; `Err` for a bad configuration.
pub fn run(spec: &MuSpec) -> Result<MuReport, String> {
    let mut config = SimConfig::new(spec.seed, spec.latency.clone());
    config.faults = spec
        .slow
        .iter()
        .map(|&(node, at_ns, extra_ns, duration_ns)| {
            ScheduledFault::delay(node, at_ns, extra_ns, duration_ns)
        })
        .collect();
    let mut sim = Simulator::new(machine(&spec.config, &spec.stalls)?, config);
    let mut crashed = None;
    if let Some(at) = spec.crash_leader_at.filter(|&at| at < spec.duration_ns) {
        sim.run(at, u64::MAX);
        let m = sim.machine();
        let leader = m
            .threads
            .iter()
            .position(|t| m.is_up(t.node) && t.process.is_leader());
        if let Some(l) = leader {
            let node = NodeId(l as u16);
            sim.inject(Fault::Crash {
                node,
                mode: CrashMode::Hang,
            });
            crashed = Some((node.0, sim.now()));
        }
    }
    sim.run(spec.duration_ns, u64::MAX);
    Ok(report(spec, &sim, crashed))
}

fn report(spec: &MuSpec, sim: &Simulator<MuNode>, crashed: Option<(u16, u64)>) -> MuReport {
    let m = sim.machine();
    let replicas: Vec<ReplicaReport> = m
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| ReplicaReport {
            id: i as u16,
            incarnation: 0, // the baseline never replaces a process
            crashed: !m.is_up(t.node),
            applied: t
                .process
                .applied
                .iter()
                .map(|(s, v)| (*s, hex(v)))
                .collect(),
            applied_at: t.process.applied_at.clone(),
            installs: Vec::new(),
            digest: (0, 0),
            acknowledged: Vec::new(),
            memberships: Vec::new(),
            members: 0,
        })
        .collect();
    let proposed: Vec<String> = m
        .threads
        .iter()
        .flat_map(|t| t.process.proposed.iter().map(|v| hex(v)))
        .collect();
    let mut failures = Vec::new();
    let mut checks = check(&replicas, &proposed, &mut failures);
    let others = |l: u16| {
        m.threads
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i != usize::from(l))
    };
    let (mut detect_ns, mut failover_ns) = (None, None);
    if let Some((l, at)) = crashed {
        detect_ns = others(l)
            .flat_map(|(_, t)| t.process.takeovers_started.iter())
            .filter(|&&t| t >= at)
            .min()
            .map(|t| t - at);
        failover_ns = others(l)
            .flat_map(|(_, t)| t.process.decisions.iter())
            .map(|d| d.decided_at)
            .filter(|&t| t >= at)
            .min()
            .map(|t| t - at);
        let live = failover_ns.is_some();
        if !live {
            failures.push(format!(
                "no decision after the crash of leader {l} at {at} ns"
            ));
        }
        checks.insert("liveness_after_crash".into(), live);
    }
    if std::env::var_os("VELOS_MU_DEBUG").is_some() {
        for t in &m.threads {
            eprintln!("{}", t.process.describe());
        }
    }
    let decided = m.threads.iter().any(|t| !t.process.decisions.is_empty());
    if !decided {
        failures.push("no decision at all".into());
    }
    checks.insert("decides".into(), decided);
    MuReport {
        seed: spec.seed,
        replicas,
        checks,
        failures,
        crashed,
        detect_ns,
        failover_ns,
        decisions: m
            .threads
            .iter()
            .map(|t| t.process.decisions.clone())
            .collect(),
        refusals: m.threads.iter().map(|t| t.process.refusals).sum(),
        steps: sim.steps(),
    }
}

/// Decision latencies of a stable-leader Mu cluster of `replicas` nodes under `latency`,
/// closed loop (one entry at a time), values of `value_bytes` bytes: for each of
/// `decisions` new entries, the virtual ns from the leader starting to write it to a
/// majority having it. For benchmarks comparing with Velos; `Err` for a bad input or a
/// run that did not decide enough (with its seed).
pub fn decision_latencies(
    latency: &LatencyModel,
    replicas: u16,
    value_bytes: u32,
    decisions: u32,
    seed: u64,
) -> Result<Vec<u64>, String> {
    decision_latencies_placed(latency, replicas, value_bytes, decisions, seed, false)
}

/// [`decision_latencies`] with every node's log ([`MuConfig::log_words`]) in NIC device
/// memory when `device_memory` is set (the placement Velos's benchmark compares).
pub fn decision_latencies_placed(
    latency: &LatencyModel,
    replicas: u16,
    value_bytes: u32,
    decisions: u32,
    seed: u64,
    device_memory: bool,
) -> Result<Vec<u64>, String> {
    let value_words = value_bytes.div_ceil(8).max(1);
    let config = MuConfig::new(replicas, decisions, value_words);
    config.check()?;
    let mut machine = machine(&config, &[])?;
    if device_memory {
        for r in 0..replicas {
            machine
                .set_device_memory(NodeId(r), config.log_words())
                .map_err(|e| format!("device memory: {e}"))?;
        }
    }
    let mut sim = Simulator::new(machine, SimConfig::new(seed, latency.clone()));
    let mut until = 0;
    let limit = 2_000_000 + u64::from(decisions) * 200_000;
    loop {
        until += 100_000;
        sim.run(until, u64::MAX);
        let got: Vec<u64> = sim
            .machine()
            .threads
            .iter()
            .flat_map(|t| t.process.decisions.iter())
            .filter(|d| !d.reproposal)
            .map(|d| d.decided_at - d.proposed_at)
            .collect();
        if got.len() >= decisions as usize {
            return Ok(got);
        }
        if until >= limit {
            return Err(format!(
                "seed {seed}: {} of {decisions} decisions by {until} ns",
                got.len()
            ));
        }
    }
}
