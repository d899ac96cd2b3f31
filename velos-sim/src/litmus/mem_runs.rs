//! Randomised real executions of a litmus test on the in-process backend.

use super::compile::{Outcome, Program, project};
use super::run::{MemReport, RunOptions, named};
use std::collections::BTreeSet;
use velos_rdma::mem::{MemFabric, MemOptions, Mode};

/// Runs `options.runs` executions, alternating inline and NIC-worker mode with a fresh
/// jitter seed each, and compares every outcome with the model's `allowed` set.
pub(crate) fn run_mem(
    program: &Program,
    allowed: &BTreeSet<Outcome>,
    options: &RunOptions,
) -> MemReport {
    let mut observed = BTreeSet::new();
    for run in 0..options.runs {
        let mode = if run % 2 == 0 {
            Mode::Worker
        } else {
            Mode::Inline
        };
        let jitter = Some(options.seed.wrapping_mul(0x9E37_79B9).wrapping_add(run));
        let fabric = MemFabric::with_options(program.layout.clone(), MemOptions { mode, jitter });
        for &(loc, value) in &program.init {
            fabric
                .write(loc, value)
                .expect("compiled locations are in the layout");
        }
        let finals = fabric.run(program.threads.clone());
        let outcome = project(
            &program.observed,
            |loc| {
                fabric
                    .read(loc)
                    .expect("compiled locations are in the layout")
            },
            |t| finals[t].regs.clone(),
        );
        observed.insert(outcome);
    }
    let forbidden = observed
        .iter()
        .filter(|o| !allowed.contains(*o))
        .map(|o| named(program, o))
        .collect();
    MemReport {
        runs: options.runs,
        observed: observed.iter().map(|o| named(program, o)).collect(),
        forbidden,
    }
}
