//! The real-execution runner (`run_file_on`): on the in-process backend every suite test
//! passes with its coverage counted; wrapped backends that lie about a word, fail an
//! execution, fail a thread or have no device show that each of those is caught.

use std::path::{Path, PathBuf};
use velos_rdma::{Layout, Loc, NodeId, RdmaError, WorkId};
use velos_sim::litmus::mem_runs::MemRuns;
use velos_sim::litmus::program::LitmusThread;
use velos_sim::litmus::{
    FabricError, LitmusFabric, MemBackend, RealBackend, Report, RunOptions, Totals, collect_files,
    render, run_file_on,
};
use velos_sim::machine::Mutation;

fn suite(part: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("litmus")
        .join(part);
    collect_files(&dir).expect("the suite is readable")
}

fn fig2a() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("litmus/paper/fig2a.litmus")
}

fn options(runs: u64) -> RunOptions {
    RunOptions {
        runs,
        ..RunOptions::default()
    }
}

/// What a wrapped in-process backend does wrong.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Every word read after an execution is off by one.
    LyingRead,
    /// Execution number 3 (counted from 1) fails.
    FailThirdRun,
    /// Every thread ends with an RDMA error.
    ThreadError,
    /// No device: opening fails.
    NoDevice,
}

struct Faulty(Fault, MemBackend);
struct FaultyRuns(Fault, MemRuns, u64);

impl RealBackend for Faulty {
    type Fabric = FaultyRuns;
    fn name(&self) -> &'static str {
        "faulty"
    }
    fn open(&mut self, layout: &Layout) -> Result<FaultyRuns, FabricError> {
        if self.0 == Fault::NoDevice {
            return Err(FabricError::Unavailable("no RDMA device: test".into()));
        }
        Ok(FaultyRuns(self.0, self.1.open(layout)?, 0))
    }
}

impl LitmusFabric for FaultyRuns {
    fn reset(&mut self, run: u64) -> Result<(), FabricError> {
        self.2 = run;
        self.1.reset(run)
    }
    fn write(&mut self, loc: Loc, value: u64) -> Result<(), FabricError> {
        self.1.write(loc, value)
    }
    fn run(
        &mut self,
        threads: Vec<(NodeId, LitmusThread)>,
    ) -> Result<Vec<LitmusThread>, FabricError> {
        if self.0 == Fault::FailThirdRun && self.2 == 2 {
            return Err(FabricError::Failed("queue pair in error: test".into()));
        }
        let mut finals = self.1.run(threads)?;
        if self.0 == Fault::ThreadError {
            for t in &mut finals {
                t.error = Some(RdmaError::WorkFailed {
                    work_id: WorkId(1),
                    cause: Box::new(RdmaError::RemoteCrashed { node: NodeId(1) }),
                });
            }
        }
        Ok(finals)
    }
    fn read(&self, loc: Loc) -> Result<u64, FabricError> {
        let v = self.1.read(loc)?;
        Ok(if self.0 == Fault::LyingRead { v + 1 } else { v })
    }
}

fn faulty(fault: Fault, runs: u64) -> Report {
    let mut backend = Faulty(fault, MemBackend { seed: 3 });
    run_file_on(&fig2a(), &options(runs), &mut backend).expect("the test runs")
}

#[test]
fn the_mem_backend_passes_the_suite_with_its_coverage_counted() {
    let mut backend = MemBackend { seed: 7 };
    let mut totals = Totals::default();
    for part in ["paper", "loopback", "rules", "locks"] {
        for file in suite(part) {
            let report = run_file_on(&file, &options(20), &mut backend).expect("runs");
            let real = report.real.as_ref().expect("the backend ran");
            assert!(report.pass, "{}: {real:?}", file.display());
            assert_eq!((real.backend, real.runs), ("mem", 20));
            assert!(real.forbidden.is_empty() && real.failure.is_none());
            assert!(real.covered >= 1 && real.covered <= real.allowed);
            assert_eq!(real.covered + real.not_seen.len(), real.allowed);
            assert_eq!(real.observed.iter().map(|s| s.runs).sum::<u64>(), 20);
            assert!(render(&report).contains("  coverage "));
            totals.add(&report);
        }
    }
    assert_eq!((totals.failed, totals.skipped, totals.forbidden), (0, 0, 0));
    assert!(totals.passed > 40 && totals.covered <= totals.allowed);
    assert!(
        totals
            .line()
            .contains(" passed, 0 failed, 0 skipped; mem: ")
    );
}

#[test]
fn a_forbidden_outcome_fails_the_test() {
    let report = faulty(Fault::LyingRead, 10);
    let real = report.real.as_ref().expect("ran");
    assert!(!report.pass);
    assert!(!real.forbidden.is_empty(), "{real:?}");
    assert!(render(&report).contains("FORBIDDEN OUTCOME OBSERVED on faulty"));
    let mut totals = Totals::default();
    totals.add(&report);
    assert_eq!((totals.failed, totals.forbidden), (1, real.forbidden.len()));
}

#[test]
fn a_failed_execution_fails_the_test_with_its_error() {
    let report = faulty(Fault::FailThirdRun, 10);
    let real = report.real.as_ref().expect("ran");
    assert!(!report.pass);
    assert_eq!(real.runs, 2, "the runs before the failure count");
    let failure = real.failure.as_deref().expect("a failure");
    assert!(
        failure.starts_with("run 3: queue pair in error"),
        "{failure}"
    );
    assert!(render(&report).contains("RUN FAILED on faulty: run 3"));

    let report = faulty(Fault::ThreadError, 10);
    let failure = report.real.as_ref().and_then(|r| r.failure.clone());
    assert!(!report.pass);
    assert!(
        failure
            .as_deref()
            .is_some_and(|f| f.starts_with("run 1: thread T1: ")),
        "{failure:?}"
    );
}

#[test]
fn no_device_is_an_error_not_a_verdict() {
    let mut backend = Faulty(Fault::NoDevice, MemBackend { seed: 1 });
    let e = run_file_on(&fig2a(), &options(5), &mut backend).expect_err("no device");
    assert!(e.0.contains("no RDMA device: test"), "{e}");
}

#[test]
fn tests_a_real_backend_cannot_run_are_skipped_with_the_reason() {
    let dir = tempdir();
    let stuck = dir.join("stuck.litmus");
    let text = "litmus stuck\nnodes 1\nlock m wlock\nloc x@1\nthread T@1\n  acq m\n  acq m\n  \
                store x 1\nexists x = 1\nexpect forbidden\nallow stuck\n";
    std::fs::write(&stuck, text).expect("write");
    let mut backend = MemBackend { seed: 1 };
    let report = run_file_on(&stuck, &options(5), &mut backend).expect("runs");
    let real = report.real.as_ref().expect("reported");
    assert!(report.pass && report.stuck > 0);
    let reason = real.skipped.as_deref().expect("skipped");
    assert!(reason.contains("stuck states"), "{reason}");
    assert_eq!(real.runs, 0);
    let mut totals = Totals::default();
    totals.add(&report);
    assert_eq!((totals.passed, totals.skipped), (0, 1));

    let mutated = RunOptions {
        mutation: Some(Mutation::Rule2Weaker),
        ..options(5)
    };
    let report = run_file_on(&fig2a(), &mutated, &mut backend).expect("runs");
    let reason = report.real.and_then(|r| r.skipped).expect("skipped");
    assert!(reason.contains("mutation"), "{reason}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// A fresh directory under the system's temporary directory.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("velos-real-runs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}
