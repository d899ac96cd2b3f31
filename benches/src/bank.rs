//! `velos bench bank`: a bank service written against `velos::embed` alone — three
//! replicas on the in-process backend with the default configuration (a 50 ms failure
//! timeout), a 4 MiB table of accounts (so every snapshot is 4 MiB), four clients moving
//! money through exactly-once sessions (blocking ones on threads, an owned one on a tokio
//! runtime) — whose leader or a follower is crashed and, once the failover is over,
//! replaced by `Cluster::replace` while the clients keep writing.
//!
//! Per run, from the commit times the clients saw (wall clock): the crash's failover gap
//! (the last commit before the crash to the first by another replica after it); the
//! longest gap between two commits in the replacement's window (from the `replace` call to
//! its first vote, its catching up and [`BankConfig::after`] more; the failover is over
//! before it opens); the time to the first vote; commits per second before the crash,
//! between failover and replacement, and during the window; the longest gap in a window as
//! long before the crash (the noise floor) and over the whole run. Checks: every answer
//! is the one a sequential model gives, no command applied twice or skipped, the total of
//! the balances unchanged, every replica's state equal at the end. A run passes only if
//! its checks pass *and* the premise holds: the replacement voted and commands were
//! committed after the `replace` call. The files: `machine.rs` (the state machine),
//! `clients.rs` (the clients and their models), `timeline.rs` (gaps and rates), `events.rs`
//! (the replicas' `tracing` events, timed), `sched.rs` (the threads' time on and off a
//! core), `run.rs` (one run).

mod clients;
mod events;
pub mod machine;
mod run;
mod sched;
#[cfg(test)]
mod tests;
mod timeline;

use serde::Serialize;
use std::time::Duration;

/// Whose place the replacement takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    /// The leader's: it is crashed, another replica leads, then a fresh process takes the
    /// crashed one's place (a lower id than the acting leader's, when replica 0 led).
    Leader,
    /// A follower's (the highest id that does not lead).
    Follower,
}

impl Place {
    /// `leader` or `follower`.
    pub fn by_name(name: &str) -> Option<Place> {
        match name {
            "leader" => Some(Place::Leader),
            "follower" => Some(Place::Follower),
            _ => None,
        }
    }
}

/// What a bank measurement runs.
#[derive(Clone, Debug, Serialize)]
pub struct BankConfig {
    /// Whose place is replaced.
    pub place: Place,
    /// Runs, each on a fresh cluster.
    pub runs: usize,
    /// The accounts table's bytes (8 per account).
    pub state_bytes: usize,
    /// Of the four clients, how many submit on the tokio runtime (the rest on threads).
    pub async_clients: usize,
    /// Clients write this long before the crash.
    #[serde(with = "millis")]
    pub before_crash: Duration,
    /// The replacement starts this long after the failover's first commit.
    #[serde(with = "millis")]
    pub settle: Duration,
    /// The window goes on this long after the replacement voted and caught up.
    #[serde(with = "millis")]
    pub after: Duration,
    /// A replacement that has not voted after this long fails the run.
    #[serde(with = "millis")]
    pub vote_timeout: Duration,
    /// The clients' random choices.
    pub seed: u64,
    /// Keep the replicas' `DEBUG` events too (every aborted attempt, the lag bound's
    /// holds); `INFO` and above are always kept.
    pub events: bool,
    /// Sample every thread's scheduler statistics (Linux), to tell the longest gap's
    /// threads waiting for a core from running.
    pub sched: bool,
}

impl Default for BankConfig {
    /// The scenario: 4 MiB of accounts, one async client of four, 2 s of writes
    /// before the crash (the log's ring has wrapped: the replacement copies a snapshot),
    /// the replacement 300 ms after the failover, 500 ms after it voted and caught up.
    fn default() -> BankConfig {
        BankConfig {
            place: Place::Leader,
            runs: 5,
            state_bytes: 4 << 20,
            async_clients: 1,
            before_crash: Duration::from_secs(2),
            settle: Duration::from_millis(300),
            after: Duration::from_millis(500),
            vote_timeout: Duration::from_secs(10),
            seed: 1,
            events: false,
            sched: false,
        }
    }
}

/// Durations as milliseconds in the JSON report.
mod millis {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }
}

/// One run's measurement and checks (times in ms).
#[derive(Clone, Debug, Default, Serialize)]
pub struct BankRun {
    /// Which run (from 0).
    pub run: usize,
    /// The replica crashed and replaced.
    pub replaced: u16,
    /// The replica that led after the failover.
    pub acting_leader: u16,
    /// The crash's failover: the last commit before it to the first by another leader.
    pub failover_gap_ms: Option<f64>,
    /// The longest gap between commits from the `replace` call until the replacement
    /// caught up (or the window's end, if it did not): while it joins.
    pub joining_gap_ms: Option<f64>,
    /// The longest gap between commits in the replacement's window.
    pub replace_gap_ms: Option<f64>,
    /// When that gap began, after the `replace` call.
    pub replace_gap_at_ms: Option<f64>,
    /// How long the `replace` call took to return.
    pub replace_call_ms: f64,
    /// From the `replace` call to the replacement's first vote.
    pub vote_ms: Option<f64>,
    /// …to the replacement applying the slots the leader had applied at the vote.
    pub caught_up_ms: Option<f64>,
    /// The longest gap in a window as long as the replacement's, before the crash.
    pub baseline_gap_ms: Option<f64>,
    /// The longest gap of the whole run (the failover's included).
    pub longest_gap_ms: Option<f64>,
    /// Commits per second in the second before the crash.
    pub rate_before: f64,
    /// …between the failover and the `replace` call.
    pub rate_between: f64,
    /// …in the replacement's window.
    pub rate_during: f64,
    /// Commits the clients saw in all.
    pub commits: u64,
    /// …in the replacement's window.
    pub commits_during: u64,
    /// Leaderships taken up in the replacement's window (0: the leader kept the lead).
    pub leader_changes_during: u64,
    /// Slots the other live replica had applied fewer than the leader at the `replace`
    /// call.
    pub follower_lag_at_replace: u64,
    /// Snapshots copied by a replica in the window.
    pub installs_during: u64,
    /// Commands applied more than once (or skipped) in any replica's state.
    pub duplicates: u64,
    /// Answers unlike the sequential model's, and final balances or counts unlike it.
    pub wrong: u64,
    /// Commits whose response was lost (counted, not checkable).
    pub responses_lost: u64,
    /// Commands sent again by the sessions.
    pub resends: u64,
    /// The replicas' `tracing` events from just before the `replace` call to the window's
    /// end, each `+ms LEVEL text` (ms after the call); at most [`EVENTS_KEPT`].
    pub events: Vec<String>,
    /// With [`BankConfig::sched`]: what each thread did during the longest gap of the
    /// replacement's window (ran, waited for a core).
    pub gap_threads: Vec<String>,
    /// With [`BankConfig::sched`]: what each thread did from the `replace` call until the
    /// replacement caught up.
    pub joining_threads: Vec<String>,
    /// What failed, one line each (premises included).
    pub failures: Vec<String>,
    /// Every check passed and the premise holds.
    pub ok: bool,
}

/// Every run, and medians and maxima.
#[derive(Clone, Debug, Serialize)]
pub struct BankReport {
    /// What ran.
    pub config: BankConfig,
    /// Per run.
    pub runs: Vec<BankRun>,
    /// `[median, max]` of the failover gaps (ms).
    pub failover_gap_ms: Option<[f64; 2]>,
    /// `[median, max]` of the longest gaps while the replacement joined (ms).
    pub joining_gap_ms: Option<[f64; 2]>,
    /// `[median, max]` of the replacement windows' longest gaps (ms).
    pub replace_gap_ms: Option<[f64; 2]>,
    /// `[median, max]` of the times to the first vote (ms).
    pub vote_ms: Option<[f64; 2]>,
    /// `[median, max]` of the baseline gaps (ms).
    pub baseline_gap_ms: Option<[f64; 2]>,
    /// Median commits per second before the crash and in the replacement's window.
    pub rate_before_median: f64,
    /// …in the replacement's window.
    pub rate_during_median: f64,
    /// Duplicates and wrong answers over every run.
    pub duplicates: u64,
    /// Wrong answers over every run.
    pub wrong: u64,
}

/// The most events a run keeps.
pub const EVENTS_KEPT: usize = 400;

/// The target: the longest commit gap a replacement causes (ms).
pub const TARGET_GAP_MS: f64 = 5.0;

/// `[median, max]` of `v`, if it has any.
fn median_max(mut v: Vec<f64>) -> Option<[f64; 2]> {
    v.sort_by(f64::total_cmp);
    Some([*v.get(v.len() / 2)?, *v.last()?])
}

/// Runs `config.runs` runs, one after another, each on a fresh cluster; `each` sees each
/// run as it ends.
pub fn measure(config: &BankConfig, mut each: impl FnMut(&BankRun)) -> anyhow::Result<BankReport> {
    anyhow::ensure!(config.runs > 0, "at least one run");
    anyhow::ensure!(
        config.async_clients <= machine::CLIENTS,
        "at most {} async clients",
        machine::CLIENTS
    );
    let mut runs = Vec::with_capacity(config.runs);
    for i in 0..config.runs {
        let run = run::run(config, i)?;
        each(&run);
        runs.push(run);
    }
    let of = |f: fn(&BankRun) -> Option<f64>| median_max(runs.iter().filter_map(f).collect());
    let rates = |f: fn(&BankRun) -> f64| median_max(runs.iter().map(f).collect());
    let report = BankReport {
        config: config.clone(),
        failover_gap_ms: of(|r| r.failover_gap_ms),
        joining_gap_ms: of(|r| r.joining_gap_ms),
        replace_gap_ms: of(|r| r.replace_gap_ms),
        vote_ms: of(|r| r.vote_ms),
        baseline_gap_ms: of(|r| r.baseline_gap_ms),
        rate_before_median: rates(|r| r.rate_before).map_or(0.0, |m| m[0]),
        rate_during_median: rates(|r| r.rate_during).map_or(0.0, |m| m[0]),
        duplicates: runs.iter().map(|r| r.duplicates).sum(),
        wrong: runs.iter().map(|r| r.wrong).sum(),
        runs,
    };
    assert_eq!(report.runs.len(), config.runs, "every run reported");
    Ok(report)
}
