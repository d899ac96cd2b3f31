//! The totals over the tests of one invocation (`velos litmus`'s summary line), read from
//! each test's [`Report`] and its real backend's [`RealReport`](super::RealReport).

use super::run::Report;
use serde::Serialize;

/// Totals over the tests of one invocation: the summary line.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    /// Tests that passed (and ran on the real backend, if one was asked for).
    pub passed: usize,
    /// Tests that failed.
    pub failed: usize,
    /// Tests that passed on the model but that the real backend skipped.
    pub skipped: usize,
    /// The real backend, if one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<&'static str>,
    /// Real executions completed.
    pub runs: u64,
    /// The model's outcomes, over the tests the real backend ran.
    pub allowed: usize,
    /// How many of them the real backend observed.
    pub covered: usize,
    /// Distinct forbidden outcomes observed.
    pub forbidden: usize,
    /// Tests whose executions failed with an RDMA error.
    pub run_failures: usize,
    /// Tests the real backend ran whose `exists` condition the model allows.
    pub exists_allowed: usize,
    /// How many of them showed it.
    pub exists_seen: usize,
}

impl Totals {
    /// Counts one test's report.
    pub fn add(&mut self, report: &Report) {
        let skipped = report.real.as_ref().is_some_and(|r| r.skipped.is_some());
        match (report.pass, skipped) {
            (false, _) => self.failed += 1,
            (true, true) => self.skipped += 1,
            (true, false) => self.passed += 1,
        }
        let Some(real) = &report.real else { return };
        self.backend = Some(real.backend);
        if real.skipped.is_some() {
            return;
        }
        self.runs += real.runs;
        self.allowed += real.allowed;
        self.covered += real.covered;
        self.forbidden += real.forbidden.len();
        self.run_failures += usize::from(real.failure.is_some());
        if report.verdict == "allowed" {
            self.exists_allowed += 1;
            self.exists_seen += usize::from(real.exists_runs > 0);
        }
    }

    /// The summary line: `N passed, N failed`, and on a real backend what it showed.
    pub fn line(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed, self.failed);
        if let Some(backend) = self.backend {
            s += &format!(
                ", {} skipped; {backend}: {} runs, observed {} of {} allowed outcomes, \
                 {} forbidden, exists held in {} of {} tests that allow it, {} tests with failed runs",
                self.skipped,
                self.runs,
                self.covered,
                self.allowed,
                self.forbidden,
                self.exists_seen,
                self.exists_allowed,
                self.run_failures
            );
        }
        s
    }
}
