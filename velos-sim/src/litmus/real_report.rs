//! What a real backend showed for a test ([`RealReport`]), its text form, and the totals
//! over a suite.

use serde::Serialize;
use std::collections::BTreeMap;

/// An outcome a real backend showed, and in how many executions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Seen {
    /// The final state, projected on the condition's names.
    pub outcome: BTreeMap<String, u64>,
    /// Executions that ended in it.
    pub runs: u64,
}

/// What a real backend showed for one test.
#[derive(Clone, Debug, Serialize)]
pub struct RealReport {
    /// The backend: `mem`, `verbs`.
    pub backend: &'static str,
    /// Executions completed.
    pub runs: u64,
    /// Distinct outcomes observed.
    pub observed: Vec<Seen>,
    /// Observed outcomes the model does not allow (must be empty).
    pub forbidden: Vec<BTreeMap<String, u64>>,
    /// The model's outcomes (its allowed final states).
    pub allowed: usize,
    /// How many of them were observed: the coverage.
    pub covered: usize,
    /// The model's outcomes never observed.
    pub not_seen: Vec<BTreeMap<String, u64>>,
    /// Executions whose outcome satisfies the `exists` condition.
    pub exists_runs: u64,
    /// The execution that failed (an RDMA error), if one did; later ones were not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Why the backend did not run the test, if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl RealReport {
    /// Nothing forbidden was observed and no execution failed (a skipped test passes).
    pub fn ok(&self) -> bool {
        self.forbidden.is_empty() && self.failure.is_none()
    }
}

/// The report of a test the backend did not run, and why.
pub fn skipped(backend: &'static str, allowed: usize, reason: String) -> RealReport {
    RealReport {
        backend,
        runs: 0,
        observed: Vec::new(),
        forbidden: Vec::new(),
        allowed,
        covered: 0,
        not_seen: Vec::new(),
        exists_runs: 0,
        failure: None,
        skipped: Some(reason),
    }
}

fn fields(outcome: &BTreeMap<String, u64>) -> String {
    let fields: Vec<String> = outcome.iter().map(|(k, v)| format!("{k}={v}")).collect();
    fields.join(" ")
}

/// The text lines of a real backend's report on test `name`.
pub fn render_real(name: &str, real: &RealReport) -> String {
    let backend = real.backend;
    if let Some(reason) = &real.skipped {
        return format!("  {backend} skipped {name}: {reason}\n");
    }
    let mut s = format!(
        "  {backend} runs {} observed {} forbidden {}\n",
        real.runs,
        real.observed.len(),
        real.forbidden.len()
    );
    for seen in &real.observed {
        s += &format!(
            "  {backend} seen {} ({} runs)\n",
            fields(&seen.outcome),
            seen.runs
        );
    }
    let not_seen: Vec<String> = real.not_seen.iter().map(fields).collect();
    s += &format!(
        "  coverage {name}: observed {} of {} allowed outcomes in {} runs (exists held in {}){}\n",
        real.covered,
        real.allowed,
        real.runs,
        real.exists_runs,
        if not_seen.is_empty() {
            String::new()
        } else {
            format!("; not seen: {}", not_seen.join(" | "))
        }
    );
    for o in &real.forbidden {
        s += &format!("  FORBIDDEN OUTCOME OBSERVED on {backend}: {}\n", fields(o));
    }
    if let Some(failure) = &real.failure {
        s += &format!("  RUN FAILED on {backend}: {failure}\n");
    }
    s
}
