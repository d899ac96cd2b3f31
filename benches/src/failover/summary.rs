//! What the failover benchmark reports: per protocol the medians and p99s over seeds, the
//! mean timeline around the crash, the targets.

use super::{BUCKET_NS, FailoverConfig, SeedRun};
use crate::latency::Protocol;
use serde::Serialize;

/// One bucket of the mean timeline.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineBucket {
    /// Its start relative to the crash (µs; negative before it).
    pub from_us: f64,
    /// Entries applied in it at a survivor, mean over the seeds.
    pub mean: f64,
}

/// One protocol over every seed. Times in µs (virtual); `None` when no seed had one.
#[derive(Clone, Debug, Serialize)]
pub struct ProtocolSummary {
    /// The protocol's name.
    pub protocol: &'static str,
    /// Crash → a survivor suspects the leader: median.
    pub detect_us: Option<f64>,
    /// The same, 99th percentile.
    pub detect_p99_us: Option<f64>,
    /// Crash → a survivor starts leading: median.
    pub takeover_us: Option<f64>,
    /// Crash → the next decision at a survivor: median.
    pub failover_us: Option<f64>,
    /// The same, 99th percentile.
    pub failover_p99_us: Option<f64>,
    /// The same, shortest and longest.
    pub failover_min_us: Option<f64>,
    /// Longest.
    pub failover_max_us: Option<f64>,
    /// Crash → the first entry applied at a survivor that no replica had applied before
    /// the crash, whoever decided it: median.
    pub first_apply_us: Option<f64>,
    /// Seeds without a decision after the crash within the run.
    pub no_failover: u64,
    /// Leader changes no crash caused, over all seeds (Velos only).
    pub false_suspicions: Option<u64>,
    /// Seeds with at least one of them.
    pub seeds_with_false_suspicions: Option<u64>,
    /// Entries per 100 µs before the crash (mean over the seeds and the last two buckets
    /// before the crash, never the first, which holds the start).
    pub steady_per_100us: f64,
    /// Entries per 100 µs around the crash.
    pub timeline: Vec<TimelineBucket>,
    /// Every seed.
    pub runs: Vec<SeedRun>,
}

/// A target, reported, never asserted.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// What is measured.
    pub name: String,
    /// The measured value.
    pub value: Option<f64>,
    /// The target.
    pub target: f64,
    /// Whether it is met.
    pub met: bool,
    /// By how much it is missed (same unit; 0 when met).
    pub missed_by: Option<f64>,
    /// The target's premise when it did not hold: a seed ran without failing over, so
    /// the medians leave it out. The target then fails, whatever the value.
    pub premise_missing: Option<String>,
}

/// Everything the sweep measured.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverReport {
    /// What was measured.
    pub config: FailoverConfig,
    /// Velos, if measured.
    pub velos: Option<ProtocolSummary>,
    /// Mu, if measured.
    pub mu: Option<ProtocolSummary>,
    /// Mu's median failover over Velos's.
    pub ratio_mu_over_velos: Option<f64>,
    /// Velos failover ≤ 20 µs; Mu/Velos ≥ 40.
    pub targets: Vec<TargetCheck>,
    /// How the times are measured.
    pub notes: Vec<String>,
    /// Wall time of the sweep (s).
    pub wall_seconds: f64,
}

impl FailoverReport {
    /// The targets whose premise did not hold, one line each: the command fails on them.
    pub fn missing_premises(&self) -> Vec<String> {
        self.targets
            .iter()
            .filter_map(|t| {
                Some(format!(
                    "target {}: {}",
                    t.name,
                    t.premise_missing.as_ref()?
                ))
            })
            .collect()
    }
}

/// The premise of a target on `s`'s failover times: every seed failed over (a median over
/// the seeds that did says nothing of those that did not). What is missing, if anything.
fn premise_missing(s: &ProtocolSummary) -> Option<String> {
    (s.runs.is_empty() || s.no_failover > 0).then(|| {
        format!(
            "{}: {} of {} seeds measured no failover",
            s.protocol,
            s.no_failover,
            s.runs.len()
        )
    })
}

/// The `q` quantile (nearest rank) of `ns`, in µs.
pub(super) fn quantile_us(ns: &[u64], q: f64) -> Option<f64> {
    let mut v = ns.to_vec();
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).map(|&x| x as f64 / 1e3)
}

fn summarise(config: &FailoverConfig, protocol: Protocol, runs: Vec<SeedRun>) -> ProtocolSummary {
    let detect: Vec<u64> = runs.iter().filter_map(|r| r.detect_ns).collect();
    let takeover: Vec<u64> = runs.iter().filter_map(|r| r.takeover_ns).collect();
    let failover: Vec<u64> = runs.iter().filter_map(|r| r.failover_ns).collect();
    let first_apply: Vec<u64> = runs.iter().filter_map(|r| r.first_apply_ns).collect();
    let false_counts: Vec<u64> = runs.iter().filter_map(|r| r.false_suspicions).collect();
    let (crash_at, _) = config.window(protocol);
    let buckets = runs.iter().map(|r| r.timeline.len()).max().unwrap_or(0);
    let n = runs.len().max(1) as f64;
    let timeline: Vec<TimelineBucket> = (0..buckets)
        .map(|i| TimelineBucket {
            from_us: (i as f64 * BUCKET_NS as f64 - crash_at as f64) / 1e3,
            mean: runs
                .iter()
                .map(|r| r.timeline.get(i).copied().unwrap_or(0) as f64)
                .sum::<f64>()
                / n,
        })
        .collect();
    let before = (crash_at / BUCKET_NS) as usize;
    let steady: Vec<f64> = timeline
        .iter()
        .take(before)
        .skip(before.saturating_sub(2).max(1))
        .map(|b| b.mean)
        .collect();
    ProtocolSummary {
        protocol: protocol.name(),
        detect_us: quantile_us(&detect, 0.5),
        detect_p99_us: quantile_us(&detect, 0.99),
        takeover_us: quantile_us(&takeover, 0.5),
        failover_us: quantile_us(&failover, 0.5),
        failover_p99_us: quantile_us(&failover, 0.99),
        failover_min_us: quantile_us(&failover, 0.0),
        failover_max_us: quantile_us(&failover, 1.0),
        first_apply_us: quantile_us(&first_apply, 0.5),
        no_failover: (runs.len() - failover.len()) as u64,
        false_suspicions: (!false_counts.is_empty()).then(|| false_counts.iter().sum()),
        seeds_with_false_suspicions: (!false_counts.is_empty())
            .then(|| false_counts.iter().filter(|&&c| c > 0).count() as u64),
        steady_per_100us: if steady.is_empty() {
            timeline.first().map_or(0.0, |b| b.mean)
        } else {
            steady.iter().sum::<f64>() / steady.len() as f64
        },
        timeline,
        runs,
    }
}

/// The report of the runs of each protocol.
pub(super) fn report(
    config: &FailoverConfig,
    runs: Vec<(Protocol, Vec<SeedRun>)>,
    wall_seconds: f64,
) -> FailoverReport {
    let (mut velos, mut mu) = (None, None);
    for (p, r) in runs {
        let s = Some(summarise(config, p, r));
        match p {
            Protocol::Velos => velos = s,
            Protocol::Mu => mu = s,
        }
    }
    let velos_failover = velos.as_ref().and_then(|s| s.failover_us);
    let ratio = velos_failover
        .zip(mu.as_ref().and_then(|s| s.failover_us))
        .map(|(v, m)| m / v.max(1e-3));
    let mut targets = Vec::new();
    if let Some(v) = &velos {
        let premise = premise_missing(v);
        let met = premise.is_none() && velos_failover.is_some_and(|v| v <= 20.0);
        targets.push(TargetCheck {
            name: "velos failover (median, µs) <= 20".into(),
            value: velos_failover,
            target: 20.0,
            met,
            missed_by: velos_failover.map(|v| (v - 20.0).max(0.0)),
            premise_missing: premise,
        });
    }
    if let (Some(v), Some(m)) = (&velos, &mu) {
        let premise = premise_missing(v).or_else(|| premise_missing(m));
        targets.push(TargetCheck {
            name: "mu failover / velos failover (medians) >= 40".into(),
            value: ratio,
            target: 40.0,
            met: premise.is_none() && ratio.is_some_and(|r| r >= 40.0),
            missed_by: ratio.map(|r| (40.0 - r).max(0.0)),
            premise_missing: premise,
        });
    }
    let notes = vec![
        "detect: crash → the first survivor that stops trusting the leader (Velos: its view \
         of the leader changes; Mu: a takeover starts, when its detector suspects the leader)"
            .into(),
        "failover: crash → the first entry a survivor applies, once a survivor took over, \
         that no replica had applied before that takeover (first apply: the same from the \
         crash on, whoever decided it — the old leader's pipelined accepts still land)"
            .into(),
        "timeline: entries applied per 100 µs at the survivor that applied most, mean over \
         the seeds"
            .into(),
        "false suspicions (Velos): terms started beyond the first leader's and the one \
         taking over after the crash"
            .into(),
    ];
    FailoverReport {
        config: config.clone(),
        velos,
        mu,
        ratio_mu_over_velos: ratio,
        targets,
        notes,
        wall_seconds,
    }
}
