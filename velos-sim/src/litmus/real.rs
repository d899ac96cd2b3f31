//! Real executions of a compiled litmus test: the interface a backend with real threads
//! implements ([`RealBackend`], [`LitmusFabric`]), and the runner that checks every
//! outcome it observes against the model's and measures how many of the model's outcomes
//! it showed.
//!
//! The in-process backend implements it here (`mem_runs.rs`); the real-RDMA backend does
//! in the root package, which alone builds velos-rdma's `verbs` feature.

use super::ast::{Cond, LitmusTest};
use super::compile::{Outcome, Program, holds, named, project};
use super::program::LitmusThread;
use super::real_report::{RealReport, Seen};
use std::collections::{BTreeMap, BTreeSet};
use velos_rdma::{Layout, Loc, NodeId};

/// Why a real backend could not run a test.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// The backend cannot be used on this machine at all (no RDMA device): a usage
    /// error, not a failure of the test.
    #[error("{0}")]
    Unavailable(String),
    /// Opening the fabric or an execution failed (an RDMA error): the test fails.
    #[error("{0}")]
    Failed(String),
}

/// A fabric of real threads over one test's layout, reused by the test's executions.
pub trait LitmusFabric {
    /// Gets ready for execution number `run` (counted from 0): every word of the layout
    /// back to 0.
    fn reset(&mut self, run: u64) -> Result<(), FabricError>;
    /// Sets a word before the execution.
    fn write(&mut self, loc: Loc, value: u64) -> Result<(), FabricError>;
    /// Runs the threads together, each on its node, until every one has finished and
    /// every operation it posted has completed; returns them in the given order.
    fn run(
        &mut self,
        threads: Vec<(NodeId, LitmusThread)>,
    ) -> Result<Vec<LitmusThread>, FabricError>;
    /// Reads a word after the execution.
    fn read(&self, loc: Loc) -> Result<u64, FabricError>;
}

/// A kind of real backend: it opens one [`LitmusFabric`] per test.
pub trait RealBackend {
    /// What it opens.
    type Fabric: LitmusFabric;
    /// Its name in reports: `mem`, `verbs`.
    fn name(&self) -> &'static str;
    /// A fabric with every word of `layout`.
    fn open(&mut self, layout: &Layout) -> Result<Self::Fabric, FabricError>;
}

/// Every word of a layout, node by node (for [`LitmusFabric::reset`]).
pub fn every_word(layout: &Layout) -> impl Iterator<Item = Loc> + '_ {
    layout
        .node_ids()
        .flat_map(move |node| (0..layout.words(node)).map(move |word| Loc::word(node, word)))
}

/// Why a real backend cannot run a test, if it cannot: the model's stuck states (a real
/// execution could spin forever), or a rule mutation (it changes only the model).
pub fn cannot_run(stuck: usize, mutated: bool) -> Option<String> {
    if mutated {
        Some("a rule mutation changes only the model".into())
    } else if stuck > 0 {
        Some(format!(
            "the model has {stuck} stuck states: a real execution may never end"
        ))
    } else {
        None
    }
}

/// Runs `runs` executions of `program` on one fabric of `backend` and compares every
/// outcome with `allowed`, the model's. An RDMA error ends the test's executions and is
/// reported in [`RealReport::failure`]; only [`FabricError::Unavailable`] is returned.
pub fn run_real<B: RealBackend>(
    backend: &mut B,
    test: &LitmusTest,
    program: &Program,
    allowed: &BTreeSet<Outcome>,
    runs: u64,
) -> Result<RealReport, FabricError> {
    let mut counts: BTreeMap<Outcome, u64> = BTreeMap::new();
    let mut done = 0;
    let failure = match backend.open(&program.layout) {
        Err(FabricError::Failed(e)) => Some(format!("opening the fabric: {e}")),
        Err(unavailable) => return Err(unavailable),
        Ok(mut fabric) => loop {
            if done == runs {
                break None;
            }
            match execute(&mut fabric, test, program, done) {
                Ok(outcome) => *counts.entry(outcome).or_default() += 1,
                Err(FabricError::Failed(e)) => break Some(format!("run {}: {e}", done + 1)),
                Err(unavailable) => return Err(unavailable),
            }
            done += 1;
        },
    };
    Ok(report(
        backend.name(),
        program,
        &test.exists,
        allowed,
        &counts,
        done,
        failure,
    ))
}

/// One execution: reset, initial values, the threads, the outcome.
fn execute<F: LitmusFabric>(
    fabric: &mut F,
    test: &LitmusTest,
    program: &Program,
    run: u64,
) -> Result<Outcome, FabricError> {
    fabric.reset(run)?;
    for &(loc, value) in &program.init {
        fabric.write(loc, value)?;
    }
    let finals = fabric.run(program.threads.clone())?;
    if finals.len() != program.threads.len() {
        return Err(FabricError::Failed(format!(
            "{} threads ran, {} came back",
            program.threads.len(),
            finals.len()
        )));
    }
    for (thread, final_state) in test.threads.iter().zip(&finals) {
        if let Some(e) = &final_state.error {
            return Err(FabricError::Failed(format!("thread {}: {e}", thread.name)));
        }
    }
    let mut words = BTreeMap::new();
    for o in &program.observed {
        if let super::compile::Source::Mem(loc) = o.source {
            words.insert(loc, fabric.read(loc)?);
        }
    }
    Ok(project(
        &program.observed,
        |loc| words[&loc],
        |t| finals[t].regs.clone(),
    ))
}

fn report(
    backend: &'static str,
    program: &Program,
    exists: &Cond,
    allowed: &BTreeSet<Outcome>,
    counts: &BTreeMap<Outcome, u64>,
    runs: u64,
    failure: Option<String>,
) -> RealReport {
    RealReport {
        backend,
        runs,
        observed: counts
            .iter()
            .map(|(o, &runs)| Seen {
                outcome: named(program, o),
                runs,
            })
            .collect(),
        forbidden: counts
            .keys()
            .filter(|o| !allowed.contains(*o))
            .map(|o| named(program, o))
            .collect(),
        allowed: allowed.len(),
        covered: allowed.iter().filter(|o| counts.contains_key(*o)).count(),
        not_seen: allowed
            .iter()
            .filter(|o| !counts.contains_key(*o))
            .map(|o| named(program, o))
            .collect(),
        exists_runs: counts
            .iter()
            .filter(|(o, _)| holds(exists, &program.observed, o))
            .map(|(_, &n)| n)
            .sum(),
        failure,
        skipped: None,
    }
}
