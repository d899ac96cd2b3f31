//! Velos's decision latency on the simulated cluster: a stable leader (replica 0), one
//! proposal at a time. Each proposal is handed to the leader between two steps with
//! [`Replica::propose`]; its decision is the step after which [`Replica::take_results`]
//! reports it. The leader's own operations are watched on the way, which splits the
//! latency into phases (see [`Phases`]).

use super::{LatencyConfig, Measured, Phases};
use crate::harness::cluster::{self, ClusterSpec};
use anyhow::{Context, bail, ensure};
use velos_core::log::{ClientScript, LogConfig, Replica};
use velos_rdma::{Op, WorkId};
use velos_sim::machine::Next;
use velos_sim::simulate::{Simulator, Stop};

/// Replicas of the measured cluster (the paper's).
const REPLICAS: u16 = 3;

/// A decision that takes longer than this (virtual ns) fails the point.
const TIMEOUT_NS: u64 = 2_000_000;

/// What the leader did for one proposal (virtual times).
#[derive(Clone, Debug, Default)]
struct Watch {
    first_post: Option<u64>,
    /// Per acceptor: the accept CAS's post time and work id, then its completion time.
    cas: Vec<Option<(u64, WorkId, Option<u64>)>>,
}

impl Watch {
    /// The leader executed `op` at `now`.
    fn executed(&mut self, op: &Op, now: u64) {
        match *op {
            Op::PutInline { .. } | Op::Atomic { .. } if self.first_post.is_none() => {
                self.first_post = Some(now);
            }
            _ => {}
        }
        if let Op::Atomic {
            remote, work_id, ..
        } = *op
        {
            let slot = &mut self.cas[remote.node.index()];
            if slot.is_none() {
                *slot = Some((now, work_id, None));
            }
        }
    }

    /// The phases, once the decision came at `decided` (the proposal at `proposed`).
    fn phases(&self, proposed: u64, decided: u64) -> Option<Phases> {
        let mut done: Vec<(u64, u64)> = self
            .cas
            .iter()
            .filter_map(|c| c.and_then(|(posted, _, done)| done.map(|d| (d, posted))))
            .collect();
        done.sort_unstable();
        let majority = usize::from(REPLICAS) / 2 + 1;
        let &(majority_done, majority_posted) = done.get(majority - 1)?;
        let first_post = self.first_post?;
        (proposed <= first_post
            && first_post <= majority_posted
            && majority_posted <= majority_done
            && majority_done <= decided)
            .then(|| Phases {
                turn_ns: first_post - proposed,
                posting_ns: majority_posted - first_post,
                cas_round_ns: majority_done - majority_posted,
                notice_ns: decided - majority_done,
            })
    }
}

/// Measures `config.proposals` decisions of `size`-byte values (after the warm-up ones).
pub(super) fn measure(
    config: &LatencyConfig,
    size: usize,
    device_memory: bool,
) -> anyhow::Result<Measured> {
    let total = config.warmup_proposals + config.proposals;
    let mut log = LogConfig::new(
        REPLICAS,
        u32::try_from(total + 16).context("too many proposals")?,
        u32::try_from(size.max(1)).context("value size")?,
    );
    log.idle_pause_ns = config.idle_pause_ns;
    log.failure_timeout_ns = config.failure_timeout_ns;
    let spec = ClusterSpec {
        log,
        seed: config.seed,
        duration_ns: u64::MAX,
        crash_leader_at: None,
        crashes: Vec::new(),
        slow: Vec::new(),
        client: ClientScript { count: 0, size: 0 },
        latency: config.latency.clone(),
        near_overflow: None,
        device_memory,
        pauses: Vec::new(),
        snapshot_every: None,
        snapshot_bytes: 8,
        reconfigure: Vec::new(),
        lease_reads: false,
    };
    let mut sim = Simulator::new(cluster::machine(&spec), cluster::sim_config(&spec));
    let stop = sim.run(config.warmup_ns, u64::MAX);
    ensure!(stop == Stop::TimeLimit, "the warm-up ended with {stop:?}");
    let leader = (0..usize::from(REPLICAS))
        .find(|&t| sim.machine().threads[t].process.is_leader())
        .context("no leader after the warm-up")?;
    let mut measured = Measured::new();
    let mut proposed = Vec::with_capacity(total);
    for i in 0..total {
        let value: Vec<u8> = (0..size).map(|b| (i + b) as u8).collect();
        proposed.push(value.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let at = sim.now();
        let id = sim.machine_mut().threads[leader]
            .process
            .propose(value)
            .map_err(|e| anyhow::anyhow!("proposal {i}: {e}"))?;
        let (decided, watch) = decide(&mut sim, leader, id, at)
            .with_context(|| format!("proposal {i} of {size} bytes"))?;
        if i >= config.warmup_proposals {
            measured.record(decided - at, watch.phases(at, decided));
        }
        sim.run(sim.now() + config.gap_ns, u64::MAX);
    }
    // The safety checks, against the values proposed here (the replicas' own client
    // proposed nothing).
    let report = cluster::report(&spec, &sim);
    let mut failures = Vec::new();
    let checks = cluster::check(&report.replicas, &proposed, &mut failures);
    ensure!(
        checks.values().all(|&ok| ok),
        "the run broke a check: {failures:?}"
    );
    measured.steps = sim.steps();
    measured.simulated_ns = sim.now();
    measured.trace_hash = sim.trace_hash();
    Ok(measured)
}

/// Steps until the leader reports proposal `id` decided: the decision's time, and what
/// the leader did on the way.
fn decide(
    sim: &mut Simulator<Replica>,
    leader: usize,
    id: u64,
    proposed: u64,
) -> anyhow::Result<(u64, Watch)> {
    let mut watch = Watch {
        cas: vec![None; usize::from(REPLICAS)],
        ..Watch::default()
    };
    loop {
        let thread = &sim.machine().threads[leader];
        let (pending, ready) = (thread.next.clone(), thread.ready);
        if !sim.step() {
            bail!("nothing can move at {} ns", sim.now());
        }
        let now = sim.now();
        ensure!(
            now - proposed <= TIMEOUT_NS,
            "no decision after {TIMEOUT_NS} ns"
        );
        // A CPU step of the leader moves its ready time: then it executed `pending`.
        if sim.machine().threads[leader].ready == ready {
            watch_completions(sim, leader, &mut watch);
            continue;
        }
        if let Next::Pending(op) = &pending {
            watch.executed(op, now);
        }
        watch_completions(sim, leader, &mut watch);
        let results = sim.machine_mut().threads[leader].process.take_results();
        if let Some((done, outcome)) = results.into_iter().next() {
            // One proposal at a time: the only outcome can be this one's.
            ensure!(done == id, "an outcome for proposal {done}, not {id}");
            return match outcome {
                Ok(_slot) => Ok((now, watch)),
                Err(e) => bail!("proposal {id}: {e}"),
            };
        }
    }
}

/// Notes the accept CASes that completed in the last step.
fn watch_completions(sim: &Simulator<Replica>, leader: usize, watch: &mut Watch) {
    let now = sim.now();
    for cas in watch.cas.iter_mut().flatten() {
        if cas.2.is_none() && !sim.machine().work_pending(leader, cas.1) {
            cas.2 = Some(now);
        }
    }
}
