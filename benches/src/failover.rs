//! The failover benchmark in virtual time (`velos bench failover`): a steady stream of
//! proposals, the leader crashes at an instant each seed draws ([`crash_instant`]), many
//! seeds; per protocol (Velos, the Mu baseline) the time from the crash to a survivor
//! suspecting the leader, to a survivor taking over, and to the next decision at a
//! surviving replica, and the decisions per 100 µs around the crash — the Velos paper's
//! Fig. 2.
//!
//! Both protocols run under the same latency profile (`paper-cx6` by default) with values
//! of the same size; each with its own run length, since Mu's failure detector takes
//! about 560–600 µs and its permission switch about 250 µs more. Velos runs with the
//! engine's default timing ([`velos_core::log::LogConfig::new`]: heartbeat 1 µs, failure
//! timeout 20 µs), Mu with its published configuration ([`velos_testkit::baseline::mu::MuConfig`]).

mod mu;
mod output;
mod plot;
mod summary;
#[cfg(test)]
mod tests;
mod velos;
pub mod verbs;

use crate::latency::Protocol;
use crate::sweep::run_jobs;
use anyhow::Context;
pub use output::{table, write_outputs};
use serde::Serialize;
use std::time::Instant;
pub use summary::{FailoverReport, ProtocolSummary, TargetCheck, TimelineBucket};
use velos_sim::latency::LatencyModel;

/// The timeline's bucket (ns): decisions per 100 µs, as in the paper's Fig. 2.
pub const BUCKET_NS: u64 = 100_000;

/// The span a seed's crash instant is drawn from, after the configured crash time (ns):
/// Mu's detector period, and about nine of Velos's decision cycles under `paper-cx6` (a
/// stable leader decides in bursts of its pipeline, one burst every 4.6 µs). A crash at the
/// same instant on every seed lands at nearly the same point of the leader's cycle (the
/// seeds' jitter moves it by tens of ns), and the failover time depends on that point —
/// whether the followers' words prove the last burst decided, or the new leader must adopt
/// it: `bench failover`'s Velos median over seeds 1–50 was 8.4 µs with the crash at 300 µs,
/// 13.7 µs at 400 µs and 9.2–10.1 µs at 200, 500–800 µs on the same build.
pub const CRASH_SPREAD_NS: u64 = 40_000;

/// When `seed`'s leader crashes: `crash_ns` plus an offset below [`CRASH_SPREAD_NS`]
/// drawn from the seed alone (the same for both protocols).
pub fn crash_instant(crash_ns: u64, seed: u64) -> u64 {
    let offset = velos_sim::rng::Rng::new(seed ^ 0xc4a5_11ed).below(CRASH_SPREAD_NS);
    assert!(offset < CRASH_SPREAD_NS, "the offset is within the spread");
    crash_ns + offset
}

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverConfig {
    /// The protocols.
    pub protocols: Vec<Protocol>,
    /// Seeds run per protocol: `first_seed`, `first_seed + 1`, ...
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Bytes per proposed value (Velos's simulated client proposes at least 10).
    pub value_bytes: u32,
    /// When Velos's leader crashes (virtual ns; a multiple of [`BUCKET_NS`]).
    pub velos_crash_ns: u64,
    /// How long Velos runs after the crash (ns).
    pub velos_after_ns: u64,
    /// When Mu's leader crashes (ns; a multiple of [`BUCKET_NS`]).
    pub mu_crash_ns: u64,
    /// How long Mu runs after the crash (ns): detection, the permission switch and the
    /// slow path must fit.
    pub mu_after_ns: u64,
    /// Step costs.
    pub latency: LatencyModel,
    /// Runs simulated at once (threads).
    #[serde(skip)]
    pub jobs: usize,
}

impl FailoverConfig {
    /// The full sweep: 200 seeds (a crash instant each, [`crash_instant`]), 10-byte values,
    /// Velos crashed from 300 µs on and run to 700 µs, Mu crashed from 500 µs on (its
    /// first leader needs about 300 µs: a permission switch) and run to 2 ms, the
    /// `paper-cx6` profile.
    pub fn full() -> FailoverConfig {
        FailoverConfig {
            protocols: Protocol::ALL.to_vec(),
            seeds: 200,
            first_seed: 1,
            value_bytes: 10,
            velos_crash_ns: 300_000,
            velos_after_ns: 400_000,
            mu_crash_ns: 500_000,
            mu_after_ns: 1_500_000,
            latency: LatencyModel::paper_cx6(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// A small sweep for tests: 3 seeds, short runs (Mu still long enough to fail over).
    pub fn quick() -> FailoverConfig {
        FailoverConfig {
            seeds: 3,
            velos_crash_ns: 100_000,
            velos_after_ns: 100_000,
            mu_crash_ns: 500_000,
            mu_after_ns: 1_000_000,
            ..FailoverConfig::full()
        }
    }

    /// The crash time and the run length of `protocol`.
    pub fn window(&self, protocol: Protocol) -> (u64, u64) {
        match protocol {
            Protocol::Velos => (self.velos_crash_ns, self.velos_after_ns),
            Protocol::Mu => (self.mu_crash_ns, self.mu_after_ns),
        }
    }

    /// Checks the configuration before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.protocols.is_empty(), "no protocol to measure");
        anyhow::ensure!((1..=10_000).contains(&self.seeds), "1 to 10000 seeds");
        anyhow::ensure!(
            self.first_seed.checked_add(self.seeds).is_some(),
            "the seeds overflow u64"
        );
        anyhow::ensure!(
            (10..=4096).contains(&self.value_bytes),
            "values of 10 bytes to 4 KiB"
        );
        for p in Protocol::ALL {
            let (crash, after) = self.window(p);
            anyhow::ensure!(
                crash >= BUCKET_NS && crash % BUCKET_NS == 0 && crash <= 100_000_000,
                "{}: the crash time must be a multiple of 100 µs, 100 µs to 100 ms",
                p.name()
            );
            anyhow::ensure!(
                (BUCKET_NS..=100_000_000).contains(&after),
                "{}: the run after the crash must be 100 µs to 100 ms",
                p.name()
            );
        }
        Ok(())
    }

    /// The command that replays `seed` of `protocol`.
    pub fn replay(&self, protocol: Protocol, seed: u64) -> String {
        let (crash, after) = self.window(protocol);
        format!(
            "velos bench failover --protocols {p} --first-seed {seed} --seeds 1 --latency {} \
             --value-bytes {} --{p}-crash-us {} --{p}-after-us {}",
            self.latency.name,
            self.value_bytes,
            crash / 1_000,
            after / 1_000,
            p = protocol.name()
        )
    }
}

/// One seed of one protocol.
#[derive(Clone, Debug, Serialize)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// The crashed leader.
    pub crashed: u16,
    /// When it crashed (ns).
    pub crash_ns: u64,
    /// Crash → the first survivor that stops trusting it (Velos: its view of the leader
    /// changes; Mu: a takeover starts, which is when its detector suspects the leader).
    pub detect_ns: Option<u64>,
    /// Crash → a survivor starts leading (Velos: a term starts; Mu: a takeover starts).
    pub takeover_ns: Option<u64>,
    /// Crash → the next decision: the first entry a survivor applies, once a survivor
    /// took over, that no replica had applied before that takeover (so the new leader's
    /// work, its recovery of the old leader's open slots included).
    pub failover_ns: Option<u64>,
    /// Crash → the first entry a survivor applies that no replica had applied before the
    /// crash, whoever decided it: the old leader's pipelined accepts still land after it
    /// hangs, and followers learn those slots without a new leader.
    pub first_apply_ns: Option<u64>,
    /// Leader changes not caused by the crash (Velos: terms started beyond the first one
    /// and the takeover after the crash; not counted for Mu).
    pub false_suspicions: Option<u64>,
    /// Entries applied per [`BUCKET_NS`] at the survivor that applied most, from time 0.
    pub timeline: Vec<u64>,
    /// Emulator steps.
    pub steps: u64,
}

impl SeedRun {
    /// The failover part common to both protocols: from what each replica applied and
    /// when (`(slots, applied_at, crashed)` per replica), the first entry a survivor
    /// applies from `from_ns` on that no replica had applied before `from_ns`, as ns
    /// after `crash_ns`.
    fn next_decision(
        applied: &[(Vec<u64>, Vec<u64>, bool)],
        crash_ns: u64,
        from_ns: u64,
    ) -> Option<u64> {
        let before = applied
            .iter()
            .flat_map(|(slots, at, _)| slots.iter().zip(at).filter(|(_, t)| **t < from_ns))
            .map(|(s, _)| *s + 1)
            .max()
            .unwrap_or(0);
        applied
            .iter()
            .filter(|(_, _, crashed)| !crashed)
            .flat_map(|(slots, at, _)| slots.iter().zip(at))
            .filter(|(s, t)| **s >= before && **t >= from_ns)
            .map(|(_, t)| t - crash_ns)
            .min()
    }

    /// Velos's detection and takeover after `leader` crashed at `crash_ns`, from the
    /// survivors' replicas (ns after the crash): the first change of a survivor's view of
    /// the leader away from it, and the first term a survivor starts.
    fn velos_times<'a>(
        survivors: impl Iterator<Item = &'a velos_core::log::Replica> + Clone,
        leader: u16,
        crash_ns: u64,
    ) -> (Option<u64>, Option<u64>) {
        let detect_ns = survivors
            .clone()
            .flat_map(|r| r.leader_changes.iter())
            .filter(|&&(t, l)| t >= crash_ns && l != leader)
            .map(|&(t, _)| t - crash_ns)
            .min();
        let takeover_ns = survivors
            .flat_map(|r| r.terms_started.iter())
            .filter(|&&t| t >= crash_ns)
            .map(|&t| t - crash_ns)
            .min();
        (detect_ns, takeover_ns)
    }

    /// Crash → the next decision once a survivor took over, `takeover_ns` after the crash:
    /// the premise of a failover is a takeover, so none without one, whatever the
    /// survivors applied (the old leader's pipelined accepts still land).
    fn failover(
        applied: &[(Vec<u64>, Vec<u64>, bool)],
        crash_ns: u64,
        takeover_ns: Option<u64>,
    ) -> Option<u64> {
        takeover_ns.and_then(|t| SeedRun::next_decision(applied, crash_ns, crash_ns + t))
    }

    /// Entries applied per bucket over `end_ns` by the survivor that applied most.
    fn timeline(applied: &[(Vec<u64>, Vec<u64>, bool)], end_ns: u64) -> Vec<u64> {
        let mut per = vec![0u64; end_ns.div_ceil(BUCKET_NS).max(1) as usize];
        if let Some((_, at, _)) = applied
            .iter()
            .filter(|(_, _, crashed)| !crashed)
            .max_by_key(|(slots, _, _)| slots.len())
        {
            for &t in at {
                let i = ((t / BUCKET_NS) as usize).min(per.len() - 1);
                per[i] += 1;
            }
        }
        per
    }
}

/// Runs the sweep, showing a progress bar over the seeds on stderr when `progress` is set.
pub fn run(config: &FailoverConfig, progress: bool) -> anyhow::Result<FailoverReport> {
    config.check()?;
    let start = Instant::now();
    let jobs: Vec<(Protocol, u64)> = config
        .protocols
        .iter()
        .flat_map(|&p| (0..config.seeds).map(move |k| (p, config.first_seed + k)))
        .collect();
    let runs = run_jobs(
        &jobs,
        config.jobs,
        progress,
        "seeds ",
        |&(protocol, seed)| format!("{} seed {seed}", protocol.name()),
        |&(protocol, seed)| {
            match protocol {
                Protocol::Velos => velos::run_seed(config, seed),
                Protocol::Mu => mu::run_seed(config, seed),
            }
            .with_context(|| {
                format!(
                    "{} seed {seed}; replay: {}",
                    protocol.name(),
                    config.replay(protocol, seed)
                )
            })
        },
    )?;
    let mut by_protocol: Vec<(Protocol, Vec<SeedRun>)> =
        config.protocols.iter().map(|&p| (p, Vec::new())).collect();
    for (&(p, _), r) in jobs.iter().zip(runs) {
        if let Some((_, v)) = by_protocol.iter_mut().find(|(q, _)| *q == p) {
            v.push(r);
        }
    }
    Ok(summary::report(
        config,
        by_protocol,
        start.elapsed().as_secs_f64(),
    ))
}
