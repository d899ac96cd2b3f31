//! Velos's decision latency on the simulated cluster: a stable leader (replica 0), one
//! proposal at a time. Each proposal is handed to the leader between two steps with
//! [`Replica::propose`]; its decision is the step after which [`Replica::take_results`]
//! reports it. The leader's own operations are watched on the way, which splits the
//! latency into phases (see [`Phases`]). The leader's replica runs inside a
//! [`Recorded`], so that its inputs can be replayed afterwards to charge the engine's own
//! CPU on each decision's critical path (see [`cpu`](super::cpu)).

use super::cpu::{Input, Recorded, Tape, Window};
use super::{LatencyConfig, Measured, Phases};
use anyhow::{Context, bail, ensure};
use velos_core::log::{LogConfig, Replica};
use velos_rdma::{NodeId, Op, Shared, WorkId};
use velos_sim::machine::{Machine, Next};
use velos_sim::simulate::{Simulator, Stop};
use velos_testkit::harness::cluster::{self, ClusterSpec, ReplicaReport};
use velos_testkit::harness::script::ClientScript;

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
    /// The leader's recorded inputs on the way: (input index, virtual time of its step).
    steps: Vec<(usize, u64)>,
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

    /// The post and the completion of the accept CAS that made the majority.
    fn majority(&self) -> Option<(u64, u64)> {
        let mut done: Vec<(u64, u64)> = self
            .cas
            .iter()
            .filter_map(|c| c.and_then(|(posted, _, done)| done.map(|d| (d, posted))))
            .collect();
        done.sort_unstable();
        let majority = usize::from(REPLICAS) / 2 + 1;
        let &(majority_done, majority_posted) = done.get(majority - 1)?;
        Some((majority_posted, majority_done))
    }

    /// The phases, once the decision came at `decided` (the proposal at `proposed`).
    fn phases(&self, proposed: u64, decided: u64) -> Option<Phases> {
        let (majority_posted, majority_done) = self.majority()?;
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

/// Measures `config.proposals` decisions of `size`-byte values (after the warm-up ones),
/// then the engine's CPU on each one's critical path by replaying the leader's inputs
/// (see [`cpu`](super::cpu)).
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
        client: ClientScript::NONE,
        latency: config.latency.clone(),
        near_overflow: None,
        device_memory,
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
    let mut sim = Simulator::new(machine(&spec)?, cluster::sim_config(&spec));
    let stop = sim.run(config.warmup_ns, u64::MAX);
    ensure!(stop == Stop::TimeLimit, "the warm-up ended with {stop:?}");
    let leader = (0..usize::from(REPLICAS))
        .find(|&t| sim.machine().threads[t].process.replica.is_leader())
        .context("no leader after the warm-up")?;
    let mut measured = Measured::new();
    let mut proposed = Vec::with_capacity(total);
    let mut snapshot = None;
    let mut windows = Vec::with_capacity(config.proposals);
    let mut latencies = Vec::with_capacity(config.proposals);
    for i in 0..total {
        let recording = i >= config.warmup_proposals;
        let at = sim.now();
        let process = &mut sim.machine_mut().threads[leader].process;
        if i == config.warmup_proposals {
            snapshot = Some(process.replica.clone());
            process.tape = Some(Vec::new());
        }
        let value: Vec<u8> = (0..size).map(|b| (i + b) as u8).collect();
        proposed.push(value.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let id = process
            .replica
            .propose(value.clone())
            .map_err(|e| anyhow::anyhow!("proposal {i}: {e}"))?;
        let start = process.recorded();
        if let Some(tape) = &mut process.tape {
            tape.push(Input::Propose(value, id));
        }
        let (decided, watch) = decide(&mut sim, leader, id, at)
            .with_context(|| format!("proposal {i} of {size} bytes"))?;
        if recording {
            let phases = watch.phases(at, decided);
            measured.record(decided - at, phases);
            latencies.push(decided - at);
            // Without the phases the whole window counts (an upper bound).
            let majority = phases.and(watch.majority());
            windows.push(
                Window::new(start, &watch.steps, majority)
                    .with_context(|| format!("proposal {i}: no leader step recorded"))?,
            );
        }
        sim.run(sim.now() + config.gap_ns, u64::MAX);
    }
    check(&spec, &sim, &proposed)?;
    measured.steps = sim.steps();
    measured.simulated_ns = sim.now();
    measured.trace_hash = sim.trace_hash();
    let process = &mut sim.machine_mut().threads[leader].process;
    let tape = Tape {
        snapshot: snapshot.context("the recording started")?,
        inputs: process.tape.take().context("the recording started")?,
        windows,
    };
    let replayed = tape.replay(config.cpu_replays)?;
    measured.record_cpu(&latencies, &replayed, config.cpu_replays);
    Ok(measured)
}

/// The machine of `spec` (as [`cluster::machine`] builds it, without an overflow test),
/// each replica inside a [`Recorded`].
fn machine(spec: &ClusterSpec) -> anyhow::Result<Machine<Recorded>> {
    ensure!(spec.near_overflow.is_none(), "no overflow test here");
    let config = Shared::new(spec.log.clone());
    let shape = spec.log.shape();
    let mut machine = Machine::new(&shape.layout());
    for r in 0..spec.log.replicas {
        if spec.device_memory {
            for words in [shape.acceptor_words(), shape.value_buffer_words()] {
                machine
                    .set_device_memory(NodeId(r), words)
                    .map_err(|e| anyhow::anyhow!("device memory: {e}"))?;
            }
        }
    }
    for r in 0..spec.log.replicas {
        let mut replica =
            Replica::new(config.clone(), r).map_err(|e| anyhow::anyhow!("replica {r}: {e}"))?;
        replica.keep_acknowledged(); // the checks read them
        machine.spawn(NodeId(r), Recorded::new(replica));
    }
    assert_eq!(
        machine.threads.len(),
        usize::from(spec.log.replicas),
        "one thread per replica"
    );
    Ok(machine)
}

/// The safety checks of the run, against the values proposed here (the replicas' own
/// client proposed nothing).
fn check(spec: &ClusterSpec, sim: &Simulator<Recorded>, proposed: &[String]) -> anyhow::Result<()> {
    let m = sim.machine();
    let hex = |v: &[u8]| v.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let replicas: Vec<ReplicaReport> = m
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let r = &t.process.replica;
            ReplicaReport {
                id: i as u16,
                incarnation: r.incarnation(),
                crashed: !m.is_up(t.node),
                applied: r.applied.iter().map(|(s, v)| (*s, hex(v))).collect(),
                applied_at: r.applied_at.clone(),
                installs: Vec::new(),
                digest: (0, 0),
                acknowledged: r.acknowledged.clone(),
                memberships: r.memberships.iter().map(|&(s, m)| (s, m.0)).collect(),
                members: r.members_at(r.next_apply()).0,
            }
        })
        .collect();
    ensure!(
        replicas.len() == usize::from(spec.log.replicas),
        "a report per replica"
    );
    let mut failures = Vec::new();
    let checks = cluster::check(&replicas, proposed, &mut failures);
    ensure!(
        checks.values().all(|&ok| ok),
        "the run broke a check: {failures:?}"
    );
    Ok(())
}

/// Steps until the leader reports proposal `id` decided: the decision's time, and what
/// the leader did on the way.
fn decide(
    sim: &mut Simulator<Recorded>,
    leader: usize,
    id: u64,
    proposed: u64,
) -> anyhow::Result<(u64, Watch)> {
    let mut watch = Watch {
        cas: vec![None; usize::from(REPLICAS)],
        ..Watch::default()
    };
    let mut recorded = sim.machine().threads[leader].process.recorded();
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
        let process = &sim.machine().threads[leader].process;
        if process.recorded() > recorded {
            // One CPU step, one resume.
            ensure!(
                process.recorded() == recorded + 1,
                "one input per leader step"
            );
            watch.steps.push((recorded, now));
            recorded += 1;
        }
        // A CPU step of the leader moves its ready time: then it executed `pending`.
        if sim.machine().threads[leader].ready == ready {
            watch_completions(sim, leader, &mut watch);
            continue;
        }
        if let Next::Pending(op) = &pending {
            watch.executed(op, now);
        }
        watch_completions(sim, leader, &mut watch);
        let results = sim.machine_mut().threads[leader]
            .process
            .replica
            .take_results();
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
fn watch_completions(sim: &Simulator<Recorded>, leader: usize, watch: &mut Watch) {
    let now = sim.now();
    for cas in watch.cas.iter_mut().flatten() {
        if cas.2.is_none() && !sim.machine().work_pending(leader, cas.1) {
            cas.2 = Some(now);
        }
    }
}
