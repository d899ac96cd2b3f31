//! The campaign's commit-gap check: while no fault is active and some client operation
//! waits, commits must not stop for longer than a bound. A fault is active from its start
//! until [`settle_ns`] after its end (the failure detector's ceiling twice, and a client's
//! retry of a lost proposal), and so is the cluster's start (nobody leads yet); a
//! membership change — a replacement joining, catching up, starting to vote — is no
//! fault: the working leader keeps deciding through it (rule (able leader), rule (sticky
//! leader) in `paper-notes/velos.md`), so a gap there fails the run. But a replica told
//! late of a replacement cannot reach it until it is told: while the live replicas are a
//! bare majority, every majority needs that link, and the cut is a partition
//! ([`CommitGaps::partitioned`]), active until it heals.

use super::clients::RETRY_NS;
use super::scenario::{FaultPlan, Scenario, failures};

/// Whether the permanent faults of `scenario`, with its slow senders counted as failed,
/// exceed a minority of the replicas: a slow sender is then in every majority left.
fn slow_needed(scenario: &Scenario) -> bool {
    let as_failed: Vec<FaultPlan> = scenario
        .faults
        .iter()
        .map(|f| match *f {
            FaultPlan::SlowSender { replica, at_ns, .. } => FaultPlan::Crash {
                replica,
                at_ns,
                fail: false,
            },
            ref other => other.clone(),
        })
        .collect();
    failures(&as_failed) > usize::from(scenario.log.replicas - 1) / 2
}

/// The longest commit gap (ns) allowed while no fault is active, in failure timeouts: a
/// stable leader decides a slot in a few microseconds, so a gap of this length means the
/// log stopped with no fault to excuse it (a hand-over, a leader that cannot lead).
pub const GAP_FAILURE_TIMEOUTS: u64 = 2;

/// How long after a fault's end it still excuses a gap (ns): the detector's timeout
/// (its ceiling is the configured failure timeout) twice — once to suspect, once more
/// for the successor's takeover and repairs — and a client's retry of a proposal lost
/// with the old leader.
pub fn settle_ns(failure_timeout_ns: u64) -> u64 {
    2 * failure_timeout_ns + RETRY_NS
}

/// The commit-gap watch of one run.
#[derive(Clone, Debug)]
pub struct CommitGaps {
    /// Intervals `[from, to)` (ns) in which a fault excuses a gap.
    excused: Vec<(u64, u64)>,
    settle_ns: u64,
    bound_ns: u64,
    /// When commits last moved, or the last instant a gap could not be charged.
    since: u64,
    /// What had been committed then: the highest slot applied anywhere, operations done.
    seen: (u64, usize),
    /// The longest gap charged: (its start, its length).
    pub longest: (u64, u64),
    /// Gaps charged: visits with an operation waiting outside every fault's window.
    pub charged_visits: u64,
    /// Since when a partition cuts every majority of the live replicas, if one does.
    cut_since: Option<u64>,
}

impl CommitGaps {
    /// The watch for `scenario`: each planned fault's window is known now; a leader's
    /// crash after a join is added when it fires ([`CommitGaps::fault_at`]).
    pub fn new(scenario: &Scenario) -> CommitGaps {
        let settle_ns = settle_ns(scenario.log.failure_timeout_ns);
        let slow_in_every_majority = slow_needed(scenario);
        let excused = scenario
            .faults
            .iter()
            .filter_map(|f| match *f {
                FaultPlan::CrashLeader { at_ns }
                | FaultPlan::Crash { at_ns, .. }
                | FaultPlan::QueuePairError { at_ns, .. }
                | FaultPlan::Restart { at_ns, .. } => Some((at_ns, at_ns + settle_ns)),
                // Rule (deciding leader): a slow sender that leads is passed over within
                // the detector's timeouts; the others decide at full speed meanwhile —
                // unless the permanent faults leave it in every majority (its snapshots
                // then gate the ring's room, and it learns values slowly).
                FaultPlan::SlowSender {
                    at_ns, duration_ns, ..
                } => match slow_in_every_majority {
                    true => Some((at_ns, at_ns + duration_ns + settle_ns)),
                    false => Some((at_ns, at_ns + settle_ns)),
                },
                FaultPlan::Delay {
                    at_ns, duration_ns, ..
                }
                | FaultPlan::Pause {
                    at_ns, duration_ns, ..
                } => Some((at_ns, at_ns + duration_ns + settle_ns)),
                // Known only when it fires.
                FaultPlan::CrashLeaderAfterJoin { .. } => None,
            })
            // The start: nobody leads yet (the first election, a lease's first wait).
            .chain([(0, settle_ns)])
            .collect();
        CommitGaps {
            excused,
            settle_ns,
            bound_ns: GAP_FAILURE_TIMEOUTS * scenario.log.failure_timeout_ns,
            since: 0,
            seen: (0, 0),
            longest: (0, 0),
            charged_visits: 0,
            cut_since: None,
        }
    }

    /// Whether at `now` a link every majority of the live replicas needs is cut (`cut`):
    /// a replica told late of a replacement has not met it yet and the live replicas are
    /// a bare majority. The cut is active while it lasts and excuses a gap until
    /// [`settle_ns`] after it heals, as a fault does.
    pub fn partitioned(&mut self, now: u64, cut: bool) {
        match (self.cut_since, cut) {
            (None, true) => self.cut_since = Some(now),
            (Some(since), false) => {
                self.excused.push((since, now + self.settle_ns));
                self.cut_since = None;
            }
            _ => {}
        }
        assert_eq!(self.cut_since.is_some(), cut, "the cut is followed");
    }

    /// A fault not planned in advance happened at `at_ns`.
    pub fn fault_at(&mut self, at_ns: u64) {
        self.excused.push((at_ns, at_ns + self.settle_ns));
    }

    /// A visit at `now`: `applied`, the highest slot any live replica applied; `done`,
    /// the operations completed; `waiting`, whether some operation is outstanding.
    pub fn visit(&mut self, now: u64, (applied, done): (u64, usize), waiting: bool) {
        assert!(now >= self.since, "time moves forward");
        let excused =
            self.cut_since.is_some() || self.excused.iter().any(|&(a, b)| a <= now && now < b);
        if (applied, done) != self.seen || !waiting || excused {
            self.seen = (applied, done);
            self.since = now;
            return;
        }
        self.charged_visits += 1;
        let gap = now - self.since;
        if gap > self.longest.1 {
            self.longest = (self.since, gap);
        }
    }

    /// The violation, if the longest gap is over the bound.
    pub fn violation(&self) -> Option<String> {
        let (from, gap) = self.longest;
        (gap > self.bound_ns).then(|| {
            format!(
                "liveness: no commit for {gap} ns from {from} ns while operations waited and \
                 no fault was active (bound {} ns: {GAP_FAILURE_TIMEOUTS} failure timeouts)",
                self.bound_ns
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch over seed 0's scenario with its faults removed: only the start excuses.
    fn watch() -> (CommitGaps, u64, u64) {
        let mut scenario = Scenario::from_seed(0);
        scenario.faults.clear();
        let timeout = scenario.log.failure_timeout_ns;
        (CommitGaps::new(&scenario), settle_ns(timeout), timeout)
    }

    #[test]
    fn a_stall_while_an_operation_waits_fails_and_idle_or_excused_time_does_not() {
        let (mut gaps, settle, timeout) = watch();
        let bound = GAP_FAILURE_TIMEOUTS * timeout;
        // The start is excused: no commit, an operation waiting, nothing charged.
        for now in (0..settle).step_by(1_000) {
            gaps.visit(now, (0, 0), true);
        }
        assert_eq!(gaps.charged_visits, 0, "the start excuses");
        // Idle: nothing waits, nothing charged however long.
        let mut now = settle;
        for _ in 0..10 * bound / 1_000 {
            now += 1_000;
            gaps.visit(now, (0, 0), false);
        }
        assert!(gaps.violation().is_none() && gaps.charged_visits == 0);
        // Commits moving while an operation waits: gaps of 1 µs only.
        for i in 1..100 {
            now += 1_000;
            gaps.visit(now, (i, 0), true);
        }
        assert!(gaps.violation().is_none());
        // A stall longer than the bound while an operation waits: a violation.
        let stalled = now;
        while now <= stalled + bound + 1_000 {
            now += 1_000;
            gaps.visit(now, (99, 0), true);
        }
        assert!(gaps.charged_visits > 0, "premise: visits were charged");
        let v = gaps.violation().expect("the stall fails the run");
        assert!(v.starts_with("liveness: no commit for"), "{v}");
        // The same stall inside a fault's window is excused.
        let (mut excused, settle, _) = watch();
        excused.fault_at(settle);
        for now in (settle..settle + settle).step_by(1_000) {
            excused.visit(now, (5, 0), true);
        }
        assert!(excused.violation().is_none() && excused.charged_visits == 0);
    }

    #[test]
    fn a_cut_excuses_while_it_lasts_and_a_settle_after_not_longer() {
        let (mut gaps, settle, timeout) = watch();
        let bound = GAP_FAILURE_TIMEOUTS * timeout;
        // A cut from `settle` on (the start's window ends there), for ten bounds.
        let (from, heal) = (settle, settle + 10 * bound);
        let mut now = from;
        while now < heal {
            gaps.partitioned(now, true);
            gaps.visit(now, (7, 0), true);
            now += 1_000;
        }
        assert_eq!(gaps.charged_visits, 0, "the cut excuses while it lasts");
        // Healed: a settle more is excused, then the same stall is charged and fails.
        while now <= heal + settle + bound + 2_000 {
            gaps.partitioned(now, false);
            gaps.visit(now, (7, 0), true);
            now += 1_000;
        }
        assert!(
            gaps.charged_visits > 0,
            "premise: visits after the settle were charged"
        );
        assert!(
            gaps.violation().is_some(),
            "a stall past the cut's settle fails"
        );
        // Charged from the last excused visit on, a visit before the settle ends.
        let start = gaps.longest.0;
        assert!(
            start < heal + settle && start + 1_000 >= heal + settle,
            "{start}"
        );
    }
}
