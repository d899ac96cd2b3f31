//! One trial on a fabric: every node's process on its own thread, wrapped so that the
//! benchmark's thread can watch who leads and how far each node applied, and stop a node
//! (the crash) or all of them (the end).

use super::VerbsFailoverConfig;
use anyhow::anyhow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use velos_rdma::verbs::VerbsFabric;
use velos_rdma::{Batch, NodeId, Op, Process, Reply, Shared, Step};

/// What the benchmark's thread reads of a protocol's process.
pub(super) trait Observed: Process {
    /// Whether it leads now.
    fn leads(&self) -> bool;
    /// Entries it applied so far (read after every step: cheap).
    fn applied(&self) -> u64;
    /// Every entry it applied, in order: `(slot, value as hex)`.
    fn log(&self) -> Vec<(u64, String)>;
    /// When each entry of [`Observed::log`] was applied (the fabric's clock).
    fn applied_at(&self) -> &[u64];
}

/// Per node: stop, leads, entries applied.
#[derive(Debug)]
struct Board {
    halted: Vec<AtomicBool>,
    leading: Vec<AtomicBool>,
    applied: Vec<AtomicU64>,
}

/// A node's process, stopped at its next step once its `halted` flag is set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Halting<P> {
    inner: P,
    node: usize,
    board: Shared<Board>,
}

impl<P: Observed> Halting<P> {
    fn halted(&self) -> bool {
        self.board.halted[self.node].load(Ordering::SeqCst)
    }

    fn publish(&self) {
        let board = &self.board;
        board.leading[self.node].store(self.inner.leads(), Ordering::Relaxed);
        board.applied[self.node].store(self.inner.applied(), Ordering::Relaxed);
    }
}

impl<P: Observed> Process for Halting<P> {
    fn resume(&mut self, reply: Reply) -> Step {
        if self.halted() {
            return Step::Done;
        }
        let step = self.inner.resume(reply);
        self.publish();
        step
    }

    fn resume_batch(&mut self, reply: Reply, out: &mut Vec<Op>) -> Batch {
        if self.halted() {
            return Batch::Done;
        }
        let batch = self.inner.resume_batch(reply, out);
        self.publish();
        batch
    }

    fn changes_write_access(&self) -> bool {
        self.inner.changes_write_access()
    }
}

/// How a trial went: the processes as they stopped, and the crash (node, fabric clock).
pub(super) struct Finished<P> {
    pub(super) procs: Vec<P>,
    pub(super) crash: Option<(u16, u64)>,
    /// Entries the crashed leader had applied.
    pub(super) applied_before: u64,
}

fn sleep_a_little() {
    std::thread::sleep(Duration::from_micros(50));
}

/// Runs `procs` (node i's at index i) on `fabric`: once a leader applied
/// `warmup_entries`, crashes it; once a survivor applied `after_entries` more than any
/// node had at the crash (or the trial's time is up), stops every node.
pub(super) fn run<P: Observed>(
    fabric: &VerbsFabric,
    procs: Vec<P>,
    config: &VerbsFailoverConfig,
) -> anyhow::Result<Finished<P>> {
    let n = procs.len();
    let board = Shared::new(Board {
        halted: (0..n).map(|_| AtomicBool::new(false)).collect(),
        leading: (0..n).map(|_| AtomicBool::new(false)).collect(),
        applied: (0..n).map(|_| AtomicU64::new(0)).collect(),
    });
    let halting: Vec<(NodeId, Halting<P>)> = procs
        .into_iter()
        .enumerate()
        .map(|(i, inner)| {
            let node = NodeId(u16::try_from(i).expect("a few nodes"));
            let board = board.clone();
            (
                node,
                Halting {
                    inner,
                    node: i,
                    board,
                },
            )
        })
        .collect();
    let applied = |i: usize| board.applied[i].load(Ordering::Relaxed);
    let (stopped, crash, applied_before) = std::thread::scope(|s| {
        let runner = s.spawn(|| fabric.run(halting));
        let deadline = Instant::now() + config.trial_timeout;
        let leader = loop {
            let ready = (0..n).find(|&i| {
                board.leading[i].load(Ordering::Relaxed) && applied(i) >= config.warmup_entries
            });
            if ready.is_some() || Instant::now() >= deadline || runner.is_finished() {
                break ready;
            }
            sleep_a_little();
        };
        let mut crash = None;
        let mut applied_before = 0;
        if let Some(l) = leader {
            board.halted[l].store(true, Ordering::SeqCst);
            let crash_ns = fabric.clock_ns();
            applied_before = applied(l);
            crash = Some((l as u16, crash_ns));
            let before = (0..n).map(applied).max().unwrap_or(0);
            let deadline = Instant::now() + config.trial_timeout;
            while (0..n).filter(|&i| i != l).map(applied).max().unwrap_or(0)
                < before + config.after_entries
                && Instant::now() < deadline
                && !runner.is_finished()
            {
                sleep_a_little();
            }
        }
        for halted in &board.halted {
            halted.store(true, Ordering::SeqCst);
        }
        let stopped = runner
            .join()
            .map_err(|_| anyhow!("a node's thread panicked"))
            .and_then(|r| r.map_err(|e| anyhow!("the fabric: {e}")));
        (stopped, crash, applied_before)
    });
    let procs: Vec<P> = stopped?.into_iter().map(|h| h.inner).collect();
    assert_eq!(procs.len(), n, "every node's process came back");
    Ok(Finished {
        procs,
        crash,
        applied_before,
    })
}
