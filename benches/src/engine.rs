//! The engine's own CPU per decision, for `cargo bench -p velos-bench --bench engine`: a
//! stable leader's inputs recorded over a window, then replayed into a copy of the
//! leader's replica without any backend, so that what is timed is the engine alone.
//!
//! The recording runs three [`Replica`]s round-robin on one thread over the in-process
//! backend ([`MemFabric`], remote operations executed inline by the posting replica,
//! region plans checked), so it needs no spare core and every remote operation is
//! complete when it returns — the leader's inputs are those of `velos bench embed`'s
//! leader. Its clock is virtual (50 ns per operation), so that a recording depends on
//! nothing but the code: the same inputs on every run and under a profiler. The replay ([`Recording::replay`]) checks that it retraces the run: the same
//! proposals taken, as many commands committed.

use super::op_kind::OpKind;
use super::trace::{Entries, Trace};
use anyhow::{Context, ensure};
use velos_core::log::{Detector, LogConfig, Replica};
use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{Batch, Endpoint, NodeId, Op, Process, Reply, Shared};

const REPLICAS: u16 = 3;

/// The recording's clock advances this much per operation of any replica (about 60 a
/// decision: a decision every 3 µs, near what the three replicas on one thread take), so
/// that a recording is the same however fast the machine runs it — under a profiler too,
/// which on the wall clock would see a heartbeat at nearly every decision.
const OP_NS: u64 = 50;

/// The leader's operations per decision over the recorded window, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpsPerDecision {
    /// Every operation.
    pub steps: f64,
    /// Engine calls ([`Process::resume_batch`]): a batch of operations each.
    pub calls: f64,
    /// Puts (value words and stamps).
    pub puts: f64,
    /// Remote atomics (prepare and accept CASes).
    pub atomics: f64,
    /// Gets (heartbeat and catch-up reads).
    pub gets: f64,
    /// Work requests: puts, atomics and gets, each one on a NIC.
    pub work_requests: f64,
    /// Doorbells those work requests ring, by the rule every backend counts them with
    /// (`velos_rdma::doorbell`: consecutive posts share one per queue pair).
    pub doorbells: f64,
    /// Completion tests (`Test`, `TestLoad`).
    pub tests: f64,
    /// CPU loads (local acceptor words, CAS results).
    pub loads: f64,
    /// Clock readings (one per turn).
    pub clocks: f64,
}

/// A leader's recorded window: its replica when the window started and its inputs.
#[derive(Clone, Debug)]
pub struct Recording {
    snapshot: Replica,
    /// The submitting client's entries when the window started.
    entries: Entries,
    trace: Trace,
    first_command: u64,
    /// Commands committed in the window.
    pub decisions: u64,
    /// What the leader issued over the window.
    pub ops: OpsPerDecision,
    /// The leader's operations over the window that reach its backend (every one but
    /// pauses), in order: the in-process NIC's work for [`Recording::replay_nic`].
    nic_ops: Vec<Op>,
    /// The log the run had (for the NIC replay's fabric).
    log: Shared<LogConfig>,
}

/// Commands an entry holds at most when the client submits ([`Replica::submit`]): its
/// values are 145 bytes, a tag and 16 frames of 9 bytes (as `velos bench embed`'s
/// batched runs).
pub const SUBMIT_BATCH: u32 = 16;

/// How the recording's client hands commands to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// One entry per command ([`Replica::propose`]); 8-byte values.
    Propose,
    /// Commands gathered into entries by the engine ([`Replica::submit`]); values of
    /// [`SUBMIT_BATCH`] commands.
    Submit,
}

/// The log of the recording: heartbeats every 100 µs, suspicion after 50 ms (a stable
/// leader), as `velos bench embed` runs it.
fn log_config(slots: u64, pipeline: u32, client: Client) -> anyhow::Result<LogConfig> {
    let value_bytes = match client {
        Client::Propose => 8,
        Client::Submit => 1 + 9 * SUBMIT_BATCH,
    };
    let mut c = LogConfig::new(REPLICAS, u32::try_from(slots)?, value_bytes);
    c.heartbeat_period_ns = 100_000;
    c.failure_timeout_ns = 50_000_000;
    c.detector = Detector::Fixed;
    c.catch_up_after_ns = 1_000_000;
    c.pipeline = pipeline;
    c.validate().map_err(anyhow::Error::msg)?;
    Ok(c)
}

/// Records `decisions` commits of a stable leader whose client keeps `outstanding`
/// 8-byte commands in the engine, one per entry, after `warmup` commits.
pub fn record(warmup: u64, decisions: u64, outstanding: u64) -> anyhow::Result<Recording> {
    record_with(warmup, decisions, outstanding, Client::Propose)
}

/// [`record`] with the client handing commands over as `client` says; `decisions`
/// counts commands committed.
pub fn record_with(
    warmup: u64,
    decisions: u64,
    outstanding: u64,
    client: Client,
) -> anyhow::Result<Recording> {
    ensure!(outstanding >= 1 && decisions >= 1, "at least one command");
    let slots = warmup + decisions + outstanding + 1_024;
    let log = log_config(slots, 4, client)?;
    let fabric = inline_fabric(&log)?;
    let log = Shared::new(log);
    let mut replicas = (0..REPLICAS)
        .map(|me| Replica::new(log.clone(), me))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let mut endpoints: Vec<_> = (0..REPLICAS).map(|n| fabric.endpoint(NodeId(n))).collect();
    let mut replies = vec![Reply::Start; usize::from(REPLICAS)];
    // The client has commands to the end: the window ends once it holds `decisions`
    // commits (commands commit an entry at a time when submitted).
    let total = warmup + decisions + outstanding + u64::from(SUBMIT_BATCH);
    let (mut proposed, mut committed) = (0u64, 0u64);
    let mut window: Option<(Replica, Entries, u64, u64)> = None;
    let mut entries = Entries::default();
    let mut trace = Trace::with_capacity(decisions as usize);
    let mut counts = [0u64; 8];
    let mut steps = 0u64;
    let (mut calls, mut batch) = (0u64, Vec::new());
    let mut clock = 0u64;
    let mut rung = 0u64;
    let mut nic_ops = Vec::new();
    while window
        .as_ref()
        .is_none_or(|&(_, _, _, before)| committed - before < decisions)
    {
        steps += 1;
        ensure!(
            steps < 1 << 32,
            "no progress: {committed} of {total} commits"
        );
        let recording = window.is_some();
        let leader = &mut replicas[0];
        while proposed < total && proposed - committed < outstanding && leader.is_leader() {
            let taken = match client {
                Client::Propose => {
                    let taken = leader.propose(command(proposed).to_vec()).is_ok();
                    if recording {
                        trace.propose(taken);
                    }
                    taken
                }
                Client::Submit => {
                    let at = leader.submit(&command(proposed));
                    if recording {
                        trace.submit(at.is_ok());
                    }
                    at.map(|at| entries.submitted(at)).is_ok()
                }
            };
            if !taken {
                break;
            }
            proposed += 1;
        }
        for (r, replica) in replicas.iter_mut().enumerate() {
            let reply = std::mem::replace(&mut replies[r], Reply::Done);
            if r == 0 && recording {
                trace.resume(&reply);
                calls += 1;
            }
            batch.clear();
            if replica.resume_batch(reply, &mut batch) == Batch::Done {
                anyhow::bail!("replica {r} stopped");
            }
            if r == 0 {
                for (id, result) in replica.drain_results() {
                    result.with_context(|| format!("proposal {id}"))?;
                    committed += entries.committed(id);
                }
            }
            replica.drain_committed().for_each(drop);
            for op in &batch {
                if r == 0 && recording {
                    count(&mut counts, op);
                    if !matches!(op, Op::Pause { .. }) {
                        nic_ops.push(op.clone());
                    }
                }
                // One thread: an idle pause lets the others run, no time need pass.
                clock += OP_NS;
                replies[r] = match op {
                    Op::Pause { .. } => Reply::Done,
                    Op::Now => Reply::Value(clock),
                    op => endpoints[r].execute(op),
                };
            }
        }
        if window.is_none() && committed >= warmup {
            rung = endpoints[0].work_requests().doorbells;
            window = Some((replicas[0].clone(), entries.clone(), proposed, committed));
            trace.clear();
            nic_ops.clear();
        }
    }
    let (snapshot, entries, first_command, committed_before) =
        window.context("the window started")?;
    let decisions = committed - committed_before;
    let per = |n: u64| n as f64 / decisions as f64;
    let ops = OpsPerDecision {
        steps: per(counts.iter().sum()),
        calls: per(calls),
        puts: per(counts[0]),
        atomics: per(counts[1]),
        gets: per(counts[2]),
        work_requests: per(counts[0] + counts[1] + counts[2]),
        doorbells: per(endpoints[0].work_requests().doorbells - rung),
        tests: per(counts[3]),
        loads: per(counts[4]),
        clocks: per(counts[5]),
    };
    Ok(Recording {
        snapshot,
        entries,
        trace,
        first_command,
        decisions,
        ops,
        nic_ops,
        log,
    })
}

/// The in-process fabric of `log`'s replicas: remote operations executed inline by the
/// posting thread, every node's memory reachable only as its region plan says (as
/// `velos::embed` runs them).
pub(crate) fn inline_fabric(log: &LogConfig) -> anyhow::Result<MemFabric> {
    let shape = log.shape();
    let options = MemOptions {
        mode: Mode::Inline,
        jitter: None,
    };
    MemFabric::with_plans(shape.layout(), options, shape.region_plans()).map_err(anyhow::Error::msg)
}

/// Command `n` of the recording's client: `n`'s 8 bytes.
fn command(n: u64) -> [u8; 8] {
    n.to_le_bytes()
}

fn count(counts: &mut [u64; 8], op: &Op) {
    counts[OpKind::of(op) as usize] += 1;
}

impl Recording {
    /// A copy of the leader's replica as the window found it (to replay into).
    pub fn start(&self) -> Replica {
        self.snapshot.clone()
    }

    /// Replays the window's inputs into `replica` (a [`Recording::start`]): the commands
    /// committed. Fails if the replay does not retrace the run.
    pub fn replay(&self, mut replica: Replica) -> anyhow::Result<u64> {
        let entries = self.entries.clone();
        let committed = self
            .trace
            .replay((&mut replica, entries), self.first_command, command)?;
        ensure!(
            committed == self.decisions,
            "the replay committed {committed} commands, the run {}",
            self.decisions
        );
        Ok(committed)
    }

    /// A fabric for [`Recording::replay_nic`]: the run's log, inline mode.
    pub fn nic_fabric(&self) -> anyhow::Result<MemFabric> {
        inline_fabric(&self.log)
    }

    /// Executes the leader's operations of the window, in order, on a fresh in-process
    /// fabric of the same log (inline mode, as `velos bench embed` and `velos::embed` run
    /// it): the in-process NIC's own work for the window's decisions, the part of the
    /// leader's thread that is neither the engine nor the client. The followers' memory
    /// is blank, so CASes meet other words than in the run; each still costs its post,
    /// execution and completion. `fabric` is [`Recording::nic_fabric`] (made once: its
    /// memory is the run's size); the work requests executed.
    pub fn replay_nic(&self, fabric: &MemFabric) -> anyhow::Result<u64> {
        execute_afresh(fabric, &self.nic_ops)
    }
}

/// Executes the leader's operations `ops`, in order, as node 0 of `fabric` (a fresh one):
/// the work requests posted. Fails if any operation fails there, or none was posted.
pub(crate) fn execute_afresh(fabric: &MemFabric, ops: &[Op]) -> anyhow::Result<u64> {
    let mut endpoint = fabric.endpoint(NodeId(0));
    let mut failed = 0u64;
    for op in ops {
        failed += u64::from(matches!(endpoint.execute(op), Reply::Failed(_)));
    }
    ensure!(
        failed == 0,
        "{failed} operations failed on the fresh fabric"
    );
    let posted = endpoint.work_requests().posted;
    ensure!(posted > 0, "the window posted work requests");
    Ok(posted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_retraces_the_recorded_window() {
        let loads = [
            (1, Client::Propose),
            (16, Client::Propose),
            (64, Client::Submit),
        ];
        for (outstanding, client) in loads {
            let recording = record_with(200, 500, outstanding, client).unwrap();
            assert!(recording.decisions >= 500);
            assert_eq!(
                recording.replay(recording.start()).unwrap(),
                recording.decisions
            );
            let ops = recording.ops;
            match client {
                Client::Propose => {
                    assert!(ops.atomics >= 3.0, "an accept CAS per acceptor: {ops:?}")
                }
                // Several commands to an entry: its CASes and puts shared by them.
                Client::Submit => assert!(ops.work_requests < 3.0, "{ops:?}"),
            }
            assert!(ops.work_requests >= ops.atomics + ops.puts);
            // The NIC replay posts the window's work requests again, all of them.
            let fabric = recording.nic_fabric().unwrap();
            let posted = recording.replay_nic(&fabric).unwrap();
            let expected = ops.work_requests * recording.decisions as f64;
            assert!(
                (posted as f64 - expected).abs() < 0.5,
                "{posted} posted, {expected} in the run"
            );
        }
    }
}
