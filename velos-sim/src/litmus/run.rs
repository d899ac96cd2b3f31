//! Runs litmus tests: exhaustively on the emulator, and optionally as real executions on a
//! [`RealBackend`] checked against the emulator's outcomes.

use super::ast::{Expect, LitmusTest};
use super::compile::{Program, compile, holds, named, project};
use super::mem_runs::MemBackend;
use super::parse::parse_file;
use super::program::LitmusThread;
use super::real::{FabricError, RealBackend, cannot_run, run_real};
use super::real_report::{RealReport, skipped};
use crate::explore::explore;
use crate::machine::{Machine, Mutation};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which backend runs the tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The emulator, exhaustively.
    Sim,
    /// The in-process backend: randomised real executions, each checked against the
    /// outcomes the emulator allows.
    Mem,
}

/// Options of a litmus run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The backend of [`run_file`] and [`run_test`] ([`run_file_on`] is handed its own).
    pub backend: Backend,
    /// The explorer's state budget.
    pub max_states: usize,
    /// Real executions per test (`mem` or a backend handed to [`run_file_on`]).
    pub runs: u64,
    /// Seed of the `mem` backend's jitter.
    pub seed: u64,
    /// A deliberately wrong rule (tests of the suite's power only).
    pub mutation: Option<Mutation>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            backend: Backend::Sim,
            max_states: 5_000_000,
            runs: 200,
            seed: 1,
            mutation: None,
        }
    }
}

/// What running one test established.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The test's name.
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    /// The model's verdict.
    pub verdict: &'static str,
    /// The expected verdict.
    pub expect: &'static str,
    /// Verdict equals expectation, no unallowed stuck state, and on a real backend nothing
    /// the model forbids was observed and no execution failed.
    pub pass: bool,
    /// Stuck states.
    pub stuck: usize,
    /// The model's distinct final states, projected on the condition's names.
    pub outcomes: Vec<BTreeMap<String, u64>>,
    /// States explored.
    pub states: usize,
    /// What a real backend showed, if one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real: Option<RealReport>,
}

/// A test that could not be run: a bad file or an exceeded budget. Exit status 2.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RunError(pub String);

fn expect_name(e: Expect) -> &'static str {
    match e {
        Expect::Allowed => "allowed",
        Expect::Forbidden => "forbidden",
    }
}

/// Builds the emulator's initial state for a compiled test.
pub fn initial_machine(program: &Program) -> Machine<LitmusThread> {
    let mut machine = Machine::new(&program.layout);
    for &(loc, value) in &program.init {
        machine
            .init(loc, value)
            .expect("compiled locations are in the layout");
    }
    for (node, thread) in &program.threads {
        machine.spawn(*node, thread.clone());
    }
    for &(loc, thread) in &program.private {
        machine.set_private(loc, thread);
    }
    machine
}

/// The memory the explorer's states may take, whatever `--max-states` allows: 4 GiB.
pub const MEMORY_BUDGET: usize = 4 << 30;

/// Bytes an instruction may leave pending in a state, at most (a store buffer entry, a
/// queue pair's request, write and completion), generously.
const PENDING_BYTES: usize = 256;

/// Bytes the explorer keeps per state, generously: the machine, its memory, threads and
/// queue pairs, as much pending as every instruction of every thread could leave, and
/// the index's and the graph's entry.
fn state_bytes(machine: &Machine<LitmusThread>) -> usize {
    use crate::machine::{QueuePair, ThreadState};
    use std::mem::size_of;
    let memory: usize = machine.mem.iter().map(|m| 8 * m.len()).sum();
    let threads: usize = machine
        .threads
        .iter()
        .map(|t| {
            size_of::<ThreadState<LitmusThread>>()
                + 8 * t.process.regs.len()
                + PENDING_BYTES * t.process.instructions()
        })
        .sum();
    let qps = machine.qps.len() * size_of::<QueuePair>();
    size_of::<Machine<LitmusThread>>() + memory + threads + qps + 128
}

/// Parses, compiles and runs one file on `options.backend`.
pub fn run_file(path: &Path, options: &RunOptions) -> Result<Report, RunError> {
    run_test(&read_test(path)?, path, options)
}

/// Parses, compiles and explores one file, then runs it on `backend`.
pub fn run_file_on<B: RealBackend>(
    path: &Path,
    options: &RunOptions,
    backend: &mut B,
) -> Result<Report, RunError> {
    run_test_on(&read_test(path)?, path, options, Some(backend))
}

fn read_test(path: &Path) -> Result<LitmusTest, RunError> {
    parse_file(path).map_err(RunError)
}

/// Runs one parsed test on `options.backend`.
pub fn run_test(test: &LitmusTest, path: &Path, options: &RunOptions) -> Result<Report, RunError> {
    match options.backend {
        Backend::Sim => run_test_on::<MemBackend>(test, path, options, None),
        Backend::Mem => {
            let mut backend = MemBackend { seed: options.seed };
            run_test_on(test, path, options, Some(&mut backend))
        }
    }
}

/// Explores one parsed test, then, given a backend, runs `options.runs` real executions
/// of it there (unless [`cannot_run`] says why not).
pub fn run_test_on<B: RealBackend>(
    test: &LitmusTest,
    path: &Path,
    options: &RunOptions,
    backend: Option<&mut B>,
) -> Result<Report, RunError> {
    let program = compile(test)
        .map_err(|e| RunError(format!("{}:{}: {}", path.display(), e.line, e.message)))?;
    let mut machine = initial_machine(&program);
    machine.mutation = options.mutation;
    let state_bytes = state_bytes(&machine);
    let max_states = options.max_states.min(MEMORY_BUDGET / state_bytes);
    let exploration = explore(machine, max_states, |m| {
        project(
            &program.observed,
            |loc| m.read(loc).unwrap_or(0),
            |t| m.threads[t].process.regs.clone(),
        )
    })
    .map_err(|e| {
        if max_states < options.max_states {
            RunError(format!(
                "{}: {} ({e}: the explorer's memory budget, {} MiB, holds {max_states} \
                 states of up to {state_bytes} bytes; fewer or shorter threads)",
                path.display(),
                test.name,
                MEMORY_BUDGET >> 20
            ))
        } else {
            RunError(format!(
                "{}: {} ({e}; raise --max-states)",
                path.display(),
                test.name
            ))
        }
    })?;
    let allowed = exploration
        .outcomes
        .iter()
        .any(|o| holds(&test.exists, &program.observed, o));
    let verdict = if allowed {
        Expect::Allowed
    } else {
        Expect::Forbidden
    };
    let mut pass = verdict == test.expect && (test.allow_stuck || exploration.stuck == 0);
    let real = match backend {
        None => None,
        Some(backend) => {
            let allowed = &exploration.outcomes;
            let report = match cannot_run(exploration.stuck, options.mutation.is_some()) {
                Some(reason) => skipped(backend.name(), allowed.len(), reason),
                None => run_real(backend, test, &program, allowed, options.runs).map_err(
                    |e: FabricError| RunError(format!("{}: {}: {e}", path.display(), test.name)),
                )?,
            };
            pass &= report.ok();
            Some(report)
        }
    };
    Ok(Report {
        name: test.name.clone(),
        file: path.to_path_buf(),
        verdict: expect_name(verdict),
        expect: expect_name(test.expect),
        pass,
        stuck: exploration.stuck,
        outcomes: exploration
            .outcomes
            .iter()
            .map(|o| named(&program, o))
            .collect(),
        states: exploration.states,
        real,
    })
}

/// The `.litmus` files under `path` (the file itself, or every one below a directory,
/// recursively), sorted. Symbolic links are followed, but each directory and each file
/// is taken once (by its canonical path): a link loop ends the walk there.
pub fn collect_files(path: &Path) -> Result<Vec<PathBuf>, RunError> {
    let io = |p: &Path, e: std::io::Error| RunError(format!("{}: {e}", p.display()));
    let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        if !seen.insert(std::fs::canonicalize(&dir).map_err(|e| io(&dir, e))?) {
            continue;
        }
        let entries = std::fs::read_dir(&dir).map_err(|e| io(&dir, e))?;
        for entry in entries {
            let p = entry.map_err(|e| io(&dir, e))?.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "litmus") {
                let canonical = std::fs::canonicalize(&p).map_err(|e| io(&p, e))?;
                if seen.insert(canonical) {
                    files.insert(p);
                }
            }
        }
    }
    Ok(files.into_iter().collect())
}

/// The text report of one test.
pub fn render(report: &Report) -> String {
    let mut s = String::new();
    for o in &report.outcomes {
        let fields: Vec<String> = o.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s += &format!("  outcome {}\n", fields.join(" "));
    }
    s += &format!("  states {} stuck {}\n", report.states, report.stuck);
    if let Some(real) = &report.real {
        s += &super::real_report::render_real(&report.name, real);
    }
    s += &format!(
        "RESULT {} {} expect={} stuck={} {}\n",
        report.name,
        report.verdict,
        report.expect,
        report.stuck,
        if report.pass { "PASS" } else { "FAIL" }
    );
    s
}
